//! Unit tests of `status.rs`, kept apart so the module reads as the rules alone.

use super::*;
use protocol::{
    etcd::{Alarm, Member, MemberId},
    report::Eligibility,
};
use serde_json::{Value, json};

use crate::fixtures::{NOW, etcd_view, member, node};

/// Three voters n1..n3, the learner n4 (its Node shows no etcd
/// metadata, as on k3s) and a ghost voter whose Node is gone.
fn members() -> Vec<Member> {
    vec![
        member(1, "n1", false),
        member(2, "n2", false),
        member(3, "n3", false),
        member(4, "n4", true),
        member(9, "gone", false),
    ]
}

fn view(me: u64, read_at: i64, members: Vec<Member>) -> EtcdView {
    etcd_view(me, read_at, 2, members)
}

/// n1 fresh, with an alarm on n3; n2 fresh but not listing the learner;
/// n3's view stale; n4 (the learner) and n5 (an agent) report none.
fn fleet() -> FleetView {
    let mut n1 = view(1, NOW - 10, members());
    n1.alarms.push(Alarm {
        member: MemberId(3),
        kind: "NOSPACE".into(),
    });
    let mut without_learner = members();
    without_learner.remove(3);
    // The learner's actuator is a server's (its role file says so) and
    // gives a verdict, though its Node shows no etcd metadata.
    let mut n4 = node("n4", false, None);
    n4.host.as_mut().unwrap().demotion = Some(Eligibility::Ok);
    FleetView {
        now: NOW,
        settings: fleetdecide::Settings::default(),
        nodes: vec![
            node("n1", true, Some(n1)),
            node("n2", true, Some(view(2, NOW - 20, without_learner))),
            node("n3", true, Some(view(3, NOW - 600, members()))),
            n4,
            node("n5", false, None),
        ],
        lease: None,
        pods: vec![],
    }
}

fn line<'a>(lines: &'a [String], start: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.trim_start().starts_with(start))
        .unwrap_or_else(|| panic!("no line starting {start:?} in {lines:#?}"))
}

fn words(l: &str) -> Vec<&str> {
    l.split_whitespace().collect()
}

/// The controller's default settings, and the fixtures' fleet under them.
fn defaults() -> (Settings, FleetView) {
    let settings = Settings::resolve(crate::config::FileConfig::default(), None).unwrap();
    let mut v = fleet();
    v.settings = settings.core.clone();
    (settings, v)
}

#[test]
fn status_shows_etcds_members_with_their_nodes_a_learner_a_ghost_the_leader_alarms_and_each_servers_view()
 {
    let lines = etcd_lines(&fleet());
    assert!(
        lines[0].starts_with("etcd: 5 members, as most of 2 fresh server views list them"),
        "{lines:#?}"
    );
    // Each member, its id, role, Node (or ghost) and health by its own
    // host's fresh view.
    assert_eq!(
        words(line(&lines, "n1-0a1b2c3d")),
        [
            "n1-0a1b2c3d",
            "0000000000000001",
            "voter",
            "n1",
            "yes",
            "https://10.0.0.1:2380"
        ]
    );
    assert_eq!(words(line(&lines, "n3-0a1b2c3d"))[3..5], ["n3", "no"]);
    assert_eq!(
        words(line(&lines, "n4-0a1b2c3d"))[2..5],
        ["learner", "n4", "no"]
    );
    assert_eq!(
        words(line(&lines, "gone-0a1b2c3d"))[2..5],
        ["voter", "ghost", "no"]
    );
    assert_eq!(
        line(&lines, "leader:"),
        "  leader: n2-0a1b2c3d (0000000000000002)"
    );
    assert_eq!(line(&lines, "alarms:"), "  alarms: NOSPACE on n3");
    assert!(
        line(&lines, "DISAGREEING:").contains(": n2 ("),
        "{lines:#?}"
    );
    // Each server's view: who read it, how long ago, stale past the bound.
    assert_eq!(
        words(line(&lines, "n1 ")),
        [
            "n1",
            "10s",
            "ago",
            "0000000000000001",
            "yes",
            "3.0",
            "MiB",
            "3/77"
        ]
    );
    assert_eq!(
        words(line(&lines, "n3 "))[..4],
        ["n3", "10m", "ago", "(STALE)"]
    );
    assert_eq!(words(line(&lines, "n4 "))[..3], ["n4", "none", "reported"]);
    assert!(
        !lines.iter().any(|l| l.trim_start().starts_with("n5")),
        "an agent with no view is no server: {lines:#?}"
    );
}

