//! The host's decision, table by table. Each test names the behaviour; the
//! property tests at the bottom sweep every combination of lease, desired
//! role, step, report and host state for the invariants.

use hostdecide::{
    Decision, HostState, Observation, Step, decide,
    decide::{JoinTarget, lease_gate},
};
use proptest::prelude::*;
use protocol::{
    FleetMarks, K3sEtcd, LeaseFacts, NodeFacts, Phase, Report, Role, SwapId,
    clock_offset::ClockOffset, report::ReportStep,
};

const NOW: i64 = 1_000_000;
const ME: &str = "fleet-role";

fn swap(s: &str) -> SwapId {
    SwapId::parse(s).unwrap()
}

/// The Lease held for swap `s`, naming the test's one host ("standby")
/// for every part of the swap and asking for whatever the Node asks
/// (`asking` fills in [`LeaseFacts::asked`]).
fn lease_for(s: &str) -> LeaseFacts {
    LeaseFacts {
        holder: Some(ME.into()),
        swap: Some(s.into()),
        renew_time: Some(NOW - 5),
        duration_secs: Some(30),
        swap_in: Some("standby".into()),
        swap_out: Some("standby".into()),
        snapshot_from: Some("standby".into()),
        ..LeaseFacts::default()
    }
}

/// [`lease_for`] with the controller's last ask on it.
fn asking(s: &str, asked: &str) -> LeaseFacts {
    LeaseFacts {
        asked: Some(asked.into()),
        ..lease_for(s)
    }
}

fn node_asking(step: &str, desired: &str) -> NodeFacts {
    NodeFacts {
        name: "standby".into(),
        marks: FleetMarks {
            desired_role: Some(desired.into()),
            swap: Some("s1".into()),
            step: Some(step.into()),
            join_node: Some("voter-a".into()),
            snapshot_request: None,
            protocol: None,
        },
        ..NodeFacts::default()
    }
}

fn agent_host() -> HostState {
    HostState {
        role: Some(Role::Agent),
        datastore: false,
        tombstone: false,
        member: None,
        etcd_lists_member: None,
    }
}

fn server_host() -> HostState {
    HostState {
        role: Some(Role::Server),
        datastore: true,
        tombstone: false,
        member: None,
        etcd_lists_member: None,
    }
}

fn found(addr: &str) -> JoinTarget {
    JoinTarget::Found {
        address: Some(addr.into()),
    }
}

struct Case<'a> {
    node: NodeFacts,
    lease: Option<LeaseFacts>,
    report: Option<Report>,
    host: HostState,
    join: JoinTarget,
    now: i64,
    clock: Option<ClockOffset>,
    _p: std::marker::PhantomData<&'a ()>,
}

impl Case<'_> {
    fn new(node: NodeFacts, host: HostState) -> Self {
        let asked = match (&node.marks.step, &node.marks.snapshot_request) {
            (Some(step), _) => Some(step.clone()),
            (None, Some(_)) => Some("snapshot".to_string()),
            _ => None,
        };
        let me = Some(node.name.clone());
        Case {
            lease: Some(LeaseFacts {
                asked,
                swap_in: me.clone(),
                swap_out: me.clone(),
                snapshot_from: me,
                ..lease_for("s1")
            }),
            node,
            report: None,
            host,
            join: found("10.0.0.1"),
            now: NOW,
            clock: None,
            _p: Default::default(),
        }
    }
    fn decide(&self) -> Decision {
        decide(&Observation {
            now: self.now,
            node: &self.node,
            lease: self.lease.as_ref(),
            report: self.report.as_ref(),
            host: self.host.clone(),
            join: &self.join,
            identity: ME,
            skew_margin: 5,
            clock: self.clock,
            join_port: 6443,
        })
    }
}

fn reported(step: ReportStep, phase: Phase) -> Report {
    Report::next(None, Some(swap("s1")), step, phase, NOW - 100)
}

fn is_refusal(d: &Decision, needle: &str) -> bool {
    matches!(d, Decision::Refuse { reason, .. } if reason.contains(needle))
}

#[test]
fn a_promotion_with_the_lease_for_its_swap_joins_the_named_voter() {
    let d = Case::new(node_asking("promote", "server"), agent_host()).decide();
    let Decision::Take {
        swap: Some(s),
        step: Step::Promote { join, join_node },
        resume: false,
    } = d
    else {
        panic!("{d:?}")
    };
    assert_eq!(s.as_str(), "s1");
    assert_eq!(join.as_str(), "https://10.0.0.1:6443");
    assert_eq!(join_node.as_str(), "voter-a");
}

#[test]
fn a_promotion_without_the_lease_for_its_swap_is_refused_and_changes_nothing() {
    let mut c = Case::new(node_asking("promote", "server"), agent_host());
    c.lease = None;
    assert!(is_refusal(&c.decide(), "does not exist"));
    c.lease = Some(lease_for("other-swap"));
    assert!(is_refusal(&c.decide(), "held for swap \"other-swap\""));
    c.lease = Some(LeaseFacts {
        holder: Some("someone-else".into()),
        ..lease_for("s1")
    });
    assert!(is_refusal(&c.decide(), "held by \"someone-else\""));
    c.lease = Some(LeaseFacts {
        holder: None,
        ..lease_for("s1")
    });
    assert!(is_refusal(&c.decide(), "no holder"));
    c.lease = Some(LeaseFacts {
        swap: None,
        ..lease_for("s1")
    });
    assert!(is_refusal(&c.decide(), "names no swap"));
    c.lease = Some(LeaseFacts {
        renew_time: None,
        ..lease_for("s1")
    });
    assert!(is_refusal(&c.decide(), "no renew time"));
}

#[test]
fn an_expired_lease_is_no_lease_and_the_skew_margin_expires_it_early() {
    // The time is the observation's, not the machine's: NOW is in 1970, so a
    // decision that read the clock would find this Lease long expired.
    let mut c = Case::new(node_asking("promote", "server"), agent_host());
    // renewed at NOW-5 for 30 s: valid until NOW+25, less the 5 s margin.
    c.now = NOW + 19;
    assert!(matches!(c.decide(), Decision::Take { .. }));
    c.now = NOW + 20;
    assert!(is_refusal(&c.decide(), "expired"));
    c.now = NOW + 25;
    assert!(is_refusal(&c.decide(), "expired"));
}

