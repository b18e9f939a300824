use super::*;

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_same_seed_draws_the_same_schedule_and_another_seed_another() {
    let a = Schedule::draw(7, 10, 20);
    assert_eq!(a, Schedule::draw(7, 10, 20));
    assert_ne!(a, Schedule::draw(8, 10, 20));
}

#[test]
fn a_schedule_carries_every_fault_asked_for_spread_over_its_swaps_in_time_order() {
    let s = Schedule::draw(3, 4, 10);
    assert_eq!(s.swaps.len(), 4);
    assert_eq!(s.faults(), 10);
    let per: Vec<usize> = s.swaps.iter().map(|w| w.faults.len()).collect();
    assert_eq!(per, vec![3, 3, 2, 2]);
    for w in &s.swaps {
        assert!(w.faults.windows(2).all(|p| p[0].after_ms <= p[1].after_ms));
        for f in &w.faults {
            assert!(f.after_ms < LATEST_FAULT);
            assert!((HOLD.0..=HOLD.1).contains(&f.hold_ms), "{f:?}");
        }
    }
}

#[test]
fn many_seeds_draw_every_fault_kind_and_every_target_role() {
    let mut kinds = std::collections::BTreeSet::new();
    let (mut out, mut inc, mut other, mut standby) = (0, 0, 0, 0);
    for seed in 0..50 {
        for w in Schedule::draw(seed, 4, 8).swaps {
            for f in w.faults {
                kinds.insert(f.kind);
                match f.target {
                    Target::Outgoing => out += 1,
                    Target::Incoming => inc += 1,
                    Target::OtherVoter(_) => other += 1,
                    Target::Standby(_) => standby += 1,
                }
            }
        }
    }
    assert_eq!(kinds.len(), FaultKind::ALL.len());
    assert!(out > 0 && inc > 0 && other > 0 && standby > 0);
}

#[test]
fn a_schedule_reads_back_from_its_json_as_it_was_written() {
    let s = Schedule::draw(11, 3, 6);
    let text = serde_json::to_string_pretty(&s).unwrap();
    assert!(text.contains("\"kind\""), "{text}");
    assert_eq!(serde_json::from_str::<Schedule>(&text).unwrap(), s);
}

#[test]
fn a_pick_chooses_a_voter_out_and_a_standby_in_and_nothing_without_either() {
    let voters = names(&["server-1", "server-2", "server-3"]);
    let standbys = names(&["agent-1", "agent-2"]);
    let (o, i) = pick_pair(8, &voters, &standbys).unwrap();
    assert_eq!(o, "server-3");
    assert_eq!(i, "agent-2");
    assert!(pick_pair(8, &voters, &[]).is_none());
    assert!(pick_pair(8, &[], &standbys).is_none());
}

#[test]
fn targets_are_named_from_the_swap_and_the_fleet_of_the_moment() {
    let voters = names(&["server-1", "server-2", "server-3"]);
    let standbys = names(&["agent-1", "agent-2"]);
    let pair = ("server-2", "agent-1");
    let name = |t| name_target(t, pair, &voters, &standbys);
    assert_eq!(name(Target::Outgoing).as_deref(), Some("server-2"));
    assert_eq!(name(Target::Incoming).as_deref(), Some("agent-1"));
    // Another voter is never the outgoing one, a standby never the incoming.
    assert_eq!(name(Target::OtherVoter(0)).as_deref(), Some("server-1"));
    assert_eq!(name(Target::OtherVoter(1)).as_deref(), Some("server-3"));
    assert_eq!(name(Target::OtherVoter(2)).as_deref(), Some("server-1"));
    assert_eq!(name(Target::Standby(5)).as_deref(), Some("agent-2"));
    let alone = names(&["agent-1"]);
    assert_eq!(name_target(Target::Standby(0), pair, &voters, &alone), None);
}

#[test]
fn the_budget_lets_one_member_down_at_a_time_and_anything_else_alongside() {
    let mut b = Budget::default();
    assert_eq!(b.take(FaultKind::PowerOff, true), Some(true));
    assert!(b.member_down());
    // A second member down waits; the same fault off the members, or a
    // fault that downs nothing, goes.
    assert_eq!(b.take(FaultKind::Cut, true), None);
    assert_eq!(b.take(FaultKind::Cut, false), Some(false));
    assert_eq!(b.take(FaultKind::KillActuator, true), Some(false));
    assert_eq!(b.take(FaultKind::FreezeApi, true), Some(false));
    b.release();
    assert!(!b.member_down());
    assert_eq!(b.take(FaultKind::FreezeEtcd, true), Some(true));
}

/// The names of the kinds `which` holds for, in order.
fn kinds(which: fn(FaultKind) -> bool) -> Vec<&'static str> {
    FaultKind::ALL
        .into_iter()
        .filter(|k| which(*k))
        .map(FaultKind::name)
        .collect()
}

#[test]
fn only_the_faults_that_stop_a_member_count_against_the_budget() {
    assert_eq!(
        kinds(FaultKind::takes_member_down),
        [
            "kill-k3s",
            "power-off",
            "reboot",
            "hard-reset",
            "cut",
            "freeze-etcd",
            "peer-cut",
            "one-way",
            "split"
        ]
    );
    assert!(!FaultKind::KillLeadingRun.on_host());
    assert!(FaultKind::FreezeApi.on_host());
    assert!(FaultKind::HostClock.on_host());
    assert!(!FaultKind::ControllerClock.on_host());
    assert_eq!(
        kinds(FaultKind::lasts),
        [
            "kill-leading-run",
            "power-off",
            "hard-reset",
            "cut",
            "freeze-etcd",
            "freeze-api",
            "peer-cut",
            "one-way",
            "split",
            "api-cut",
            "host-clock",
            "controller-clock"
        ]
    );
    assert_eq!(
        kinds(FaultKind::on_network),
        ["peer-cut", "one-way", "split", "api-cut"]
    );
}

#[test]
fn a_clock_fault_sets_a_clock_off_beyond_the_margin_either_way_and_no_other_fault_does() {
    let (mut ahead, mut behind) = (0, 0);
    for seed in 0..50 {
        for f in Schedule::draw(seed, 4, 8)
            .swaps
            .into_iter()
            .flat_map(|w| w.faults)
        {
            if f.kind.on_clock() {
                let secs = f.offset_secs.unsigned_abs();
                assert!((CLOCK_OFFSET.0..=CLOCK_OFFSET.1).contains(&secs), "{f:?}");
                // Past the campaign's skew margin (5 s).
                assert!(secs > 5, "{f:?}");
                if f.offset_secs > 0 {
                    ahead += 1;
                } else {
                    behind += 1;
                }
            } else {
                assert_eq!(f.offset_secs, 0, "{f:?}");
            }
        }
    }
    assert!(ahead > 0 && behind > 0, "{ahead} ahead, {behind} behind");
}
