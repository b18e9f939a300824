//! The controller's view of the cluster, kept by watches instead of lists.
//!
//! [`FleetWatch`] runs one kube-runtime [`watcher`] per kind the decisions
//! read: every Node, the node Leases in `kube-node-lease`, the report
//! ConfigMap (by name) and the regrade Lease (by name). Each keeps a small
//! store of what the decisions need, not the objects: a Node is kept as its
//! [`NodeFacts`] (a few hundred bytes, where a real Node object is kilobytes
//! with its images and managed fields), a node Lease as its renew time.
//! Only the regrade Lease is kept whole, since its resourceVersion is the
//! precondition of every write to it.
//!
//! Idle, this makes no request beyond the watches' own renewals (the API
//! server closes a watch after about five minutes and the watcher starts
//! another from the resourceVersion it holds). A change that matters wakes
//! the decision loop ([`FleetWatch::changed`]): a Node whose facts changed
//! (the kubelet's status heartbeats change no fact, so they wake nothing),
//! a node Lease that was stale and is renewed again (a fresh Lease going
//! stale is a timer, see [`crate::wake`]), any change of the report or the
//! regrade Lease.
//!
//! Read your writes: the object a write returns is put into the store at
//! once ([`FleetWatch::apply_lease`], [`FleetWatch::apply_node`]), so the
//! next decision does not repeat it on a store the watch has not caught up
//! with yet. A watch event older than what the store holds is then ignored:
//! resourceVersions are compared as numbers (etcd's revisions, which is what
//! every API server backed by etcd, k3s's included, hands out).

use std::{
    collections::BTreeMap,
    fmt::Debug,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Node},
};
use kube::{
    Api, Client, Resource,
    runtime::{WatchStreamExt, watcher},
};
use protocol::{
    NodeFacts,
    names::{LEASE_NAMESPACE, REPORT_CONFIGMAP},
};
use serde::de::DeserializeOwned;
use tokio::{sync::watch, task::JoinHandle};
use tracing::{debug, warn};

use crate::{
    config::Settings,
    observe::{self, NODE_LEASE_NAMESPACE, Observed},
};

/// Why the watches could not give a view.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// A watch did not finish its first list in time.
    #[error(
        "the watches did not list {kinds} within {secs} s (is the API server reachable?{last})"
    )]
    NotSynced {
        /// The kinds still unlisted.
        kinds: String,
        /// The bound waited.
        secs: u64,
        /// The last error a watch met, if any.
        last: String,
    },
}

/// One kind's store: what the decisions need of each object, by name, with
/// the resourceVersion it was read at.
#[derive(Debug)]
struct Store<V> {
    items: BTreeMap<String, (u64, V)>,
    /// A relist in progress (`Init` .. `InitDone`): the new contents.
    relist: Option<BTreeMap<String, (u64, V)>>,
    synced: bool,
}

impl<V> Default for Store<V> {
    fn default() -> Self {
        Self {
            items: BTreeMap::new(),
            relist: None,
            synced: false,
        }
    }
}

/// A Node as kept: its facts (without the node Lease and the report, which
/// are joined in at each snapshot) and its uid for Events.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeEntry {
    facts: NodeFacts,
    uid: Option<String>,
}

#[derive(Debug, Default)]
struct Stores {
    nodes: Store<NodeEntry>,
    node_leases: Store<i64>,
    reports: Store<BTreeMap<String, String>>,
    lease: Store<Lease>,
    last_error: Option<String>,
}

