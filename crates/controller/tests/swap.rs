//! `fleet-role swap` against a real kube-apiserver, with the scripted fleet
//! playing the hosts and k3s: a full swap, the dry run, each gate refusing,
//! a promotion rolled back, and the Lease taken by someone else mid-swap.

mod support;

use std::{collections::BTreeSet, time::Duration};

use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use protocol::{
    Report,
    etcd::{Member, MemberId},
    names::{ELIGIBLE_LABEL, K3S_ETCD_IS_VOTER, K3S_ETCD_ROLE_LABEL},
    report::{HostPart, ReportStep},
};
use serde_json::{Value, json};
use support::{
    CONFIG, Harness, HostSpec, P, condition, three_voters, three_voters_and_a_second_standby,
};

#[tokio::test]
async fn a_full_swap_promotes_the_standby_and_demotes_the_voter() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    let run = h.run(&["swap", "--out", "n1", "--in", "n4"]).await;
    run.expect(0);
    eprintln!("a full swap took {:.1} s", run.took.as_secs_f64());
    h.assert_swapped("n1", "n4").await;
    // Each step was printed with its time, in order.
    let order = [
        "take the Lease for swap",
        "ask n2 for an etcd snapshot",
        "snapshot taken on n2: /var/lib/rancher/k3s/server/db/snapshots/swap-",
        "promote n4, joining n2",
        "n4 is a voter",
        "cordon n1",
        "ask n1 to step down",
        "ask k3s to remove n1's etcd member",
        "k3s removed n1's etcd member",
        "n1 runs as an agent",
        "remove n1's server role labels",
        "uncordon n1",
        "release the Lease: the swap is done",
        "done: the swap is complete",
    ];
    run.assert_in_order(&order);
    // The snapshot came first, on a voter that is not the outgoing one.
    let snap = h.report("n2").await.unwrap();
    assert!(snap.has_settled(snap.swap.as_ref(), ReportStep::Snapshot) || !snap.settled.is_empty());
    // `kubectl describe node` tells the story.
    let events = h.events().await;
    for (node, reason) in [
        ("n1", "SwapStarted"),
        ("n2", "SnapshotRequested"),
        ("n4", "PromoteRequested"),
        ("n1", "Cordoned"),
        ("n1", "StepDownRequested"),
        ("n1", "MemberRemovalRequested"),
        ("n1", "ServerLabelsRemoved"),
        ("n1", "Uncordoned"),
        ("n4", "SwapDone"),
    ] {
        assert!(
            events.contains(&(node.to_string(), reason.to_string())),
            "no {reason} on {node}: {events:?}"
        );
    }
    // A second swap now is refused: n1 is no voter any more.
    h.run(&["swap", "--out", "n1", "--in", "n4"])
        .await
        .expect(1);
}

#[tokio::test]
async fn a_dry_run_prints_the_plan_and_every_gate_and_writes_nothing() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    // Let the fleet settle, then freeze it: from here on only the controller
    // could change anything.
    h.fleet.settle_and_freeze().await;
    let before = h.versions().await;
    let run = h
        .run(&["swap", "--out", "n1", "--in", "n4", "--dry-run"])
        .await;
    run.expect(0);
    for gate in [
        "not-paused",
        "no-other-swap",
        "outgoing-voter",
        "incoming-eligible",
        "incoming-ready",
        "incoming-agent",
        "voters-healthy",
        "no-learner",
        "quorum-after-removal",
    ] {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.contains("pass") && l.contains(gate)),
            "{gate} not shown passing:\n{}",
            run.stdout
        );
    }
    assert!(
        run.stdout.contains("promote n4 joining n2"),
        "{}",
        run.stdout
    );
    let json = h
        .run(&[
            "swap",
            "--out",
            "n1",
            "--in",
            "n5",
            "--dry-run",
            "--output",
            "json",
        ])
        .await;
    json.expect(1);
    let v: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(v["ok"], false);
    assert!(
        v["gates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "incoming-eligible" && g["passed"] == false)
    );
    assert_eq!(h.versions().await, before, "a dry run wrote to the API");
}

