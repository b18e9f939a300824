//! Pods on a lab on real systemd: the embedded kubelet restarts a pod whose
//! shim was killed (a cordon changes nothing), confirms an eviction by
//! deleting the pod once its shim is gone, and runs nothing once the host
//! steps down to etcd-only (`disable-agent`): the step-down succeeds, no
//! shim runs on the host, and none comes back.
//! Fails (never skips) when containers cannot run here.

use std::time::Duration;

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Pod};
use kube::{Api, api::EvictParams};
use lab::{
    api::Apis,
    scenario::{Ask, Hand},
    systemd_lab::SystemdLab,
};
use protocol::report::ReportStep;
use serde_json::json;

mod common;
use common::{SERIAL, lab_dir, lab_of};

/// A generous bound for the kubelet's moves on a busy 2-core machine (it
/// syncs every second); a bound on a wait, not a figure.
const BOUND: Duration = Duration::from_secs(60);

/// The pod shims running on a host, by pid, found where k3s-killall looks.
fn shims(lab: &SystemdLab, host: &str) -> Vec<u32> {
    let m = lab.machine(host).unwrap();
    let o = tokio::task::block_in_place(|| {
        m.exec(
            &[
                "pgrep",
                "-f",
                "^/var/lib/rancher/k3s/data/[^/]+/bin/containerd-shim",
            ],
            Duration::from_secs(60),
        )
    })
    .unwrap();
    o.stdout
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Polls `shims` on `host` until `done` says yes; the last pids seen.
async fn wait_shims(
    lab: &SystemdLab,
    host: &str,
    what: &str,
    done: impl Fn(&[u32]) -> bool,
) -> Vec<u32> {
    let start = clock::Clock::system().now();
    loop {
        let now = shims(lab, host);
        if done(&now) {
            return now;
        }
        assert!(
            start.elapsed() < BOUND,
            "{host}: {what} did not happen within {} s (shims now: {now:?})",
            BOUND.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn node_lease_renewed(apis: &Apis, node: &str) -> String {
    let l = apis
        .any(|c| {
            let n = node.to_string();
            async move { Api::<Lease>::namespaced(c, "kube-node-lease").get(&n).await }
        })
        .await
        .unwrap();
    format!("{:?}", l.spec.and_then(|s| s.renew_time))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_kubelet_brings_back_a_killed_pod_while_cordoned_and_after_a_step_down_no_pod_runs_or_comes_back()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(3, 0, dir.path()).await;
    let hand = Hand::new(&lab.spec).unwrap();
    let n = hand.names.clone();
    let apis = Apis::for_lab(&lab.spec).unwrap();

    // 1. A cordoned server's kubelet restarts a pod whose shim was killed.
    hand.patch_node("server-3", json!({"spec": {"unschedulable": true}}))
        .await
        .unwrap();
    let before = wait_shims(&lab, "server-3", "its two pods running", |s| {
        s.len() == lab::lab_setup::PODS_PER_HOST
    })
    .await;
    let killed = before[0];
    let m = lab.machine("server-3").unwrap();
    let kill_at = clock::Clock::system().now();
    tokio::task::block_in_place(|| {
        m.exec_ok(
            &["kill", "-9", &killed.to_string()],
            Duration::from_secs(30),
        )
    })
    .unwrap();
    let after = wait_shims(&lab, "server-3", "the killed pod's return", |s| {
        s.len() == lab::lab_setup::PODS_PER_HOST && !s.contains(&killed)
    })
    .await;
    // A figure, not asserted (the kubelet syncs every second).
    println!(
        "server-3 (cordoned): shim {killed} killed; shims now {after:?}, seen back after {:.1} s",
        kill_at.elapsed().as_secs_f64()
    );

    // 2. An eviction is honoured: the shim is killed, then the pod deleted.
    let pods = |c| Api::<Pod>::namespaced(c, "default");
    apis.any(|c| async move {
        pods(c)
            .evict("server-1-pod-1", &EvictParams::default())
            .await
    })
    .await
    .unwrap();
    let start = clock::Clock::system().now();
    loop {
        let gone = apis
            .any(|c| async move { pods(c).get_opt("server-1-pod-1").await })
            .await
            .unwrap()
            .is_none();
        if gone {
            break;
        }
        assert!(
            start.elapsed() < BOUND,
            "the evicted pod is still in the API"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        shims(&lab, "server-1").len(),
        lab::lab_setup::PODS_PER_HOST - 1,
        "the evicted pod's shim is gone and the other runs"
    );

    // 3. A step-down through the actuator: etcd-only with `disable-agent`.
    let swap = format!("swap-{}", clock::Clock::system().unix_secs());
    hand.hold_lease(&swap, "server-3", "agent-1", &n.controller_identity)
        .await
        .unwrap();
    hand.ask(
        "server-3",
        Ask::StepDown {
            swap: &swap,
            cordon: false,
        },
    )
    .await
    .unwrap();
    let report = hand
        .wait_step_holding(
            "server-3",
            (&swap, "server-3", "agent-1", &n.controller_identity),
            ReportStep::StepDown,
            Duration::from_secs(180),
            &|r| println!("{r:?}"),
        )
        .await
        .expect("the step-down succeeds");
    println!(
        "step-down report: {report:?} ({} s from started to done, 5 s of them watching for shims)",
        report.updated_at - report.started_at
    );
    // No shim runs, and none comes back, for well over a kubelet's sync.
    let renewed = node_lease_renewed(&apis, "server-3").await;
    let watch = clock::Clock::system().now();
    while watch.elapsed() < Duration::from_secs(12) {
        let now = shims(&lab, "server-3");
        assert!(
            now.is_empty(),
            "shims run on server-3 at etcd-only, {:.1} s after the step-down: {now:?}",
            watch.elapsed().as_secs_f64()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // No kubelet runs there: its node Lease is not renewed (heartbeats every 2 s).
    assert_eq!(
        node_lease_renewed(&apis, "server-3").await,
        renewed,
        "server-3's node Lease was renewed at etcd-only"
    );
    assert!(
        m.active_state("k3s").unwrap() == "active",
        "etcd-only still runs the server unit"
    );
}
