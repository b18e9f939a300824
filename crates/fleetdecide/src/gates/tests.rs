//! Unit tests of `gates.rs`, kept apart so the module reads as the rules alone.

use super::*;
use crate::{fixtures::*, *};
use protocol::report::{Detail, Phase, ReportStep};

// === Gates, one table per gate ===

#[test]
fn every_preflight_gate_passes_on_a_healthy_fleet() {
    let gates = preflight(&fleet(), "n1", "n4");
    assert!(all_pass(&gates), "{}", failures(&gates));
    assert_eq!(gates.len(), 17);
}

#[test]
fn a_swap_is_refused_while_the_regrade_lease_is_missing_since_the_controller_may_not_create_it() {
    let mut v = fleet();
    v.lease = None;
    let a = next_action(&v, &request("n1", "n4"));
    assert_eq!(refused_by(&a), vec![GateName::NoOtherSwap]);
    let g = gate_no_other_swap(&v, "n1", "n4");
    assert!(
        g.reason.contains("the regrade Lease is missing"),
        "{}",
        g.reason
    );
}

#[test]
fn a_swap_is_refused_while_a_host_of_it_reports_a_protocol_version_this_build_does_not_know() {
    for host in ["n1", "n4"] {
        let mut v = fleet();
        node_mut(&mut v, host).report_protocol = Some("2".into());
        let a = next_action(&v, &request("n1", "n4"));
        assert_eq!(refused_by(&a), vec![GateName::KnownProtocol], "{host}");
        let g = gate_known_protocol(&v, "n1", "n4");
        assert_eq!(
            g.reason,
            format!(
                "{host}'s report: protocol version \"2\" is not one this build knows (1 to 1); upgrade fleet-role to a version that knows it (see docs/upgrade.md)"
            )
        );
    }
    // A host outside the swap may be of any version.
    let mut v = fleet();
    node_mut(&mut v, "n2").report_protocol = Some("2".into());
    assert!(gate_known_protocol(&v, "n1", "n4").passed);
    // No version (a report before versions were marked) is version 1.
    let mut v = fleet();
    node_mut(&mut v, "n1").report_protocol = None;
    node_mut(&mut v, "n4").report_protocol = Some("1".into());
    let g = gate_known_protocol(&v, "n1", "n4");
    assert!(g.passed, "{}", g.reason);
    assert_eq!(
        g.reason,
        "n1, n4 and the regrade Lease are of protocol versions this build knows (1 to 1)"
    );
}

#[test]
fn a_swap_is_refused_while_a_host_of_it_runs_an_actuator_older_than_the_controller_drives() {
    let set = |v: &mut FleetView, host: &str, r: Option<&str>| {
        node_mut(v, host).host.as_mut().unwrap().release = r.map(str::to_string);
    };
    for host in ["n1", "n4"] {
        for (release, why) in [
            (Some("0.1.0"), "its actuator's release 0.1.0 is older than"),
            (None, "its actuator reports no release"),
            (
                Some("latest"),
                "its actuator's release \"latest\" does not read as MAJOR.MINOR.PATCH",
            ),
        ] {
            let mut v = fleet();
            set(&mut v, host, release);
            let a = next_action(&v, &request("n1", "n4"));
            assert_eq!(
                refused_by(&a),
                vec![GateName::SupportedRelease],
                "{host} {release:?}"
            );
            let g = gate_supported_release(&v, Some("n1"), Some("n4"));
            assert!(
                g.reason.starts_with(&format!("{host}: {why}"))
                    && g.reason
                        .ends_with("upgrade its actuator first (docs/upgrade.md)"),
                "{}",
                g.reason
            );
        }
    }
    // A host outside the swap, or newer than this controller, is no matter.
    let mut v = fleet();
    set(&mut v, "n2", Some("0.1.0"));
    set(&mut v, "n4", Some("99.0.0"));
    let g = gate_supported_release(&v, Some("n1"), Some("n4"));
    assert!(g.passed, "{}", g.reason);
    assert_eq!(
        g.reason,
        format!(
            "n1, n4 run a release this controller drives ({} or later)",
            protocol::version::OLDEST_HOST_RELEASE
        )
    );
    // Nor is a down outgoing voter's: it is asked nothing, its member is
    // removed without it.
    let mut v = fleet();
    set(&mut v, "n1", Some("0.1.0"));
    take_down(&mut v, "n1");
    assert!(gate_supported_release(&v, Some("n1"), Some("n4")).passed);
    // A host with no report at all fails it too.
    let mut v = fleet();
    node_mut(&mut v, "n4").host = None;
    let g = gate_supported_release(&v, Some("n1"), Some("n4"));
    assert!(
        !g.passed && g.reason.starts_with("n4 has no actuator report"),
        "{}",
        g.reason
    );
}