#[test]
fn a_host_whose_clock_is_surely_off_the_api_servers_beyond_half_the_margin_refuses_a_step_and_a_running_one_waits()
 {
    let mut c = Case::new(node_asking("promote", "server"), agent_host());
    // 30 s behind: the Lease it reads would look held long after it lapsed.
    c.clock = ClockOffset::of_write(70_000, 70_100, 100);
    let d = c.decide();
    assert!(
        is_refusal(
            &d,
            "this host's clock is at least 29s behind the API server's"
        ),
        "{d:?}"
    );
    // 30 s ahead: refused the same way (it would drop a held Lease early).
    c.clock = ClockOffset::of_write(130_000, 130_100, 100);
    assert!(is_refusal(&c.decide(), "ahead of the API server's"));
    // A step under way is not refused (its report says it started): it
    // waits until the clock is right.
    c.report = Some(reported(ReportStep::Promote, Phase::Started));
    assert!(matches!(c.decide(), Decision::Wait { reason } if reason.contains("clock")));
    // Within half of the 5 s margin, or not measured yet: taken.
    c.report = None;
    c.clock = ClockOffset::of_write(101_000, 101_200, 100);
    assert!(matches!(c.decide(), Decision::Take { .. }));
    c.clock = None;
    assert!(matches!(c.decide(), Decision::Take { .. }));
    // A snapshot needs the Lease too.
    let mut c = Case::new(voter_asked_a_snapshot(), server_host());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Snapshot,
            ..
        }
    ));
    c.clock = ClockOffset::of_write(70_000, 70_100, 100);
    assert!(is_refusal(&c.decide(), "clock"), "{:?}", c.decide());
}

#[test]
fn the_lease_gate_is_checked_for_the_annotated_swap() {
    let node = node_asking("promote", "server");
    let lease = lease_for("s1");
    let o = Observation {
        now: NOW,
        node: &node,
        lease: Some(&lease),
        report: None,
        host: agent_host(),
        join: &JoinTarget::NotLooked,
        identity: ME,
        skew_margin: 0,
        clock: None,
        join_port: 6443,
    };
    assert!(lease_gate(&o, &swap("s1"), ReportStep::Promote).is_ok());
    assert!(lease_gate(&o, &swap("s2"), ReportStep::Promote).is_err());
}

#[test]
fn the_watcher_refuses_a_step_its_desired_role_does_not_go_with() {
    for (step, wrong) in [
        ("promote", "agent"),
        ("step-down", "server"),
        ("rollback", "server"),
    ] {
        let d = Case::new(node_asking(step, wrong), server_host()).decide();
        assert!(is_refusal(&d, "needs desired-role"), "{step}: {d:?}");
    }
    let mut c = Case::new(node_asking("promote", "server"), agent_host());
    c.node.marks.desired_role = None;
    assert!(is_refusal(&c.decide(), "has none"));
    c.node.marks.desired_role = Some("voter".into());
    assert!(is_refusal(&c.decide(), "invalid role"));
}

#[test]
fn the_watcher_leaves_a_refused_step_to_the_controller_once_its_reason_is_gone() {
    let mut c = Case::new(node_asking("promote", "server"), agent_host());
    c.report = Some(reported(ReportStep::Promote, Phase::Refused).with_reason("no lease"));
    // The lease is now held for the swap, so the reason is gone: still nothing.
    assert_eq!(c.decide(), Decision::Nothing);
    // A new swap is a new question.
    c.node.marks.swap = Some("s2".into());
    c.lease = Some(asking("s2", "promote"));
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Promote { .. },
            ..
        }
    ));
}

#[test]
fn a_settled_step_is_never_taken_again_and_a_started_one_is_resumed() {
    let mut c = Case::new(node_asking("promote", "server"), agent_host());
    for phase in [Phase::Done, Phase::Failed, Phase::Refused] {
        c.report = Some(reported(ReportStep::Promote, phase));
        assert_eq!(c.decide(), Decision::Nothing, "{phase:?}");
    }
    for phase in [Phase::Started, Phase::Progress] {
        c.report = Some(reported(ReportStep::Promote, phase));
        assert!(
            matches!(c.decide(), Decision::Take { resume: true, .. }),
            "{phase:?}"
        );
    }
    // A settled step further back in the memory counts too.
    let snap = reported(ReportStep::Promote, Phase::Done);
    c.report = Some(Report::next(
        Some(&snap),
        Some(swap("s1")),
        ReportStep::Snapshot,
        Phase::Done,
        NOW,
    ));
    assert_eq!(c.decide(), Decision::Nothing);
}

#[test]
fn a_started_step_whose_lease_lapsed_waits_instead_of_being_refused() {
    let mut c = Case::new(node_asking("promote", "server"), agent_host());
    c.report = Some(reported(ReportStep::Promote, Phase::Started));
    c.lease = None;
    assert!(matches!(c.decide(), Decision::Wait { .. }));
}

#[test]
fn a_tombstone_counts_as_removed_with_no_api_to_ask() {
    let mut c = Case::new(
        NodeFacts {
            name: "old".into(),
            etcd_label: true,
            ..Default::default()
        },
        server_host(),
    );
    c.host = HostState {
        role: Some(Role::Agent),
        datastore: true,
        tombstone: true,
        member: None,
        etcd_lists_member: None,
    };
    c.lease = None;
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Finish,
            resume: false,
            ..
        }
    ));
}

#[test]
fn a_member_counts_as_removed_only_on_a_positive_reading_never_on_the_nodes_marks() {
    // Neither the etcd label gone nor k3s's removed-node-name proves
    // anything: any patch-nodes holder can write both, and k3s writes the
    // latter even when its RemovePeer matched no member.
    let mut node = NodeFacts {
        name: "old".into(),
        etcd_label: false,
        ..Default::default()
    };
    node.k3s.removed_node_name = Some("old-0123abcd".into());
    let mut c = Case::new(node, server_host());
    c.lease = None;
    c.host = HostState {
        role: Some(Role::Agent),
        datastore: true,
        tombstone: false,
        member: Some("old-0123abcd".into()),
        etcd_lists_member: None,
    };
    // No reading (the last one failed): the member may still vote.
    assert!(
        matches!(c.decide(), Decision::Wait { .. }),
        "{:?}",
        c.decide()
    );
    c.host.etcd_lists_member = Some(true);
    assert!(matches!(c.decide(), Decision::Wait { .. }));
    // etcd, read just now, does not list it: gone.
    c.host.etcd_lists_member = Some(false);
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Finish,
            ..
        }
    ));
    // And so with the Node still showing a member: the reading decides.
    c.node.etcd_label = true;
    c.node.k3s.removed_node_name = None;
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Finish,
            ..
        }
    ));
}

#[test]
fn a_demotion_is_not_finished_while_the_member_stays_and_nothing_is_reported() {
    let mut c = Case::new(
        NodeFacts {
            name: "old".into(),
            etcd_label: true,
            ..Default::default()
        },
        server_host(),
    );
    c.host = HostState {
        role: Some(Role::Agent),
        datastore: true,
        tombstone: false,
        member: None,
        etcd_lists_member: None,
    };
    assert!(matches!(c.decide(), Decision::Wait { .. }));
    // With its settled step-down still annotated: nothing either.
    c.node = NodeFacts {
        etcd_label: true,
        ..node_asking("step-down", "agent")
    };
    c.report = Some(reported(ReportStep::StepDown, Phase::Done));
    assert_eq!(c.decide(), Decision::Nothing);
}