/// The numeric resourceVersion of an object (0 when absent or not a number:
/// such an object always replaces what is held).
fn rv<K: Resource>(k: &K) -> u64 {
    k.meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The four watches and their stores.
pub struct FleetWatch {
    stores: Arc<Mutex<Stores>>,
    tx: Arc<watch::Sender<u64>>,
    rx: watch::Receiver<u64>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for FleetWatch {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn lock(stores: &Mutex<Stores>) -> std::sync::MutexGuard<'_, Stores> {
    // A panic in a watch task while it held the lock leaves plain data
    // behind; the next event overwrites it.
    stores.lock().unwrap_or_else(|e| e.into_inner())
}

/// Maps an object to what its store keeps (`None`: keep nothing).
type MapFn<K, V> = Box<dyn Fn(&K) -> Option<V> + Send + Sync>;
/// Whether a change from the first value to the second wakes the loop.
type WakesFn<V> = Box<dyn Fn(Option<&V>, Option<&V>) -> bool + Send + Sync>;

/// What one watch does with its kind's events.
struct Kind<K, V> {
    name: &'static str,
    store: fn(&mut Stores) -> &mut Store<V>,
    map: MapFn<K, V>,
    /// Whether a change from the first value to the second wakes the loop.
    wakes: WakesFn<V>,
}

impl FleetWatch {
    /// Starts the watches with `client`, whose read timeout must be longer
    /// than a watch's server-side timeout (see [`crate::cluster::clients`]).
    pub fn start(client: &Client, settings: &Settings) -> Self {
        let names = settings.names().clone();
        let stores = Arc::new(Mutex::new(Stores::default()));
        let (tx, rx) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let grace = settings.core.heartbeat_grace;
        let mut tasks = Vec::new();
        let node_names = names.clone();
        tasks.push(spawn(
            Api::<Node>::all(client.clone()),
            // From the API server's cache: no quorum read of every Node on
            // each (re)list.
            watcher::Config::default().any_semantic(),
            Kind {
                name: "Nodes",
                store: |s| &mut s.nodes,
                map: Box::new(move |n: &Node| {
                    Some(NodeEntry {
                        facts: kubeview::node_facts(&node_names, n),
                        uid: n.metadata.uid.clone(),
                    })
                }),
                wakes: Box::new(|a, b| a != b),
            },
            stores.clone(),
            tx.clone(),
        ));
        tasks.push(spawn(
            Api::<Lease>::namespaced(client.clone(), NODE_LEASE_NAMESPACE),
            watcher::Config::default().any_semantic(),
            Kind {
                name: "node Leases",
                store: |s| &mut s.node_leases,
                map: Box::new(|l: &Lease| {
                    Some(l.spec.as_ref()?.renew_time.as_ref()?.0.as_second())
                }),
                // Kubelets renew every 10 s: a renewal of a fresh Lease
                // changes no decision and wakes nothing. A stale one renewed
                // (a host back) does; a fresh one going stale is a timer.
                wakes: Box::new(move |old, new| match (old, new) {
                    (Some(old), Some(_)) => observe::now().saturating_sub(*old) > grace,
                    (a, b) => a != b,
                }),
            },
            stores.clone(),
            tx.clone(),
        ));
        tasks.push(spawn(
            Api::<ConfigMap>::namespaced(client.clone(), &names.report_namespace),
            watcher::Config::default().fields(&format!("metadata.name={REPORT_CONFIGMAP}")),
            Kind {
                name: "the report ConfigMap",
                store: |s| &mut s.reports,
                map: Box::new(|cm: &ConfigMap| Some(cm.data.clone().unwrap_or_default())),
                wakes: Box::new(|a, b| a != b),
            },
            stores.clone(),
            tx.clone(),
        ));
        tasks.push(spawn(
            Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE),
            watcher::Config::default().fields(&format!("metadata.name={}", names.lease_name)),
            Kind {
                name: "the regrade Lease",
                store: |s| &mut s.lease,
                map: Box::new(|l: &Lease| Some(l.clone())),
                wakes: Box::new(|a, b| a != b),
            },
            stores.clone(),
            tx.clone(),
        ));
        Self {
            stores,
            tx,
            rx,
            tasks,
        }
    }

    /// Whether every watch has finished its first list.
    pub fn synced(&self) -> bool {
        let s = lock(&self.stores);
        s.nodes.synced && s.node_leases.synced && s.reports.synced && s.lease.synced
    }

    /// Waits until every watch has listed once, at most `bound`.
    pub async fn wait_synced(&self, bound: Duration) -> Result<(), WatchError> {
        let mut rx = self.rx.clone();
        let waited = tokio::time::timeout(bound, async {
            while !self.synced() {
                if rx.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        if waited.is_ok() && self.synced() {
            return Ok(());
        }
        let s = lock(&self.stores);
        let kinds = [
            ("Nodes", s.nodes.synced),
            ("node Leases", s.node_leases.synced),
            ("the report ConfigMap", s.reports.synced),
            ("the regrade Lease", s.lease.synced),
        ]
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(k, _)| *k)
        .collect::<Vec<_>>()
        .join(", ");
        Err(WatchError::NotSynced {
            kinds,
            secs: bound.as_secs(),
            last: s
                .last_error
                .as_deref()
                .map(|e| format!(" last error: {e}"))
                .unwrap_or_default(),
        })
    }

    /// A receiver that changes whenever something that matters changed.
    pub fn changed(&self) -> watch::Receiver<u64> {
        self.rx.clone()
    }

    /// The view now, from the stores (no request).
    pub fn snapshot(&self, settings: &Settings) -> Observed {
        let s = lock(&self.stores);
        let renewed: BTreeMap<&str, i64> = s
            .node_leases
            .items
            .iter()
            .map(|(k, (_, t))| (k.as_str(), *t))
            .collect();
        let reports = s
            .reports
            .items
            .get(REPORT_CONFIGMAP)
            .map(|(_, d)| d.clone())
            .unwrap_or_default();
        let lease = s
            .lease
            .items
            .get(&settings.names().lease_name)
            .map(|(_, l)| l.clone());
        let nodes = s
            .nodes
            .items
            .values()
            .map(|(_, e)| (e.facts.clone(), e.uid.clone()));
        observe::assemble(
            settings,
            nodes,
            |n| renewed.get(n).copied(),
            &reports,
            lease,
        )
    }

    /// Puts the regrade Lease a write returned into the store.
    pub fn apply_lease(&self, settings: &Settings, lease: &Lease) {
        let mut s = lock(&self.stores);
        let v = rv(lease);
        let name = settings.names().lease_name.clone();
        if s.lease.items.get(&name).is_some_and(|(held, _)| *held > v) {
            return;
        }
        s.lease.items.insert(name, (v, lease.clone()));
        drop(s);
        self.tx.send_modify(|g| *g = g.wrapping_add(1));
    }

    /// Puts a Node a write returned into the store.
    pub fn apply_node(&self, settings: &Settings, node: &Node) {
        let Some(name) = node.metadata.name.clone() else {
            return;
        };
        let mut s = lock(&self.stores);
        let v = rv(node);
        if s.nodes.items.get(&name).is_some_and(|(held, _)| *held > v) {
            return;
        }
        let entry = NodeEntry {
            facts: kubeview::node_facts(settings.names(), node),
            uid: node.metadata.uid.clone(),
        };
        s.nodes.items.insert(name, (v, entry));
        drop(s);
        self.tx.send_modify(|g| *g = g.wrapping_add(1));
    }
}

fn spawn<K, V>(
    api: Api<K>,
    config: watcher::Config,
    kind: Kind<K, V>,
    stores: Arc<Mutex<Stores>>,
    tx: Arc<watch::Sender<u64>>,
) -> JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    V: Send + 'static,
{
    tokio::spawn(async move {
        // The watcher relists after a 410 and reconnects after an error;
        // the backoff keeps a dead API server from being hammered.
        let mut events = watcher(api, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    warn!("watching {}: {e}; the watch is retried", kind.name);
                    lock(&stores).last_error = Some(format!("{}: {e}", kind.name));
                    continue;
                }
            };
            let woke = {
                let mut s = lock(&stores);
                let store = (kind.store)(&mut s);
                handle(store, &kind, event)
            };
            if woke {
                tx.send_modify(|g| *g = g.wrapping_add(1));
            }
        }
        debug!("the watch of {} ended", kind.name);
    })
}

/// Applies one event to a store; whether it wakes the decision loop.
fn handle<K: Resource, V>(
    store: &mut Store<V>,
    kind: &Kind<K, V>,
    event: watcher::Event<K>,
) -> bool {
    let name = |k: &K| k.meta().name.clone().unwrap_or_default();
    match event {
        watcher::Event::Init => {
            store.relist = Some(BTreeMap::new());
            false
        }
        watcher::Event::InitApply(k) => {
            if let (Some(buf), Some(v)) = (store.relist.as_mut(), (kind.map)(&k)) {
                buf.insert(name(&k), (rv(&k), v));
            }
            false
        }
        watcher::Event::InitDone => {
            if let Some(buf) = store.relist.take() {
                store.items = buf;
            }
            store.synced = true;
            true
        }
        watcher::Event::Apply(k) => {
            let key = name(&k);
            let v = rv(&k);
            let old = store.items.get(&key);
            if old.is_some_and(|(held, _)| *held > v) {
                // Older than a write of ours already in the store.
                return false;
            }
            let Some(new) = (kind.map)(&k) else {
                return store.items.remove(&key).is_some();
            };
            let wakes = (kind.wakes)(old.map(|(_, o)| o), Some(&new));
            store.items.insert(key, (v, new));
            wakes
        }
        watcher::Event::Delete(k) => store.items.remove(&name(&k)).is_some(),
    }
}
