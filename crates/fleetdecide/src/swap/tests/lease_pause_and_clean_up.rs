//! The Lease held or lost, the pause, the clock's edges from the API, the
//! clean-up and the waits' words.

use super::down_and_step_down::{
    removed, snapshot_done_with_the_outgoing_voter_down, stepping_down,
};
use super::*;

#[test]
fn times_at_the_ends_of_the_clock_from_the_api_neither_panic_nor_open_a_gate() {
    for extreme in [i64::MIN, i64::MAX] {
        let mut v = ours(fleet(), Some(SwapStep::Promote));
        for n in &mut v.nodes {
            n.lease_renewed_at = Some(extreme);
            n.ready_since = Some(extreme);
        }
        let l = v.lease.as_mut().unwrap();
        l.step_since = Some(extreme);
        l.renew_time = Some(extreme);
        l.duration_secs = Some(extreme);
        l.last_swap = Some(format!(
            "{{\"swap\":\"s0\",\"out\":\"n1\",\"incoming\":\"n4\",\"at\":{extreme},\"outcome\":{{\"outcome\":\"done\",\"warning\":null}}}}"
        ));
        let mut h = v.clone();
        apply_heartbeats(&mut h);
        let a = next_action(&h, &taken());
        assert!(
            !matches!(a, Action::Promote { .. } | Action::RemoveMember { .. }),
            "{a:?}"
        );
        let _ = run_decision(&h);
        let _ = plan(&h, "n1", "n4");
        let mut free = h.clone();
        free.lease.as_mut().unwrap().holder = Some("someone".into());
        let _ = preflight(&free, "n1", "n4");
    }
}

#[test]
fn a_promotion_after_a_down_voter_was_removed_waits_for_its_gates_then_stops_when_they_stay_shut() {
    let mut v = snapshot_done_with_the_outgoing_voter_down(SwapStep::Promote);
    removed(&mut v);
    node_mut(&mut v, "n1").cordoned = true;
    node_mut(&mut v, "n3").ready = false;
    let a = next_action(&v, &taken());
    let Action::Wait {
        reason: Awaiting::Gates { before, failures },
        ..
    } = &a
    else {
        panic!("{a:?}")
    };
    assert_eq!(*before, Write::Promotion);
    assert!(failures.starts_with("voters-healthy: "), "{failures}");
    v.lease.as_mut().unwrap().step_since = Some(NOW - 10_000);
    let Action::Stop { reason, .. } = next_action(&v, &taken()) else {
        panic!()
    };
    assert!(
        matches!(
            reason,
            Reason::GatesStayedShut {
                before: Write::Promotion,
                ..
            }
        ),
        "{reason:?}"
    );
    node_mut(&mut v, "n3").ready = true;
    v.lease.as_mut().unwrap().step_since = Some(NOW);
    assert!(matches!(next_action(&v, &taken()), Action::Promote { .. }));
}

#[test]
fn a_lease_naming_this_instance_for_another_holder_pair_or_swap_is_lost_and_says_who_holds_it() {
    let v = ours(fleet(), Some(SwapStep::Promote));
    let lost = |v: &FleetView, s: &SwapState| match next_action(v, s) {
        Action::Lost { reason } => reason,
        other => panic!("{other:?}"),
    };
    let mut other = v.clone();
    other.lease.as_mut().unwrap().holder = Some("someone".into());
    assert_eq!(
        lost(&other, &taken()),
        "the regrade Lease is held by someone (instance ctl-a) for swap swap-1"
    );
    for (out, inc) in [("n2", "n4"), ("n1", "n5")] {
        let mut other = v.clone();
        let l = other.lease.as_mut().unwrap();
        l.swap_out = Some(out.into());
        l.swap_in = Some(inc.into());
        lost(&other, &taken());
    }
    let mut s = taken();
    s.taken = Some(id("swap-9"));
    lost(&v, &s);
    let mut gone = v.clone();
    gone.lease = None;
    assert_eq!(lost(&gone, &taken()), "the regrade Lease is gone");
    assert!(!matches!(next_action(&v, &taken()), Action::Lost { .. }));
}

#[test]
fn once_k3s_is_asked_to_remove_a_down_outgoing_voter_the_swap_moves_on_to_the_removal() {
    let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
    let n1 = node_mut(&mut v, "n1");
    n1.ready = false;
    n1.cordoned = true;
    n1.k3s.remove = Some("true".into());
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::Removal
        }
    );
    // k3s removed it (and dropped its annotation): the same.
    let n1 = node_mut(&mut v, "n1");
    n1.k3s.remove = None;
    n1.k3s.removed_node_name = n1.k3s.node_name.clone();
    refresh_etcd_views(&mut v, |_| true);
    assert!(matches!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::CleanUp
        }
    ));
}