#[test]
fn status_json_carries_the_picture_and_each_servers_view_with_its_age() {
    let j = etcd_json(&fleet());
    assert_eq!(j["maxAgeSecs"], 180);
    assert_eq!(j["reporters"], json!(["n1", "n2"]));
    assert_eq!(j["leader"], "0000000000000002");
    assert_eq!(j["disagreeing"], json!(["n2"]));
    assert_eq!(j["alarms"], json!(["NOSPACE on n3"]));
    let ms = j["members"].as_array().unwrap();
    let ghost = ms
        .iter()
        .find(|m| m["member"]["name"] == "gone-0a1b2c3d")
        .unwrap();
    assert_eq!(ghost["node"], Value::Null);
    let learner = ms.iter().find(|m| m["node"] == "n4").unwrap();
    assert_eq!(learner["member"]["learner"], true);
    let views = j["views"].as_array().unwrap();
    let hosts: Vec<&str> = views.iter().map(|v| v["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["n1", "n2", "n3", "n4"]);
    assert_eq!(views[2]["fresh"], false);
    assert_eq!(views[2]["ageSecs"], 600);
    assert!(views[0]["view"]["readAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(views[3]["view"], Value::Null);
}

#[test]
fn status_names_the_nodes_with_only_the_old_eligible_label_and_how_to_relabel_them() {
    let mut v = fleet();
    assert!(relabel_lines(&v).is_empty(), "nothing to relabel");
    // n5: only the old label, so not eligible; n4: both, so eligible.
    v.nodes[4].legacy_eligible = true;
    v.nodes[3].legacy_eligible = true;
    v.nodes[3].eligible = true;
    assert_eq!(legacy_eligible_only(&v), ["n5"]);
    let lines = relabel_lines(&v);
    assert!(
        lines[0].starts_with(
            "WARNING: not eligible, labelled only with the old github-runner.exadev.com/voter-eligible=true"
        ) && lines[0].contains("): n5;"),
        "{lines:#?}"
    );
    assert_eq!(
        lines[1..],
        ["  kubectl label node n5 node-restriction.kubernetes.io/fleet-role-voter-eligible=true"]
    );
    assert_eq!(
        fleetdecide::degraded(&v),
        fleetdecide::degraded(&fleet()),
        "a warning, not a degraded state"
    );
}

#[test]
fn status_says_what_run_would_do_now_and_which_grace_a_down_voter_is_in() {
    let (settings, mut v) = defaults();
    v.nodes[1].ready = false;
    v.nodes[1].ready_since = Some(NOW - 60);
    v.nodes[1].cordoned = true;
    // Down by evidence: its own view of etcd is long stale.
    if let Some(e) = v.nodes[1].host.as_mut().and_then(|h| h.etcd.as_mut()) {
        e.read_at = NOW - 600;
    }
    let text = text(&v, &settings);
    let run = line(&text.lines().map(String::from).collect::<Vec<_>>(), "Run:").to_string();
    assert!(
        run.starts_with(
            "Run: would stay idle: no voter to replace yet: n2 is NotReady, within a maintenance grace (at most 1800 s): it is cordoned; it is replaced from"
        ),
        "{run}"
    );
    assert_eq!(json(&v, &settings)["run"]["until"], NOW - 60 + 1800);
}

#[test]
fn status_names_a_fresh_view_from_a_host_that_cannot_know_the_membership_as_ignored() {
    // n5, an agent (no etcd label), renames the ghost to itself.
    let mut v = fleet();
    let mut forged = members();
    forged[4].name = "n5-0a1b2c3d".into();
    v.nodes[4] = node("n5", false, Some(view(9, NOW - 1, forged)));
    let lines = etcd_lines(&v);
    assert_eq!(
        line(&lines, "IGNORED:"),
        "  IGNORED: n5: its Node carries no etcd label (a view its host cannot know counts for nothing)"
    );
    assert_eq!(
        words(line(&lines, "n5 "))[..4],
        ["n5", "1s", "ago", "(IGNORED)"]
    );
    assert_eq!(words(line(&lines, "gone-0a1b2c3d"))[3], "ghost");
    let j = etcd_json(&v);
    assert_eq!(j["ignored"], json!(["n5: its Node carries no etcd label"]));
    let n5 = j["views"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["host"] == "n5")
        .unwrap();
    assert_eq!(
        (n5["fresh"].clone(), n5["ignored"].clone()),
        (json!(false), json!(true))
    );
    // With no ignored view, no line.
    assert!(!etcd_lines(&fleet()).iter().any(|l| l.contains("IGNORED")));
}

#[test]
fn status_with_no_fresh_view_says_so_and_still_lists_the_stale_ones() {
    let mut v = fleet();
    v.now += 1000;
    let lines = etcd_lines(&v);
    assert!(lines[0].starts_with("etcd: no fresh view"), "{lines:#?}");
    assert!(line(&lines, "n1 ").contains("(STALE)"), "{lines:#?}");
    assert_eq!(etcd_json(&v)["members"], json!([]));
}

#[test]
fn an_age_from_an_extreme_time_on_the_lease_is_shown_not_overflowed() {
    assert_eq!(age(1_000, 1_000 - 90), "90s ago");
    assert_eq!(age(1_000, i64::MAX), "in the future");
    assert_eq!(age(1_000, i64::MIN), format!("{}h ago", i64::MAX / 3600));
}

#[test]
fn status_shows_the_voter_sets_tolerance_its_spread_and_the_path_to_the_configured_set() {
    let (settings, mut v) = defaults();
    // n1..n3 vote, all in zone a; n5 (an eligible standby) is in zone b.
    for n in &mut v.nodes {
        n.zone = Some(if n.name == "n5" { "b" } else { "a" }.into());
    }
    v.nodes[4].eligible = true;
    v.nodes[4].host.as_mut().unwrap().heartbeat_at = NOW;
    let lines: Vec<String> = text(&v, &settings).lines().map(String::from).collect();
    assert_eq!(
        line(&lines, "Voter set:"),
        "Voter set: 3 voting (3 healthy), quorum 2, 1 more may fail"
    );
    assert_eq!(
        line(&lines, "spread by"),
        "  spread by topology.kubernetes.io/zone: a 3, b 0 (at most 2 per zone: 3 in one zone, 2 possible)"
    );
    let step = line(&lines, "path 1.");
    assert!(
        step.contains("path 1. swap --out n3 --in n5")
            && step.ends_with("lowest 4 voting (3 healthy), quorum 3, 0 more may fail"),
        "{step}"
    );
    let j = json(&v, &settings);
    assert_eq!(j["voterSet"]["spreadLabel"], "topology.kubernetes.io/zone");
    assert_eq!(j["voterSet"]["path"]["stages"][0]["move"], "swap");
    assert_eq!(j["voterSet"]["path"]["start"]["mayFail"], 1);
}

#[test]
fn status_names_a_grow_on_the_lease_by_its_kind_and_a_stopped_one_by_the_command_that_resumes_it() {
    let (settings, mut v) = defaults();
    v.lease = Some(LeaseFacts {
        swap: Some("swap-7".into()),
        swap_in: Some("n5".into()),
        stopped: Some("the promotion stopped".into()),
        ..LeaseFacts::default()
    });
    let lines = lease_lines(&v, &settings, v.lease.as_ref());
    assert_eq!(line(&lines, "grow swap-7").trim(), "grow swap-7: in n5");
    assert!(
        line(&lines, "STOPPED").ends_with("resume with `fleet-role grow --in n5`"),
        "{lines:#?}"
    );
}

#[test]
fn status_json_has_the_field_names_docs_reference_md_documents() {
    let (settings, mut v) = defaults();
    v.lease = Some(LeaseFacts {
        swap: Some("swap-7".into()),
        swap_in: Some("n5".into()),
        ..LeaseFacts::default()
    });
    let j = json(&v, &settings);
    let keys =
        |x: &Value| -> Vec<String> { x.as_object().expect("an object").keys().cloned().collect() };
    assert_eq!(
        keys(&j),
        [
            "degraded",
            "etcd",
            "lease",
            "legacyEligibleOnly",
            "nodes",
            "protocol",
            "run",
            "voterSet",
            "voters"
        ]
    );
    assert_eq!(
        keys(&j["lease"]),
        [
            "expiresAt",
            "held",
            "holder",
            "instance",
            "lastSwap",
            "name",
            "paused",
            "protocol",
            "step",
            "stepSince",
            "stopped",
            "swap",
            "windingDown"
        ]
    );
    assert_eq!(
        keys(&j["nodes"][0]),
        [
            "class",
            "cordoned",
            "eligible",
            "healthyVoter",
            "host",
            "marks",
            "name",
            "protocol",
            "ready",
            "readyDisputed",
            "report"
        ]
    );
    assert_eq!(
        keys(&j["nodes"][0]["host"]),
        [
            "demotion",
            "heartbeatAgeSecs",
            "heartbeatAt",
            "promotion",
            "release"
        ]
    );
    assert_eq!(
        keys(&j["voters"]),
        ["configured", "healthy", "missing", "quorum", "seen"]
    );
    assert_eq!(keys(&j["protocol"]), ["reads", "writes"]);
    assert_eq!(keys(&j["voterSet"]), ["path", "spreadLabel"]);
    assert_eq!(
        keys(&j["etcd"]["views"][0]),
        ["ageSecs", "fresh", "host", "ignored", "view"]
    );
    assert!(j["etcd"]["maxAgeSecs"].is_i64());
}

#[test]
fn status_shows_each_hosts_release_and_says_when_they_are_not_all_this_controllers_or_older_than_it_drives()
 {
    let (settings, mut v) = defaults();
    let set = |v: &mut FleetView, name: &str, r: Option<&str>| {
        let n = v.nodes.iter_mut().find(|n| n.name == name).unwrap();
        n.host.as_mut().unwrap().release = r.map(str::to_string);
    };
    for n in ["n1", "n2", "n3", "n4", "n5"] {
        set(&mut v, n, Some(version::RELEASE));
    }
    let lines: Vec<String> = text(&v, &settings).lines().map(str::to_string).collect();
    assert_eq!(
        line(&lines, "Releases:"),
        format!(
            "Releases: this controller {r}; hosts: {r} on n1, n2, n3, n4, n5",
            r = version::RELEASE
        )
    );
    let header = words(line(&lines, "NODE"));
    let at = header.iter().position(|w| *w == "RELEASE").unwrap();
    assert_eq!(words(line(&lines, "n3 "))[at], version::RELEASE);
    // One host behind, one that reports none (an actuator before releases
    // were reported): both named, and the fleet called mixed.
    set(&mut v, "n3", Some("0.1.0"));
    set(&mut v, "n5", None);
    assert_eq!(
        releases_line(&v),
        format!(
            "Releases: this controller {r}; hosts: 0.1.0 on n3; {r} on n1, n2, n4; none reported on n5 (not every host runs this controller's release: upgrade the hosts first, docs/upgrade.md; older than {o} (the oldest this controller drives, no swap involving them runs): n3, n5)",
            r = version::RELEASE,
            o = version::OLDEST_HOST_RELEASE
        )
    );
    let shown = text(&v, &settings);
    assert!(
        shown.contains("DEGRADED: n3: its actuator's release 0.1.0 is older than"),
        "{shown}"
    );
    let json = crate::status::schema::json(&v, &settings);
    assert_eq!(json["nodes"][2]["host"]["release"], json!("0.1.0"));
    assert_eq!(json["nodes"][4]["host"]["release"], Value::Null);
}