#[tokio::test]
async fn a_swap_of_a_server_whose_agent_could_not_start_is_refused_and_writes_nothing() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.set(|f| {
        f.ineligible.insert("n1".into());
    });
    h.wait_for("n1's verdict", || async {
        h.report("n1").await.and_then(|r| r.host).is_some_and(|p| {
            matches!(
                p.demotion,
                Some(protocol::report::Eligibility::Ineligible { .. })
            )
        })
    })
    .await;
    let out = refused(&h, "n1", "n4", "outgoing-demotable").await;
    assert!(out.contains("cluster-init"), "{out}");
    // The dry run lists both new gates with their verdicts.
    let run = h
        .run(&["swap", "--out", "n1", "--in", "n4", "--dry-run"])
        .await;
    run.expect(1);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("pass") && l.contains("actuators-alive")),
        "{}",
        run.stdout
    );
    let status = h.run(&["status"]).await;
    assert!(
        status
            .stdout
            .lines()
            .any(|l| l.starts_with("n1 ") && l.contains(" NO ")),
        "{}",
        status.stdout
    );
}

#[tokio::test]
async fn a_swap_whose_incoming_hosts_actuator_is_silent_is_refused_and_writes_nothing() {
    let config = CONFIG.replace(
        "actuator_heartbeat_max_age_secs = 20",
        "actuator_heartbeat_max_age_secs = 5",
    );
    assert_ne!(config, CONFIG, "the bound is set");
    let h = Harness::start(&three_voters(), &config).await;
    // n4's actuator stops: its heartbeat is past the bound already.
    h.fleet.settle_and_freeze().await;
    h.age_heartbeat("n4", 7).await;
    let before = h.versions().await;
    let run = h.run(&["swap", "--out", "n1", "--in", "n4"]).await;
    run.expect(1);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("FAIL") && l.contains("actuators-alive")),
        "{}",
        run.stdout
    );
    assert_eq!(
        h.versions().await,
        before,
        "a refused swap wrote to the API"
    );
}

/// libfaketime, from Debian (scripts/prereqs.sh): preloaded, it moves the
/// process's wall clock (what Rust's `SystemTime` reads) by a fixed
/// offset, and leaves the monotonic clock alone.
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

#[tokio::test]
async fn a_swap_by_a_controller_whose_clock_is_off_the_api_servers_is_refused_for_it_and_writes_nothing()
 {
    assert!(
        std::path::Path::new(FAKETIME).exists(),
        "{FAKETIME} is missing: scripts/prereqs.sh installs libfaketime"
    );
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.settle_and_freeze().await;
    let before = h.versions().await;
    // With the clock right, the same swap passes every gate.
    h.run(&["swap", "--out", "n1", "--in", "n4", "--dry-run"])
        .await
        .expect(0);
    for (offset, way) in [("-30", "behind"), ("+30", "ahead of")] {
        let run = h
            .run_with_env(
                &["swap", "--out", "n1", "--in", "n4"],
                &[
                    ("LD_PRELOAD", FAKETIME),
                    ("FAKETIME", offset),
                    ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
                ],
            )
            .await;
        run.expect(1);
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(
            said.contains("the controller's clock is at least 2")
                && said.contains(&format!("s {way} the API server's")),
            "{offset}: {said}"
        );
    }
    assert_eq!(
        h.versions().await,
        before,
        "a swap refused for its clock wrote to the API"
    );
}

/// Runs a swap that a gate must refuse, and checks it wrote nothing and
/// named the gate.
async fn refused(h: &Harness, out: &str, incoming: &str, gate: &str) -> String {
    h.fleet.settle_and_freeze().await;
    let before = h.versions().await;
    let run = h.run(&["swap", "--out", out, "--in", incoming]).await;
    run.expect(1);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("FAIL") && l.contains(gate)),
        "{gate} not shown failing:\n{}",
        run.stdout
    );
    assert_eq!(
        h.versions().await,
        before,
        "a refused swap wrote to the API"
    );
    run.stdout
}

