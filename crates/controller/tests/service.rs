//! `fleet-role` as a long-running service, against a real kube-apiserver
//! with the scripted fleet: it watches instead of polling, elects a leader
//! among its instances, and serves its metrics and health.

mod support;

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use kube::Client;
use support::{CONFIG, DEADLINE, Harness, three_voters};
use tokio::{io::AsyncBufReadExt, process::Child};

/// What a running child printed so far, gathered as it prints.
#[derive(Clone, Default)]
struct Printed(Arc<Mutex<String>>);

impl Printed {
    fn of(child: &mut Child) -> Self {
        let p = Printed::default();
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        {
            let p = p.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stream).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    let mut s = p.0.lock().unwrap();
                    s.push_str(&l);
                    s.push('\n');
                }
            });
        }
        p
    }

    fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }

    async fn wait_for(&self, what: &str) {
        let started = Instant::now();
        while !self.text().contains(what) {
            assert!(
                started.elapsed() < DEADLINE,
                "timed out waiting for {what:?} in:\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The reads of the objects the controller decides on, as the API server
/// counts them (`apiserver_request_total`): every LIST, and every GET of a
/// Node or a ConfigMap. A polling controller makes them every poll; a
/// watching one only when its watches start.
async fn reads(admin: &Client) -> u64 {
    let text = admin
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .expect("the API server's metrics are readable");
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| {
            let list = l.contains("verb=\"LIST\"");
            let get = l.contains("verb=\"GET\"")
                && (l.contains("resource=\"nodes\"") || l.contains("resource=\"configmaps\""));
            (list || get)
                && ["nodes", "leases", "configmaps"]
                    .iter()
                    .any(|r| l.contains(&format!("resource=\"{r}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::test]
async fn an_idle_run_reads_nothing_from_the_api_once_its_watches_have_listed() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    // Nothing changes in the fleet while the controller is watched.
    h.fleet.set(|f| f.frozen = true);
    let mut run = h.spawn(&["run"]);
    let out = Printed::of(&mut run);
    out.wait_for("idle: every voter is healthy").await;
    let before = reads(&h.admin).await;
    // Five seconds are 25 polls at the tests' poll_millis of 200.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = reads(&h.admin).await;
    assert_eq!(
        after - before,
        0,
        "the idle controller read the API {} times in 5 s:\n{}",
        after - before,
        out.text()
    );
    assert!(run.try_wait().unwrap().is_none(), "run is still running");
}
