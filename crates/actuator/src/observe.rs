//! Turning API objects into the plain views the decision reads.

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use protocol::{
    LeaseView, Names, NodeView,
    decide::JoinTarget,
    names::{
        K3S_ETCD_IS_VOTER, K3S_ETCD_NODE_ADDRESS, K3S_ETCD_REMOVED_NODE_NAME, K3S_ETCD_ROLE_LABEL,
    },
};

/// The fleet-role view of a Node.
pub fn node_view(names: &Names, node: &Node) -> NodeView {
    let labels = node.metadata.labels.as_ref();
    let annotations = node.metadata.annotations.as_ref();
    let label = |k: String| labels.and_then(|l| l.get(&k)).cloned();
    let annotation = |k: String| annotations.and_then(|a| a.get(&k)).cloned();
    NodeView {
        name: node.metadata.name.clone().unwrap_or_default(),
        desired_role: label(names.desired_role()),
        swap: annotation(names.role_swap()),
        step: annotation(names.role_step()),
        join_node: annotation(names.role_join_node()),
        snapshot_request: annotation(names.snapshot_request()),
        etcd_label: labels.is_some_and(|l| l.get(K3S_ETCD_ROLE_LABEL).is_some_and(|v| v == "true")),
        etcd_is_voter: condition_true(node, K3S_ETCD_IS_VOTER),
        removed_member: annotation(K3S_ETCD_REMOVED_NODE_NAME.to_string()),
    }
}

/// Whether the Node's condition `kind` is `True`.
pub fn condition_true(node: &Node, kind: &str) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status == "True"))
}

/// The regrade Lease as the decision reads it.
pub fn lease_view(names: &Names, lease: &Lease) -> LeaseView {
    let spec = lease.spec.as_ref();
    LeaseView {
        holder: spec.and_then(|s| s.holder_identity.clone()),
        swap: lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(&names.lease_swap()))
            .cloned(),
        renew_time: spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.as_second()),
        duration_secs: spec.and_then(|s| s.lease_duration_seconds).map(i64::from),
    }
}

/// The join target of a promotion: k3s's etcd address annotation, else the
/// Node's first InternalIP.
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
    let internal_ip = || {
        node.status
            .as_ref()?
            .addresses
            .as_ref()?
            .iter()
            .find(|a| a.type_ == "InternalIP")
            .map(|a| a.address.clone())
    };
    JoinTarget::Found {
        address: from_annotation.or_else(internal_ip),
    }
}
