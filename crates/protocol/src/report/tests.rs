//! Unit tests of `report.rs`, kept apart so the module reads as the rules alone.

use super::*;

fn hb(at: i64, demotion: Option<Eligibility>) -> HostPart {
    HostPart {
        heartbeat_at: at,
        promotion: None,
        demotion,
        etcd: None,
        release: None,
        credential_expires_at: None,
    }
}

#[test]
fn a_host_with_no_report_gets_one_of_no_step_for_its_host_part() {
    let r = Report::with_host_part(None, hb(10, Some(Eligibility::Ok)), 10);
    assert_eq!((r.step, r.phase, r.seq), (ReportStep::None, Phase::Done, 1));
    let back = Report::parse(&r.to_json()).unwrap();
    assert_eq!(back, r);
    assert!(
        r.to_json()
            .contains("\"host\":{\"heartbeatAt\":10,\"demotion\":{\"verdict\":\"ok\"}}"),
        "{}",
        r.to_json()
    );
    assert!(!back.has_settled(None, ReportStep::None) || back.settled.is_empty());
}

#[test]
fn a_host_part_leaves_the_step_as_it_is_and_the_next_step_keeps_the_host_part() {
    let a = Report::next(None, swap("s1"), ReportStep::StepDown, Phase::Started, 5);
    let b = Report::with_host_part(Some(&a), hb(9, None), 9);
    assert_eq!(
        (b.swap.clone(), b.step, b.phase, b.started_at),
        (a.swap.clone(), a.step, a.phase, 5)
    );
    assert_eq!(b.seq, a.seq + 1);
    let c = Report::next(Some(&b), swap("s1"), ReportStep::StepDown, Phase::Done, 12);
    assert_eq!(c.host, b.host);
    assert_eq!(c.heartbeat_age(70), Some(61));
}

#[test]
fn an_etcd_view_that_does_not_check_is_dropped_and_the_heartbeat_kept() {
    let view = crate::etcd::EtcdView {
        read_at: 7,
        member: crate::etcd::MemberId(1),
        members: vec![crate::etcd::Member {
            id: crate::etcd::MemberId(1),
            name: "n1-0a1b2c3d".into(),
            peer_urls: vec!["https://10.0.0.1:2380".into()],
            client_urls: vec![],
            learner: false,
        }],
        leader: Some(crate::etcd::MemberId(1)),
        raft_term: 2,
        raft_index: 9,
        db_size: 4096,
        alarms: vec![],
        healthy: true,
    };
    let part = HostPart {
        etcd: Some(view.clone()),
        ..hb(7, Some(Eligibility::Ok))
    };
    let r = Report::with_host_part(None, part.clone(), 7);
    assert_eq!(Report::parse(&r.to_json()).unwrap().host, Some(part));
    // A leader that is no member: the view goes, the heartbeat stays.
    let bad = r.to_json().replace(
        "\"leader\":\"0000000000000001\"",
        "\"leader\":\"0000000000000009\"",
    );
    assert_ne!(bad, r.to_json());
    assert_eq!(
        Report::parse(&bad).unwrap().host,
        Some(hb(7, Some(Eligibility::Ok)))
    );
}

