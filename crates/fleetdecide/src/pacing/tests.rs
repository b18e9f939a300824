//! Unit tests of `pacing.rs`.

use super::*;
use crate::fixtures::*;
use crate::settings::Settings;
use fleetfacts::window::Window;
use jiff::{Timestamp, tz::TimeZone};

fn window(d: &[&str], start: &str, end: &str, zone: &str) -> Window {
    let tz = fleetfacts::window::fixed_zone(zone).unwrap_or_else(|| TimeZone::posix(zone).unwrap());
    let days: Vec<String> = d.iter().map(|s| s.to_string()).collect();
    Window::new(&days, start, end, tz, zone).unwrap()
}

/// Unix seconds of an RFC 3339 time.
fn at(s: &str) -> i64 {
    s.parse::<Timestamp>().unwrap().as_second()
}

// === Graces ===

fn with_endings(mut v: FleetView, endings: &[(&str, i64, bool)]) -> FleetView {
    v.lease = Some(lease_with_endings(endings));
    v
}

fn go(v: &FleetView, out: &str) -> Option<i64> {
    match pace(v, out) {
        Pace::Go => None,
        Pace::Wait { until, .. } => Some(until.unwrap_or(i64::MAX)),
    }
}

#[test]
fn run_waits_the_settle_time_after_any_ending() {
    let v = with_endings(fleet(), &[("n9", NOW - 10, true)]);
    assert_eq!(go(&v, "n2"), Some(NOW - 10 + 60));
    let Pace::Wait { why, .. } = pace(&v, "n2") else {
        panic!()
    };
    assert!(
        why.starts_with("settling for 60 s after swap swap-0: it next may at"),
        "{why}"
    );
    let v = with_endings(fleet(), &[("n9", NOW - 60, true)]);
    assert_eq!(go(&v, "n2"), None);
}

#[test]
fn a_voter_that_failed_is_tried_again_after_a_doubling_back_off_and_left_alone_at_the_cap() {
    let s = Settings {
        retry_max: 3,
        ..settings()
    };
    let mut v = fleet();
    v.settings = s;
    // One failure 100 s ago: back off 600 s from it.
    let one = with_endings(v.clone(), &[("n2", NOW - 100, true)]);
    assert_eq!(go(&one, "n2"), Some(NOW - 100 + 600));
    assert_eq!(go(&one, "n3"), None, "another voter is not held back");
    // Two: 1200 s after the last.
    let two = with_endings(
        v.clone(),
        &[("n2", NOW - 5000, true), ("n2", NOW - 100, true)],
    );
    assert_eq!(go(&two, "n2"), Some(NOW - 100 + 1200));
    // Three within the day: left alone until the first leaves the day.
    let three = with_endings(
        v.clone(),
        &[
            ("n2", NOW - 9000, true),
            ("n2", NOW - 5000, true),
            ("n2", NOW - 4000, true),
        ],
    );
    assert_eq!(go(&three, "n2"), Some(NOW - 9000 + 86_400));
    let Pace::Wait { why, .. } = pace(&three, "n2") else {
        panic!()
    };
    assert!(
        why.contains("n2 failed 3 times within 86400 s (the cap is 3)"),
        "{why}"
    );
    // A failure older than the period does not count.
    let old = with_endings(
        v.clone(),
        &[("n2", NOW - 90_000, true), ("n2", NOW - 5000, true)],
    );
    assert_eq!(
        go(&old, "n2"),
        None,
        "one failure, 5000 s ago: past its 600 s"
    );
    // A success of the voter since forgives what came before.
    let forgiven = with_endings(
        v,
        &[
            ("n2", NOW - 9000, true),
            ("n2", NOW - 8500, true),
            ("n2", NOW - 8000, true),
            ("n2", NOW - 7000, false),
        ],
    );
    assert_eq!(go(&forgiven, "n2"), None);
}

#[test]
fn the_default_cap_leaves_a_voter_that_failed_twice_alone() {
    let v = with_endings(
        fleet(),
        &[("n2", NOW - 7000, true), ("n2", NOW - 5000, true)],
    );
    assert_eq!(go(&v, "n2"), Some(NOW - 7000 + 86_400));
}

#[test]
fn outside_its_window_run_waits_for_the_opening_after_every_other_wait() {
    let mut v = fleet();
    v.now = at("2026-12-07T12:00:00Z");
    v.settings.window = Some(window(&["mon"], "22:00", "22:30", "UTC"));
    let opens = at("2026-12-07T22:00:00Z");
    assert_eq!(go(&v, "n2"), Some(opens));
    let Pace::Wait { why, .. } = pace(&v, "n2") else {
        panic!()
    };
    assert_eq!(
        why,
        "outside its window (mon 22:00:00-22:30:00 UTC): it next may at 2026-12-07T22:00:00+00:00[UTC]"
    );
    v.now = opens + 10;
    assert_eq!(go(&v, "n2"), None);
    // Inside, but the back-off (600 s) ends after the window closes:
    // next week.
    v.now = opens + 26 * 60;
    let v = with_endings(v.clone(), &[("n2", opens + 25 * 60, true)]);
    assert_eq!(go(&v, "n2"), Some(at("2026-12-14T22:00:00Z")));
}

#[test]
fn the_lease_keeps_the_last_sixteen_endings_and_reads_the_last_swap_of_an_older_one() {
    let mut raw = None;
    for i in 0..20 {
        raw = Some(record_ending(
            raw.as_deref(),
            SwapEnding {
                swap: format!("swap-{i}"),
                out: "n2".into(),
                at: i,
                failed: true,
            },
        ));
    }
    let l = LeaseFacts {
        endings: raw,
        ..LeaseFacts::default()
    };
    let e = endings_of(&l);
    assert_eq!(e.len(), ENDINGS_KEPT);
    assert_eq!((e[0].at, e[15].at), (4, 19));
    let older = LeaseFacts {
        last_swap: Some(
            serde_json::to_string(&crate::LastSwap {
                swap: "swap-0".into(),
                out: "n9".into(),
                incoming: "n4".into(),
                at: 7,
                outcome: crate::Outcome::Done { warning: None },
            })
            .unwrap(),
        ),
        ..LeaseFacts::default()
    };
    assert_eq!(
        endings_of(&older),
        vec![SwapEnding {
            swap: "swap-0".into(),
            out: "n9".into(),
            at: 7,
            failed: false
        }]
    );
}

#[test]
fn a_host_run_replaced_stands_by_only_after_its_healthy_period() {
    let mut v = with_endings(fleet(), &[("n4", NOW - 500, false)]);
    node_mut(&mut v, "n4").ready_since = Some(NOW - 100);
    assert_eq!(
        standby_ready_at(&v, v.node("n4").unwrap()),
        Some(NOW - 100 + 3600)
    );
    // Ready since before its replacement ended: counted from the end.
    node_mut(&mut v, "n4").ready_since = Some(0);
    assert_eq!(
        standby_ready_at(&v, v.node("n4").unwrap()),
        Some(NOW - 500 + 3600)
    );
    assert_eq!(standby_ready_at(&v, v.node("n5").unwrap()), None);
    let failed = with_endings(fleet(), &[("n4", NOW - 500, true)]);
    assert_eq!(standby_ready_at(&failed, failed.node("n4").unwrap()), None);
}
