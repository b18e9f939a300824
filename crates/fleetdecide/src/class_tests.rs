//! A Node's class ([`fleetfacts::class`]), read from the fixtures' fleets.

use crate::{fixtures::*, *};
use protocol::report::{Detail, Phase, ReportStep};

// === Classification ===

#[test]
fn a_voter_the_etcd_leader_finds_unhealthy_is_a_voter_and_not_a_healthy_one() {
    let mut down = voter("a", 1);
    down.etcd_is_voter = false;
    down.etcd_unhealthy = true;
    assert_eq!(classify(&down), Class::Voter);
    assert!(is_voting(&down));
    assert!(!is_healthy_voter(&down));
}

#[test]
fn hosts_are_classified_from_their_node_and_report() {
    let v = voter("a", 1);
    assert_eq!(classify(&v), Class::Voter);

    let mut learner = voter("a", 1);
    learner.etcd_is_voter = false;
    assert_eq!(classify(&learner), Class::Learner);

    let mut etcd_only = voter("a", 1);
    etcd_only.report = Some(report(
        "s1",
        ReportStep::StepDown,
        Phase::Done,
        Some(Detail::EtcdOnly),
    ));
    assert_eq!(classify(&etcd_only), Class::EtcdOnly);

    let mut rolled = voter("a", 1);
    rolled.report = Some(report(
        "s1",
        ReportStep::Rollback,
        Phase::Done,
        Some(Detail::AgentReady),
    ));
    assert_eq!(classify(&rolled), Class::RolledBack);
    assert!(is_voting(&rolled) && !is_healthy_voter(&rolled));

    let mut removed = voter("a", 1);
    removed.k3s.removed_node_name = removed.k3s.node_name.take();
    assert_eq!(classify(&removed), Class::Removed);

    assert_eq!(classify(&agent("b", true)), Class::Agent);
}

#[test]
fn a_rejoined_member_is_not_taken_for_a_removed_one() {
    let mut n = voter("a", 1);
    n.k3s.removed_node_name = Some("a-deadbeef".into());
    assert!(!n.member_gone());
    assert_eq!(classify(&n), Class::Voter);
}

#[test]
fn a_node_whose_kubelet_stopped_renewing_its_lease_counts_as_not_ready() {
    let mut v = fleet();
    node_mut(&mut v, "n2").lease_renewed_at = Some(NOW - 41);
    node_mut(&mut v, "n3").lease_renewed_at = Some(NOW - 40);
    node_mut(&mut v, "n4").lease_renewed_at = None;
    apply_heartbeats(&mut v);
    let n2 = v.node("n2").unwrap();
    assert!(!n2.ready);
    assert_eq!(n2.ready_since, Some(NOW - 1));
    assert!(v.node("n3").unwrap().ready);
    assert!(
        v.node("n4").unwrap().ready,
        "no node Lease: the condition decides"
    );
    assert_eq!(
        refused_by(&next_action(&v, &request("n1", "n4"))),
        vec![GateName::VotersHealthy]
    );
}

#[test]
fn a_not_ready_voter_votes_but_is_not_healthy() {
    let mut n = voter("a", 1);
    n.ready = false;
    assert!(is_voting(&n));
    assert!(!is_healthy_voter(&n));
    assert_eq!(removing(&n), Removing::DownVoter);
}

#[test]
fn each_class_is_shown_by_its_own_word() {
    let words: Vec<&str> = [
        Class::Voter,
        Class::Learner,
        Class::EtcdOnly,
        Class::RolledBack,
        Class::Removed,
        Class::Agent,
    ]
    .into_iter()
    .map(Class::as_str)
    .collect();
    assert_eq!(
        words,
        [
            "voter",
            "learner",
            "etcd-only",
            "rolled-back",
            "removed",
            "agent"
        ]
    );
}

#[test]
fn a_host_whose_member_k3s_removed_is_removed_until_the_clean_up_even_without_server_labels() {
    let mut n = voter("n1", 1);
    n.k3s.removed_node_name = n.k3s.node_name.take();
    n.etcd_label = false;
    n.control_plane_label = false;
    n.master_label = false;
    assert_eq!(classify(&n), Class::Removed);
}