#[test]
fn a_swap_whose_outgoing_node_was_deleted_goes_to_the_clean_up_once_the_incoming_votes() {
    let mut v = ours(after_promotion(), Some(SwapStep::Promote));
    v.nodes.retain(|n| n.name != "n1");
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::CleanUp
        }
    );
    // Deleted during the step-down, with the incoming host not Ready right
    // now: k3s removes a deleted Node's member itself, so still the clean-up.
    let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
    v.nodes.retain(|n| n.name != "n1");
    node_mut(&mut v, "n4").ready = false;
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::CleanUp
        }
    );
    // Deleted before the promotion finished: the promotion goes on.
    let mut v = ours(after_promotion(), Some(SwapStep::Promote));
    v.nodes.retain(|n| n.name != "n1");
    node_mut(&mut v, "n4").ready = false;
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            step: SwapStep::Promote,
            ..
        }
    ));
}

/// The outgoing host finished as an agent; the swap is in its clean-up.
fn finished_and_cleaning_up() -> FleetView {
    let mut v = stepping_down(Some(Detail::EtcdOnly), Phase::Done);
    v.lease.as_mut().unwrap().step = Some("clean-up".into());
    removed(&mut v);
    let n1 = node_mut(&mut v, "n1");
    let mut r = report(
        "swap-1",
        ReportStep::Finish,
        Phase::Done,
        Some(Detail::AgentReady),
    );
    r.started_at = NOW - 3;
    n1.report = Some(r);
    n1.lease_renewed_at = Some(NOW);
    v
}

#[test]
fn the_clean_up_removes_k3s_annotations_left_without_server_labels_then_uncordons() {
    let mut v = finished_and_cleaning_up();
    let n1 = node_mut(&mut v, "n1");
    n1.etcd_label = false;
    n1.control_plane_label = false;
    n1.master_label = false;
    assert_eq!(
        next_action(&v, &taken()),
        Action::CleanUpServer { node: name("n1") }
    );
    let n1 = node_mut(&mut v, "n1");
    n1.k3s = K3sEtcd::default();
    assert_eq!(
        next_action(&v, &taken()),
        Action::ClearSwapMarks { node: name("n1") }
    );
    node_mut(&mut v, "n1").marks = FleetMarks {
        desired_role: Some("agent".into()),
        ..FleetMarks::default()
    };
    assert_eq!(
        next_action(&v, &taken()),
        Action::Uncordon { node: name("n1") }
    );
}

#[test]
fn a_promotion_counts_as_done_only_with_its_mark_a_healthy_voter_and_a_voter_report() {
    // after_promotion() is promoted: the step-down comes next.
    let v = ours(after_promotion(), Some(SwapStep::Promote));
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::StepDown
        }
    );
    let not_yet = |f: fn(&mut NodeFacts)| {
        let mut v = ours(after_promotion(), Some(SwapStep::Promote));
        f(node_mut(&mut v, "n4"));
        next_action(&v, &taken())
    };
    for (what, a) in [
        (
            "reported for another step",
            not_yet(|n| n.report.as_mut().unwrap().step = ReportStep::Snapshot),
        ),
        (
            "reported learner",
            not_yet(|n| n.report.as_mut().unwrap().detail = Some(Detail::Learner)),
        ),
        (
            "reported started",
            not_yet(|n| n.report.as_mut().unwrap().phase = Phase::Started),
        ),
        ("NotReady", not_yet(|n| n.ready = false)),
    ] {
        assert!(
            !matches!(
                a,
                Action::MarkStep {
                    step: SwapStep::StepDown
                } | Action::Cordon { .. }
            ),
            "{what}: {a:?}"
        );
    }
}

