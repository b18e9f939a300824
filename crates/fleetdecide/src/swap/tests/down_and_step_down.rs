//! A down outgoing voter, the step-down, the removal and the finish.

use super::*;

#[test]
fn a_host_whose_report_turns_to_an_unknown_protocol_version_mid_swap_is_not_cordoned_or_asked() {
    let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
    node_mut(&mut v, "n1").report_protocol = Some("2".into());
    let a = next_action(&v, &taken());
    let Action::Wait {
        step: SwapStep::StepDown,
        reason: Awaiting::Gates { failures, .. },
        ..
    } = &a
    else {
        panic!("{a:?}")
    };
    assert!(
        failures.starts_with("known-protocol: n1's report"),
        "{failures}"
    );
    node_mut(&mut v, "n1").report_protocol = Some("1".into());
    assert_eq!(
        next_action(&v, &taken()),
        Action::Cordon { node: name("n1") }
    );
}

#[test]
fn a_down_outgoing_voter_is_removed_without_a_step_down() {
    let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
    take_down(&mut v, "n1");
    node_mut(&mut v, "n1").cordoned = true;
    assert_eq!(
        next_action(&v, &taken()),
        Action::RemoveMember { node: name("n1") }
    );
}

/// The snapshot is done and n1, the outgoing voter, is down.
pub(super) fn snapshot_done_with_the_outgoing_voter_down(step: SwapStep) -> FleetView {
    let mut v = ours(fleet(), Some(step));
    let n2 = node_mut(&mut v, "n2");
    n2.marks.snapshot_request = Some("swap-1".into());
    n2.report = Some(report(
        "swap-1",
        ReportStep::Snapshot,
        Phase::Done,
        Some(Detail::Snapshot),
    ));
    take_down(&mut v, "n1");
    v
}

#[test]
fn a_down_outgoing_voter_is_removed_before_the_promotion_since_etcd_adds_no_member_meanwhile() {
    let mut v = snapshot_done_with_the_outgoing_voter_down(SwapStep::Removal);
    assert_eq!(
        next_action(&v, &taken()),
        Action::Cordon { node: name("n1") }
    );
    node_mut(&mut v, "n1").cordoned = true;
    assert_eq!(
        next_action(&v, &taken()),
        Action::RemoveMember { node: name("n1") }
    );
    node_mut(&mut v, "n1").k3s.remove = Some("true".into());
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            step: SwapStep::Removal,
            ..
        }
    ));
    removed(&mut v);
    v.lease.as_mut().unwrap().step = Some("promote".into());
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
fn a_promotion_asked_before_the_outgoing_voter_went_down_waits_for_its_removal() {
    let mut v = snapshot_done_with_the_outgoing_voter_down(SwapStep::Promote);
    let n4 = node_mut(&mut v, "n4");
    n4.marks = FleetMarks {
        desired_role: Some("server".into()),
        swap: Some("swap-1".into()),
        step: Some("promote".into()),
        join_node: Some("n2".into()),
        snapshot_request: None,
        protocol: Some("1".into()),
    };
    n4.report = Some(report("swap-1", ReportStep::Promote, Phase::Started, None));
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::Removal
        }
    );
    v.lease.as_mut().unwrap().step = Some("removal".into());
    assert_eq!(
        next_action(&v, &taken()),
        Action::Cordon { node: name("n1") }
    );
}

#[test]
fn a_standby_asked_to_promote_is_not_required_ready_while_it_joins() {
    let mut v = snapshot_done_with_the_outgoing_voter_down(SwapStep::Removal);
    let n4 = node_mut(&mut v, "n4");
    n4.marks.swap = Some("swap-1".into());
    n4.marks.step = Some("promote".into());
    // Its agent is stopped and its server has not joined: no heartbeat.
    n4.ready = false;
    assert_eq!(
        next_action(&v, &taken()),
        Action::Cordon { node: name("n1") }
    );
    // Before it is asked, a NotReady standby shuts the gate.
    node_mut(&mut v, "n4").marks = FleetMarks::default();
    assert!(matches!(
        next_action(&v, &taken()),
        Action::BeginStop { .. }
    ));
}

