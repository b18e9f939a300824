//! Servers never outlive the test process that started them.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use testcp::ControlPlane;

/// Set for the helper run: the file where it reports its plane's temp dir.
const REPORT_ENV: &str = "TESTCP_TEARDOWN_REPORT";

/// The live (non-zombie) processes, other than this one, whose command line
/// mentions `needle` (a plane's servers and guards all mention its temp dir),
/// each as `pid program`, where a guard's program is `guard:<the server>`.
fn processes_mentioning(needle: &Path) -> Vec<String> {
    let needle = needle.to_string_lossy().into_owned();
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me {
            continue;
        }
        let (Ok(cmdline), Ok(stat)) = (
            std::fs::read(entry.path().join("cmdline")),
            std::fs::read_to_string(entry.path().join("stat")),
        ) else {
            continue; // exited while we looked
        };
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        let argv: Vec<String> = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if zombie || !argv.iter().any(|a| a.contains(&needle)) {
            continue;
        }
        // The guard and its watcher subshell: `bash -c SCRIPT testcp-guard SERVER ARGS…`.
        let program = match argv.get(3).map(String::as_str) {
            Some("testcp-guard") => format!("guard:{}", argv[4]),
            _ => argv[0].clone(),
        };
        found.push(format!("{pid} {program}"));
    }
    found
}

fn wait_until_none_mention(dir: &Path, timeout: Duration) -> Vec<String> {
    let started = clock::Clock::system().now();
    loop {
        let left = processes_mentioning(dir);
        if left.is_empty() || started.elapsed() > timeout {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn servers_die_with_the_test_process() {
    let scratch = tempfile::tempdir().unwrap();
    let report = scratch.path().join("plane-dir");
    // The example `plane_until_killed` (cargo builds examples for `cargo test`).
    let helper_bin = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/plane_until_killed");
    assert!(
        helper_bin.is_file(),
        "{} is missing: cargo test builds it",
        helper_bin.display()
    );
    let mut helper = Command::new(helper_bin)
        .env(REPORT_ENV, &report)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let started = clock::Clock::system().now();
    while !report.exists() {
        assert!(
            helper.try_wait().unwrap().is_none(),
            "the helper exited before starting its plane"
        );
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "the helper's plane did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let dir = PathBuf::from(std::fs::read_to_string(&report).unwrap());
    let running = processes_mentioning(&dir);
    let servers: Vec<_> = running.iter().filter(|p| !p.contains(" guard:")).collect();
    assert!(
        servers.iter().any(|p| p.ends_with("/kube-apiserver")),
        "{running:#?}"
    );
    assert!(servers.iter().any(|p| p.ends_with("/etcd")), "{running:#?}");

    // SIGKILL: no destructor, no panic hook, nothing of the test process runs.
    helper.kill().unwrap();
    helper.wait().unwrap();
    let left = wait_until_none_mention(&dir, Duration::from_secs(30));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        left.is_empty(),
        "still running after the test process died: {left:#?}"
    );
}

#[tokio::test]
async fn dropping_a_plane_stops_its_servers_and_deletes_its_dir() {
    let mut plane = ControlPlane::start().await.unwrap();
    plane.add_apiserver().await.unwrap();
    let dir = plane.dir().to_owned();
    let running = processes_mentioning(&dir);
    let servers = running.iter().filter(|p| !p.contains(" guard:")).count();
    assert_eq!(servers, 3, "etcd and two kube-apiservers: {running:#?}");

    drop(plane);
    assert_eq!(
        processes_mentioning(&dir),
        Vec::<String>::new(),
        "Drop waits for the servers to exit"
    );
    assert!(!dir.exists());
}