#[test]
fn a_promotion_wait_says_its_last_milestone_and_a_timeout_how_far_it_got() {
    let at = |detail: Option<Detail>, phase: Phase, voter: bool| {
        let mut v = ours(after_promotion(), Some(SwapStep::Promote));
        let n4 = node_mut(&mut v, "n4");
        n4.etcd_is_voter = voter;
        n4.report = Some(report("swap-1", ReportStep::Promote, phase, detail));
        // etcd lists n4 as its Node shows it.
        refresh_etcd_views(&mut v, |_| true);
        v
    };
    let v = at(Some(Detail::Learner), Phase::Progress, false);
    assert!(
        matches!(
            next_action(&v, &taken()),
            Action::Wait {
                reason: Awaiting::Promotion {
                    milestone: Some("learner"),
                    ..
                },
                ..
            }
        ),
        "{:?}",
        next_action(&v, &taken())
    );
    for (detail, phase, reached) in [
        (Some(Detail::Learner), Phase::Progress, Reached::Learner),
        (
            Some(Detail::Voter),
            Phase::Progress,
            Reached::VoterNotHealthy,
        ),
        (Some(Detail::Voter), Phase::Done, Reached::VoterNotHealthy),
        (None, Phase::Started, Reached::Started),
    ] {
        let mut v = at(detail, phase, false);
        v.lease.as_mut().unwrap().step_since = Some(NOW - 121);
        let Action::BeginStop { note } = next_action(&v, &taken()) else {
            panic!("{detail:?} {phase:?}")
        };
        assert!(
            matches!(note.reason, Reason::NotVoter { reached: r, .. } if r == reached),
            "{detail:?} {phase:?}: {:?}",
            note.reason
        );
    }
    let mut v = at(None, Phase::Started, false);
    node_mut(&mut v, "n4").report = None;
    v.lease.as_mut().unwrap().step_since = Some(NOW - 121);
    let Action::BeginStop { note } = next_action(&v, &taken()) else {
        panic!()
    };
    assert!(matches!(
        note.reason,
        Reason::NotVoter {
            reached: Reached::NoReport,
            ..
        }
    ));
}

#[test]
fn a_failed_finish_stops_the_swap_naming_the_host_and_how_to_finish_it() {
    let mut v = stepping_down(Some(Detail::EtcdOnly), Phase::Done);
    v.lease.as_mut().unwrap().step = Some("finish".into());
    removed(&mut v);
    let mut r = report("swap-1", ReportStep::Finish, Phase::Failed, None);
    r.reason = Some("k3s-agent did not start".into());
    node_mut(&mut v, "n1").report = Some(r);
    let Action::Stop {
        step, reason, next, ..
    } = next_action(&v, &taken())
    else {
        panic!("{:?}", next_action(&v, &taken()))
    };
    assert_eq!(step, SwapStep::Finish);
    assert_eq!(
        reason,
        Reason::HostReported {
            node: "n1".into(),
            step: ReportStep::Finish,
            phase: Phase::Failed,
            reason: "k3s-agent did not start".into(),
        }
    );
    assert!(next.contains("demote-local"), "{next}");
}

#[test]
fn a_node_lease_renewed_in_the_very_second_the_finish_began_is_not_yet_a_fresh_heartbeat() {
    let mut n = voter("n1", 1);
    let mut r = report(
        "swap-1",
        ReportStep::Finish,
        Phase::Done,
        Some(Detail::AgentReady),
    );
    r.started_at = NOW - 3;
    n.report = Some(r);
    n.lease_renewed_at = Some(NOW - 3);
    assert!(!finished(&n));
    n.lease_renewed_at = Some(NOW - 2);
    assert!(finished(&n));
}

#[test]
fn the_snapshot_falls_back_to_the_outgoing_voter_only_when_it_is_the_one_healthy_voter() {
    let mut v = fleet();
    v.nodes.retain(|n| n.name == "n1" || n.name == "n4");
    assert_eq!(snapshot_voter(&v, "n1"), Some(name("n1")));
    // A stepped-down member is healthy but not asked: the outgoing voter is.
    let mut n2 = voter("n2", 2);
    n2.report = Some(report(
        "swap-0",
        ReportStep::StepDown,
        Phase::Done,
        Some(Detail::EtcdOnly),
    ));
    v.nodes.push(n2);
    assert_eq!(snapshot_voter(&v, "n1"), Some(name("n1")));
    node_mut(&mut v, "n1").ready = false;
    assert_eq!(snapshot_voter(&v, "n1"), None);
}

/// A swap winding down after a failed promotion; n4 asked to roll back.
fn rolling_back(phase: Phase, detail: Option<Detail>) -> FleetView {
    let mut v = ours(after_promotion(), Some(SwapStep::Rollback));
    v.lease.as_mut().unwrap().stopping = Some(
        serde_json::to_string(&StopNote {
            kind: StopKind::Failed,
            reason: Reason::GatesShut {
                failures: "x".into(),
            },
        })
        .unwrap(),
    );
    let n4 = node_mut(&mut v, "n4");
    n4.marks.desired_role = Some("agent".into());
    n4.marks.step = Some("rollback".into());
    n4.marks.join_node = None;
    n4.report = Some(report("swap-1", ReportStep::Rollback, phase, detail));
    v
}

