//! The attacks of docs/security.md's threat table carried out against a real control plane (the
//! Node authorizer and NodeRestriction on), each with exactly the
//! permissions its principal has: a patch-nodes user (a ServiceAccount bound
//! to `get/list/watch/patch` on Nodes and nothing else, as kured or
//! node-feature-discovery hold), a kubelet (`system:node:<name>`), and the
//! controller's writes played by hand with the admin client. The actuator
//! runs as the built binary on stand-in hosts, with its own host's token.
//!
//! In every test the regrade Lease is held for swap s1, naming `old` out and
//! `standby` in, and asking for `promote`, as the controller leaves it while
//! the promotion runs. Each test starts its own plane, as `real_api.rs`
//! does: each watches one host's report and must not see another's.
//!
//! The host's own token writing the Lease or another Node is in
//! `real_api.rs`'s matrix (`the_credential_reads_nodes_and_the_lease_…`), and
//! the forged etcd view in `crates/controller/tests/swap.rs`.

mod support;

use std::{collections::BTreeMap, path::PathBuf};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use protocol::{Phase, Report, report::ReportStep};
use serde_json::json;
use standins::fixture::TestHost;
use support::{
    Access, Actuator, Controller, DEADLINE, HOST_REPORT, P, Renewing, bin_dir, plane,
    wait_decisions, write_token,
};
use testcp::ControlPlane;

/// A principal with `get/list/watch/patch` on Nodes and nothing else.
const PATCH_NODES_USER: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: node-patcher, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: node-patcher}
rules:
  - apiGroups: [""]
    resources: ["nodes"]
    verbs: ["get", "list", "watch", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: node-patcher}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: node-patcher}
subjects:
  - {kind: ServiceAccount, name: node-patcher, namespace: kube-system}
"#;

