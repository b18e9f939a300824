//! The seed's scenario in the lab, and its failure modes. Each test brings a
//! lab up (real etcd members, a kube-apiserver per server, the actuators as
//! units). They run one at a time: each lab is a dozen processes, and the
//! machine has two cores.

mod support;

use std::time::{Duration, Instant};

use lab::{
    hosts::StandinHosts,
    scenario::{self, Hand},
    spec::LabSpec,
    world,
};
use protocol::report::ReportStep;
use serde_json::json;
use support::{ONE_LAB_AT_A_TIME, lab, say};

async fn until<F, Fut>(what: &str, secs: u64, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !f().await {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn systemd_log(spec: &LabSpec, host: &str) -> Vec<String> {
    std::fs::read_to_string(
        spec.root(host)
            .join("var/log/fleet-role-standin/systemd/log"),
    )
    .unwrap_or_default()
    .lines()
    .map(str::to_string)
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_is_swapped_for_a_standby_with_every_write_succeeding_and_every_promise_kept() {
    let _one = ONE_LAB_AT_A_TIME.lock().await;
    let lab = lab(3, 2).await;
    let r = scenario::swap_by_hand(&StandinHosts(&lab.spec), "server-3", "agent-1", &say)
        .await
        .expect("the swap");
    support::assert_every_promise_kept(&r, "server-3", "agent-1");
    // The old voter is an agent now, its server unit off and disabled.
    let root = lab.spec.root("server-3");
    assert!(
        standins::units::is_active(&root, "k3s-agent") && !standins::units::is_active(&root, "k3s")
    );
    assert!(!standins::units::is_enabled(&root, "k3s"));
    assert_eq!(
        std::fs::read_to_string(root.join("var/lib/rancher/k3s/fleet-role"))
            .unwrap()
            .trim(),
        "agent"
    );
    // k3s does not exit when its member is removed: the finish found it still
    // running and stopped it.
    let k3s = std::fs::read_to_string(standins::state_dir(&root, "systemd").join("k3s.log"))
        .unwrap_or_default();
    let removed = k3s.find("This node has been removed from the cluster");
    let stopped = k3s.find("SIGTERM: stopping (this node's member was removed)");
    assert!(
        removed.is_some() && stopped > removed,
        "the removed k3s was not running until the finish: {k3s}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_rebooted_mid_promotion_converges_without_repeating_a_settled_step() {
    let _one = ONE_LAB_AT_A_TIME.lock().await;
    let lab = lab(1, 1).await;
    let hand = Hand::new(&lab.spec).unwrap();
    let n = hand.names.clone();
    let swap = format!("swap-{}", lab::clock::unix());
    hand.hold_lease(&swap, &n.controller_identity)
        .await
        .unwrap();
    hand.patch_node(
        "server-1",
        json!({"metadata": {"annotations": { n.snapshot_request(): swap }}}),
    )
    .await
    .unwrap();
    hand.wait_step(
        "server-1",
        &swap,
        ReportStep::Snapshot,
        Duration::from_secs(60),
        &|_| {},
    )
    .await
    .unwrap();
    hand.patch_node(
        "agent-1",
        json!({"metadata": {"labels": { n.desired_role(): "server" },
            "annotations": { n.role_swap(): swap, n.role_step(): "promote", n.role_join_node(): "server-1" }}}),
    )
    .await
    .unwrap();
    until("learner", 60, || async {
        hand.report("agent-1")
            .await
            .ok()
            .flatten()
            .is_some_and(|r| r.step == ReportStep::Promote && r.detail.is_some())
    })
    .await;
    let started = hand.report("agent-1").await.unwrap().unwrap().started_at;
    println!("rebooting agent-1 mid-promotion");
    world::reboot(&lab.spec, "agent-1").unwrap();
    // Rebooting server-1 too: its settled snapshot must not be taken again.
    world::reboot(&lab.spec, "server-1").unwrap();
    let renew = async {
        loop {
            let _ = hand.hold_lease(&swap, &n.controller_identity).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    };
    let done = hand.wait_step(
        "agent-1",
        &swap,
        ReportStep::Promote,
        Duration::from_secs(180),
        &|r| println!("{r:?}"),
    );
    let r = tokio::select! { r = done => r.unwrap(), _ = renew => unreachable!() };
    assert_eq!(r.started_at, started, "the promotion was started again");
    let snaps = std::fs::read_dir(
        lab.spec
            .root("server-1")
            .join("var/lib/rancher/k3s/server/db/snapshots"),
    )
    .unwrap()
    .count();
    assert_eq!(snaps, 1, "the settled snapshot was taken again");
    let enables = systemd_log(&lab.spec, "agent-1")
        .iter()
        .filter(|l| *l == "enable --now --no-block k3s")
        .count();
    assert_eq!(enables, 1, "the promotion's switch was repeated");
    let members = scenario::members(&lab.spec).await.unwrap();
    assert_eq!(
        members.iter().filter(|m| !m.is_learner).count(),
        2,
        "{members:?}"
    );
    assert!(standins::units::max_active_k3s(&lab.spec.root("agent-1")) <= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_down_whose_etcd_does_not_come_back_leaves_the_role_file_naming_the_server() {
    let _one = ONE_LAB_AT_A_TIME.lock().await;
    let lab = lab(3, 0).await;
    let hand = Hand::new(&lab.spec).unwrap();
    let n = hand.names.clone();
    let root = lab.spec.root("server-3");
    // A shorter wait for etcd on this host, and a k3s whose etcd will not start again.
    let cfg = root.join("etc/fleet-role/actuator.toml");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("etcd_wait_secs = 60", "etcd_wait_secs = 8");
    std::fs::write(&cfg, text).unwrap();
    world::systemctl(&lab.spec, "server-3", &["restart", "fleet-role-actuator"]).unwrap();
    std::fs::create_dir_all(root.join("var/lib/fleet-role-lab")).unwrap();
    std::fs::write(root.join("var/lib/fleet-role-lab/etcd-fails"), "").unwrap();
    let swap = format!("swap-{}", lab::clock::unix());
    hand.hold_lease(&swap, &n.controller_identity)
        .await
        .unwrap();
    hand.patch_node(
        "server-3",
        json!({"spec": {"unschedulable": true}, "metadata": {"labels": { n.desired_role(): "agent" },
            "annotations": { n.role_swap(): swap, n.role_step(): "step-down" }}}),
    )
    .await
    .unwrap();
    let err = hand
        .wait_step(
            "server-3",
            &swap,
            ReportStep::StepDown,
            Duration::from_secs(120),
            &|r| println!("{r:?}"),
        )
        .await
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("Failed") && msg.contains("the role file still names the server"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("var/lib/rancher/k3s/fleet-role"))
            .unwrap()
            .trim(),
        "server"
    );
    // The two voters left keep the cluster writable.
    let url = LabSpec::etcd_url(lab.spec.host("server-1").unwrap().ip);
    lab::etcd_gw::put(&url, "/lab/after-failed-step-down", "ok")
        .await
        .unwrap();
}