#[test]
fn a_rollback_that_fails_stops_the_wind_down_naming_both_reasons() {
    let mut v = rolling_back(Phase::Failed, None);
    node_mut(&mut v, "n4").report.as_mut().unwrap().reason = Some("k3s-agent did not start".into());
    let Action::Stop { step, reason, .. } = next_action(&v, &taken()) else {
        panic!("{:?}", next_action(&v, &taken()))
    };
    assert_eq!(step, SwapStep::Rollback);
    let Reason::Then { first, then } = reason else {
        panic!("{reason:?}")
    };
    assert!(matches!(*first, Reason::GatesShut { .. }));
    assert_eq!(
        *then,
        Reason::HostReported {
            node: "n4".into(),
            step: ReportStep::Rollback,
            phase: Phase::Failed,
            reason: "k3s-agent did not start".into(),
        }
    );
}

#[test]
fn a_rolled_back_host_loses_every_server_trace_before_its_marks_are_cleared() {
    // Rolled back, its member gone from the Node: only one trace each time.
    let traces: [fn(&mut NodeFacts); 3] = [
        |n| n.etcd_is_voter = true,
        |n| n.k3s.node_address = Some("10.0.0.4".into()),
        |n| n.master_label = true,
    ];
    for trace in traces {
        let mut v = rolling_back(Phase::Done, Some(Detail::AgentReady));
        let n4 = node_mut(&mut v, "n4");
        n4.etcd_label = false;
        n4.control_plane_label = false;
        n4.master_label = false;
        n4.k3s = K3sEtcd::default();
        n4.etcd_is_voter = false;
        trace(n4);
        assert_eq!(
            next_action(&v, &taken()),
            Action::CleanUpServer { node: name("n4") },
            "{:?}",
            v.node("n4")
        );
    }
}

#[test]
fn a_step_down_never_reported_stops_the_swap_at_its_timeout() {
    let mut v = stepping_down(None, Phase::Started);
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            reason: Awaiting::StepDown { .. },
            ..
        }
    ));
    v.lease.as_mut().unwrap().step_since = Some(NOW - 10_000);
    let Action::Stop { reason, .. } = next_action(&v, &taken()) else {
        panic!()
    };
    assert_eq!(
        reason,
        Reason::NotReported {
            node: "n1".into(),
            step: ReportStep::StepDown,
            secs: v.settings.timeouts.step_down,
        }
    );
}

#[test]
fn a_snapshot_reported_earlier_counts_once_the_host_has_moved_on_to_another_step() {
    let with_history = |phase: Phase| {
        let mut v = ours(fleet(), Some(SwapStep::Snapshot));
        let n2 = node_mut(&mut v, "n2");
        n2.marks.snapshot_request = Some("swap-1".into());
        let snap = report("swap-1", ReportStep::Snapshot, phase, None);
        // The host went on to refuse something else of another swap since.
        n2.report = Some(Report::next(
            Some(&snap),
            Some(id("swap-0")),
            ReportStep::Promote,
            Phase::Refused,
            NOW,
        ));
        v
    };
    assert_eq!(
        next_action(&with_history(Phase::Done), &taken()),
        Action::MarkStep {
            step: SwapStep::Promote
        }
    );
    let Action::BeginStop { note } = next_action(&with_history(Phase::Failed), &taken()) else {
        panic!()
    };
    assert!(
        matches!(&note.reason, Reason::HostReported { step: ReportStep::Snapshot, reason, .. } if reason == "reported earlier in this swap"),
        "{:?}",
        note.reason
    );
    // A settled step of another kind is no snapshot.
    let mut v = ours(fleet(), Some(SwapStep::Snapshot));
    let n2 = node_mut(&mut v, "n2");
    n2.marks.snapshot_request = Some("swap-1".into());
    let promoted = report("swap-1", ReportStep::Promote, Phase::Done, None);
    n2.report = Some(Report::next(
        Some(&promoted),
        Some(id("swap-0")),
        ReportStep::StepDown,
        Phase::Refused,
        NOW,
    ));
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            reason: Awaiting::Snapshot { .. },
            ..
        }
    ));
}

#[test]
fn a_rolled_back_hosts_member_is_removed_only_while_the_others_keep_quorum() {
    let mut v = rolling_back(Phase::Done, Some(Detail::AgentReady));
    let l = v.lease.as_mut().unwrap();
    (l.step, l.step_since) = (Some(SwapStep::RemoveIncoming.as_str().into()), Some(NOW));
    assert!(v.node("n4").unwrap().has_member());
    assert_eq!(
        next_action(&v, &taken()),
        Action::RemoveMember { node: name("n4") }
    );
    // Two of the other voters down: the removal would leave 1 healthy of
    // 3, so it waits.
    take_down(&mut v, "n2");
    take_down(&mut v, "n3");
    let a = next_action(&v, &taken());
    assert!(
        matches!(
            a,
            Action::Wait {
                step: SwapStep::RemoveIncoming,
                ..
            }
        ),
        "{a:?}"
    );
}