#[test]
fn a_promotion_failing_after_the_down_voter_was_removed_stops_rather_than_winds_down() {
    let mut v = snapshot_done_with_the_outgoing_voter_down(SwapStep::Promote);
    removed(&mut v);
    node_mut(&mut v, "n1").cordoned = true;
    let n4 = node_mut(&mut v, "n4");
    n4.marks.swap = Some("swap-1".into());
    n4.marks.step = Some("promote".into());
    let mut r = report("swap-1", ReportStep::Promote, Phase::Failed, None);
    r.reason = Some("k3s did not start".into());
    n4.report = Some(r);
    let Action::Stop { step, left, .. } = next_action(&v, &taken()) else {
        panic!("{:?}", next_action(&v, &taken()))
    };
    assert_eq!(step, SwapStep::Promote);
    assert!(left.contains("one voter fewer"), "{left}");
}

#[test]
fn a_down_outgoing_voter_is_not_removed_when_that_would_cost_quorum() {
    let mut v = snapshot_done_with_the_outgoing_voter_down(SwapStep::Removal);
    // n2 is down too: 3 members, 1 healthy; removing n1 leaves 1 of 2.
    take_down(&mut v, "n2");
    let Action::BeginStop { note } = next_action(&v, &taken()) else {
        panic!()
    };
    assert_eq!(note.kind, StopKind::Refused);
    let Reason::GatesShut { failures } = &note.reason else {
        panic!("{:?}", note.reason)
    };
    assert!(failures.contains("quorum-after-removal: "), "{failures}");
    // Once the down voter is cordoned (or the standby asked), the swap has
    // touched the fleet: it waits for the gates instead of winding down.
    for cordoned in [true, false] {
        let mut v = v.clone();
        node_mut(&mut v, "n1").cordoned = cordoned;
        if !cordoned {
            node_mut(&mut v, "n4").marks.step = Some("promote".into());
        }
        assert!(
            matches!(
                next_action(&v, &taken()),
                Action::Wait {
                    reason: Awaiting::Gates {
                        before: Write::Removal,
                        ..
                    },
                    ..
                }
            ),
            "cordoned {cordoned}: {:?}",
            next_action(&v, &taken())
        );
    }
}

#[test]
fn the_step_down_waits_for_the_gates_and_stops_when_they_stay_shut() {
    let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
    take_down(&mut v, "n2");
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            step: SwapStep::StepDown,
            ..
        }
    ));
    v.lease.as_mut().unwrap().step_since = Some(NOW - 121);
    let Action::Stop {
        step, left, next, ..
    } = next_action(&v, &taken())
    else {
        panic!()
    };
    assert_eq!(step, SwapStep::StepDown);
    assert!(left.contains("n4 is a voter"), "{left}");
    assert!(next.contains("fleet-role swap --out n1 --in n4"), "{next}");
}

pub(super) fn stepping_down(detail: Option<Detail>, phase: Phase) -> FleetView {
    let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
    let n1 = node_mut(&mut v, "n1");
    n1.cordoned = true;
    n1.marks = FleetMarks {
        desired_role: Some("agent".into()),
        swap: Some("swap-1".into()),
        step: Some("step-down".into()),
        ..FleetMarks::default()
    };
    n1.report = Some(report("swap-1", ReportStep::StepDown, phase, detail));
    v
}

#[test]
fn the_member_is_removed_once_the_outgoing_host_reports_etcd_only() {
    let v = stepping_down(None, Phase::Started);
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            step: SwapStep::StepDown,
            ..
        }
    ));
    let v = stepping_down(Some(Detail::EtcdOnly), Phase::Done);
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::Removal
        }
    );
    let mut v = v;
    v.lease.as_mut().unwrap().step = Some("removal".into());
    assert_eq!(
        next_action(&v, &taken()),
        Action::RemoveMember { node: name("n1") }
    );
}

/// Seed 54495 of the simulation: a step-down done whose report has moved
/// on (the host took another swap's step since, so only its settled
/// history shows it), while the incoming host no longer reads as promoted.
/// The swap's order and the step-down's wait must read the step-down one
/// way: once both the promotion's step and the removal's were marked in
/// turn, each read sending the Lease back to the other, without end.
#[test]
fn a_step_down_done_before_the_report_moved_on_sends_the_swap_to_the_removal_from_every_step() {
    let moved_on = |step: SwapStep| {
        let mut v = stepping_down(Some(Detail::EtcdOnly), Phase::Done);
        v.lease.as_mut().unwrap().step = Some(step.as_str().into());
        let n1 = node_mut(&mut v, "n1");
        let done = n1.report.clone();
        n1.report = Some(Report::next(
            done.as_ref(),
            Some(id("swap-0")),
            ReportStep::Snapshot,
            Phase::Refused,
            NOW,
        ));
        // The incoming host's promotion is no longer in its report.
        node_mut(&mut v, "n4").report = None;
        v
    };
    assert_eq!(
        next_action(&moved_on(SwapStep::Promote), &taken()),
        Action::MarkStep {
            step: SwapStep::Removal
        }
    );
    let a = next_action(&moved_on(SwapStep::Removal), &taken());
    assert!(
        !matches!(a, Action::MarkStep { .. }),
        "a swap in its removal with the step-down done marks another step: {a:?}"
    );
}

