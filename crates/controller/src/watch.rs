//! The controller's view of the cluster, kept by watches instead of lists.
//!
//! [`FleetWatch`] runs one kube-runtime [`watcher`] per kind the decisions
//! read (every Node, the node Leases in `kube-node-lease`, the hosts'
//! heartbeat Leases and report ConfigMaps in their namespace, the shared
//! report ConfigMap of earlier releases by name, the regrade Lease by name), each with kube-runtime's
//! jittered `default_backoff` and feeding a kube-runtime reflector store
//! ([`Writer`]/[`Store`]), which handles the relists. A Node is kept
//! without its managed fields and image list (the bulk of a real Node
//! object, which no decision reads); the view is mapped from the stores at
//! each [`FleetWatch::snapshot`].
//!
//! Idle, this makes no request beyond the watches' own renewals. A change
//! that matters wakes the decision loop ([`FleetWatch::changed`]): a Node
//! whose facts changed (the kubelet's status heartbeats change no fact, so
//! they wake nothing), a node Lease or a host's heartbeat that was stale and
//! is renewed again (a fresh one going stale is a timer, see
//! [`fleetdecide::next_edge`]), a host's heartbeat whose report refusal changed, any
//! change of a report or the regrade Lease.
//!
//! Read your writes: the object a write returns is put into the store at
//! once ([`FleetWatch::apply_lease`], [`FleetWatch::apply_node`]), so the
//! next decision does not repeat it on a store the watch has not caught up
//! with yet. resourceVersions are opaque (the API defines no order on them),
//! so they are only ever compared for equality: until the watch delivers
//! the event carrying the written object's resourceVersion, its earlier
//! events for that object are from before the write and are not applied
//! (a watch delivers one object's events in order). If the watch had
//! delivered that event already, before the write's answer came back, the
//! write is not applied at all: the store holds it, or something newer. A
//! relist is the new truth and ends every wait.
//!
//! Why not `reflector()` itself: it owns its [`Writer`], so a write's answer
//! could not go into the store; the events are applied to the same
//! kube-runtime store here instead, with the equality rule above.

use std::{
    collections::{BTreeMap, VecDeque},
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
    runtime::{
        WatchStreamExt,
        reflector::{ObjectRef, Store, store::Writer},
        watcher,
    },
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
    observe::{self, Observed},
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

/// How many of an object's last resourceVersions are remembered, to tell
/// whether the watch has delivered a write of ours already.
const SEEN: usize = 16;

/// Whether a change from the first object to the second wakes the loop.
type WakesFn<K> = Box<dyn Fn(Option<&K>, Option<&K>) -> bool + Send + Sync>;

/// One kind's kube-runtime store, with the writes of ours its watch has not
/// shown yet.
struct Kept<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    name: &'static str,
    writer: Writer<K>,
    /// Per object, the resourceVersions the watch delivered last (newest
    /// last), compared for equality only.
    seen: BTreeMap<String, VecDeque<String>>,
    /// Per object, the resourceVersion of a write of ours the watch has not
    /// delivered yet.
    pending: BTreeMap<String, String>,
    synced: bool,
    wakes: WakesFn<K>,
}