/// Now as a Kubernetes Time.
fn now() -> String {
    k8s_openapi::jiff::Timestamp::try_from(clock::Clock::system().wall())
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The refusal of a step the Lease names another host for.
fn not_named(named: &str, what: &str, step: &str) -> String {
    format!(
        "the regrade Lease names \"{named}\" as the swap's {what}, not this host: {step} is taken only there"
    )
}

/// One test's world: the plane, the controller's Lease for swap s1 (kept
/// renewed), the Nodes `old`, `standby`, `voter-a` (the voter a promotion
/// joins) and `voter-b` (a voter outside the swap).
struct World {
    plane: ControlPlane,
    admin: Controller,
    work: tempfile::TempDir,
    _lease: Renewing,
}

impl World {
    async fn start() -> World {
        let plane = plane().await;
        let admin = Controller::new(&plane);
        admin.create_standby_and_voter("standby").await;
        for node in ["old", "voter-b"] {
            admin.create_node(node, json!({})).await;
        }
        // voter-a is a Ready server at the address the test hosts' k3s
        // config names (`JOIN_SERVER_IP`), so a server host here could be demoted:
        // its agent would have a server to bootstrap from.
        let nodes: Api<Node> = Api::all(admin.client.clone());
        let server =
            json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": "true"}}});
        nodes
            .patch("voter-a", &PatchParams::default(), &Patch::Merge(&server))
            .await
            .unwrap();
        let ready = json!({"status": {
            "addresses": [{"type": "InternalIP", "address": standins::fixture::JOIN_SERVER_IP}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": now(), "lastTransitionTime": now()}],
        }});
        nodes
            .patch_status("voter-a", &PatchParams::default(), &Patch::Merge(&ready))
            .await
            .unwrap();
        admin.take_lease("s1").await;
        let lease = admin.keep_lease("s1");
        // The Lease as the controller leaves it while the promotion runs.
        admin.ask_lease("old", "step-down").await;
        admin.ask_lease("standby", "promote").await;
        World {
            plane,
            admin,
            work: tempfile::tempdir().unwrap(),
            _lease: lease,
        }
    }

    /// The patch-nodes user, once its binding is in force (a dry-run patch
    /// of a Node is allowed), as a [`Controller`] writing with its client.
    async fn patch_nodes_user(&self) -> Controller {
        self.plane.apply_yaml(PATCH_NODES_USER).await.unwrap();
        let token = self
            .plane
            .service_account_token("kube-system", "node-patcher")
            .await
            .unwrap();
        let client = self.plane.client_for_token(&token).unwrap();
        let nodes: Api<Node> = Api::all(client.clone());
        let dry_run = PatchParams {
            dry_run: true,
            ..PatchParams::default()
        };
        let started = clock::Clock::system().now();
        while let Err(e) = nodes
            .patch("voter-b", &dry_run, &Patch::Merge(json!({})))
            .await
        {
            assert!(started.elapsed() < DEADLINE, "the binding never held: {e}");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        Controller { client }
    }

    /// Runs the actuator on `node` with its own token: a server host (role
    /// file `server`, a datastore, k3s active) made by `make` from a fresh
    /// test host.
    async fn host(&self, node: &str, make: impl FnOnce(TestHost) -> TestHost) -> Host {
        let token = support::enroll(&self.plane, node).await;
        let token_file = self.work.path().join(format!("token-{node}"));
        write_token(&token_file, &token);
        let access = Access {
            api: self.plane.urls(),
            ca_file: self.plane.ca_file(),
            token_file,
        };
        // An address of this host, so the watcher knows its Node is it.
        self.admin.set_address(node, "127.0.0.1").await;
        let host = make(TestHost::new(node, bin_dir()));
        let before = host.tree();
        let watcher = Actuator::watch(&host, self.work.path(), node, &access);
        Host {
            host,
            watcher,
            before,
        }
    }

    /// Waits until `h` reports `step` with a phase `done` accepts.
    async fn wait_step(&self, h: &Host, step: ReportStep, done: impl Fn(Phase) -> bool) -> Report {
        self.admin
            .wait_report(&h.host.node, step.as_str(), &h.watcher, |r| {
                r.step == step && done(r.phase)
            })
            .await
    }
}

/// A stand-in host with its running actuator and its files as they were
/// before the actuator started.
struct Host {
    host: TestHost,
    watcher: Actuator,
    before: BTreeMap<PathBuf, (u32, Vec<u8>)>,
}

impl Host {
    /// Nothing changed on a server host: no unit started or stopped, k3s
    /// still active, the role file and the datastore as they were, and
    /// every file byte for byte but the report it keeps.
    fn assert_unchanged(&self, role: &str) {
        let h = &self.host;
        assert!(h.systemd_log().is_empty(), "{:?}", h.systemd_log());
        assert!(h.active("k3s") && !h.active("k3s-agent"));
        assert_eq!(h.role().as_deref(), Some(role));
        assert!(h.at("var/lib/rancher/k3s/server/db/etcd/member").is_dir());
        let mut after = h.tree();
        after.remove(std::path::Path::new(HOST_REPORT));
        assert_eq!(after, self.before, "a refused step changed the host");
    }
}

/// A server host as installed: role file `server`, a datastore, k3s active.
fn server(h: TestHost) -> TestHost {
    h.as_server()
}

#[tokio::test]
async fn marks_a_patch_nodes_user_copies_onto_a_voter_outside_the_swap_are_refused_and_change_nothing()
 {
    let w = World::start().await;
    let patcher = w.patch_nodes_user().await;
    let b = w.host("voter-b", server).await;
    // Each step copied while the Lease asks for some step of the swap's own
    // hosts: a rollback while it asks for the promotion, then a step-down
    // and a promotion while it asks for that very step (so only the Lease's
    // naming of the swap's hosts tells voter-b it is not one of them).
    for (step, role, join, asked_of, reason) in [
        (
            ReportStep::Rollback,
            "agent",
            None,
            ("standby", "promote"),
            not_named("standby", "incoming host", "rollback"),
        ),
        (
            ReportStep::StepDown,
            "agent",
            None,
            ("old", "step-down"),
            not_named("old", "outgoing host", "step-down"),
        ),
        (
            ReportStep::Promote,
            "server",
            Some("voter-a"),
            ("standby", "promote"),
            not_named("standby", "incoming host", "promote"),
        ),
    ] {
        w.admin.ask_lease(asked_of.0, asked_of.1).await;
        patcher
            .mark("voter-b", "s1", step.as_str(), role, join)
            .await;
        let refused = w.wait_step(&b, step, |p| p != Phase::Started).await;
        assert_eq!(
            (refused.phase, refused.reason.as_deref()),
            (Phase::Refused, Some(reason.as_str())),
            "{}",
            b.watcher.log_tail(15)
        );
        b.assert_unchanged("server");
    }
}

#[tokio::test]
async fn step_down_marks_written_early_on_the_swaps_own_outgoing_host_wait_until_the_lease_asks_for_it()
 {
    let w = World::start().await;
    let patcher = w.patch_nodes_user().await;
    let old = w.host("old", server).await;
    patcher.mark("old", "s1", "step-down", "agent", None).await;
    let waits = "waiting: step-down waits: the regrade Lease shows the controller last asked for \"promote\", not step-down";
    let started = clock::Clock::system().now();
    while old.watcher.count(waits) == 0 {
        assert!(
            started.elapsed() < DEADLINE,
            "it never waited:\n{}",
            old.watcher.log_tail(15)
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // Three more decisions on the same marks: nothing reported, nothing done.
    wait_decisions(&old.watcher, old.watcher.count(support::DECIDED), 3).await;
    let report = w.admin.report("old").await;
    assert!(
        report.as_ref().is_none_or(|r| r.step == ReportStep::None),
        "{report:?}"
    );
    old.assert_unchanged("server");

    // The controller asks for the step-down (its gates passed): taken.
    w.admin.ask_lease("old", "step-down").await;
    let taken = w
        .wait_step(&old, ReportStep::StepDown, |p| p != Phase::Refused)
        .await;
    assert_eq!(taken.swap.as_ref().map(|s| s.as_str()), Some("s1"));
}

#[tokio::test]
async fn a_kubelet_marking_its_own_node_outside_the_swap_is_refused_and_may_write_no_other_node_nor_the_lease()
 {
    let w = World::start().await;
    let b = w.host("voter-b", server).await;
    let kubelet = Controller {
        client: w.plane.kubelet_client("voter-b").unwrap(),
    };
    // Its own Node: NodeRestriction allows these marks (no reserved domain).
    kubelet
        .mark("voter-b", "s1", "rollback", "agent", None)
        .await;
    let refused = w
        .wait_step(&b, ReportStep::Rollback, |p| p != Phase::Started)
        .await;
    assert_eq!(
        (refused.phase, refused.reason),
        (
            Phase::Refused,
            Some(not_named("standby", "incoming host", "rollback"))
        )
    );
    b.assert_unchanged("server");

    // Another Node, and the Lease: 403 each.
    let marks = json!({"metadata": {"annotations": {
        format!("{P}/role-swap"): "s1", format!("{P}/role-step"): "rollback",
    }}});
    let other = Api::<Node>::all(kubelet.client.clone())
        .patch("standby", &PatchParams::default(), &Patch::Merge(&marks))
        .await;
    assert!(
        matches!(&other, Err(kube::Error::Api(s)) if s.code == 403),
        "{other:?}"
    );
    let naming = json!({"metadata": {"annotations": {
        format!("{P}/swap-in"): "voter-b", format!("{P}/swap-asked"): "rollback",
    }}});
    let lease = Api::<Lease>::namespaced(kubelet.client.clone(), "kube-system")
        .patch(
            "fleet-regrade",
            &PatchParams::default(),
            &Patch::Merge(&naming),
        )
        .await;
    assert!(
        matches!(&lease, Err(kube::Error::Api(s)) if s.code == 403),
        "{lease:?}"
    );
}

#[tokio::test]
async fn a_promotion_the_lease_asks_of_a_host_whose_datastore_may_still_vote_is_refused_and_changes_nothing()
 {
    let w = World::start().await;
    // An etcd-only voter whose role file already names the agent: no
    // tombstone, and its etcd cannot be read (no certificates), so nothing
    // shows its member gone.
    let standby = w
        .host("standby", |h| {
            let h = h.as_server();
            std::fs::write(h.at("var/lib/rancher/k3s/fleet-role"), "agent\n").unwrap();
            h
        })
        .await;
    w.admin
        .ask("standby", "s1", "promote", "server", Some("voter-a"))
        .await;
    let refused = w
        .wait_step(&standby, ReportStep::Promote, |p| p != Phase::Started)
        .await;
    assert_eq!(
        (refused.phase, refused.reason.as_deref()),
        (
            Phase::Refused,
            Some(
                "the datastore holds an etcd member that may still vote (\"standby-0a1b2c3d\") and the role file names the agent; a promotion would move it aside"
            )
        ),
        "{}",
        standby.watcher.log_tail(15)
    );
    standby.assert_unchanged("agent");
}
