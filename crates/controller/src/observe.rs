//! Reading the cluster into the plain [`FleetView`] the decisions read: every
//! Node, every node Lease in `kube-node-lease`, the hosts' heartbeat Leases
//! and report ConfigMaps in the hosts' namespace (and, for one release, the
//! shared report ConfigMap earlier actuators write) and the regrade Lease.
//! [`observe`] lists them once; `run` and `swap` keep them by watches
//! instead ([`crate::watch`]), and both are put together into the view by
//! [`assemble`].

use std::collections::BTreeMap;

use fleetdecide::{FleetView, Sightings};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Node},
};
use kube::{Api, Client, api::ListParams};
use kubeview::hostobjects::Heartbeat;
use protocol::{
    Names, NodeFacts, Report,
    names::{LEASE_NAMESPACE, REPORT_CONFIGMAP},
};

use crate::config::Settings;

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
    let node_leases =
        Api::<Lease>::namespaced(client.clone(), protocol::names::NODE_LEASE_NAMESPACE)
            .list(&ListParams::default())
            .await?;
    let legacy = Api::<ConfigMap>::namespaced(client.clone(), &names.report_namespace)
        .get_opt(REPORT_CONFIGMAP)
        .await?;
    // From the API server's cache, like the watches' lists.
    let cached = ListParams::default().match_any();
    let own = Api::<ConfigMap>::namespaced(client.clone(), &names.hosts_namespace)
        .list(&cached)
        .await?;
    let heartbeats = Api::<Lease>::namespaced(client.clone(), &names.hosts_namespace)
        .list(&cached)
        .await?;
    let reports = Reports::read(
        names,
        legacy.as_ref(),
        own.items.iter(),
        heartbeats.items.iter(),
    );
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
    // Read once: every NotReady Node is counted from now.
    Ok(assemble(
        settings,
        facts,
        |n| renewed.get(n).copied(),
        &reports,
        lease,
        &mut Sightings::default(),
    ))
}

/// The hosts' reports and heartbeats as read, by Node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reports {
    /// Each host's report ConfigMap's value, by its name (the Node's).
    pub own: BTreeMap<String, String>,
    /// Each host's heartbeat, by its Lease's name (the Node's).
    pub heartbeats: BTreeMap<String, Heartbeat>,
    /// The shared report ConfigMap of earlier releases, by key.
    pub legacy: BTreeMap<String, String>,
}

impl Reports {
    /// From the objects as read: the shared ConfigMap (if any), the hosts'
    /// report ConfigMaps and their heartbeat Leases.
    pub fn read<'a>(
        names: &Names,
        legacy: Option<&ConfigMap>,
        own: impl Iterator<Item = &'a ConfigMap>,
        heartbeats: impl Iterator<Item = &'a Lease>,
    ) -> Self {
        Self {
            own: kubeview::hostobjects::reports_by_node(own),
            heartbeats: heartbeats
                .filter_map(|l| {
                    let node = l.metadata.name.clone()?;
                    let hb = kubeview::hostobjects::heartbeat(names, &node, l);
                    Some((node, hb))
                })
                .collect(),
            legacy: legacy.and_then(|cm| cm.data.clone()).unwrap_or_default(),
        }
    }

    /// `node`'s report as raw text: its own ConfigMap's, or the shared
    /// one's where that is newer ([`kubeview::hostobjects::newer_report`]).
    pub fn raw(&self, node: &str) -> Option<&str> {
        kubeview::hostobjects::newer_report(
            self.own.get(node).map(String::as_str),
            self.legacy.get(node).map(String::as_str),
        )
    }
}

/// Joins what was read into one [`Observed`]: each Node's facts with its
/// node Lease's renew time, its host's report and heartbeat, the heartbeat
/// rule applied, each Node's readiness dated by `sightings` (this
/// controller's own first sighting) and weighed against its host's own
/// view of etcd. The one place the view is put together, from lists or
/// from the watches' stores. Now is read from the settings' clock.
pub fn assemble(
    settings: &Settings,
    nodes: impl Iterator<Item = (NodeFacts, Option<String>)>,
    renewed: impl Fn(&str) -> Option<i64>,
    reports: &Reports,
    lease: Option<Lease>,
    sightings: &mut Sightings,
) -> Observed {
    let names = settings.names();
    let mut uids = BTreeMap::new();
    let mut facts = Vec::new();
    for (mut f, uid) in nodes {
        if let Some(uid) = uid {
            uids.insert(f.name.clone(), uid);
        }
        f.lease_renewed_at = renewed(&f.name);
        let raw = reports.raw(&f.name);
        f.report = raw.and_then(Report::from_json);
        f.report_protocol = raw.and_then(protocol::version::of_report);
        f.host = f.report.as_ref().and_then(|r| r.host.clone());
        if let Some(hb) = reports.heartbeats.get(&f.name) {
            // The report is written when it changes, the heartbeat every
            // period: the host is alive as of the later of the two.
            if let (Some(h), Some(at)) = (f.host.as_mut(), hb.renewed_at) {
                h.heartbeat_at = h.heartbeat_at.max(at);
            }
            f.report_refused = hb.report_refused.clone();
        }
        facts.push(f);
    }
    let mut view = FleetView {
        now: settings.clock.unix_secs(),
        settings: settings.core.clone(),
        nodes: facts,
        lease: lease.as_ref().map(|l| kubeview::lease_facts(names, l)),
        pods: vec![],
    };
    fleetdecide::apply_heartbeats(&mut view);
    sightings.apply(&mut view);
    fleetdecide::weigh_evidence(&mut view);
    Observed { view, lease, uids }
}

/// Reads the regrade Lease.
pub async fn read_lease(client: &Client, names: &Names) -> Result<Option<Lease>, kube::Error> {
    Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE)
        .get_opt(&names.lease_name)
        .await
}
