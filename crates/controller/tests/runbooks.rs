//! docs/recovery.md's entries for what `fleet-role status` calls degraded,
//! each run as written against a real kube-apiserver with the scripted
//! fleet: the state produced, `status` exiting 5 with the reason, the
//! entry's commands run as the doc gives them (an administrator's with
//! kubectl), and `status` exiting 0 after. Each test names the reason it
//! covers (`lease-missing`, `voter-without-member`, `even-voters`,
//! `unknown-protocol`, `host-between-roles`); the others are in `cli.rs` (`swap-stopped`), `restart.rs`
//! (`swap-abandoned`), `swap.rs` (`voters-unhealthy`), the actuator's
//! `real_api.rs` (`report-refused`) and the lab's
//! `etcdgates_real_systemd.rs` (`etcd-learner`, `etcd-ghost-member`,
//! `etcd-views` with an etcd alarm) and `real_systemd_lab.rs`
//! (`ready-disputed`, `release-unsupported`).

mod support;

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use protocol::names::K3S_ETCD_ROLE_LABEL;
use serde_json::json;
use support::{CONFIG, Harness, HostSpec, three_voters};

/// `fleet-role status` as the harness's controller runs it: its exit code
/// and output.
async fn status(h: &Harness) -> (Option<i32>, String) {
    let run = h.run(&["status"]).await;
    (run.code, run.stdout)
}

/// `fleet-role status` again until it exits 0 (the servers' views of
/// etcd take in a change one heartbeat at a time), failing the test with
/// its last output past the harness's deadline; returns that output.
async fn until_healthy(h: &Harness) -> String {
    let started = clock::Clock::system().now();
    loop {
        let (code, out) = status(h).await;
        if code == Some(0) {
            return out;
        }
        assert!(
            started.elapsed() < support::DEADLINE,
            "status stayed degraded:\n{out}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// `fleet-role status` again until its output holds `what`; returns it.
async fn until_status_says(h: &Harness, what: &str) -> (Option<i32>, String) {
    let started = clock::Clock::system().now();
    loop {
        let (code, out) = status(h).await;
        if out.contains(what) {
            return (code, out);
        }
        assert!(
            started.elapsed() < support::DEADLINE,
            "status never said {what:?}:\n{out}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn lease_missing_the_runbook_puts_the_regrade_lease_back_and_status_is_healthy_again() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.settle().await;
    Api::<Lease>::namespaced(h.admin.clone(), "kube-system")
        .delete("fleet-regrade", &DeleteParams::default())
        .await
        .unwrap();
    let (code, out) = until_status_says(&h, "the regrade Lease is missing").await;
    assert_eq!(code, Some(5), "{out}");
    let swap = h
        .run(&["swap", "--out", "n1", "--in", "n4", "--dry-run"])
        .await;
    assert_ne!(
        swap.code,
        Some(0),
        "a swap ran with no Lease:\n{}",
        swap.stdout
    );

    let outs = h.run_runbook_as_admin("lease-missing", &[]).await;
    assert!(outs.iter().any(|(c, _)| c.contains("kubectl apply")));
    let out = until_healthy(&h).await;
    assert!(out.contains("Health: nothing degraded"), "{out}");
    assert!(
        out.contains("Lease kube-system/fleet-regrade: free"),
        "{out}"
    );
}

#[tokio::test]
async fn voter_without_member_the_runbook_takes_the_label_off_a_node_dressed_as_a_voter() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.settle().await;
    // Another writer dresses the agent n5 as a voter: k3s's etcd label and
    // its EtcdIsVoter condition, with no member in etcd behind them.
    let nodes: Api<Node> = Api::all(h.admin.clone());
    nodes
        .patch(
            "n5",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {K3S_ETCD_ROLE_LABEL: "true"}}})),
        )
        .await
        .unwrap();
    nodes
        .patch_status(
            "n5",
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": [{
                "type": "EtcdIsVoter",
                "status": "True",
                "reason": "MemberNotLearner",
                "message": "Node is a voting etcd member",
            }]}})),
        )
        .await
        .unwrap();
    let (code, out) = until_status_says(&h, "DEGRADED").await;
    assert_eq!(code, Some(5), "{out}");
    assert!(out.contains("n5"), "{out}");

    let outs = h
        .run_runbook_as_admin("voter-without-member", &[("NODE", "n5")])
        .await;
    let shown = String::from_utf8_lossy(&outs[0].1.stdout).into_owned();
    assert!(
        shown.contains("name: n5") && shown.contains(&format!("{K3S_ETCD_ROLE_LABEL}: \"true\"")),
        "{shown}"
    );
    let out = until_healthy(&h).await;
    assert!(out.contains("Health: nothing degraded"), "{out}");
}

