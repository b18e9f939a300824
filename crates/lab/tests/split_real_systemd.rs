//! k3s's split of 6443 and 6444 on a lab on real systemd: a server's
//! kube-apiserver listens on its own `127.0.0.1:6444` only, and is reached
//! from other hosts through the supervisor on 6443; once the server steps
//! down to etcd-only, its 6443 still answers, with k3s's 503 "apiserver
//! disabled" for every API request; and an actuator whose `api` list names
//! that host first still reports, through the next server.
//! Fails (never skips) when containers cannot run here.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use lab::{
    api::Apis,
    scenario::{Ask, Hand},
    spec::{API_PORT, APISERVER_PORT, LabSpec},
};
use protocol::report::ReportStep;

mod common;
use common::{SERIAL, lab_dir, lab_of};

/// A generous bound for the lab's moves on a busy 2-core machine; a bound
/// on a wait, not a figure.
const BOUND: Duration = Duration::from_secs(120);

/// Admin clients for exactly `urls`, in that order.
fn apis_for(spec: &LabSpec, urls: Vec<String>) -> Apis {
    let tokens = testcp::TokenAuthFile::load(&spec.tokens_file()).unwrap();
    Apis::new(&spec.pki_dir(), &spec.ips(), tokens.admin_token(), urls).unwrap()
}

/// `curl` inside `host`: its exit status and what it printed.
fn curl(lab: &lab::systemd_lab::SystemdLab, host: &str, url: &str) -> (Option<i32>, String) {
    let m = lab.machine(host).unwrap();
    let o = tokio::task::block_in_place(|| {
        m.exec(
            &["curl", "-sk", "--max-time", "10", url],
            Duration::from_secs(30),
        )
    })
    .unwrap();
    (o.status.code(), o.stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_api_is_reached_through_its_supervisor_only_and_an_etcd_only_hosts_503_moves_the_actuator_on()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(3, 0, dir.path()).await;
    let hand = Hand::new(&lab.spec).unwrap();
    let n = hand.names.clone();
    let ip = |h: &str| lab.spec.host(h).unwrap().ip;

    // 1. kube-apiserver is on server-1's own loopback, and only there.
    let (code, text) = curl(
        &lab,
        "server-1",
        &format!("https://127.0.0.1:{APISERVER_PORT}/readyz"),
    );
    assert_eq!(
        (code, text.trim()),
        (Some(0), "ok"),
        "server-1's kube-apiserver answers on its 127.0.0.1:6444"
    );
    let (code, _) = curl(
        &lab,
        "server-2",
        &format!("https://{}:{APISERVER_PORT}/readyz", ip("server-1")),
    );
    assert_eq!(
        code,
        Some(7),
        "server-1's 6444 refuses a connection from server-2 (curl: couldn't connect)"
    );
    let refused = std::net::TcpStream::connect_timeout(
        &(ip("server-1"), APISERVER_PORT).into(),
        Duration::from_secs(5),
    )
    .map(drop)
    .unwrap_err();
    assert_eq!(
        refused.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "server-1's 6444 refuses this machine too"
    );
    // Through the supervisor on 6443, the API is there.
    let one = apis_for(&lab.spec, vec![LabSpec::api_url(ip("server-1"))]);
    let node = one
        .any(|c| async move { Api::<Node>::all(c).get("server-1").await })
        .await
        .expect("server-1's API answers on 6443, through its supervisor");
    assert_eq!(node.metadata.name.as_deref(), Some("server-1"));
    let (code, text) = curl(
        &lab,
        "server-2",
        &format!("https://{}:{API_PORT}/ping", ip("server-1")),
    );
    assert_eq!(
        (code, text.as_str()),
        (Some(0), "pong"),
        "the supervisor's own path"
    );

    // 2. server-3 steps down to etcd-only (`disable-apiserver`).
    let swap = format!("swap-{}", clock::Clock::system().unix_secs());
    hand.hold_lease(&swap, "server-3", "agent-1", &n.controller_identity)
        .await
        .unwrap();
    hand.ask(
        "server-3",
        Ask::StepDown {
            swap: &swap,
            cordon: true,
        },
    )
    .await
    .unwrap();
    hand.wait_step_holding(
        "server-3",
        (&swap, "server-3", "agent-1", &n.controller_identity),
        ReportStep::StepDown,
        BOUND,
        &|r| println!("{r:?}"),
    )
    .await
    .expect("the step-down succeeds");

    // Its 6443 answers, and every API request gets k3s's 503.
    let etcd_only = apis_for(&lab.spec, vec![LabSpec::api_url(ip("server-3"))]);
    let err = etcd_only
        .any(|c| async move { Api::<Node>::all(c).get("server-1").await })
        .await
        .expect_err("an etcd-only server serves no API");
    match err.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(s)) => {
            assert_eq!(
                (s.code, s.reason.as_str(), s.message.as_str()),
                (503, "ServiceUnavailable", "apiserver disabled"),
                "{s:?}"
            );
        }
        other => panic!("an answer of 503 from server-3's 6443, not {other:?} ({err:#})"),
    }
    // A client with it first moves on to the next server.
    let first = apis_for(
        &lab.spec,
        vec![
            LabSpec::api_url(ip("server-3")),
            LabSpec::api_url(ip("server-1")),
        ],
    );
    first
        .any(|c| async move { Api::<Node>::all(c).get("server-1").await })
        .await
        .expect("the lab's client moves past the etcd-only server");

    // 3. server-1's actuator, its `api` list naming server-3 first, still
    // reports: its heartbeat comes after its restart.
    let cfg = lab
        .spec
        .root("server-1")
        .join("etc/fleet-role/actuator.toml");
    let urls = [ip("server-3"), ip("server-1"), ip("server-2")]
        .map(|i| format!("\"{}\"", LabSpec::api_url(i)))
        .join(", ");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let api_line = text
        .lines()
        .find(|l| l.starts_with("api = "))
        .unwrap()
        .to_string();
    std::fs::write(&cfg, text.replace(&api_line, &format!("api = [{urls}]"))).unwrap();
    let heartbeat = || async {
        hand.report("server-1")
            .await
            .ok()
            .flatten()
            .and_then(|r| r.host)
            .map(|h| h.heartbeat_at)
    };
    let before = heartbeat().await;
    let restarted = clock::Clock::system().unix_secs();
    lab.systemctl("server-1", &["restart", "fleet-role-actuator"])
        .unwrap();
    let start = clock::Clock::system().now();
    loop {
        let beat = heartbeat().await;
        if beat != before && beat.is_some_and(|b| b >= restarted) {
            break;
        }
        assert!(
            start.elapsed() < BOUND,
            "server-1's actuator, with the etcd-only server-3 first, wrote no heartbeat within {} s (last {beat:?})",
            BOUND.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // It says why it moved on (polled: journald takes a stream's lines in
    // its own time, after the heartbeat they came before; found by the
    // process's identifier, as journald does not always tie a stream's
    // lines to the unit).
    let m = lab.machine("server-1").unwrap();
    let start = clock::Clock::system().now();
    loop {
        let log: Vec<String> = tokio::task::block_in_place(|| {
            m.journal_of(&["fleet-role-actuator"], Duration::from_secs(60))
        })
        .unwrap()
        .iter()
        .filter_map(|r| r["MESSAGE"].as_str().map(str::to_string))
        .collect();
        let said = |what: &str| log.iter().any(|l| l.contains(what));
        if said("apiserver disabled") && said("moving to the next candidate") {
            break;
        }
        assert!(
            start.elapsed() < BOUND,
            "server-1's actuator logs the 503 and its move:\n{}",
            log.join("\n")
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