#[test]
fn a_host_part_that_does_not_read_is_none_and_never_makes_the_report_unreadable() {
    let base = "{\"step\":\"promote\",\"phase\":\"done\",\"startedAt\":1,\"updatedAt\":1";
    for host in [
        "\"x\"",
        "{\"heartbeatAt\":\"soon\"}",
        "{\"heartbeatAt\":0}",
        "{\"heartbeatAt\":-5}",
        "{}",
    ] {
        let r = Report::parse(&format!("{base},\"host\":{host}}}")).unwrap();
        assert_eq!(r.host, None, "{host}");
    }
    // Unknown fields and verdicts of a newer actuator are no error.
    let r = Report::parse(&format!(
        "{base},\"host\":{{\"heartbeatAt\":3,\"etcd\":{{\"members\":3}},\"demotion\":{{\"verdict\":\"maybe\",\"why\":1}}}},\"later\":true}}"
    ))
    .unwrap();
    assert_eq!(r.host, Some(hb(3, Some(Eligibility::Unknown))));
    // Reasons are kept to bounds and one line each.
    let many: Vec<String> = (0..20).map(|i| format!("r{i}\nx")).collect();
    let r = Report::parse(&format!(
        "{base},\"host\":{{\"heartbeatAt\":3,\"demotion\":{{\"verdict\":\"ineligible\",\"reasons\":{}}}}}}}",
        serde_json::to_string(&many).unwrap()
    ))
    .unwrap();
    let Some(HostPart {
        demotion: Some(Eligibility::Ineligible { reasons }),
        ..
    }) = r.host
    else {
        panic!("{:?}", r.host)
    };
    assert_eq!(reasons.len(), MAX_REASONS);
    assert!(reasons.iter().all(|r| !r.contains('\n')), "{reasons:?}");
    let long = Eligibility::of(&["y".repeat(1000)]);
    let Eligibility::Ineligible { reasons } = long else {
        panic!()
    };
    assert_eq!(reasons[0].chars().count(), MAX_REASON_CHARS + 1);
}

/// An etcd view as large as [`EtcdView::check`] lets it be.
fn largest_view() -> crate::etcd::EtcdView {
    use crate::etcd::{MAX_MEMBERS, MAX_URL, MAX_URLS, Member, MemberId};
    let url = |i: u64, j: usize| {
        let head = format!("https://10.0.{i}.{j}:2380/");
        format!("{head}{}", "p".repeat(MAX_URL - head.len()))
    };
    let members: Vec<Member> = (1..=MAX_MEMBERS as u64)
        .map(|i| Member {
            id: MemberId(i),
            name: format!("n{i}-0a1b2c3d"),
            peer_urls: (0..MAX_URLS).map(|j| url(i, j)).collect(),
            client_urls: (0..MAX_URLS).map(|j| url(i, j)).collect(),
            learner: false,
        })
        .collect();
    let view = crate::etcd::EtcdView {
        read_at: 7,
        member: MemberId(1),
        members,
        leader: Some(MemberId(1)),
        raft_term: 2,
        raft_index: 9,
        db_size: 4096,
        alarms: vec![],
        healthy: true,
    };
    assert_eq!(view.check(), Ok(()));
    view
}

#[test]
fn a_report_over_the_cap_is_sent_without_its_etcd_view_and_keeps_its_heartbeat_and_memory() {
    let steps = Report::next(None, swap("s1"), ReportStep::Snapshot, Phase::Done, 5);
    let part = HostPart {
        etcd: Some(largest_view()),
        ..hb(7, Some(Eligibility::of(&["no server: line".into()])))
    };
    let r = Report::with_host_part(Some(&steps), part, 7);
    assert!(
        r.to_json().len() > MAX_REPORT_BYTES,
        "{}",
        r.to_json().len()
    );
    let (value, dropped) = r.to_json_within(MAX_REPORT_BYTES);
    assert_eq!(dropped, [Dropped::EtcdView]);
    assert!(value.len() <= MAX_REPORT_BYTES, "{}", value.len());
    let sent = Report::parse(&value).unwrap();
    assert_eq!(
        sent.host,
        Some(hb(7, Some(Eligibility::of(&["no server: line".into()]))))
    );
    assert_eq!((sent.seq, &sent.settled), (r.seq, &r.settled));
    assert!(sent.has_settled(swap("s1").as_ref(), ReportStep::Snapshot));
}