#[test]
fn a_failed_step_down_stops_the_swap_and_says_how_to_resume() {
    let mut v = stepping_down(None, Phase::Failed);
    if let Some(r) = node_mut(&mut v, "n1").report.as_mut() {
        r.reason = Some("etcd did not serve again".into());
    }
    let Action::Stop { reason, next, .. } = next_action(&v, &taken()) else {
        panic!()
    };
    assert_eq!(
        reason,
        Reason::HostReported {
            node: "n1".into(),
            step: ReportStep::StepDown,
            phase: Phase::Failed,
            reason: "etcd did not serve again".into(),
        }
    );
    assert!(next.contains("fleet-role swap --out n1 --in n4"));
}

#[test]
fn the_removal_is_not_asked_while_it_would_cost_quorum() {
    let mut v = stepping_down(Some(Detail::EtcdOnly), Phase::Done);
    v.lease.as_mut().unwrap().step = Some("removal".into());
    take_down(&mut v, "n2");
    take_down(&mut v, "n3");
    let a = next_action(&v, &taken());
    assert!(
        matches!(
            a,
            Action::Wait {
                step: SwapStep::Removal,
                ..
            }
        ),
        "{a:?}"
    );
}

/// k3s removed n1's member: its Node says so, and the servers' views of
/// etcd no longer list it.
pub(super) fn removed(v: &mut FleetView) {
    let n1 = node_mut(v, "n1");
    n1.k3s.removed_node_name = n1.k3s.node_name.take();
    n1.k3s.node_address = None;
    n1.k3s.remove = Some("true".into());
    refresh_etcd_views(v, |_| true);
}

#[test]
fn a_member_k3s_marks_removed_while_etcd_still_lists_it_is_not_taken_as_gone() {
    let mut v = stepping_down(Some(Detail::EtcdOnly), Phase::Done);
    v.lease.as_mut().unwrap().step = Some("removal".into());
    v.lease.as_mut().unwrap().step_since = Some(NOW);
    // k3s's RemovePeer matched no member (an address mismatch) yet wrote
    // `removed-node-name`: the servers' views still list n1's member.
    let n1 = node_mut(&mut v, "n1");
    n1.k3s.removed_node_name = n1.k3s.node_name.clone();
    n1.k3s.remove = None;
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            step: SwapStep::Removal,
            reason: Awaiting::MemberRemoval { .. },
            ..
        }
    ));
    v.now += 121;
    for n in &mut v.nodes {
        if let Some(h) = n.host.as_mut() {
            h.heartbeat_at = v.now;
            if let Some(e) = h.etcd.as_mut() {
                e.read_at = v.now;
            }
        }
    }
    v.lease.as_mut().unwrap().renew_time = Some(v.now);
    let Action::Stop { step, next, .. } = next_action(&v, &taken()) else {
        panic!("{:?}", next_action(&v, &taken()))
    };
    assert_eq!(step, SwapStep::Removal);
    assert!(next.contains("etcd still lists n1-0123abcd"), "{next}");
    // Once etcd no longer lists it, the removal is over.
    refresh_etcd_views(&mut v, |_| true);
    assert_ne!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::Removal
        }
    );
}

#[test]
fn the_server_labels_stay_until_the_agent_is_ready_with_a_fresh_node_lease() {
    let mut v = stepping_down(Some(Detail::EtcdOnly), Phase::Done);
    v.lease.as_mut().unwrap().step = Some("finish".into());
    removed(&mut v);
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            step: SwapStep::Finish,
            ..
        }
    ));
    // The finish is done, but the node Lease was renewed before it began.
    let n1 = node_mut(&mut v, "n1");
    let mut r = report(
        "swap-1",
        ReportStep::Finish,
        Phase::Done,
        Some(Detail::AgentReady),
    );
    r.started_at = NOW - 3;
    n1.report = Some(r);
    n1.lease_renewed_at = Some(NOW - 10);
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            step: SwapStep::Finish,
            ..
        }
    ));
    node_mut(&mut v, "n1").lease_renewed_at = Some(NOW);
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::CleanUp
        }
    );
    v.lease.as_mut().unwrap().step = Some("clean-up".into());
    assert_eq!(
        next_action(&v, &taken()),
        Action::CleanUpServer { node: name("n1") }
    );
}

