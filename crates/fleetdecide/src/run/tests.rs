//! `run`'s decisions: replacement, grace, pacing and the window.
use super::*;
use crate::{fixtures::*, *};
use jiff::tz::TimeZone;

// === `run` ===

#[test]
fn run_replaces_a_voter_not_ready_past_the_grace_period() {
    let mut v = fleet();
    take_down(&mut v, "n2");
    node_mut(&mut v, "n2").ready_since = Some(NOW - 100);
    assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
    node_mut(&mut v, "n2").ready_since = Some(NOW - 301);
    assert_eq!(
        run_decision(&v),
        RunDecision::Swap {
            out: name("n2"),
            incoming: name("n4"),
            why: "n2 has been NotReady for over 300 s".into()
        }
    );
}

#[test]
fn run_replaces_a_voter_on_a_host_not_eligible() {
    let mut v = fleet();
    node_mut(&mut v, "n3").eligible = false;
    let RunDecision::Swap { out, incoming, .. } = run_decision(&v) else {
        panic!()
    };
    assert_eq!((out.as_str(), incoming.as_str()), ("n3", "n4"));
}

#[test]
fn run_does_nothing_without_a_free_eligible_standby() {
    let mut v = fleet();
    node_mut(&mut v, "n3").eligible = false;
    node_mut(&mut v, "n4").cordoned = true;
    let RunDecision::Idle { why, .. } = run_decision(&v) else {
        panic!()
    };
    assert!(why.contains("no healthy eligible standby"), "{why}");
}

#[test]
fn run_never_promotes_a_standby_that_carries_only_the_old_label() {
    let mut v = fleet();
    node_mut(&mut v, "n3").eligible = false;
    let n4 = node_mut(&mut v, "n4");
    n4.eligible = false;
    n4.legacy_eligible = true;
    let RunDecision::Idle { why, .. } = run_decision(&v) else {
        panic!("a standby whose own kubelet could label it was chosen")
    };
    assert!(why.contains(protocol::names::ELIGIBLE_LABEL), "{why}");
}

#[test]
fn run_waits_between_swaps_and_resumes_an_unfinished_one_first() {
    let mut v = fleet();
    node_mut(&mut v, "n3").eligible = false;
    let last = LastSwap {
        swap: "swap-0".into(),
        out: "n9".into(),
        incoming: "n3".into(),
        at: NOW - 10,
        outcome: Outcome::Done { warning: None },
    };
    v.lease = Some(LeaseFacts {
        last_swap: Some(serde_json::to_string(&last).unwrap()),
        ..LeaseFacts::default()
    });
    assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
    // settle is 60 s: idle until exactly 60 s after the last swap.
    v.now = NOW - 10 + v.settings.settle - 1;
    assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
    v.now = NOW - 10 + v.settings.settle;
    assert!(matches!(run_decision(&v), RunDecision::Swap { .. }));
    let mut l = lease_held_by("fleet-role", "ctl-b", "swap-0", "n2", "n5");
    l.holder = None;
    l.stopped = Some("x".into());
    v.lease = Some(l);
    let RunDecision::Swap { out, incoming, .. } = run_decision(&v) else {
        panic!()
    };
    assert_eq!((out.as_str(), incoming.as_str()), ("n2", "n5"));
}

#[test]
fn run_is_idle_while_paused_or_while_a_swap_runs() {
    let mut v = fleet();
    node_mut(&mut v, "n3").eligible = false;
    v.lease = Some(LeaseFacts {
        paused: true,
        ..LeaseFacts::default()
    });
    assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
    v.lease = Some(lease_held_by("fleet-role", "ctl-b", "swap-0", "n2", "n5"));
    assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
}