#[tokio::test]
async fn even_voters_the_runbooks_shrink_leaves_an_odd_count_and_status_is_healthy_again() {
    let mut hosts = three_voters();
    for h in hosts.iter_mut().filter(|h| h.name == "n4") {
        *h = HostSpec {
            name: "n4",
            voter: true,
            eligible: true,
        };
    }
    let h = Harness::start(&hosts, CONFIG).await;
    h.fleet.settle().await;
    let (code, out) = until_status_says(&h, "etcd has 4 voting members").await;
    assert_eq!(code, Some(5), "{out}");

    let mut runs = h.run_runbook("even-voters", &[("VOTER", "n4")]).await;
    let shrink = runs.pop().unwrap();
    shrink.expect(0);
    let out = until_healthy(&h).await;
    assert!(out.contains("Voters: 3 seen (3 healthy)"), "{out}");
}

#[tokio::test]
async fn unknown_protocol_the_runbooks_look_names_the_host_and_a_report_in_a_version_the_controller_reads_heals_the_fleet()
 {
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.settle_and_freeze().await;
    // n3's actuator upgraded ahead of the controller, against the
    // documented order: its report in a protocol version this controller
    // does not read.
    let known = h.report("n3").await.expect("n3's report");
    let mut ahead = known.clone();
    ahead.protocol = protocol::version::PROTOCOL_VERSION + 1;
    support::write_report(&h.admin, "n3", &ahead).await.unwrap();
    let (code, out) = until_status_says(&h, "n3's report: protocol version").await;
    assert_eq!(code, Some(5), "{out}");

    let outs = h.run_runbook_as_admin("release-unsupported", &[]).await;
    let shown = String::from_utf8_lossy(&outs[0].1.stdout).into_owned();
    assert!(
        shown.contains("n3's report: protocol version")
            && shown.contains("is not one this build knows"),
        "{shown}"
    );
    // The act: the controller upgraded, or n3 taken back to the release
    // the controller reads; either way n3's next report is one it reads.
    support::write_report(&h.admin, "n3", &known).await.unwrap();
    let out = until_healthy(&h).await;
    assert!(out.contains("Health: nothing degraded"), "{out}");
}

#[tokio::test]
async fn host_between_roles_the_runbooks_swap_moves_on_a_voter_left_etcd_only_by_a_stopped_swap() {
    // k3s's removal held past the swap's removal timeout: the outgoing
    // voter stepped down and serves etcd only, and the swap stops there.
    let config = CONFIG.replace("removal = 90", "removal = 3");
    let h = Harness::start(&three_voters(), &config).await;
    h.fleet.set(|f| {
        f.hold.insert("removal".into());
    });
    let run = h.run(&["swap", "--out", "n1", "--in", "n4"]).await;
    run.expect(4);
    assert!(h.fleet.has_held("removal"), "{}", run.stdout);
    let (code, out) =
        until_status_says(&h, "n1 is etcd-only and no swap is under way to move it on").await;
    assert_eq!(code, Some(5), "{out}");

    h.fleet.set(|f| f.hold.clear());
    let outs = h
        .run_runbook_as_admin("host-between-roles", &[("OUT", "n1"), ("IN", "n4")])
        .await;
    let looked = String::from_utf8_lossy(&outs[0].1.stdout).into_owned();
    assert!(looked.contains("out n1, in n4"), "{looked}");
    assert!(outs[1].1.status.success());
    let out = until_healthy(&h).await;
    assert!(out.contains("Health: nothing degraded"), "{out}");
    h.assert_swapped("n1", "n4").await;
}