#[test]
fn a_not_ready_agent_is_not_finished() {
    let mut n = voter("n1", 1);
    let mut r = report(
        "swap-1",
        ReportStep::Finish,
        Phase::Done,
        Some(Detail::AgentReady),
    );
    r.started_at = NOW - 3;
    n.report = Some(r);
    assert!(finished(&n));
    n.ready = false;
    assert!(!finished(&n));
}

#[test]
fn losing_the_lease_to_another_holder_stops_every_write() {
    let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
    v.lease.as_mut().unwrap().holder = Some("intruder".into());
    assert!(matches!(next_action(&v, &taken()), Action::Lost { .. }));
    v.lease.as_mut().unwrap().instance = Some("other".into());
    assert!(matches!(next_action(&v, &taken()), Action::Lost { .. }));
    v.lease = None;
    assert!(matches!(next_action(&v, &taken()), Action::Lost { .. }));
}

#[test]
fn a_restarted_controller_waits_for_its_former_self_then_takes_the_same_swap_over() {
    let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
    let restarted = SwapState {
        instance: "ctl-b".into(),
        candidate: id("swap-2"),
        ..request("n1", "n4")
    };
    assert!(matches!(
        next_action(&v, &restarted),
        Action::WaitForLease { .. }
    ));
    v.now += 61;
    assert_eq!(
        next_action(&v, &restarted),
        Action::TakeLease {
            swap: id("swap-1"),
            out: Some(name("n1")),
            incoming: Some(name("n4")),
            start: Start::Abandoned
        }
    );
}

#[test]
fn a_stopped_swap_is_resumed_under_a_new_id() {
    let mut v = stepping_down(None, Phase::Failed);
    let l = v.lease.as_mut().unwrap();
    l.holder = None;
    l.instance = None;
    l.stopped = Some("the step-down failed".into());
    let again = SwapState {
        instance: "ctl-b".into(),
        candidate: id("swap-2"),
        ..request("n1", "n4")
    };
    assert_eq!(
        next_action(&v, &again),
        Action::TakeLease {
            swap: id("swap-2"),
            out: Some(name("n1")),
            incoming: Some(name("n4")),
            start: Start::Stopped
        }
    );
    // Under the new id, the step-down is asked again.
    let l = v.lease.as_mut().unwrap();
    l.holder = Some("fleet-role".into());
    l.instance = Some("ctl-b".into());
    l.swap = Some("swap-2".into());
    l.stopped = None;
    l.step = Some("step-down".into());
    let again = SwapState {
        taken: Some(id("swap-2")),
        ..again
    };
    assert_eq!(
        next_action(&v, &again),
        Action::StepDown {
            node: name("n1"),
            swap: id("swap-2")
        }
    );
}

/// Simulation seed 3965: a swap resumed under a new id at its step-down,
/// the outgoing voter down for good and the incoming host no voter any
/// more, waited for its gates without end. Gates that stay shut past the
/// step's timeout stop it, as before the first ask.
#[test]
fn a_step_down_asked_again_under_a_new_id_stops_when_its_gates_stay_shut_past_its_timeout() {
    let mut v = stepping_down(None, Phase::Failed);
    let l = v.lease.as_mut().unwrap();
    l.swap = Some("swap-2".into());
    l.step = Some("step-down".into());
    // The incoming host is no healthy voter: the removal's gates are shut.
    node_mut(&mut v, "n4").ready = false;
    let again = SwapState {
        taken: Some(id("swap-2")),
        candidate: id("swap-2"),
        ..taken()
    };
    let a = next_action(&v, &again);
    assert!(
        matches!(
            a,
            Action::Wait {
                reason: Awaiting::Gates {
                    before: Write::StepDown,
                    ..
                },
                ..
            }
        ),
        "{a:?}"
    );
    v.lease.as_mut().unwrap().step_since = Some(NOW - 10_000);
    let Action::Stop { step, reason, .. } = next_action(&v, &again) else {
        panic!("{:?}", next_action(&v, &again))
    };
    assert_eq!(step, SwapStep::StepDown);
    assert!(
        matches!(
            reason,
            Reason::GatesStayedShut {
                before: Write::StepDown,
                ..
            }
        ),
        "{reason:?}"
    );
}

