//! A Node: read into [`NodeFacts`], and a write from its before and after.

use hostdecide::decide::JoinTarget;
use k8s_openapi::{
    api::core::v1::{Node, NodeCondition},
    apimachinery::pkg::apis::meta::v1::Time,
};
use protocol::{
    FleetMarks, K3sEtcd, MaintenanceMarks, Names, NodeFacts,
    names::{
        K3S_CONTROL_PLANE_LABEL, K3S_ETCD_IS_VOTER, K3S_ETCD_NODE_ADDRESS, K3S_ETCD_NODE_NAME,
        K3S_ETCD_REMOVE, K3S_ETCD_REMOVED_NODE_NAME, K3S_ETCD_ROLE_LABEL, K3S_MASTER_LABEL,
        KURED_REBOOT_IN_PROGRESS,
    },
};
use serde_json::{Map, Value, json};

/// The Node's condition `kind`, if it has one.
pub fn condition<'a>(node: &'a Node, kind: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

/// Whether the Node's condition `kind` is `True`.
pub fn condition_true(node: &Node, kind: &str) -> bool {
    condition(node, kind).is_some_and(|c| c.status == "True")
}

/// The Node's first `InternalIP`, raw.
pub fn internal_ip(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

/// Every address the Node's status lists (InternalIP, ExternalIP, Hostname,
/// ...), raw and in its order: what the actuator tries for another server
/// (it keeps the ones that parse as IP addresses).
pub fn addresses(node: &Node) -> Vec<String> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| a.iter().map(|a| a.address.clone()).collect())
        .unwrap_or_default()
}

/// The join target of a promotion: k3s's etcd address annotation, else the
/// Node's first InternalIP (k3s publishes the annotation once the server's
/// member is up; a voter always has one of the two).
pub fn join_target(node: Option<&Node>) -> JoinTarget {
    let Some(node) = node else {
        return JoinTarget::Missing;
    };
    let from_annotation = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(K3S_ETCD_NODE_ADDRESS))
        .cloned();
    JoinTarget::Found {
        address: from_annotation.or_else(|| internal_ip(node)),
    }
}

/// [`node_facts`] with the host's zone: the value of `spread_label` on
/// the Node when it is a valid label value (the controller's view).
pub fn node_facts_zoned(names: &Names, spread_label: Option<&str>, node: &Node) -> NodeFacts {
    let mut facts = node_facts(names, node);
    facts.zone = spread_label.and_then(|k| zone(node, k));
    facts
}

/// The value of `label` on `node`, if it is a valid label value.
pub fn zone(node: &Node, label: &str) -> Option<String> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(label))
        .and_then(|v| protocol::validate::label_value(v))
        .map(str::to_string)
}

/// A Node as fleet-role sees it, without its node Lease and its report
/// (those live in other objects; the caller adds them).
pub fn node_facts(names: &Names, node: &Node) -> NodeFacts {
    let labels = node.metadata.labels.as_ref();
    let annotations = node.metadata.annotations.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).cloned();
    let annotation = |k: &str| annotations.and_then(|a| a.get(k)).cloned();
    let ready = condition(node, "Ready");
    NodeFacts {
        name: node.metadata.name.clone().unwrap_or_default(),
        ready: ready.is_some_and(|c| c.status == "True"),
        ready_since: ready
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0.as_second()),
        ready_disputed: None,
        lease_renewed_at: None,
        etcd_is_voter: condition_true(node, K3S_ETCD_IS_VOTER),
        etcd_unhealthy: condition(node, K3S_ETCD_IS_VOTER)
            .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some("Unhealthy")),
        etcd_label: label(K3S_ETCD_ROLE_LABEL).as_deref() == Some("true"),
        control_plane_label: label(K3S_CONTROL_PLANE_LABEL).is_some(),
        master_label: label(K3S_MASTER_LABEL).is_some(),
        k3s: K3sEtcd {
            node_name: annotation(K3S_ETCD_NODE_NAME),
            node_address: annotation(K3S_ETCD_NODE_ADDRESS),
            remove: annotation(K3S_ETCD_REMOVE),
            removed_node_name: annotation(K3S_ETCD_REMOVED_NODE_NAME),
        },
        eligible: label(&names.eligible()).as_deref() == Some("true"),
        legacy_eligible: label(&names.legacy_eligible()).as_deref() == Some("true"),
        cordoned: node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        zone: None,
        maintenance: MaintenanceMarks {
            kured_reboot: annotation(KURED_REBOOT_IN_PROGRESS),
            until: annotation(&names.maintenance()),
        },
        marks: FleetMarks {
            desired_role: label(&names.desired_role()),
            swap: annotation(&names.role_swap()),
            step: annotation(&names.role_step()),
            join_node: annotation(&names.role_join_node()),
            snapshot_request: annotation(&names.snapshot_request()),
            protocol: annotation(&names.protocol()),
        },
        report: None,
        report_protocol: None,
        host: None,
        report_refused: None,
    }
}

