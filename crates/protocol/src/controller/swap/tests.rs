//! The swap, state by state: one observation, the one action it leads to.

use crate::controller::fixtures::*;
use crate::controller::*;
#[allow(unused_imports)]
use crate::{
    report::{Detail, Phase, Report, ReportStep},
    validate::{NodeName, SwapId},
};

#[test]
fn a_healthy_fleet_takes_the_lease_for_a_fresh_swap() {
    assert_eq!(
        next_action(&fleet(), &request("n1", "n4")),
        Action::TakeLease {
            swap: id("swap-1"),
            out: name("n1"),
            incoming: name("n4"),
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
    node_mut(&mut v, "n2").ready = false;
    // n2 down: preflight would refuse; join_voter alone still skips it.
    assert_eq!(join_voter(&v, "n1").unwrap().as_str(), "n3");
    assert_eq!(join_voter(&fleet(), "n2").unwrap().as_str(), "n1");
}

#[test]
fn a_gate_shut_right_before_the_promotion_winds_the_swap_down_as_refused() {
    let mut v = ours(after_promotion(), Some(SwapStep::Promote));
    *node_mut(&mut v, "n4") = agent("n4", true);
    node_mut(&mut v, "n3").ready = false;
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
fn a_rollback_of_an_incoming_host_that_votes_in_etcd_stops_when_stopping_it_would_lose_quorum() {
    // etcd promoted n4 (every server's view lists it as a voter) before k3s
    // wrote its `EtcdIsVoter`, and the promotion failed; n2 is down.
    let mut v = ours(after_promotion(), Some(SwapStep::Promote));
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
    // With every other voter healthy, stopping n4 leaves 3 of 4: rolled back.
    assert!(matches!(next_action(&v, &taken()), Action::Rollback { .. }));
    let n2 = node_mut(&mut v, "n2");
    n2.ready = false;
    n2.ready_since = Some(NOW - 30);
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

fn pod_on_out(name: &str) -> PodFacts {
    PodFacts {
        namespace: "ci".into(),
        name: name.into(),
        ..PodFacts::default()
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
    node_mut(&mut v, "n2").ready = false;
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
    node_mut(&mut v, "n1").ready = false;
    assert_eq!(
        next_action(&v, &taken()),
        Action::RemoveMember { node: name("n1") }
    );
}

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
    let n1 = node_mut(&mut v, "n1");
    n1.ready = false;
    n1.cordoned = true;
    assert_eq!(
        next_action(&v, &taken()),
        Action::RemoveMember { node: name("n1") }
    );
}

/// The snapshot is done and n1, the outgoing voter, is down.
fn snapshot_done_with_the_outgoing_voter_down(step: SwapStep) -> FleetView {
    let mut v = ours(fleet(), Some(step));
    let n2 = node_mut(&mut v, "n2");
    n2.marks.snapshot_request = Some("swap-1".into());
    n2.report = Some(report(
        "swap-1",
        ReportStep::Snapshot,
        Phase::Done,
        Some(Detail::Snapshot),
    ));
    node_mut(&mut v, "n1").ready = false;
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
    node_mut(&mut v, "n2").ready = false;
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
    node_mut(&mut v, "n2").ready = false;
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

fn stepping_down(detail: Option<Detail>, phase: Phase) -> FleetView {
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
    node_mut(&mut v, "n2").ready = false;
    node_mut(&mut v, "n3").ready = false;
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
fn removed(v: &mut FleetView) {
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
            out: name("n1"),
            incoming: name("n4"),
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
            out: name("n1"),
            incoming: name("n4"),
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
