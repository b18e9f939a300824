//! `run` and the voter set: the spread over zones and the count.
use super::*;
use crate::{fixtures::*, *};
use jiff::tz::TimeZone;

/// The fleet with each Node's zone.
fn zoned(zones: &[(&str, &str)]) -> FleetView {
    let mut v = fleet();
    for (n, z) in zones {
        node_mut(&mut v, n).zone = Some((*z).to_string());
    }
    v
}

#[test]
fn run_swaps_a_voter_of_a_full_zone_for_a_standby_of_an_empty_one() {
    let v = zoned(&[("n1", "a"), ("n2", "a"), ("n3", "a"), ("n4", "b")]);
    let RunDecision::Swap { out, incoming, why } = run_decision(&v) else {
        panic!("{:?}", run_decision(&v))
    };
    assert_eq!((out.as_str(), incoming.as_str()), ("n3", "n4"));
    assert!(why.starts_with("to spread the voters"), "{why}");
    assert!(why.contains("a 3, b 0"), "{why}");
}

#[test]
fn run_leaves_voters_as_spread_as_the_zones_allow() {
    // Two zones, three voters: two in one zone is the rule's bound.
    let v = zoned(&[("n1", "a"), ("n2", "a"), ("n3", "b"), ("n4", "b")]);
    let RunDecision::Idle { why, .. } = run_decision(&v) else {
        panic!("{:?}", run_decision(&v))
    };
    assert_eq!(why, "every voter is healthy and eligible");
    // Unlabelled hosts are one zone: nothing to spread.
    assert!(matches!(run_decision(&fleet()), RunDecision::Idle { .. }));
}

#[test]
fn run_does_not_spread_without_a_spread_label() {
    let mut v = zoned(&[("n1", "a"), ("n2", "a"), ("n3", "a"), ("n4", "b")]);
    v.settings.spread_label = None;
    assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
}

#[test]
fn run_spreads_only_inside_its_window() {
    let mut v = zoned(&[("n1", "a"), ("n2", "a"), ("n3", "a"), ("n4", "b")]);
    v.settings.window = Some(Window::new(&[], "00:00", "00:01", TimeZone::UTC, "UTC").unwrap());
    let RunDecision::Idle { why, until } = run_decision(&v) else {
        panic!("run spread outside its window")
    };
    assert!(why.contains("a swap would spread them"), "{why}");
    assert!(until.is_some());
}

#[test]
fn run_does_not_spread_while_a_voter_is_down_within_its_grace() {
    let mut v = zoned(&[("n1", "a"), ("n2", "a"), ("n3", "a"), ("n4", "b")]);
    take_down(&mut v, "n2");
    node_mut(&mut v, "n2").ready_since = Some(NOW - 10);
    let RunDecision::Idle { why, .. } = run_decision(&v) else {
        panic!("{:?}", run_decision(&v))
    };
    assert!(why.starts_with("no voter to replace yet"), "{why}");
}

#[test]
fn run_replacing_a_down_voter_promotes_the_standby_of_the_zone_it_leaves_empty() {
    let mut v = zoned(&[("n1", "a"), ("n2", "b"), ("n3", "c"), ("n4", "a")]);
    let mut n6 = agent("n6", true);
    n6.zone = Some("c".into());
    v.nodes.push(n6);
    take_down(&mut v, "n3");
    node_mut(&mut v, "n3").ready_since = Some(NOW - 301);
    let RunDecision::Swap { out, incoming, .. } = run_decision(&v) else {
        panic!("{:?}", run_decision(&v))
    };
    assert_eq!(
        (out.as_str(), incoming.as_str()),
        ("n3", "n6"),
        "n4 comes first by name, but its zone keeps a voter"
    );
}

/// The fleet with `voters` configured and n6 a second eligible standby.
fn counted(voters: usize) -> FleetView {
    let mut v = fleet();
    v.settings.voters = voters;
    v.nodes.push(agent("n6", true));
    v
}

