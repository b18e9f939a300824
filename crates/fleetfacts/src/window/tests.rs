//! Unit tests of `window.rs`.

use super::*;
use jiff::tz::TimeZone;

/// Unix seconds of an RFC 3339 time.
fn at(s: &str) -> i64 {
    s.parse::<Timestamp>().unwrap().as_second()
}

fn days(d: &[&str]) -> Vec<String> {
    d.iter().map(|s| s.to_string()).collect()
}

// === Graces ===

pub(crate) fn window(d: &[&str], start: &str, end: &str, zone: &str) -> Window {
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
