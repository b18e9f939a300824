//! `scripts/release.sh` refuses, before it installs or builds anything, a
//! version the workspace does not name: a release is of the version the
//! packages and the changelog carry (docs/release.md). The release itself
//! (two architectures' release builds) is too long for the suite.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    thread,
    time::Duration,
};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace's version, as `Cargo.toml`'s `[workspace.package]` says.
fn workspace_version() -> String {
    let toml = fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let section = &toml[toml.find("[workspace.package]").unwrap()..];
    let line = section
        .lines()
        .find(|l| l.starts_with("version = "))
        .unwrap();
    line.trim_start_matches("version = ")
        .trim_matches('"')
        .to_string()
}

/// Runs the release script with `version`, bounded: a refusal is at once.
fn release(version: &str) -> (Option<i32>, String) {
    let child = Command::new("bash")
        .arg(workspace().join("scripts/release.sh"))
        .arg(version)
        .env_remove("FLEET_ROLE_RELEASE_WITHOUT_CHART")
        .env_remove("FLEET_ROLE_RELEASE_DIRTY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash runs scripts/release.sh");
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("scripts/release.sh {version} did not refuse within 60 s"))
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_release_script_refuses_a_version_the_workspace_does_not_name_and_makes_no_release() {
    let ours = workspace_version();
    let other = format!("{ours}9");
    let (code, err) = release(&other);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "the workspace's version (Cargo.toml) is {ours}, not {other}"
        )),
        "{err}"
    );
    assert!(!workspace().join(format!("target/release-{other}")).exists());

    let (code, err) = release("v1");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("VERSION is MAJOR.MINOR.PATCH, not 'v1'"),
        "{err}"
    );
}