#[test]
fn a_finish_names_the_swap_of_the_step_down_and_resumes_after_a_restart() {
    let mut c = Case::new(node_asking("step-down", "agent"), server_host());
    c.host = HostState {
        role: Some(Role::Agent),
        datastore: true,
        tombstone: true,
        member: None,
        etcd_lists_member: None,
    };
    c.report = Some(reported(ReportStep::StepDown, Phase::Done));
    let d = c.decide();
    assert!(
        matches!(&d, Decision::Take { swap: Some(s), step: Step::Finish, .. } if s.as_str() == "s1"),
        "{d:?}"
    );
    // After a crash with the datastore already moved aside, the report still resumes it.
    c.host = HostState {
        role: Some(Role::Agent),
        datastore: false,
        tombstone: false,
        member: None,
        etcd_lists_member: None,
    };
    let step_down = reported(ReportStep::StepDown, Phase::Done);
    let finishing = Report::next(
        Some(&step_down),
        Some(swap("s1")),
        ReportStep::Finish,
        Phase::Progress,
        NOW,
    );
    c.report = Some(finishing.clone());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Finish,
            resume: true,
            ..
        }
    ));
    // Once finished, nothing; a failed finish is not retried either.
    for phase in [Phase::Done, Phase::Failed] {
        c.report = Some(Report::next(
            Some(&finishing),
            Some(swap("s1")),
            ReportStep::Finish,
            phase,
            NOW,
        ));
        assert_eq!(c.decide(), Decision::Nothing);
        c.host = HostState {
            role: Some(Role::Agent),
            datastore: true,
            tombstone: true,
            member: None,
            etcd_lists_member: None,
        };
        assert_eq!(
            c.decide(),
            Decision::Nothing,
            "{phase:?} with the datastore still there"
        );
        c.host = HostState {
            role: Some(Role::Agent),
            datastore: false,
            tombstone: false,
            member: None,
            etcd_lists_member: None,
        };
    }
}

#[test]
fn a_finish_of_a_swap_needs_the_role_file_to_name_the_agent() {
    // The host is the Lease's incoming host (Case::new names it for every
    // part): a server of a swap does not finish on a tombstone.
    let mut c = Case::new(
        NodeFacts {
            name: "old".into(),
            ..Default::default()
        },
        server_host(),
    );
    c.host = HostState {
        role: Some(Role::Server),
        datastore: true,
        tombstone: true,
        member: None,
        etcd_lists_member: None,
    };
    assert_eq!(c.decide(), Decision::Nothing);
    c.host = HostState {
        role: None,
        datastore: true,
        tombstone: true,
        member: None,
        etcd_lists_member: None,
    };
    assert_eq!(c.decide(), Decision::Nothing);
}

/// A server whose member was removed while it was down, and nothing asked
/// of it: the Lease (if any) is another swap's.
fn returned_server(host: HostState) -> Case<'static> {
    let mut c = Case::new(
        NodeFacts {
            name: "laptop".into(),
            ..Default::default()
        },
        host,
    );
    c.lease = Some(LeaseFacts {
        swap_out: Some("laptop".into()),
        swap_in: Some("standby".into()),
        ..lease_for("s1")
    });
    c
}

fn home() -> Decision {
    Decision::Take {
        swap: None,
        step: Step::Finish,
        resume: false,
    }
}

#[test]
fn a_server_replaced_while_it_was_down_comes_home_as_an_agent_on_a_reading_that_names_its_member_gone()
 {
    let named = |listed| HostState {
        member: Some("laptop-1234abcd".into()),
        etcd_lists_member: listed,
        ..server_host()
    };
    // etcd, read through another server, does not list the member named
    // in its datastore: it comes home, with or without any Lease.
    let mut c = returned_server(named(Some(false)));
    assert_eq!(c.decide(), home());
    c.lease = None;
    assert_eq!(c.decide(), home());
    // k3s's tombstone is its own reading of the removal.
    let c = returned_server(HostState {
        tombstone: true,
        ..server_host()
    });
    assert_eq!(c.decide(), home());
    // Listed, or no reading at all: it stays the server it is.
    for listed in [Some(true), None] {
        assert_eq!(returned_server(named(listed)).decide(), Decision::Nothing);
    }
    // With no member name to look for, a "not listed" is no proof: a voter
    // whose name file was lost would read as gone.
    let c = returned_server(HostState {
        member: None,
        etcd_lists_member: Some(false),
        ..server_host()
    });
    assert_eq!(c.decide(), Decision::Nothing);
    // No datastore: nothing to come home from.
    let c = returned_server(HostState {
        datastore: false,
        tombstone: true,
        ..server_host()
    });
    assert_eq!(c.decide(), Decision::Nothing);
}

#[test]
fn a_server_with_something_asked_of_it_or_incoming_in_a_swap_does_not_come_home_by_itself() {
    let gone = HostState {
        tombstone: true,
        ..server_host()
    };
    // The incoming host of a swap: a promotion's datastore exists before
    // etcd lists its member.
    let mut c = returned_server(gone.clone());
    c.lease.as_mut().unwrap().swap_in = Some("laptop".into());
    assert_eq!(c.decide(), Decision::Nothing);
    // A role step or a snapshot asked on its Node: those rules decide.
    let mut c = returned_server(gone.clone());
    c.node.marks.step = Some("promote".into());
    assert_ne!(c.decide(), home());
    let mut c = returned_server(gone.clone());
    c.node.marks.snapshot_request = Some("s1".into());
    assert_ne!(c.decide(), home());
    // A step its report shows under way.
    let mut c = returned_server(gone.clone());
    c.report = Some(reported(ReportStep::Promote, Phase::Started));
    assert_eq!(c.decide(), Decision::Nothing);
    // A settled step of a swap is no obstacle.
    c.report = Some(reported(ReportStep::Promote, Phase::Done));
    assert_eq!(c.decide(), home());
}

#[test]
fn a_homecoming_resumes_after_a_reboot_and_one_that_failed_is_left_to_the_operator() {
    let started = Report::next(None, None, ReportStep::Finish, Phase::Started, NOW - 10);
    // The datastore already moved aside, the role file not yet written.
    let mut c = returned_server(HostState {
        datastore: false,
        ..server_host()
    });
    c.report = Some(started.clone());
    assert_eq!(
        c.decide(),
        Decision::Take {
            swap: None,
            step: Step::Finish,
            resume: true
        }
    );
    // A report saying so under a datastore whose member may vote changes
    // nothing.
    c.host = server_host();
    assert_eq!(c.decide(), Decision::Nothing);
    // Settled, done or failed: not taken again.
    for phase in [Phase::Done, Phase::Failed] {
        let mut c = returned_server(HostState {
            tombstone: true,
            ..server_host()
        });
        c.report = Some(Report::next(
            Some(&started),
            None,
            ReportStep::Finish,
            phase,
            NOW,
        ));
        assert_eq!(c.decide(), Decision::Nothing, "{phase:?}");
    }
    // A finish settled for a swap long ago does not hold back a new
    // homecoming.
    let mut c = returned_server(HostState {
        tombstone: true,
        ..server_host()
    });
    c.report = Some(reported(ReportStep::Finish, Phase::Done));
    assert_eq!(c.decide(), home());
}

/// A voter's Node with swap `s1`'s snapshot request on it.
fn voter_asked_a_snapshot() -> NodeFacts {
    NodeFacts {
        name: "voter-a".into(),
        marks: FleetMarks {
            snapshot_request: Some("s1".into()),
            ..FleetMarks::default()
        },
        etcd_label: true,
        etcd_is_voter: true,
        ..Default::default()
    }
}

