//! The controller package's maintainer scripts, run by `sh` as dpkg runs
//! them, with systemd's and dpkg's helpers and `fleet-role` itself stood
//! in for by scripts that record what they were asked: an upgrade restarts
//! a running controller only on a paused fleet.

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Command,
};

/// The postinst as shipped.
fn postinst() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/debian/controller/postinst");
    fs::read_to_string(p).unwrap()
}

fn stub(dir: &Path, name: &str, body: &str) {
    let p = dir.join(name);
    fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
}

/// What one run of the postinst did: the calls recorded, its stderr.
struct Ran {
    calls: String,
    stderr: String,
}

/// Runs the postinst with `args`, the service `active` or not, and
/// `fleet-role status --output json` printing `status` and exiting `code`.
fn run(args: &[&str], active: bool, status: &str, code: i32) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let systemd = dir.path().join("run-systemd-system");
    fs::create_dir_all(&bin).unwrap();
    fs::create_dir_all(&systemd).unwrap();
    let log = dir.path().join("calls");
    let record = format!("echo \"$(basename \"$0\") $*\" >> {}", log.display());
    for name in [
        "deb-systemd-helper",
        "deb-systemd-invoke",
        "systemd-sysusers",
    ] {
        stub(&bin, name, &record);
    }
    stub(
        &bin,
        "systemctl",
        &format!(
            "{record}\ncase \"$1\" in is-active) exit {} ;; esac\nexit 0",
            if active { 0 } else { 3 }
        ),
    );
    let status_file = dir.path().join("status.json");
    fs::write(&status_file, status).unwrap();
    let fleet_role: PathBuf = bin.join("fleet-role");
    stub(
        &bin,
        "fleet-role",
        &format!("{record}\ncat {}\nexit {code}", status_file.display()),
    );
    // The shipped script, pointed at the stand-ins: `fleet-role` and the
    // helpers by PATH (it names them without a path, as Debian's policy
    // asks), the one absolute path it names replaced.
    let script = postinst();
    assert!(fleet_role.is_file());
    assert!(script.contains("fleet-role --kubeconfig"), "{script}");
    assert_eq!(script.matches("/run/systemd/system").count(), 1);
    let script = script.replace("/run/systemd/system", &systemd.display().to_string());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .arg("postinst")
        .args(args)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    Ran {
        calls: fs::read_to_string(&log).unwrap_or_default(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const PAUSED: &str = r#"{"lease":{"held":false,"paused":true},"nodes":[]}"#;
const UNPAUSED: &str = r#"{"lease":{"held":false,"paused":false},"nodes":[]}"#;

#[test]
fn an_upgrade_restarts_a_running_controller_when_the_fleet_is_paused() {
    let ran = run(&["configure", "0.1.0-1"], true, PAUSED, 5);
    assert!(
        ran.calls
            .contains("deb-systemd-invoke restart fleet-role.service"),
        "{}",
        ran.calls
    );
    assert!(
        ran.calls.contains(
            "fleet-role --kubeconfig /etc/fleet-role/controller.kubeconfig status --output json"
        ),
        "{}",
        ran.calls
    );
    assert!(
        ran.stderr.contains("the fleet stays paused"),
        "{}",
        ran.stderr
    );
}

#[test]
fn an_upgrade_leaves_a_running_controller_alone_while_the_fleet_is_not_paused_or_its_pause_cannot_be_read()
 {
    for (status, code) in [
        (UNPAUSED, 0),
        ("", 3),
        ("not json", 0),
        (r#"{"lease":null}"#, 5),
    ] {
        let ran = run(&["configure", "0.1.0-1"], true, status, code);
        assert!(
            !ran.calls.contains("deb-systemd-invoke restart"),
            "{status:?}: {}",
            ran.calls
        );
        assert!(
            ran.stderr.contains("was not restarted") && ran.stderr.contains("fleet-role pause"),
            "{status:?}: {}",
            ran.stderr
        );
    }
}

#[test]
fn a_first_install_or_a_stopped_controller_is_not_started_nor_asked_about_the_fleet() {
    for (args, active) in [
        (&["configure"][..], true),
        (&["configure", "0.1.0-1"][..], false),
    ] {
        let ran = run(args, active, PAUSED, 0);
        assert!(
            !ran.calls.contains("deb-systemd-invoke"),
            "{args:?}: {}",
            ran.calls
        );
        assert!(
            !ran.calls.contains("fleet-role "),
            "{args:?}: {}",
            ran.calls
        );
        assert!(
            ran.calls.contains("systemctl --system daemon-reload"),
            "{}",
            ran.calls
        );
    }
}