/// The merge patch that takes a Node from `before` to `after` (labels,
/// annotations and `spec.unschedulable`, only what differs); `None` when
/// nothing does. A label or annotation that goes away is set to `null`, as a
/// merge patch removes it. The `EtcdIsVoter` condition lives in the status:
/// see [`voter_condition_cleared`].
pub fn node_patch(names: &Names, before: &NodeFacts, after: &NodeFacts) -> Option<Value> {
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let text =
        |map: &mut Map<String, Value>, key: String, b: &Option<String>, a: &Option<String>| {
            if b != a {
                map.insert(key, a.as_ref().map_or(Value::Null, |v| json!(v)));
            }
        };
    let (bm, am) = (&before.marks, &after.marks);
    text(
        &mut labels,
        names.desired_role(),
        &bm.desired_role,
        &am.desired_role,
    );
    text(&mut annotations, names.role_swap(), &bm.swap, &am.swap);
    text(&mut annotations, names.role_step(), &bm.step, &am.step);
    text(
        &mut annotations,
        names.role_join_node(),
        &bm.join_node,
        &am.join_node,
    );
    text(
        &mut annotations,
        names.snapshot_request(),
        &bm.snapshot_request,
        &am.snapshot_request,
    );
    text(
        &mut annotations,
        names.protocol(),
        &bm.protocol,
        &am.protocol,
    );
    let (bk, ak) = (&before.k3s, &after.k3s);
    text(
        &mut annotations,
        K3S_ETCD_NODE_NAME.into(),
        &bk.node_name,
        &ak.node_name,
    );
    text(
        &mut annotations,
        K3S_ETCD_NODE_ADDRESS.into(),
        &bk.node_address,
        &ak.node_address,
    );
    text(
        &mut annotations,
        K3S_ETCD_REMOVE.into(),
        &bk.remove,
        &ak.remove,
    );
    text(
        &mut annotations,
        K3S_ETCD_REMOVED_NODE_NAME.into(),
        &bk.removed_node_name,
        &ak.removed_node_name,
    );
    // k3s's server labels are only ever removed by fleet-role.
    for (key, b, a) in [
        (K3S_ETCD_ROLE_LABEL, before.etcd_label, after.etcd_label),
        (
            K3S_CONTROL_PLANE_LABEL,
            before.control_plane_label,
            after.control_plane_label,
        ),
        (K3S_MASTER_LABEL, before.master_label, after.master_label),
    ] {
        if b && !a {
            labels.insert(key.into(), Value::Null);
        }
    }
    let mut meta = Map::new();
    if !labels.is_empty() {
        meta.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    let mut patch = Map::new();
    if !meta.is_empty() {
        patch.insert("metadata".into(), Value::Object(meta));
    }
    if before.cordoned != after.cordoned {
        let value = if after.cordoned {
            json!(true)
        } else {
            Value::Null
        };
        patch.insert("spec".into(), json!({ "unschedulable": value }));
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

/// Whether the write clears k3s's `EtcdIsVoter` (True before, not after):
/// the agent never clears it itself, so the controller sets it `False` in
/// the Node's status, and the Node does not claim a voter.
pub fn voter_condition_cleared(before: &NodeFacts, after: &NodeFacts) -> bool {
    before.etcd_is_voter && !after.etcd_is_voter
}

/// The strategic-merge patch of the Node's status that takes it from
/// `before` to `after` (`None` when the status does not change): k3s's
/// `EtcdIsVoter` set `False` once the write clears it
/// ([`voter_condition_cleared`]), changed at `now`. The one model of that
/// write, as [`node_patch`] is of the Node's metadata and spec.
pub fn node_status_patch(before: &NodeFacts, after: &NodeFacts, now: Time) -> Option<Value> {
    voter_condition_cleared(before, after).then(|| {
        json!({"status": {"conditions": [{
            "type": K3S_ETCD_IS_VOTER,
            "status": "False",
            "reason": "FleetRoleDemoted",
            "message": "the host runs as an agent; its etcd member was removed",
            "lastTransitionTime": now,
        }]}})
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{NodeAddress, NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    const P: &str = "github-runner.exadev.com";

    fn server_node() -> Node {
        let map = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                labels: Some(map(&[
                    (K3S_ETCD_ROLE_LABEL, "true"),
                    (K3S_CONTROL_PLANE_LABEL, "true"),
                    (protocol::names::ELIGIBLE_LABEL, "true"),
                    (&format!("{P}/desired-role"), "server"),
                ])),
                annotations: Some(map(&[
                    (K3S_ETCD_NODE_NAME, "n1-0a1b2c3d"),
                    (K3S_ETCD_NODE_ADDRESS, "10.0.0.1"),
                    (&format!("{P}/role-step"), "promote"),
                    (&format!("{P}/protocol"), "1"),
                    (&format!("{P}/maintenance"), "2026-12-02T05:00:00Z"),
                    (KURED_REBOOT_IN_PROGRESS, "2026-12-02T03:00:00Z"),
                ])),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                unschedulable: Some(true),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![
                    NodeCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        ..NodeCondition::default()
                    },
                    NodeCondition {
                        type_: K3S_ETCD_IS_VOTER.into(),
                        status: "True".into(),
                        ..NodeCondition::default()
                    },
                ]),
                addresses: Some(vec![
                    NodeAddress {
                        type_: "Hostname".into(),
                        address: "n1".into(),
                    },
                    NodeAddress {
                        type_: "InternalIP".into(),
                        address: "10.0.0.9".into(),
                    },
                ]),
                ..NodeStatus::default()
            }),
        }
    }

    #[test]
    fn a_nodes_addresses_are_listed_in_their_order_and_none_without_a_status() {
        assert_eq!(addresses(&server_node()), ["n1", "10.0.0.9"]);
        assert!(addresses(&Node::default()).is_empty());
    }

    #[test]
    fn a_node_is_read_with_every_label_annotation_and_condition_fleet_role_uses() {
        let f = node_facts(&Names::default(), &server_node());
        assert_eq!(f.name, "n1");
        assert!(f.ready && f.etcd_is_voter && f.etcd_label && f.control_plane_label);
        assert!(!f.master_label);
        assert!(f.eligible && f.cordoned && !f.legacy_eligible);
        assert_eq!(f.k3s.node_name.as_deref(), Some("n1-0a1b2c3d"));
        assert_eq!(f.marks.desired_role.as_deref(), Some("server"));
        assert_eq!(f.marks.step.as_deref(), Some("promote"));
        assert_eq!(f.marks.swap, None);
        assert_eq!(f.marks.protocol.as_deref(), Some("1"));
        assert_eq!(
            f.maintenance,
            MaintenanceMarks {
                kured_reboot: Some("2026-12-02T03:00:00Z".into()),
                until: Some("2026-12-02T05:00:00Z".into()),
            }
        );
    }

    #[test]
    fn the_old_prefix_label_a_kubelet_can_set_makes_no_node_eligible() {
        let mut node = server_node();
        let labels = node.metadata.labels.as_mut().unwrap();
        labels.remove(protocol::names::ELIGIBLE_LABEL);
        labels.insert(format!("{P}/voter-eligible"), "true".into());
        let f = node_facts(&Names::default(), &node);
        assert!(
            !f.eligible,
            "the old label alone must not make a host eligible"
        );
        assert!(
            f.legacy_eligible,
            "read for status's list of Nodes to relabel"
        );

        let labels = node.metadata.labels.as_mut().unwrap();
        labels.insert(protocol::names::ELIGIBLE_LABEL.into(), "true".into());
        let f = node_facts(&Names::default(), &node);
        assert!(f.eligible && f.legacy_eligible);
    }

    #[test]
    fn a_nodes_zone_is_the_spread_labels_value_when_it_is_a_valid_label_value() {
        let mut n = server_node();
        let names = Names::default();
        assert_eq!(node_facts_zoned(&names, Some("site"), &n).zone, None);
        let labels = n.metadata.labels.as_mut().unwrap();
        labels.insert("site".into(), "rack-2".into());
        assert_eq!(
            node_facts_zoned(&names, Some("site"), &n).zone.as_deref(),
            Some("rack-2")
        );
        assert_eq!(
            node_facts_zoned(&names, None, &n).zone,
            None,
            "spreading off"
        );
        assert_eq!(node_facts(&names, &n).zone, None, "the hosts read no zone");
        let labels = n.metadata.labels.as_mut().unwrap();
        labels.insert("site".into(), "rack 2\n".into());
        assert_eq!(node_facts_zoned(&names, Some("site"), &n).zone, None);
    }

    #[test]
    fn a_node_without_status_or_labels_reads_as_not_ready_and_nothing_else() {
        let f = node_facts(&Names::default(), &Node::default());
        assert_eq!(f, NodeFacts::default());
    }

    #[test]
    fn the_join_target_prefers_k3s_etcd_address_then_the_internal_ip() {
        let mut n = server_node();
        assert_eq!(
            join_target(Some(&n)),
            JoinTarget::Found {
                address: Some("10.0.0.1".into())
            }
        );
        n.metadata.annotations = None;
        assert_eq!(
            join_target(Some(&n)),
            JoinTarget::Found {
                address: Some("10.0.0.9".into())
            }
        );
        assert_eq!(join_target(None), JoinTarget::Missing);
    }

    #[test]
    fn a_patch_names_exactly_what_changed_and_nulls_what_went_away() {
        let names = Names::default();
        let before = node_facts(&names, &server_node());
        assert_eq!(node_patch(&names, &before, &before), None);
        let mut after = before.clone();
        after.marks.step = None;
        after.marks.protocol = None;
        after.marks.swap = Some("s1".into());
        after.etcd_label = false;
        after.cordoned = false;
        after.k3s.remove = Some("true".into());
        let p = node_patch(&names, &before, &after).unwrap();
        assert_eq!(
            p,
            json!({
                "metadata": {
                    "labels": {K3S_ETCD_ROLE_LABEL: null},
                    "annotations": {
                        format!("{P}/role-step"): null,
                        format!("{P}/protocol"): null,
                        format!("{P}/role-swap"): "s1",
                        K3S_ETCD_REMOVE: "true",
                    },
                },
                "spec": {"unschedulable": null},
            })
        );
        let mut cordoned = before.clone();
        cordoned.cordoned = false;
        assert_eq!(
            node_patch(&names, &cordoned, &before).unwrap(),
            json!({"spec": {"unschedulable": true}})
        );
    }

    #[test]
    fn the_voter_condition_is_cleared_only_when_it_goes_from_true_to_false() {
        let before = node_facts(&Names::default(), &server_node());
        let mut after = before.clone();
        assert!(!voter_condition_cleared(&before, &after));
        after.etcd_is_voter = false;
        assert!(voter_condition_cleared(&before, &after));
        assert!(!voter_condition_cleared(&after, &before));
    }

    #[test]
    fn the_status_is_patched_only_to_set_the_voter_condition_false_at_the_time_given() {
        use k8s_openapi::jiff::Timestamp;
        let at = Time(Timestamp::from_second(1_000).unwrap());
        let before = node_facts(&Names::default(), &server_node());
        let mut after = before.clone();
        assert_eq!(node_status_patch(&before, &after, at.clone()), None);
        after.etcd_is_voter = false;
        let patch = node_status_patch(&before, &after, at).unwrap();
        let c = &patch["status"]["conditions"][0];
        assert_eq!(c["type"], K3S_ETCD_IS_VOTER);
        assert_eq!(c["status"], "False");
        assert_eq!(c["lastTransitionTime"], "1970-01-01T00:16:40Z");
    }
}