#[test]
fn a_voter_takes_the_snapshot_named_for_the_swap() {
    let mut c = Case::new(voter_asked_a_snapshot(), server_host());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Snapshot,
            resume: false,
            ..
        }
    ));
    c.report = Some(reported(ReportStep::Snapshot, Phase::Done));
    assert_eq!(c.decide(), Decision::Nothing);
    c.report = None;
    c.node.etcd_is_voter = false;
    assert!(is_refusal(&c.decide(), "only on an etcd voter"));
    c.node.etcd_is_voter = true;
    c.host = agent_host();
    assert!(is_refusal(&c.decide(), "only on an etcd voter"));
    c.host = server_host();
    c.lease = Some(lease_for("s9"));
    assert!(is_refusal(&c.decide(), "held for swap"));
    c.node.marks.snapshot_request = Some("Bad Id".into());
    assert!(is_refusal(&c.decide(), "invalid swap id"));
}

#[test]
fn a_step_asked_in_a_protocol_version_this_host_does_not_know_is_refused_and_changes_nothing() {
    for (step, desired, host) in [
        ("promote", "server", agent_host()),
        ("step-down", "agent", server_host()),
        ("rollback", "agent", agent_host()),
    ] {
        let mut c = Case::new(node_asking(step, desired), host);
        assert!(
            matches!(c.decide(), Decision::Take { .. }),
            "{step}: marks without a version are version 1"
        );
        c.node.marks.protocol = Some("1".into());
        assert!(matches!(c.decide(), Decision::Take { .. }), "{step}");
        c.node.marks.protocol = Some("2".into());
        let d = c.decide();
        let Decision::Refuse {
            swap: Some(s),
            step: rstep,
            reason,
        } = &d
        else {
            panic!("{step}: {d:?}")
        };
        assert_eq!((s.as_str(), rstep.as_str()), ("s1", step));
        assert_eq!(
            reason,
            "the Node's marks: protocol version \"2\" is not one this build knows (1 to 1); upgrade this host's fleet-role-actuator before the controller (see docs/upgrade.md)"
        );
        c.node.marks.protocol = None;
        c.lease.as_mut().unwrap().protocol = Some("2".into());
        assert!(
            is_refusal(&c.decide(), "the regrade Lease: protocol version \"2\""),
            "{step}"
        );
        c.lease.as_mut().unwrap().protocol = Some("1".into());
        assert!(matches!(c.decide(), Decision::Take { .. }), "{step}");
    }
}

#[test]
fn a_started_step_whose_marks_turn_to_an_unknown_protocol_version_waits() {
    let mut c = Case::new(node_asking("promote", "server"), agent_host());
    c.report = Some(reported(ReportStep::Promote, Phase::Started));
    c.node.marks.protocol = Some("2".into());
    assert!(
        matches!(&c.decide(), Decision::Wait { reason } if reason.starts_with("promote resumes once: the Node's marks")),
        "{:?}",
        c.decide()
    );
}

#[test]
fn a_snapshot_asked_in_a_protocol_version_this_host_does_not_know_is_refused() {
    let node = NodeFacts {
        name: "voter-a".into(),
        marks: FleetMarks {
            snapshot_request: Some("s1".into()),
            protocol: Some("9".into()),
            ..FleetMarks::default()
        },
        etcd_label: true,
        etcd_is_voter: true,
        ..Default::default()
    };
    let mut c = Case::new(node, server_host());
    let d = c.decide();
    assert!(
        matches!(&d, Decision::Refuse { step: ReportStep::Snapshot, reason, .. } if reason.starts_with("the Node's marks: protocol version \"9\"")),
        "{d:?}"
    );
    c.report = Some(reported(ReportStep::Snapshot, Phase::Started));
    assert!(matches!(c.decide(), Decision::Wait { .. }));
    c.report = None;
    c.node.marks.protocol = Some("1".into());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Snapshot,
            ..
        }
    ));
}

#[test]
fn a_finish_needs_no_marks_so_their_version_does_not_hold_it_back() {
    let mut c = Case::new(
        NodeFacts {
            name: "old".into(),
            etcd_label: false,
            marks: FleetMarks {
                protocol: Some("2".into()),
                ..FleetMarks::default()
            },
            ..Default::default()
        },
        server_host(),
    );
    c.host = HostState {
        role: Some(Role::Agent),
        datastore: true,
        tombstone: true,
        member: None,
        etcd_lists_member: None,
    };
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Finish,
            ..
        }
    ));
}

#[test]
fn a_snapshot_request_comes_before_a_step_of_the_same_swap() {
    let mut node = node_asking("step-down", "agent");
    node.marks.snapshot_request = Some("s1".into());
    node.etcd_is_voter = true;
    let mut c = Case::new(node, server_host());
    c.lease.as_mut().unwrap().asked = Some("snapshot".into());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Snapshot,
            ..
        }
    ));
    c.report = Some(reported(ReportStep::Snapshot, Phase::Done));
    c.lease.as_mut().unwrap().asked = Some("step-down".into());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::StepDown,
            ..
        }
    ));
}

#[test]
fn a_snapshot_request_the_lease_does_not_ask_for_does_not_hold_up_the_step_it_asks_for() {
    // A request copied onto the outgoing voter by someone else, or one the
    // controller asked long before: the step-down asked now goes ahead.
    let mut node = node_asking("step-down", "agent");
    node.marks.snapshot_request = Some("s1".into());
    node.etcd_is_voter = true;
    let c = Case::new(node, server_host());
    assert_eq!(
        c.lease.as_ref().unwrap().asked.as_deref(),
        Some("step-down")
    );
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::StepDown,
            ..
        }
    ));
}

#[test]
fn a_step_down_still_asked_after_the_same_swaps_finish_is_past_and_the_finishs_report_stands() {
    // The member was removed while the step-down ran; the finish cancelled
    // it and is under way or done; the Node asks for the step-down until
    // the controller's clean-up (the chaos campaign's seed 11: a refusal
    // here wrote over "finish done", and the host was read as never
    // finished).
    for phase in [Phase::Done, Phase::Failed] {
        let mut c = Case::new(node_asking("step-down", "agent"), agent_host());
        c.report = Some(reported(ReportStep::Finish, phase));
        assert_eq!(c.decide(), Decision::Nothing, "{phase:?}");
    }
    // Under way, the finish goes on (and is not refused either).
    let mut c = Case::new(node_asking("step-down", "agent"), agent_host());
    c.report = Some(reported(ReportStep::Finish, Phase::Started));
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Finish,
            resume: true,
            ..
        }
    ));
    // A step-down of another swap is judged as ever.
    let mut c = Case::new(node_asking("step-down", "agent"), agent_host());
    c.report = Some(Report::next(
        None,
        Some(swap("s0")),
        ReportStep::Finish,
        Phase::Done,
        NOW - 100,
    ));
    assert!(is_refusal(&c.decide(), "names the agent"));
}

