//! The actuator against a real control plane (etcd and kube-apiserver, from
//! `testcp`): its credential's least privilege, the watcher end to end with the
//! controller played by hand, the cluster side's failures, and the token kept
//! out of everything it prints.
//!
//! Each test starts its own plane (about 5 s). Sharing one would save little
//! and cost independence: these tests stop API servers, revoke
//! ServiceAccounts, and watch one report ConfigMap whose keys must not be
//! touched by anyone else. Independent planes also run in parallel.
//!
//! The actuator runs as the built binary (`fleet-role-actuator watch`) on a
//! `TestHost`, logging at debug level to a file that the tests read.

mod support;

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use http::{Method, Request};
use k8s_openapi::api::core::v1::{ConfigMap, Node, ServiceAccount};
use kube::{Api, Client, client::Body};
use protocol::{Phase, Report, report::Detail};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use standins::fixture::TestHost;
use support::{
    Access, Actuator, Controller, DEADLINE, DECIDED, Frozen, HOST_REPORT, Relay, Reports,
    apply_rbac, assert_no_secret, at, bin_dir, plane, port_of, rotate_token, wait_decisions,
    write_token,
};
use testcp::ControlPlane;

// === The credential ===

/// One request of the matrix.
struct Row {
    what: &'static str,
    method: Method,
    path: String,
    body: Option<(&'static str, Value)>,
    allowed: bool,
}

fn row(what: &'static str, method: Method, path: &str, allowed: bool) -> Row {
    Row {
        what,
        method,
        path: path.to_owned(),
        body: None,
        allowed,
    }
}

impl Row {
    fn with(mut self, content_type: &'static str, body: Value) -> Row {
        self.body = Some((content_type, body));
        self
    }

    /// The status code the API answers.
    async fn send(&self, client: &Client) -> u16 {
        let mut request = Request::builder()
            .method(self.method.clone())
            .uri(&self.path);
        let mut body = Vec::new();
        if let Some((content_type, value)) = &self.body {
            request = request.header(http::header::CONTENT_TYPE, *content_type);
            body = serde_json::to_vec(value).unwrap();
        }
        let response = client
            .send(request.body(Body::from(body)).unwrap())
            .await
            .unwrap_or_else(|e| panic!("{} {}: {e}", self.method, self.path));
        response.status().as_u16()
    }
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";
const NODES: &str = "/api/v1/nodes";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
/// The hosts' ConfigMaps (each host's report) and Leases (its heartbeat).
const REPORTS: &str = "/api/v1/namespaces/fleet-role-hosts/configmaps";
const HEARTBEATS: &str = "/apis/coordination.k8s.io/v1/namespaces/fleet-role-hosts/leases";
/// The shared report of earlier releases.
const LEGACY: &str = "/api/v1/namespaces/platform/configmaps/fleet-role-actuators";

/// A host's report ConfigMap named `name` holding `data` (and `extra`
/// merged into it, for what the policy must refuse).
fn report_object(name: &str, data: Value, extra: Value) -> Value {
    let mut o = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "fleet-role-hosts"},
        "data": data,
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        if k == "metadata" {
            for (mk, mv) in v.as_object().cloned().unwrap_or_default() {
                o["metadata"][mk] = mv;
            }
        } else {
            o[k] = v;
        }
    }
    o
}

/// Every request of the matrix; a table, so kept one request a line.
#[rustfmt::skip]
fn the_matrix() -> Vec<Row> {
    let label = json!({"metadata": {"labels": {"example.com/x": "y"}}});
    let p = support::P;
    // A compromised host's two ways to a step on another host: marks on
    // its Node, or the Lease naming itself for the swap's step.
    let marks = json!({"metadata": {
        "labels": {format!("{p}/desired-role"): "agent"},
        "annotations": {format!("{p}/role-swap"): "s1", format!("{p}/role-step"): "rollback"},
    }});
    let name_itself = json!({"metadata": {"annotations": {
        format!("{p}/swap-in"): "node-a", format!("{p}/swap-asked"): "promote",
    }}});
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-z"}});
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "fleet-regrade", "namespace": "kube-system"},
        "spec": {"holderIdentity": "fleet-role-actuator"},
    });
    let heartbeat = |name: &str| json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "fleet-role-hosts"},
        "spec": {"holderIdentity": name},
    });
    let configmap = |ns: &str, name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}})
    };
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mine"}});
    let own = format!("{REPORTS}/node-a");
    let own_beat = format!("{HEARTBEATS}/node-a");
    vec![
        // What the actuator needs.
        row("get a Node", Method::GET, &format!("{NODES}/node-a"), true),
        row("list Nodes", Method::GET, NODES, true),
        row("list server Nodes from the cache, as the heartbeat does", Method::GET,
            &format!("{NODES}?labelSelector=node-role.kubernetes.io%2Fcontrol-plane%3Dtrue&resourceVersion=0"), true),
        row("watch Nodes", Method::GET, &format!("{NODES}?watch=true&timeoutSeconds=1"), true),
        row("watch its own Node by name, as the watcher does", Method::GET,
            &format!("{NODES}?fieldSelector=metadata.name%3Dnode-a&watch=true&timeoutSeconds=1"), true),
        row("get the regrade Lease", Method::GET, &format!("{LEASES}/fleet-regrade"), true),
        row("list the regrade Lease by name, as the watcher does", Method::GET,
            &format!("{LEASES}?fieldSelector=metadata.name%3Dfleet-regrade"), true),
        row("watch the regrade Lease by name, as the watcher does", Method::GET,
            &format!("{LEASES}?fieldSelector=metadata.name%3Dfleet-regrade&watch=true&timeoutSeconds=1"), true),
        row("get its own report", Method::GET, &own, true),
        row("update its own report", Method::PUT, &own, true)
            .with(JSON, report_object("node-a", json!({"report": "{\"a\":2}"}), json!({}))),
        row("get its own heartbeat", Method::GET, &own_beat, true),
        // Nodes: read only.
        row("merge-patch a Node", Method::PATCH, &format!("{NODES}/node-a"), false)
            .with(MERGE, label.clone()),
        row("server-side apply a Node", Method::PATCH, &format!("{NODES}/node-a?fieldManager=x"), false)
            .with(APPLY, json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "labels": {"example.com/x": "y"}}})),
        row("patch a Node's status", Method::PATCH, &format!("{NODES}/node-a/status"), false)
            .with(MERGE, json!({"status": {"conditions": [{"type": "EtcdIsVoter", "status": "True"}]}})),
        row("write a step's marks on another Node (as a patch-nodes user could)", Method::PATCH,
            &format!("{NODES}/node-b"), false).with(MERGE, marks),
        row("update a Node", Method::PUT, &format!("{NODES}/node-z"), false).with(JSON, node.clone()),
        row("delete a Node", Method::DELETE, &format!("{NODES}/node-b"), false),
        row("create a Node", Method::POST, NODES, false).with(JSON, node),
        // Secrets: nothing.
        row("get a Secret", Method::GET, "/api/v1/namespaces/platform/secrets/a-secret", false),
        row("list Secrets in its namespace", Method::GET, "/api/v1/namespaces/fleet-role-hosts/secrets", false),
        row("list Secrets everywhere", Method::GET, "/api/v1/secrets", false),
        row("watch Secrets", Method::GET, "/api/v1/secrets?watch=true&timeoutSeconds=1", false),
        row("get a Secret in kube-system", Method::GET, "/api/v1/namespaces/kube-system/secrets/a-secret", false),
        row("create a Secret", Method::POST, "/api/v1/namespaces/fleet-role-hosts/secrets", false)
            .with(JSON, secret),
        // The regrade Lease: get, list and watch by name, nothing else.
        row("update the regrade Lease", Method::PUT, &format!("{LEASES}/fleet-regrade"), false)
            .with(JSON, lease.clone()),
        row("merge-patch the regrade Lease", Method::PATCH, &format!("{LEASES}/fleet-regrade"), false)
            .with(MERGE, json!({"spec": {"holderIdentity": "fleet-role-actuator"}})),
        row("server-side apply the regrade Lease", Method::PATCH,
            &format!("{LEASES}/fleet-regrade?fieldManager=fleet-role-actuator-node-a"), false)
            .with(APPLY, lease.clone()),
        row("name itself the swap's incoming host on the regrade Lease", Method::PATCH,
            &format!("{LEASES}/fleet-regrade"), false).with(MERGE, name_itself),
        row("delete the regrade Lease", Method::DELETE, &format!("{LEASES}/fleet-regrade"), false),
        row("create a Lease", Method::POST, LEASES, false).with(JSON, lease),
        row("get another Lease", Method::GET, &format!("{LEASES}/other-lease"), false),
        row("list Leases in kube-system", Method::GET, LEASES, false),
        row("watch Leases in kube-system", Method::GET,
            &format!("{LEASES}?watch=true&timeoutSeconds=1"), false),
        row("watch another Lease by name", Method::GET,
            &format!("{LEASES}?fieldSelector=metadata.name%3Dother-lease&watch=true&timeoutSeconds=1"), false),
        row("list Leases everywhere", Method::GET, "/apis/coordination.k8s.io/v1/leases", false),
        row("watch the regrade Lease's name in every namespace", Method::GET,
            "/apis/coordination.k8s.io/v1/leases?fieldSelector=metadata.name%3Dfleet-regrade&watch=true&timeoutSeconds=1", false),
        // Its own objects: get and update, nothing else.
        row("merge-patch its own report", Method::PATCH, &own, false)
            .with(MERGE, json!({"data": {"report": "{}"}})),
        row("server-side apply its own report", Method::PATCH, &format!("{own}?fieldManager=x"), false)
            .with(APPLY, report_object("node-a", json!({"report": "{}"}), json!({}))),
        row("delete its own report", Method::DELETE, &own, false),
        row("merge-patch its own heartbeat", Method::PATCH, &own_beat, false)
            .with(MERGE, json!({"spec": {"holderIdentity": "node-a"}})),
        row("delete its own heartbeat", Method::DELETE, &own_beat, false),
        row("list the hosts' reports", Method::GET, REPORTS, false),
        row("watch the hosts' reports", Method::GET, &format!("{REPORTS}?watch=true&timeoutSeconds=1"), false),
        row("list the hosts' reports from the cache", Method::GET, &format!("{REPORTS}?resourceVersion=0"), false),
        row("watch its own report by name", Method::GET,
            &format!("{REPORTS}?fieldSelector=metadata.name%3Dnode-a&watch=true&timeoutSeconds=1"), false),
        row("list the hosts' heartbeats", Method::GET, HEARTBEATS, false),
        row("watch the hosts' heartbeats", Method::GET, &format!("{HEARTBEATS}?watch=true&timeoutSeconds=1"), false),
        row("create a report for another Node", Method::POST, REPORTS, false)
            .with(JSON, report_object("node-c", json!({}), json!({}))),
        row("create a heartbeat for another Node", Method::POST, HEARTBEATS, false)
            .with(JSON, heartbeat("node-c")),
        // Other ConfigMaps: nothing.
        row("get another ConfigMap", Method::GET, "/api/v1/namespaces/platform/configmaps/other-config", false),
        row("merge-patch another ConfigMap", Method::PATCH, "/api/v1/namespaces/platform/configmaps/other-config", false)
            .with(MERGE, json!({"data": {"x": "y"}})),
        row("list ConfigMaps in platform", Method::GET, "/api/v1/namespaces/platform/configmaps", false),
        row("create a ConfigMap in platform", Method::POST, "/api/v1/namespaces/platform/configmaps", false)
            .with(JSON, configmap("platform", "new-config")),
        row("get the shared report of earlier releases", Method::GET, LEGACY, false),
        row("server-side apply its key of the shared report", Method::PATCH,
            &format!("{LEGACY}?fieldManager=fleet-role-actuator-node-a"), false)
            .with(APPLY, json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "fleet-role-actuators", "namespace": "platform"}, "data": {"node-a": "{}"}})),
        // Other namespaces: nothing, not even objects named like its own.
        row("get its report's namesake in team-b", Method::GET,
            "/api/v1/namespaces/team-b/configmaps/node-a", false),
        row("update its report's namesake in team-b", Method::PUT,
            "/api/v1/namespaces/team-b/configmaps/node-a", false)
            .with(JSON, configmap("team-b", "node-a")),
        row("get its heartbeat's namesake in team-b", Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/team-b/leases/node-a", false),
        row("get the Lease's namesake in platform", Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/platform/leases/fleet-regrade", false),
        row("list Pods in team-b", Method::GET, "/api/v1/namespaces/team-b/pods", false),
        row("create a ConfigMap in team-b", Method::POST, "/api/v1/namespaces/team-b/configmaps", false)
            .with(JSON, configmap("team-b", "new-config")),
        row("delete namespace team-b", Method::DELETE, "/api/v1/namespaces/team-b", false),
        row("request a token for its own ServiceAccount", Method::POST,
            "/api/v1/namespaces/fleet-role-hosts/serviceaccounts/fleet-role-actuator-node-a/token", false)
            .with(JSON, json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})),
    ]
}

