use super::*;
use proptest::prelude::*;

fn host(name: &str, zone: Option<&str>, healthy: bool) -> Host {
    Host {
        name: name.to_string(),
        zone: zone.map(str::to_string),
        healthy,
    }
}

/// `n` healthy voters `v1..`, in `zone`.
fn voters_in(n: usize, zone: Option<&str>) -> Vec<Host> {
    (1..=n)
        .map(|i| host(&format!("v{i}"), zone, true))
        .collect()
}

/// `n` standbys `s1..`, in `zone`.
fn standbys_in(n: usize, zone: Option<&str>) -> Vec<Host> {
    (1..=n)
        .map(|i| host(&format!("s{i}"), zone, true))
        .collect()
}

fn moves(p: &Path) -> Vec<String> {
    p.stages.iter().map(|s| s.change.describe()).collect()
}

// === Fault tolerance ===

#[test]
fn the_tolerance_is_the_healthy_voters_beyond_the_quorum() {
    // (voting, healthy, may fail)
    let table = [
        (1, 1, Some(0)),
        (2, 2, Some(0)),
        (3, 3, Some(1)),
        (4, 4, Some(1)),
        (4, 3, Some(0)),
        (5, 5, Some(2)),
        (5, 3, Some(0)),
        (3, 1, None),
        (2, 1, None),
        (0, 0, None),
        (7, 7, Some(3)),
    ];
    for (voting, healthy, may_fail) in table {
        let t = Tolerance::of(voting, healthy);
        assert_eq!(t.may_fail, may_fail, "{voting} voting, {healthy} healthy");
        assert_eq!(t.quorum, quorum(voting));
    }
    assert_eq!(
        Tolerance::of(3, 5).healthy,
        3,
        "never more healthy than voting"
    );
}

#[test]
fn a_swap_at_three_voters_has_no_spare_voter_while_the_outgoing_host_restarts_etcd_only() {
    let swap = Move::Swap {
        out: "v3".into(),
        incoming: "s1".into(),
    };
    let (each, lowest) = walk(Tolerance::of(3, 3), &swap.events(true));
    let fails: Vec<_> = each.iter().map(|t| (t.voting, t.may_fail)).collect();
    assert_eq!(
        fails,
        [(4, Some(1)), (4, Some(0)), (4, Some(1)), (3, Some(1))],
        "joins, restarts, is back, leaves"
    );
    assert_eq!(
        (lowest.voting, lowest.healthy, lowest.may_fail),
        (4, 3, Some(0))
    );
}

#[test]
fn a_down_voter_leaves_without_a_restart_and_the_tolerance_rises() {
    let shrink = Move::Shrink { out: "v2".into() };
    assert_eq!(shrink.events(false), [Event::Leaves { healthy: false }]);
    let (each, lowest) = walk(Tolerance::of(4, 3), &shrink.events(false));
    assert_eq!(each[0].may_fail, Some(1));
    assert_eq!(lowest, Tolerance::of(4, 3), "the start is the lowest");
}

#[test]
fn a_swap_in_a_one_voter_cluster_loses_quorum_while_the_outgoing_host_restarts() {
    let swap = Move::Swap {
        out: "v1".into(),
        incoming: "s1".into(),
    };
    let (_, lowest) = walk(Tolerance::of(1, 1), &swap.events(true));
    assert_eq!(lowest.may_fail, None, "2 voting, 1 healthy: writes stall");
    assert!(
        lowest.describe().contains("quorum lost"),
        "{}",
        lowest.describe()
    );
}

// === The path ===

#[test]
fn one_voter_grows_to_three_with_two_standbys_in_succession() {
    let p = path(&voters_in(1, None), &standbys_in(3, None), 3);
    assert_eq!(moves(&p), ["grow --in s1", "grow --in s2"]);
    assert_eq!(p.end().voting, 3);
    assert_eq!(p.short, None);
}

#[test]
fn a_grow_that_would_leave_an_even_count_standing_is_not_started() {
    let p = path(&voters_in(3, None), &standbys_in(1, None), 5);
    assert!(p.stages.is_empty(), "{:?}", moves(&p));
    let short = p.short.unwrap();
    assert!(
        short.contains("needs 2 free standby at once, 1 free"),
        "{short}"
    );
}

