//! The swap, state by state: one observation, the one action it leads to.
//! From the start to the drain here; a down voter, the step-down, the
//! removal and the finish in [`down_and_step_down`]; the Lease, the pause,
//! the clock's edges and the clean-up in [`lease_pause_and_clean_up`].

use crate::fixtures::*;
use crate::*;
use protocol::report::{Detail, Phase, Report, ReportStep};

mod down_and_step_down;
mod lease_pause_and_clean_up;

#[test]
fn a_healthy_fleet_takes_the_lease_for_a_fresh_swap() {
    assert_eq!(
        next_action(&fleet(), &request("n1", "n4")),
        Action::TakeLease {
            swap: id("swap-1"),
            out: Some(name("n1")),
            incoming: Some(name("n4")),
            start: Start::Fresh
        }
    );
}

#[test]
fn the_snapshot_is_asked_of_a_healthy_voter_that_is_not_the_outgoing_one() {
    let v = ours(fleet(), Some(SwapStep::Snapshot));
    assert_eq!(
        next_action(&v, &taken()),
        Action::RequestSnapshot {
            node: name("n2"),
            swap: id("swap-1")
        }
    );
    let v2 = ours(fleet(), Some(SwapStep::Snapshot));
    assert_eq!(snapshot_voter(&v2, "n2").unwrap().as_str(), "n1");
}

#[test]
fn a_new_step_is_marked_on_the_lease_before_anything_else() {
    let v = ours(fleet(), None);
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::Snapshot
        }
    );
}

#[test]
fn the_lease_is_renewed_when_a_third_of_its_duration_has_passed() {
    let mut v = ours(fleet(), Some(SwapStep::Snapshot));
    v.now += 20;
    assert_eq!(next_action(&v, &taken()), Action::RenewLease);
}

#[test]
fn the_promotion_waits_for_the_snapshot_report() {
    let mut v = ours(fleet(), Some(SwapStep::Snapshot));
    node_mut(&mut v, "n2").marks.snapshot_request = Some("swap-1".into());
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            step: SwapStep::Snapshot,
            ..
        }
    ));
    node_mut(&mut v, "n2").report = Some(report(
        "swap-1",
        ReportStep::Snapshot,
        Phase::Done,
        Some(Detail::Snapshot),
    ));
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::Promote
        }
    );
    let v = {
        let mut v = v;
        v.lease.as_mut().unwrap().step = Some("promote".into());
        v
    };
    assert_eq!(
        next_action(&v, &taken()),
        Action::Promote {
            node: name("n4"),
            join: name("n2"),
            join_address: Some("10.0.0.2".into()),
            swap: id("swap-1")
        }
    );
}

#[test]
fn a_failed_snapshot_winds_the_swap_down_before_anything_changes() {
    let mut v = ours(fleet(), Some(SwapStep::Snapshot));
    node_mut(&mut v, "n2").marks.snapshot_request = Some("swap-1".into());
    let mut r = report("swap-1", ReportStep::Snapshot, Phase::Failed, None);
    r.reason = Some("etcd said no".into());
    node_mut(&mut v, "n2").report = Some(r);
    let Action::BeginStop { note } = next_action(&v, &taken()) else {
        panic!()
    };
    assert_eq!(note.kind, StopKind::Failed);
    assert_eq!(
        note.reason,
        Reason::HostReported {
            node: "n2".into(),
            step: ReportStep::Snapshot,
            phase: Phase::Failed,
            reason: "etcd said no".into(),
        }
    );
}

#[test]
fn a_snapshot_that_is_never_reported_times_out() {
    let mut v = ours(fleet(), Some(SwapStep::Snapshot));
    node_mut(&mut v, "n2").marks.snapshot_request = Some("swap-1".into());
    v.lease.as_mut().unwrap().step_since = Some(NOW - 121);
    assert!(matches!(
        next_action(&v, &taken()),
        Action::BeginStop { .. }
    ));
}

#[test]
fn the_promotion_joins_a_healthy_voter_that_is_not_the_outgoing_one() {
    let mut v = fleet();
    take_down(&mut v, "n2");
    // n2 down: preflight would refuse; join_voter alone still skips it.
    assert_eq!(join_voter(&v, "n1").unwrap().as_str(), "n3");
    assert_eq!(join_voter(&fleet(), "n2").unwrap().as_str(), "n1");
}