/// What one host may do to another's objects, and what the hosts' policy
/// keeps out of its own: node-a's credential; node-b's report holds
/// `{"b":1}` before.
#[rustfmt::skip]
fn the_other_hosts_matrix() -> Vec<Row> {
    let b = format!("{REPORTS}/node-b");
    let b_beat = format!("{HEARTBEATS}/node-b");
    let own = format!("{REPORTS}/node-a");
    let mine = |extra: Value| report_object("node-a", json!({"report": "{}"}), extra);
    let big = "x".repeat(protocol::report::MAX_REPORT_BYTES + 1);
    vec![
        // Host B's objects: not even a read.
        row("get host B's report", Method::GET, &b, false),
        row("update host B's report", Method::PUT, &b, false)
            .with(JSON, report_object("node-b", json!({"report": "{\"step\":\"finish\",\"phase\":\"started\"}"}), json!({}))),
        row("delete host B's report", Method::DELETE, &b, false),
        row("watch host B's report by name", Method::GET,
            &format!("{REPORTS}?fieldSelector=metadata.name%3Dnode-b&watch=true&timeoutSeconds=1"), false),
        row("get host B's heartbeat", Method::GET, &b_beat, false),
        row("update host B's heartbeat", Method::PUT, &b_beat, false)
            .with(JSON, json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "node-b", "namespace": "fleet-role-hosts"}, "spec": {"holderIdentity": "node-b"}})),
        row("delete host B's heartbeat", Method::DELETE, &b_beat, false),
        // Its own report, beyond what a report is.
        row("put a second key in its report", Method::PUT, &own, false)
            .with(JSON, report_object("node-a", json!({"report": "{}", "node-b": "{}"}), json!({}))),
        row("put a report over the cap", Method::PUT, &own, false)
            .with(JSON, report_object("node-a", json!({"report": big}), json!({}))),
        row("label its report", Method::PUT, &own, false)
            .with(JSON, mine(json!({"metadata": {"labels": {"x": "y"}}}))),
        row("annotate its report", Method::PUT, &own, false)
            .with(JSON, mine(json!({"metadata": {"annotations": {"x": "y"}}}))),
        row("give its report an owner, for the garbage collector to delete it", Method::PUT, &own, false)
            .with(JSON, mine(json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                "name": "other-config", "uid": "00000000-0000-0000-0000-000000000000"}]}}))),
        row("add a finalizer to its report", Method::PUT, &own, false)
            .with(JSON, mine(json!({"metadata": {"finalizers": ["example.com/hold"]}}))),
        row("make its report immutable", Method::PUT, &own, false)
            .with(JSON, mine(json!({"immutable": true}))),
        row("add binary data to its report", Method::PUT, &own, false)
            .with(JSON, mine(json!({"binaryData": {"x": "AA=="}}))),
        // Identities and bindings.
        row("get host B's ServiceAccount", Method::GET,
            "/api/v1/namespaces/fleet-role-hosts/serviceaccounts/fleet-role-actuator-node-b", false),
        row("request a token for host B's ServiceAccount", Method::POST,
            "/api/v1/namespaces/fleet-role-hosts/serviceaccounts/fleet-role-actuator-node-b/token", false)
            .with(JSON, json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})),
        row("delete host B's ServiceAccount", Method::DELETE,
            "/api/v1/namespaces/fleet-role-hosts/serviceaccounts/fleet-role-actuator-node-b", false),
        row("delete host B's binding", Method::DELETE,
            "/apis/rbac.authorization.k8s.io/v1/namespaces/fleet-role-hosts/rolebindings/fleet-role-actuator-node-b", false),
        row("widen its own Role to host B's objects", Method::PATCH,
            "/apis/rbac.authorization.k8s.io/v1/namespaces/fleet-role-hosts/roles/fleet-role-actuator-node-a", false)
            .with(MERGE, json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]})),
        row("bind itself to the controller's ClusterRole", Method::POST,
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", false)
            .with(JSON, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "sneaky"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "fleet-role"},
                "subjects": [{"kind": "ServiceAccount", "name": "fleet-role-actuator-node-a", "namespace": "fleet-role-hosts"}]})),
    ]
}

