//! `fleet-role manifests`: `deploy/rbac/` is its rendering of the defaults,
//! and, rendered for other namespaces and Lease name and applied to a real
//! kube-apiserver, its admission policies keep each enrolled host to its own
//! report of at most 16 KiB (and each host of an earlier release to its own
//! key of the shared report), while the controller reads both.

use std::{
    path::{Path, PathBuf},
    process::Output,
    time::Duration,
};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::ConfigMap};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use protocol::report::MAX_REPORT_BYTES;
use secrecy::SecretString;
use serde_json::json;
use testcp::ControlPlane;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `fleet-role` in `dir`, with no config but the one `args` names.
fn fleet_role(dir: &Path, args: &[&str]) -> Output {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fleet-role"))
        .current_dir(dir)
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("FLEET_ROLE_CONFIG")
        .output()
        .expect("fleet-role runs");
    assert!(
        out.status.success(),
        "fleet-role {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_manifests_in_deploy_rbac_are_the_rendering_of_the_default_settings() {
    let dir = tempfile::tempdir().unwrap();
    for (args, file) in [
        (&["manifests"][..], "deploy/rbac/actuator.yaml"),
        (
            &["manifests", "controller"][..],
            "deploy/rbac/controller.yaml",
        ),
        (&["manifests", "all"][..], "deploy/fleet-role.yaml"),
    ] {
        let out = fleet_role(dir.path(), args);
        let kept = std::fs::read(workspace().join(file)).unwrap();
        assert!(
            out.stdout == kept,
            "{file} is not `fleet-role {}`: regenerate it as its first lines say",
            args.join(" ")
        );
    }
}

const CONFIG: &str = "report_namespace = \"fleet-ops\"\nhosts_namespace = \"fleet-ops-hosts\"\nlease_name = \"regrade-x\"\n";
const NS: &str = "fleet-ops";
const HOSTS: &str = "fleet-ops-hosts";

/// Writes `value` under `key` of the shared report of earlier releases with
/// `token` by server-side apply, as an actuator of those releases does: Ok,
/// or the code and message of the refusal.
async fn write_shared(
    plane: &ControlPlane,
    token: &SecretString,
    key: &str,
    value: &str,
) -> Result<(), (u16, String)> {
    let client = plane.client_for_token(token).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, NS);
    let body = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "fleet-role-actuators", "namespace": NS},
        "data": {key: value},
    });
    let params = PatchParams::apply(&format!("fleet-role-actuator-{key}")).force();
    answer(
        cms.patch("fleet-role-actuators", &params, &Patch::Apply(&body))
            .await,
    )
}

/// Updates `node`'s own report ConfigMap to hold `value` with `token`, as
/// an actuator of this release does (from the object as read).
async fn write_own(
    plane: &ControlPlane,
    token: &SecretString,
    node: &str,
    value: &str,
) -> Result<(), (u16, String)> {
    let client = plane.client_for_token(token).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, HOSTS);
    let mut cm = match cms.get(node).await {
        Ok(cm) => cm,
        Err(e) => return answer::<ConfigMap>(Err(e)),
    };
    cm.data = Some([("report".to_string(), value.to_string())].into());
    answer(cms.replace(node, &Default::default(), &cm).await)
}

fn answer<T>(r: Result<T, kube::Error>) -> Result<(), (u16, String)> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) => Err((s.code, s.message)),
        Err(e) => panic!("{e}"),
    }
}

fn token(dir: &Path, node: &str) -> SecretString {
    SecretString::from(std::fs::read_to_string(dir.join(format!("{node}.token"))).unwrap())
}

/// A host's report with sequence number `seq`, its host part beating at `at`.
fn report(seq: u64, at: i64) -> String {
    let part = protocol::report::HostPart {
        heartbeat_at: at,
        demotion: None,
        promotion: Some(protocol::report::Eligibility::Ok),
        etcd: None,
        release: Some(protocol::version::RELEASE.into()),
        credential_expires_at: None,
    };
    let mut r = protocol::Report::with_host_part(None, part, at);
    r.seq = seq;
    r.to_json()
}

