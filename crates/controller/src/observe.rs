//! Reading the cluster into the plain [`FleetView`] the decisions read: every
//! Node, every node Lease in `kube-node-lease`, the hosts' report ConfigMap
//! and the regrade Lease. Nothing is cached between reads: each decision is
//! taken on what the API shows now.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Node},
};
use kube::{Api, Client, api::ListParams};
use protocol::{
    Names, Report,
    controller::{FleetMarks, FleetView, K3sEtcd, LeaseFacts, NodeFacts},
    names::{
        K3S_CONTROL_PLANE_LABEL, K3S_ETCD_IS_VOTER, K3S_ETCD_NODE_ADDRESS, K3S_ETCD_NODE_NAME,
        K3S_ETCD_REMOVE, K3S_ETCD_REMOVED_NODE_NAME, K3S_ETCD_ROLE_LABEL, K3S_MASTER_LABEL,
        LEASE_NAMESPACE, REPORT_CONFIGMAP,
    },
};

use crate::config::Settings;

/// The namespace of the kubelets' node Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// One reading of the cluster: the view, and the raw objects a write needs.
#[derive(Debug, Clone)]
pub struct Observed {
    /// What the decisions read.
    pub view: FleetView,
    /// The regrade Lease as read (its resourceVersion is the precondition
    /// of every Lease write).
    pub lease: Option<Lease>,
    /// Each Node's uid, for the Events' object references.
    pub uids: BTreeMap<String, String>,
}

/// Now, in unix seconds.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Reads the cluster.
pub async fn observe(client: &Client, settings: &Settings) -> Result<Observed, kube::Error> {
    let names = settings.names();
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let node_leases = Api::<Lease>::namespaced(client.clone(), NODE_LEASE_NAMESPACE)
        .list(&ListParams::default())
        .await?;
    let reports = Api::<ConfigMap>::namespaced(client.clone(), &names.report_namespace)
        .get_opt(REPORT_CONFIGMAP)
        .await?
        .and_then(|cm| cm.data)
        .unwrap_or_default();
    let lease = read_lease(client, names).await?;
    let renewed: BTreeMap<String, i64> = node_leases
        .items
        .iter()
        .filter_map(|l| {
            let t = l.spec.as_ref()?.renew_time.as_ref()?.0.as_second();
            Some((l.metadata.name.clone()?, t))
        })
        .collect();
    let mut uids = BTreeMap::new();
    let mut facts = Vec::new();
    for node in &nodes.items {
        let Some(name) = node.metadata.name.clone() else {
            continue;
        };
        if let Some(uid) = &node.metadata.uid {
            uids.insert(name.clone(), uid.clone());
        }
        let mut f = node_facts(names, node);
        f.lease_renewed_at = renewed.get(&name).copied();
        f.report = reports.get(&name).and_then(|v| Report::from_json(v));
        facts.push(f);
    }
    let mut view = FleetView {
        now: now(),
        settings: settings.core.clone(),
        nodes: facts,
        lease: lease.as_ref().map(|l| lease_facts(names, l)),
    };
    protocol::controller::apply_heartbeats(&mut view);
    Ok(Observed { view, lease, uids })
}

/// Reads the regrade Lease.
pub async fn read_lease(client: &Client, names: &Names) -> Result<Option<Lease>, kube::Error> {
    Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE)
        .get_opt(&names.lease_name)
        .await
}

/// A Node as the decisions see it (without its node Lease and report).
pub fn node_facts(names: &Names, node: &Node) -> NodeFacts {
    let labels = node.metadata.labels.as_ref();
    let annotations = node.metadata.annotations.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).cloned();
    let annotation = |k: &str| annotations.and_then(|a| a.get(k)).cloned();
    let condition = |kind: &str| {
        node.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == kind))
    };
    let ready = condition("Ready");
    NodeFacts {
        name: node.metadata.name.clone().unwrap_or_default(),
        ready: ready.is_some_and(|c| c.status == "True"),
        ready_since: ready
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0.as_second()),
        lease_renewed_at: None,
        etcd_is_voter: condition(K3S_ETCD_IS_VOTER).is_some_and(|c| c.status == "True"),
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
        cordoned: node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        marks: FleetMarks {
            desired_role: label(&names.desired_role()),
            swap: annotation(&names.role_swap()),
            step: annotation(&names.role_step()),
            join_node: annotation(&names.role_join_node()),
            snapshot_request: annotation(&names.snapshot_request()),
        },
        report: None,
    }
}

/// The regrade Lease as the decisions see it.
pub fn lease_facts(names: &Names, lease: &Lease) -> LeaseFacts {
    let spec = lease.spec.as_ref();
    let annotations = lease.metadata.annotations.as_ref();
    let annotation = |k: String| annotations.and_then(|a| a.get(&k)).cloned();
    LeaseFacts {
        holder: spec
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty()),
        instance: annotation(names.lease_instance()),
        renew_time: spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.as_second()),
        duration_secs: spec.and_then(|s| s.lease_duration_seconds).map(i64::from),
        swap: annotation(names.lease_swap()),
        swap_out: annotation(names.lease_swap_out()),
        swap_in: annotation(names.lease_swap_in()),
        step: annotation(names.lease_step()),
        step_since: annotation(names.lease_step_since()).and_then(|s| s.parse().ok()),
        stopping: annotation(names.lease_stopping()),
        stopped: annotation(names.lease_stopped()),
        paused: annotation(names.lease_paused()).as_deref() == Some("true"),
        last_swap: annotation(names.lease_last_swap()),
    }
}