#[tokio::test]
async fn a_swap_is_refused_while_a_voter_is_not_ready_and_the_runbooks_command_replaces_that_voter()
{
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.set(|f| {
        f.down.insert("n2".into());
    });
    // NotReady, and past the node Lease's grace (6 s here): before that,
    // a voter whose kubelet and etcd answered moments ago counts Ready
    // whatever its condition says, as a dead host's stale `Ready=True` is
    // believed for as long.
    h.wait_for("n2 NotReady with its node Lease stale", || async {
        let leases = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
            h.admin.clone(),
            "kube-node-lease",
        );
        let renewed = leases
            .get("n2")
            .await
            .ok()
            .and_then(|l| l.spec?.renew_time)
            .map(|t| t.0.as_second());
        let now = clock::Clock::system().unix_secs();
        !condition(&h.node("n2").await, "Ready") && renewed.is_none_or(|r| now - r > 7)
    })
    .await;
    let out = refused(&h, "n1", "n4", "voters-healthy").await;
    assert!(out.contains("n2 (NotReady)"), "{out}");
    // `status` calls it degraded (`voters-unhealthy`), and the runbook's
    // command, as docs/recovery.md gives it, replaces the down voter (the
    // other hosts acting again: the refusal's check froze them).
    h.fleet.set(|f| f.frozen = false);
    let status = h.run(&["status", "--output", "json"]).await;
    status.expect(5);
    assert!(
        status.stdout.contains("healthy voter(s) of 3"),
        "{}",
        status.stdout
    );
    // As the runbook says, wait until the dry run's plan counts it down
    // (its own last view of etcd aged past actuator_heartbeat_max_age_secs).
    h.wait_for("the plan to count n2 down", || async {
        h.run(&["swap", "--out", "n2", "--in", "n4", "--dry-run"])
            .await
            .stdout
            .contains("it is down, so it is not asked to step down")
    })
    .await;
    let mut runs = h
        .run_runbook("voters-unhealthy", &[("DOWN", "n2"), ("STANDBY", "n4")])
        .await;
    let run = runs.pop().unwrap();
    run.expect(0);
    h.assert_promoted("n4").await;
    let status = h.run(&["status"]).await;
    assert!(
        !status.stdout.contains("healthy voter(s) of 3"),
        "{}",
        status.stdout
    );
}

#[tokio::test]
async fn a_swap_is_refused_while_a_learner_is_pending() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    // n5 joined etcd as a learner (k3s's label and member name, no EtcdIsVoter).
    h.nodes()
        .patch(
            "n5",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"metadata": {
                "labels": {K3S_ETCD_ROLE_LABEL: "true"},
                "annotations": {"etcd.k3s.cattle.io/node-name": "n5-0badf00d"},
            }})),
        )
        .await
        .unwrap();
    let out = refused(&h, "n1", "n4", "no-learner").await;
    assert!(out.contains("a learner is pending: n5"), "{out}");
}

#[tokio::test]
async fn a_swap_is_refused_for_an_ineligible_host() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    let out = refused(&h, "n1", "n5", "incoming-eligible").await;
    assert!(
        out.contains(&format!("n5 does not carry {ELIGIBLE_LABEL}=true")),
        "{out}"
    );
}

/// Why eligibility is a `node-restriction.kubernetes.io/` label: a host's
/// own kubelet (NodeRestriction and the Node authorizer on, as on k3s) may
/// set the old `<prefix>/voter-eligible` on its Node, but not the new one.
/// The old label then makes nothing eligible: the swap is refused, and
/// `status` names the Node with the command that relabels it.
#[tokio::test]
async fn a_host_that_labels_itself_eligible_as_its_kubelet_is_not_eligible_and_status_names_it() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    let kubelet = Api::<Node>::all(h.plane.kubelet_client("n5").unwrap());
    let label = |k: &str| Patch::Merge(json!({"metadata": {"labels": {k: "true"}}}));
    let p = PatchParams::default();
    let refusal = kubelet.patch("n5", &p, &label(ELIGIBLE_LABEL)).await;
    assert!(
        matches!(&refusal, Err(kube::Error::Api(s)) if s.code == 403),
        "n5's kubelet labelled itself eligible: {refusal:?}"
    );
    kubelet
        .patch("n5", &p, &label(&format!("{P}/voter-eligible")))
        .await
        .expect("a kubelet may set a label of fleet-role's own prefix");

    let out = refused(&h, "n1", "n5", "incoming-eligible").await;
    assert!(
        out.contains(&format!("`kubectl label node n5 {ELIGIBLE_LABEL}=true`")),
        "{out}"
    );
    let status = h.run(&["status"]).await;
    status.expect(0);
    assert!(
        status.stdout.contains(&format!(
            "WARNING: not eligible, labelled only with the old {P}/voter-eligible=true"
        )) && status
            .stdout
            .contains(&format!("  kubectl label node n5 {ELIGIBLE_LABEL}=true")),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("Health: nothing degraded"),
        "{}",
        status.stdout
    );
    let json = h.run(&["status", "--output", "json"]).await;
    let v: Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(v["legacyEligibleOnly"], json!(["n5"]));
}

