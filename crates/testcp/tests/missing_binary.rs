//! A missing kube-apiserver binary fails loudly, with the command that builds it.

use std::process::Command;

use testcp::binaries::KUBE_APISERVER_ENV;

const HELPER: &str = "helper_starts_a_plane_and_prints_the_error";

#[tokio::test]
#[ignore = "run by a_missing_kube_apiserver_fails_with_the_command_that_builds_it"]
async fn helper_starts_a_plane_and_prints_the_error() {
    if let Err(error) = testcp::ControlPlane::start().await {
        println!("start failed: {error}");
    }
}

#[test]
fn a_missing_kube_apiserver_fails_with_the_command_that_builds_it() {
    // A child process, because changing the environment of a running
    // multi-threaded test binary is a data race.
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("not-built/kube-apiserver");
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", HELPER, "--ignored", "--nocapture"])
        .env(KUBE_APISERVER_ENV, &missing)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("start failed: "), "{stdout}");
    assert!(
        stdout.contains("scripts/build-kube-apiserver.sh"),
        "{stdout}"
    );
    assert!(stdout.contains(&missing.display().to_string()), "{stdout}");
}
