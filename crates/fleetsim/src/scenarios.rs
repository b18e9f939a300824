//! Whole swaps in the simulated world: one scenario per ending.

use super::{Faults, Intrusion, World};
use fleetdecide::{fixtures::*, *};

/// The writes that touch a Node or take or release the Lease, in order,
/// as "kind node".
pub(super) fn write_kinds(writes: &[Action]) -> Vec<String> {
    writes
        .iter()
        .filter(|a| !matches!(a, Action::RenewLease | Action::MarkStep { .. }))
        .map(|a| {
            let s = serde_json::to_value(a).unwrap();
            let kind = s["action"].as_str().unwrap().to_string();
            match a.node() {
                Some(n) => format!("{kind} {n}"),
                None => kind,
            }
        })
        .collect()
}

fn settled_clean(w: &World) {
    let n1 = w.v.node("n1").unwrap();
    assert_eq!(classify(n1), Class::Agent, "{n1:?}");
    assert!(
        !n1.has_server_labels() && !n1.k3s.any() && !n1.cordoned,
        "{n1:?}"
    );
    assert!(!n1.marks.any_annotation(), "{n1:?}");
    assert_eq!(n1.marks.desired_role.as_deref(), Some("agent"));
    let n4 = w.v.node("n4").unwrap();
    assert!(is_healthy_voter(n4), "{n4:?}");
    assert!(!n4.marks.any_annotation(), "{n4:?}");
    assert!(w.v.nodes.iter().all(|n| !n.marks.any_annotation()));
    let l = w.v.lease.as_ref().unwrap();
    assert!(l.holder.is_none() && l.swap.is_none() && l.stopping.is_none());
    assert_eq!(w.v.nodes.iter().filter(|n| is_healthy_voter(n)).count(), 3);
}