/// A compromised agent, with its own actuator's token (which writes only
/// its own report key), forges an etcd view: the ghost voter every server
/// lists is renamed to itself and called healthy, read "now". Its Node
/// carries no etcd label (a kubelet cannot set it), so the view counts for
/// nothing: the swap is refused by `no-ghost-member` while the servers'
/// views agree, and `status` names the forged view as ignored.
#[tokio::test]
async fn an_agent_that_forges_its_etcd_view_to_hide_a_ghost_voter_is_ignored_and_the_swap_refused()
{
    let h = Harness::start(&three_voters(), CONFIG).await;
    let ghost = Member {
        id: MemberId(0x6057_0000_0000_6057),
        name: "gone-0badc0de".into(),
        peer_urls: vec!["https://127.0.9.9:2380".into()],
        client_urls: vec![],
        learner: false,
    };
    h.fleet.set(|f| {
        f.ghosts = vec![ghost.clone()];
        f.compromised.insert("n5".into());
    });
    let lists_ghost = |r: Option<Report>| {
        r.and_then(|r| r.host)
            .and_then(|p| p.etcd)
            .filter(|v| v.members.iter().any(|m| m.id == ghost.id))
    };
    h.wait_for("the servers' views list the ghost", || async {
        let mut all = true;
        for n in ["n1", "n2", "n3"] {
            all &= lists_ghost(h.report(n).await).is_some();
        }
        all
    })
    .await;

    // n5's forgery, written with n5's own credential as its actuator would.
    let mut forged = lists_ghost(h.report("n1").await).unwrap();
    for m in &mut forged.members {
        if m.id == ghost.id {
            m.name = "n5-0badc0de".into();
        }
    }
    forged.member = ghost.id;
    forged.healthy = true;
    let now = k8s_openapi::jiff::Timestamp::try_from(clock::Clock::system().wall())
        .unwrap()
        .as_second();
    forged.read_at = now;
    let part = HostPart {
        heartbeat_at: now,
        promotion: None,
        demotion: None,
        etcd: Some(forged),
        release: Some(protocol::version::RELEASE.into()),
        credential_expires_at: None,
    };
    let report = Report::with_host_part(h.report("n5").await.as_ref(), part, now);
    let n5 = h.plane.client_for_token(&h.enroll("n5").await).unwrap();
    support::write_report(&n5, "n5", &report)
        .await
        .expect("a host may write its own report key");

    let out = refused(&h, "n1", "n4", "no-ghost-member").await;
    assert!(out.contains("gone-0badc0de"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("pass") && l.contains("etcd-views-agree")),
        "the servers' views agree; the forged one is not among them:\n{out}"
    );
    // Nor does it vouch for the ghost: by etcd's members, the ghost is down.
    assert!(
        out.contains("by etcd's members: 3 healthy of 4 voting"),
        "{out}"
    );
    let status = h.run(&["status"]).await;
    assert!(
        status
            .stdout
            .contains("  IGNORED: n5: its Node carries no etcd label"),
        "{}",
        status.stdout
    );
    let json = h.run(&["status", "--output", "json"]).await;
    let v: Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(
        v["etcd"]["ignored"],
        json!(["n5: its Node carries no etcd label"])
    );
    assert_eq!(v["etcd"]["disagreeing"], json!([]));
}

#[tokio::test]
async fn a_swap_is_refused_when_too_few_healthy_voters_would_be_left_after_the_removal() {
    // Three voters configured, one Node seen: the two missing count as down,
    // so removing the one healthy voter after the promotion would leave one
    // healthy member of three.
    let hosts = vec![
        HostSpec {
            name: "n1",
            voter: true,
            eligible: true,
        },
        HostSpec {
            name: "n4",
            voter: false,
            eligible: true,
        },
    ];
    let h = Harness::start(&hosts, CONFIG).await;
    let out = refused(&h, "n1", "n4", "quorum-after-removal").await;
    assert!(
        out.contains("leaves 1 healthy of 3 voting members"),
        "{out}"
    );
    assert!(out.contains("2 voter Node(s) missing"), "{out}");
}