/// The identity an earlier release's `enroll` made for `node` (its
/// ServiceAccount in the shared report's namespace, bound to the three
/// shared roles), and a token of it.
async fn legacy_identity(plane: &ControlPlane, node: &str) -> SecretString {
    let names = protocol::Names {
        report_namespace: NS.into(),
        ..Default::default()
    };
    let id = kubeview::Identity::of(&protocol::NodeName::parse(node).unwrap()).unwrap();
    for o in id.legacy_objects(&names) {
        plane
            .apply_yaml(&o.to_string())
            .await
            .expect("the old identity applies");
    }
    plane
        .service_account_token(NS, id.name())
        .await
        .expect("a token of the old identity")
}

#[tokio::test]
async fn under_other_namespaces_each_host_writes_its_own_report_within_16_kib_and_the_controller_reads_old_and_new_hosts_the_newer_winning()
 {
    let plane = ControlPlane::start().await.expect("a control plane starts");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("fleet-ops.toml"), CONFIG).unwrap();
    for which in ["controller", "actuators"] {
        let out = fleet_role(d, &["manifests", which, "--config", "fleet-ops.toml"]);
        let yaml = String::from_utf8(out.stdout).unwrap();
        assert!(
            !yaml.contains("fleet-regrade") && !yaml.contains("namespace: fleet-role-hosts"),
            "{yaml}"
        );
        plane
            .apply_yaml(&yaml)
            .await
            .unwrap_or_else(|e| panic!("the {which} manifests apply: {e}"));
    }
    let kubeconfig = d.join("admin.kubeconfig");
    plane
        .write_kubeconfig(&kubeconfig, plane.admin_token())
        .unwrap();
    let admin = |args: &[&str]| {
        let mut all = vec![
            "--kubeconfig",
            "admin.kubeconfig",
            "--config",
            "fleet-ops.toml",
        ];
        all.extend_from_slice(args);
        fleet_role(d, &all)
    };
    // Two hosts enrolled by this release, one by an earlier one (mid-upgrade),
    // and one moving: enrolled by both, its old actuator's key left behind.
    for node in ["node-a", "node-b", "node-c"] {
        admin(&["enroll", node]);
    }
    let (a, b) = (token(d, "node-a"), token(d, "node-b"));
    let old = legacy_identity(&plane, "old-1").await;
    let old_c = legacy_identity(&plane, "node-c").await;
    let c = token(d, "node-c");

    // The hosts' policy is in force once a dry run of a second key in a
    // host's own report is refused.
    let client = plane.client_for_token(&a).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, HOSTS);
    let started = clock::Clock::system().now();
    loop {
        let mut cm = cms.get("node-a").await.unwrap();
        cm.data = Some([("report".into(), "{}".into()), ("x".into(), "y".into())].into());
        let dry = kube::api::PostParams {
            dry_run: true,
            ..Default::default()
        };
        match cms.replace("node-a", &dry, &cm).await {
            Err(kube::Error::Api(s)) if s.code == 403 => break,
            other => assert!(
                started.elapsed() < Duration::from_secs(60),
                "the hosts' policy never came into force: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Its own report: up to the cap, counted in bytes (two-byte characters:
    // a count of characters would take one more).
    let at_cap = "é".repeat(MAX_REPORT_BYTES / 2);
    assert_eq!(at_cap.len(), MAX_REPORT_BYTES);
    assert_eq!(write_own(&plane, &a, "node-a", &at_cap).await, Ok(()));
    let refused = write_own(&plane, &a, "node-a", &format!("{at_cap}x")).await;
    let Err((403, m)) = refused else {
        panic!("16 KiB + 1 byte was not refused: {refused:?}")
    };
    assert!(
        m.contains("at most 16384 bytes (16 KiB)") && m.contains("not 16385"),
        "{m}"
    );
    // Another host's report: not even a read.
    let refused = write_own(&plane, &b, "node-a", "{}").await;
    assert!(matches!(&refused, Err((403, _))), "{refused:?}");

    // The shared report of earlier releases keeps each old host to its own
    // key, and no host of this release writes it.
    let refused = write_shared(&plane, &old, "old-1", &format!("{at_cap}x")).await;
    assert!(
        matches!(&refused, Err((403, m)) if m.contains("at most 16384 bytes")),
        "{refused:?}"
    );
    let refused = write_shared(&plane, &old, "node-a", "{}").await;
    assert!(
        matches!(&refused, Err((403, m)) if m.contains("only its own key")),
        "{refused:?}"
    );
    let refused = write_shared(&plane, &a, "node-a", "{}").await;
    assert!(matches!(&refused, Err((403, _))), "{refused:?}");

    // What each host reports: node-a and node-b on their own objects, old-1
    // on the shared key, node-c on both (its old key behind its new one).
    let now = clock::Clock::system().unix_secs();
    assert_eq!(
        write_own(&plane, &a, "node-a", &report(5, now)).await,
        Ok(())
    );
    assert_eq!(
        write_own(&plane, &b, "node-b", &report(2, now)).await,
        Ok(())
    );
    assert_eq!(
        write_shared(&plane, &old, "old-1", &report(7, now)).await,
        Ok(())
    );
    assert_eq!(
        write_shared(&plane, &old_c, "node-c", &report(3, now - 300)).await,
        Ok(())
    );
    assert_eq!(
        write_own(&plane, &c, "node-c", &report(4, now)).await,
        Ok(())
    );
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(plane.admin_client().unwrap());
    for node in ["node-a", "node-b", "node-c", "old-1"] {
        let n = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}),
        )
        .unwrap();
        nodes.create(&Default::default(), &n).await.unwrap();
    }
    // Degraded (no voter in this fleet): exit 5, the JSON still printed.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fleet-role"))
        .current_dir(d)
        .args([
            "--kubeconfig",
            "admin.kubeconfig",
            "--config",
            "fleet-ops.toml",
            "status",
            "--output",
            "json",
        ])
        .env_remove("KUBECONFIG")
        .env_remove("FLEET_ROLE_CONFIG")
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let seq = |node: &str| {
        status["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == node)
            .and_then(|n| n["report"]["seq"].as_u64())
    };
    assert_eq!(
        ["node-a", "node-b", "node-c", "old-1"].map(seq),
        [Some(5), Some(2), Some(4), Some(7)],
        "{status:#}"
    );

    // The Lease role names the configured Lease and no other.
    let leases: Api<Lease> = Api::namespaced(plane.client_for_token(&a).unwrap(), "kube-system");
    leases.get("regrade-x").await.expect("its own Lease");
    let other = leases.get("fleet-regrade").await;
    assert!(
        matches!(&other, Err(kube::Error::Api(s)) if s.code == 403),
        "{other:?}"
    );
}

