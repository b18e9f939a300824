//! Unit tests of `resize.rs` and of the grow's and shrink's plans.

use super::*;
use crate::{all_pass, failures, fixtures::*, plan_grow, plan_shrink};

fn shut(gates: &[Gate]) -> Vec<(GateName, String)> {
    gates
        .iter()
        .filter(|g| !g.passed)
        .map(|g| (g.name, g.reason.clone()))
        .collect()
}

/// One healthy voter n1, and n2, n3, n4 eligible standbys.
fn one_voter() -> FleetView {
    let mut v = fleet();
    v.nodes = vec![
        voter("n1", 1),
        agent("n2", true),
        agent("n3", true),
        agent("n4", true),
    ];
    v.settings.voters = 1;
    with_etcd_views(v)
}

#[test]
fn an_odd_count_at_the_end_passes_and_an_even_one_is_refused_with_the_next_step_named() {
    assert!(gate_odd_voter_count(1, 3, true).passed);
    assert!(gate_odd_voter_count(2, 3, true).passed);
    assert!(gate_odd_voter_count(3, 1, false).passed);
    let g = gate_odd_voter_count(1, 2, true);
    assert!(!g.passed);
    assert_eq!(
        g.reason,
        "growing from 1 voters to 2 leaves an even count standing: 2 voters need 2 for quorum and tolerate no more failures than 1 would; queue a second --in to go on to 3"
    );
    let g = gate_odd_voter_count(3, 2, false);
    assert!(!g.passed);
    assert!(
        g.reason.ends_with("queue a second --out to go on to 1"),
        "{}",
        g.reason
    );
    let g = gate_odd_voter_count(1, 0, false);
    assert!(!g.passed);
    assert_eq!(
        g.reason,
        "shrinking from 1 voters to none leaves no cluster"
    );
}

#[test]
fn a_grow_from_one_voter_to_two_is_refused_and_to_three_passes_every_gate() {
    let v = one_voter();
    let gates = grow_gates(&v, &["n2"]);
    assert_eq!(
        shut(&gates).into_iter().map(|g| g.0).collect::<Vec<_>>(),
        vec![GateName::OddVoterCount]
    );
    let gates = grow_gates(&v, &["n2", "n3"]);
    assert!(all_pass(&gates), "{}", failures(&gates));
    // Each host's gates name it alone.
    let known: Vec<&str> = gates
        .iter()
        .filter(|g| g.name == GateName::KnownProtocol)
        .map(|g| g.reason.as_str())
        .collect();
    assert!(
        known[0].starts_with("n2 and the regrade Lease"),
        "{known:?}"
    );
    assert!(
        known[1].starts_with("n3 and the regrade Lease"),
        "{known:?}"
    );
}

#[test]
fn a_grow_checks_every_queued_host_as_a_swaps_incoming_host_is_checked() {
    let mut v = one_voter();
    node_mut(&mut v, "n3").eligible = false;
    node_mut(&mut v, "n2").ready = false;
    let gates = grow_gates(&v, &["n2", "n3"]);
    let names: Vec<GateName> = shut(&gates).into_iter().map(|g| g.0).collect();
    assert_eq!(
        names,
        vec![GateName::IncomingReady, GateName::IncomingEligible],
        "{}",
        failures(&gates)
    );
    // A voter is no standby to grow with.
    let gates = grow_gates(&fleet(), &["n1", "n4"]);
    assert!(
        shut(&gates)
            .iter()
            .any(|(n, r)| *n == GateName::IncomingAgent && r.contains("n1")),
        "{}",
        failures(&gates)
    );
}

#[test]
fn a_shrink_from_three_voters_to_two_is_refused_with_the_reason() {
    let gates = shrink_gates(&fleet(), &["n3"]);
    let shut = shut(&gates);
    assert_eq!(shut.len(), 1, "{}", failures(&gates));
    assert_eq!(shut[0].0, GateName::OddVoterCount);
    assert!(
        shut[0].1.starts_with("shrinking from 3 voters to 2"),
        "{}",
        shut[0].1
    );
}

#[test]
fn a_shrink_of_two_healthy_voters_from_three_loses_quorum_at_the_second_step_down() {
    // The second outgoing voter restarts etcd-only while it is one of two.
    let gates = shrink_gates(&fleet(), &["n2", "n3"]);
    let shut = shut(&gates);
    assert_eq!(
        shut.iter().map(|g| g.0).collect::<Vec<_>>(),
        vec![GateName::QuorumAfterRemoval],
        "{}",
        failures(&gates)
    );
    assert_eq!(
        shut[0].1,
        "removing n2 then n3 loses quorum: 2 voting (1 healthy), quorum 2, quorum lost"
    );
}

#[test]
fn a_shrink_of_five_voters_to_three_passes_and_of_a_down_voter_first_too() {
    let mut v = fleet();
    v.nodes.push(voter("n6", 6));
    v.nodes.push(voter("n7", 7));
    v.settings.voters = 5;
    let v = with_etcd_views(v);
    let gates = shrink_gates(&v, &["n6", "n7"]);
    assert!(all_pass(&gates), "{}", failures(&gates));
    let plan = plan_shrink(&v, &["n6", "n7"]);
    let lowest: Vec<Option<usize>> = plan.steps.iter().map(|s| s.tolerance.may_fail).collect();
    // 5 voters: 2 may fail; each step-down's restart takes one away.
    assert_eq!(plan.steps.first().unwrap().tolerance.voting, 5);
    assert_eq!(plan.steps.last().unwrap().tolerance.voting, 3);
    assert_eq!(lowest.iter().min(), Some(&Some(0)), "{lowest:?}");
    // A down voter goes first, with no restart: the dip is the healthy one's.
    let mut v = v;
    node_mut(&mut v, "n7").ready = false;
    let gates = shrink_gates(&v, &["n7", "n6"]);
    assert!(all_pass(&gates), "{}", failures(&gates));
    // Second, it is a voter down while the first steps down.
    let gates = shrink_gates(&v, &["n6", "n7"]);
    assert_eq!(
        shut(&gates).into_iter().map(|g| g.0).collect::<Vec<_>>(),
        vec![GateName::VotersHealthy],
        "{}",
        failures(&gates)
    );
}

#[test]
fn a_grow_plan_promotes_each_host_in_turn_and_shows_the_count_rising() {
    let plan = plan_grow(&one_voter(), &["n2", "n3"]);
    let promotions: Vec<(&str, usize)> = plan
        .steps
        .iter()
        .filter(|s| s.step.starts_with("promote"))
        .map(|s| (s.step.as_str(), s.tolerance.voting))
        .collect();
    assert_eq!(promotions.len(), 2, "{:?}", plan.steps);
    assert!(promotions[0].0.starts_with("promote n2 joining n1"));
    assert!(promotions[1].0.starts_with("promote n3 joining n1"));
    // The lowest moment of each promotion is before its join: 1, then 2.
    assert_eq!(promotions[0].1, 1);
    assert_eq!(promotions[1].1, 2);
    let last = plan.steps.last().unwrap();
    assert_eq!(
        (last.step.as_str(), last.tolerance.voting),
        ("release the Lease", 3)
    );
    assert_eq!(last.tolerance.may_fail, Some(1));
}