/// Waits until a policy just applied is in force: the API server loads a
/// new policy a moment after it is created. `node`'s update of its own
/// report to `data` is sent as a dry run (admission runs, nothing is
/// stored, so it changes nothing either way) until it is refused.
async fn wait_until_refused(client: &Client, node: &str, data: Value, what: &str) {
    let probe = row(
        "probe",
        Method::PUT,
        &format!("{REPORTS}/{node}?dryRun=All"),
        false,
    )
    .with(JSON, report_object(node, data, json!({})));
    let started = clock::Clock::system().now();
    while probe.send(client).await != 403 {
        assert!(started.elapsed() < DEADLINE, "{what} never came into force");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Runs `rows` with `client`, prints them, and returns the rows that did not
/// get what they expect: 2xx when allowed, exactly 403 when denied.
async fn walk(client: &Client, rows: &[Row]) -> Vec<String> {
    let mut wrong = Vec::new();
    println!("{:<52} {:<8} {:<8} request", "what", "expected", "got");
    for r in rows {
        let code = r.send(client).await;
        let expected = if r.allowed { "allowed" } else { "403" };
        let ok = if r.allowed {
            (200..300).contains(&code)
        } else {
            code == 403
        };
        println!(
            "{:<52} {:<8} {:<8} {} {}{}",
            r.what,
            expected,
            code,
            r.method,
            r.path,
            if ok { "" } else { "   <-- WRONG" }
        );
        if !ok {
            wrong.push(format!(
                "{}: expected {expected}, got {code} ({} {})",
                r.what, r.method, r.path
            ));
        }
    }
    wrong
}

/// What the actuator must not touch, beside what it may.
const OTHER_OBJECTS: &str = r#"
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: other-lease, namespace: kube-system}
spec: {holderIdentity: someone}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other-config, namespace: platform}
data: {x: "1"}
---
apiVersion: v1
kind: Secret
metadata: {name: a-secret, namespace: platform}
stringData: {password: hunter2}
---
apiVersion: v1
kind: Secret
metadata: {name: a-secret, namespace: kube-system}
stringData: {password: hunter2}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: node-a, namespace: team-b}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: node-a, namespace: team-b}
spec: {holderIdentity: someone}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: fleet-regrade, namespace: platform}
spec: {holderIdentity: someone}
"#;

/// Updates node-a's own heartbeat Lease with `client` after `change`, from
/// the object as read (an update carries the resourceVersion read): the
/// status code.
async fn update_heartbeat(client: &Client, change: impl Fn(&mut Value)) -> u16 {
    let path = format!("{HEARTBEATS}/node-a");
    let text = client
        .request_text(Request::get(&path).body(Vec::new()).unwrap())
        .await
        .expect("reading its own heartbeat");
    let mut lease: Value = serde_json::from_str(&text).unwrap();
    change(&mut lease);
    row("update its own heartbeat", Method::PUT, &path, true)
        .with(JSON, lease)
        .send(client)
        .await
}

#[tokio::test]
async fn the_credential_reads_nodes_and_the_lease_and_writes_its_own_heartbeat_and_report_and_nothing_more()
 {
    let plane = plane().await;
    let admin = Controller::new(&plane);
    for node in ["node-a", "node-b", "node-c"] {
        admin.create_node(node, json!({})).await;
    }
    admin.take_lease("s1").await;
    plane
        .apply_yaml(OTHER_OBJECTS)
        .await
        .expect("the other objects apply");
    let token = support::enroll(&plane, "node-a").await;
    support::enroll(&plane, "node-b").await;
    let actuator = plane.client_for_token(&token).unwrap();
    admin.put_report("node-b", Some("{\"b\":1}")).await;
    // A second key in its own report: refused once the hosts' policy is in.
    let second_key = json!({"report": "{}", "probe": "x"});
    wait_until_refused(
        &actuator,
        "node-a",
        second_key,
        "the hosts' admission policy",
    )
    .await;

    let matrix = the_matrix();
    let mut wrong = walk(&actuator, &matrix).await;
    println!("-- host A's credential, host B's objects, and what its own may hold --");
    let others = the_other_hosts_matrix();
    wrong.extend(walk(&actuator, &others).await);
    // Its heartbeat: renewed as the actuator does; held by another name,
    // annotated otherwise, or given a strategy, refused by the policy.
    let p = support::P;
    type Change = Box<dyn Fn(&mut Value)>;
    let heartbeats: [(&str, u16, Change); 5] = [
        (
            "renew its own heartbeat with a refusal on it",
            200,
            Box::new(move |l: &mut Value| {
                l["spec"] = json!({"holderIdentity": "node-a", "renewTime": "2026-12-04T10:00:00.000000Z", "leaseDurationSeconds": 120});
                l["metadata"]["annotations"] =
                    json!({format!("{p}/report-refused"): "403 Forbidden: x"});
            }),
        ),
        (
            "hold its heartbeat as host B",
            403,
            Box::new(|l: &mut Value| {
                l["spec"] = json!({"holderIdentity": "node-b"});
            }),
        ),
        (
            "annotate its heartbeat otherwise",
            403,
            Box::new(|l: &mut Value| {
                l["metadata"]["annotations"] = json!({"x": "y"});
            }),
        ),
        (
            "label its heartbeat",
            403,
            Box::new(|l: &mut Value| {
                l["metadata"]["labels"] = json!({"x": "y"});
            }),
        ),
        (
            "carry a refusal longer than the cap",
            403,
            Box::new(move |l: &mut Value| {
                l["metadata"]["annotations"] =
                    json!({format!("{p}/report-refused"): "x".repeat(513)});
            }),
        ),
    ];
    for (what, want, change) in &heartbeats {
        let got = update_heartbeat(&actuator, change).await;
        println!("{what:<52} {want:<8} {got:<8} PUT {HEARTBEATS}/node-a");
        if got != *want {
            wrong.push(format!("{what}: expected {want}, got {got}"));
        }
    }
    let all: Vec<&Row> = matrix.iter().chain(&others).collect();
    let allowed = all.iter().filter(|r| r.allowed).count();
    let denied = all.len() - allowed;
    println!(
        "the matrix: {} requests, {allowed} allowed and {denied} denied as expected, and {} heartbeat updates, {} wrong",
        all.len(),
        heartbeats.len(),
        wrong.len()
    );
    // The counts pin the table itself: a row dropped or flipped fails here.
    assert_eq!((allowed, denied), (11, 73), "the matrix's rows changed");

    // Host B's report is as it was, and its own holds what it wrote.
    assert_eq!(
        admin
            .report_configmap("node-b")
            .await
            .and_then(|c| c.data)
            .and_then(|d| d.get("report").cloned())
            .as_deref(),
        Some("{\"b\":1}"),
        "host B's report was changed by host A"
    );
    let mine = admin.report_configmap("node-a").await.expect("its report");
    assert_eq!(
        mine.data
            .clone()
            .unwrap_or_default()
            .get("report")
            .map(String::as_str),
        Some("{\"a\":2}")
    );
    assert!(mine.metadata.labels.is_none() && mine.metadata.owner_references.is_none());
    assert!(mine.metadata.finalizers.is_none() && mine.immutable.is_none());
    let beat = admin.heartbeat("node-a").await.expect("its heartbeat");
    assert_eq!(
        beat.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("node-a")
    );
    let nodes: Api<Node> = Api::all(admin.client.clone());
    assert!(
        nodes.get_opt("node-b").await.unwrap().is_some(),
        "a Node was deleted"
    );
    assert!(
        nodes.get_opt("node-z").await.unwrap().is_none(),
        "a Node was created"
    );

    // enroll makes the host's objects; the actuator cannot, once they are
    // gone.
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.client.clone(), support::HOSTS);
    configmaps
        .delete("node-a", &Default::default())
        .await
        .unwrap();
    println!("-- its report ConfigMap deleted by the admin --");
    let missing = [
        row("create its report ConfigMap", Method::POST, REPORTS, false).with(
            JSON,
            report_object("node-a", json!({"report": "{}"}), json!({})),
        ),
        row(
            "server-side apply its missing report (a create)",
            Method::PATCH,
            &format!("{REPORTS}/node-a?fieldManager=x"),
            false,
        )
        .with(
            APPLY,
            report_object("node-a", json!({"report": "{}"}), json!({})),
        ),
    ];
    wrong.extend(walk(&actuator, &missing).await);
    assert!(
        configmaps.get_opt("node-a").await.unwrap().is_none(),
        "the actuator created its report ConfigMap"
    );
    assert!(
        wrong.is_empty(),
        "the credential is wrong:\n{}",
        wrong.join("\n")
    );
}

// === The watcher, end to end ===

/// The phases of a promotion that went as it should, each written once.
const PROMOTION: [(Phase, Option<Detail>); 4] = [
    (Phase::Started, None),
    (Phase::Progress, Some(Detail::Learner)),
    (Phase::Progress, Some(Detail::Voter)),
    (Phase::Done, Some(Detail::Voter)),
];

/// One standby host (an agent, Node `standby`) and the voter it may join,
/// with the controller and the report's record on API server `via`, and the
/// actuator's token in `<work>/token`.
struct Standby {
    admin: Controller,
    reports: Reports,
    access: Access,
    token: SecretString,
    host: TestHost,
    work: tempfile::TempDir,
}