#[test]
fn a_swap_is_refused_while_the_regrade_lease_records_a_protocol_version_this_build_does_not_know() {
    let mut v = fleet();
    v.lease = Some(LeaseFacts {
        protocol: Some("7".into()),
        ..LeaseFacts::default()
    });
    assert_eq!(
        refused_by(&next_action(&v, &request("n1", "n4"))),
        vec![GateName::KnownProtocol]
    );
    let g = gate_known_protocol(&v, "n1", "n4");
    assert!(
        g.reason
            .starts_with("the regrade Lease: protocol version \"7\""),
        "{}",
        g.reason
    );
    v.lease.as_mut().unwrap().protocol = Some("1".into());
    assert!(gate_known_protocol(&v, "n1", "n4").passed);
}

#[test]
fn a_swap_is_refused_while_the_outgoing_host_reports_its_agent_could_not_start() {
    use protocol::report::Eligibility;
    let table: [(Option<Eligibility>, bool, &str); 4] = [
        (
            Some(Eligibility::Ok),
            true,
            "n1 reports its agent could start",
        ),
        (
            Some(Eligibility::of(
                &["config.yaml sets cluster-init\nx".into()],
            )),
            false,
            "n1 reports its agent could not start once demoted: config.yaml sets cluster-init\\nx",
        ),
        (
            Some(Eligibility::Unknown),
            false,
            "n1 reports a demotion verdict this build does not know; upgrade fleet-role",
        ),
        (None, false, "n1 has not reported whether it may be demoted"),
    ];
    for (verdict, passed, reason) in table {
        let mut v = fleet();
        node_mut(&mut v, "n1").host = Some(alive(verdict.clone()));
        let g = gate_outgoing_demotable(&v, "n1");
        assert_eq!(g.passed, passed, "{verdict:?}: {}", g.reason);
        assert!(g.reason.starts_with(reason), "{verdict:?}: {}", g.reason);
        if !passed {
            assert_eq!(
                refused_by(&next_action(&v, &request("n1", "n4"))),
                vec![GateName::OutgoingDemotable]
            );
        }
    }
    // A host outside the swap may be of any verdict.
    let mut v = fleet();
    node_mut(&mut v, "n2").host = Some(alive(Some(Eligibility::of(&["x".into()]))));
    assert!(all_pass(&preflight(&v, "n1", "n4")));
}

#[test]
fn a_down_outgoing_voter_is_neither_asked_for_its_verdict_nor_its_heartbeat() {
    let mut v = fleet();
    take_down(&mut v, "n1");
    node_mut(&mut v, "n1").host = None;
    assert!(gate_outgoing_demotable(&v, "n1").passed);
    assert!(gate_actuators_alive(&v, Some("n1"), Some("n4")).passed);
    // The incoming host is always asked.
    node_mut(&mut v, "n4").host = None;
    assert!(!gate_actuators_alive(&v, Some("n1"), Some("n4")).passed);
}