impl<K> Kept<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn new(name: &'static str, wakes: WakesFn<K>) -> (Self, Store<K>) {
        let writer = Writer::default();
        let reader = writer.as_reader();
        let kept = Self {
            name,
            writer,
            seen: BTreeMap::new(),
            pending: BTreeMap::new(),
            synced: false,
            wakes,
        };
        (kept, reader)
    }

    fn current(&self, k: &K) -> Option<Arc<K>> {
        self.writer.as_reader().get(&ObjectRef::from_obj(k))
    }

    /// Applies one watch event; whether it wakes the decision loop.
    fn handle(&mut self, event: watcher::Event<K>) -> bool {
        match &event {
            watcher::Event::Init => {
                self.writer.apply_watcher_event(&event);
                false
            }
            watcher::Event::InitApply(k) => {
                self.remember(k);
                self.writer.apply_watcher_event(&event);
                false
            }
            watcher::Event::InitDone => {
                self.writer.apply_watcher_event(&event);
                self.pending.clear();
                self.synced = true;
                true
            }
            watcher::Event::Apply(k) => {
                self.remember(k);
                let (name, rv) = (name_of(k), k.meta().resource_version.clone());
                if let Some(ours) = self.pending.get(&name) {
                    if rv.as_ref() != Some(ours) {
                        // From before a write of ours the store holds already.
                        return false;
                    }
                    self.pending.remove(&name);
                }
                let wakes = (self.wakes)(self.current(k).as_deref(), Some(k));
                self.writer.apply_watcher_event(&event);
                wakes
            }
            watcher::Event::Delete(k) => {
                let name = name_of(k);
                self.pending.remove(&name);
                self.seen.remove(&name);
                let held = self.current(k).is_some();
                self.writer.apply_watcher_event(&event);
                held
            }
        }
    }

    fn remember(&mut self, k: &K) {
        let Some(rv) = k.meta().resource_version.clone() else {
            return;
        };
        let seen = self.seen.entry(name_of(k)).or_default();
        if seen.len() == SEEN {
            seen.pop_front();
        }
        seen.push_back(rv);
    }

    /// Puts an object a write of ours returned into the store, unless the
    /// watch delivered it already; whether it changed the store.
    fn apply_own(&mut self, k: &K) -> bool {
        let name = name_of(k);
        if let Some(rv) = &k.meta().resource_version {
            if self.seen.get(&name).is_some_and(|s| s.contains(rv)) {
                return false;
            }
            self.pending.insert(name, rv.clone());
        }
        self.writer
            .apply_watcher_event(&watcher::Event::Apply(k.clone()));
        true
    }
}

