//! Unit tests of `life.rs`, kept apart so the module reads as the rules alone.

use super::*;
use crate::fixtures::*;
use crate::window::*;
use jiff::tz::TimeZone;

/// Unix seconds of an RFC 3339 time.
fn at(s: &str) -> i64 {
    s.parse::<Timestamp>().unwrap().as_second()
}

fn days(d: &[&str]) -> Vec<String> {
    d.iter().map(|s| s.to_string()).collect()
}

// === Graces ===

#[test]
fn a_voter_showing_planned_maintenance_gets_the_maintenance_grace_and_never_more() {
    let s = settings();
    let since = NOW - 10;
    let (ordinary, longest) = (since + 300, since + 1800);
    type Shape = fn(&mut NodeFacts);
    let rows: [(&str, Shape, GraceKind, i64, &str); 9] = [
        (
            "no mark",
            |_| {},
            GraceKind::Failure,
            ordinary,
            "the ordinary grace of 300 s",
        ),
        (
            "cordoned",
            |n| n.cordoned = true,
            GraceKind::Maintenance,
            longest,
            "it is cordoned",
        ),
        (
            "kured",
            |n| n.maintenance.kured_reboot = Some("2026-12-02T03:00:00Z".into()),
            GraceKind::Maintenance,
            longest,
            "kured is rebooting it (weave.works/kured-reboot-in-progress)",
        ),
        (
            "until, unix seconds",
            |n| n.maintenance.until = Some((NOW - 10 + 1000).to_string()),
            GraceKind::Maintenance,
            since + 1000,
            "PREFIX/maintenance until 1970-01-12T14:03:10Z",
        ),
        (
            "until, RFC 3339 with an offset",
            |n| n.maintenance.until = Some("1970-01-12T16:03:10+02:00".into()),
            GraceKind::Maintenance,
            since + 1000,
            "PREFIX/maintenance until 1970-01-12T14:03:10Z",
        ),
        (
            "until far ahead: capped at the maintenance grace",
            |n| n.maintenance.until = Some((NOW + 1_000_000).to_string()),
            GraceKind::Maintenance,
            longest,
            "PREFIX/maintenance until",
        ),
        (
            "until within the ordinary grace: nothing longer",
            |n| n.maintenance.until = Some((NOW + 100).to_string()),
            GraceKind::Failure,
            ordinary,
            "within the ordinary grace",
        ),
        (
            "until unreadable: ignored, and said",
            |n| n.maintenance.until = Some("tomorrow".into()),
            GraceKind::Failure,
            ordinary,
            "\"tomorrow\" is not a time (RFC 3339 or unix seconds) and is ignored",
        ),
        (
            "cordoned and a shorter until: the longer wins",
            |n| {
                n.cordoned = true;
                n.maintenance.until = Some((NOW + 600).to_string());
            },
            GraceKind::Maintenance,
            longest,
            "it is cordoned, PREFIX/maintenance until",
        ),
    ];
    for (what, shape, kind, deadline, why) in rows {
        let mut n = voter("n2", 2);
        shape(&mut n);
        let g = grace_for(&n, &s, since);
        assert_eq!((g.kind, g.deadline), (kind, deadline), "{what}: {g:?}");
        let why = why.replace("PREFIX", &s.names.prefix);
        assert!(g.why.contains(&why), "{what}: {}", g.why);
    }
}

#[test]
fn a_maintenance_grace_set_shorter_than_the_ordinary_one_never_shortens_it() {
    let s = Settings {
        maintenance_grace: 60,
        ..settings()
    };
    let mut n = voter("n2", 2);
    n.cordoned = true;
    assert_eq!(grace_for(&n, &s, NOW).deadline, NOW + 300);
}

// === Windows ===

fn window(d: &[&str], start: &str, end: &str, zone: &str) -> Window {
    let tz = fixed_zone(zone).unwrap_or_else(|| TimeZone::posix(zone).unwrap());
    Window::new(&days(d), start, end, tz, zone).unwrap()
}

#[test]
fn a_window_holds_its_days_and_hours_in_its_zone() {
    // 2026-12-07 is a Monday.
    let w = window(&["mon", "Wednesday", "5"], "22:00", "23:30", "+02:00");
    for (t, inside) in [
        ("2026-12-07T19:59:59Z", false), // Mon 21:59:59 local
        ("2026-12-07T20:00:00Z", true),  // Mon 22:00 local
        ("2026-12-07T21:29:59Z", true),
        ("2026-12-07T21:30:00Z", false), // the end is not inside
        ("2026-12-08T20:30:00Z", false), // Tuesday
        ("2026-12-09T20:30:00Z", true),  // Wednesday
        ("2026-12-11T20:30:00Z", true),  // Friday (5)
        ("2026-12-12T20:30:00Z", false), // Saturday
    ] {
        assert_eq!(w.contains(at(t)), inside, "{t}");
    }
    assert_eq!(w.describe(), "mon,wed,fri 22:00:00-23:30:00 +02:00");
}