#[test]
fn a_paused_swap_halts_at_its_next_safe_point_and_its_timer_stops() {
    let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
    v.lease.as_mut().unwrap().paused = true;
    assert_eq!(
        next_action(&v, &taken()),
        Action::MarkStep {
            step: SwapStep::Paused
        }
    );
    v.lease.as_mut().unwrap().step = Some("paused".into());
    v.now += 10; // within the renewal period
    assert_eq!(
        next_action(&v, &taken()),
        Action::Paused {
            step: SwapStep::StepDown
        }
    );
    // Long after the step-down's timeout, still halted, not stopped.
    let mut later = v.clone();
    later.lease.as_mut().unwrap().renew_time = Some(NOW + 1000);
    later.now = NOW + 1000;
    // The actuators kept writing their heartbeats meanwhile.
    for n in &mut later.nodes {
        if let Some(h) = n.host.as_mut() {
            h.heartbeat_at = NOW + 1000;
        }
    }
    let mut later = with_etcd_views(later);
    assert_eq!(
        next_action(&later, &taken()),
        Action::Paused {
            step: SwapStep::StepDown
        }
    );
    // Resumed: the step is marked afresh, so its timeout starts again.
    later.lease.as_mut().unwrap().paused = false;
    assert_eq!(
        next_action(&later, &taken()),
        Action::MarkStep {
            step: SwapStep::StepDown
        }
    );
}

#[test]
fn a_wait_for_a_host_goes_on_while_paused() {
    let mut v = stepping_down(None, Phase::Started);
    v.lease.as_mut().unwrap().paused = true;
    assert!(matches!(
        next_action(&v, &taken()),
        Action::Wait {
            step: SwapStep::StepDown,
            ..
        }
    ));
}

#[test]
fn a_voter_that_only_reads_not_ready_is_never_removed_first_and_goes_back_to_the_ordinary_order() {
    // Cordoned on the down path, then re-confirmed right before its
    // removal: its node Lease is fresh and its own view vouches for it.
    let mut v = snapshot_done_with_the_outgoing_voter_down(SwapStep::Removal);
    node_mut(&mut v, "n1").cordoned = true;
    assert_eq!(
        next_action(&v, &taken()),
        Action::RemoveMember { node: name("n1") }
    );
    let mut forged = ours(fleet(), Some(SwapStep::Removal));
    forged.nodes = v.nodes.clone();
    let n1 = node_mut(&mut forged, "n1");
    n1.lease_renewed_at = Some(NOW);
    n1.ready = true;
    refresh_etcd_views(&mut forged, |n| n.name == "n1");
    node_mut(&mut forged, "n1").ready = false;
    let a = next_action(&forged, &taken());
    assert_eq!(
        a,
        Action::MarkStep {
            step: SwapStep::Promote
        }
    );
    // Its node Lease aged too (a Lease writer): its own view still vouches.
    node_mut(&mut forged, "n1").lease_renewed_at = None;
    assert_eq!(next_action(&forged, &taken()), a);
    // The incoming host asked already: the Lease goes back to the
    // promotion all the same, where its promotion is waited for.
    let n4 = node_mut(&mut forged, "n4");
    n4.marks.swap = Some("swap-1".into());
    n4.marks.step = Some("promote".into());
    assert_eq!(next_action(&forged, &taken()), a);
}

#[test]
fn a_new_session_of_the_same_instance_waits_out_the_lease_its_former_session_took_then_takes_the_swap_over()
 {
    // `run`'s leadership lost mid-swap and won again: the Lease still
    // names this instance, and this session has taken nothing.
    let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
    let new_session = request("n1", "n4");
    assert!(matches!(
        next_action(&v, &new_session),
        Action::WaitForLease { .. }
    ));
    v.now += 61;
    assert_eq!(
        next_action(&v, &new_session),
        Action::TakeLease {
            swap: id("swap-1"),
            out: Some(name("n1")),
            incoming: Some(name("n4")),
            start: Start::Abandoned
        }
    );
}
