//! Unit tests of `metrics.rs`, kept apart so the module reads as the series alone.

use super::*;
use crate::fixtures::{NOW, etcd_view, member, node};
use fleetdecide::{GateName, LeaseFacts, Settings, SwapEnding, gate_no_learner, record_ending};
use protocol::etcd::{EtcdView, Member};

const ME: &str = "fleet-role@here-1-abcdef";

/// A server's view of etcd, read by its own member `me`.
fn view(me: u64, members: Vec<Member>) -> EtcdView {
    etcd_view(me, NOW - 10, 1, members)
}

/// Three healthy voters n1..n3, each reporting etcd's membership
/// (`members`), and the agents n4 and n5; the regrade Lease free.
fn fleet_with(members: &[Member]) -> FleetView {
    FleetView {
        now: NOW,
        settings: Settings::default(),
        nodes: vec![
            node("n1", true, Some(view(1, members.to_vec()))),
            node("n2", true, Some(view(2, members.to_vec()))),
            node("n3", true, Some(view(3, members.to_vec()))),
            node("n4", false, None),
            node("n5", false, None),
        ],
        lease: Some(LeaseFacts::default()),
        pods: vec![],
    }
}

fn voters() -> Vec<Member> {
    (1..=3)
        .map(|i| member(i, &format!("n{i}"), false))
        .collect()
}

fn fleet() -> FleetView {
    fleet_with(&voters())
}

