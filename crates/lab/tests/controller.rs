//! The controller, `fleet-role`, driving swaps in the lab: real etcd members,
//! a real kube-apiserver per server, the actuator on every host. The labs run
//! one at a time (a dozen processes each, on two cores).

mod support;

use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use lab::{
    hosts::StandinHosts,
    scenario::{self, Hand},
    world::{self},
};
use support::{ONE_LAB_AT_A_TIME, bin_dir, lab, say};

fn fleet_role() -> PathBuf {
    let p = bin_dir().join("fleet-role");
    assert!(
        p.is_file(),
        "{} is missing: build the workspace's binaries first",
        p.display()
    );
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_role_swaps_a_voter_for_a_standby_with_every_write_succeeding() {
    let _one = ONE_LAB_AT_A_TIME.lock().await;
    let lab = lab(3, 2).await;
    let r = scenario::swap_with_controller(
        &StandinHosts(&lab.spec),
        &fleet_role(),
        "server-3",
        "agent-1",
        &say,
    )
    .await
    .expect("the swap");
    support::assert_every_promise_kept(&r, "server-3", "agent-1");
    assert!(!r.snapshot.is_empty(), "no snapshot reported");
    // The old voter carries no server role label any more and is schedulable.
    let node = Hand::new(&lab.spec)
        .unwrap()
        .node("server-3")
        .await
        .unwrap();
    let labels = node.metadata.labels.unwrap_or_default();
    assert!(
        !labels.contains_key(protocol::names::K3S_ETCD_ROLE_LABEL),
        "{labels:?}"
    );
    assert!(!node.spec.and_then(|s| s.unschedulable).unwrap_or(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_role_run_replaces_a_voter_whose_k3s_stopped() {
    let _one = ONE_LAB_AT_A_TIME.lock().await;
    let lab = lab(3, 1).await;
    let config = lab.spec.dir.join("fleet-role.toml");
    std::fs::write(
        &config,
        "grace_period_secs = 5\nheartbeat_grace_secs = 10\nsettle_secs = 5\npoll_millis = 500\n",
    )
    .unwrap();
    // server-2's k3s stops for good (as a host that died would).
    world::systemctl(&lab.spec, "server-2", &["stop", "k3s"]).unwrap();
    let stopped = Instant::now();
    let mut run = tokio::process::Command::new(fleet_role())
        .args([
            "--kubeconfig",
            &world::kubeconfig(&lab.spec).display().to_string(),
            "--config",
            &config.display().to_string(),
            "run",
        ])
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut replaced = false;
    while stopped.elapsed() < Duration::from_secs(180) {
        if let Ok(m) = scenario::members(&lab.spec).await {
            let voters: Vec<&str> = m
                .iter()
                .filter(|x| !x.is_learner)
                .map(|x| x.name.as_str())
                .collect();
            if voters.len() == 3
                && voters.iter().any(|v| v.starts_with("agent-1-"))
                && !voters.iter().any(|v| v.starts_with("server-2-"))
            {
                replaced = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let _ = run.kill().await;
    assert!(
        replaced,
        "run did not replace the stopped voter within 180 s"
    );
    println!(
        "replaced {:.1}s after its k3s stopped",
        stopped.elapsed().as_secs_f64()
    );
    let root = lab.spec.root("agent-1");
    assert!(standins::units::max_active_k3s(&root) <= 1);
}