#[test]
fn run_at_rest_says_when_the_voters_seen_differ_from_the_configured_count() {
    let v = fleet();
    assert_eq!(
        run_decision(&v),
        RunDecision::Idle {
            why: "every voter is healthy and eligible".into(),
            until: None
        }
    );
    let mut v = fleet();
    v.settings.voters = 5;
    let RunDecision::Idle { why, .. } = run_decision(&v) else {
        panic!()
    };
    // One eligible standby only (n5 is not): no pair to grow by, and
    // the path stops short.
    assert!(
        why.starts_with("every voter is healthy and eligible; 3 voters seen, 5 configured"),
        "{why}"
    );
}

#[test]
fn a_voter_not_ready_since_no_known_time_is_counted_from_now_and_not_replaced_at_once() {
    let mut v = fleet();
    take_down(&mut v, "n2");
    node_mut(&mut v, "n2").ready_since = None;
    let RunDecision::Idle { until, .. } = run_decision(&v) else {
        panic!("{:?}", run_decision(&v))
    };
    assert_eq!(until, Some(NOW + v.settings.grace_period));
}

#[test]
fn a_voter_whose_node_alone_reads_not_ready_is_never_replaced_however_long() {
    let mut v = fleet();
    let n2 = node_mut(&mut v, "n2");
    n2.ready = false;
    n2.ready_since = Some(i64::MIN);
    let RunDecision::Idle { why, until } = run_decision(&v) else {
        panic!("{:?}", run_decision(&v))
    };
    assert!(why.contains("renewed its node Lease"), "{why}");
    assert_eq!(until, None);
    // Its node Lease aged by a Lease writer: its own view of etcd still vouches.
    node_mut(&mut v, "n2").lease_renewed_at = None;
    let RunDecision::Idle { why, .. } = run_decision(&v) else {
        panic!("{:?}", run_decision(&v))
    };
    assert!(why.contains("its member is healthy"), "{why}");
}

// === A fleet's ordinary life ===

fn down<'a>(v: &'a mut FleetView, name: &str, since: i64) -> &'a mut NodeFacts {
    take_down(v, name);
    let n = node_mut(v, name);
    n.ready_since = Some(since);
    n
}

#[test]
fn a_cordoned_voter_is_not_replaced_within_its_maintenance_grace_and_the_same_voter_uncordoned_is()
{
    let mut v = fleet();
    down(&mut v, "n2", NOW - 1000).cordoned = true;
    let RunDecision::Idle { why, until } = run_decision(&v) else {
        panic!("a cordoned voter was replaced within its maintenance grace")
    };
    assert!(
        why.starts_with("no voter to replace yet: n2 is NotReady, within a maintenance grace (at most 1800 s): it is cordoned; it is replaced from"),
        "{why}"
    );
    assert_eq!(until, Some(NOW - 1000 + 1800));
    node_mut(&mut v, "n2").cordoned = false;
    let RunDecision::Swap { out, why, .. } = run_decision(&v) else {
        panic!()
    };
    assert_eq!(
        (out.as_str(), why.as_str()),
        ("n2", "n2 has been NotReady for over 300 s")
    );
    // Cordoned, and down past the maintenance grace: replaced as ever.
    down(&mut v, "n2", NOW - 1800).cordoned = true;
    let RunDecision::Swap { why, .. } = run_decision(&v) else {
        panic!()
    };
    assert_eq!(
        why,
        "n2 has been NotReady for over 1800 s, past a maintenance grace (at most 1800 s): it is cordoned"
    );
}

#[test]
fn a_voter_under_kured_or_the_operators_maintenance_mark_waits_for_its_grace() {
    let mut v = fleet();
    down(&mut v, "n2", NOW - 400).maintenance.kured_reboot = Some("x".into());
    assert!(
        matches!(run_decision(&v), RunDecision::Idle { until: Some(t), .. } if t == NOW - 400 + 1800)
    );
    let n2 = down(&mut v, "n2", NOW - 400);
    n2.maintenance.kured_reboot = None;
    n2.maintenance.until = Some((NOW + 100).to_string());
    assert!(matches!(run_decision(&v), RunDecision::Idle { until: Some(t), .. } if t == NOW + 100));
    v.now = NOW + 100;
    assert!(matches!(run_decision(&v), RunDecision::Swap { .. }));
}