#[test]
fn a_swap_is_refused_while_a_host_of_it_has_no_fresh_actuator_heartbeat() {
    // (heartbeat age at NOW, passes) with the default bound of 180 s.
    let table = [
        (None, false),
        (Some(0), true),
        (Some(180), true),
        (Some(181), false),
        (Some(-30), true),
    ];
    for host in ["n1", "n4"] {
        for (age, passed) in table {
            let mut v = fleet();
            node_mut(&mut v, host).host = age.map(|a: i64| protocol::report::HostPart {
                heartbeat_at: NOW - a,
                promotion: None,
                demotion: Some(protocol::report::Eligibility::Ok),
                etcd: None,
                release: Some(protocol::version::RELEASE.into()),
                credential_expires_at: None,
            });
            let g = gate_actuators_alive(&v, Some("n1"), Some("n4"));
            assert_eq!(g.passed, passed, "{host} {age:?}: {}", g.reason);
            if !passed {
                assert!(g.reason.starts_with(host), "{}", g.reason);
                let refused = refused_by(&next_action(&v, &request("n1", "n4")));
                assert!(refused.contains(&GateName::ActuatorsAlive), "{refused:?}");
            }
        }
    }
    // A host outside the swap may be silent.
    let mut v = fleet();
    node_mut(&mut v, "n2").host = None;
    assert!(gate_actuators_alive(&v, Some("n1"), Some("n4")).passed);
}

#[test]
fn a_host_whose_report_the_api_refuses_fails_the_gate_with_the_apis_reason_not_as_dead() {
    for host in ["n1", "n4"] {
        let mut v = fleet();
        node_mut(&mut v, host).report_refused = Some("403 Forbidden: too big".into());
        let g = gate_actuators_alive(&v, Some("n1"), Some("n4"));
        assert!(!g.passed, "{host}");
        assert!(
            g.reason.starts_with(&format!(
                "{host}'s report was refused by the API: 403 Forbidden: too big"
            )),
            "{}",
            g.reason
        );
        assert!(
            !g.reason.contains("check that fleet-role-actuator runs"),
            "{}",
            g.reason
        );
    }
    // A host outside the swap may have its report refused.
    let mut v = fleet();
    node_mut(&mut v, "n2").report_refused = Some("403 Forbidden".into());
    assert!(gate_actuators_alive(&v, Some("n1"), Some("n4")).passed);
}

#[test]
fn every_irreversible_write_rechecks_the_incoming_heartbeat_and_those_asking_the_outgoing_its_verdict()
 {
    let mut v = after_promotion();
    node_mut(&mut v, "n4").host = None;
    for gates in [
        promote_gates(&v, Some("n1"), "n4"),
        removal_gates(&v, "n1", Some("n4")),
        down_removal_gates(&v, "n1", "n4"),
        late_promote_gates(&v, "n1", "n4"),
    ] {
        assert!(!gate(&gates, GateName::ActuatorsAlive).passed);
    }
    let mut v = after_promotion();
    node_mut(&mut v, "n1").host =
        Some(alive(Some(protocol::report::Eligibility::of(
            &["x".into()],
        ))));
    for gates in [
        promote_gates(&v, Some("n1"), "n4"),
        removal_gates(&v, "n1", Some("n4")),
    ] {
        assert!(!gate(&gates, GateName::OutgoingDemotable).passed);
    }
}

#[test]
fn every_irreversible_write_rechecks_the_protocol_versions() {
    let mut v = after_promotion();
    node_mut(&mut v, "n4").report_protocol = Some("2".into());
    for gates in [
        promote_gates(&v, Some("n1"), "n4"),
        removal_gates(&v, "n1", Some("n4")),
        down_removal_gates(&v, "n1", "n4"),
        late_promote_gates(&v, "n1", "n4"),
    ] {
        assert!(!gate(&gates, GateName::KnownProtocol).passed);
    }
}

#[test]
fn a_swap_is_refused_while_a_voter_is_not_ready() {
    let mut v = fleet();
    take_down(&mut v, "n2");
    let a = next_action(&v, &request("n1", "n4"));
    assert_eq!(refused_by(&a), vec![GateName::VotersHealthy]);
    let g = gate(&preflight(&v, "n1", "n4"), GateName::VotersHealthy).clone();
    assert!(g.reason.contains("n2 (NotReady)"), "{}", g.reason);
}

#[test]
fn a_swap_is_refused_while_a_voter_is_not_etcd_is_voter_but_labelled_a_member() {
    // A member with the etcd label and no EtcdIsVoter is a learner.
    let mut v = fleet();
    node_mut(&mut v, "n2").etcd_is_voter = false;
    let a = next_action(&v, &request("n1", "n4"));
    assert_eq!(refused_by(&a), vec![GateName::NoLearner]);
}

