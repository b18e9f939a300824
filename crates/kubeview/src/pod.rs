//! A Pod as the controller's drain sees it.

use fleetfacts::PodFacts;
use k8s_openapi::api::core::v1::Pod;

/// The annotation the kubelet puts on a static pod's mirror in the API.
const MIRROR: &str = "kubernetes.io/config.mirror";

/// What the drain reads of `pod`: where it is, whether a controller owns it
/// and whether that is a DaemonSet (its controller reference), whether it
/// mirrors a static pod, whether its deletion has begun and whether it has
/// finished.
pub fn pod_facts(pod: &Pod) -> PodFacts {
    let meta = &pod.metadata;
    PodFacts {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        daemon_set: meta.owner_references.as_ref().is_some_and(|o| {
            o.iter()
                .any(|r| r.controller == Some(true) && r.kind == "DaemonSet")
        }),
        // As `kubectl drain` tells a pod it may evict: a controller
        // reference, of any kind (a merely owning reference starts nothing
        // again).
        controlled: meta
            .owner_references
            .as_ref()
            .is_some_and(|o| o.iter().any(|r| r.controller == Some(true))),
        mirror: meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MIRROR)),
        terminating: meta.deletion_timestamp.is_some(),
        finished: pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_daemonsets_pod_is_one_it_controls_not_one_it_merely_owns() {
        let owned = |controller: bool| {
            pod(
                json!({"metadata": {"name": "p", "namespace": "n", "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": controller}
                ]}}),
            )
        };
        assert!(pod_facts(&owned(true)).daemon_set);
        assert!(!pod_facts(&owned(false)).daemon_set);
    }

    #[test]
    fn a_pod_is_controlled_only_by_an_owner_reference_marked_controller() {
        let owned = |refs: serde_json::Value| {
            pod_facts(&pod(
                json!({"metadata": {"name": "p", "namespace": "n", "ownerReferences": refs}}),
            ))
            .controlled
        };
        let rs = |controller: Option<bool>| {
            let mut r =
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u"});
            if let Some(c) = controller {
                r["controller"] = json!(c);
            }
            r
        };
        assert!(owned(json!([rs(Some(true))])));
        assert!(owned(json!([rs(Some(false)), rs(Some(true))])));
        assert!(!owned(json!([rs(Some(false))])));
        assert!(!owned(json!([rs(None)])));
        assert!(!owned(json!([])));
        assert!(!pod_facts(&pod(json!({"metadata": {"name": "p", "namespace": "n"}}))).controlled);
    }

    #[test]
    fn mirror_terminating_and_finished_pods_are_told_apart() {
        let p = pod(json!({"metadata": {"name": "p", "namespace": "n",
            "annotations": {MIRROR: "x"}, "deletionTimestamp": "2026-12-01T00:00:00Z"},
            "status": {"phase": "Succeeded"}}));
        let f = pod_facts(&p);
        assert!(f.mirror && f.terminating && f.finished, "{f:?}");
        let plain = pod_facts(&pod(
            json!({"metadata": {"name": "p", "namespace": "n"}, "status": {"phase": "Running"}}),
        ));
        assert_eq!(
            plain,
            PodFacts {
                namespace: "n".into(),
                name: "p".into(),
                ..PodFacts::default()
            }
        );
    }
}