#[test]
fn a_step_down_needs_a_server() {
    let c = Case::new(node_asking("step-down", "agent"), agent_host());
    assert!(is_refusal(&c.decide(), "names the agent"));
    let c = Case::new(node_asking("step-down", "agent"), HostState::default());
    assert!(is_refusal(&c.decide(), "missing or unreadable"));
    let c = Case::new(node_asking("step-down", "agent"), server_host());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::StepDown,
            ..
        }
    ));
    let c = Case::new(node_asking("rollback", "agent"), server_host());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Rollback,
            ..
        }
    ));
}

#[test]
fn bad_annotation_values_are_refused_with_a_reason_safe_for_one_line() {
    let bad_swaps = [
        "x\ny",
        "a;rm -rf /",
        "$(reboot)",
        "UPPER",
        &"a".repeat(64),
        "",
    ];
    for bad in bad_swaps {
        let mut node = node_asking("promote", "server");
        node.marks.swap = Some(bad.into());
        let d = Case::new(node, agent_host()).decide();
        let Decision::Refuse {
            swap: None, reason, ..
        } = &d
        else {
            panic!("{bad:?}: {d:?}")
        };
        assert!(!reason.contains('\n') && reason.len() < 200, "{reason}");
    }
    let c = Case::new(node_asking("demote; reboot", "agent"), server_host());
    assert!(matches!(
        c.decide(),
        Decision::Refuse {
            step: ReportStep::Unknown,
            ..
        }
    ));
    let mut c = Case::new(node_asking("promote", "server"), agent_host());
    c.node.marks.swap = None;
    assert!(is_refusal(&c.decide(), "without role-swap"));
}

#[test]
fn a_refusal_of_a_bad_value_is_reported_once() {
    let mut node = node_asking("promote", "server");
    node.marks.swap = Some("BAD".into());
    let mut c = Case::new(node, agent_host());
    let Decision::Refuse { swap, step, reason } = c.decide() else {
        panic!()
    };
    c.report = Some(Report::next(None, swap, step, Phase::Refused, NOW).with_reason(reason));
    assert_eq!(c.decide(), Decision::Nothing);
}

#[test]
fn a_promotion_refuses_a_bad_or_missing_join_node() {
    let mut c = Case::new(node_asking("promote", "server"), agent_host());
    c.node.marks.join_node = None;
    assert!(is_refusal(&c.decide(), "needs role-join-node"));
    c.node.marks.join_node = Some("voter a".into());
    assert!(is_refusal(&c.decide(), "invalid node name"));
    c.node.marks.join_node = Some("standby".into());
    assert!(is_refusal(&c.decide(), "to itself"));
    c.node.marks.join_node = Some("voter-a".into());
    c.join = JoinTarget::Missing;
    assert!(is_refusal(&c.decide(), "does not exist"));
    c.join = JoinTarget::NotLooked;
    assert!(is_refusal(&c.decide(), "not looked up"));
    c.join = JoinTarget::Found { address: None };
    assert!(is_refusal(&c.decide(), "has no address"));
    c.join = found("10.0.0.1\nserver: https://evil:6443");
    assert!(is_refusal(&c.decide(), "invalid node address"));
    c.join = found("fd7a::1");
    let d = c.decide();
    assert!(
        matches!(&d, Decision::Take { step: Step::Promote { join, .. }, .. } if join.as_str() == "https://[fd7a::1]:6443")
    );
}

#[test]
fn no_annotations_mean_nothing_to_do() {
    let c = Case::new(
        NodeFacts {
            name: "n".into(),
            ..Default::default()
        },
        agent_host(),
    );
    assert_eq!(c.decide(), Decision::Nothing);
    let c = Case::new(
        NodeFacts {
            name: "n".into(),
            etcd_label: true,
            ..Default::default()
        },
        server_host(),
    );
    assert_eq!(c.decide(), Decision::Nothing);
}

// === Properties over every combination ===

fn opt_text() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("s1".into())),
        Just(Some("s2".into())),
        Just(Some("BAD\n".into()))
    ]
}

prop_compose! {
    fn any_node()(
        desired in prop_oneof![Just(None), Just(Some("server".into())), Just(Some("agent".into())), Just(Some("x".into()))],
        swap in opt_text(),
        step in prop_oneof![Just(None), Just(Some("promote".into())), Just(Some("step-down".into())), Just(Some("rollback".into())), Just(Some("finish".into()))],
        join in prop_oneof![Just(None), Just(Some("voter-a".into())), Just(Some("n".into())), Just(Some("a b".into()))],
        snap in opt_text(),
        etcd_label: bool,
        etcd_is_voter: bool,
        removed_member in prop_oneof![Just(None), Just(Some("n-0a1b2c3d".to_string())), Just(Some("other-1".to_string()))],
        protocol in any_protocol(),
    ) -> NodeFacts {
        NodeFacts {
            name: "n".into(),
            marks: FleetMarks { desired_role: desired, swap, step, join_node: join, snapshot_request: snap, protocol },
            etcd_label,
            etcd_is_voter,
            k3s: K3sEtcd { removed_node_name: removed_member, ..K3sEtcd::default() },
            ..NodeFacts::default()
        }
    }
}

/// A host the Lease may name: this one ("n"), another, or none.
fn any_host_name() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("n".to_string())),
        Just(Some("other".to_string()))
    ]
}

/// A protocol mark: none (version 1), this build's, or one it does not know.
fn any_protocol() -> impl Strategy<Value = Option<String>> {
    prop_oneof![Just(None), Just(Some("1".into())), Just(Some("2".into()))]
}

prop_compose! {
    fn any_lease()(
        present: bool,
        holder in prop_oneof![Just(None), Just(Some(ME.to_string())), Just(Some("other".to_string()))],
        swap in opt_text(),
        age in 0i64..60,
        protocol in any_protocol(),
        swap_in in any_host_name(),
        swap_out in any_host_name(),
        snapshot_from in any_host_name(),
        asked in prop_oneof![Just(None), Just(Some("promote".to_string())), Just(Some("step-down".to_string())), Just(Some("rollback".to_string())), Just(Some("snapshot".to_string()))],
    ) -> Option<LeaseFacts> {
        present.then(|| LeaseFacts { holder, swap, renew_time: Some(NOW - age), duration_secs: Some(30), protocol, swap_in, swap_out, snapshot_from, asked, ..LeaseFacts::default() })
    }
}

fn any_report() -> impl Strategy<Value = Option<Report>> {
    let step = prop_oneof![
        Just(ReportStep::Promote),
        Just(ReportStep::StepDown),
        Just(ReportStep::Rollback),
        Just(ReportStep::Finish),
        Just(ReportStep::Snapshot),
    ];
    let phase = prop_oneof![
        Just(Phase::Started),
        Just(Phase::Progress),
        Just(Phase::Done),
        Just(Phase::Refused),
        Just(Phase::Failed)
    ];
    let swap = prop_oneof![Just(None), Just(Some(swap("s1"))), Just(Some(swap("s2")))];
    (any::<bool>(), swap, step, phase).prop_map(|(present, swap, step, phase)| {
        present.then(|| Report::next(None, swap, step, phase, NOW - 50))
    })
}

