//! Starts a control plane, writes its directory to the file named by
//! `TESTCP_TEARDOWN_REPORT`, and waits to be killed. `tests/teardown.rs`
//! SIGKILLs it to show that the plane's servers die with their process.

use std::{path::PathBuf, time::Duration};

#[tokio::main]
async fn main() {
    let report = PathBuf::from(
        std::env::var_os("TESTCP_TEARDOWN_REPORT")
            .expect("TESTCP_TEARDOWN_REPORT names the report file"),
    );
    let plane = testcp::ControlPlane::start()
        .await
        .expect("a control plane");
    let partial = report.with_extension("partial");
    std::fs::write(&partial, plane.dir().to_string_lossy().as_bytes()).expect("the report");
    std::fs::rename(&partial, &report).expect("the report in place");
    tokio::time::sleep(Duration::from_secs(300)).await;
}