#[tokio::test]
async fn the_whole_cluster_side_file_applies_server_side_as_a_dry_run_with_every_part_of_fleet_role() {
    let plane = ControlPlane::start().await.expect("a control plane starts");
    let yaml = std::fs::read_to_string(workspace().join("deploy/fleet-role.yaml")).unwrap();
    let applied = plane
        .dry_run_yaml(&yaml)
        .await
        .unwrap_or_else(|e| panic!("deploy/fleet-role.yaml applies: {e}"));
    let kinds: std::collections::BTreeSet<String> = applied
        .iter()
        .filter_map(|o| o.types.as_ref().map(|t| t.kind.clone()))
        .collect();
    for kind in [
        "Namespace",
        "ServiceAccount",
        "Lease",
        "ClusterRole",
        "RoleBinding",
        "ConfigMap",
        "ValidatingAdmissionPolicy",
        "Deployment",
    ] {
        assert!(kinds.contains(kind), "no {kind} in {kinds:?}");
    }
    // A dry run: nothing but the namespaces was stored.
    let admin = plane.admin_client().unwrap();
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(admin, "platform");
    assert!(deployments.get_opt("fleet-role").await.unwrap().is_none());
}

/// The code of `r`: 200 for an answer, else the API's.
fn code<T>(r: Result<T, kube::Error>) -> u16 {
    match r {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn the_controllers_credential_reads_the_hosts_objects_and_no_other_config_map_or_lease() {
    let plane = ControlPlane::start().await.expect("a control plane starts");
    for f in ["deploy/rbac/controller.yaml", "deploy/rbac/actuator.yaml"] {
        plane
            .apply_yaml_file(&workspace().join(f))
            .await
            .unwrap_or_else(|e| panic!("{f} applies: {e}"));
    }
    plane
        .apply_yaml(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: platform}\ndata: {x: \"1\"}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: kube-system}\n---\napiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: other, namespace: kube-system}\nspec: {}\n",
        )
        .await
        .unwrap();
    let token = plane
        .service_account_token("platform", "fleet-role")
        .await
        .unwrap();
    let c = plane.client_for_token(&token).unwrap();
    let cms = |ns: &str| Api::<ConfigMap>::namespaced(c.clone(), ns);
    let leases = |ns: &str| Api::<Lease>::namespaced(c.clone(), ns);
    let all = kube::api::ListParams::default();
    let shared = kube::api::ListParams::default().fields("metadata.name=fleet-role-actuators");
    let rows: Vec<(&str, u16, u16)> = vec![
        (
            "list the hosts' reports",
            200,
            code(cms("fleet-role-hosts").list(&all).await),
        ),
        (
            "list the hosts' heartbeats",
            200,
            code(leases("fleet-role-hosts").list(&all).await),
        ),
        (
            "get the shared report of earlier releases",
            200,
            code(cms("platform").get("fleet-role-actuators").await),
        ),
        (
            "list the shared report by name",
            200,
            code(cms("platform").list(&shared).await),
        ),
        (
            "list ConfigMaps in platform",
            403,
            code(cms("platform").list(&all).await),
        ),
        (
            "get another ConfigMap in platform",
            403,
            code(cms("platform").get("other").await),
        ),
        (
            "get a ConfigMap in kube-system",
            403,
            code(cms("kube-system").get("other").await),
        ),
        (
            "list ConfigMaps everywhere",
            403,
            code(Api::<ConfigMap>::all(c.clone()).list(&all).await),
        ),
        (
            "get another Lease in kube-system",
            403,
            code(leases("kube-system").get("other").await),
        ),
        (
            "list Leases everywhere",
            403,
            code(Api::<Lease>::all(c.clone()).list(&all).await),
        ),
        (
            "delete a host's report",
            403,
            code(
                cms("fleet-role-hosts")
                    .delete("node-a", &Default::default())
                    .await,
            ),
        ),
    ];
    assert_rows(&rows);
}

/// Prints each row (what, the code expected, the code got) and fails
/// naming every row that did not get what it expects.
fn assert_rows(rows: &[(&str, u16, u16)]) {
    for (what, want, got) in rows {
        println!("{what:<80} {want} {got}");
    }
    let wrong: Vec<String> = rows
        .iter()
        .filter(|(_, want, got)| want != got)
        .map(|(what, want, got)| format!("{what}: expected {want}, got {got}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Waits until `probe` answers 403: a policy just created is in force a
/// moment later, each on its own.
async fn until_forbidden<F, Fut>(what: &str, probe: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = u16>,
{
    let started = clock::Clock::system().now();
    while probe().await != 403 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{what} never came into force"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A merge patch of `node`'s metadata (labels or annotations) by `client`.
async fn patch_meta(client: &kube::Client, node: &str, meta: serde_json::Value) -> u16 {
    patch_meta_with(client, node, meta, &PatchParams::default()).await
}

/// [`patch_meta`] with `params` (a dry run: admission judges it, nothing
/// is stored).
async fn patch_meta_with(
    client: &kube::Client,
    node: &str,
    meta: serde_json::Value,
    params: &PatchParams,
) -> u16 {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    code(
        nodes
            .patch(node, params, &Patch::Merge(json!({ "metadata": meta })))
            .await,
    )
}

#[tokio::test]
async fn only_the_controller_and_administrators_write_the_regrade_lease_the_marks_and_k3s_removal_ask_and_only_hosts_their_reports()
 {
    let plane = ControlPlane::start().await.expect("a control plane starts");
    for f in ["deploy/rbac/controller.yaml", "deploy/rbac/actuator.yaml"] {
        plane
            .apply_yaml_file(&workspace().join(f))
            .await
            .unwrap_or_else(|e| panic!("{f} applies: {e}"));
    }
    let names = protocol::Names::default();
    // Principals as common add-ons hold them: Kubernetes' own
    // node-problem-detector role (nodes/status), and a `patch nodes` and
    // Lease writer as k3s's cloud controller or a CNI agent is.
    plane
        .apply_yaml(
            "apiVersion: v1\nkind: Node\nmetadata: {name: server-2}\n---\n\
             apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: npd, namespace: kube-system}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: npd}\n\
             roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: 'system:node-problem-detector'}\n\
             subjects: [{kind: ServiceAccount, name: npd, namespace: kube-system}]\n---\n\
             apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: patcher, namespace: kube-system}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: patcher}\n\
             rules: [{apiGroups: [''], resources: [nodes], verbs: [get, patch, update]},\
             {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get, update, patch]}]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: patcher}\n\
             roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: patcher}\n\
             subjects: [{kind: ServiceAccount, name: patcher, namespace: kube-system}]\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {name: server-2, namespace: fleet-role-hosts}\n---\n\
             apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: writer, namespace: default}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: writer, namespace: fleet-role-hosts}\n\
             rules: [{apiGroups: [''], resources: [configmaps], verbs: [get, create, update, patch]}]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: writer, namespace: fleet-role-hosts}\n\
             roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: writer}\n\
             subjects: [{kind: ServiceAccount, name: writer, namespace: default}]\n",
        )
        .await
        .unwrap();
    let client = |ns: &'static str, sa: &'static str| {
        let plane = &plane;
        async move {
            let t = plane.service_account_token(ns, sa).await.unwrap();
            plane.client_for_token(&t).unwrap()
        }
    };
    let patcher = client("kube-system", "patcher").await;
    let writer = client("default", "writer").await;
    let reports = |c: &kube::Client| Api::<ConfigMap>::namespaced(c.clone(), "fleet-role-hosts");
    // A `started` rollback with a high seq, as the attack plants it.
    let planted = json!({ "data": { "report": "{\"protocol\":1,\"swap\":\"swap-x\",\"step\":\"rollback\",\"phase\":\"started\",\"seq\":999999}" } });
    let npd = client("kube-system", "npd").await;
    let controller = client("platform", "fleet-role").await;
    let admin = plane.admin_client().unwrap();
    let step =
        json!({ "annotations": { names.role_step(): "promote", names.role_swap(): "swap-x" } });
    // Each policy is loaded a moment after it is created: wait for both.
    // The probes are dry runs: a probe stored before the policy is in
    // force would make every later one no change, and so allowed.
    let dry_run = PatchParams::default().dry_run();
    until_forbidden("the controller's policy", || {
        patch_meta_with(&patcher, "server-2", step.clone(), &dry_run)
    })
    .await;
    until_forbidden("the hosts' writers policy", || async {
        code(
            reports(&writer)
                .patch(
                    "server-2",
                    &PatchParams::default().dry_run(),
                    &Patch::Merge(planted.clone()),
                )
                .await,
        )
    })
    .await;
    let leases: Api<Lease> = Api::namespaced(patcher.clone(), "kube-system");
    let lease_patch = Patch::Merge(json!({ "spec": { "holderIdentity": "intruder" } }));
    let rows: Vec<(&str, u16, u16)> = vec![
        (
            "a patch-nodes holder plants a step of a swap",
            403,
            patch_meta(&patcher, "server-2", step.clone()).await,
        ),
        (
            "it sets the desired-role label",
            403,
            patch_meta(&patcher, "server-2", json!({ "labels": { names.desired_role(): "server" } }))
                .await,
        ),
        (
            "it asks k3s to remove the member",
            403,
            patch_meta(&patcher, "server-2", json!({ "annotations": { "etcd.k3s.cattle.io/remove": "true" } }))
                .await,
        ),
        (
            "it takes the regrade Lease",
            403,
            code(leases.patch(&names.lease_name, &PatchParams::default(), &lease_patch).await),
        ),
        (
            "it marks planned maintenance (it only lengthens a grace)",
            200,
            patch_meta(&patcher, "server-2", json!({ "annotations": { names.maintenance(): "2026-12-05T00:00:00Z" } }))
                .await,
        ),
        (
            "it writes an annotation of its own",
            200,
            patch_meta(&patcher, "server-2", json!({ "annotations": { "example.com/x": "1" } })).await,
        ),
        (
            "node-problem-detector's role writes Ready (the core judges it, see evidence.rs)",
            200,
            code(
                Api::<k8s_openapi::api::core::v1::Node>::all(npd.clone())
                    .patch_status(
                        "server-2",
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Forged", "lastTransitionTime": "2020-01-01T00:00:00Z", "lastHeartbeatTime": "2020-01-01T00:00:00Z"}]}})),
                    )
                    .await,
            ),
        ),
        (
            "a ConfigMap writer of the hosts' namespace plants a host's report",
            403,
            code(
                reports(&writer)
                    .patch("server-2", &PatchParams::default(), &Patch::Merge(planted.clone()))
                    .await,
            ),
        ),
        (
            "it makes a report for a Node never enrolled",
            403,
            code(
                reports(&writer)
                    .create(
                        &kube::api::PostParams::default(),
                        &serde_json::from_value(json!({"metadata": {"name": "server-9"}})).unwrap(),
                    )
                    .await,
            ),
        ),
        (
            "an administrator writes a host's report (enroll, recovery)",
            200,
            code(
                reports(&admin)
                    .patch("server-2", &PatchParams::default(), &Patch::Merge(json!({"data": {}})))
                    .await,
            ),
        ),
        (
            "a kubelet plants a step on its own Node",
            403,
            patch_meta(
                &plane.kubelet_client("server-2").unwrap(),
                "server-2",
                step.clone(),
            )
            .await,
        ),
        (
            "a kubelet annotates its own Node otherwise",
            200,
            patch_meta(
                &plane.kubelet_client("server-2").unwrap(),
                "server-2",
                json!({ "annotations": { "example.com/kubelet": "1" } }),
            )
            .await,
        ),
        (
            "node-problem-detector's role plants a step",
            403,
            patch_meta(&npd, "server-2", step.clone()).await,
        ),
        (
            "the controller writes its marks",
            200,
            patch_meta(&controller, "server-2", step.clone()).await,
        ),
        (
            "the controller asks k3s to remove the member",
            200,
            patch_meta(&controller, "server-2", json!({ "annotations": { "etcd.k3s.cattle.io/remove": "true" } }))
                .await,
        ),
        (
            "k3s (or anyone) drops the removal ask",
            200,
            patch_meta(&patcher, "server-2", json!({ "annotations": { "etcd.k3s.cattle.io/remove": null } }))
                .await,
        ),
        (
            "an administrator clears the marks by hand",
            200,
            patch_meta(&admin, "server-2", json!({ "annotations": { names.role_step(): null, names.role_swap(): null } }))
                .await,
        ),
        (
            "the controller renews the regrade Lease",
            200,
            code(
                Api::<Lease>::namespaced(controller.clone(), "kube-system")
                    .patch(&names.lease_name, &PatchParams::default(), &lease_patch)
                    .await,
            ),
        ),
    ];
    assert_rows(&rows);
}