fn any_host() -> impl Strategy<Value = HostState> {
    let role = prop_oneof![
        Just(None),
        Just(Some(Role::Server)),
        Just(Some(Role::Agent))
    ];
    let member = prop_oneof![Just(None), Just(Some("n-0a1b2c3d".to_string()))];
    let listed = prop_oneof![Just(None), Just(Some(false)), Just(Some(true))];
    (role, any::<bool>(), any::<bool>(), member, listed).prop_map(
        |(role, datastore, tombstone, member, etcd_lists_member)| HostState {
            role,
            datastore,
            tombstone,
            member,
            etcd_lists_member,
        },
    )
}

fn any_join() -> impl Strategy<Value = JoinTarget> {
    prop_oneof![
        Just(JoinTarget::NotLooked),
        Just(JoinTarget::Missing),
        Just(found("10.0.0.1")),
        Just(found("nope"))
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn every_decision_keeps_the_protocols_promises(
        node in any_node(), lease in any_lease(), report in any_report(), host in any_host(), join in any_join()
    ) {
        let o = Observation { now: NOW, node: &node, lease: lease.as_ref(), report: report.as_ref(), host: host.clone(), join: &join, identity: ME, skew_margin: 5, clock: None, join_port: 6443 };
        let d = decide(&o);
        match &d {
            Decision::Take { swap, step, resume } => {
                let rstep = step.report_step();
                // Never a settled step again.
                if let Some(r) = &report {
                    prop_assert!(!r.has_settled(swap.as_ref(), rstep), "settled step taken: {:?}", d);
                    // A resumed step is the one the report shows running.
                    if *resume { prop_assert!(r.is_running(swap.as_ref(), rstep)); }
                } else {
                    prop_assert!(!*resume);
                }
                if let Step::Finish = step {
                    // Finish: only when the member is gone, or resuming one.
                    let demoted = host.role == Some(Role::Agent) && host.datastore && host.member_gone();
                    // Or a replaced server coming home: no swap, nothing
                    // asked on its Node, not the Lease's incoming host, and
                    // its member gone on a reading that names it.
                    let home = swap.is_none()
                        && host.role == Some(Role::Server)
                        && host.datastore
                        && host.member_gone_for_good()
                        && node.marks.step.is_none()
                        && node.marks.snapshot_request.is_none()
                        && lease.as_ref().is_none_or(|l| l.swap_in.as_deref() != Some(node.name.as_str()));
                    prop_assert!(*resume || demoted || home, "finish: {:?}", d);
                    // Gone only on a tombstone or a reading of etcd.
                    prop_assert!(*resume || host.tombstone || host.etcd_lists_member == Some(false));
                } else {
                    // Every other step: only with the Lease for its swap,
                    // and never under marks of an unknown version (a
                    // started one waits).
                    let s = swap.as_ref().expect("a step outside finish has a swap");
                    let known = |p: &Option<String>| protocol::version::check(p.as_deref()).is_ok();
                    prop_assert!(
                        known(&node.marks.protocol) && lease.as_ref().is_none_or(|l| known(&l.protocol)),
                        "a step under unknown marks: {:?}", d
                    );
                    if !*resume || lease_gate(&o, s, rstep).is_err() {
                        prop_assert!(lease_gate(&o, s, rstep).is_ok(), "step without the lease: {:?}", d);
                    }
                    // Only on the host the Lease names for the step, and a
                    // new step only when the Lease asks for it.
                    let l = lease.as_ref().expect("a step with the Lease");
                    let named = match rstep {
                        ReportStep::Promote | ReportStep::Rollback => &l.swap_in,
                        ReportStep::StepDown => &l.swap_out,
                        _ => &l.snapshot_from,
                    };
                    prop_assert_eq!(named.as_deref(), Some("n"), "a step on a host the Lease does not name");
                    prop_assert!(*resume || l.asked.as_deref() == Some(rstep.as_str()), "a step not asked: {:?}", d);
                    if let Step::Promote { .. } = step {
                        prop_assert!(
                            host.role == Some(Role::Server) || !host.datastore || host.member_gone(),
                            "a promotion over a datastore whose member may vote"
                        );
                    }
                    match step {
                        Step::Snapshot => {
                            prop_assert_eq!(node.marks.snapshot_request.as_deref(), Some(s.as_str()));
                            prop_assert!(host.role == Some(Role::Server) && node.etcd_is_voter);
                        }
                        other => {
                            prop_assert_eq!(node.marks.swap.as_deref(), Some(s.as_str()));
                            let want = match other { Step::Promote { .. } => "server", _ => "agent" };
                            prop_assert_eq!(node.marks.desired_role.as_deref(), Some(want), "desired role");
                        }
                    }
                }
            }
            Decision::Refuse { swap, step, reason } => {
                prop_assert!(!reason.contains('\n'));
                if let (Some(r), Some(_)) = (&report, swap) {
                    prop_assert!(!r.has_settled(swap.as_ref(), *step), "a settled step refused again");
                }
            }
            Decision::Wait { .. } | Decision::Nothing => {}
        }
    }

    #[test]
    fn without_a_lease_only_a_finish_is_ever_taken(
        node in any_node(), report in any_report(), host in any_host(), join in any_join()
    ) {
        let o = Observation { now: NOW, node: &node, lease: None, report: report.as_ref(), host: host.clone(), join: &join, identity: ME, skew_margin: 5, clock: None, join_port: 6443 };
        if let Decision::Take { step, .. } = decide(&o) {
            prop_assert_eq!(step, Step::Finish);
        }
    }
}

#[test]
fn a_new_bad_value_is_refused_even_after_an_earlier_refusal_of_another() {
    let mut node = node_asking("promote", "server");
    node.marks.swap = Some("BAD-ONE".into());
    let mut c = Case::new(node, agent_host());
    let Decision::Refuse {
        swap: refused_swap,
        step,
        reason,
    } = c.decide()
    else {
        panic!()
    };
    let first =
        Report::next(None, refused_swap, step, Phase::Refused, NOW).with_reason(reason.clone());
    // Another bad swap id for the same step: a new reason, so a new refusal.
    c.report = Some(first.clone());
    c.node.marks.swap = Some("BAD-TWO".into());
    assert!(is_refusal(&c.decide(), "BAD-TWO"));
    // The same reason on a report for another step is not this refusal.
    let other_step = Report::next(None, None, ReportStep::Snapshot, Phase::Refused, NOW)
        .with_reason(reason.clone());
    c.report = Some(other_step);
    c.node.marks.swap = Some("BAD-ONE".into());
    assert!(is_refusal(&c.decide(), "BAD-ONE"));
    // The same step and reason but not refused (say, a report being rewritten) is not it either.
    let mut not_refused = first.clone();
    not_refused.phase = Phase::Started;
    c.report = Some(not_refused);
    assert!(is_refusal(&c.decide(), "BAD-ONE"));
    // The same refusal under a valid swap id is another question.
    let mut under_swap = first;
    under_swap.swap = Some(swap("s1"));
    c.report = Some(under_swap);
    assert!(is_refusal(&c.decide(), "BAD-ONE"));
}

#[test]
fn a_member_k3s_names_removed_while_the_local_etcd_still_lists_it_is_not_finished() {
    // k3s's RemovePeer matched no member (its node-address is not the
    // member's peer address) and wrote removed-node-name all the same.
    let node = NodeFacts {
        name: "old".into(),
        etcd_label: true,
        k3s: K3sEtcd {
            removed_node_name: Some("old-0a1b2c3d".into()),
            ..K3sEtcd::default()
        },
        ..Default::default()
    };
    let mut c = Case::new(node, server_host());
    c.host = HostState {
        role: Some(Role::Agent),
        datastore: true,
        tombstone: false,
        member: Some("old-0a1b2c3d".into()),
        etcd_lists_member: Some(true),
    };
    c.lease = None;
    assert!(matches!(c.decide(), Decision::Wait { .. }));
    // No reading at all is no answer either.
    c.host.etcd_lists_member = None;
    assert!(matches!(c.decide(), Decision::Wait { .. }));
    // Once etcd, read, no longer lists it, it finishes; a tombstone always
    // counts.
    for (listed, tombstone) in [(Some(false), false), (None, true), (Some(true), true)] {
        c.host.etcd_lists_member = listed;
        c.host.tombstone = tombstone;
        assert!(
            matches!(
                c.decide(),
                Decision::Take {
                    step: Step::Finish,
                    ..
                }
            ),
            "{listed:?} {tombstone}"
        );
    }
}

#[test]
fn a_forged_finish_started_report_under_a_voter_changes_nothing() {
    let voter = NodeFacts {
        name: "voter-a".into(),
        etcd_label: true,
        etcd_is_voter: true,
        ..NodeFacts::default()
    };
    let mut c = Case::new(voter, server_host());
    c.host.member = Some("voter-a-0a1b2c3d".into());
    c.report = Some(Report::next(
        None,
        Some(swap("s1")),
        ReportStep::Finish,
        Phase::Started,
        NOW,
    ));
    assert_eq!(c.decide(), Decision::Nothing);
    // Nor under a host whose role file names the agent while its member
    // still votes (a step-down whose removal has not happened).
    c.host.role = Some(Role::Agent);
    assert!(
        !matches!(
            c.decide(),
            Decision::Take {
                step: Step::Finish,
                ..
            }
        ),
        "{:?}",
        c.decide()
    );
}

#[test]
fn a_step_on_a_host_whose_role_file_is_invalid_is_refused_and_never_taken_as_no_role() {
    let unreadable = HostState {
        role: None,
        ..agent_host()
    };
    let problem = Some("the role file /var/lib/rancher/k3s/fleet-role holds no valid role");
    for (step, desired) in [
        ("promote", "server"),
        ("rollback", "agent"),
        ("step-down", "agent"),
    ] {
        let c = Case::new(node_asking(step, desired), unreadable.clone());
        let d = decide::with_role_file(c.decide(), problem);
        assert!(
            matches!(d, Decision::Refuse { .. } | Decision::Nothing)
                && !matches!(d, Decision::Take { .. }),
            "{step}: {d:?}"
        );
    }
    let c = Case::new(node_asking("promote", "server"), unreadable.clone());
    let d = decide::with_role_file(c.decide(), problem);
    assert!(is_refusal(&d, "holds no valid role"), "{d:?}");
    // Started before the file went bad: it waits rather than settle.
    let mut c = Case::new(node_asking("promote", "server"), unreadable);
    c.report = Some(reported(ReportStep::Promote, Phase::Started));
    let d = decide::with_role_file(c.decide(), problem);
    assert!(matches!(d, Decision::Wait { .. }), "{d:?}");
    // A missing file (no problem) changes nothing in the decision.
    let c = Case::new(node_asking("promote", "server"), agent_host());
    assert_eq!(decide::with_role_file(c.decide(), None), c.decide());
}

#[test]
fn a_promotion_onto_a_disk_without_room_for_etcd_is_refused_and_once_begun_goes_on() {
    let short = Some(
        "64 MiB free where k3s keeps its datastore, under the 2048 MiB a copy of etcd may need",
    );
    let c = Case::new(node_asking("promote", "server"), agent_host());
    assert!(decide::takes_promotion(&c.decide()), "{:?}", c.decide());
    let d = decide::with_datastore_room(c.decide(), short);
    assert!(is_refusal(&d, "64 MiB free"), "{d:?}");
    assert!(!decide::takes_promotion(&d));
    // Begun before: its own member writes to that disk now; it goes on.
    let mut c = Case::new(node_asking("promote", "server"), agent_host());
    c.report = Some(reported(ReportStep::Promote, Phase::Started));
    assert!(
        matches!(c.decide(), Decision::Take { resume: true, .. }),
        "{:?}",
        c.decide()
    );
    assert_eq!(decide::with_datastore_room(c.decide(), short), c.decide());
    // Room enough: the decision stands.
    let c = Case::new(node_asking("promote", "server"), agent_host());
    assert_eq!(decide::with_datastore_room(c.decide(), None), c.decide());
    // Any other step is no promotion, room or not.
    let c = Case::new(node_asking("rollback", "agent"), agent_host());
    assert!(!decide::takes_promotion(&c.decide()));
    assert_eq!(decide::with_datastore_room(c.decide(), short), c.decide());
}

// === Guards against marks another principal wrote ===

/// A voter that is no part of the swap, with a datastore whose member
/// votes (its local etcd lists it).
fn voting_host() -> HostState {
    HostState {
        role: Some(Role::Server),
        datastore: true,
        tombstone: false,
        member: Some("voter-b-0a1b2c3d".into()),
        etcd_lists_member: Some(true),
    }
}

#[test]
fn marks_copied_onto_a_voter_outside_the_swap_are_refused_whatever_the_step() {
    // The Lease is held for swap s1, whose hosts are "old" (out) and
    // "standby" (in), and it asks for each step in turn; a patch-nodes
    // holder copies s1 onto voter-b with each step.
    for (step, desired, named) in [
        ("rollback", "agent", "incoming host"),
        ("promote", "server", "incoming host"),
        ("step-down", "agent", "outgoing host"),
    ] {
        let mut node = node_asking(step, desired);
        node.name = "voter-b".into();
        node.etcd_label = true;
        node.etcd_is_voter = true;
        let mut c = Case::new(node, voting_host());
        let l = c.lease.as_mut().unwrap();
        l.swap_in = Some("standby".into());
        l.swap_out = Some("old".into());
        l.stopping = Some("{}".into());
        let d = c.decide();
        assert!(
            matches!(&d, Decision::Refuse { reason, .. }
                if reason.contains(named) && reason.contains("not this host")),
            "{step}: {d:?}"
        );
    }
}

#[test]
fn a_grows_lease_names_no_outgoing_host_so_no_voter_steps_down_and_a_shrinks_none_promotes() {
    // A grow records only its incoming host, a shrink only its outgoing
    // one; marks of the missing half's step on any host, the Lease asking
    // for it, are refused: there is no host the Lease names for it.
    for (step, desired, grow) in [
        ("step-down", "agent", true),
        ("promote", "server", false),
        ("rollback", "agent", false),
    ] {
        let mut node = node_asking(step, desired);
        if step == "step-down" {
            node.etcd_label = true;
            node.etcd_is_voter = true;
        }
        let host = if step == "step-down" {
            voting_host()
        } else {
            agent_host()
        };
        let mut c = Case::new(node, host);
        let l = c.lease.as_mut().unwrap();
        if grow {
            l.swap_in = Some("standby".into());
            l.swap_out = None;
        } else {
            l.swap_in = None;
            l.swap_out = Some("old".into());
        }
        l.stopping = Some("{}".into());
        let d = c.decide();
        assert!(
            matches!(&d, Decision::Refuse { reason, .. } if reason.contains("names no")),
            "{step}: {d:?}"
        );
    }
}

#[test]
fn a_snapshot_is_taken_only_by_the_voter_the_lease_names_and_waits_while_it_names_none() {
    let node = NodeFacts {
        name: "voter-b".into(),
        marks: FleetMarks {
            snapshot_request: Some("s1".into()),
            ..FleetMarks::default()
        },
        etcd_label: true,
        etcd_is_voter: true,
        ..Default::default()
    };
    let mut c = Case::new(node, voting_host());
    c.lease.as_mut().unwrap().snapshot_from = Some("voter-a".into());
    assert!(
        is_refusal(&c.decide(), "snapshot voter"),
        "{:?}",
        c.decide()
    );
    // Named by no one yet: the request came before the controller's ask.
    c.lease.as_mut().unwrap().snapshot_from = None;
    assert!(
        matches!(c.decide(), Decision::Wait { .. }),
        "{:?}",
        c.decide()
    );
    c.lease.as_mut().unwrap().snapshot_from = Some("voter-b".into());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Snapshot,
            ..
        }
    ));
}