#[test]
fn a_gate_shut_right_before_the_promotion_winds_the_swap_down_as_refused() {
    let mut v = ours(after_promotion(), Some(SwapStep::Promote));
    *node_mut(&mut v, "n4") = agent("n4", true);
    take_down(&mut v, "n3");
    let Action::BeginStop { note } = next_action(&v, &taken()) else {
        panic!()
    };
    assert_eq!(note.kind, StopKind::Refused);
    let Reason::GatesShut { failures } = &note.reason else {
        panic!("{:?}", note.reason)
    };
    assert!(failures.starts_with("voters-healthy: "), "{failures}");
}

#[test]
fn a_failed_promotion_is_wound_down_with_a_rollback() {
    let mut v = ours(after_promotion(), Some(SwapStep::Promote));
    let n4 = node_mut(&mut v, "n4");
    n4.etcd_is_voter = false;
    let mut r = report(
        "swap-1",
        ReportStep::Promote,
        Phase::Failed,
        Some(Detail::Learner),
    );
    r.reason = Some("k3s did not start".into());
    n4.report = Some(r);
    let Action::BeginStop { note } = next_action(&v, &taken()) else {
        panic!()
    };
    assert!(
        matches!(&note.reason, Reason::HostReported { step: ReportStep::Promote, reason, .. } if reason == "k3s did not start"),
        "{:?}",
        note.reason
    );
    v.lease.as_mut().unwrap().stopping = Some(serde_json::to_string(&note).unwrap());
    assert_eq!(
        next_action(&v, &taken()),
        Action::Rollback {
            node: name("n4"),
            swap: id("swap-1")
        }
    );
}

#[test]
fn a_wind_down_rolls_back_an_incoming_host_whose_step_mark_another_writer_rewrote() {
    // The promotion was asked (the Lease, the controller's alone, says
    // so), then a `patch nodes` holder rewrote n4's step mark to a
    // step-down: its learner must still be rolled back.
    let mut v = winding_down_an_unreported_promotion(SwapStep::Promote);
    v.lease.as_mut().unwrap().asked = Some("promote".into());
    node_mut(&mut v, "n4").marks.step = Some("step-down".into());
    let rollback = Action::Rollback {
        node: name("n4"),
        swap: id("swap-1"),
    };
    assert_eq!(next_action(&v, &taken()), rollback);
    // With no ask left on the Lease or the Node (a swap resumed under a
    // new id, its marks gone), etcd's own view listing n4's member says it
    // joined: rolled back all the same.
    let mut resumed = v.clone();
    resumed.lease.as_mut().unwrap().asked = None;
    node_mut(&mut resumed, "n4").marks.step = None;
    assert!(resumed.etcd().of_node("n4").is_some());
    assert_eq!(next_action(&resumed, &taken()), rollback);
    // Asked (the Lease records it), and its mark rewritten again: the
    // rollback's step is entered, the ask made again within its timeout,
    // and the wind-down stopped past it rather than asking without end.
    v.lease.as_mut().unwrap().asked = Some("rollback".into());
    assert!(
        matches!(
            next_action(&v, &taken()),
            Action::MarkStep {
                step: SwapStep::Rollback
            }
        ),
        "{:?}",
        next_action(&v, &taken())
    );
    let l = v.lease.as_mut().unwrap();
    (l.step, l.step_since) = (Some("rollback".into()), Some(NOW - 10));
    assert_eq!(next_action(&v, &taken()), rollback);
    v.lease.as_mut().unwrap().step_since = Some(NOW - 10_000);
    let a = next_action(&v, &taken());
    assert!(
        matches!(
            &a,
            Action::Stop {
                step: SwapStep::Rollback,
                ..
            }
        ),
        "{a:?}"
    );
}

#[test]
fn a_rollback_asked_and_marked_is_waited_for_not_asked_again() {
    let mut v = winding_down_an_unreported_promotion(SwapStep::Rollback);
    v.lease.as_mut().unwrap().asked = Some("rollback".into());
    let n4 = node_mut(&mut v, "n4");
    n4.marks.step = Some("rollback".into());
    n4.marks.swap = Some("swap-1".into());
    n4.report = Some(report(
        "swap-1",
        ReportStep::Promote,
        Phase::Failed,
        Some(Detail::Learner),
    ));
    let a = next_action(&v, &taken());
    assert!(
        matches!(
            a,
            Action::Wait {
                step: SwapStep::Rollback,
                ..
            }
        ),
        "{a:?}"
    );
    // The mark of another swap's id is no ask of this one: asked again.
    node_mut(&mut v, "n4").marks.swap = Some("swap-0".into());
    assert!(matches!(next_action(&v, &taken()), Action::Rollback { .. }));
}