#[test]
fn an_even_count_grows_by_one() {
    let p = path(&voters_in(2, None), &standbys_in(2, None), 3);
    assert_eq!(moves(&p), ["grow --in s1"]);
}

#[test]
fn five_voters_shrink_to_three_down_voters_first() {
    let mut v = voters_in(5, None);
    v[1].healthy = false;
    let p = path(&v, &[], 3);
    assert_eq!(moves(&p), ["shrink --out v2", "shrink --out v5"]);
    assert_eq!(p.stages[0].after.may_fail, Some(1), "4 voting, 4 healthy");
    assert_eq!(p.end(), Tolerance::of(3, 3));
}

#[test]
fn three_voters_are_not_shrunk_to_one_by_step_downs_and_the_path_says_why() {
    // The second voter out would restart as etcd-only while one of two.
    let p = path(&voters_in(3, None), &[], 1);
    assert!(p.stages.is_empty(), "{:?}", moves(&p));
    assert_eq!(
        p.short.as_deref(),
        Some(
            "1 voters configured, 3 standing: shrink --out v2 would lose quorum (2 voting (1 healthy), quorum 2, quorum lost) while its host restarts as etcd-only"
        )
    );
    assert_eq!(p.end(), Tolerance::of(3, 3));
}

#[test]
fn a_shrink_takes_voters_from_the_fullest_zone() {
    let v = vec![
        host("v1", Some("a"), true),
        host("v2", Some("a"), true),
        host("v3", Some("a"), true),
        host("v4", Some("b"), true),
        host("v5", Some("c"), true),
    ];
    let p = path(&v, &[], 3);
    assert_eq!(moves(&p), ["shrink --out v3", "shrink --out v2"]);
    assert_eq!(p.end().voting, 3);
    assert!(p.stages[1].spread.holds(), "{:?}", p.stages[1].spread);
}

#[test]
fn voters_all_in_one_zone_are_swapped_out_toward_the_empty_zone_once() {
    let p = path(&voters_in(3, Some("a")), &standbys_in(2, Some("b")), 3);
    assert_eq!(moves(&p), ["swap --out v3 --in s1"]);
    let s = &p.stages[0].spread;
    assert_eq!(s.zones.get("a"), Some(&2));
    assert_eq!(s.zones.get("b"), Some(&1));
    assert!(s.holds());
    assert_eq!(s.cap, 2);
}

#[test]
fn level_zones_are_left_alone() {
    let v = vec![
        host("v1", Some("a"), true),
        host("v2", Some("a"), true),
        host("v3", Some("b"), true),
    ];
    let p = path(&v, &standbys_in(3, Some("b")), 3);
    assert!(p.stages.is_empty(), "{:?}", moves(&p));
    assert!(p.spread.holds());
}

#[test]
fn a_grow_picks_the_standby_of_the_zone_with_the_fewest_voters() {
    let v = vec![host("v1", Some("a"), true)];
    let s = vec![
        host("s1", Some("a"), true),
        host("s2", Some("b"), true),
        host("s3", Some("c"), true),
    ];
    let p = path(&v, &s, 3);
    assert_eq!(moves(&p), ["grow --in s2", "grow --in s3"]);
    assert_eq!(p.end().may_fail, Some(1));
}

#[test]
fn a_set_without_quorum_gets_no_path() {
    let mut v = voters_in(3, None);
    v[0].healthy = false;
    v[1].healthy = false;
    let p = path(&v, &standbys_in(4, None), 5);
    assert!(p.stages.is_empty());
    assert!(p.short.unwrap().contains("quorum is lost"));
}

#[test]
fn the_spread_is_described_zone_by_zone_with_its_verdict() {
    let s = spread(&voters_in(3, Some("a")), &standbys_in(1, Some("b")));
    assert_eq!(
        s.describe(),
        "a 3, b 0 (at most 2 per zone: 3 in one zone, 2 possible)"
    );
    assert!(!s.holds());
    let one = spread(&voters_in(3, None), &[]);
    assert!(one.holds(), "one zone allows three in it");
    assert_eq!(one.zones.get(NO_ZONE), Some(&3));
}

