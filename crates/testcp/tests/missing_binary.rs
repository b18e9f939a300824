//! A missing kube-apiserver binary fails loudly, with the command that builds it.

use std::process::Command;

use testcp::binaries::KUBE_APISERVER_ENV;

#[test]
fn a_missing_kube_apiserver_fails_with_the_command_that_builds_it() {
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("not-built/kube-apiserver");
    // The example `start_and_print_error` (cargo builds examples for `cargo test`).
    let helper = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/start_and_print_error");
    assert!(
        helper.is_file(),
        "{} is missing: cargo test builds it",
        helper.display()
    );
    let output = Command::new(helper)
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