fn at(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>().unwrap().as_second()
}

#[test]
fn run_outside_its_window_takes_no_action_and_says_when_it_next_may_and_inside_acts() {
    let mut v = fleet();
    v.now = at("2026-12-07T12:00:00Z");
    for n in &mut v.nodes {
        n.lease_renewed_at = Some(v.now);
    }
    v.settings.window = Some(
        Window::new(
            &["mon".to_string()],
            "22:00",
            "23:00",
            fixed_zone("+01:00").unwrap(),
            "+01:00",
        )
        .unwrap(),
    );
    node_mut(&mut v, "n3").eligible = false;
    let RunDecision::Idle { why, until } = run_decision(&v) else {
        panic!("run acted outside its window")
    };
    assert_eq!(
        why,
        "n3 is not eligible to vote (no node-restriction.kubernetes.io/fleet-role-voter-eligible=true), but outside its window (mon 22:00:00-23:00:00 +01:00): it next may at 2026-12-07T22:00:00+01:00[+01:00]"
    );
    assert_eq!(until, Some(at("2026-12-07T21:00:00Z")));
    v.now = at("2026-12-07T21:00:00Z");
    assert!(matches!(run_decision(&v), RunDecision::Swap { .. }));
}

#[test]
fn the_retry_cap_stops_run_from_trying_a_voter_that_failed_twice() {
    let mut v = fleet();
    down(&mut v, "n2", NOW - 4000);
    v.lease = Some(lease_with_endings(&[("n2", NOW - 3000, true)]));
    assert!(
        matches!(run_decision(&v), RunDecision::Swap { .. }),
        "one failure, 3000 s ago, is past its back-off"
    );
    v.lease = Some(lease_with_endings(&[
        ("n2", NOW - 3000, true),
        ("n2", NOW - 2000, true),
    ]));
    let RunDecision::Idle { why, until } = run_decision(&v) else {
        panic!("a voter that failed twice was tried a third time")
    };
    assert!(
        why.contains("n2 failed 2 times within 86400 s (the cap is 2)"),
        "{why}"
    );
    assert_eq!(until, Some(NOW - 3000 + 86_400));
    // Another voter due for replacement is not held back by n2's cap.
    node_mut(&mut v, "n3").eligible = false;
    let RunDecision::Swap { out, .. } = run_decision(&v) else {
        panic!()
    };
    assert_eq!(out.as_str(), "n3");
}

#[test]
fn a_stopped_swap_is_retried_as_pacing_allows_and_an_abandoned_one_is_resumed_at_once() {
    let mut v = fleet();
    let mut l = lease_held_by("fleet-role", "ctl-b", "swap-0", "n2", "n5");
    l.holder = None;
    l.renew_time = None;
    l.stopped = Some("the step-down failed".into());
    l.endings = lease_with_endings(&[("n2", NOW - 30, true)]).endings;
    v.lease = Some(l.clone());
    let RunDecision::Idle { why, until } = run_decision(&v) else {
        panic!("a stopped swap was retried within the settle time")
    };
    assert!(
        why.starts_with("swap swap-0 stopped (the step-down failed) and is not retried yet: settling for 60 s after swap swap-0; n2 failed 1 time(s) lately; backing off 600 s after the last"),
        "{why}"
    );
    assert_eq!(until, Some(NOW - 30 + 600));
    v.now = NOW - 30 + 600;
    assert!(matches!(run_decision(&v), RunDecision::Swap { .. }));
    // Its controller went away (nothing stopped it): resumed at once,
    // even outside a window.
    v.now = NOW;
    l.stopped = None;
    v.lease = Some(l);
    v.settings.window = Some(Window::new(&[], "00:00", "00:01", TimeZone::UTC, "UTC").unwrap());
    let RunDecision::Swap { why, .. } = run_decision(&v) else {
        panic!()
    };
    assert!(why.contains("its controller went away"), "{why}");
}