#[test]
fn the_outgoing_voter_being_down_does_not_shut_the_voters_healthy_gate() {
    let mut v = fleet();
    take_down(&mut v, "n1");
    let gates = preflight(&v, "n1", "n4");
    assert!(all_pass(&gates), "{}", failures(&gates));
}

#[test]
fn a_swap_is_refused_while_a_learner_is_pending() {
    let mut v = fleet();
    let n5 = node_mut(&mut v, "n5");
    n5.etcd_label = true;
    n5.k3s.node_name = Some("n5-00aa11bb".into());
    let a = next_action(&v, &request("n1", "n4"));
    assert_eq!(refused_by(&a), vec![GateName::NoLearner]);
}

#[test]
fn a_second_swap_is_refused_while_another_holds_the_lease() {
    let mut v = fleet();
    v.lease = Some(lease_held_by("fleet-role", "ctl-b", "swap-0", "n2", "n5"));
    let a = next_action(&v, &request("n1", "n4"));
    assert_eq!(refused_by(&a), vec![GateName::NoOtherSwap]);
}

#[test]
fn a_swap_is_refused_while_someone_else_holds_the_lease_without_a_swap() {
    let mut v = fleet();
    let mut l = lease_held_by("intruder", "x", "s", "a", "b");
    l.swap = None;
    v.lease = Some(l);
    let a = next_action(&v, &request("n1", "n4"));
    assert_eq!(refused_by(&a), vec![GateName::NoOtherSwap]);
}

#[test]
fn a_swap_is_refused_while_another_swap_is_left_unfinished() {
    let mut v = fleet();
    let mut l = lease_held_by("fleet-role", "ctl-b", "swap-0", "n2", "n5");
    l.holder = None;
    l.stopped = Some("the step-down of n2 failed".into());
    v.lease = Some(l);
    let a = next_action(&v, &request("n1", "n4"));
    assert_eq!(refused_by(&a), vec![GateName::NoOtherSwap]);
    let Action::Refuse { gates } = a else {
        unreachable!()
    };
    assert!(
        gate(&gates, GateName::NoOtherSwap)
            .reason
            .contains("--out n2 --in n5")
    );
}

#[test]
fn a_step_mark_of_no_swap_the_lease_records_blocks_no_swap() {
    // Any kubelet can annotate its own Node: a mark nobody asked for.
    let mut v = fleet();
    for (n, swap) in [("n3", Some("swap-0")), ("n5", None)] {
        let n = node_mut(&mut v, n);
        n.marks.step = Some("step-down".into());
        n.marks.swap = swap.map(Into::into);
    }
    assert!(gate_no_other_swap(&v, "n1", "n4").passed);
    assert!(matches!(
        next_action(&v, &request("n1", "n4")),
        Action::TakeLease { .. }
    ));
}

#[test]
fn the_recorded_swap_is_taken_up_again_whatever_step_marks_others_left() {
    // Swap swap-1 (n1 out, n4 in) stopped; a kubelet marks its own Node.
    let mut v = fleet();
    let mut l = lease_held_by("fleet-role", "ctl-gone", "swap-1", "n1", "n4");
    l.renew_time = Some(NOW - 600);
    l.stopped = Some("failed".into());
    v.lease = Some(l);
    let n5 = node_mut(&mut v, "n5");
    n5.marks.step = Some("promote".into());
    n5.marks.swap = Some("swap-1".into());
    assert!(matches!(
        next_action(&v, &request("n1", "n4")),
        Action::TakeLease {
            start: Start::Stopped,
            ..
        }
    ));
    // Another swap stays refused while that one is unfinished.
    let a = next_action(&v, &request("n2", "n5"));
    assert!(refused_by(&a).contains(&GateName::NoOtherSwap), "{a:?}");
}

#[test]
fn a_swap_is_refused_for_an_ineligible_host() {
    let a = next_action(&fleet(), &request("n1", "n5"));
    assert_eq!(refused_by(&a), vec![GateName::IncomingEligible]);
    // Without the old label, nothing is said of it.
    let gate = gate_incoming_eligible(&fleet(), "n5");
    assert!(!gate.reason.contains("no longer counts"), "{gate:?}");
}

