//! Prometheus's own checks, through `promtool` (Debian's `prometheus`
//! package, which scripts/prereqs.sh installs). A missing promtool fails
//! the test and says where it comes from; it never skips.

use std::{process::Stdio, time::Duration};

use tokio::{io::AsyncWriteExt, process::Command};

/// The longest one promtool run may take on a busy machine.
const BOUND: Duration = Duration::from_secs(120);

/// Runs `promtool ARGS` in `dir`, bounded, and returns what it said; a
/// failure fails the test with it.
pub async fn run(dir: &std::path::Path, args: &[&str]) -> String {
    let out = tokio::time::timeout(
        BOUND,
        Command::new("promtool")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("promtool {args:?} did not end within {BOUND:?}"))
    .unwrap_or_else(|e| {
        panic!("promtool (Debian's prometheus package; scripts/prereqs.sh installs it): {e}")
    });
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool {args:?} ({}):\n{said}",
        out.status
    );
    said
}

/// `promtool check metrics` on a scrape's body (the classic text format,
/// which a scrape without an OpenMetrics `Accept` gets): fails the test
/// with promtool's findings unless it has none.
pub async fn check_metrics(body: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            panic!("promtool (Debian's prometheus package; scripts/prereqs.sh installs it): {e}")
        });
    let mut stdin = child.stdin.take().expect("promtool's stdin");
    stdin
        .write_all(body.as_bytes())
        .await
        .expect("the scrape written to promtool");
    drop(stdin);
    let out = tokio::time::timeout(BOUND, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("promtool check metrics did not end within {BOUND:?}"))
        .expect("promtool's output");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics ({}):\n{said}\non the scrape:\n{body}",
        out.status
    );
}