/// The samples of `name` (with its labels), as `name{...} value` lines,
/// sorted (a family's series come in no set order).
fn samples(text: &str, name: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

fn observed(v: &FleetView) -> String {
    let m = Metrics::new();
    m.observed(v, ME);
    m.render()
}

#[test]
fn a_refusal_is_counted_under_its_gate() {
    let m = Metrics::new();
    m.refused_by("voters-healthy");
    m.refused_by("voters-healthy");
    let text = m.render();
    assert!(
        text.contains("fleet_role_gate_refusals_total{gate=\"voters-healthy\"} 2"),
        "{text}"
    );
}

#[test]
fn readyz_answers_503_until_the_watches_have_listed() {
    let m = Metrics::new();
    assert!(
        endpoints::answer("GET /readyz HTTP/1.1", &m)
            .status
            .starts_with("503")
    );
    m.set_ready(true);
    assert!(
        endpoints::answer("GET /readyz HTTP/1.1", &m)
            .status
            .starts_with("200")
    );
    assert!(
        endpoints::answer("GET /healthz HTTP/1.1", &m)
            .status
            .starts_with("200")
    );
    assert!(
        endpoints::answer("POST /metrics HTTP/1.1", &m)
            .status
            .starts_with("405")
    );
    assert!(
        endpoints::answer("GET /nope HTTP/1.1", &m)
            .status
            .starts_with("404")
    );
}

#[test]
fn the_build_is_shown_by_its_version() {
    let text = Metrics::new().render();
    assert_eq!(
        samples(&text, "fleet_role_build_info"),
        [format!(
            "fleet_role_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )]
    );
}

#[test]
fn before_it_observes_the_fleet_a_process_shows_nothing_of_it() {
    let text = Metrics::new().render();
    for name in [
        "fleet_role_voters_healthy",
        "fleet_role_members",
        "fleet_role_ghost_members",
        "fleet_role_learners",
        "fleet_role_paused",
        "fleet_role_swap_in_progress",
        "fleet_role_degraded",
        "fleet_role_last_swap_end_timestamp_seconds",
        "fleet_role_last_swap_failed",
        "fleet_role_credential_expiry_timestamp_seconds",
        "fleet_role_voters_configured",
        "fleet_role_standbys",
        "fleet_role_host_heartbeat_timestamp_seconds",
        "fleet_role_host_credential_expiry_timestamp_seconds",
    ] {
        assert!(samples(&text, name).is_empty(), "{name} in:\n{text}");
    }
}

#[test]
fn a_healthy_fleet_shows_its_voters_as_etcd_lists_them_and_nothing_degraded() {
    let text = observed(&fleet());
    for line in [
        "fleet_role_voters_healthy 3",
        "fleet_role_members 3",
        "fleet_role_ghost_members 0",
        "fleet_role_learners 0",
        "fleet_role_paused 0",
        "fleet_role_regrade_lease_held 0",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
    assert!(samples(&text, "fleet_role_degraded").is_empty(), "{text}");
    assert!(
        samples(&text, "fleet_role_swap_in_progress").is_empty(),
        "{text}"
    );
}

#[test]
fn the_configured_voters_the_free_standbys_and_each_hosts_heartbeat_are_shown() {
    let mut v = fleet();
    let standbys = |v: &FleetView| samples(&observed(v), "fleet_role_standbys");
    assert_eq!(standbys(&v), ["fleet_role_standbys 0"], "no eligible agent");
    v.nodes[3].eligible = true;
    assert_eq!(standbys(&v), ["fleet_role_standbys 1"], "n4 is eligible");
    let text = observed(&v);
    assert_eq!(
        samples(&text, "fleet_role_voters_configured"),
        ["fleet_role_voters_configured 3"]
    );
    // A voter's (etcd lists its member as voting) and a standby's,
    // told apart for the alerts.
    for (node, voter) in [("n1", "yes"), ("n4", "no")] {
        let line = format!(
            "fleet_role_host_heartbeat_timestamp_seconds{{node=\"{node}\",voter=\"{voter}\"}} {}",
            NOW - 5
        );
        assert!(text.lines().any(|l| l == line), "no {line} in:\n{text}");
    }
    // A cordoned standby is no standby; a host with no heartbeat has
    // no sample.
    v.nodes[3].cordoned = true;
    v.nodes[0].host = None;
    let text = observed(&v);
    assert_eq!(
        samples(&text, "fleet_role_standbys"),
        ["fleet_role_standbys 0"]
    );
    assert!(
        !text.contains("fleet_role_host_heartbeat_timestamp_seconds{node=\"n1\"}"),
        "{text}"
    );
}

#[test]
fn a_learner_only_etcds_view_shows_is_counted_as_the_no_learner_gate_counts_it() {
    // n4 joined as a learner: its Node carries no etcd label (k3s
    // writes none until it is promoted), only etcd's members list it.
    let mut members = voters();
    members.push(member(4, "n4", true));
    let v = fleet_with(&members);
    assert!(!v.node("n4").unwrap().etcd_label);
    // The gate shuts on it...
    let gate = gate_no_learner(&v, None);
    assert_eq!(gate.name, GateName::NoLearner);
    assert!(!gate.passed, "{}", gate.reason);
    // ...and the metric counts it; it does not vote.
    let text = observed(&v);
    assert_eq!(
        samples(&text, "fleet_role_learners"),
        ["fleet_role_learners 1"]
    );
    assert_eq!(
        samples(&text, "fleet_role_members"),
        ["fleet_role_members 3"]
    );
    assert!(
        text.contains("fleet_role_degraded{reason=\"etcd-learner\"} 1"),
        "{text}"
    );
}

#[test]
fn a_ghost_member_and_an_unhealthy_voter_are_counted_by_etcds_view() {
    let mut members = voters();
    members.push(member(9, "gone", false));
    let mut v = fleet_with(&members);
    // n3's own host says its member is unhealthy; its Node is Ready.
    if let Some(e) = v.nodes[2].host.as_mut().and_then(|h| h.etcd.as_mut()) {
        e.healthy = false;
    }
    let text = observed(&v);
    assert_eq!(
        samples(&text, "fleet_role_ghost_members"),
        ["fleet_role_ghost_members 1"]
    );
    assert_eq!(
        samples(&text, "fleet_role_members"),
        ["fleet_role_members 4"]
    );
    assert_eq!(
        samples(&text, "fleet_role_voters_healthy"),
        ["fleet_role_voters_healthy 2"]
    );
    assert!(
        text.contains("fleet_role_degraded{reason=\"etcd-ghost-member\"} 1"),
        "{text}"
    );
}

#[test]
fn with_no_fresh_view_of_etcd_its_counts_have_no_sample_and_the_fleet_is_degraded() {
    let mut v = fleet();
    for n in &mut v.nodes {
        if let Some(e) = n.host.as_mut().and_then(|h| h.etcd.as_mut()) {
            e.read_at = NOW - 500;
        }
    }
    let text = observed(&v);
    for name in [
        "fleet_role_voters_healthy",
        "fleet_role_members",
        "fleet_role_ghost_members",
    ] {
        assert!(samples(&text, name).is_empty(), "{name} in:\n{text}");
    }
    assert_eq!(
        samples(&text, "fleet_role_degraded"),
        ["fleet_role_degraded{reason=\"etcd-views\"} 1"]
    );
}

#[test]
fn each_kind_degraded_is_one_series_and_one_that_clears_is_withdrawn() {
    let m = Metrics::new();
    let mut v = fleet();
    v.nodes[1].ready = false;
    v.nodes[2].ready = false;
    v.lease.as_mut().unwrap().stopped = Some("the step-down failed".into());
    m.observed(&v, ME);
    let text = m.render();
    assert_eq!(
        samples(&text, "fleet_role_degraded"),
        [
            "fleet_role_degraded{reason=\"swap-stopped\"} 1",
            "fleet_role_degraded{reason=\"voters-unhealthy\"} 1",
        ]
        .map(String::from),
        "{text}"
    );
    v.lease.as_mut().unwrap().stopped = None;
    m.observed(&v, ME);
    assert_eq!(
        samples(&m.render(), "fleet_role_degraded"),
        ["fleet_role_degraded{reason=\"voters-unhealthy\"} 1"]
    );
}

#[test]
fn the_pause_and_the_swap_in_progress_are_read_from_the_lease_with_its_step() {
    let m = Metrics::new();
    let mut v = fleet();
    let l = v.lease.as_mut().unwrap();
    l.paused = true;
    m.observed(&v, ME);
    let text = m.render();
    assert_eq!(samples(&text, "fleet_role_paused"), ["fleet_role_paused 1"]);
    assert!(samples(&text, "fleet_role_swap_in_progress").is_empty());
    // Held for a swap in its promotion, by this process.
    let l = v.lease.as_mut().unwrap();
    l.paused = false;
    l.holder = Some("fleet-role".into());
    l.instance = Some(ME.into());
    l.renew_time = Some(NOW - 1);
    l.duration_secs = Some(60);
    l.swap = Some("swap-1".into());
    l.swap_out = Some("n1".into());
    l.swap_in = Some("n4".into());
    l.step = Some("promote".into());
    m.observed(&v, ME);
    let text = m.render();
    assert_eq!(samples(&text, "fleet_role_paused"), ["fleet_role_paused 0"]);
    assert_eq!(
        samples(&text, "fleet_role_swap_in_progress"),
        ["fleet_role_swap_in_progress{step=\"promote\",outgoing=\"n1\",incoming=\"n4\"} 1"]
    );
    assert!(text.contains("fleet_role_regrade_lease_held 1"), "{text}");
    // No start recorded for the step: no deadline to show.
    assert!(samples(&text, "fleet_role_swap_step_deadline_timestamp_seconds").is_empty());
    // Its deadline: the step's start plus its timeout.
    v.lease.as_mut().unwrap().step_since = Some(NOW - 30);
    m.observed(&v, ME);
    assert_eq!(
        samples(
            &m.render(),
            "fleet_role_swap_step_deadline_timestamp_seconds"
        ),
        [format!(
            "fleet_role_swap_step_deadline_timestamp_seconds{{step=\"promote\"}} {}",
            NOW - 30 + v.settings.timeouts.promote
        )]
    );
    // A grow has no outgoing host.
    v.lease.as_mut().unwrap().swap_out = None;
    m.observed(&v, ME);
    assert_eq!(
        samples(&m.render(), "fleet_role_swap_in_progress"),
        ["fleet_role_swap_in_progress{step=\"promote\",outgoing=\"-\",incoming=\"n4\"} 1"]
    );
    v.lease.as_mut().unwrap().swap_out = Some("n1".into());
    // The next step replaces the series: one at a time.
    v.lease.as_mut().unwrap().step = Some("step-down".into());
    m.observed(&v, ME);
    assert_eq!(
        samples(&m.render(), "fleet_role_swap_in_progress"),
        ["fleet_role_swap_in_progress{step=\"step-down\",outgoing=\"n1\",incoming=\"n4\"} 1"]
    );
    // Held by another process (a `fleet-role swap` run by hand): in
    // progress all the same, not held by this one.
    v.lease.as_mut().unwrap().instance = Some("someone-else".into());
    m.observed(&v, ME);
    let text = m.render();
    assert_eq!(samples(&text, "fleet_role_swap_in_progress").len(), 1);
    assert!(text.contains("fleet_role_regrade_lease_held 0"), "{text}");
    // Lapsed: no swap is in progress any more.
    v.now = NOW + 120;
    m.observed(&v, ME);
    assert!(samples(&m.render(), "fleet_role_swap_in_progress").is_empty());
}

#[test]
fn the_last_swap_end_is_the_latest_ending_the_lease_records_whoever_ran_it() {
    let m = Metrics::new();
    let mut v = fleet();
    m.observed(&v, ME);
    assert!(
        samples(&m.render(), "fleet_role_last_swap_end_timestamp_seconds").is_empty(),
        "no sentinel before the first swap"
    );
    let ending = |swap: &str, at| SwapEnding {
        swap: swap.into(),
        out: "n1".into(),
        at,
        failed: false,
    };
    let raw = record_ending(None, ending("swap-1", 9_000));
    let raw = record_ending(Some(&raw), ending("swap-2", 9_500));
    v.lease.as_mut().unwrap().endings = Some(raw);
    m.observed(&v, "another-instance");
    assert_eq!(
        samples(&m.render(), "fleet_role_last_swap_end_timestamp_seconds"),
        ["fleet_role_last_swap_end_timestamp_seconds 9500"]
    );
    assert_eq!(
        samples(&m.render(), "fleet_role_last_swap_failed"),
        ["fleet_role_last_swap_failed 0"]
    );
    // A later one wound down (a hand-run swap, say): failed until a swap
    // finishes again.
    let raw = v.lease.as_ref().unwrap().endings.clone();
    let raw = record_ending(
        raw.as_deref(),
        SwapEnding {
            failed: true,
            ..ending("swap-3", 9_800)
        },
    );
    v.lease.as_mut().unwrap().endings = Some(raw);
    m.observed(&v, "another-instance");
    assert_eq!(
        samples(&m.render(), "fleet_role_last_swap_failed"),
        ["fleet_role_last_swap_failed 1"]
    );
}

#[test]
fn a_process_that_stops_leading_withdraws_what_it_showed_of_the_fleet() {
    let m = Metrics::new();
    m.set_leader(true);
    m.observed(&fleet(), ME);
    assert!(m.render().contains("fleet_role_members 3"));
    m.set_leader(false);
    let text = m.render();
    assert!(text.contains("fleet_role_leader 0"), "{text}");
    for name in [
        "fleet_role_members",
        "fleet_role_learners",
        "fleet_role_paused",
    ] {
        assert!(samples(&text, name).is_empty(), "{name} in:\n{text}");
    }
    // What is not the fleet's stays.
    assert_eq!(samples(&text, "fleet_role_build_info").len(), 1);
}

#[test]
fn the_credentials_expiry_is_shown_when_its_token_says() {
    let m = Metrics::new().with_credential(Credential::Expires(1_800_000_000));
    assert_eq!(
        samples(
            &m.render(),
            "fleet_role_credential_expiry_timestamp_seconds"
        ),
        ["fleet_role_credential_expiry_timestamp_seconds 1800000000"]
    );
    let m = Metrics::new().with_credential(Credential::Unknown);
    assert!(
        samples(
            &m.render(),
            "fleet_role_credential_expiry_timestamp_seconds"
        )
        .is_empty()
    );
}

/// The sample names of every family `text` describes (a counter's with
/// its `_total`).
fn families(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| match l.split_once(' ') {
            Some((name, "counter")) => format!("{name}_total"),
            Some((name, _)) => name.to_string(),
            None => l.to_string(),
        })
        .collect()
}

/// The controller's metric names a doc mentions.
fn documented(doc: &str) -> std::collections::BTreeSet<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(doc);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut names = std::collections::BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("fleet_role_") {
        rest = &rest[at..];
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..end];
        if !name.starts_with("fleet_role_actuator") {
            names.insert(name.to_string());
        }
        rest = &rest[end..];
    }
    names
}

/// Metrics with a sample in every family (a family without one is not
/// described at all).
fn every_family() -> Metrics {
    let m = Metrics::new().with_credential(Credential::Expires(1_800_000_000));
    m.swap_ended("done");
    m.refused_by("no-learner");
    m.step_took("promote", Duration::from_secs(3));
    let mut v = fleet();
    v.nodes[1].ready = false;
    v.nodes[0].host.as_mut().unwrap().credential_expires_at = Some(1_830_000_000);
    let l = v.lease.as_mut().unwrap();
    l.holder = Some("fleet-role".into());
    l.renew_time = Some(NOW);
    l.duration_secs = Some(60);
    l.swap = Some("swap-1".into());
    l.step = Some("promote".into());
    l.step_since = Some(NOW - 5);
    l.endings = Some(record_ending(
        None,
        SwapEnding {
            swap: "swap-0".into(),
            out: "n3".into(),
            at: 9_000,
            failed: false,
        },
    ));
    m.observed(&v, ME);
    m
}

#[test]
fn each_hosts_credential_expiry_is_shown_as_the_host_reports_it() {
    let mut v = fleet();
    v.nodes[0].host.as_mut().unwrap().credential_expires_at = Some(1_830_000_000);
    let text = observed(&v);
    assert_eq!(
        samples(&text, "fleet_role_host_credential_expiry_timestamp_seconds"),
        ["fleet_role_host_credential_expiry_timestamp_seconds{node=\"n1\"} 1830000000"]
    );
}

#[test]
fn the_docs_name_every_metric_served_and_no_other() {
    let served = families(&every_family().render());
    assert_eq!(served.len(), 21, "{served:?}");
    for doc in ["reference.md", "controller.md"] {
        assert_eq!(documented(doc), served, "docs/{doc}");
    }
}