// === Properties ===

fn zone_of(i: u8) -> Option<String> {
    (i < 3).then(|| format!("z{i}"))
}

prop_compose! {
    fn a_fleet()(
        voters in prop::collection::vec((0u8..4, prop::bool::weighted(0.8)), 1..=7),
        standbys in prop::collection::vec(0u8..4, 0..=6),
        target in prop::sample::select(vec![1usize, 3, 5, 7]),
    ) -> (Vec<Host>, Vec<Host>, usize) {
        let v = voters.iter().enumerate().map(|(i, (z, ok))| Host {
            name: format!("v{i}"), zone: zone_of(*z), healthy: *ok,
        }).collect();
        let s = standbys.iter().enumerate().map(|(i, z)| Host {
            name: format!("s{i}"), zone: zone_of(*z), healthy: true,
        }).collect();
        (v, s, target)
    }
}

proptest! {
    #[test]
    fn no_step_of_a_path_stands_below_the_tolerance_of_its_start_or_its_end((v, s, target) in a_fleet()) {
        let p = path(&v, &s, target);
        let floor = p.start.margin().min(p.end().margin());
        for st in &p.stages {
            prop_assert!(st.after.margin() >= floor, "{} leaves {} below {floor}", st.change.describe(), st.after.describe());
        }
        // The lowest moment of a move is at most one below where it ends:
        // only the outgoing host's restart dips.
        for st in &p.stages {
            prop_assert!(st.lowest.margin() + 1 >= st.after.margin().min(p.start.margin()));
        }
    }

    #[test]
    fn a_path_reaches_the_configured_count_when_the_standbys_allow_and_never_ends_even_from_odd((v, s, target) in a_fleet()) {
        let p = path(&v, &s, target);
        if p.start.may_fail.is_none() {
            prop_assert!(p.stages.is_empty());
            return Ok(());
        }
        let end = p.end().voting;
        // A shrink that would lose quorum is not planned, and says so.
        let refused = p.short.as_deref().is_some_and(|s| s.contains("would lose quorum"));
        if (v.len() >= target && !refused) || (v.len() < target && s.len() >= target - v.len()) {
            prop_assert_eq!(end, target, "{:?}", moves(&p));
        }
        if v.len() % 2 == 1 {
            prop_assert!(end % 2 == 1, "{:?}", moves(&p));
        }
        // A swap (the count kept) never stands on an even count reached
        // from an odd one.
        let counts: Vec<usize> = std::iter::once(v.len()).chain(p.stages.iter().map(|s| s.after.voting)).collect();
        for w in counts.windows(2) {
            prop_assert!(w[0].abs_diff(w[1]) <= 1, "one member at a time: {counts:?}");
            prop_assert!(w[0] != w[1] || w[0] % 2 == 1 || v.len() % 2 == 0, "a swap at an even count: {counts:?}");
        }
    }

    #[test]
    fn no_moment_of_a_planned_shrink_loses_quorum((v, s, target) in a_fleet()) {
        let p = path(&v, &s, target);
        for st in &p.stages {
            if let Move::Shrink { .. } = st.change {
                prop_assert!(st.lowest.may_fail.is_some(), "{} at {}", st.change.describe(), st.lowest.describe());
            }
        }
    }

    #[test]
    fn a_path_ends_as_spread_as_the_zones_allow_and_no_step_worsens_the_spread_past_the_rule((v, s, target) in a_fleet()) {
        let p = path(&v, &s, target);
        // A fleet with no quorum to keep has no path to judge: drawn again.
        prop_assume!(p.start.may_fail.is_some());
        let mut fullest = p.spread.fullest();
        for st in &p.stages {
            prop_assert!(
                st.spread.fullest() <= fullest.max(st.spread.best),
                "{} makes the spread worse: {}", st.change.describe(), st.spread.describe()
            );
            fullest = st.spread.fullest();
        }
        let end = p.stages.last().map_or(&p.spread, |s| &s.spread);
        prop_assert!(end.holds(), "{:?}: {}", moves(&p), end.describe());
    }
}