#[test]
fn a_full_swap_takes_every_step_in_order_and_leaves_the_fleet_clean() {
    let mut w = World::new(
        fleet(),
        Faults {
            tick_secs: 2,
            ..Faults::default()
        },
    );
    let mut s = request("n1", "n4");
    let end = w.run(&mut s, 200);
    assert_eq!(
        end,
        Action::ReleaseLease {
            outcome: Outcome::Done { warning: None }
        }
    );
    assert_eq!(
        write_kinds(&w.writes),
        [
            "take-lease",
            "request-snapshot n2",
            "promote n4",
            "cordon n1",
            "step-down n1",
            "remove-member n1",
            "clean-up-server n1",
            "clear-swap-marks n1",
            "uncordon n1",
            "clear-swap-marks n4",
            "clear-swap-marks n2",
            "release-lease",
        ]
    );
    settled_clean(&w);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

#[test]
fn a_promotion_that_never_reaches_voter_is_rolled_back_and_its_member_removed() {
    let mut w = World::new(
        fleet(),
        Faults {
            promotion_stalls: true,
            tick_secs: 5,
            ..Faults::default()
        },
    );
    let end = w.run(&mut request("n1", "n4"), 400);
    let Action::ReleaseLease {
        outcome: Outcome::WoundDown { kind, reason },
    } = end
    else {
        panic!("{end:?}")
    };
    assert_eq!(kind, StopKind::Failed);
    assert!(matches!(reason, Reason::NotVoter { .. }), "{reason:?}");
    let kinds = write_kinds(&w.writes);
    assert!(kinds.contains(&"rollback n4".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"remove-member n4".to_string()), "{kinds:?}");
    assert!(
        !kinds
            .iter()
            .any(|k| k.ends_with(" n1") && !k.starts_with("clear")),
        "{kinds:?}"
    );
    // The cluster as it was.
    let n4 = w.v.node("n4").unwrap();
    assert_eq!(classify(n4), Class::Agent);
    assert!(!n4.has_server_labels() && !n4.marks.any_annotation());
    assert!(
        ["n1", "n2", "n3"]
            .iter()
            .all(|n| is_healthy_voter(w.v.node(n).unwrap()))
    );
    assert!(w.v.lease.as_ref().unwrap().swap.is_none());
}

#[test]
fn a_failed_step_down_stops_with_the_lease_released_and_a_resume_finishes_it() {
    let mut w = World::new(
        fleet(),
        Faults {
            step_down_fails: true,
            tick_secs: 2,
            ..Faults::default()
        },
    );
    let end = w.run(&mut request("n1", "n4"), 200);
    assert!(
        matches!(
            end,
            Action::Stop {
                step: SwapStep::StepDown,
                ..
            }
        ),
        "{end:?}"
    );
    let l = w.v.lease.as_ref().unwrap();
    assert!(l.holder.is_none() && l.stopped.is_some() && l.swap.is_some());
    // The host is fixed; the same swap is asked again.
    w.faults.step_down_fails = false;
    let mut again = SwapState {
        candidate: id("swap-2"),
        instance: "ctl-b".into(),
        ..request("n1", "n4")
    };
    let end = w.run(&mut again, 200);
    assert_eq!(
        end,
        Action::ReleaseLease {
            outcome: Outcome::Done { warning: None }
        }
    );
    settled_clean(&w);
}

#[test]
fn a_voter_forged_not_ready_by_a_status_writer_is_swapped_the_ordinary_way_and_nobody_else_is_touched()
 {
    // node-problem-detector's role holds a voter's `Ready` at False from the
    // start, its host up: the outgoing one (n1), then a bystander (n2, n3).
    for forged in [0, 1, 2] {
        let mut w = World::new(
            fleet(),
            Faults {
                tick_secs: 2,
                intruder_at: Some((0, forged, Intrusion::ForgedNotReady)),
                ..Faults::default()
            },
        );
        let end = w.run(&mut request("n1", "n4"), 400);
        assert!(w.violations.is_empty(), "{:?}", w.violations);
        let kinds = write_kinds(&w.writes);
        if forged == 0 {
            // Its own view vouches for it: promoted first, then stepped
            // down, and only then its member removed (the finish, which
            // waits for its agent Ready, may be held up by the forgery).
            let at = |k: &str| kinds.iter().position(|x| x == k);
            let (promote, step_down, removal) =
                (at("promote n4"), at("step-down n1"), at("remove-member n1"));
            assert!(
                promote < step_down && step_down < removal && promote.is_some(),
                "{end:?}: {kinds:?}"
            );
        } else {
            // A bystander forged NotReady is never cordoned, stepped down
            // or removed (the swap's gates count it unhealthy and may
            // refuse: it can stop a swap, never remove a member).
            let bystander = format!("n{}", forged + 1);
            for k in ["cordon", "step-down", "remove-member", "rollback"] {
                assert!(!kinds.contains(&format!("{k} {bystander}")), "{kinds:?}");
            }
        }
    }
}

#[test]
fn a_down_voter_is_replaced_without_a_step_down_and_told_it_comes_home_by_itself() {
    let mut v = fleet();
    take_down(&mut v, "n1");
    let mut w = World::new(
        v,
        Faults {
            tick_secs: 2,
            ..Faults::default()
        },
    );
    let end = w.run(&mut request("n1", "n4"), 200);
    let Action::ReleaseLease {
        outcome: Outcome::Done { warning: Some(w_) },
    } = end
    else {
        panic!("{end:?}")
    };
    assert!(w_.contains("comes home as an agent by itself"), "{w_}");
    let kinds = write_kinds(&w.writes);
    assert_eq!(
        kinds[..5],
        [
            "take-lease",
            "request-snapshot n2",
            "cordon n1",
            "remove-member n1",
            "promote n4"
        ],
        "{kinds:?}"
    );
    assert!(!kinds.contains(&"step-down n1".to_string()), "{kinds:?}");
    assert_eq!(classify(w.v.node("n1").unwrap()), Class::Removed);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

#[test]
fn a_controller_killed_at_every_step_resumes_and_finishes_cleanly() {
    for kill in 0..30 {
        let mut w = World::new(
            fleet(),
            Faults {
                restart_at: Some(kill),
                tick_secs: 2,
                ..Faults::default()
            },
        );
        let end = w.run(&mut request("n1", "n4"), 400);
        assert_eq!(
            end,
            Action::ReleaseLease {
                outcome: Outcome::Done { warning: None }
            },
            "killed at tick {kill}"
        );
        settled_clean(&w);
        // Never a step asked twice under different ids, never a write
        // while another process held the Lease.
        let promotes = w
            .writes
            .iter()
            .filter(|a| matches!(a, Action::Promote { .. }))
            .count();
        assert_eq!(promotes, 1, "killed at tick {kill}");
    }
}

#[test]
fn a_controller_whose_lease_is_stolen_writes_nothing_more() {
    for steal in 1..12 {
        let mut w = World::new(
            fleet(),
            Faults {
                steal_at: Some(steal),
                tick_secs: 2,
                ..Faults::default()
            },
        );
        let end = w.run(&mut request("n1", "n4"), 200);
        if matches!(end, Action::ReleaseLease { .. }) {
            continue; // the swap ended before the theft
        }
        assert!(
            matches!(end, Action::Lost { .. }),
            "stolen at {steal}: {end:?}"
        );
        assert_eq!(
            w.v.lease.as_ref().unwrap().holder.as_deref(),
            Some("intruder")
        );
    }
}

#[test]
fn the_dry_run_plan_names_the_snapshot_voter_and_the_join_node() {
    let p = plan(&fleet(), "n1", "n4");
    assert!(all_pass(&p.gates));
    assert!(p.steps[1].step.contains("ask n2"), "{:?}", p.steps);
    assert!(
        p.steps[2].step.contains("promote n4 joining n2"),
        "{:?}",
        p.steps
    );
    assert_eq!(p.steps.len(), 8);
}

#[test]
fn the_dry_run_shows_each_steps_lowest_tolerance_with_the_step_down_restart_as_the_dip() {
    let p = plan(&fleet(), "n1", "n4");
    let t: Vec<(usize, usize, Option<usize>)> = p
        .steps
        .iter()
        .map(|s| {
            (
                s.tolerance.voting,
                s.tolerance.healthy,
                s.tolerance.may_fail,
            )
        })
        .collect();
    assert_eq!(
        t,
        [
            (3, 3, Some(1)), // the Lease
            (3, 3, Some(1)), // the snapshot
            (3, 3, Some(1)), // the promotion: a learner, then a fourth voter
            (4, 3, Some(0)), // the step-down: n1's etcd restarts
            (4, 4, Some(1)), // the removal: four voters until it is done
            (3, 3, Some(1)),
            (3, 3, Some(1)),
            (3, 3, Some(1)),
        ]
    );
    // An outgoing voter that is down is removed without a restart: the
    // tolerance rises once it has left (the removal's lowest moment is
    // before).
    let mut v = fleet();
    take_down(&mut v, "n1");
    let p = plan(&v, "n1", "n4");
    let fails: Vec<Option<usize>> = p.steps.iter().map(|s| s.tolerance.may_fail).collect();
    assert_eq!(
        fails,
        [
            Some(0),
            Some(0),
            Some(0),
            Some(0),
            Some(0),
            Some(1),
            Some(1)
        ]
    );
}