#[test]
fn a_report_within_the_cap_is_sent_whole_and_the_reasons_go_only_when_the_view_is_not_enough() {
    let small = Report::with_host_part(None, hb(3, Some(Eligibility::Ok)), 3);
    assert_eq!(
        small.to_json_within(MAX_REPORT_BYTES),
        (small.to_json(), vec![])
    );
    // Reasons of four-byte characters at their bounds, and a long step
    // reason: the view alone is not enough.
    let reasons: Vec<String> = (0..MAX_REASONS).map(|_| "𝄞".repeat(1000)).collect();
    let part = HostPart {
        etcd: Some(largest_view()),
        ..hb(3, Some(Eligibility::of(&reasons)))
    };
    let r = Report::with_host_part(None, part, 3).with_reason("x".repeat(20_000));
    let (value, dropped) = r.to_json_within(MAX_REPORT_BYTES);
    assert_eq!(
        dropped,
        [Dropped::EtcdView, Dropped::DemotionReasons, Dropped::Reason]
    );
    assert!(value.len() <= MAX_REPORT_BYTES, "{}", value.len());
    let sent = Report::parse(&value).unwrap();
    assert_eq!(
        sent.host.and_then(|h| h.demotion),
        Some(Eligibility::Ineligible { reasons: vec![] }),
        "the verdict stays"
    );
    assert!(sent.reason.unwrap().starts_with("xxx"));
}

fn swap(s: &str) -> Option<SwapId> {
    Some(SwapId::parse(s).unwrap())
}

#[test]
fn a_report_round_trips_through_its_configmap_value() {
    let r = Report::next(None, swap("s1"), ReportStep::Snapshot, Phase::Done, 7)
        .with_detail(Detail::Snapshot);
    let back = Report::from_json(&r.to_json()).unwrap();
    assert_eq!(back, r);
    assert!(r.to_json().contains("\"phase\":\"done\""));
    assert!(Report::from_json("not json").is_none());
    assert!(
        r.to_json().starts_with("{\"protocol\":1,"),
        "{}",
        r.to_json()
    );
    assert!(Report::from_json("{\"swap\":\"BAD ID\",\"step\":\"promote\",\"phase\":\"done\",\"startedAt\":1,\"updatedAt\":1}").is_none());
}

#[test]
fn each_report_counts_one_more_than_the_one_before_and_the_higher_count_is_newer() {
    let a = Report::next(None, swap("s1"), ReportStep::Promote, Phase::Started, 5);
    let b = Report::next(Some(&a), swap("s1"), ReportStep::Promote, Phase::Done, 5);
    assert_eq!((a.seq, b.seq), (1, 2));
    let newer = |x: &Report, y: &Report| Report::newer(Some(x.clone()), Some(y.clone()));
    assert_eq!(newer(&a, &b), Some(b.clone()));
    assert_eq!(newer(&b, &a), Some(b.clone()));
    assert_eq!(Report::newer(None, Some(a.clone())), Some(a.clone()));
    assert_eq!(Report::newer(Some(a.clone()), None), Some(a.clone()));
    assert_eq!(Report::newer(None, None), None);
    // A report written before the count existed reads as 0.
    let old = r#"{"step":"promote","phase":"done","startedAt":1,"updatedAt":1}"#;
    assert_eq!(Report::parse(old).unwrap().seq, 0);
    assert!(Report::parse("{").is_err());
}

#[test]
fn a_report_counted_to_the_last_seq_is_followed_without_a_panic_and_the_count_stays_there() {
    let corrupt = format!(
        r#"{{"step":"promote","phase":"done","startedAt":1,"updatedAt":1,"seq":{}}}"#,
        u64::MAX
    );
    let last = Report::parse(&corrupt).unwrap();
    assert_eq!(last.seq, u64::MAX);
    let a = Report::next(Some(&last), swap("s1"), ReportStep::Promote, Phase::Done, 5);
    let b = Report::with_host_part(Some(&a), hb(6, None), 6);
    assert_eq!((a.seq, b.seq), (u64::MAX, u64::MAX));
    // Two copies alike: the first (the host's, written first) is kept.
    assert_eq!(Report::newer(Some(b.clone()), Some(last.clone())), Some(b));
}

