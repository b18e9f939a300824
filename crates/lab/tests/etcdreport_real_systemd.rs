//! etcd's view in the reports, on real systemd: each server's actuator
//! reads its local member through etcd's client API (TLS, k3s's client
//! certificate) and its report carries what it read; an agent's carries
//! none. A server whose k3s unit is stopped is still a member in the others'
//! views, and its own report carries no view any more.
//! Fails (never skips) when containers cannot run here.

use std::{collections::BTreeMap, time::Duration};

use lab::{scenario::Hand, systemd_lab::SystemdLab};
use protocol::etcd::{EtcdView, MemberId};
use serde_json::Value;

mod common;
use common::{SERIAL, fleet_role, lab_dir, lab_of};

/// A generous bound on a wait on a busy 2-core machine: a view changed in
/// shape is written at once, one unchanged rides the heartbeat (60 s).
const BOUND: Duration = Duration::from_secs(240);

const SERVERS: [&str; 3] = ["server-1", "server-2", "server-3"];

/// Each host's report's etcd view (`None`: no report, no host part or no
/// view).
async fn views(hand: &Hand, hosts: &[&str]) -> BTreeMap<String, Option<EtcdView>> {
    let mut out = BTreeMap::new();
    for h in hosts {
        let r = hand.report(h).await.unwrap();
        out.insert(h.to_string(), r.and_then(|r| r.host).and_then(|h| h.etcd));
    }
    out
}

/// Polls the views of `hosts` until `done` says yes; the last ones seen.
async fn wait_views(
    hand: &Hand,
    hosts: &[&str],
    what: &str,
    done: impl Fn(&BTreeMap<String, Option<EtcdView>>) -> bool,
) -> BTreeMap<String, Option<EtcdView>> {
    let start = clock::Clock::system().now();
    loop {
        let now = views(hand, hosts).await;
        if done(&now) {
            return now;
        }
        assert!(
            start.elapsed() < BOUND,
            "{what} did not happen within {} s; views now: {now:#?}",
            BOUND.as_secs()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn unix_now() -> i64 {
    clock::Clock::system().unix_secs()
}

/// `fleet-role status` in `format` (it exits 0, or 5 when something is
/// degraded): its output.
fn status(lab: &SystemdLab, format: &str) -> String {
    let out = std::process::Command::new(fleet_role())
        .args([
            "--kubeconfig",
            &lab::lab_setup::kubeconfig(&lab.spec).display().to_string(),
            "status",
            "--output",
            format,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        matches!(out.status.code(), Some(0 | 5)),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The Node `status --output json` maps each member to, by member name.
fn status_members(j: &Value) -> BTreeMap<String, (Value, bool, bool)> {
    j["etcd"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["member"]["name"].as_str().unwrap().to_string(),
                (
                    m["node"].clone(),
                    m["member"]["learner"].as_bool().unwrap(),
                    m["healthy"].as_bool().unwrap(),
                ),
            )
        })
        .collect()
}

/// Three voters, no learner, one leader among them, the local member one
/// of them and healthy.
fn three_voters_one_leader(v: &EtcdView) -> bool {
    v.members.len() == 3
        && v.learners().count() == 0
        && v.leader.is_some_and(|l| v.member(l).is_some())
        && v.member(v.member).is_some()
        && v.healthy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_server_reports_etcds_view_the_agent_none_and_a_stopped_server_is_still_a_member_in_the_others_views()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(3, 1, dir.path()).await;
    let hand = Hand::new(&lab.spec).unwrap();

    // 1. Every server's view lists the three voters and agrees on the
    //    leader; each names its own member by k3s's member name.
    let all = wait_views(
        &hand,
        &SERVERS,
        "three views of three voters agreeing on one leader",
        |vs| {
            let vs: Vec<&EtcdView> = vs.values().flatten().collect();
            vs.len() == 3
                && vs.iter().all(|v| three_voters_one_leader(v))
                && vs.iter().all(|v| v.leader == vs[0].leader)
                && vs.iter().all(|v| v.membership() == vs[0].membership())
        },
    )
    .await;
    for (host, v) in &all {
        let v = v.as_ref().unwrap();
        let own = v.member(v.member).unwrap();
        assert_eq!(own.node_name(), Some(host.as_str()), "{v:?}");
        println!(
            "{host}: member {} of {}, leader {}, db {} bytes",
            v.member,
            v.members.len(),
            v.leader.unwrap(),
            v.db_size
        );
    }
    // `fleet-role status` joins them with the Nodes: each member on its
    // Node, none a ghost or a learner, each healthy by its own host's view.
    let text = status(&lab, "text");
    println!("{text}");
    let j: Value = serde_json::from_str(status(&lab, "json").trim()).unwrap();
    assert_eq!(j["etcd"]["reporters"], serde_json::json!(SERVERS), "{text}");
    let ms = status_members(&j);
    assert_eq!(ms.len(), 3, "{text}");
    for (name, (node, learner, healthy)) in &ms {
        let node = node
            .as_str()
            .unwrap_or_else(|| panic!("{name} a ghost: {text}"));
        assert!(name.starts_with(&format!("{node}-")), "{name} on {node}");
        assert!(!learner && *healthy, "{name}: {text}");
    }
    // The agent's report carries none (it holds no datastore).
    let agent = hand.report("agent-1").await.unwrap();
    let agent_host = agent.and_then(|r| r.host).expect("the agent's heartbeat");
    assert_eq!(agent_host.etcd, None);

    // 2. server-3's k3s unit stopped: the others still list its member (k3s
    //    removes no member for being down), read after the stop; its own
    //    report carries no view.
    let gone: MemberId = all["server-3"].as_ref().unwrap().member;
    let m = lab.machine("server-3").unwrap();
    let stopped_at = unix_now();
    let o = tokio::task::block_in_place(|| m.systemctl(&["stop", "k3s"], Duration::from_secs(120)))
        .unwrap();
    assert!(o.status.success(), "stop k3s: {o:?}");
    let after = wait_views(
        &hand,
        &SERVERS,
        "the others' views read after server-3 stopped, and none from server-3",
        |vs| {
            vs["server-3"].is_none()
                && ["server-1", "server-2"].iter().all(|h| {
                    // Two voters of three still serve, under a leader that
                    // is not the stopped one (an election, if it led).
                    vs[*h].as_ref().is_some_and(|v| {
                        v.read_at > stopped_at
                            && v.healthy
                            && v.leader.is_some_and(|l| l != gone)
                            && v.member(gone).is_some()
                    })
                })
        },
    )
    .await;
    for h in ["server-1", "server-2"] {
        let v = after[h].as_ref().unwrap();
        assert_eq!(v.members.len(), 3, "{h}: {v:?}");
        assert!(v.member(gone).is_some_and(|m| !m.learner), "{h}: {v:?}");
    }
    // status: server-3's member still on its Node, a voter, not healthy (no
    // view of its own); server-3's row says it reported none.
    let text = status(&lab, "text");
    println!("{text}");
    let j: Value = serde_json::from_str(status(&lab, "json").trim()).unwrap();
    assert_eq!(
        j["etcd"]["reporters"],
        serde_json::json!(["server-1", "server-2"]),
        "{text}"
    );
    let ms = status_members(&j);
    let (node, learner, healthy) = ms
        .iter()
        .find(|(n, _)| n.starts_with("server-3-"))
        .map(|(_, m)| m.clone())
        .unwrap_or_else(|| panic!("server-3's member: {text}"));
    assert_eq!(
        (node.as_str(), learner, healthy),
        (Some("server-3"), false, false)
    );
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("server-3") && l.contains("none reported")),
        "{text}"
    );
}