fn resize(d: RunDecision) -> (Option<String>, Option<String>, Vec<String>, String) {
    let RunDecision::Resize {
        out,
        incoming,
        queued,
        why,
    } = d
    else {
        panic!("{d:?}")
    };
    let s = |n: Option<NodeName>| n.map(|n| n.to_string());
    (
        s(out),
        s(incoming),
        queued.iter().map(ToString::to_string).collect(),
        why,
    )
}

#[test]
fn run_grows_toward_the_configured_count_two_standbys_at_a_time_from_an_odd_count() {
    let v = counted(5);
    let (out, incoming, queued, why) = resize(run_decision(&v));
    assert_eq!((out, incoming.as_deref()), (None, Some("n4")));
    assert_eq!(queued, ["n6"], "3 -> 4 alone would leave an even count");
    assert!(why.starts_with("toward 5 voters"), "{why}");
    assert_eq!(
        run_decision(&v).change_words().unwrap(),
        "grow: promote n4, then n6"
    );
}

#[test]
fn run_shrinks_toward_the_configured_count_two_voters_at_a_time_from_an_odd_count() {
    let mut v = counted(3);
    *node_mut(&mut v, "n4") = voter("n4", 4);
    *node_mut(&mut v, "n6") = voter("n6", 6);
    refresh_etcd_views(&mut v, |_| true);
    let (out, incoming, queued, _) = resize(run_decision(&v));
    assert!(incoming.is_none() && out.is_some(), "{out:?} {incoming:?}");
    assert_eq!(queued.len(), 1, "5 -> 4 alone would leave an even count");
    assert_ne!(Some(&queued[0]), out.as_ref());
}

#[test]
fn run_grows_only_inside_its_window_but_finishes_an_even_count_at_once() {
    let mut v = counted(5);
    v.settings.window = Some(Window::new(&[], "00:00", "00:01", TimeZone::UTC, "UTC").unwrap());
    let RunDecision::Idle { why, until } = run_decision(&v) else {
        panic!("run grew outside its window: {:?}", run_decision(&v))
    };
    assert!(why.contains("`grow --in n4`"), "{why}");
    assert!(until.is_some());
    // Four voters: the middle of a pair, finished whatever the window.
    *node_mut(&mut v, "n4") = voter("n4", 4);
    refresh_etcd_views(&mut v, |_| true);
    let (_, incoming, queued, _) = resize(run_decision(&v));
    assert_eq!((incoming.as_deref(), queued.len()), (Some("n6"), 0));
}

#[test]
fn run_takes_up_a_grow_whose_controller_went_away() {
    let mut v = counted(5);
    let mut l = lease_held_by("fleet-role", "ctl-gone", "swap-9", "", "n4");
    l.renew_time = Some(NOW - 600);
    v.lease = Some(l);
    let (out, incoming, queued, why) = resize(run_decision(&v));
    assert_eq!((out, incoming.as_deref()), (None, Some("n4")));
    assert!(queued.is_empty());
    assert!(why.starts_with("grow swap-9 is unfinished"), "{why}");
}

#[test]
fn run_spreads_once_a_host_it_replaced_has_rested_and_says_when_that_is() {
    let mut v = zoned(&[("n1", "a"), ("n2", "a"), ("n3", "a"), ("n4", "b")]);
    // n4 was replaced by run 600 s ago and is Ready again since 200 s.
    v.lease = Some(lease_with_endings(&[("n4", NOW - 600, false)]));
    node_mut(&mut v, "n4").ready_since = Some(NOW - 200);
    let RunDecision::Idle { until, .. } = run_decision(&v) else {
        panic!("{:?}", run_decision(&v))
    };
    let rested = NOW - 200 + v.settings.standby_min_healthy;
    assert_eq!(until, Some(rested), "run must wake when n4 may stand by");
    v.now = rested;
    assert!(
        matches!(run_decision(&v), RunDecision::Swap { .. }),
        "{:?}",
        run_decision(&v)
    );
}
