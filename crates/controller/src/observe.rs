//! Reading the cluster into the plain [`FleetView`] the decisions read: every
//! Node, every node Lease in `kube-node-lease`, the hosts' report ConfigMap
//! and the regrade Lease. [`observe`] lists them once; `run` and `swap` keep
//! them by watches instead ([`crate::watch`]), and both are put together
//! into the view by [`assemble`].

use std::collections::BTreeMap;

use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Node},
};
use kube::{Api, Client, api::ListParams};
use protocol::{
    Names, NodeFacts, Report,
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

/// Reads the cluster once, by lists (`status`, `swap --dry-run`: one
/// reading, where starting watches would cost more than it saves).
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
    let facts = nodes
        .items
        .iter()
        .filter(|n| n.metadata.name.is_some())
        .map(|n| (settings.node_facts(n), n.metadata.uid.clone()));
    Ok(assemble(
        settings,
        facts,
        |n| renewed.get(n).copied(),
        &reports,
        lease,
    ))
}

/// Joins what was read into one [`Observed`]: each Node's facts with its
/// node Lease's renew time and its host's report, the heartbeat rule
/// applied. The one place the view is put together, from lists or from the
/// watches' stores. Now is read from the settings' clock.
pub fn assemble(
    settings: &Settings,
    nodes: impl Iterator<Item = (NodeFacts, Option<String>)>,
    renewed: impl Fn(&str) -> Option<i64>,
    reports: &BTreeMap<String, String>,
    lease: Option<Lease>,
) -> Observed {
    let names = settings.names();
    let mut uids = BTreeMap::new();
    let mut facts = Vec::new();
    for (mut f, uid) in nodes {
        if let Some(uid) = uid {
            uids.insert(f.name.clone(), uid);
        }
        f.lease_renewed_at = renewed(&f.name);
        let raw = reports.get(&f.name);
        f.report = raw.and_then(|v| Report::from_json(v));
        f.report_protocol = raw.and_then(|v| protocol::version::of_report(v));
        f.host = f.report.as_ref().and_then(|r| r.host.clone());
        facts.push(f);
    }
    let mut view = FleetView {
        now: settings.clock.unix_secs(),
        settings: settings.core.clone(),
        nodes: facts,
        lease: lease.as_ref().map(|l| kubeview::lease_facts(names, l)),
        pods: vec![],
    };
    protocol::controller::apply_heartbeats(&mut view);
    Observed { view, lease, uids }
}

/// Reads the regrade Lease.
pub async fn read_lease(client: &Client, names: &Names) -> Result<Option<Lease>, kube::Error> {
    Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE)
        .get_opt(&names.lease_name)
        .await
}
