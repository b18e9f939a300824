//! The drain before a step-down, against a real kube-apiserver: the
//! outgoing voter's pods are evicted through the Eviction API (its
//! PodDisruptionBudgets checked by the API server itself) with the
//! configured grace, DaemonSet pods stay, a budget that allows no
//! eviction stops the swap at its drain timeout with no step-down asked,
//! and a pod no controller owns stops it before any eviction unless the
//! swap is run with `--force`.
//!
//! There is no kubelet here: the test plays its part in pod deletion (a
//! pod whose deletion began is deleted for good, as a kubelet does once
//! its containers stopped).

mod support;

use std::time::Duration;

use k8s_openapi::api::{
    apps::v1::{DaemonSet, ReplicaSet},
    core::v1::{Namespace, Pod, ServiceAccount},
    policy::v1::PodDisruptionBudget,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use support::{CONFIG, Harness, P, three_voters};

/// The test's config with a drain grace and a short drain timeout.
fn config(drain_timeout: u64) -> String {
    format!("{CONFIG}drain = {drain_timeout}\n").replace(
        "leader_lease_duration_secs = 6\n",
        "leader_lease_duration_secs = 6\ndrain_grace_secs = 7\n",
    )
}

/// A ReplicaSet in `ci` to own the test's pods (nothing runs it here: no
/// controller-manager), and the ownerReferences that make a pod its, as a
/// ReplicaSet's own pods carry them.
async fn replica_set(admin: &Client) -> serde_json::Value {
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "runners"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"owned": "yes"}},
            "template": {"metadata": {"labels": {"owned": "yes"}},
                "spec": {"containers": [{"name": "a", "image": "a"}]}}
        }
    }))
    .unwrap();
    let rs = Api::<ReplicaSet>::namespaced(admin.clone(), "ci")
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    json!([{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "runners",
        "uid": rs.metadata.uid.unwrap(), "controller": true
    }])
}

/// A Running pod `ci/name` on `node`, with `owners` as its ownerReferences
/// (`[]`: a pod no controller owns).
async fn create_pod(
    admin: &Client,
    name: &str,
    node: &str,
    labels: serde_json::Value,
    owners: &serde_json::Value,
) {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "ci");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels, "ownerReferences": owners},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 3600,
            "containers": [{"name": "job", "image": "runner"}]
        }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    running(admin, name).await;
}

/// Marks the pod Running, as its kubelet would: the API server lets a
/// Pending pod be evicted whatever its budget says.
async fn running(admin: &Client, name: &str) {
    let status = json!({"status": {"phase": "Running"}});
    Api::<Pod>::namespaced(admin.clone(), "ci")
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// The `ci` namespace and its default ServiceAccount (no controller-manager
/// makes it here, and the admission of a pod looks it up).
async fn ci_namespace(admin: &Client) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "ci"}})).unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    Api::<ServiceAccount>::namespaced(admin.clone(), "ci")
        .create(&PostParams::default(), &sa)
        .await
        .unwrap();
}

/// Plays the kubelet's part: a pod whose deletion began is deleted for
/// good; records the grace each was given, until `pods_wanted` pods were.
fn kubelet(admin: Client, pods_wanted: usize) -> tokio::task::JoinHandle<Vec<(String, i64)>> {
    tokio::spawn(async move {
        let pods: Api<Pod> = Api::namespaced(admin, "ci");
        let mut graces = Vec::new();
        loop {
            if let Ok(list) = pods.list(&ListParams::default()).await {
                for p in list.items {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    if p.metadata.deletion_timestamp.is_some() {
                        graces.push((
                            name.clone(),
                            p.metadata.deletion_grace_period_seconds.unwrap_or(-1),
                        ));
                        let _ = pods
                            .delete(&name, &DeleteParams::default().grace_period(0))
                            .await;
                    }
                }
            }
            let mut seen: Vec<&String> = graces.iter().map(|(n, _)| n).collect();
            seen.sort();
            seen.dedup();
            if seen.len() >= pods_wanted {
                return graces;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

#[tokio::test]
async fn the_outgoing_voters_pods_are_evicted_with_the_set_grace_before_its_step_down_and_daemonset_pods_stay()
 {
    let h = Harness::start(&three_voters(), &config(90)).await;
    ci_namespace(&h.admin).await;
    let owned = replica_set(&h.admin).await;
    create_pod(&h.admin, "job-1", "n1", json!({"app": "ci"}), &owned).await;
    // A DaemonSet's pod (its controller reference is what marks it).
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "a", "image": "a"}]}}
        }
    }))
    .unwrap();
    let ds = Api::<DaemonSet>::namespaced(h.admin.clone(), "ci")
        .create(&PostParams::default(), &ds)
        .await
        .unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "agent-n1", "labels": {"app": "agent"}, "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
            "uid": ds.metadata.uid.clone().unwrap(), "controller": true
        }]},
        "spec": {"nodeName": "n1", "automountServiceAccountToken": false,
            "containers": [{"name": "a", "image": "a"}]}
    }))
    .unwrap();
    Api::<Pod>::namespaced(h.admin.clone(), "ci")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    running(&h.admin, "agent-n1").await;
    // A pod on another Node is nobody's business here.
    create_pod(&h.admin, "job-2", "n2", json!({"app": "ci"}), &owned).await;
    let kubelet = kubelet(h.admin.clone(), 1);

    let run = h.run(&["swap", "--out", "n1", "--in", "n4"]).await;
    run.expect(0);
    h.assert_swapped("n1", "n4").await;
    let graces = kubelet.await.unwrap();
    assert_eq!(
        graces,
        [("job-1".to_string(), 7)],
        "evicted with the configured grace"
    );
    let order = [
        "cordon n1",
        "── drain",
        "evict 1 pod from n1 (ci/job-1), grace 7 s",
        "ask n1 to step down",
    ];
    run.assert_in_order(&order);
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), "ci");
    let left: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(left, ["agent-n1", "job-2"]);
    assert!(
        h.events()
            .await
            .contains(&("n1".into(), "PodsEvicted".into()))
    );
}