#[test]
fn a_report_without_a_version_reads_as_version_one_and_one_of_an_unknown_version_is_no_report() {
    let old = "{\"swap\":\"s1\",\"step\":\"snapshot\",\"phase\":\"done\",\"startedAt\":1,\"updatedAt\":2}";
    let r = Report::from_json(old).expect("a report before versions were marked");
    assert_eq!((r.protocol, r.updated_at), (1, 2));
    let newer = old.replacen('{', "{\"protocol\":2,", 1);
    assert!(Report::from_json(&newer).is_none());
    let same = old.replacen('{', "{\"protocol\":1,", 1);
    assert_eq!(Report::from_json(&same), Some(r));
    // The actuator is told why: a version it does not know.
    assert!(matches!(Report::parse(&newer), Err(ParseError::Version(_))));
}

// Found by the fuzz target `report` (fuzz/seeds/report/regression-*): serde
// quoted the unknown step as written, a tab or a newline breaking the log
// line the actuator writes of its unreadable report.
#[test]
fn what_is_said_of_a_report_that_does_not_read_is_one_line_whatever_the_value() {
    for raw in [
        "{\"step\":\"\\t\"",
        "{\"step\":\"pro\\nmote\\u001b[2J\",\"phase\":\"done\",\"startedAt\":1,\"updatedAt\":1}",
    ] {
        let said = Report::parse(raw).unwrap_err().to_string();
        assert!(!said.chars().any(char::is_control), "{said:?}");
        assert!(said.starts_with("unknown variant `"), "{said:?}");
        let e = Report::parse(raw).unwrap_err();
        assert!(
            std::error::Error::source(&e).is_none(),
            "no cause that says it again"
        );
    }
    let long = format!(
        "{{\"step\":\"{}\",\"phase\":\"done\",\"startedAt\":1,\"updatedAt\":1}}",
        "x".repeat(10_000)
    );
    let said = Report::parse(&long).unwrap_err().to_string();
    assert!(
        said.chars().count() <= crate::text::ONE_LINE_MAX + 1,
        "{said}"
    );
}

#[test]
fn a_steps_name_is_the_one_its_report_carries() {
    for step in [
        ReportStep::Promote,
        ReportStep::StepDown,
        ReportStep::Rollback,
        ReportStep::Finish,
        ReportStep::Snapshot,
        ReportStep::Unknown,
    ] {
        assert_eq!(
            serde_json::to_string(&step).unwrap(),
            format!("\"{}\"", step.as_str())
        );
    }
}

#[test]
fn a_settled_step_is_remembered_after_the_next_one_starts() {
    let snap = Report::next(None, swap("s1"), ReportStep::Snapshot, Phase::Done, 1);
    let promote = Report::next(
        Some(&snap),
        swap("s1"),
        ReportStep::Promote,
        Phase::Started,
        2,
    );
    assert!(promote.has_settled(swap("s1").as_ref(), ReportStep::Snapshot));
    assert!(!promote.has_settled(swap("s1").as_ref(), ReportStep::Promote));
    assert!(!promote.has_settled(swap("s2").as_ref(), ReportStep::Snapshot));
    assert!(promote.is_running(swap("s1").as_ref(), ReportStep::Promote));
    assert!(!snap.is_running(swap("s1").as_ref(), ReportStep::Snapshot));
}

#[test]
fn the_start_time_and_detail_carry_over_within_a_step_only() {
    let a = Report::next(None, swap("s1"), ReportStep::Promote, Phase::Started, 10);
    let b = Report::next(
        Some(&a),
        swap("s1"),
        ReportStep::Promote,
        Phase::Progress,
        20,
    )
    .with_detail(Detail::Learner);
    let c = Report::next(Some(&b), swap("s1"), ReportStep::Promote, Phase::Done, 30);
    assert_eq!(
        (c.started_at, c.updated_at, c.detail),
        (10, 30, Some(Detail::Learner))
    );
    let d = Report::next(
        Some(&c),
        swap("s1"),
        ReportStep::StepDown,
        Phase::Started,
        40,
    );
    assert_eq!((d.started_at, d.detail), (40, None));
}