#[test]
fn a_step_on_the_swaps_own_host_waits_until_the_lease_asks_for_it_and_reports_nothing() {
    // The outgoing voter marked for its step-down while the swap is still
    // promoting (before the drain and the removal gates).
    let mut c = Case::new(node_asking("step-down", "agent"), voting_host());
    c.lease.as_mut().unwrap().asked = Some("promote".into());
    assert!(
        matches!(c.decide(), Decision::Wait { .. }),
        "{:?}",
        c.decide()
    );
    c.lease.as_mut().unwrap().asked = None;
    assert!(matches!(c.decide(), Decision::Wait { .. }));
    // A rollback of the incoming host outside a wind-down: the controller
    // asks one only after its quorum gate.
    let mut c = Case::new(node_asking("rollback", "agent"), server_host());
    c.lease.as_mut().unwrap().asked = Some("promote".into());
    assert!(
        matches!(c.decide(), Decision::Wait { .. }),
        "{:?}",
        c.decide()
    );
    // Asked: taken.
    c.lease.as_mut().unwrap().asked = Some("rollback".into());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Rollback,
            ..
        }
    ));
}

#[test]
fn a_started_step_resumes_whatever_the_lease_asked_for_since() {
    let mut c = Case::new(node_asking("step-down", "agent"), voting_host());
    c.report = Some(reported(ReportStep::StepDown, Phase::Progress));
    c.lease.as_mut().unwrap().asked = Some("promote".into());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::StepDown,
            resume: true,
            ..
        }
    ));
    // But never on a host the Lease does not name.
    c.lease.as_mut().unwrap().swap_out = Some("old".into());
    assert!(
        matches!(c.decide(), Decision::Wait { .. }),
        "{:?}",
        c.decide()
    );
}

