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
    controller::FleetView,
    names::{LEASE_NAMESPACE, REPORT_CONFIGMAP},
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
        let mut f = kubeview::node_facts(names, node);
        f.lease_renewed_at = renewed.get(&name).copied();
        f.report = reports.get(&name).and_then(|v| Report::from_json(v));
        facts.push(f);
    }
    let mut view = FleetView {
        now: now(),
        settings: settings.core.clone(),
        nodes: facts,
        lease: lease.as_ref().map(|l| kubeview::lease_facts(names, l)),
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