#[test]
fn a_step_that_follows_an_unfinished_one_starts_afresh() {
    let a = Report::next(None, swap("s1"), ReportStep::Promote, Phase::Progress, 10)
        .with_detail(Detail::Learner);
    let b = Report::next(
        Some(&a),
        swap("s1"),
        ReportStep::Rollback,
        Phase::Started,
        20,
    );
    assert_eq!((b.started_at, b.detail), (20, None));
    let c = Report::next(
        Some(&a),
        swap("s2"),
        ReportStep::Promote,
        Phase::Started,
        30,
    );
    assert_eq!((c.started_at, c.detail), (30, None));
}

#[test]
fn every_settled_step_is_remembered_once() {
    let a = Report::next(None, swap("s1"), ReportStep::Snapshot, Phase::Done, 1);
    let b = Report::next(Some(&a), swap("s2"), ReportStep::Snapshot, Phase::Done, 2);
    let c = Report::next(Some(&b), swap("s2"), ReportStep::Promote, Phase::Started, 3);
    assert!(c.has_settled(swap("s1").as_ref(), ReportStep::Snapshot));
    assert!(c.has_settled(swap("s2").as_ref(), ReportStep::Snapshot));
    let again = Report::next(
        Some(&b),
        swap("s2"),
        ReportStep::Snapshot,
        Phase::Refused,
        4,
    );
    assert_eq!(again.settled.len(), 2, "{:?}", again.settled);
}

#[test]
fn the_settled_memory_is_bounded_and_keeps_the_newest() {
    let mut r: Option<Report> = None;
    for i in 0..40 {
        let next = Report::next(
            r.as_ref(),
            swap(&format!("s{i}")),
            ReportStep::Snapshot,
            Phase::Done,
            i,
        );
        r = Some(next);
    }
    let r = r.unwrap();
    assert_eq!(r.settled.len(), SETTLED_MEMORY);
    assert!(r.has_settled(swap("s39").as_ref(), ReportStep::Snapshot));
    assert!(r.has_settled(swap("s24").as_ref(), ReportStep::Snapshot));
    assert!(!r.has_settled(swap("s23").as_ref(), ReportStep::Snapshot));
}

#[test]
fn the_apis_copy_of_a_report_never_grants_a_resume_the_hosts_own_copy_does_not() {
    let rollback = |seq: u64| {
        let mut r = Report::next(
            None,
            swap("swap-7"),
            ReportStep::Rollback,
            Phase::Started,
            10,
        );
        r.seq = seq;
        r
    };
    let done = {
        let mut r = Report::next(None, swap("swap-6"), ReportStep::Promote, Phase::Done, 5);
        r.seq = 3;
        r
    };
    // Planted in the API with a high seq over the host's own memory: the
    // host's copy stands, numbered past the API's.
    let m = Report::remembered(Some(done.clone()), Some(rollback(99))).unwrap();
    assert!(!m.is_running(swap("swap-7").as_ref(), ReportStep::Rollback));
    assert_eq!(
        (m.step, m.phase, m.seq),
        (ReportStep::Promote, Phase::Done, 99)
    );
    // A host with no copy of its own (a new disk): the API's running step
    // is dropped; its settled history is kept.
    let m = Report::remembered(None, Some(rollback(99))).unwrap();
    assert!(!m.is_running(swap("swap-7").as_ref(), ReportStep::Rollback));
    assert_eq!((m.step, m.seq), (ReportStep::None, 99));
    let m = Report::remembered(None, Some(done.clone())).unwrap();
    assert!(m.has_settled(swap("swap-6").as_ref(), ReportStep::Promote));
    // The host's own running step resumes, whatever the API's copy says.
    let m = Report::remembered(Some(rollback(4)), Some(done)).unwrap();
    assert!(m.is_running(swap("swap-7").as_ref(), ReportStep::Rollback));
    assert_eq!(Report::remembered(None, None), None);
}