#[test]
fn a_swap_is_refused_before_any_write_for_an_eligible_host_that_reports_it_could_not_join() {
    use protocol::report::Eligibility;
    let mut v = fleet();
    let host = node_mut(&mut v, "n4")
        .host
        .get_or_insert_with(|| alive(None));
    host.promotion = Some(Eligibility::of(&[
        "no k3s server could be reached: refused".into(),
    ]));
    let a = next_action(&v, &request("n1", "n4"));
    assert_eq!(refused_by(&a), vec![GateName::IncomingEligible]);
    let gate = gate_incoming_eligible(&v, "n4");
    assert!(
        gate.reason
            .contains("could not join as a server: no k3s server could be reached"),
        "{gate:?}"
    );
    node_mut(&mut v, "n4").host.as_mut().unwrap().promotion = Some(Eligibility::Ok);
    assert!(gate_incoming_eligible(&v, "n4").passed);
    node_mut(&mut v, "n4").host.as_mut().unwrap().promotion = Some(Eligibility::Unknown);
    assert!(!gate_incoming_eligible(&v, "n4").passed);
    node_mut(&mut v, "n4").host.as_mut().unwrap().promotion = None;
    assert!(
        gate_incoming_eligible(&v, "n4").passed,
        "an older actuator: the label decides"
    );
}

#[test]
fn a_swap_is_refused_for_a_host_with_only_the_old_label_and_the_refusal_says_how_to_relabel() {
    let mut v = fleet();
    node_mut(&mut v, "n5").legacy_eligible = true;
    let gate = gate_incoming_eligible(&v, "n5");
    assert!(!gate.passed, "{gate:?}");
    let label = protocol::names::ELIGIBLE_LABEL;
    assert!(
        gate.reason
            .contains(&format!("`kubectl label node n5 {label}=true`")),
        "{gate:?}"
    );
    assert!(
        gate.reason.contains("voter-eligible=true no longer counts"),
        "{gate:?}"
    );
}

#[test]
fn a_swap_is_refused_for_an_incoming_host_that_is_not_ready() {
    let mut v = fleet();
    take_down(&mut v, "n4");
    assert_eq!(
        refused_by(&next_action(&v, &request("n1", "n4"))),
        vec![GateName::IncomingReady]
    );
}

#[test]
fn a_swap_is_refused_for_an_incoming_host_that_is_a_voter_already() {
    let a = next_action(&fleet(), &request("n1", "n2"));
    assert_eq!(refused_by(&a), vec![GateName::IncomingAgent]);
    let a = next_action(&fleet(), &request("n1", "n1"));
    assert!(refused_by(&a).contains(&GateName::IncomingAgent));
}

#[test]
fn a_swap_is_refused_for_an_incoming_agent_still_labelled_a_server() {
    let mut v = fleet();
    node_mut(&mut v, "n4").control_plane_label = true;
    assert_eq!(
        refused_by(&next_action(&v, &request("n1", "n4"))),
        vec![GateName::IncomingAgent]
    );
}

#[test]
fn a_swap_is_refused_when_the_outgoing_host_is_not_a_voter() {
    let a = next_action(&fleet(), &request("n5", "n4"));
    assert!(refused_by(&a).contains(&GateName::OutgoingVoter));
    let a = next_action(&fleet(), &request("nx", "n4"));
    assert!(refused_by(&a).contains(&GateName::OutgoingVoter));
}

#[test]
fn a_swap_is_refused_while_paused() {
    let mut v = fleet();
    v.lease = Some(LeaseFacts {
        paused: true,
        ..LeaseFacts::default()
    });
    assert_eq!(
        refused_by(&next_action(&v, &request("n1", "n4"))),
        vec![GateName::NotPaused]
    );
}