#[tokio::test]
async fn a_second_swap_is_refused_while_one_runs() {
    let h = Harness::start(&three_voters_and_a_second_standby(), CONFIG).await;
    // The first swap is held in its promotion.
    h.fleet.set(|f| {
        f.stall_promotion.insert("n4".into());
    });
    let mut first = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    h.wait_for("the first swap's promotion", || async {
        // (A report of its promotion, not its heartbeat's.)
        h.report("n4")
            .await
            .is_some_and(|r| r.step == protocol::report::ReportStep::Promote)
    })
    .await;
    let run = h.run(&["swap", "--out", "n2", "--in", "n6"]).await;
    run.expect(1);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("FAIL") && l.contains("no-other-swap")),
        "{}",
        run.stdout
    );
    // The second swap wrote nothing: n2 and n6 carry no step (n2 carries the
    // first swap's snapshot request and the protocol version it is asked
    // in, and nothing else of fleet-role's).
    for n in ["n2", "n6"] {
        let a = h.node(n).await.metadata.annotations.unwrap_or_default();
        let ours: Vec<&String> = a
            .keys()
            .filter(|k| {
                k.starts_with(P) && !k.ends_with("/snapshot-request") && !k.ends_with("/protocol")
            })
            .collect();
        assert!(ours.is_empty(), "{n}: {a:?}");
    }
    assert!(
        h.node("n6")
            .await
            .metadata
            .annotations
            .unwrap_or_default()
            .is_empty()
    );
    // The first one goes on once its host is promoted.
    h.fleet.set(|f| {
        f.stall_promotion.clear();
    });
    let status = tokio::time::timeout(Duration::from_secs(300), first.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    h.assert_swapped("n1", "n4").await;
}