fn name_of<K: Resource>(k: &K) -> String {
    k.meta().name.clone().unwrap_or_default()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic in a watch task while it held the lock leaves plain data
    // behind; the next event overwrites it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The six watches and their stores.
pub struct FleetWatch {
    nodes: (Arc<Mutex<Kept<Node>>>, Store<Node>),
    node_leases: (Arc<Mutex<Kept<Lease>>>, Store<Lease>),
    heartbeats: (Arc<Mutex<Kept<Lease>>>, Store<Lease>),
    own_reports: (Arc<Mutex<Kept<ConfigMap>>>, Store<ConfigMap>),
    reports: (Arc<Mutex<Kept<ConfigMap>>>, Store<ConfigMap>),
    lease: (Arc<Mutex<Kept<Lease>>>, Store<Lease>),
    /// Each Node's facts, by name, with the resourceVersion they were
    /// mapped from: mapped again only when it is not the same one.
    facts: Mutex<BTreeMap<String, (Option<String>, NodeFacts)>>,
    /// When this controller first saw each Node as it reads now: "NotReady
    /// for the grace" is counted from here, never from a time on the Node.
    sightings: Mutex<fleetdecide::Sightings>,
    last_error: Arc<Mutex<Option<String>>>,
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

/// Drops what no decision reads of a Node: its managed fields and its
/// image list, most of a real Node object's size.
fn slim(n: &mut Node) {
    n.metadata.managed_fields = None;
    if let Some(s) = n.status.as_mut() {
        s.images = None;
    }
}

fn kept<K>(name: &'static str, wakes: WakesFn<K>) -> (Arc<Mutex<Kept<K>>>, Store<K>)
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let (k, reader) = Kept::new(name, wakes);
    (Arc::new(Mutex::new(k)), reader)
}

impl FleetWatch {
    /// Starts the watches with `client`, whose read timeout must be longer
    /// than a watch's server-side timeout (see [`crate::cluster::Clients`]).
    pub fn start(client: &Client, settings: &Settings) -> Self {
        let names = settings.names().clone();
        let (tx, rx) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let last_error = Arc::new(Mutex::new(None));
        let grace = settings.core.heartbeat_grace;
        let clock = settings.clock.clone();
        let node_settings = settings.clone();
        let nodes = kept(
            "Nodes",
            Box::new(move |a: Option<&Node>, b: Option<&Node>| {
                let facts = |n: Option<&Node>| {
                    n.map(|n| (node_settings.node_facts(n), n.metadata.uid.clone()))
                };
                facts(a) != facts(b)
            }),
        );
        let renewed = |l: Option<&Lease>| {
            l.and_then(|l| Some(l.spec.as_ref()?.renew_time.as_ref()?.0.as_second()))
        };
        // A renewal of a fresh Lease changes no decision and wakes nothing.
        // A stale one renewed (a host back) does; a fresh one going stale
        // is a timer.
        let back = move |stale_after: i64| {
            let clock = clock.clone();
            move |a: Option<&Lease>, b: Option<&Lease>| match (renewed(a), renewed(b)) {
                (Some(old), Some(_)) => clock.unix_secs().saturating_sub(old) > stale_after,
                (a, b) => a != b,
            }
        };
        // Kubelets renew every 10 s.
        let node_leases = kept("node Leases", Box::new(back(grace)));
        let host_back = back(settings.core.actuator_heartbeat_max_age);
        let refused_key = names.report_refused();
        let refusal = move |l: Option<&Lease>| {
            l.and_then(|l| l.metadata.annotations.as_ref()?.get(&refused_key).cloned())
        };
        let heartbeats = kept(
            "the hosts' heartbeat Leases",
            Box::new(move |a: Option<&Lease>, b: Option<&Lease>| {
                host_back(a, b) || refusal(a) != refusal(b)
            }),
        );
        let own_reports = kept(
            "the hosts' report ConfigMaps",
            Box::new(|a: Option<&ConfigMap>, b: Option<&ConfigMap>| {
                a.and_then(|c| c.data.as_ref()) != b.and_then(|c| c.data.as_ref())
            }),
        );
        let reports = kept(
            "the shared report ConfigMap",
            Box::new(|a: Option<&ConfigMap>, b: Option<&ConfigMap>| {
                a.and_then(|c| c.data.as_ref()) != b.and_then(|c| c.data.as_ref())
            }),
        );
        let lease = kept(
            "the regrade Lease",
            Box::new(|a: Option<&Lease>, b: Option<&Lease>| a != b),
        );
        let tasks = vec![
            spawn(
                Api::<Node>::all(client.clone()),
                // From the API server's cache: no quorum read of every Node
                // on each (re)list.
                watcher::Config::default().any_semantic(),
                slim,
                nodes.0.clone(),
                last_error.clone(),
                tx.clone(),
            ),
            spawn(
                Api::<Lease>::namespaced(client.clone(), protocol::names::NODE_LEASE_NAMESPACE),
                watcher::Config::default().any_semantic(),
                |l: &mut Lease| l.metadata.managed_fields = None,
                node_leases.0.clone(),
                last_error.clone(),
                tx.clone(),
            ),
            // The hosts' objects, from the API server's cache: one watch of
            // each kind whatever the fleet's size.
            spawn(
                Api::<Lease>::namespaced(client.clone(), &names.hosts_namespace),
                watcher::Config::default().any_semantic(),
                |l: &mut Lease| l.metadata.managed_fields = None,
                heartbeats.0.clone(),
                last_error.clone(),
                tx.clone(),
            ),
            spawn(
                Api::<ConfigMap>::namespaced(client.clone(), &names.hosts_namespace),
                watcher::Config::default().any_semantic(),
                |c: &mut ConfigMap| c.metadata.managed_fields = None,
                own_reports.0.clone(),
                last_error.clone(),
                tx.clone(),
            ),
            spawn(
                Api::<ConfigMap>::namespaced(client.clone(), &names.report_namespace),
                watcher::Config::default().fields(&format!("metadata.name={REPORT_CONFIGMAP}")),
                |_: &mut ConfigMap| {},
                reports.0.clone(),
                last_error.clone(),
                tx.clone(),
            ),
            spawn(
                Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE),
                watcher::Config::default().fields(&format!("metadata.name={}", names.lease_name)),
                |_: &mut Lease| {},
                lease.0.clone(),
                last_error.clone(),
                tx.clone(),
            ),
        ];
        Self {
            nodes,
            node_leases,
            heartbeats,
            own_reports,
            reports,
            lease,
            facts: Mutex::new(BTreeMap::new()),
            sightings: Mutex::new(fleetdecide::Sightings::default()),
            last_error,
            tx,
            rx,
            tasks,
        }
    }

    /// The kinds and whether each has finished its first list.
    fn listed(&self) -> [(&'static str, bool); 6] {
        fn of<K: Resource<DynamicType = ()> + Clone>(k: &Mutex<Kept<K>>) -> (&'static str, bool) {
            let k = lock(k);
            (k.name, k.synced)
        }
        [
            of(&self.nodes.0),
            of(&self.node_leases.0),
            of(&self.heartbeats.0),
            of(&self.own_reports.0),
            of(&self.reports.0),
            of(&self.lease.0),
        ]
    }

    /// Whether every watch has finished its first list.
    pub fn synced(&self) -> bool {
        self.listed().iter().all(|(_, ok)| *ok)
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
        let kinds = self
            .listed()
            .iter()
            .filter(|(_, ok)| !ok)
            .map(|(k, _)| *k)
            .collect::<Vec<_>>()
            .join(", ");
        Err(WatchError::NotSynced {
            kinds,
            secs: bound.as_secs(),
            last: lock(&self.last_error)
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
        let renewed: BTreeMap<String, i64> = self
            .node_leases
            .1
            .state()
            .iter()
            .filter_map(|l| {
                let t = l.spec.as_ref()?.renew_time.as_ref()?.0.as_second();
                Some((l.metadata.name.clone()?, t))
            })
            .collect();
        let names = settings.names();
        let legacy = self
            .reports
            .1
            .get(&ObjectRef::new(REPORT_CONFIGMAP).within(&names.report_namespace));
        let own = self.own_reports.1.state();
        let heartbeats = self.heartbeats.1.state();
        let reports = observe::Reports::read(
            names,
            legacy.as_deref(),
            own.iter().map(|c| c.as_ref()),
            heartbeats.iter().map(|l| l.as_ref()),
        );
        let lease = self
            .lease
            .1
            .get(&ObjectRef::new(&settings.names().lease_name).within(LEASE_NAMESPACE))
            .map(|l| (*l).clone());
        let facts = self.node_facts(settings);
        observe::assemble(
            settings,
            facts.into_iter(),
            |n| renewed.get(n).copied(),
            &reports,
            lease,
            &mut lock(&self.sightings),
        )
    }

    /// Every Node's facts and uid, by name (the store keeps no order; the
    /// decisions and the output read the Nodes by name). A Node is mapped
    /// once per resourceVersion, not at every decision.
    fn node_facts(&self, settings: &Settings) -> Vec<(NodeFacts, Option<String>)> {
        let mut cache = lock(&self.facts);
        let mut fresh = BTreeMap::new();
        for n in self.nodes.1.state() {
            let Some(name) = n.metadata.name.clone() else {
                continue;
            };
            let rv = n.metadata.resource_version.clone();
            let facts = match cache.remove(&name) {
                Some((held, f)) if held.is_some() && held == rv => f,
                _ => settings.node_facts(&n),
            };
            fresh.insert(name, (rv, facts, n.metadata.uid.clone()));
        }
        let out = fresh
            .values()
            .map(|(_, f, uid)| (f.clone(), uid.clone()))
            .collect();
        *cache = fresh
            .into_iter()
            .map(|(name, (rv, f, _))| (name, (rv, f)))
            .collect();
        out
    }

    /// Puts the regrade Lease a write returned into the store.
    pub fn apply_lease(&self, _settings: &Settings, lease: &Lease) {
        if lock(&self.lease.0).apply_own(lease) {
            self.tx.send_modify(|g| *g = g.wrapping_add(1));
        }
    }

    /// Puts a Node a write returned into the store.
    pub fn apply_node(&self, _settings: &Settings, node: &Node) {
        let mut node = node.clone();
        slim(&mut node);
        if lock(&self.nodes.0).apply_own(&node) {
            self.tx.send_modify(|g| *g = g.wrapping_add(1));
        }
    }
}

fn spawn<K>(
    api: Api<K>,
    config: watcher::Config,
    strip: fn(&mut K),
    kept: Arc<Mutex<Kept<K>>>,
    last_error: Arc<Mutex<Option<String>>>,
    tx: Arc<watch::Sender<u64>>,
) -> JoinHandle<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    tokio::spawn(async move {
        let name = lock(&kept).name;
        // The watcher relists after a 410 and reconnects after an error;
        // the jittered backoff keeps a dead API server from being hammered.
        let mut events = watcher(api, config).default_backoff().modify(strip).boxed();
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    warn!("watching {name}: {e}; the watch is retried");
                    *lock(&last_error) = Some(format!("{name}: {e}"));
                    continue;
                }
            };
            if lock(&kept).handle(event) {
                tx.send_modify(|g| *g = g.wrapping_add(1));
            }
        }
        debug!("the watch of {name} ended");
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn cm(rv: &str, v: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("k".into(), v.into())])),
            ..ConfigMap::default()
        }
    }

    fn held(k: &Kept<ConfigMap>) -> Option<String> {
        k.current(&cm("", ""))
            .and_then(|c| c.data.as_ref()?.get("k").cloned())
    }

    fn listed() -> Kept<ConfigMap> {
        let (mut k, _) = Kept::new("c", Box::new(|a, b| a != b));
        k.handle(watcher::Event::Init);
        k.handle(watcher::Event::InitApply(cm("b", "old")));
        assert!(k.handle(watcher::Event::InitDone));
        k
    }

    #[test]
    fn a_write_of_ours_is_read_back_at_once_and_events_from_before_it_are_not_applied() {
        let mut k = listed();
        // Opaque versions: "a" and "z" say nothing of order.
        assert!(k.apply_own(&cm("a", "ours")));
        assert_eq!(held(&k).as_deref(), Some("ours"));
        assert!(!k.handle(watcher::Event::Apply(cm("z", "before ours"))));
        assert_eq!(held(&k).as_deref(), Some("ours"));
        // The watch reaches our write, then goes on.
        k.handle(watcher::Event::Apply(cm("a", "ours")));
        assert!(k.handle(watcher::Event::Apply(cm("y", "after ours"))));
        assert_eq!(held(&k).as_deref(), Some("after ours"));
    }

    #[test]
    fn a_write_the_watch_delivered_already_does_not_hide_what_came_after_it() {
        let mut k = listed();
        k.handle(watcher::Event::Apply(cm("a", "ours")));
        k.handle(watcher::Event::Apply(cm("c", "theirs")));
        assert!(!k.apply_own(&cm("a", "ours")));
        assert_eq!(held(&k).as_deref(), Some("theirs"));
        assert!(k.handle(watcher::Event::Apply(cm("d", "next"))));
        assert_eq!(held(&k).as_deref(), Some("next"));
    }

    #[test]
    fn a_relist_is_the_new_truth_and_ends_the_wait_for_a_write() {
        let mut k = listed();
        k.apply_own(&cm("a", "ours"));
        k.handle(watcher::Event::Init);
        k.handle(watcher::Event::InitApply(cm("q", "relisted")));
        k.handle(watcher::Event::InitDone);
        assert_eq!(held(&k).as_deref(), Some("relisted"));
        assert!(k.handle(watcher::Event::Apply(cm("r", "then"))));
        assert_eq!(held(&k).as_deref(), Some("then"));
    }

    #[test]
    fn a_deleted_object_leaves_the_store_and_wakes_only_if_it_was_held() {
        let mut k = listed();
        assert!(k.handle(watcher::Event::Delete(cm("e", "gone"))));
        assert_eq!(held(&k), None);
        assert!(!k.handle(watcher::Event::Delete(cm("f", "gone"))));
    }
}
