//! Unit tests of `grace.rs`.

use super::*;
use crate::fixtures::*;

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
