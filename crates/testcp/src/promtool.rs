//! Prometheus's own checks, through `promtool` (Debian's `prometheus`
//! package, which scripts/prereqs.sh installs). A missing promtool fails
//! the test and says where it comes from; it never skips.

use std::{process::Stdio, time::Duration};

use tokio::{io::AsyncWriteExt, process::Command};

/// The longest one promtool run may take on a busy machine.
const BOUND: Duration = Duration::from_secs(120);

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
