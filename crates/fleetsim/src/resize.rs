//! Grows and shrinks in the simulated world: each half of a swap on its
//! own, run to its end one host at a time as `fleet-role grow` and
//! `fleet-role shrink` do, and under the same random faults as a swap.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::{
    Faults, World,
    properties::{arb_faults, arb_fleet},
    scenarios::write_kinds,
};
use fleetdecide::{fixtures::*, *};

fn quiet() -> Faults {
    Faults {
        tick_secs: 2,
        ..Faults::default()
    }
}

fn writes(w: &World) -> Vec<String> {
    write_kinds(&w.writes)
}

/// A change of `out` for `incoming` (either may be empty), with `queued`
/// after it, under the id `swap`.
fn change(out: &str, incoming: &str, queued: &[&str], swap: &str) -> SwapState {
    SwapState {
        queued: queued.iter().map(|n| name(n)).collect(),
        candidate: id(swap),
        ..request(out, incoming)
    }
}

fn done() -> Action {
    Action::ReleaseLease {
        outcome: Outcome::Done { warning: None },
    }
}

fn healthy_voters(w: &World) -> Vec<String> {
    w.v.sorted()
        .into_iter()
        .filter(|n| is_healthy_voter(n))
        .map(|n| n.name.clone())
        .collect()
}

/// Three voters and two eligible standbys, n4 and n5.
fn two_standbys() -> FleetView {
    let mut v = fleet();
    *node_mut(&mut v, "n5") = agent("n5", true);
    with_etcd_views(v)
}