impl Standby {
    async fn on(plane: &ControlPlane, via: usize) -> Standby {
        let work = tempfile::tempdir().unwrap();
        let admin = Controller::via(plane, via);
        let reports = Reports::record(admin.client.clone());
        let token = support::enroll(plane, "standby").await;
        let token_file = work.path().join("token");
        write_token(&token_file, &token);
        let access = Access {
            api: plane.urls(),
            ca_file: plane.ca_file(),
            token_file,
        };
        let host = TestHost::new("standby", bin_dir()).as_agent();
        admin.create_standby_and_voter("standby").await;
        // An address of this host (every test host is this machine), so the
        // watcher's check of the Node's InternalIP lets it act.
        admin.set_address("standby", "127.0.0.1").await;
        Standby {
            admin,
            reports,
            access,
            token,
            host,
            work,
        }
    }

    /// Starts a watcher on the host.
    fn watch(&self, tag: &str) -> Actuator {
        Actuator::watch(&self.host, self.work.path(), tag, &self.access)
    }

    /// A refused step changed nothing on the host: no unit was touched, and
    /// only the report changed (the host's copy as the API's).
    async fn assert_unchanged_but_the_report(&self, before: &BTreeMap<PathBuf, (u32, Vec<u8>)>) {
        assert!(
            self.host.systemd_log().is_empty(),
            "{:?}",
            self.host.systemd_log()
        );
        let mut after = self.host.tree();
        after.remove(std::path::Path::new(HOST_REPORT));
        assert_eq!(&after, before, "a refused step changed the host");
        assert_eq!(Some(self.kept_report()), self.admin.report("standby").await);
    }

    /// The controller takes the Lease for swap s1 and asks for a promotion
    /// joining voter-a; returns the report once it says `learner`.
    async fn promote_to_learner(&self, watcher: &Actuator) -> Report {
        self.admin.take_lease("s1").await;
        self.admin
            .ask("standby", "s1", "promote", "server", Some("voter-a"))
            .await;
        self.wait(
            watcher,
            "learner",
            at(Phase::Progress, Some(Detail::Learner)),
        )
        .await
    }

    /// k3s promotes the caught-up learner and says so on the Node; returns
    /// the report once the promotion is done.
    async fn become_voter(&self, watcher: &Actuator) -> Report {
        self.admin.set_voter("standby").await;
        self.wait(watcher, "done", at(Phase::Done, Some(Detail::Voter)))
            .await
    }

    async fn wait(&self, watcher: &Actuator, what: &str, done: impl Fn(&Report) -> bool) -> Report {
        self.admin.wait_report("standby", what, watcher, done).await
    }

    /// How many times the server unit was started (`enable --now --no-block k3s`).
    fn server_starts(&self) -> usize {
        let log = self.host.systemd_log();
        log.iter()
            .filter(|l| *l == "enable --now --no-block k3s")
            .count()
    }

    /// What a promotion done once, and only once, leaves behind.
    async fn assert_promoted_once(&self, learner: &Report, done: &Report) {
        assert_eq!(
            done.started_at, learner.started_at,
            "the step started again"
        );
        assert_eq!(
            self.reports.phases_until("standby", &PROMOTION).await,
            PROMOTION
        );
        assert_eq!(self.server_starts(), 1, "{:?}", self.host.systemd_log());
        assert_eq!(self.host.role().as_deref(), Some("server"));
        assert!(self.host.active("k3s") && self.host.enabled("k3s"));
        assert!(!self.host.active("k3s-agent") && !self.host.enabled("k3s-agent"));
        assert_eq!(self.host.max_active_k3s(), 1, "both k3s units ran at once");
    }
}

#[tokio::test]
async fn a_promotion_reports_started_then_learner_and_finishes_as_a_voter_once_k3s_says_so() {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    let watcher = s.watch("standby");

    let learner = s.promote_to_learner(&watcher).await;
    assert_eq!(learner.swap.as_ref().map(|s| s.as_str()), Some("s1"));
    assert_eq!(s.host.role().as_deref(), Some("server"));
    assert!(s.host.active("k3s") && !s.host.active("k3s-agent"));
    let join = s
        .host
        .at("etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml");
    let join = std::fs::read_to_string(join).unwrap();
    assert!(
        join.contains("https://127.0.0.1:6443"),
        "joins voter-a's etcd address: {join}"
    );

    let done = s.become_voter(&watcher).await;
    s.assert_promoted_once(&learner, &done).await;
    let token = [s.token.expose_secret()];
    assert_no_secret("the actuator's log", &watcher.log(), &token);
    let report = serde_json::to_string(&s.admin.report_configmap("standby").await).unwrap();
    assert_no_secret("the report", &report, &token);
}

#[tokio::test]
async fn an_idle_actuator_reads_the_lease_only_through_its_watch_by_name() {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    // A swap of other hosts holds the Lease; nothing is asked of this one.
    s.admin.take_lease("s9").await;
    let watcher = s.watch("standby");
    // Four decisions: the first once both watches have listed, then resyncs.
    wait_decisions(&watcher, 0, 4).await;
    assert_eq!(
        watcher.count_requests("leases/fleet-regrade otel.name=\"get\""),
        0,
        "an idle actuator read the Lease by name:\n{}",
        watcher.log_tail(15)
    );
    assert!(
        watcher.count_requests(
            "/namespaces/kube-system/leases?&fieldSelector=metadata.name%3Dfleet-regrade"
        ) >= 1,
        "it never listed the Lease by name:\n{}",
        watcher.log_tail(15)
    );
    assert!(s.reports.phases("standby").is_empty());
}

/// The log line `watch` prints once its metrics are served.
const SERVING: &str = "serving /metrics and /healthz on ";

/// Where `watcher` says it serves its metrics.
fn served_at(watcher: &Actuator) -> std::net::SocketAddr {
    watcher
        .log()
        .lines()
        .find_map(|l| l.split_once(SERVING).map(|(_, a)| a.trim().to_string()))
        .unwrap_or_else(|| panic!("it does not say where it serves:\n{}", watcher.log_tail(15)))
        .parse()
        .unwrap()
}

/// `GET path` from the endpoints at `addr`: the whole answer, head and body.
async fn get_from(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(30), c.read_to_string(&mut out))
        .await
        .expect("an answer within 30 s")
        .unwrap();
    out
}

#[tokio::test]
async fn watch_serves_its_metrics_only_when_an_address_is_set() {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    s.admin.take_lease("s9").await;
    let mut off = s.watch("off");
    wait_decisions(&off, 0, 1).await;
    assert_eq!(off.count(SERVING), 0, "{}", off.log_tail(15));
    off.kill();

    let on = Actuator::watch_configured(
        &s.host,
        s.work.path(),
        "on",
        &s.access,
        "debug",
        "metrics_address = \"127.0.0.1:0\"\n",
    );
    wait_decisions(&on, 0, 1).await;
    let addr = served_at(&on);
    let get = |path: &'static str| get_from(addr, path);
    let metrics = get("/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200 OK\r\n"), "{metrics}");
    // No step yet: the watches' restarts, at 0, are the series there are.
    for series in [
        "fleet_role_actuator_watch_restarts_total{watch=\"node\"} 0",
        "fleet_role_actuator_watch_restarts_total{watch=\"lease\"} 0",
    ] {
        assert!(metrics.contains(series), "no {series} in\n{metrics}");
    }
    let (_, body) = metrics.split_once("\r\n\r\n").expect("a head and a body");
    testcp::promtool::check_metrics(body).await;
    assert!(get("/healthz").await.starts_with("HTTP/1.1 200 OK\r\n"));
}