#[test]
fn a_hosts_release_reads_back_and_one_that_is_no_release_reads_as_none_keeping_the_rest() {
    let part = HostPart {
        release: Some("0.2.0+deb1~arm64".into()),
        ..hb(7, Some(Eligibility::Ok))
    };
    let r = Report::with_host_part(None, part.clone(), 7);
    assert_eq!(Report::from_json(&r.to_json()).unwrap().host, Some(part));
    for bad in ["", "0.2.0\nFAKE: line", "\u{1b}[31mred", &"9".repeat(65)] {
        let mut v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        v["host"]["release"] = serde_json::json!(bad);
        let back = Report::from_json(&v.to_string()).unwrap().host.unwrap();
        assert_eq!(back.release, None, "{bad:?}");
        assert_eq!(back.demotion, Some(Eligibility::Ok), "{bad:?}");
    }
    assert!(crate::version::release_valid(crate::version::RELEASE));
}

#[test]
fn a_hosts_credential_expiry_reads_back_and_one_that_is_no_time_reads_as_none() {
    let part = HostPart {
        credential_expires_at: Some(1_827_998_507),
        ..hb(7, None)
    };
    let r = Report::with_host_part(None, part.clone(), 7);
    assert_eq!(Report::from_json(&r.to_json()).unwrap().host, Some(part));
    for bad in [
        serde_json::json!(-5),
        serde_json::json!("soon"),
        serde_json::json!(0),
    ] {
        let mut v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        v["host"]["credentialExpiresAt"] = bad.clone();
        let back = Report::from_json(&v.to_string()).unwrap().host.unwrap();
        assert_eq!(back.credential_expires_at, None, "{bad}");
        assert_eq!(back.heartbeat_at, 7);
    }
}

#[test]
fn a_switch_by_hand_moves_the_report_on_to_what_the_host_now_is_and_keeps_what_settled() {
    use crate::Role;
    let finished = Report::next(None, swap("s1"), ReportStep::Finish, Phase::Done, 5);
    // Promoted by hand after its finish: no step, read by its Node again.
    let promoted = Report::after_hand_switch(Some(&finished), Role::Server, 9).unwrap();
    assert_eq!(
        (promoted.swap.clone(), promoted.step, promoted.phase),
        (None, ReportStep::None, Phase::Done)
    );
    assert_eq!(promoted.seq, finished.seq + 1, "the newer copy");
    assert!(promoted.has_settled(swap("s1").as_ref(), ReportStep::Finish));
    // A rollback done reads as an agent too.
    let rolled = Report::next(None, swap("s2"), ReportStep::Rollback, Phase::Done, 5);
    assert!(Report::after_hand_switch(Some(&rolled), Role::Server, 9).is_some());
    // Demoted by hand after its promotion: a finish of no swap, settled.
    let voter = Report::next(None, swap("s3"), ReportStep::Promote, Phase::Done, 5);
    let demoted = Report::after_hand_switch(Some(&voter), Role::Agent, 9).unwrap();
    assert_eq!(
        (demoted.swap.clone(), demoted.step, demoted.phase),
        (None, ReportStep::Finish, Phase::Done)
    );
    assert!(demoted.has_settled(swap("s3").as_ref(), ReportStep::Promote));
    // A failed promotion ended by hand as an agent moves on too.
    let failed = Report::next(None, swap("s4"), ReportStep::Promote, Phase::Failed, 5);
    assert!(Report::after_hand_switch(Some(&failed), Role::Agent, 9).is_some());
}

#[test]
fn a_switch_by_hand_that_the_report_already_says_leaves_it_as_it_is() {
    use crate::Role;
    assert_eq!(Report::after_hand_switch(None, Role::Server, 9), None);
    let idle = Report::with_host_part(None, hb(3, None), 3);
    assert_eq!(
        Report::after_hand_switch(Some(&idle), Role::Server, 9),
        None
    );
    let finished = Report::next(None, swap("s1"), ReportStep::Finish, Phase::Done, 5);
    assert_eq!(
        Report::after_hand_switch(Some(&finished), Role::Agent, 9),
        None
    );
    let rolled = Report::next(None, swap("s2"), ReportStep::Rollback, Phase::Done, 5);
    assert_eq!(
        Report::after_hand_switch(Some(&rolled), Role::Agent, 9),
        None
    );
    // A host with no report yet demoted by hand reports its finish.
    assert!(Report::after_hand_switch(None, Role::Agent, 9).is_some());
}