#[test]
fn a_grow_of_two_promotes_each_standby_in_turn_with_no_step_down_and_ends_on_five_voters() {
    let mut w = World::new(two_standbys(), quiet());
    let first = w.run(&mut change("", "n4", &["n5"], "swap-1"), 200);
    assert_eq!(first, done());
    assert_eq!(
        writes(&w),
        [
            "take-lease",
            "request-snapshot n1",
            "promote n4",
            "clear-swap-marks n4",
            "clear-swap-marks n1",
            "release-lease",
        ]
    );
    assert_eq!(healthy_voters(&w), ["n1", "n2", "n3", "n4"]);
    // The Lease recorded the grow with no outgoing host, and its ending
    // says so for `run`'s pacing.
    let l = w.v.lease.as_ref().unwrap();
    assert!(l.swap.is_none() && l.swap_out.is_none());
    let last = l.last().unwrap();
    assert_eq!((last.out.as_str(), last.incoming.as_str()), ("", "n4"));
    // The second host, alone: 4 → 5 is odd.
    w.writes.clear();
    let second = w.run(&mut change("", "n5", &[], "swap-2"), 200);
    assert_eq!(second, done());
    assert_eq!(healthy_voters(&w), ["n1", "n2", "n3", "n4", "n5"]);
    assert!(w.v.nodes.iter().all(|n| !n.marks.any_annotation()));
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

#[test]
fn a_shrink_of_two_steps_each_voter_down_in_turn_with_no_promotion_and_ends_on_three_voters() {
    let mut w = World::new(two_standbys(), quiet());
    assert_eq!(w.run(&mut change("", "n4", &["n5"], "swap-1"), 200), done());
    assert_eq!(w.run(&mut change("", "n5", &[], "swap-2"), 200), done());
    w.writes.clear();
    let first = w.run(&mut change("n1", "", &["n2"], "swap-3"), 300);
    assert_eq!(first, done());
    assert_eq!(
        writes(&w),
        [
            "take-lease",
            "request-snapshot n2",
            "cordon n1",
            "step-down n1",
            "remove-member n1",
            "clean-up-server n1",
            "clear-swap-marks n1",
            "uncordon n1",
            "clear-swap-marks n2",
            "release-lease",
        ]
    );
    assert_eq!(classify(w.v.node("n1").unwrap()), Class::Agent);
    assert_eq!(healthy_voters(&w), ["n2", "n3", "n4", "n5"]);
    let second = w.run(&mut change("n2", "", &[], "swap-4"), 300);
    assert_eq!(second, done());
    assert_eq!(healthy_voters(&w), ["n3", "n4", "n5"]);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

#[test]
fn a_grow_or_shrink_that_would_leave_an_even_count_standing_is_refused_and_writes_nothing() {
    for s in [
        change("", "n4", &[], "swap-1"),
        change("n1", "", &[], "swap-1"),
    ] {
        let mut w = World::new(two_standbys(), quiet());
        let end = w.run(&mut s.clone(), 50);
        assert!(
            refused_by(&end).contains(&GateName::OddVoterCount),
            "{s:?}: {end:?}"
        );
        assert!(w.writes.is_empty(), "{:?}", w.writes);
    }
}

#[test]
fn a_grow_whose_promotion_fails_is_wound_down_and_the_voters_are_as_they_were() {
    let mut w = World::new(
        two_standbys(),
        Faults {
            promotion_fails: true,
            ..quiet()
        },
    );
    let end = w.run(&mut change("", "n4", &["n5"], "swap-1"), 300);
    assert!(
        matches!(
            end,
            Action::ReleaseLease {
                outcome: Outcome::WoundDown { .. }
            }
        ),
        "{end:?}"
    );
    assert_eq!(healthy_voters(&w), ["n1", "n2", "n3"]);
    assert_eq!(classify(w.v.node("n4").unwrap()), Class::Agent);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

#[test]
fn a_shrink_of_a_down_voter_removes_its_member_without_a_step_down_and_warns() {
    let mut v = two_standbys();
    for n in ["n4", "n5"] {
        *node_mut(&mut v, n) = voter(n, if n == "n4" { 4 } else { 5 });
    }
    take_down(&mut v, "n1");
    let mut w = World::new(with_etcd_views(v), quiet());
    let end = w.run(&mut change("n1", "", &["n2"], "swap-1"), 300);
    let Action::ReleaseLease {
        outcome: Outcome::Done { warning: Some(why) },
    } = &end
    else {
        panic!("{end:?}: {:?}", writes(&w))
    };
    assert!(why.contains("comes home as an agent by itself"), "{why}");
    let kinds = writes(&w);
    assert!(kinds.contains(&"remove-member n1".to_string()), "{kinds:?}");
    assert!(!kinds.contains(&"step-down n1".to_string()), "{kinds:?}");
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

/// A grow or a shrink drawn from a random fleet: the host at `out` or
/// `inc`, with one more of its kind queued when the count it would leave
/// is even (as an operator asks for 1 → 3 or 5 → 3).
fn drawn(v: &FleetView, out: usize, inc: usize, grow: bool) -> SwapState {
    let voting: Vec<&str> = v
        .nodes
        .iter()
        .filter(|n| is_voting(n))
        .map(|n| n.name.as_str())
        .collect();
    let (host, pool, after) = if grow {
        let agents: Vec<&str> = v
            .nodes
            .iter()
            .filter(|n| !is_voting(n))
            .map(|n| n.name.as_str())
            .collect();
        (v.nodes[inc].name.as_str(), agents, voting.len() + 1)
    } else {
        (
            v.nodes[out].name.as_str(),
            voting.clone(),
            voting.len().saturating_sub(1),
        )
    };
    let next: Vec<&str> = pool.into_iter().filter(|n| *n != host).take(1).collect();
    let queued: &[&str] = if after % 2 == 0 { &next } else { &[] };
    if grow {
        change("", host, queued, "swap-1")
    } else {
        change(host, "", queued, "swap-1")
    }
}

/// The property tests below are only as good as the worlds they draw.
#[test]
fn the_random_worlds_reach_every_ending_of_a_grow_and_a_shrink() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut endings: BTreeMap<String, usize> = BTreeMap::new();
    for k in 0..400 {
        let (v, out, inc) = arb_fleet().new_tree(&mut runner).unwrap().current();
        let faults = arb_faults().new_tree(&mut runner).unwrap().current();
        let grow = k % 2 == 0;
        let mut s = drawn(&v, out, inc, grow);
        let mut w = World::new(v, faults);
        let end = w.run(&mut s, 2000);
        let kind = if grow { "grow" } else { "shrink" };
        *endings
            .entry(format!("{kind} {}", super::ending(&end)))
            .or_default() += 1;
    }
    eprintln!("{endings:?}");
    for key in [
        "grow refused",
        "grow done",
        "grow wound down",
        "shrink refused",
        "shrink done",
        "shrink stopped",
    ] {
        assert!(endings.get(key).copied().unwrap_or(0) >= 3, "{endings:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// A swap's invariant holds for each half on its own: whatever the
    /// fleet and whatever goes wrong, no removal or host stop the
    /// controller asks for leaves fewer healthy voters than a quorum, a
    /// refused change wrote nothing, and every change ends.
    #[test]
    fn no_grow_or_shrink_under_faults_removes_or_stops_a_member_below_quorum(
        (v, out, inc) in arb_fleet(),
        faults in arb_faults(),
        grow in any::<bool>(),
    ) {
        let mut s = drawn(&v, out, inc, grow);
        let mut w = World::new(v, faults);
        let end = w.run(&mut s, 2000);
        prop_assert!(w.violations.is_empty(), "{:?}", w.violations);
        prop_assert!(end.is_terminal());
        if matches!(end, Action::Refuse { .. }) {
            let wrote = w.writes.iter().any(|a| a.node().is_some());
            prop_assert!(!wrote || faults.restart_at.is_some());
        }
        // A grow never asks a voter to step down; a shrink never promotes.
        let stepped_down = w.writes.iter().any(|a| matches!(a, Action::StepDown { .. }));
        let promoted = w.writes.iter().any(|a| matches!(a, Action::Promote { .. }));
        let other_half = if grow { stepped_down } else { promoted };
        prop_assert!(!other_half);
    }
}