#[tokio::test]
async fn a_report_the_api_refuses_is_logged_with_its_reason_counted_and_carried_on_a_heartbeat_until_the_runbook_puts_the_policy_back()
 {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    s.admin.take_lease("s9").await;
    // The hosts' policy with a cap smaller than any report: every report
    // of this host is over it (a write over the cap, as a host whose
    // verdicts outgrew 16 KiB would make).
    let rbac =
        std::fs::read_to_string(support::workspace().join("deploy/rbac/actuator.yaml")).unwrap();
    let cap = protocol::report::MAX_REPORT_BYTES.to_string();
    assert!(rbac.contains(&format!("<= {cap}")));
    plane
        .apply_yaml(&rbac.replace(&format!("<= {cap}"), "<= 16"))
        .await
        .expect("the tightened policy applies");
    // In force before the actuator's first report: a dry run of the host's
    // own update is refused.
    let own = plane.client_for_token(&s.token).unwrap();
    let over = json!({"report": "x".repeat(17)});
    wait_until_refused(&own, "standby", over, "the tightened policy").await;

    let w = Actuator::watch_configured(
        &s.host,
        s.work.path(),
        "refused",
        &s.access,
        "debug",
        "metrics_address = \"127.0.0.1:0\"\nheartbeat_secs = 2\n",
    );
    // Its heartbeat goes on, carrying the API's own reason.
    let key = format!("{}/report-refused", support::P);
    let started = clock::Clock::system().now();
    let refusal = loop {
        let beat = s.admin.heartbeat("standby").await.unwrap();
        if let Some(r) = beat.metadata.annotations.and_then(|a| a.get(&key).cloned()) {
            assert_eq!(
                beat.spec.and_then(|s| s.holder_identity).as_deref(),
                Some("standby")
            );
            break r;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "no refusal on the heartbeat:\n{}",
            w.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        refusal.starts_with("403 Forbidden: ") && refusal.contains("at most 16384 bytes"),
        "{refusal}"
    );
    // The journal says it once, with the code and the API's message.
    let log = w.log();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("the API refused this host's report: 403 Forbidden: "))
        .collect();
    assert_eq!(said.len(), 1, "{}", w.log_tail(30));
    assert!(
        said[0].contains("ConfigMap fleet-role-hosts/standby"),
        "{}",
        said[0]
    );
    assert!(
        !log.contains("moving to the next candidate"),
        "a refusal taken for a failed API server:\n{}",
        w.log_tail(30)
    );
    // Counted by reason.
    let metrics = get_from(served_at(&w), "/metrics").await;
    assert!(
        metrics.contains(
            "fleet_role_actuator_writes_refused_total{object=\"report\",reason=\"Forbidden\"}"
        ),
        "{metrics}"
    );
    // The API holds no report of it, and the controller's view names why.
    assert_eq!(s.admin.report("standby").await, None);
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(s.admin.client.clone(), support::HOSTS);
    let beats = leases.list(&Default::default()).await.unwrap();
    let hb = kubeview::hostobjects::heartbeat(
        &protocol::Names::default(),
        "standby",
        beats
            .items
            .iter()
            .find(|l| l.metadata.name.as_deref() == Some("standby"))
            .unwrap(),
    );
    assert_eq!(hb.report_refused.as_deref(), Some(refusal.as_str()));
    assert!(hb.renewed_at.is_some());
    // `fleet-role status` names the host and the API's reason, degraded
    // (exit 5), not a dead actuator.
    let kubeconfig = s.work.path().join("admin.kubeconfig");
    plane
        .write_kubeconfig(&kubeconfig, plane.admin_token())
        .unwrap();
    let fleet_role = bin_dir().join("fleet-role");
    assert!(
        fleet_role.is_file(),
        "{} is missing: build the workspace's binaries",
        fleet_role.display()
    );
    let status = std::process::Command::new(&fleet_role)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("status")
        .env_remove("KUBECONFIG")
        .env_remove("FLEET_ROLE_CONFIG")
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&status.stdout);
    assert_eq!(status.status.code(), Some(5), "{shown}");
    assert!(
        shown.contains(&format!(
            "DEGRADED: standby's report was refused by the API: {}",
            refusal.chars().take(60).collect::<String>()
        )),
        "{shown}"
    );

    // The runbook's lines, as docs/recovery.md gives them, run by an
    // administrator: the Lease shows the API's answer, and the release's own
    // policies go back. The report is taken at a later beat, and the
    // refusal leaves the heartbeat.
    let kubectl = testcp::runbook::kubectl();
    let shell = testcp::runbook::Shell {
        home: s.work.path(),
        programs: &[("fleet-role", &fleet_role), ("kubectl", &kubectl)],
        env: &[("KUBECONFIG", &kubeconfig)],
        secret: plane.admin_token().expose_secret(),
    };
    let ran = testcp::runbook::run(&shell, "report-refused", &[("NODE", "standby")]).await;
    let lease_yaml = String::from_utf8_lossy(&ran[0].1.stdout);
    assert!(
        lease_yaml.contains(&format!("{key}: '403 Forbidden: ")),
        "`{}` does not show the refusal:\n{lease_yaml}",
        ran[0].0
    );
    let started = clock::Clock::system().now();
    while s.admin.report("standby").await.is_none()
        || s.admin
            .heartbeat("standby")
            .await
            .and_then(|b| b.metadata.annotations)
            .is_some_and(|a| a.contains_key(&key))
    {
        assert!(
            started.elapsed() < DEADLINE,
            "the report was never taken:\n{}",
            w.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(w.count("the API accepted this host's report again"), 1);
}

#[tokio::test]
async fn a_step_refused_for_a_lease_held_for_another_swap_is_not_retried_once_the_lease_is_right() {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    let before = s.host.tree();
    let watcher = s.watch("standby");

    s.admin.take_lease("s0").await;
    s.admin
        .ask("standby", "s1", "promote", "server", Some("voter-a"))
        .await;
    let refused = s
        .wait(&watcher, "a refusal", at(Phase::Refused, None))
        .await;
    assert_eq!(
        refused.reason.as_deref(),
        Some("the regrade Lease is held for swap \"s0\", not s1")
    );

    // The controller now takes the Lease for s1. The refusal stands: what
    // follows is the controller's to decide, with a new swap or step.
    s.admin.take_lease("s1").await;
    wait_decisions(&watcher, watcher.count(DECIDED), 3).await;
    assert_eq!(s.admin.report("standby").await, Some(refused));
    assert_eq!(
        s.reports
            .phases_until("standby", &[(Phase::Refused, None)])
            .await,
        [(Phase::Refused, None)]
    );
    s.assert_unchanged_but_the_report(&before).await;
}

#[tokio::test]
async fn a_step_whose_desired_role_does_not_go_with_it_is_refused_and_changes_nothing() {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    let before = s.host.tree();
    let watcher = s.watch("standby");

    // A promotion needs desired-role server.
    s.admin.take_lease("s1").await;
    s.admin
        .ask("standby", "s1", "promote", "agent", Some("voter-a"))
        .await;
    let refused = s
        .wait(&watcher, "a refusal", at(Phase::Refused, None))
        .await;
    assert_eq!(
        refused.reason.as_deref(),
        Some("promote needs desired-role server, and the Node asks for agent")
    );
    // A step-down needs desired-role agent.
    s.admin.take_lease("s2").await;
    s.admin
        .ask("standby", "s2", "step-down", "server", None)
        .await;
    let refused = s
        .wait(&watcher, "a second refusal", |r| {
            r.phase == Phase::Refused && r.swap.as_ref().is_some_and(|s| s.as_str() == "s2")
        })
        .await;
    assert_eq!(
        refused.reason.as_deref(),
        Some("step-down needs desired-role agent, and the Node asks for server")
    );
    wait_decisions(&watcher, watcher.count(DECIDED), 2).await;
    let twice = [(Phase::Refused, None), (Phase::Refused, None)];
    assert_eq!(s.reports.phases_until("standby", &twice).await, twice);
    s.assert_unchanged_but_the_report(&before).await;
}

/// libfaketime, from Debian (scripts/prereqs.sh): preloaded, it moves the
/// process's wall clock (`clock_gettime(CLOCK_REALTIME)`, which Rust's
/// `SystemTime` reads) by a fixed offset; the monotonic clock, which the
/// runtime's timers read, is left alone.
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

#[tokio::test]
async fn a_host_whose_clock_is_off_the_api_servers_beyond_half_the_skew_margin_refuses_a_step_and_changes_nothing()
 {
    assert!(
        std::path::Path::new(FAKETIME).exists(),
        "{FAKETIME} is missing: scripts/prereqs.sh installs libfaketime"
    );
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    let before = s.host.tree();
    // Behind, the Lease it reads would look held after it lapsed; ahead,
    // lapsed while it holds. Both refused the same way.
    for (swap, offset, way) in [("s1", "-30", "behind"), ("s2", "+30", "ahead of")] {
        let watcher = Actuator::watch_with_env(
            &s.host,
            s.work.path(),
            &format!("clock{offset}"),
            &s.access,
            &[
                ("LD_PRELOAD", FAKETIME),
                ("FAKETIME", offset),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ],
        );
        s.admin.take_lease(swap).await;
        s.admin
            .ask("standby", swap, "promote", "server", Some("voter-a"))
            .await;
        let refused = s
            .wait(&watcher, "a refusal", |r| {
                r.phase == Phase::Refused && r.swap.as_ref().is_some_and(|x| x.as_str() == swap)
            })
            .await;
        let reason = refused.reason.unwrap_or_default();
        assert!(
            reason.starts_with("this host's clock is at least 2")
                && reason.contains(&format!("s {way} the API server's")),
            "{offset}: {reason}"
        );
        // The log says so once, and the heartbeat went on.
        assert!(
            watcher.log().contains("clock is at least"),
            "{}",
            watcher.log_tail(20)
        );
        drop(watcher);
    }
    s.assert_unchanged_but_the_report(&before).await;
}

#[tokio::test]
async fn a_step_asked_in_a_protocol_version_this_host_does_not_know_is_refused_and_changes_nothing()
{
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    let before = s.host.tree();
    let watcher = s.watch("standby");
    s.admin.mark_protocol("standby", "2").await;
    s.admin.take_lease("s1").await;
    s.admin
        .ask("standby", "s1", "promote", "server", Some("voter-a"))
        .await;
    let refused = s
        .wait(&watcher, "a refusal", at(Phase::Refused, None))
        .await;
    assert_eq!(
        refused.reason.as_deref(),
        Some(
            "the Node's marks: protocol version \"2\" is not one this build knows (1 to 1); upgrade this host's fleet-role-actuator before the controller (see docs/upgrade.md)"
        )
    );
    assert_eq!(refused.protocol, protocol::PROTOCOL_VERSION);
    s.assert_unchanged_but_the_report(&before).await;
}

#[tokio::test]
async fn two_hosts_report_at_once_each_into_its_own_objects_which_enroll_and_the_installer_keep() {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    let hosts = ["standby-1", "standby-2"].map(|n| TestHost::new(n, bin_dir()).as_agent());
    for h in &hosts {
        s.admin.create_node(&h.node, json!({})).await;
    }
    // Each host with its own identity and token file.
    let mut tokens = Vec::new();
    for h in &hosts {
        tokens.push(support::enroll(&plane, &h.node).await);
    }
    let accesses = [0, 1].map(|i| {
        let token_file = s.work.path().join(format!("token-{}", hosts[i].node));
        write_token(&token_file, &tokens[i]);
        support::Access {
            token_file,
            ..s.access.clone()
        }
    });
    let watchers =
        [0, 1].map(|i| Actuator::watch(&hosts[i], s.work.path(), &hosts[i].node, &accesses[i]));
    // One swap each (a swap promotes one host: the Lease names it), while
    // both actuators run and beat.
    let learner = at(Phase::Progress, Some(Detail::Learner));
    for ((h, w), swap) in hosts.iter().zip(&watchers).zip(["s1", "s2"]) {
        s.admin.take_lease(swap).await;
        s.admin
            .ask(&h.node, swap, "promote", "server", Some("voter-a"))
            .await;
        s.admin.wait_report(&h.node, "learner", w, &learner).await;
        s.admin.set_voter(&h.node).await;
        let done = at(Phase::Done, Some(Detail::Voter));
        s.admin.wait_report(&h.node, "done", w, done).await;
    }
    for (h, w) in hosts.iter().zip(&watchers) {
        assert_eq!(
            s.reports.phases_until(&h.node, &PROMOTION).await,
            PROMOTION,
            "{}",
            h.node
        );
        assert_eq!(h.role().as_deref(), Some("server"));
        assert_eq!(h.max_active_k3s(), 1);
        let secrets: Vec<&str> = tokens.iter().map(|t| t.expose_secret()).collect();
        assert_no_secret("the actuator's log", &w.log(), &secrets);
    }

    let mut held = Vec::new();
    for h in &hosts {
        let cm = s.admin.report_configmap(&h.node).await.unwrap();
        let keys: Vec<&String> = cm.data.as_ref().unwrap().keys().collect();
        assert_eq!(keys, ["report"], "{}", h.node);
        let beat = s.admin.heartbeat(&h.node).await.unwrap();
        let spec = beat.spec.clone().unwrap_or_default();
        assert_eq!(spec.holder_identity.as_deref(), Some(h.node.as_str()));
        assert!(
            spec.renew_time.is_some(),
            "{} renewed its heartbeat",
            h.node
        );
        held.push((cm.data.clone(), spec.holder_identity));
    }

    // The installer applying deploy/rbac again, and enroll run again (a
    // credential's rotation), keep every host's report and heartbeat.
    apply_rbac(&plane).await;
    for h in &hosts {
        support::enroll(&plane, &h.node).await;
    }
    for (h, (data, holder)) in hosts.iter().zip(held) {
        let again = s.admin.report_configmap(&h.node).await.unwrap();
        assert_eq!(again.data, data, "re-applying changed {}'s report", h.node);
        let beat = s.admin.heartbeat(&h.node).await.unwrap();
        assert_eq!(beat.spec.and_then(|s| s.holder_identity), holder);
    }
}

#[tokio::test]
async fn the_report_carries_a_step_across_an_actuator_restart_without_repeating_its_start() {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    let mut first = s.watch("first");
    let learner = s.promote_to_learner(&first).await;
    first.kill();

    let second = s.watch("second");
    // It reads its report, lists the Node and the Lease, and decides.
    wait_decisions(&second, 0, 1).await;
    let done = s.become_voter(&second).await;
    s.assert_promoted_once(&learner, &done).await;
    assert_eq!(second.count("step started"), 0, "{}", second.log_tail(15));
}

impl Standby {
    /// The report kept on the host.
    fn kept_report(&self) -> Report {
        let raw = std::fs::read_to_string(self.host.at(HOST_REPORT)).expect("a report on the host");
        Report::parse(&raw).unwrap_or_else(|e| panic!("{e}: {raw}"))
    }
}

/// A report's step, its host part (heartbeat) and count left out.
fn step_of(r: &Report) -> Report {
    Report {
        host: None,
        seq: 0,
        updated_at: 0,
        ..r.clone()
    }
}

#[tokio::test]
async fn a_report_write_lost_before_a_crash_does_not_make_a_settled_step_repeat() {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    let _lease = s.admin.keep_lease("s1");
    let mut first = s.watch("first");
    let learner = s.promote_to_learner(&first).await;
    let done = s.become_voter(&first).await;
    first.kill();
    assert_eq!(s.kept_report(), done, "the host keeps the report it sent");

    // Every write of the step lost on its way to the API: the key is gone,
    // while the Node still asks for the promotion and the Lease holds.
    s.admin.put_report("standby", None).await;
    let mut second = s.watch("second");
    // (A heartbeat may follow it at once: it moves the host part and the
    // count on, never the step.)
    let back = s
        .wait(&second, "the kept report, sent again", |r| {
            r.seq >= done.seq
        })
        .await;
    assert_eq!(step_of(&back), step_of(&done));
    wait_decisions(&second, 0, 2).await;
    assert_eq!(second.count("step started"), 0, "{}", second.log_tail(15));
    assert_eq!(s.server_starts(), 1, "{:?}", s.host.systemd_log());
    second.kill();

    // The other way round: the host's copy is behind (a write to it lost),
    // the API's is newer and wins, and the host's is brought up to it.
    std::fs::write(s.host.at(HOST_REPORT), learner.to_json()).unwrap();
    let third = s.watch("third");
    wait_decisions(&third, 0, 2).await;
    let started = clock::Clock::system().now();
    while step_of(&s.kept_report()) != step_of(&done) {
        assert!(started.elapsed() < DEADLINE, "{}", third.log_tail(15));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        s.admin.report("standby").await.as_ref().map(step_of),
        Some(step_of(&done))
    );
    assert_eq!(third.count("step started"), 0, "{}", third.log_tail(15));
    assert_eq!(s.server_starts(), 1, "{:?}", s.host.systemd_log());
}

#[tokio::test]
async fn a_report_that_does_not_parse_on_the_host_or_in_the_api_is_refused_loudly_and_changes_nothing()
 {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    let _lease = s.admin.keep_lease("s1");
    let mut first = s.watch("first");
    // A step under way: any actuator that took its report as no history
    // could take it again.
    let learner = s.promote_to_learner(&first).await;
    first.kill();

    // The host's copy damaged (the API's is fine).
    std::fs::write(s.host.at(HOST_REPORT), r#"{"step":"promote","pha"#).unwrap();
    let before = s.host.tree();
    let mut second = s.watch("second");
    let code = second.wait_exit().await;
    let shown = second.log();
    assert_eq!(code, Some(1), "{shown}");
    assert!(
        shown.contains("the report kept on this host")
            && shown.contains("fleet-role.report) does not parse")
            && shown.contains("refusing to act rather than take it as no history"),
        "{shown}"
    );
    assert_eq!(s.host.tree(), before, "a refused start changed the host");
    assert_eq!(s.admin.report("standby").await, Some(learner.clone()));

    // The host's copy fine again, the API's damaged.
    std::fs::write(s.host.at(HOST_REPORT), learner.to_json()).unwrap();
    s.admin.put_report("standby", Some("not a report")).await;
    let before = s.host.tree();
    let mut third = s.watch("third");
    let code = third.wait_exit().await;
    let shown = third.log();
    assert_eq!(code, Some(1), "{shown}");
    assert!(
        shown.contains(
            "this host's report in the API (ConfigMap fleet-role-hosts/standby, key \"report\") does not parse"
        ) && shown.contains("refusing to act"),
        "{shown}"
    );
    assert_eq!(s.host.tree(), before, "a refused start changed the host");
    let raw = s
        .admin
        .report_configmap("standby")
        .await
        .and_then(|c| c.data)
        .unwrap()["report"]
        .clone();
    assert_eq!(raw, "not a report", "a refused start wrote the report");
    assert_eq!(s.server_starts(), 1, "{:?}", s.host.systemd_log());
}

#[tokio::test]
async fn a_node_whose_internal_ip_is_not_an_address_of_this_host_is_refused_and_changes_nothing() {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    // 203.0.113.0/24 is for documentation: no machine has it.
    s.admin.set_address("standby", "203.0.113.77").await;
    s.admin.take_lease("s1").await;
    s.admin
        .ask("standby", "s1", "promote", "server", Some("voter-a"))
        .await;
    let before = s.host.tree();
    let mut w = s.watch("w");
    let code = w.wait_exit().await;
    let shown = w.log();
    assert_eq!(code, Some(1), "{shown}");
    assert!(
        shown.contains("\"standby\" is not this host")
            && shown.contains(
                "InternalIP in the API (not an address of this host) says \"203.0.113.77\""
            ),
        "{shown}"
    );
    assert_eq!(s.host.tree(), before, "a refused start changed the host");
    assert_eq!(s.admin.report("standby").await, None);
    assert_eq!(s.server_starts(), 0, "{:?}", s.host.systemd_log());
}

#[tokio::test]
async fn a_lease_that_lapsed_while_the_step_waited_for_the_host_lock_stops_the_step_and_changes_nothing()
 {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    // The installer holds the host lock (a local switch in progress).
    let local = host::Host::new(s.host.root(), "standby", clock::Clock::system());
    let lock = local.lock(Duration::from_secs(5)).expect("the host lock");
    // A Lease renewed 30 s ago for 60 s: valid for about 25 s more (the
    // host takes 5 s off for clock skew), and never renewed.
    let renewed = k8s_openapi::jiff::Timestamp::try_from(clock::Clock::system().wall()).unwrap()
        - k8s_openapi::jiff::SignedDuration::from_secs(30);
    let lapses = clock::Clock::system().now() + Duration::from_secs(26);
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "fleet-regrade", "namespace": "kube-system",
            "annotations": {format!("{}/role-swap", support::P): "s1"}},
        "spec": {"holderIdentity": "fleet-role", "leaseDurationSeconds": 60,
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.000000Z").to_string()},
    });
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(s.admin.client.clone(), "kube-system");
    leases
        .patch(
            "fleet-regrade",
            &kube::api::PatchParams::apply("fleet-role").force(),
            &kube::api::Patch::Apply(&lease),
        )
        .await
        .unwrap();
    let watcher = s.watch("standby");
    s.admin
        .ask("standby", "s1", "promote", "server", Some("voter-a"))
        .await;
    s.wait(&watcher, "the step's start", at(Phase::Started, None))
        .await;
    assert!(
        clock::Clock::system().now() < lapses,
        "the step started only after its Lease lapsed: the machine is too slow for this test"
    );
    // The step waits for the lock (60 s) while its Lease lapses; then the
    // lock is let go.
    tokio::time::sleep_until((lapses + Duration::from_secs(1)).into()).await;
    drop(lock);
    let started = clock::Clock::system().now();
    while watcher.count("step stopped, nothing changed") == 0 {
        assert!(
            started.elapsed() < DEADLINE,
            "the step did not stop: {}",
            watcher.log_tail(20)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let log = watcher.log();
    assert!(
        log.contains(
            "the regrade Lease for swap s1 has expired (checked again once the host lock was taken)"
        ),
        "{}",
        watcher.log_tail(20)
    );
    // Nothing changed: still an agent, the server never started, no join
    // drop-in; and the report still says started (it resumes with the Lease).
    assert_eq!(s.host.role().as_deref(), Some("agent"));
    assert_eq!(s.server_starts(), 0);
    assert!(s.host.active("k3s-agent") && !s.host.active("k3s"));
    assert!(
        !s.host
            .at("etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml")
            .exists()
    );
    assert_eq!(
        s.reports
            .phases_until("standby", &[(Phase::Started, None)])
            .await,
        [(Phase::Started, None)]
    );
}

// === The cluster side's failures ===

/// The log line of a watcher that starts watching through `url`.
fn watching(url: &str) -> String {
    format!("watching node standby api=\"{url}\"")
}

#[tokio::test]
async fn the_watcher_moves_to_the_next_api_server_when_its_own_stops_and_repeats_no_step() {
    let mut plane = plane().await;
    plane.add_apiserver().await.expect("a second API server");
    // The controller and the record use the second API server, which stays up.
    let s = Standby::on(&plane, 1).await;
    assert_eq!(s.access.api.len(), 2);
    let watcher = s.watch("standby");
    let learner = s.promote_to_learner(&watcher).await;
    assert_eq!(watcher.count(&watching(&s.access.api[0])), 1);
    assert_eq!(watcher.count(&watching(&s.access.api[1])), 0);

    plane.stop_apiserver(0).await.unwrap();
    let done = s.become_voter(&watcher).await;
    assert!(
        watcher.count(&watching(&s.access.api[1])) > 0,
        "it never moved to the second API server:\n{}",
        watcher.log_tail(15)
    );
    s.assert_promoted_once(&learner, &done).await;
}

#[tokio::test]
async fn the_watcher_moves_on_from_an_api_server_that_stops_answering() {
    let mut plane = plane().await;
    plane.add_apiserver().await.expect("a second API server");
    let s = Standby::on(&plane, 1).await;
    let watcher = s.watch("standby");
    // The controller renews its Lease all along: moving on may take a while.
    let _renewing = s.admin.keep_lease("s1");
    let learner = s.promote_to_learner(&watcher).await;
    // Two more decisions: the actuator holds an idle connection to the
    // first API server beside its watches (the report's writes left it), as
    // it does most of the time; a request on it is what would wait forever
    // without a read timeout.
    wait_decisions(&watcher, watcher.count(DECIDED), 2).await;

    let _frozen = Frozen::apiserver(&plane, 0);
    let done = s.become_voter(&watcher).await;
    assert!(
        watcher.count(&watching(&s.access.api[1])) > 0,
        "it never moved to the second API server:\n{}",
        watcher.log_tail(15)
    );
    s.assert_promoted_once(&learner, &done).await;
}

/// What the watcher logs when a watch is answered 410 Gone: the API server
/// no longer holds the resource version it resumes from.
const GONE: &str = "too old resource version";

/// The watcher's list of its own Node (it lists first, then watches).
const LIST: &str = "/api/v1/nodes?&fieldSelector=metadata.name%3Dstandby&limit=500";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_answered_410_gone_lists_again_and_repeats_no_step() {
    let mut plane = plane().await;
    let mut s = Standby::on(&plane, 0).await;
    // The actuator reaches the API through a relay, so that the test can move
    // its connections to another API server: to the actuator, that is only
    // a dropped connection, and its watch resumes where it was.
    let relay = Relay::start(port_of(&plane.urls()[0])).await;
    s.access.api = vec![relay.url()];
    let watcher = s.watch("standby");
    let learner = s.promote_to_learner(&watcher).await;
    assert_eq!(watcher.count(GONE), 0);

    // Nothing changes the standby's Node from here, so its watch resumes from
    // the resource version of the last change it saw. An API server started
    // now fills its watch cache from a newer one, and answers that watch with
    // 410 Gone. (Should a bookmark have moved the watch past the new cache's
    // start, the watch is simply served: the test tries a newer API server.)
    let mut lists = 0;
    for _ in 0..3 {
        let index = plane.add_apiserver().await.expect("another API server");
        lists = watcher.count_requests(LIST);
        relay.point_at(port_of(&plane.urls()[index]));
        relay.cut();
        let cut = clock::Clock::system().now();
        while watcher.count(GONE) == 0 && cut.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if watcher.count(GONE) > 0 {
            break;
        }
    }
    assert!(
        watcher.count(GONE) > 0,
        "no 410 Gone:\n{}",
        watcher.log_tail(15)
    );
    let started = clock::Clock::system().now();
    while watcher.count_requests(LIST) == lists {
        assert!(
            started.elapsed() < DEADLINE,
            "no list after the 410:\n{}",
            watcher.log_tail(15)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let done = s.become_voter(&watcher).await;
    s.assert_promoted_once(&learner, &done).await;
    assert_eq!(watcher.count("step started"), 1);
}

/// Deletes ServiceAccount `platform/name`, which revokes its tokens, and
/// waits until the API refuses `token`.
async fn revoke(plane: &ControlPlane, name: &str, token: &SecretString) {
    let accounts: Api<ServiceAccount> = Api::namespaced(plane.admin_client().unwrap(), "platform");
    accounts.delete(name, &Default::default()).await.unwrap();
    support::wait_refused(plane, name, token).await;
}

#[tokio::test]
async fn a_token_rotated_in_its_file_is_used_without_a_restart() {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    // Each token bound to a Secret of its own, so that one can be revoked
    // without the other (deleting the ServiceAccount would revoke both).
    let first = support::anchored_token(&plane, "standby", "standby-first").await;
    rotate_token(&s.access.token_file, &first);
    let next = support::anchored_token(&plane, "standby", "standby-next").await;
    let watcher = s.watch("standby");
    let renewing = s.admin.keep_lease("s1");
    s.promote_to_learner(&watcher).await;

    // Rotated as kubelet rotates a projected token (or as `fleet-role enroll`
    // run again does): the new one is written while the old one still works.
    // kube re-reads the file once the token it holds is 50 s old; meanwhile
    // the watcher reads the Lease every 2 s.
    rotate_token(&s.access.token_file, &next);
    tokio::time::sleep(Duration::from_secs(65)).await;
    support::revoke_anchor(&plane, "standby-first", &first).await;
    s.become_voter(&watcher).await;
    // Not one failed request: the new token was in use before the old one
    // was revoked. (And over a minute of a quiet watch, not one watch error:
    // the server ends each watch before the client's read timeout.)
    let log = watcher.log();
    let trouble: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("http.status_code=401") || l.contains(" WARN ") || l.contains(" ERROR ")
        })
        // The test plane's tokens last an hour: the warning of a credential
        // about to lapse is expected, and no trouble.
        .filter(|l| !l.contains("the credential lapses in"))
        .collect();
    assert!(trouble.is_empty(), "{}", trouble.join("\n"));
    assert_eq!(
        s.reports.phases_until("standby", &PROMOTION).await,
        PROMOTION
    );

    // A token revoked before its file is rotated: the watcher fails, and its
    // next client reads the file again.
    support::revoke_anchor(&plane, "standby-next", &next).await;
    let third = support::anchored_token(&plane, "standby", "standby-third").await;
    rotate_token(&s.access.token_file, &third);
    drop(renewing);
    s.admin.take_lease("s2").await;
    s.admin
        .ask("standby", "s2", "rollback", "agent", None)
        .await;
    s.wait(&watcher, "the rollback done", |r| {
        r.phase == Phase::Done && r.swap.as_ref().is_some_and(|s| s.as_str() == "s2")
    })
    .await;
    assert_eq!(s.host.role().as_deref(), Some("agent"));
    assert!(s.host.active("k3s-agent") && !s.host.active("k3s"));
    let secrets = [
        s.token.expose_secret(),
        first.expose_secret(),
        next.expose_secret(),
        third.expose_secret(),
    ];
    assert_no_secret("the actuator's log", &watcher.log(), &secrets);
}

// === The token ===

/// Runs the actuator on `host` to its end, logging at trace level, and
/// returns its exit code and everything it printed.
fn run(host: &TestHost, args: &[&str], env: &[(&str, &std::path::Path)]) -> (i32, String) {
    let mut command = host.actuator(args);
    command.env("FLEET_ROLE_LOG", "trace");
    for (key, value) in env {
        command.env(key, value);
    }
    let out = command.output().expect("the actuator runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The lines above debug level, to show.
fn above_debug(text: &str) -> String {
    let lines = text.lines();
    let shown: Vec<&str> = lines
        .filter(|l| !l.contains(" TRACE ") && !l.contains(" DEBUG "))
        .collect();
    shown.join("\n")
}

#[tokio::test]
async fn no_token_appears_in_any_output_log_report_or_error_even_of_a_refused_request() {
    let plane = plane().await;
    let s = Standby::on(&plane, 0).await;
    let work = s.work.path();
    let url = plane.urls()[0].clone();

    // A real ServiceAccount token cannot carry a marker; a made-up one can,
    // and the API refuses it (401), which also shows what a refused request
    // prints. With a newline it is not even a valid HTTP header.
    let marker = format!(
        "fleetroleMARKER-{}",
        testcp::pki::random_token().expose_secret()
    );
    let marked = work.join("marked-token");
    write_token(&marked, &SecretString::from(marker.clone()));
    let marked_newline = work.join("marked-token-newline");
    write_token(&marked_newline, &SecretString::from(format!("{marker}\n")));
    // A real token, revoked.
    let account =
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: revoked, namespace: platform}\n";
    plane.apply_yaml(account).await.unwrap();
    let revoked_token = plane
        .service_account_token("platform", "revoked")
        .await
        .unwrap();
    revoke(&plane, "revoked", &revoked_token).await;
    let revoked = work.join("revoked-token");
    write_token(&revoked, &revoked_token);
    // A CA that did not sign the API server's certificate.
    let other_ca = testcp::Pki::generate(&work.join("other-pki"), &[])
        .unwrap()
        .ca_file();
    let ca = plane.ca_file();
    let secrets = [
        marker.as_str(),
        revoked_token.expose_secret(),
        s.token.expose_secret(),
    ];

    let api = |ca: &std::path::Path, token: &std::path::Path| {
        let access = Access {
            api: vec![url.clone()],
            ca_file: ca.to_owned(),
            token_file: token.to_owned(),
        };
        access.args()
    };
    let status = |mut args: Vec<String>| {
        args.insert(0, "status".to_owned());
        args
    };
    // (what, args, exit code, what the output must say): a token file
    // refused before any request is a usage error (2), an API that
    // refuses the request a failure that changed nothing (3).
    let mut json = vec!["--output".to_owned(), "json".to_owned()];
    json.extend(status(api(&ca, &marked)));
    let cases = [
        (
            "status, a made-up token",
            status(api(&ca, &marked)),
            3,
            "401",
        ),
        (
            "status --output json, a made-up token",
            json,
            3,
            "\"ok\":false",
        ),
        (
            "status, a token file ending in a newline",
            status(api(&ca, &marked_newline)),
            2,
            "unusable token file",
        ),
        (
            "status, the wrong CA",
            status(api(&other_ca, &marked)),
            3,
            "invalid peer certificate",
        ),
        (
            "status, a revoked token",
            status(api(&ca, &revoked)),
            3,
            "401",
        ),
        (
            "status, a valid token",
            status(s.access.args()),
            0,
            "report:       none",
        ),
    ];
    let mut outputs = Vec::new();
    for (what, args, code, says) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (got, text) = run(&s.host, &args, &[]);
        println!("== {what}: exit {got}\n{}", above_debug(&text));
        assert_eq!(got, *code, "{what}: {text}");
        assert!(text.contains(says), "{what} does not say {says:?}: {text}");
        outputs.push((what.to_string(), text));
    }
    // The local commands never read the token file, even when it is named.
    for args in [
        vec!["is", "agent"],
        vec![
            "promote-local",
            "--check",
            "--join",
            "https://127.0.0.1:6443",
        ],
        vec!["--output", "json", "demote-local", "--check"],
    ] {
        let (got, text) = run(&s.host, &args, &[("FLEET_ROLE_TOKEN_FILE", &marked)]);
        assert_eq!(got, 0, "{args:?}: {text}");
        outputs.push((format!("{args:?}"), text));
    }
    // The watcher, failing over and over at trace level: a made-up token,
    // the wrong CA, a revoked token. (A token file with a newline is refused
    // before the watcher starts, as `status` shows above.)
    for (tag, ca, token) in [
        ("made-up", &ca, &marked),
        ("wrong-ca", &other_ca, &marked),
        ("revoked", &ca, &revoked),
    ] {
        let access = Access {
            api: vec![url.clone()],
            ca_file: ca.clone(),
            token_file: token.clone(),
        };
        let mut watcher = Actuator::watch_logging(&s.host, work, tag, &access, "trace");
        let started = clock::Clock::system().now();
        while watcher.count("the API server failed") < 3 {
            assert!(
                watcher.is_running(),
                "{tag}: it exited:\n{}",
                watcher.log_tail(15)
            );
            assert!(
                started.elapsed() < DEADLINE,
                "{tag}: it never failed:\n{}",
                watcher.log_tail(15)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        watcher.kill();
        let log = watcher.log();
        let warnings: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(" WARN "))
            .take(2)
            .collect();
        println!("== watch, {tag}\n{}", warnings.join("\n"));
        outputs.push((format!("watch, {tag}"), log));
    }
    // And a watcher that works, refusing a step, at trace level.
    let working = Actuator::watch_logging(&s.host, work, "valid", &s.access, "trace");
    s.admin.take_lease("s1").await;
    s.admin
        .ask("standby", "s1", "promote", "agent", Some("voter-a"))
        .await;
    s.wait(&working, "a refusal", at(Phase::Refused, None))
        .await;
    outputs.push(("watch, a valid token".into(), working.log()));

    for (what, text) in &outputs {
        assert_no_secret(what, text, &secrets);
    }
    let report = serde_json::to_string(&s.admin.report_configmap("standby").await).unwrap();
    assert_no_secret("the report", &report, &secrets);
}