#[tokio::test]
async fn a_promotion_that_fails_midway_is_rolled_back_and_the_cluster_left_as_it_was() {
    let config = CONFIG.replace("promote = 90", "promote = 6");
    let h = Harness::start(&three_voters(), &config).await;
    // n4 joins as a learner and is never promoted.
    h.fleet.set(|f| {
        f.stall_promotion.insert("n4".into());
    });
    let run = h.run(&["swap", "--out", "n1", "--in", "n4"]).await;
    run.expect(3);
    assert!(
        run.stdout.contains("roll n4 back to an agent"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("ask k3s to remove n4's etcd member"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("did not become a voter"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("the cluster is as it was"),
        "{}",
        run.stdout
    );
    // n4: an agent again, its member removed, no server label, no step.
    let n4 = h.node("n4").await;
    let labels = n4.metadata.labels.clone().unwrap_or_default();
    assert!(!labels.contains_key(K3S_ETCD_ROLE_LABEL), "{labels:?}");
    let a = n4.metadata.annotations.clone().unwrap_or_default();
    assert!(
        !a.keys()
            .any(|k| k.starts_with(P) || k.starts_with("etcd.k3s")),
        "{a:?}"
    );
    assert!(!condition(&n4, "EtcdIsVoter"));
    let report = h.report("n4").await.unwrap();
    assert_eq!(report.step, ReportStep::Rollback);
    assert!(
        h.fleet
            .log()
            .iter()
            .any(|l| l == "k3s: removed n4's member"),
        "{:?}",
        h.fleet.log()
    );
    // n1 was never touched beyond the swap's start: a voter, not cordoned.
    let n1 = h.node("n1").await;
    assert!(condition(&n1, "EtcdIsVoter"));
    assert_ne!(n1.spec.and_then(|s| s.unschedulable), Some(true));
    let a = n1.metadata.annotations.unwrap_or_default();
    assert!(!a.keys().any(|k| k.starts_with(P)), "{a:?}");
    h.assert_lease_released().await;
    let last = h.lease_annotation("last-swap").await.unwrap();
    assert!(last.contains("wound-down"), "{last}");
    assert!(
        h.fleet.violations().is_empty(),
        "{:?}",
        h.fleet.violations()
    );
}

#[tokio::test]
async fn the_lease_taken_by_someone_else_mid_swap_stops_every_further_write() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.set(|f| {
        f.stall_promotion.insert("n4".into());
    });
    let mut child = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    h.wait_for("n4 to be a learner", || async {
        h.report("n4")
            .await
            .is_some_and(|r| r.detail == Some(protocol::report::Detail::Learner))
    })
    .await;
    // From here on nothing but the controller could write: freeze the fleet,
    // take the Lease, and record every resourceVersion.
    h.fleet.settle_and_freeze().await;
    h.steal_lease().await;
    let after_theft = h.versions().await;
    let status = tokio::time::timeout(Duration::from_secs(120), child.wait())
        .await
        .expect("the controller stops")
        .unwrap();
    assert_eq!(status.code(), Some(3));
    let mut out = String::new();
    use tokio::io::AsyncReadExt;
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    assert!(
        out.contains("lost the regrade Lease") || out.contains("lost:"),
        "{out}"
    );
    // The controller has exited: nothing it could still write is missed.
    assert_eq!(
        h.versions().await,
        after_theft,
        "a write after the Lease was lost"
    );
    let lease = h.lease().await;
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("intruder")
    );
    let stepped: BTreeSet<String> = h
        .events()
        .await
        .into_iter()
        .filter(|(_, r)| r == "StepDownRequested" || r == "Cordoned")
        .map(|(n, _)| n)
        .collect();
    assert!(stepped.is_empty(), "{stepped:?}");
}

#[tokio::test]
async fn grow_and_shrink_dry_runs_refuse_an_even_count_left_standing_pass_an_odd_one_and_write_nothing()
 {
    let h = Harness::start(&three_voters_and_a_second_standby(), CONFIG).await;
    h.fleet.settle_and_freeze().await;
    let before = h.versions().await;
    // 3 → 4 is refused, with the next step named; 3 → 5 passes every gate.
    let even = h.run(&["grow", "--in", "n4", "--dry-run"]).await;
    even.expect(1);
    assert!(
        even.stdout.lines().any(|l| l.contains("FAIL")
            && l.contains("odd-voter-count")
            && l.contains("queue a second --in to go on to 5")),
        "{}",
        even.stdout
    );
    let odd = h
        .run(&["grow", "--in", "n4", "--in", "n6", "--dry-run"])
        .await;
    odd.expect(0);
    for line in [
        "promote n4 joining n1",
        "promote n6 joining n1",
        "5 voting (5 healthy), quorum 3, 2 more may fail",
    ] {
        assert!(odd.stdout.contains(line), "no {line:?}:\n{}", odd.stdout);
    }
    // 3 → 2 is refused with the reason, in JSON too.
    let json = h
        .run(&["shrink", "--out", "n3", "--dry-run", "--output", "json"])
        .await;
    json.expect(1);
    let v: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(
        (v["move"].as_str(), v["ok"].as_bool()),
        (Some("shrink"), Some(false))
    );
    let shut: Vec<&str> = v["gates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["passed"] == false)
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert_eq!(shut, vec!["odd-voter-count"], "{}", json.stdout);
    // A host named twice: a usage error, nothing written.
    h.run(&["shrink", "--out", "n3", "--out", "n3", "--dry-run"])
        .await
        .expect(2);
    assert_eq!(h.versions().await, before, "a dry run wrote to the API");
}

#[tokio::test]
async fn a_grow_of_two_standbys_then_a_shrink_of_two_voters_go_from_three_voters_to_five_and_back()
{
    let h = Harness::start(&three_voters_and_a_second_standby(), CONFIG).await;
    let grow = h.run(&["grow", "--in", "n4", "--in", "n6"]).await;
    grow.expect(0);
    eprintln!("the grow of two took {:.1} s", grow.took.as_secs_f64());
    grow.assert_in_order(&[
        "grow 1 of 2: promote n4",
        "take the Lease for swap",
        "(in n4)",
        "promote n4, joining",
        "n4 is a voter",
        "release the Lease: the swap is done",
        "grow 2 of 2: promote n6",
        "promote n6, joining",
        "done: the grow is complete: 5 voting (5 healthy), quorum 3, 2 more may fail",
    ]);
    assert!(!grow.stdout.contains("step down"), "{}", grow.stdout);
    for n in ["n4", "n6"] {
        h.assert_promoted(n).await;
    }
    h.assert_clean().await;
    // Back to three: each voter steps down and finishes as an agent.
    let shrink = h.run(&["shrink", "--out", "n1", "--out", "n2"]).await;
    shrink.expect(0);
    eprintln!("the shrink of two took {:.1} s", shrink.took.as_secs_f64());
    shrink.assert_in_order(&[
        "shrink 1 of 2: step down n1",
        "(out n1)",
        "ask n1 to step down",
        "n1 runs as an agent",
        "shrink 2 of 2: step down n2",
        "ask n2 to step down",
        "n2 runs as an agent",
        "done: the shrink is complete: 3 voting (3 healthy), quorum 2, 1 more may fail",
    ]);
    assert!(!shrink.stdout.contains("promote"), "{}", shrink.stdout);
    for n in ["n1", "n2"] {
        h.assert_demoted(n).await;
    }
    for n in ["n4", "n6"] {
        h.assert_promoted(n).await;
    }
    assert!(condition(&h.node("n3").await, K3S_ETCD_IS_VOTER));
    h.assert_clean().await;
    // One more would leave two standing: refused, with the reason.
    let even = h.run(&["shrink", "--out", "n3"]).await;
    even.expect(1);
    assert!(even.stdout.contains("odd-voter-count"), "{}", even.stdout);
}
