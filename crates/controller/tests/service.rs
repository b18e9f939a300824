//! `fleet-role` as a long-running service, against a real kube-apiserver
//! with the scripted fleet: it watches instead of polling, elects a leader
//! among its instances, and serves its metrics and health.

mod support;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use kube::Client;
use secrecy::ExposeSecret;
use support::{CONFIG, DEADLINE, Harness, three_voters, three_voters_and_a_second_standby};
use tokio::{io::AsyncBufReadExt, process::Child};

/// Ends a running `fleet-role` as systemd does (SIGTERM) and waits for it
/// to exit at its next safe point.
async fn stop(child: &mut Child) {
    let pid = child.id().expect("running");
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("fleet-role stops on SIGTERM")
        .unwrap();
}

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
        let started = clock::Clock::system().now();
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

/// The instance id a `run` printed when it joined the election.
fn instance_of(printed: &str) -> String {
    printed
        .lines()
        .find_map(|l| l.split("instance ").nth(1)?.split(" joins").next())
        .expect("run prints its instance")
        .to_string()
}

/// Every value the regrade Lease's instance annotation took, in order,
/// sampled by a task until it is dropped.
fn instance_history(h: &Harness) -> (Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let (s, admin) = (seen.clone(), h.admin.clone());
    // A watch, not a poll: every write of the Lease is an event, so an
    // instance that held it only for a moment (on a busy machine the
    // standby may take over, finish and release between two polls) is seen.
    let task = tokio::spawn(async move {
        use futures::StreamExt;
        let api = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
            admin,
            "kube-system",
        );
        let mut events = std::pin::pin!(kube::runtime::watcher::watch_object(api, "fleet-regrade"));
        while let Some(event) = events.next().await {
            let Ok(Some(l)) = event else { continue };
            if let Some(i) = l
                .metadata
                .annotations
                .and_then(|a| a.get(&format!("{}/swap-instance", support::P)).cloned())
            {
                let mut s = s.lock().unwrap();
                if s.last() != Some(&i) {
                    s.push(i);
                }
            }
        }
    });
    (seen, task)
}

#[tokio::test]
async fn two_run_instances_elect_one_leader_and_the_standby_finishes_the_swap_when_the_leader_is_killed()
 {
    let h = Harness::start(&three_voters(), CONFIG).await;
    // The swap will be caught in its promotion until the leader is dead.
    h.fleet.set(|f| {
        f.hold.insert("promote".into());
    });
    let mut a = h.spawn(&["run"]);
    let a_out = Printed::of(&mut a);
    a_out.wait_for("leading:").await;
    let mut b = h.spawn(&["run"]);
    let b_out = Printed::of(&mut b);
    b_out.wait_for("joins the election").await;
    let (ia, ib) = (instance_of(&a_out.text()), instance_of(&b_out.text()));
    assert_ne!(ia, ib);
    let (history, sampler) = instance_history(&h);
    h.fleet.set(|f| {
        f.down.insert("n2".into());
    });
    h.wait_for("the leader to be held in the promotion", || async {
        h.lease_annotation("swap-step").await.as_deref() == Some("promote")
            && h.fleet.has_held("promote")
    })
    .await;
    assert!(
        !b_out.text().contains("leading:"),
        "the standby leads too:\n{}",
        b_out.text()
    );
    let killed = clock::Clock::system().now();
    a.start_kill().unwrap();
    a.wait().await.unwrap();
    h.fleet.set(|f| f.hold.clear());
    b_out.wait_for("leading:").await;
    let failover = killed.elapsed();
    h.wait_for("the standby to finish the swap", || async {
        h.lease_annotation("role-swap").await.is_none()
            && h.lease_annotation("last-swap").await.is_some()
    })
    .await;
    sampler.abort();
    eprintln!(
        "leader killed; the standby led {:.1} s later (leader Lease 6 s) and finished the swap {:.1} s after the kill",
        failover.as_secs_f64(),
        killed.elapsed().as_secs_f64()
    );
    let history = history.lock().unwrap().clone();
    // The swap's Lease named A, then B, and never A again: at no time did
    // both write.
    assert_eq!(history, vec![ia.clone(), ib.clone()], "{history:?}");
    assert!(b_out.text().contains("take over"), "{}", b_out.text());
    let last = h.lease_annotation("last-swap").await.unwrap();
    assert!(last.contains("\"out\":\"n2\""), "{last}");
    assert!(
        h.fleet.violations().is_empty(),
        "{:?}",
        h.fleet.violations()
    );
    // SIGTERM: the new leader steps down, releasing the leader Lease.
    let pid = b.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), b.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{}", b_out.text());
    let leader = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        h.admin.clone(),
        "platform",
    )
    .get("fleet-role-leader")
    .await
    .unwrap();
    let holder = leader
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(
        holder.is_empty(),
        "the leader Lease is still held by {holder}"
    );
}