#[test]
fn a_host_run_replaced_is_chosen_as_a_standby_only_after_its_healthy_period() {
    let mut v = fleet();
    node_mut(&mut v, "n3").eligible = false;
    v.lease = Some(lease_with_endings(&[("n4", NOW - 600, false)]));
    node_mut(&mut v, "n4").ready_since = Some(NOW - 200);
    let RunDecision::Idle { why, until } = run_decision(&v) else {
        panic!("a host back for 200 s was chosen")
    };
    assert!(
        why.ends_with("is free: n4 was replaced lately and may stand by from 1970-01-12T14:43:20Z (Ready for 3600 s)"),
        "{why}"
    );
    assert_eq!(until, Some(NOW - 200 + 3600));
    v.now = NOW - 200 + 3600;
    for n in &mut v.nodes {
        n.lease_renewed_at = Some(v.now);
    }
    assert!(matches!(run_decision(&v), RunDecision::Swap { .. }));
}

mod property {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the clock, the window, the voters down and the
        /// endings kept: `run` starts a swap only inside its window,
        /// `settle` after the last ending, and never a swap of a voter
        /// that failed `retry_max` times within the period.
        #[test]
        fn run_never_starts_a_swap_outside_its_window_nor_past_the_cap(
            now in 0_i64..4_000_000_000,
            start in 0_u32..24, len in 1_u32..12,
            day_mask in 1_u8..128,
            downs in proptest::collection::vec((0_usize..3, 0_i64..10_000, any::<bool>()), 0..3),
            ineligible in proptest::option::of(0_usize..3),
            endings in proptest::collection::vec((0_usize..3, 0_i64..200_000, any::<bool>()), 0..8),
            retry_max in 1_u32..4,
            stopped in any::<bool>(),
        ) {
            let names = ["n1", "n2", "n3"];
            let mut v = fleet();
            v.now = now;
            v.settings.retry_max = retry_max;
            let days: Vec<String> = (0..7).filter(|d| day_mask & (1 << d) != 0).map(|d| DAYS[d].to_string()).collect();
            let end = (start + len) % 24;
            let window = Window::new(&days, &format!("{start:02}:00"), &format!("{end:02}:00"), TimeZone::UTC, "UTC").unwrap();
            v.settings.window = Some(window.clone());
            for n in &mut v.nodes {
                n.lease_renewed_at = Some(now);
                if let Some(h) = n.host.as_mut() { h.heartbeat_at = now; }
            }
            for (i, ago, cordoned) in &downs {
                down(&mut v, names[*i], now - ago).cordoned = *cordoned;
            }
            if let Some(i) = ineligible { node_mut(&mut v, names[i]).eligible = false; }
            let kept: Vec<(&str, i64, bool)> = endings.iter().map(|(i, ago, failed)| (names[*i], now - ago, *failed)).collect();
            let mut l = lease_with_endings(&kept);
            if stopped {
                let mut rec = lease_held_by("fleet-role", "ctl-b", "swap-9", "n2", "n4");
                rec.holder = None;
                rec.renew_time = None;
                rec.stopped = Some("x".into());
                rec.endings = l.endings.clone();
                l = rec;
            }
            v.lease = Some(l.clone());
            if let RunDecision::Swap { out, .. } = run_decision(&v) {
                prop_assert!(window.contains(now), "a swap outside the window");
                let all = crate::pacing::endings_of(&l);
                if let Some(last) = all.iter().map(|e| e.at).max() {
                    prop_assert!(now >= last + v.settings.settle, "a swap within the settle time");
                }
                let ok = all.iter().filter(|e| e.out == out.as_str() && !e.failed).map(|e| e.at).max();
                let failed = all.iter().filter(|e| e.out == out.as_str() && e.failed
                    && e.at > now - v.settings.retry_period && ok.is_none_or(|ok| e.at > ok)).count();
                prop_assert!(failed < retry_max as usize, "a swap of a voter at its cap");
            }
        }
    }
}
