//! The controller killed (SIGKILL, no chance to clean up) at each step of a
//! swap and started again: the new process waits for the dead one's Lease
//! to lapse, takes the same swap over, and finishes it, or winds it down,
//! without harm. The scripted fleet reacts to each step only after a moment,
//! so that each step is seen and the kill lands in it.

mod support;

use std::time::Duration;

use support::{CONFIG, Harness, three_voters};
use tokio::process::Child;

/// Waits until the Lease shows `step` (or `ready` says so), then SIGKILLs
/// the controller. Returns whether it was killed (false: it finished first).
async fn kill_at(h: &Harness, child: &mut Child, step: &str) -> bool {
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            eprintln!("the controller ended ({status}) before step {step} was seen");
            return false;
        }
        if h.lease_annotation("swap-step").await.as_deref() == Some(step) {
            child.start_kill().unwrap();
            let status = child.wait().await.unwrap();
            assert_eq!(status.code(), None, "killed by a signal");
            return true;
        }
        assert!(
            started.elapsed() < support::DEADLINE,
            "step {step} never showed on the Lease"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn killed_at(step: &str) {
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.set(|f| f.react_after = Duration::from_millis(1500));
    let mut child = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    if kill_at(&h, &mut child, step).await {
        let run = h.run(&["swap", "--out", "n1", "--in", "n4"]).await;
        run.expect(0);
        assert!(
            run.stdout.contains("take over the Lease of swap"),
            "{}",
            run.stdout
        );
        eprintln!(
            "killed at {step}; the restart finished in {:.1} s",
            run.took.as_secs_f64()
        );
    }
    h.assert_swapped("n1", "n4").await;
    // Each step was asked once: the restarted controller took the swap over
    // under its own id rather than starting another.
    let promotions = h
        .fleet
        .log()
        .iter()
        .filter(|l| l.as_str() == "n4: promote")
        .count();
    assert_eq!(promotions, 1, "{:?}", h.fleet.log());
}

#[tokio::test]
async fn a_controller_killed_while_waiting_for_the_snapshot_resumes_and_finishes() {
    killed_at("snapshot").await;
}

#[tokio::test]
async fn a_controller_killed_during_the_promotion_resumes_and_finishes() {
    killed_at("promote").await;
}

#[tokio::test]
async fn a_controller_killed_during_the_step_down_resumes_and_finishes() {
    killed_at("step-down").await;
}

#[tokio::test]
async fn a_controller_killed_during_the_member_removal_resumes_and_finishes() {
    killed_at("removal").await;
}

#[tokio::test]
async fn a_controller_killed_while_the_host_finishes_resumes_and_finishes() {
    killed_at("finish").await;
}

#[tokio::test]
async fn a_controller_killed_during_the_clean_up_resumes_and_finishes() {
    killed_at("clean-up").await;
}

#[tokio::test]
async fn a_controller_killed_during_a_rollback_resumes_and_winds_the_swap_down() {
    let config = CONFIG.replace("promote = 90", "promote = 5");
    let h = Harness::start(&three_voters(), &config).await;
    h.fleet.set(|f| {
        f.react_after = Duration::from_millis(1500);
        f.stall_promotion.insert("n4".into());
    });
    let mut child = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    assert!(kill_at(&h, &mut child, "rollback").await);
    let run = h.run(&["swap", "--out", "n1", "--in", "n4"]).await;
    run.expect(2);
    assert!(
        run.stdout.contains("the cluster is as it was"),
        "{}",
        run.stdout
    );
    h.assert_lease_released().await;
    let n4 = h.node("n4").await;
    assert!(
        !n4.metadata
            .labels
            .unwrap_or_default()
            .contains_key(protocol::names::K3S_ETCD_ROLE_LABEL)
    );
    assert!(h.fleet.violations().is_empty());
}