#[test]
fn a_promotion_over_a_datastore_whose_member_may_vote_is_refused_unless_the_role_file_names_the_server()
 {
    // An etcd-only voter whose role file already names the agent, and a
    // host whose role file was lost: a promotion would move a voting
    // member's datastore aside.
    for role in [Some(Role::Agent), None] {
        let host = HostState {
            role,
            ..voting_host()
        };
        let mut c = Case::new(node_asking("promote", "server"), host);
        let d = c.decide();
        assert!(
            matches!(&d, Decision::Refuse { reason, .. } if reason.contains("may still vote")),
            "{role:?}: {d:?}"
        );
        // No reading of etcd: still may vote.
        c.host.etcd_lists_member = None;
        assert!(is_refusal(&c.decide(), "may still vote"));
        // Proved gone (a tombstone, or etcd not listing it): promoted (a
        // host whose role file names the agent finishes its demotion
        // first, the datastore of a gone member moved aside).
        for (listed, tombstone) in [(Some(false), false), (None, true)] {
            c.host.etcd_lists_member = listed;
            c.host.tombstone = tombstone;
            let d = c.decide();
            assert!(
                match role {
                    None => matches!(
                        d,
                        Decision::Take {
                            step: Step::Promote { .. },
                            ..
                        }
                    ),
                    _ => matches!(
                        d,
                        Decision::Take {
                            step: Step::Finish,
                            ..
                        }
                    ),
                },
                "{role:?} {listed:?} {tombstone}: {d:?}"
            );
        }
    }
    // A resumed promotion whose role file names the server keeps its
    // datastore: nothing is moved.
    let c = Case::new(node_asking("promote", "server"), voting_host());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Promote { .. },
            ..
        }
    ));
}

#[test]
fn a_resumed_rollback_over_a_member_that_may_vote_waits_unless_the_lease_still_asks_for_it() {
    // The host's own memory shows a rollback started; its member may vote
    // (a promotion just made it a voter) and the controller now asks for
    // something else: its datastore is not moved aside.
    let mut c = Case::new(node_asking("rollback", "agent"), server_host());
    c.report = Some(reported(ReportStep::Rollback, Phase::Started));
    c.lease.as_mut().unwrap().asked = Some("promote".into());
    assert!(
        matches!(c.decide(), Decision::Wait { .. }),
        "{:?}",
        c.decide()
    );
    // Asked: resumed.
    c.lease.as_mut().unwrap().asked = Some("rollback".into());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Rollback,
            resume: true,
            ..
        }
    ));
    // A member proved gone cannot vote: resumed whatever was asked since.
    c.lease.as_mut().unwrap().asked = Some("promote".into());
    c.host.tombstone = true;
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Rollback,
            resume: true,
            ..
        }
    ));
}

#[test]
fn a_promotion_refuses_a_join_address_other_than_the_one_the_lease_records_from_etcd() {
    // The join Node's address pointed elsewhere (a `patch nodes` holder,
    // or that Node's own kubelet): the server token would go there.
    let mut c = Case::new(node_asking("promote", "server"), agent_host());
    c.lease.as_mut().unwrap().join_address = Some("10.0.0.1".into());
    assert!(matches!(
        c.decide(),
        Decision::Take {
            step: Step::Promote { .. },
            ..
        }
    ));
    c.join = found("10.66.6.6");
    assert!(
        is_refusal(&c.decide(), "is not the one the regrade Lease records"),
        "{:?}",
        c.decide()
    );
    // Recorded in another spelling of the same address: the same address.
    c.join = found("::ffff:10.0.0.1");
    c.lease.as_mut().unwrap().join_address = Some("::ffff:10.0.0.1".into());
    assert!(matches!(c.decide(), Decision::Take { .. }));
}