#[test]
fn a_swap_is_refused_when_too_few_healthy_voters_would_be_left_after_the_removal() {
    // Three voters configured, one seen: the two missing count as down.
    // After the promotion: 4 members, 2 healthy; after the removal of the
    // healthy outgoing voter: 1 healthy of 3, below quorum.
    let mut v = fleet();
    v.nodes.retain(|n| n.name != "n2" && n.name != "n3");
    let a = next_action(&v, &request("n1", "n4"));
    // etcd still lists the two members whose Nodes are gone: ghosts.
    assert_eq!(
        refused_by(&a),
        vec![GateName::QuorumAfterRemoval, GateName::NoGhostMember]
    );
    let g = gate(&preflight(&v, "n1", "n4"), GateName::QuorumAfterRemoval).clone();
    assert!(g.reason.contains("1 healthy of 3"), "{}", g.reason);
    assert!(g.reason.contains("2 voter Node(s) missing"), "{}", g.reason);
}

#[test]
fn a_one_voter_fleet_configured_for_one_may_swap_its_voter() {
    let mut v = fleet();
    v.settings.voters = 1;
    v.nodes.retain(|n| n.name != "n2" && n.name != "n3");
    let v = with_etcd_views(v);
    assert!(matches!(
        next_action(&v, &request("n1", "n4")),
        Action::TakeLease {
            start: Start::Fresh,
            ..
        }
    ));
}

#[test]
fn the_removal_gate_refuses_when_voters_went_down_after_the_promotion() {
    let mut v = after_promotion();
    take_down(&mut v, "n2");
    take_down(&mut v, "n3");
    let g = gate_quorum_after_removal(&v, "n1", "n4", Count::AsItIs);
    assert!(!g.passed, "{}", g.reason);
    // 4 members (n1 n2 n3 n4), n2 and n3 down: removing n1 leaves 1 of 3.
    assert!(g.reason.contains("1 healthy of 3"), "{}", g.reason);
}

#[test]
fn the_removal_gate_as_it_is_counts_no_incoming_host_that_is_not_yet_a_voter() {
    // A down outgoing voter's member removed ahead of the promotion: n4 is
    // still an agent, and with n2 down too, removing n1 leaves n2 and n3,
    // one of them healthy. Counting n4 as a voter already would pass it.
    let mut v = fleet();
    take_down(&mut v, "n1");
    take_down(&mut v, "n2");
    let g = gate_quorum_after_removal(&v, "n1", "n4", Count::AsItIs);
    assert!(!g.passed, "{}", g.reason);
    // Both counts, the Nodes' (which the operator reads first) and etcd's.
    assert!(
        g.reason
            .starts_with("removing n1 (a down voter) leaves 1 healthy of 2 voting members"),
        "{}",
        g.reason
    );
    assert!(
        g.reason.contains("by etcd's members: 1 healthy of 2"),
        "{}",
        g.reason
    );
}

#[test]
fn stopping_a_host_whose_node_votes_is_checked_for_quorum_even_with_no_etcd_view() {
    // The incoming host is a voter by its Node; no actuator has reported
    // etcd's view; two other voters are down. Stopping it (a rollback)
    // leaves one healthy voter of four.
    let mut v = after_promotion();
    take_down(&mut v, "n2");
    take_down(&mut v, "n3");
    for n in &mut v.nodes {
        if let Some(h) = n.host.as_mut() {
            h.etcd = None;
        }
    }
    let g = gate_quorum_at_host_stop(&v, "n4");
    assert!(!g.passed, "{}", g.reason);
    assert!(g.reason.contains("leaves 1 healthy of 4"), "{}", g.reason);
}

#[test]
fn a_swap_is_refused_while_an_unfinished_swap_names_another_incoming_or_outgoing_host() {
    for (out, inc) in [("n1", "n5"), ("n2", "n4")] {
        let mut v = fleet();
        let mut l = lease_held_by("fleet-role", "ctl-old", "swap-0", out, inc);
        l.renew_time = Some(NOW - 1000);
        v.lease = Some(l);
        let g = gate_no_other_swap(&v, "n1", "n4");
        assert!(!g.passed, "{out} {inc}: {}", g.reason);
        assert!(g.reason.contains("is unfinished"), "{}", g.reason);
    }
    let mut v = fleet();
    let mut l = lease_held_by("fleet-role", "ctl-old", "swap-0", "n1", "n4");
    l.renew_time = Some(NOW - 1000);
    v.lease = Some(l);
    assert!(gate_no_other_swap(&v, "n1", "n4").passed);
}