#[test]
fn a_rollback_of_an_incoming_host_that_votes_in_etcd_stops_when_stopping_it_would_lose_quorum() {
    // etcd promoted n4 (every server's view lists it as a voter) before k3s
    // wrote its `EtcdIsVoter`, and the promotion failed; n2 is down.
    let mut v = winding_down_an_unreported_promotion(SwapStep::Promote);
    // With every other voter healthy, stopping n4 leaves 3 of 4: rolled back.
    assert!(matches!(next_action(&v, &taken()), Action::Rollback { .. }));
    take_down(&mut v, "n2");
    let a = next_action(&v, &taken());
    let Action::Stop {
        step, reason, left, ..
    } = &a
    else {
        panic!("{a:?}")
    };
    assert_eq!(*step, SwapStep::Rollback);
    let text = reason.to_string();
    assert!(text.contains("quorum-at-host-stop"), "{text}");
    assert!(text.contains("2 healthy of 4"), "{text}");
    assert!(left.contains("nothing was rolled back"), "{left}");
    // By the Nodes alone n4 does not vote yet: without etcd's view, the
    // Nodes' count (2 healthy of 3) lets the rollback go.
    for n in &mut v.nodes {
        if let Some(h) = n.host.as_mut() {
            h.etcd = None;
        }
    }
    assert!(gate_quorum_at_host_stop(&v, "n4").passed);
}

#[test]
fn a_promotion_that_never_reaches_voter_times_out_into_a_rollback() {
    let mut v = ours(after_promotion(), Some(SwapStep::Promote));
    let n4 = node_mut(&mut v, "n4");
    n4.etcd_is_voter = false;
    n4.report = Some(report(
        "swap-1",
        ReportStep::Promote,
        Phase::Progress,
        Some(Detail::Learner),
    ));
    // etcd lists it as a voter already: the note says so.
    let mut listed = v.clone();
    listed.lease.as_mut().unwrap().step_since = Some(NOW - 121);
    let Action::BeginStop { note } = next_action(&listed, &taken()) else {
        panic!()
    };
    assert!(
        matches!(
            note.reason,
            Reason::NotVoter {
                reached: Reached::VoterInEtcdOnly,
                ..
            }
        ),
        "{:?}",
        note.reason
    );
    // etcd lists it as the learner it is.
    refresh_etcd_views(&mut v, |_| true);
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            step: SwapStep::Promote,
            ..
        }
    ));
    v.lease.as_mut().unwrap().step_since = Some(NOW - 121);
    let Action::BeginStop { note } = next_action(&v, &taken()) else {
        panic!()
    };
    assert_eq!(
        note.reason,
        Reason::NotVoter {
            node: "n4".into(),
            secs: 120,
            reached: Reached::Learner,
        }
    );
}

#[test]
fn the_outgoing_voter_is_cordoned_then_asked_to_step_down() {
    let v = ours(after_promotion(), Some(SwapStep::StepDown));
    assert_eq!(
        next_action(&v, &taken()),
        Action::Cordon { node: name("n1") }
    );
    let mut v = v;
    node_mut(&mut v, "n1").cordoned = true;
    assert_eq!(
        next_action(&v, &taken()),
        Action::StepDown {
            node: name("n1"),
            swap: id("swap-1")
        }
    );
}

/// A pod on the outgoing Node that a controller owns (a ReplicaSet's, a
/// Job's): what a drain evicts without `--force`.
fn pod_on_out(name: &str) -> PodFacts {
    PodFacts {
        namespace: "ci".into(),
        name: name.into(),
        controlled: true,
        ..PodFacts::default()
    }
}

/// A pod on the outgoing Node that no controller owns.
fn bare_pod_on_out(name: &str) -> PodFacts {
    PodFacts {
        controlled: false,
        ..pod_on_out(name)
    }
}

/// After the promotion, n1 cordoned, with pods on it.
fn cordoned_with_pods(step: SwapStep, pods: Vec<PodFacts>) -> FleetView {
    let mut v = ours(after_promotion(), Some(step));
    node_mut(&mut v, "n1").cordoned = true;
    v.pods = pods;
    v
}