#[test]
fn a_window_that_ends_before_it_starts_spans_midnight_from_its_days() {
    let w = window(&["sat"], "22:00", "06:00", "UTC");
    for (t, inside) in [
        ("2026-12-12T21:59:00Z", false), // Sat before the start
        ("2026-12-12T23:00:00Z", true),  // Sat night
        ("2026-12-13T05:59:59Z", true),  // Sun morning, from Saturday
        ("2026-12-13T06:00:00Z", false),
        ("2026-12-13T23:00:00Z", false), // Sun night: Sunday is not a day
        ("2026-12-12T03:00:00Z", false), // Sat morning: Friday is not one
    ] {
        assert_eq!(w.contains(at(t)), inside, "{t}");
    }
}

#[test]
fn a_window_says_when_it_next_opens_across_days_and_a_clock_change() {
    let w = window(&["mon"], "22:00", "23:00", "+02:00");
    let open = at("2026-12-07T20:00:00Z");
    assert_eq!(w.next_open(open - 1), Some(open));
    assert_eq!(w.next_open(open + 60), Some(open + 60), "inside: now");
    let next_week = at("2026-12-14T20:00:00Z");
    assert_eq!(w.next_open(at("2026-12-07T21:00:00Z")), Some(next_week));
    // Central Europe: on 2026-03-29 the clocks go from 02:00 to 03:00.
    let cet = window(&[], "02:30", "04:00", "CET-1CEST,M3.5.0,M10.5.0/3");
    // 02:30 does not exist that night: the window opens at 03:30 CEST.
    assert_eq!(
        cet.next_open(at("2026-03-28T23:00:00Z")),
        Some(at("2026-03-29T01:30:00Z"))
    );
    assert!(!cet.contains(at("2026-03-29T00:45:00Z")), "01:45 CET");
    assert!(cet.contains(at("2026-03-29T01:30:00Z")), "03:30 CEST");
    // A window that night's skipped hour swallows whole opens the
    // next day.
    let short = window(&[], "02:15", "02:45", "CET-1CEST,M3.5.0,M10.5.0/3");
    assert_eq!(
        short.next_open(at("2026-03-28T23:00:00Z")),
        Some(at("2026-03-30T00:15:00Z"))
    );
    // In winter 02:30 is 01:30 UTC.
    assert_eq!(
        cet.next_open(at("2026-12-07T00:00:00Z")),
        Some(at("2026-12-07T01:30:00Z"))
    );
}

#[test]
fn a_swap_asked_to_keep_to_the_window_is_told_when_it_next_opens() {
    let w = window(&["mon"], "22:00", "23:00", "UTC");
    assert_eq!(
        w.closed_at(at("2026-12-07T12:00:00Z")).as_deref(),
        Some(
            "outside the window (mon 22:00:00-23:00:00 UTC): it next opens at 2026-12-07T22:00:00+00:00[UTC]"
        )
    );
    assert_eq!(w.closed_at(at("2026-12-07T22:30:00Z")), None);
}

#[test]
fn a_window_refuses_what_it_cannot_read() {
    let tz = TimeZone::UTC;
    for (d, start, end, err) in [
        (
            days(&["mon", "funday"]),
            "22:00",
            "23:00",
            WindowError::Day("funday".into()),
        ),
        (days(&["7"]), "22:00", "23:00", WindowError::Day("7".into())),
        (days(&[]), "22", "23:00", WindowError::Time("22".into())),
        (
            days(&[]),
            "22:60",
            "23:00",
            WindowError::Time("22:60".into()),
        ),
        (
            days(&[]),
            "24:00",
            "23:00",
            WindowError::Time("24:00".into()),
        ),
        (
            days(&[]),
            "22:00",
            "24:01",
            WindowError::Time("24:01".into()),
        ),
        (
            days(&[]),
            "22:00",
            "22:00:00",
            WindowError::Empty("22:00".into()),
        ),
    ] {
        assert_eq!(Window::new(&d, start, end, tz.clone(), "UTC"), Err(err));
    }
    let all_day = Window::new(&[], "00:00", "24:00", tz, "UTC").unwrap();
    assert!(all_day.contains(at("2026-12-07T23:59:59Z")));
    assert!(all_day.contains(at("2026-12-08T00:00:00Z")));
}

#[test]
fn utc_and_fixed_offsets_need_no_zone_database_and_names_are_left_to_the_shell() {
    assert_eq!(fixed_zone("UTC"), Some(TimeZone::UTC));
    assert_eq!(fixed_zone("Z"), Some(TimeZone::UTC));
    let plus2 = TimeZone::fixed(jiff::tz::Offset::from_seconds(7200).unwrap());
    assert_eq!(fixed_zone("+02:00"), Some(plus2.clone()));
    assert_eq!(fixed_zone("+0200"), Some(plus2));
    assert_eq!(
        fixed_zone("-05:30"),
        Some(TimeZone::fixed(
            jiff::tz::Offset::from_seconds(-19_800).unwrap()
        ))
    );
    for no in [
        "Europe/Berlin",
        "+2",
        "+24:00",
        "+02:60",
        "02:00",
        "+02-00",
        "",
    ] {
        assert_eq!(fixed_zone(no), None, "{no}");
    }
}

// === Pacing ===

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
            Ending {
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
        vec![Ending {
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