#[test]
fn a_step_of_the_recorded_swap_left_on_a_third_node_shuts_the_gate_and_one_on_its_own_hosts_does_not()
 {
    let mut v = fleet();
    let mut l = lease_held_by("fleet-role", "ctl-old", "swap-0", "n1", "n4");
    l.renew_time = Some(NOW - 1000);
    v.lease = Some(l);
    for own in ["n1", "n4"] {
        let n = node_mut(&mut v, own);
        n.marks.swap = Some("swap-0".into());
        n.marks.step = Some("promote".into());
    }
    assert!(gate_no_other_swap(&v, "n1", "n4").passed);
    let n2 = node_mut(&mut v, "n2");
    n2.marks.swap = Some("swap-0".into());
    n2.marks.step = Some("snapshot".into());
    let g = gate_no_other_swap(&v, "n1", "n4");
    assert!(!g.passed, "{}", g.reason);
    assert!(
        g.reason.contains("n2 carries step snapshot of swap swap-0"),
        "{}",
        g.reason
    );
}

#[test]
fn a_lease_held_without_a_controller_instance_still_shuts_the_no_other_swap_gate() {
    let mut v = fleet();
    let mut l = lease_held_by("someone", "x", "swap-0", "n1", "n4");
    l.instance = None;
    v.lease = Some(l);
    assert!(!gate_no_other_swap(&v, "n1", "n4").passed);
}

#[test]
fn a_voter_stepped_down_passes_the_outgoing_gate_only_when_the_step_down_is_allowed() {
    let mut v = fleet();
    let n1 = node_mut(&mut v, "n1");
    n1.report = Some(report(
        "swap-1",
        ReportStep::StepDown,
        Phase::Done,
        Some(Detail::EtcdOnly),
    ));
    assert_eq!(classify(v.node("n1").unwrap()), Class::EtcdOnly);
    assert!(!gate_outgoing_voter(&v, "n1", Outgoing::Voting).passed);
    assert!(gate_outgoing_voter(&v, "n1", Outgoing::VotingOrSteppedDown).passed);
    assert!(gate_outgoing_voter(&v, "n2", Outgoing::Voting).passed);
    assert!(!gate_outgoing_voter(&v, "n9", Outgoing::Voting).passed);
}

#[test]
fn the_incoming_voter_gate_needs_a_healthy_voter_not_just_a_member() {
    let mut v = fleet();
    assert!(!gate_incoming_voter(&v, "n4").passed, "an agent");
    *node_mut(&mut v, "n4") = voter("n4", 4);
    assert!(gate_incoming_voter(&v, "n4").passed);
    take_down(&mut v, "n4");
    let g = gate_incoming_voter(&v, "n4");
    assert!(!g.passed);
    assert!(
        g.reason
            .ends_with("voter and NotReady, not a healthy voter"),
        "{}",
        g.reason
    );
    node_mut(&mut v, "n4").ready = true;
    node_mut(&mut v, "n4").etcd_is_voter = false;
    assert!(!gate_incoming_voter(&v, "n4").passed, "a learner");
    assert!(!gate_incoming_voter(&v, "n9").passed);
}

#[test]
fn the_quorum_gate_names_missing_voters_only_when_some_are_missing() {
    let v = fleet();
    let g = gate_quorum_after_removal(&v, "n1", "n4", Count::IncomingPromoted);
    assert!(g.passed, "{}", g.reason);
    assert!(!g.reason.contains("missing"), "{}", g.reason);
    assert!(
        g.reason
            .contains("leaves 3 healthy of 3 voting members, quorum 2"),
        "{}",
        g.reason
    );
    let mut v = fleet();
    v.nodes.retain(|n| n.name != "n3");
    let g = gate_quorum_after_removal(&v, "n1", "n4", Count::IncomingPromoted);
    assert!(
        g.reason
            .contains("(1 voter Node(s) missing, counted as down)"),
        "{}",
        g.reason
    );
}