#[test]
fn a_cordoned_outgoing_voter_with_pods_enters_the_drain_then_has_its_pods_evicted() {
    let v = cordoned_with_pods(SwapStep::StepDown, vec![pod_on_out("job-1")]);
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::Drain
        }
    );
    let mut v = cordoned_with_pods(
        SwapStep::Drain,
        vec![
            pod_on_out("job-2"),
            pod_on_out("job-1"),
            PodFacts {
                daemon_set: true,
                ..pod_on_out("ds")
            },
            PodFacts {
                terminating: true,
                ..pod_on_out("going")
            },
        ],
    );
    v.settings.drain_grace = Some(30);
    assert_eq!(
        next_action(&v, &taken()),
        Action::Evict {
            node: name("n1"),
            pods: vec![
                PodRef {
                    namespace: "ci".into(),
                    name: "job-1".into()
                },
                PodRef {
                    namespace: "ci".into(),
                    name: "job-2".into()
                },
            ],
            grace: Some(30),
        }
    );
}

#[test]
fn the_step_down_waits_while_evicted_pods_terminate_and_is_asked_once_none_is_left() {
    let v = cordoned_with_pods(
        SwapStep::Drain,
        vec![PodFacts {
            terminating: true,
            ..pod_on_out("job-1")
        }],
    );
    let Action::Wait {
        step: SwapStep::Drain,
        reason: Awaiting::Drain { node, pods },
        deadline: Some(_),
    } = next_action(&v, &taken())
    else {
        panic!("{:?}", next_action(&v, &taken()))
    };
    assert_eq!((node.as_str(), pods.as_str()), ("n1", "ci/job-1"));
    // Drained (only a DaemonSet's pod and a finished one are left): the
    // step-down's own timer starts, then the step-down is asked.
    let left = vec![
        PodFacts {
            daemon_set: true,
            ..pod_on_out("ds")
        },
        PodFacts {
            finished: true,
            ..pod_on_out("done")
        },
    ];
    let v = cordoned_with_pods(SwapStep::Drain, left.clone());
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::StepDown
        }
    );
    let v = cordoned_with_pods(SwapStep::StepDown, left);
    assert_eq!(
        next_action(&v, &taken()),
        Action::StepDown {
            node: name("n1"),
            swap: id("swap-1")
        }
    );
}

#[test]
fn a_drain_past_its_timeout_stops_the_swap_naming_the_pods_left_and_asks_no_step_down() {
    let mut v = cordoned_with_pods(SwapStep::Drain, vec![pod_on_out("job-1")]);
    v.settings.timeouts.drain = 60;
    v.lease.as_mut().unwrap().step_since = Some(NOW - 59);
    assert!(matches!(next_action(&v, &taken()), Action::Evict { .. }));
    v.lease.as_mut().unwrap().step_since = Some(NOW - 60);
    let Action::Stop {
        step: SwapStep::Drain,
        reason,
        left,
        ..
    } = next_action(&v, &taken())
    else {
        panic!("{:?}", next_action(&v, &taken()))
    };
    assert_eq!(
        reason,
        Reason::NotDrained {
            node: "n1".into(),
            secs: 60,
            pods: "ci/job-1".into()
        }
    );
    assert!(left.contains("n1 is still a voter, cordoned"), "{left}");
}

#[test]
fn a_pod_no_controller_owns_stops_the_drain_naming_it_before_any_eviction() {
    let v = cordoned_with_pods(
        SwapStep::Drain,
        vec![
            pod_on_out("job-1"),
            bare_pod_on_out("debug"),
            PodFacts {
                terminating: true,
                ..bare_pod_on_out("going")
            },
        ],
    );
    let Action::Stop {
        step: SwapStep::Drain,
        reason,
        left,
        next,
    } = next_action(&v, &taken())
    else {
        panic!("{:?}", next_action(&v, &taken()))
    };
    assert_eq!(
        reason,
        Reason::Unmanaged {
            node: "n1".into(),
            pods: "ci/debug".into()
        }
    );
    assert!(
        reason.to_string().contains("no controller owns"),
        "{reason}"
    );
    assert!(left.contains("no step-down asked"), "{left}");
    assert!(next.contains("--force"), "{next}");
    // Before the drain's step is marked, the mark comes first, as for any
    // drain: the stop is recorded in the drain step.
    let v = cordoned_with_pods(SwapStep::StepDown, vec![bare_pod_on_out("debug")]);
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::Drain
        }
    );
}