/// A GET of `path` on `addr`: the status line and the body.
async fn get(addr: &str, path: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::TcpStream::connect(addr),
    )
    .await
    .unwrap()
    .unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut text))
        .await
        .unwrap()
        .unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[tokio::test]
async fn run_serves_its_metrics_and_health_and_counts_the_swap_it_made() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    let mut run = h.spawn(&["run", "--metrics-address", "127.0.0.1:0"]);
    let out = Printed::of(&mut run);
    out.wait_for("leading:").await;
    let addr = served_at(&out);
    assert_eq!(get(&addr, "/healthz").await.0, "HTTP/1.1 200 OK");
    assert_eq!(get(&addr, "/readyz").await.0, "HTTP/1.1 200 OK");
    // The fleet's series appear with its first observation, a moment
    // after it leads.
    let idle = metrics_show(&addr, "fleet_role_members 3").await;
    // Its ServiceAccount token's own `exp`, read from the kubeconfig's
    // token file.
    let exp = controller::cluster::jwt_expiry(h.token.expose_secret()).expect("a bound token");
    for line in [
        format!(
            "fleet_role_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        ),
        "fleet_role_leader 1".into(),
        "fleet_role_voters_healthy 3".into(),
        "fleet_role_learners 0".into(),
        "fleet_role_members 3".into(),
        "fleet_role_ghost_members 0".into(),
        "fleet_role_paused 0".into(),
        "fleet_role_regrade_lease_held 0".into(),
        format!("fleet_role_credential_expiry_timestamp_seconds {exp}"),
    ] {
        assert!(idle.lines().any(|l| l == line), "no {line:?} in:\n{idle}");
    }
    for absent in [
        "fleet_role_swap_in_progress{",
        "fleet_role_degraded{",
        "fleet_role_last_swap_end_timestamp_seconds ",
    ] {
        assert!(!idle.contains(absent), "{absent:?} in:\n{idle}");
    }
    h.fleet.set(|f| {
        f.down.insert("n2".into());
    });
    h.wait_for("the swap to end", || async {
        h.lease_annotation("last-swap").await.is_some()
    })
    .await;
    let ended = recorded_end(&h).await;
    let started = clock::Clock::system().now();
    loop {
        let (_, m) = get(&addr, "/metrics").await;
        // The count is made when the swap ends; its end comes from the
        // next reading of the regrade Lease, a moment later on a busy
        // machine: both are waited for.
        if m.contains("fleet_role_swaps_total{outcome=\"done\"} 1")
            && m.contains(&format!(
                "fleet_role_last_swap_end_timestamp_seconds {ended}\n"
            ))
        {
            assert!(
                m.contains("fleet_role_step_duration_seconds_count{step=\"promote\"} 1"),
                "{m}"
            );
            // Prometheus's own linter finds nothing in a scrape that has
            // every kind of series (a counter, a histogram, labelled gauges).
            testcp::promtool::check_metrics(&m).await;
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the swap was never counted (it ended at {ended}):\n{m}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Where a running `run` says it serves its metrics.
fn served_at(out: &Printed) -> String {
    out.text()
        .lines()
        .find_map(|l| l.split("/readyz on ").nth(1).map(str::to_string))
        .expect("run says where it serves")
}

/// When the last swap ended, as the regrade Lease records it.
async fn recorded_end(h: &Harness) -> i64 {
    let last: serde_json::Value =
        serde_json::from_str(&h.lease_annotation("last-swap").await.expect("a last swap")).unwrap();
    last["at"].as_i64().expect("its end")
}

/// Waits until `run`'s metrics at `addr` hold `line`, and returns them.
async fn metrics_show(addr: &str, line: &str) -> String {
    let started = clock::Clock::system().now();
    loop {
        let (_, m) = get(addr, "/metrics").await;
        if m.lines().any(|l| l == line) {
            return m;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "timed out waiting for {line:?} in:\n{m}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn runs_metrics_show_a_swap_run_by_hand_in_progress_with_its_step_hosts_and_deadline_then_its_end()
 {
    let h = Harness::start(&three_voters(), CONFIG).await;
    let mut run = h.spawn(&["run", "--dry-run", "--metrics-address", "127.0.0.1:0"]);
    let out = Printed::of(&mut run);
    out.wait_for("/readyz on ").await;
    let addr = served_at(&out);
    metrics_show(&addr, "fleet_role_members 3").await;
    h.fleet.set(|f| {
        f.hold.insert("promote".into());
    });
    let mut swap = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    let swapping = Printed::of(&mut swap);
    let m = metrics_show(
        &addr,
        "fleet_role_swap_in_progress{step=\"promote\",outgoing=\"n1\",incoming=\"n4\"} 1",
    )
    .await;
    // When its step times out: its start on the Lease plus the promotion's
    // timeout (90 s here), the same moment `status` counts down to.
    let since: i64 = h
        .lease_annotation("swap-step-since")
        .await
        .and_then(|t| t.parse().ok())
        .expect("the step's start on the Lease");
    assert!(
        m.lines().any(|l| l
            == format!(
                "fleet_role_swap_step_deadline_timestamp_seconds{{step=\"promote\"}} {}",
                since + 90
            )),
        "{m}"
    );
    // The Lease is the hand's process's, not run's.
    assert!(
        m.lines().any(|l| l == "fleet_role_regrade_lease_held 0"),
        "{m}"
    );
    assert!(
        !m.contains("fleet_role_last_swap_end_timestamp_seconds "),
        "{m}"
    );
    h.fleet.set(|f| {
        f.hold.remove("promote");
    });
    let ended = tokio::time::timeout(DEADLINE, swap.wait())
        .await
        .expect("the swap ends")
        .unwrap();
    assert!(ended.success(), "{}", swapping.text());
    let at = recorded_end(&h).await;
    let m = metrics_show(
        &addr,
        &format!("fleet_role_last_swap_end_timestamp_seconds {at}"),
    )
    .await;
    assert!(!m.contains("fleet_role_swap_in_progress{"), "{m}");
    assert!(
        !m.contains("fleet_role_swap_step_deadline_timestamp_seconds{"),
        "{m}"
    );
    stop(&mut run).await;
}

#[tokio::test]
async fn run_dry_run_prints_the_swap_it_would_make_and_writes_nothing() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.set(|f| {
        f.down.insert("n3".into());
    });
    let mut run = h.spawn(&["run", "--dry-run"]);
    let out = Printed::of(&mut run);
    out.wait_for("dry run: would swap out n3, in n4").await;
    // The decision is taken: a run that wrote would have taken the Lease
    // for it. Stopped and gone, it can write nothing more.
    stop(&mut run).await;
    assert_eq!(
        h.lease_annotation("role-swap").await,
        None,
        "{}",
        out.text()
    );
    assert!(h.fleet.log().is_empty(), "{:?}", h.fleet.log());
    let leader = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        h.admin.clone(),
        "platform",
    )
    .get("fleet-role-leader")
    .await
    .unwrap();
    assert!(leader.spec.and_then(|s| s.holder_identity).is_none());
}

#[tokio::test]
async fn run_refuses_to_start_while_a_voter_is_not_eligible_and_names_them() {
    let mut hosts = three_voters();
    for h in hosts.iter_mut().filter(|h| h.voter) {
        h.eligible = false;
    }
    let h = Harness::start(&hosts, CONFIG).await;
    let run = h.run(&["run"]).await;
    run.expect(1);
    assert!(
        run.stderr
            .contains("the voters n1, n2, n3 are not eligible"),
        "{}",
        run.stderr
    );
    assert_eq!(h.lease_annotation("role-swap").await, None);
}

#[tokio::test]
async fn abort_winds_a_running_swap_down_through_the_controller_holding_it() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.set(|f| {
        f.hold.insert("snapshot".into());
    });
    let mut swap = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    let out = Printed::of(&mut swap);
    h.wait_for("the swap to be held in its snapshot", || async {
        h.lease_annotation("swap-step").await.as_deref() == Some("snapshot")
            && h.fleet.has_held("snapshot")
    })
    .await;
    let abort = h.run(&["abort"]).await;
    abort.expect(0);
    assert!(
        abort
            .stdout
            .contains("winding it down to the cluster as it was"),
        "{}",
        abort.stdout
    );
    let status = tokio::time::timeout(DEADLINE, swap.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(1), "{}", out.text());
    assert!(out.text().contains("wound down"), "{}", out.text());
    h.assert_lease_released().await;
    let n2 = h.node("n2").await;
    let a = n2.metadata.annotations.unwrap_or_default();
    assert!(
        !a.contains_key(&format!("{}/snapshot-request", support::P)),
        "{a:?}"
    );
}

#[tokio::test]
async fn status_watch_refreshes_until_ctrl_c_and_then_stops_cleanly_with_the_last_verdict() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    let mut watching = h.spawn(&["status", "--watch", "--interval", "1s"]);
    let out = Printed::of(&mut watching);
    out.wait_for("Health: nothing degraded").await;
    // A voter goes down: a later refresh says so, without a restart.
    h.fleet.set(|f| {
        f.down.insert("n2".into());
    });
    out.wait_for("DEGRADED: 2 healthy voter(s) of 3 configured")
        .await;
    assert!(out.text().matches("── ").count() >= 2, "{}", out.text());
    let pid = watching.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(DEADLINE, watching.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(5), "{}", out.text());
}

#[tokio::test]
async fn a_swap_interrupted_by_ctrl_c_says_how_to_resume_or_abort_and_abort_then_winds_it_down() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.set(|f| {
        f.hold.insert("snapshot".into());
    });
    let mut swap = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    let out = Printed::of(&mut swap);
    h.wait_for("the swap to be held in its snapshot", || async {
        h.lease_annotation("swap-step").await.as_deref() == Some("snapshot")
            && h.fleet.has_held("snapshot")
    })
    .await;
    let pid = swap.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(DEADLINE, swap.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(3), "{}", out.text());
    out.wait_for("fleet-role abort").await;
    assert!(
        out.text().contains("fleet-role swap --out n1 --in n4"),
        "{}",
        out.text()
    );
    // Nobody holds it once its Lease lapses: abort drives the wind-down.
    h.wait_for("the interrupted swap's Lease to lapse", || async {
        let l = h.lease().await;
        let spec = l.spec.unwrap_or_default();
        let renewed = spec.renew_time.map(|t| t.0.as_second()).unwrap_or(0);
        let secs = i64::from(spec.lease_duration_seconds.unwrap_or(0));
        k8s_openapi::jiff::Timestamp::try_from(clock::Clock::system().wall())
            .unwrap()
            .as_second()
            > renewed + secs + 1
    })
    .await;
    let abort = h.run(&["abort"]).await;
    abort.expect(0);
    assert!(abort.stdout.contains("wound down"), "{}", abort.stdout);
    h.assert_lease_released().await;
}

/// Cordons (or uncordons) a Node as `kubectl cordon` does.
async fn set_cordon(h: &Harness, node: &str, on: bool) {
    h.nodes()
        .patch(
            node,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"unschedulable": on}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn run_leaves_a_down_cordoned_voter_alone_within_its_maintenance_grace_and_replaces_it_once_uncordoned()
 {
    // A maintenance grace far longer than the test; the ordinary grace is
    // CONFIG's 3 s.
    let config = format!("maintenance_grace_secs = 3600\n{CONFIG}");
    let h = Harness::start(&three_voters(), &config).await;
    set_cordon(&h, "n2", true).await;
    h.fleet.set(|f| {
        f.down.insert("n2".into());
    });
    let mut run = h.spawn(&["run"]);
    let out = Printed::of(&mut run);
    out.wait_for(
        "idle: no voter to replace yet: n2 is NotReady, within a maintenance grace (at most 3600 s): it is cordoned",
    )
    .await;
    // Well past the ordinary grace: still no swap.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        h.lease_annotation("role-swap").await,
        None,
        "{}",
        out.text()
    );
    assert!(h.fleet.log().is_empty(), "{:?}", h.fleet.log());
    // The same voter uncordoned is replaced as ever.
    set_cordon(&h, "n2", false).await;
    out.wait_for("swap out n2, in n4: n2 has been NotReady for over 3 s")
        .await;
    h.wait_for("n2's swap to end", || async {
        h.lease_annotation("role-swap").await.is_none()
            && h.lease_annotation("swap-endings")
                .await
                .is_some_and(|e| e.contains("\"out\":\"n2\""))
    })
    .await;
}

#[tokio::test]
async fn run_moves_to_the_next_api_server_when_the_one_in_use_stops_serving_and_leads_again() {
    let mut h = Harness::start(&three_voters(), CONFIG).await;
    // The controller starts on a second API server (the fleet double keeps
    // the first), which is then stopped under it.
    let second = h.plane.add_apiserver().await.unwrap();
    let urls = h.plane.urls();
    std::fs::write(
        &h.config,
        format!(
            "api_servers = [\"{}\", \"{}\"]\n{CONFIG}",
            urls[second], urls[0]
        ),
    )
    .unwrap();
    let mut run = h.spawn(&["run", "--metrics-address", "127.0.0.1:0"]);
    let out = Printed::of(&mut run);
    out.wait_for("leading:").await;
    let addr = served_at(&out);
    h.plane.stop_apiserver(second).await.unwrap();
    let moved = format!(
        "the API server {}/ stopped serving; moving to {}/",
        urls[second], urls[0]
    );
    out.wait_for(&moved).await;
    // It leads again through the next server, and still serves its
    // metrics from the same address.
    let started = clock::Clock::system().now();
    while out.text().matches("leading:").count() < 2 {
        assert!(
            started.elapsed() < DEADLINE,
            "it did not lead again:\n{}",
            out.text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    metrics_show(&addr, "fleet_role_leader 1").await;
    // A voter goes down: the run on the next server replaces it.
    h.fleet.set(|f| {
        f.down.insert("n2".into());
    });
    h.wait_for("a swap through the next server", || async {
        h.lease_annotation("last-swap").await.is_some()
    })
    .await;
    let _ = run.start_kill();
}

#[tokio::test]
async fn run_dry_run_would_swap_a_voter_of_a_full_zone_for_a_standby_of_an_empty_one_and_prints_the_voter_set()
 {
    let h = Harness::start(&three_voters(), CONFIG).await;
    for (node, zone) in [("n1", "a"), ("n2", "a"), ("n3", "a"), ("n4", "b")] {
        h.nodes()
            .patch(
                node,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({
                    "metadata": {"labels": {"topology.kubernetes.io/zone": zone}}
                })),
            )
            .await
            .unwrap();
    }
    let mut run = h.spawn(&["run", "--dry-run"]);
    let out = Printed::of(&mut run);
    out.wait_for("dry run: would swap out n3, in n4: to spread the voters")
        .await;
    out.wait_for("spread by topology.kubernetes.io/zone: a 3, b 0 (at most 2 per zone")
        .await;
    out.wait_for("path 1. swap --out n3 --in n4").await;
    stop(&mut run).await;
    assert_eq!(
        h.lease_annotation("role-swap").await,
        None,
        "{}",
        out.text()
    );
    assert!(h.fleet.log().is_empty(), "{:?}", h.fleet.log());
}

#[tokio::test]
async fn run_grows_three_voters_to_the_five_configured_promoting_two_standbys_in_turn_then_rests() {
    let config = CONFIG.replace("voters = 3", "voters = 5");
    let h = Harness::start(&three_voters_and_a_second_standby(), &config).await;
    let mut run = h.spawn(&["run"]);
    let out = Printed::of(&mut run);
    // From three, the first standby with the second queued behind it: the
    // gates count both, so no even count is left standing.
    out.wait_for("grow: promote n4, then n6: toward 5 voters")
        .await;
    out.wait_for("grow: promote n6: toward 5 voters").await;
    out.wait_for("idle: every voter is healthy and eligible")
        .await;
    stop(&mut run).await;
    for n in ["n4", "n6"] {
        h.assert_promoted(n).await;
    }
    h.assert_clean().await;
    // Each was its own change on the Lease: two grows ended, no swap.
    let endings = h.lease_annotation("swap-endings").await.unwrap_or_default();
    assert_eq!(
        endings.matches("\"out\":\"\"").count(),
        2,
        "two grows (no outgoing host): {endings}"
    );
    let text = out.text();
    assert!(!text.contains("step down"), "{text}");
}
