//! The controller killed (SIGKILL, no chance to clean up) at each step of a
//! swap and started again: the new process waits for the dead one's Lease
//! to lapse, takes the same swap over, and finishes it, or winds it down,
//! without harm.
//!
//! Each test holds the controller in its step rather than racing it: the
//! fleet double does not react to the step (or, for the clean-up, which
//! waits for nobody, the controller may not patch Nodes) until the kill has
//! landed, and each asserts that it did land there.

mod support;

use std::time::Duration;

use support::{CONFIG, Harness, three_voters};
use tokio::process::Child;

/// Waits until the Lease shows `step` and `held` holds (what keeps the
/// controller there), then SIGKILLs the controller and checks that the
/// Lease still shows `step`: the kill landed in it.
async fn kill_at(h: &Harness, child: &mut Child, step: &str, held: impl Fn() -> bool) {
    let started = clock::Clock::system().now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the controller ended ({status}) before it was held at step {step}");
        }
        if h.lease_annotation("swap-step").await.as_deref() == Some(step) && held() {
            break;
        }
        assert!(
            started.elapsed() < support::DEADLINE,
            "the controller was never held at step {step}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.start_kill().unwrap();
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), None, "killed by a signal: {status}");
    assert_eq!(
        h.lease_annotation("swap-step").await.as_deref(),
        Some(step),
        "the controller was killed in step {step}"
    );
}

/// Runs the same swap again and checks it took the dead one's over and
/// finished it, asking each step once.
async fn restart_finishes(h: &Harness, step: &str) {
    let run = h.run(&["swap", "--out", "n1", "--in", "n4"]).await;
    restarted(h, step, run).await;
}

/// Checks that the restarted controller's `run` took the swap over and
/// finished it, each step asked once.
async fn restarted(h: &Harness, step: &str, run: support::Run) {
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

/// Holds the fleet's reaction to `step` (named as the Lease names it;
/// `hold` as the double does), kills the controller there, lets go and
/// restarts it.
async fn killed_at(step: &str, hold: &str) {
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.set(|f| {
        f.hold.insert(hold.into());
    });
    let mut child = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    kill_at(&h, &mut child, step, || h.fleet.has_held(hold)).await;
    h.fleet.set(|f| {
        f.hold.clear();
    });
    restart_finishes(&h, step).await;
}

#[tokio::test]
async fn a_controller_killed_while_waiting_for_the_snapshot_resumes_and_finishes() {
    killed_at("snapshot", "snapshot").await;
}

#[tokio::test]
async fn a_controller_killed_during_the_promotion_resumes_and_finishes() {
    killed_at("promote", "promote").await;
}

#[tokio::test]
async fn a_controller_killed_during_the_step_down_resumes_and_finishes() {
    killed_at("step-down", "step-down").await;
}

#[tokio::test]
async fn a_controller_killed_during_the_member_removal_resumes_and_finishes() {
    killed_at("removal", "removal").await;
}

#[tokio::test]
async fn a_controller_killed_while_the_host_finishes_resumes_and_finishes() {
    killed_at("finish", "finish").await;
}

/// The state an interrupted hand-run swap leaves (Ctrl-C, a closed lid, a
/// dropped ssh) once it is past the promotion: four voters and a swap on a
/// Lease nobody renews. `status` calls it degraded (exit 5), naming the
/// command that takes it up and the even voter count, until that command
/// has finished the swap.
#[tokio::test]
async fn a_swap_whose_controller_died_after_the_promotion_is_degraded_with_the_command_that_takes_it_up()
 {
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.set(|f| {
        f.hold.insert("step-down".into());
    });
    let mut child = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    kill_at(&h, &mut child, "step-down", || {
        h.fleet.has_held("step-down")
    })
    .await;
    h.fleet.set(|f| {
        f.hold.clear();
    });
    // Held a little longer by the dead one's Lease; then abandoned.
    h.wait_for("the dead controller's Lease to lapse", || async {
        h.run(&["status"]).await.code == Some(5)
    })
    .await;
    let status = h.run(&["status"]).await;
    status.expect(5);
    assert!(
        status
            .stdout
            .contains("is recorded on the regrade Lease and no controller holds it")
            && status
                .stdout
                .contains("`fleet-role swap --out n1 --in n4` takes it up"),
        "{}",
        status.stdout
    );
    assert!(
        status
            .stdout
            .contains("etcd has 4 voting members, an even count"),
        "{}",
        status.stdout
    );
    let json = h.run(&["status", "--output", "json"]).await;
    json.expect(5);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let degraded: Vec<&str> = v["degraded"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d.as_str())
        .collect();
    assert!(
        degraded[0].contains("no controller holds it") && degraded[1].starts_with("etcd has 4"),
        "{degraded:?}"
    );
    // The runbook's command, as docs/recovery.md gives it, takes it up.
    let mut runs = h
        .run_runbook("swap-abandoned", &[("OUT", "n1"), ("IN", "n4")])
        .await;
    assert_eq!(runs.len(), 1);
    restarted(&h, "step-down", runs.pop().unwrap()).await;
    h.run(&["status"]).await.expect(0);
}

#[tokio::test]
async fn a_controller_killed_during_the_clean_up_resumes_and_finishes() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    // The clean-up waits for nobody: hold the host's finish, take the
    // controller's Node patches away (its finish marks are written by the
    // time the host is asked), then let the finish go. The controller
    // enters the clean-up on the Lease and retries its first Node write.
    h.fleet.set(|f| {
        f.hold.insert("finish".into());
    });
    let mut child = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    h.wait_for("the host asked to finish", || async {
        h.fleet.has_held("finish")
    })
    .await;
    h.allow_node_patches(false).await;
    h.fleet.set(|f| {
        f.hold.clear();
    });
    kill_at(&h, &mut child, "clean-up", || true).await;
    h.allow_node_patches(true).await;
    restart_finishes(&h, "clean-up").await;
}

#[tokio::test]
async fn a_controller_killed_during_a_rollback_resumes_and_winds_the_swap_down() {
    let config = CONFIG.replace("promote = 90", "promote = 5");
    let h = Harness::start(&three_voters(), &config).await;
    h.fleet.set(|f| {
        f.stall_promotion.insert("n4".into());
        f.hold.insert("rollback".into());
    });
    let mut child = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    kill_at(&h, &mut child, "rollback", || h.fleet.has_held("rollback")).await;
    h.fleet.set(|f| {
        f.hold.clear();
    });
    let run = h.run(&["swap", "--out", "n1", "--in", "n4"]).await;
    run.expect(3);
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