#[test]
fn a_forced_drain_evicts_the_pods_no_controller_owns_with_the_others() {
    let mut v = cordoned_with_pods(
        SwapStep::Drain,
        vec![pod_on_out("job-1"), bare_pod_on_out("debug")],
    );
    v.settings.drain_force = true;
    assert_eq!(
        next_action(&v, &taken()),
        Action::Evict {
            node: name("n1"),
            pods: vec![
                PodRef {
                    namespace: "ci".into(),
                    name: "debug".into()
                },
                PodRef {
                    namespace: "ci".into(),
                    name: "job-1".into()
                },
            ],
            grace: None,
        }
    );
}

#[test]
fn a_pod_no_controller_owns_that_is_already_terminating_only_keeps_the_drain_waiting() {
    let v = cordoned_with_pods(
        SwapStep::Drain,
        vec![PodFacts {
            terminating: true,
            ..bare_pod_on_out("going")
        }],
    );
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            reason: Awaiting::Drain { .. },
            ..
        }
    ));
}

#[test]
fn a_pod_whose_name_could_not_address_it_is_never_evicted_but_keeps_the_drain_open() {
    let v = cordoned_with_pods(SwapStep::Drain, vec![pod_on_out("../../nodes/n2")]);
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            reason: Awaiting::Drain { .. },
            ..
        }
    ));
}

#[test]
fn the_gates_are_checked_during_the_drain_and_a_pause_halts_it() {
    let mut v = cordoned_with_pods(SwapStep::Drain, vec![pod_on_out("job-1")]);
    take_down(&mut v, "n2");
    let Action::Wait {
        step: SwapStep::Drain,
        reason: Awaiting::Gates { .. },
        ..
    } = next_action(&v, &taken())
    else {
        panic!("{:?}", next_action(&v, &taken()))
    };
    let mut v = cordoned_with_pods(SwapStep::Drain, vec![pod_on_out("job-1")]);
    v.lease.as_mut().unwrap().paused = true;
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::Paused
        }
    );
}

#[test]
fn a_down_outgoing_voter_is_not_drained() {
    let mut v = cordoned_with_pods(SwapStep::StepDown, vec![pod_on_out("job-1")]);
    take_down(&mut v, "n1");
    assert_eq!(
        next_action(&v, &taken()),
        Action::RemoveMember { node: name("n1") }
    );
}

#[test]
fn a_snapshot_done_counts_only_from_the_voter_the_lease_names() {
    // The request copied onto n3 (any `patch nodes` holder can), which
    // reports it done: no snapshot the controller asked for.
    let mut v = ours(fleet(), Some(SwapStep::Snapshot));
    node_mut(&mut v, "n2").marks.snapshot_request = Some("swap-1".into());
    let n3 = node_mut(&mut v, "n3");
    n3.marks.snapshot_request = Some("swap-1".into());
    n3.report = Some(report(
        "swap-1",
        ReportStep::Snapshot,
        Phase::Done,
        Some(Detail::Snapshot),
    ));
    let a = next_action(&v, &taken());
    assert!(
        matches!(a, Action::Wait { reason: Awaiting::Snapshot { ref node, .. }, .. } if node == "n2"),
        "{a:?}"
    );
    // n2's own done moves the swap on.
    node_mut(&mut v, "n2").report = Some(report(
        "swap-1",
        ReportStep::Snapshot,
        Phase::Done,
        Some(Detail::Snapshot),
    ));
    assert!(!matches!(next_action(&v, &taken()), Action::Wait { .. }));
}

/// Swap-1 in `step`, winding down since n4 did not report its promotion
/// (n4 not yet `EtcdIsVoter`), with the wind-down's note on the Lease.
fn winding_down_an_unreported_promotion(step: SwapStep) -> FleetView {
    let mut v = ours(after_promotion(), Some(step));
    node_mut(&mut v, "n4").etcd_is_voter = false;
    let note = StopNote {
        kind: StopKind::Failed,
        reason: Reason::NotReported {
            node: "n4".into(),
            step: ReportStep::Promote,
            secs: 120,
        },
    };
    v.lease.as_mut().unwrap().stopping = Some(serde_json::to_string(&note).unwrap());
    v
}