#[tokio::test]
async fn a_budget_that_allows_no_eviction_stops_the_swap_at_its_drain_timeout_with_no_step_down_asked()
 {
    let h = Harness::start(&three_voters(), &config(8)).await;
    ci_namespace(&h.admin).await;
    let owned = replica_set(&h.admin).await;
    create_pod(&h.admin, "runner-1", "n1", json!({"app": "runner"}), &owned).await;
    // No controller-manager runs here to count the budget's healthy pods, so
    // the API server, which checks the budget, allows no disruption: the
    // answer a busy CI runner's budget gives.
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "runners"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "runner"}}}
    }))
    .unwrap();
    Api::<PodDisruptionBudget>::namespaced(h.admin.clone(), "ci")
        .create(&PostParams::default(), &pdb)
        .await
        .unwrap();

    let run = h.run(&["swap", "--out", "n1", "--in", "n4"]).await;
    run.expect(4);
    assert!(
        run.stdout
            .contains("pods stayed on n1 past the drain's 8 s")
            && run.stdout.contains("ci/runner-1"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains("refused for now"),
        "the budget's refusal is logged: {}",
        run.stderr
    );
    // The runner was never ended, and n1 was never asked to step down.
    let pod = Api::<Pod>::namespaced(h.admin.clone(), "ci")
        .get("runner-1")
        .await
        .unwrap();
    assert!(pod.metadata.deletion_timestamp.is_none());
    let n1 = h.node("n1").await;
    let ann = n1.metadata.annotations.unwrap_or_default();
    assert_ne!(
        ann.get(&format!("{P}/role-step")).map(String::as_str),
        Some("step-down")
    );
    assert_eq!(n1.spec.and_then(|s| s.unschedulable), Some(true));
}

#[tokio::test]
async fn a_pod_no_controller_owns_stops_the_swap_naming_it_until_the_swap_is_forced() {
    let h = Harness::start(&three_voters(), &config(90)).await;
    ci_namespace(&h.admin).await;
    let owned = replica_set(&h.admin).await;
    create_pod(&h.admin, "job-1", "n1", json!({"app": "ci"}), &owned).await;
    // Started by hand: nothing would start it again once evicted.
    create_pod(&h.admin, "debug", "n1", json!({"app": "debug"}), &json!([])).await;

    let run = h.run(&["swap", "--out", "n1", "--in", "n4"]).await;
    run.expect(4);
    assert!(
        run.stdout.contains("that no controller owns") && run.stdout.contains("ci/debug"),
        "the stop names the pod and why: {}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("ci/job-1"),
        "only the pod no controller owns is named: {}",
        run.stdout
    );
    assert!(run.stdout.contains("--force"), "{}", run.stdout);
    // Nothing was evicted, not even the owned pod, and n1 was never asked
    // to step down: it is cordoned and still votes.
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), "ci");
    for name in ["debug", "job-1"] {
        let p = pods.get(name).await.unwrap();
        assert!(
            p.metadata.deletion_timestamp.is_none(),
            "{name} was evicted"
        );
    }
    let n1 = h.node("n1").await;
    let ann = n1.metadata.annotations.clone().unwrap_or_default();
    assert_ne!(
        ann.get(&format!("{P}/role-step")).map(String::as_str),
        Some("step-down")
    );
    assert_eq!(n1.spec.and_then(|s| s.unschedulable), Some(true));
    assert!(
        !h.events()
            .await
            .contains(&("n1".into(), "PodsEvicted".into()))
    );

    // The same swap, forced: both pods are evicted and the swap finishes.
    let kubelet = kubelet(h.admin.clone(), 2);
    let run = h
        .run(&["swap", "--out", "n1", "--in", "n4", "--force"])
        .await;
    run.expect(0);
    h.assert_swapped("n1", "n4").await;
    run.assert_in_order(&[
        "evict 2 pods from n1 (ci/debug, ci/job-1)",
        "ask n1 to step down",
    ]);
    let mut evicted: Vec<String> = kubelet.await.unwrap().into_iter().map(|(n, _)| n).collect();
    evicted.sort();
    evicted.dedup();
    assert_eq!(evicted, ["debug", "job-1"]);
}
