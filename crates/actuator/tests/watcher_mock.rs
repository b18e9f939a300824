//! The watcher's API traffic against kube's mock service: it watches its own
//! Node and the regrade Lease by name only, and applies its own report key
//! (server-side apply, its own field manager) and nothing else; idle, it
//! sends nothing but its watches.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use actuator::{
    config::{FileConfig, Overrides, Settings},
    etcdreport::READ_PACE,
    metrics::Metrics,
    watch::{Decided, Decisions, Watcher},
};
use clock::Clock;
use http::{Method, Request, Response, StatusCode};
use kube::{Client, client::Body};
use protocol::{
    Phase, Report,
    report::{Detail, ReportStep},
};
use serde_json::{Value, json};
use standins::fixture::TestHost;

/// Whether `r` is a heartbeat write after `prev` (see the real-API tests'
/// `support::is_heartbeat`, the same rule).
fn heartbeat(prev: Option<&Report>, r: &Report) -> bool {
    if r.step == protocol::report::ReportStep::None {
        return true;
    }
    prev.is_some_and(|p| {
        p.host != r.host
            && (&p.swap, p.step, p.phase, p.detail, &p.reason, p.started_at)
                == (&r.swap, r.step, r.phase, r.detail, &r.reason, r.started_at)
    })
}

fn bin_dir() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_fleet-role-actuator"))
        .parent()
        .unwrap()
}

const P: &str = "github-runner.exadev.com";

/// What the mock API holds and saw.
#[derive(Default)]
struct World {
    nodes: BTreeMap<String, Value>,
    lease: Option<Value>,
    report: BTreeMap<String, String>,
    /// The host's heartbeat Lease as last written (none: as enroll made it).
    heartbeat: Option<Value>,
    /// Events to send on the next watch of the own Node.
    events: Vec<Value>,
    /// Every request: method, path and query, body.
    seen: Vec<(Method, String, String)>,
    /// Watches left open (answering them would end the stream).
    parked: Vec<tower_test::mock::SendResponse<Response<Body>>>,
    /// Events to send on the next watch of the Lease.
    lease_events: Vec<Value>,
    /// Lease watches left open.
    lease_parked: Vec<tower_test::mock::SendResponse<Response<Body>>>,
}

/// The lines of a watch's answer: each object `MODIFIED`.
fn watch_lines(objects: Vec<Value>) -> Response<Body> {
    let lines: Vec<u8> = objects
        .into_iter()
        .flat_map(|o| {
            let mut l = serde_json::to_vec(&json!({"type":"MODIFIED","object":o})).unwrap();
            l.push(b'\n');
            l
        })
        .collect();
    Response::builder()
        .status(200)
        .body(Body::from(lines))
        .unwrap()
}

/// The Lease's path, as the watcher's lists and watches of it name it.
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";

type Shared = Arc<Mutex<World>>;

fn ok(v: &Value) -> Response<Body> {
    Response::builder()
        .status(200)
        .body(Body::from(serde_json::to_vec(v).unwrap()))
        .unwrap()
}

fn not_found() -> Response<Body> {
    let s = json!({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"not found"});
    Response::builder()
        .status(StatusCode::NOT_FOUND)
        .body(Body::from(serde_json::to_vec(&s).unwrap()))
        .unwrap()
}

fn forbidden() -> Response<Body> {
    let s = json!({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"unexpected request"});
    Response::builder()
        .status(StatusCode::FORBIDDEN)
        .body(Body::from(serde_json::to_vec(&s).unwrap()))
        .unwrap()
}

/// A host's own report ConfigMap, as enroll made it and the host wrote it.
fn configmap(w: &World, node: &str) -> Value {
    let mut cm = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":node,"namespace":"fleet-role-hosts","resourceVersion":"1"}});
    if let Some(r) = w.report.get(node) {
        cm["data"] = json!({ "report": r });
    }
    cm
}

/// The host's own heartbeat Lease.
fn heartbeat_lease(w: &World, node: &str) -> Value {
    w.heartbeat.clone().unwrap_or_else(|| {
        json!({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":node,"namespace":"fleet-role-hosts","resourceVersion":"1"}})
    })
}

/// The hosts' report ConfigMaps and heartbeat Leases (each named for its Node).
const REPORTS: &str = "/api/v1/namespaces/fleet-role-hosts/configmaps/";
const HEARTBEATS: &str = "/apis/coordination.k8s.io/v1/namespaces/fleet-role-hosts/leases/";

async fn serve(mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>, world: Shared) {
    while let Some((req, send)) = handle.next_request().await {
        let (parts, body) = req.into_parts();
        let body = String::from_utf8(body.collect_bytes().await.unwrap().to_vec()).unwrap();
        let pq = parts.uri.path_and_query().unwrap().to_string();
        let path = parts.uri.path().to_string();
        let query = parts.uri.query().unwrap_or("").to_string();
        let mut w = world.lock().unwrap();
        w.seen.push((parts.method.clone(), pq, body.clone()));
        let response = match (parts.method.clone(), path.as_str()) {
            (Method::GET, p) if p.starts_with(REPORTS) => ok(&configmap(&w, &p[REPORTS.len()..])),
            (Method::PUT, p) if p.starts_with(REPORTS) => {
                let v: Value = serde_json::from_str(&body).unwrap();
                let r = v["data"]["report"].as_str().unwrap().to_string();
                let node = &p[REPORTS.len()..];
                w.report.insert(node.into(), r);
                ok(&configmap(&w, node))
            }
            (Method::GET, p) if p.starts_with(HEARTBEATS) => {
                ok(&heartbeat_lease(&w, &p[HEARTBEATS.len()..]))
            }
            (Method::PUT, p) if p.starts_with(HEARTBEATS) => {
                w.heartbeat = Some(serde_json::from_str(&body).unwrap());
                ok(&heartbeat_lease(&w, &p[HEARTBEATS.len()..]))
            }
            (
                Method::GET,
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/fleet-regrade",
            ) => match &w.lease {
                Some(l) => ok(l),
                None => not_found(),
            },
            (Method::GET, "/api/v1/nodes") if query.contains("watch=true") => {
                if w.events.is_empty() {
                    w.parked.push(send);
                    continue;
                }
                watch_lines(w.events.drain(..).collect())
            }
            (Method::GET, LEASES)
                if query.contains("watch=true")
                    && query.contains("fieldSelector=metadata.name%3Dfleet-regrade") =>
            {
                if w.lease_events.is_empty() {
                    w.lease_parked.push(send);
                    continue;
                }
                watch_lines(w.lease_events.drain(..).collect())
            }
            (Method::GET, LEASES)
                if query.contains("fieldSelector=metadata.name%3Dfleet-regrade") =>
            {
                let items: Vec<Value> = w.lease.clone().into_iter().collect();
                ok(
                    &json!({"apiVersion":"coordination.k8s.io/v1","kind":"LeaseList","metadata":{"resourceVersion":"10"},"items":items}),
                )
            }
            (Method::GET, "/api/v1/nodes")
                if query
                    .contains("labelSelector=node-role.kubernetes.io%2Fcontrol-plane%3Dtrue") =>
            {
                let items: Vec<Value> = w
                    .nodes
                    .values()
                    .filter(|n| {
                        n["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == "true"
                    })
                    .cloned()
                    .collect();
                ok(
                    &json!({"apiVersion":"v1","kind":"NodeList","metadata":{"resourceVersion":"10"},"items":items}),
                )
            }
            (Method::GET, "/api/v1/nodes") => {
                let name = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("fieldSelector=metadata.name%3D"))
                    .unwrap_or("");
                let items: Vec<Value> = w.nodes.get(name).cloned().into_iter().collect();
                ok(
                    &json!({"apiVersion":"v1","kind":"NodeList","metadata":{"resourceVersion":"10"},"items":items}),
                )
            }
            (Method::GET, p) if p.starts_with("/api/v1/nodes/") => {
                match w.nodes.get(&p["/api/v1/nodes/".len()..]) {
                    Some(n) => ok(n),
                    None => not_found(),
                }
            }
            _ => forbidden(),
        };
        send.send_response(response);
    }
}

fn node(name: &str, labels: Value, annotations: Value, voter: bool) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "10", "labels": labels, "annotations": annotations},
        "status": {
            "conditions": [{"type": "EtcdIsVoter", "status": if voter { "True" } else { "False" }}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.9"}]
        }
    })
}

fn promote_node(voter: bool) -> Value {
    node(
        "standby",
        json!({ format!("{P}/desired-role"): "server" }),
        json!({
            format!("{P}/role-swap"): "s1",
            format!("{P}/role-step"): "promote",
            format!("{P}/role-join-node"): "voter-a",
        }),
        voter,
    )
}

/// The regrade Lease held for `swap`, whose hosts are the tests' own
/// (`old` out, `standby` in), asking for a promotion.
fn lease(swap: &str) -> Value {
    lease_asking(swap, "promote")
}

/// [`lease`], with the controller's last ask `step` on it.
fn lease_asking(swap: &str, step: &str) -> Value {
    let now = jiff_now();
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "fleet-regrade", "namespace": "kube-system", "resourceVersion": "11", "annotations": {
            format!("{P}/role-swap"): swap,
            format!("{P}/swap-in"): "standby",
            format!("{P}/swap-out"): "old",
            format!("{P}/swap-asked"): step,
        }},
        "spec": {"holderIdentity": "fleet-role", "leaseDurationSeconds": 60, "renewTime": now}
    })
}

fn jiff_now() -> String {
    k8s_openapi::jiff::Timestamp::from_second(Clock::system().unix_secs())
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        .to_string()
}

struct Rig {
    /// The report the test put in the API before the watcher started.
    seeded: Option<Report>,
    world: Shared,
    host: TestHost,
    /// The watcher's clock (the system's unless the test moves its own).
    clock: Clock,
    /// The watcher's decisions, as it publishes them.
    decisions: tokio::sync::watch::Receiver<Decisions>,
    task: tokio::task::JoinHandle<()>,
}

impl Rig {
    /// A one-second resync, so a test sees the watcher decide again
    /// without a change.
    fn new(host: TestHost, world: World) -> Rig {
        Rig::with(host, world, 1, Arc::new(Metrics::new()))
    }

    fn with(host: TestHost, world: World, resync_secs: u64, metrics: Arc<Metrics>) -> Rig {
        let file = FileConfig {
            resync_secs: Some(resync_secs),
            ..FileConfig::default()
        };
        Rig::with_config(host, world, file, metrics)
    }

    fn with_config(host: TestHost, world: World, file: FileConfig, metrics: Arc<Metrics>) -> Rig {
        Rig::with_clock(host, world, file, metrics, Clock::system())
    }

    fn with_clock(
        host: TestHost,
        world: World,
        file: FileConfig,
        metrics: Arc<Metrics>,
        clock: Clock,
    ) -> Rig {
        let seeded = world
            .report
            .get(&host.node)
            .and_then(|v| Report::from_json(v));
        let world = Arc::new(Mutex::new(world));
        let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(svc, "default");
        tokio::spawn(serve(handle, world.clone()));
        let settings = Settings::resolve(
            file,
            Overrides {
                node: Some(host.node.clone()),
                root: Some(host.root().to_path_buf()),
                ..Default::default()
            },
        )
        .unwrap();
        let h = settings
            .host(&clock, &tokio::runtime::Handle::current())
            .with_search_path(host.path_env());
        // The Nodes say 10.0.0.9: this host's address, for the watcher.
        let here = host::addresses::LocalAddresses::parse("|-- 10.0.0.9\n /32 host LOCAL\n", "");
        let mut watcher = Watcher::with_host(settings, h, clock.clone())
            .with_metrics(metrics)
            .with_addresses(here);
        let decisions = watcher.decisions();
        let task = tokio::spawn(async move {
            watcher.session(client).await;
        });
        Rig {
            seeded,
            world,
            host,
            clock,
            decisions,
            task,
        }
    }

    fn report(&self) -> Option<Report> {
        self.world
            .lock()
            .unwrap()
            .report
            .get(&self.host.node)
            .and_then(|v| Report::from_json(v))
    }

    /// The phases written, heartbeats left out.
    fn phases(&self) -> Vec<(Phase, Option<Detail>)> {
        let w = self.world.lock().unwrap();
        let mut prev: Option<Report> = self.seeded.clone();
        let mut out = Vec::new();
        for (_, _, b) in w.seen.iter().filter(|(m, pq, _)| is_report_write(m, pq)) {
            let v: Value = serde_json::from_str(b).unwrap();
            let r = Report::from_json(v["data"]["report"].as_str().unwrap()).unwrap();
            if !heartbeat(prev.as_ref(), &r) {
                out.push((r.phase, r.detail));
            }
            prev = Some(r);
        }
        out
    }

    async fn until(&self, what: &str, f: impl Fn(&Rig) -> bool) {
        let clock = Clock::system();
        let start = clock.now();
        while !f(self) {
            assert!(
                clock.since(start) < Duration::from_secs(20),
                "timed out waiting for {what}; saw {:?}",
                self.world.lock().unwrap().seen
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The controller writes the Lease: the open Lease watch (or the next)
    /// carries it.
    fn set_lease(&self, lease: Value) {
        let mut w = self.world.lock().unwrap();
        w.lease = Some(lease.clone());
        match w.lease_parked.pop() {
            Some(send) => send.send_response(watch_lines(vec![lease])),
            None => w.lease_events.push(lease),
        }
    }

    /// The watches opened whose path and query start with `prefix`.
    fn watches(&self, prefix: &str) -> usize {
        self.world
            .lock()
            .unwrap()
            .seen
            .iter()
            .filter(|(_, pq, _)| pq.starts_with(prefix) && pq.contains("watch=true"))
            .count()
    }

    /// GETs of the Lease by name (the watch lists and watches it instead).
    fn lease_gets(&self) -> usize {
        self.world
            .lock()
            .unwrap()
            .seen
            .iter()
            .filter(|(m, pq, _)| *m == Method::GET && *pq == format!("{LEASES}/fleet-regrade"))
            .count()
    }

    /// Waits until the watcher has made `n` more decisions than it had
    /// made when called, each with all it led to sent (a resync each
    /// second makes one): what a test asserts was not sent after them, it
    /// would have seen. Returns the decisions then.
    async fn decided(&self, n: u64) -> Decisions {
        let mut rx = self.decisions.clone();
        let target = rx.borrow().made + n;
        let got = tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|d| d.made >= target))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the watcher made no {n} decisions in 30 s; saw {:?}",
                    self.world.lock().unwrap().seen
                )
            })
            .expect("the watcher runs");
        *got
    }

    /// Waits for `n` more decisions and asserts the last took no step.
    async fn decided_without_a_step(&self, n: u64) {
        let d = self.decided(n).await;
        assert_ne!(d.last, Some(Decided::Take), "{d:?}");
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A Ready server Node at the address test hosts' agents bootstrap from
/// (`server:` in the test host's config.yaml).
fn registration_server() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "server-z", "resourceVersion": "10",
            "labels": {"node-role.kubernetes.io/control-plane": "true"}},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": standins::fixture::JOIN_SERVER_IP}]
        }
    })
}

fn world_with(own: Value) -> World {
    let mut w = World::default();
    let name = own["metadata"]["name"].as_str().unwrap().to_string();
    w.nodes.insert(name, own);
    w.nodes.insert("server-z".into(), registration_server());
    w.nodes.insert(
        "voter-a".into(),
        node(
            "voter-a",
            json!({}),
            json!({"etcd.k3s.cattle.io/node-address": "10.0.0.1"}),
            true,
        ),
    );
    w
}

#[tokio::test]
async fn the_watcher_watches_only_its_own_node_and_the_lease_lists_only_the_server_nodes_and_updates_only_its_own_report_and_heartbeat()
 {
    let rig = Rig::new(
        TestHost::new("standby", bin_dir()).as_agent(),
        world_with(promote_node(false)),
    );
    rig.until("a refusal", |r| {
        r.report().is_some_and(|r| r.phase == Phase::Refused)
    })
    .await;
    // Two decisions more (resyncs): whatever they sent is seen below.
    rig.decided(2).await;
    let w = rig.world.lock().unwrap();
    for (method, pq, body) in &w.seen {
        match *method {
            // Its own Node watched; the server Nodes listed (no watch)
            // from the API server's cache, once a heartbeat, for the
            // preflight's reach.
            Method::GET if pq.starts_with("/api/v1/nodes?") => {
                assert!(
                    pq.contains("fieldSelector=metadata.name%3Dstandby")
                        || (pq.contains(
                            "labelSelector=node-role.kubernetes.io%2Fcontrol-plane%3Dtrue"
                        ) && !pq.contains("watch")
                            && pq.contains("resourceVersion=0")),
                    "a watch or list beyond its own Node and the server Nodes: {pq}"
                )
            }
            Method::GET if pq.starts_with(&format!("{LEASES}?")) => {
                assert!(
                    pq.contains("fieldSelector=metadata.name%3Dfleet-regrade"),
                    "a watch or list beyond the regrade Lease: {pq}"
                )
            }
            Method::GET => assert!(
                *pq == format!("{LEASES}/fleet-regrade")
                    || *pq == format!("{REPORTS}standby")
                    || *pq == format!("{HEARTBEATS}standby")
                    || pq == "/api/v1/nodes/voter-a",
                "unexpected read {pq}"
            ),
            Method::PUT if pq.starts_with(&format!("{REPORTS}standby?")) => {
                assert!(pq.contains("fieldManager=fleet-role-actuator"), "{pq}");
                let v: Value = serde_json::from_str(body).unwrap();
                assert_eq!(
                    v["data"].as_object().unwrap().keys().collect::<Vec<_>>(),
                    vec!["report"]
                );
                assert_eq!(v["kind"], "ConfigMap");
                assert_eq!(
                    v["metadata"]["resourceVersion"], "1",
                    "an update from the object read"
                );
            }
            Method::PUT if pq.starts_with(&format!("{HEARTBEATS}standby?")) => {
                let v: Value = serde_json::from_str(body).unwrap();
                assert_eq!(v["spec"]["holderIdentity"], "standby");
            }
            ref m => panic!("unexpected {m} {pq}"),
        }
    }
    assert!(
        w.seen
            .iter()
            .any(|(_, pq, _)| pq.starts_with("/api/v1/nodes?") && pq.contains("watch=true")),
        "it never watched its Node"
    );
    assert!(
        w.seen
            .iter()
            .any(|(_, pq, _)| pq.starts_with(LEASES) && pq.contains("watch=true")),
        "it never watched the Lease"
    );
    let r = Report::from_json(&w.report["standby"]).unwrap();
    assert!(r.reason.unwrap().contains("does not exist"));
    let beat = w.heartbeat.as_ref().expect("it renewed its heartbeat");
    assert!(beat["spec"]["renewTime"].is_string(), "{beat}");
    drop(w);
    assert_eq!(
        rig.host.role().as_deref(),
        Some("agent"),
        "a refused promotion changed the host"
    );
    assert!(rig.host.systemd_log().is_empty());
}

#[tokio::test]
async fn a_promotion_with_the_lease_reports_learner_then_voter_then_done() {
    let mut world = world_with(promote_node(false));
    world.lease = Some(lease("s1"));
    let rig = Rig::new(TestHost::new("standby", bin_dir()).as_agent(), world);
    rig.until("learner", |r| {
        r.report()
            .is_some_and(|r| r.detail == Some(Detail::Learner))
    })
    .await;
    assert_eq!(rig.host.role().as_deref(), Some("server"));
    assert!(rig.host.active("k3s") && !rig.host.active("k3s-agent"));
    let unit = std::fs::read_to_string(
        rig.host
            .at("etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml"),
    )
    .unwrap();
    assert!(
        unit.contains("https://10.0.0.1:6443"),
        "joins the voter-a address: {unit}"
    );
    // k3s promotes the learner: the Node's EtcdIsVoter turns True.
    rig.world.lock().unwrap().events.push(promote_node(true));
    let parked = std::mem::take(&mut rig.world.lock().unwrap().parked);
    drop(parked); // the open watch ends; the next one carries the event
    rig.until("done", |r| {
        r.report().is_some_and(|r| r.phase == Phase::Done)
    })
    .await;
    assert_eq!(
        rig.phases(),
        vec![
            (Phase::Started, None),
            (Phase::Progress, Some(Detail::Learner)),
            (Phase::Progress, Some(Detail::Voter)),
            (Phase::Done, Some(Detail::Voter)),
        ]
    );
    assert_eq!(rig.host.max_active_k3s(), 1);
}

#[tokio::test]
async fn a_restarted_actuator_never_repeats_a_settled_step() {
    let mut world = world_with(promote_node(true));
    world.lease = Some(lease("s1"));
    let done = Report::next(
        None,
        Some(protocol::SwapId::parse("s1").unwrap()),
        protocol::report::ReportStep::Promote,
        Phase::Done,
        1,
    );
    world.report.insert("standby".into(), done.to_json());
    let rig = Rig::new(TestHost::new("standby", bin_dir()).as_agent(), world);
    rig.until("the lease read", |r| {
        r.world
            .lock()
            .unwrap()
            .seen
            .iter()
            .any(|(_, pq, _)| pq.contains("leases"))
    })
    .await;
    // Decided on the settled step (and once more), with nothing to do.
    let d = rig.decided(2).await;
    assert_eq!(d.last, Some(Decided::Nothing), "{d:?}");
    assert!(rig.phases().is_empty(), "wrote {:?}", rig.phases());
    assert!(rig.host.systemd_log().is_empty(), "repeated the promotion");
}

/// A report of swap s1's promotion started at unix second 1.
fn promotion_started() -> Report {
    Report::next(
        None,
        Some(protocol::SwapId::parse("s1").unwrap()),
        protocol::report::ReportStep::Promote,
        Phase::Started,
        1,
    )
}

/// The agent `standby` with `report` in its own copy on the host, as the
/// actuator writes it before every write to the API: what a restarted
/// actuator resumes from (the API's copy grants no resume).
fn host_remembering(report: &Report) -> TestHost {
    let h = TestHost::new("standby", bin_dir()).as_agent();
    actuator::report::write_local(&host::HostPaths::new(h.at("")), report).unwrap();
    h
}

#[tokio::test]
async fn a_restarted_actuator_resumes_a_started_step() {
    let mut world = world_with(promote_node(true));
    world.lease = Some(lease("s1"));
    let started = promotion_started();
    world.report.insert("standby".into(), started.to_json());
    let rig = Rig::new(host_remembering(&started), world);
    rig.until("done", |r| {
        r.report().is_some_and(|r| r.phase == Phase::Done)
    })
    .await;
    assert_eq!(
        rig.phases()[0],
        (Phase::Progress, Some(Detail::Learner)),
        "the start was not written twice"
    );
    assert_eq!(
        rig.report().unwrap().started_at,
        1,
        "the step's start time carried over"
    );
    assert_eq!(rig.host.role().as_deref(), Some("server"));
}

#[tokio::test]
async fn a_started_step_only_the_apis_copy_shows_is_not_resumed_but_taken_afresh_as_the_lease_asks()
{
    // Planted in the API (anyone with a write there), nothing on the host.
    let mut world = world_with(promote_node(true));
    world.lease = Some(lease("s1"));
    let started = promotion_started();
    world.report.insert("standby".into(), started.to_json());
    let rig = Rig::new(TestHost::new("standby", bin_dir()).as_agent(), world);
    rig.until("done", |r| {
        r.report().is_some_and(|r| r.phase == Phase::Done)
    })
    .await;
    assert_eq!(
        rig.phases()[0],
        (Phase::Started, None),
        "taken afresh, its start written"
    );
    assert_ne!(rig.report().unwrap().started_at, 1, "no start carried over");
}

#[tokio::test]
async fn the_watcher_leaves_a_refused_step_to_the_controller_once_its_reason_is_gone() {
    let rig = Rig::new(
        TestHost::new("standby", bin_dir()).as_agent(),
        world_with(promote_node(false)),
    );
    rig.until("a refusal", |r| {
        r.report().is_some_and(|r| r.phase == Phase::Refused)
    })
    .await;
    // The controller now takes the Lease for the swap; the Node changes too.
    rig.set_lease(lease("s1"));
    rig.world.lock().unwrap().events.push(promote_node(false));
    drop(std::mem::take(&mut rig.world.lock().unwrap().parked));
    // Both changes arrive: the Lease's watch ends with its event and starts
    // again, the Node's starts again and carries the Node.
    rig.until("the next watches", |r| {
        r.watches("/api/v1/nodes?") >= 2 && r.watches(&format!("{LEASES}?")) >= 2
    })
    .await;
    // Then resyncs decide again on what the watches hold.
    rig.decided_without_a_step(2).await;
    assert_eq!(rig.phases().len(), 1, "{:?}", rig.phases());
    assert_eq!(rig.host.role().as_deref(), Some("agent"));
}

#[tokio::test]
async fn a_step_down_on_a_server_whose_agent_could_not_start_is_refused_and_nothing_changes() {
    let own = node(
        "old",
        json!({"node-role.kubernetes.io/etcd": "true", format!("{P}/desired-role"): "agent"}),
        json!({format!("{P}/role-swap"): "s1", format!("{P}/role-step"): "step-down"}),
        true,
    );
    let h = TestHost::new("old", bin_dir()).as_server();
    let config = h.at("etc/rancher/k3s/config.yaml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("cluster-init: true\n");
    std::fs::write(&config, text).unwrap();
    let mut world = world_with(own);
    world.lease = Some(lease_asking("s1", "step-down"));
    let rig = Rig::new(h, world);
    rig.until("a refusal", |r| {
        r.report().is_some_and(|r| r.phase == Phase::Refused)
    })
    .await;
    let r = rig.report().unwrap();
    assert_eq!(r.step, protocol::report::ReportStep::StepDown);
    let reason = r.reason.unwrap();
    assert!(
        reason.contains("not eligible for demotion")
            && reason.contains("flag provided but not defined: -cluster-init"),
        "{reason}"
    );
    // The verdict is in the host part too, for the controller's gate.
    let Some(protocol::report::HostPart {
        demotion: Some(protocol::report::Eligibility::Ineligible { reasons }),
        ..
    }) = r.host
    else {
        panic!("{:?}", r.host)
    };
    assert!(reasons[0].contains("cluster-init"), "{reasons:?}");
    assert_eq!(rig.host.role().as_deref(), Some("server"));
    assert!(
        rig.host.systemd_log().is_empty(),
        "{:?}",
        rig.host.systemd_log()
    );
    assert!(
        !rig.host
            .at("etc/rancher/k3s/config.yaml.d/90-fleet-role-etcd-only.yaml")
            .exists()
    );
}

#[tokio::test]
async fn a_server_reports_its_demotion_verdict_at_once_when_it_changes() {
    let h = TestHost::new("old", bin_dir()).as_server();
    let own = node(
        "old",
        json!({"node-role.kubernetes.io/etcd": "true"}),
        json!({}),
        true,
    );
    let rig = Rig::new(h, world_with(own));
    let verdict = |r: &Rig| r.report().and_then(|r| r.host).and_then(|h| h.demotion);
    rig.until("a verdict of ok", |r| {
        verdict(r) == Some(protocol::report::Eligibility::Ok)
    })
    .await;
    let dropin = rig
        .host
        .at("etc/rancher/k3s/config.yaml.d/50-operator.yaml");
    std::fs::create_dir_all(dropin.parent().unwrap()).unwrap();
    std::fs::write(&dropin, "tls-san: [a.example]\n").unwrap();
    // Within a resync or two, long before the next heartbeat (60 s).
    rig.until("a verdict of ineligible", |r| {
        matches!(
            verdict(r),
            Some(protocol::report::Eligibility::Ineligible { .. })
        )
    })
    .await;
    assert!(rig.phases().is_empty(), "{:?}", rig.phases());
}

#[tokio::test]
async fn a_standby_whose_server_cannot_be_reached_reports_it_could_not_join_and_once_it_can_that_it_could()
 {
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let h = TestHost::new("standby", bin_dir());
    let config = h.at("etc/rancher/k3s/config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    let live = format!(
        "https://127.0.0.1:{}",
        standins::fixture::join_server_port()
    );
    std::fs::write(
        &config,
        text.replace(&live, &format!("https://127.0.0.1:{closed}")),
    )
    .unwrap();
    let own = node("standby", json!({}), json!({}), false);
    let rig = Rig::new(h, world_with(own));
    let verdict = |r: &Rig| r.report().and_then(|r| r.host).and_then(|h| h.promotion);
    rig.until("a verdict that it could not join", |r| {
        matches!(
            verdict(r),
            Some(protocol::report::Eligibility::Ineligible { ref reasons })
                if reasons.iter().any(|x| x.contains("no k3s server could be reached") && x.contains(&closed.to_string()))
        )
    })
    .await;
    assert!(rig.report().unwrap().host.unwrap().demotion.is_none());
    std::fs::write(&config, text).unwrap();
    rig.until("a verdict that it could join", |r| {
        verdict(r) == Some(protocol::report::Eligibility::Ok)
    })
    .await;
    assert!(rig.phases().is_empty(), "{:?}", rig.phases());
}

/// Whether a request is a write of a report.
fn is_report_write(m: &Method, pq: &str) -> bool {
    *m == Method::PUT && pq.starts_with(REPORTS)
}

/// The report's writes so far.
fn patches(rig: &Rig) -> usize {
    rig.world
        .lock()
        .unwrap()
        .seen
        .iter()
        .filter(|(m, pq, _)| is_report_write(m, pq))
        .count()
}

#[tokio::test]
async fn a_server_reports_its_members_etcd_view_writes_again_only_when_its_shape_changes_and_none_once_etcd_is_gone()
 {
    let dir = tempfile::tempdir().unwrap();
    let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let mut etcd = testcp::Etcd::start(
        testcp::EtcdOptions::new("old-0a1b2c3d", ip, &dir.path().join("etcd")).unwrap(),
    )
    .await
    .expect("a real etcd");
    let h = TestHost::new("old", bin_dir()).as_server();
    let own = node(
        "old",
        json!({"node-role.kubernetes.io/etcd": "true"}),
        json!({}),
        true,
    );
    let file = FileConfig {
        resync_secs: Some(1),
        etcd_url: Some(etcd.client_url().to_string()),
        ..FileConfig::default()
    };
    // A clock the test moves: each reading is made when the test has moved
    // it past the reading's pace, not when seconds have passed.
    let clock = Clock::manual(Clock::system().unix_secs().try_into().unwrap());
    let rig = Rig::with_clock(
        h,
        world_with(own),
        file,
        Arc::new(Metrics::new()),
        clock.clone(),
    );
    let view = |r: &Rig| r.report().and_then(|r| r.host).and_then(|h| h.etcd);
    rig.until("a report carrying etcd's view", |r| view(r).is_some())
        .await;
    let v = view(&rig).unwrap();
    assert_eq!(v.members.len(), 1, "{v:?}");
    assert_eq!(v.members[0].name, "old-0a1b2c3d");
    assert_eq!(v.leader, Some(v.member));
    assert!(v.healthy && !v.members[0].learner, "{v:?}");
    // Several readings later (one per pace, a resync each second) nothing
    // was written again: their time alone is no change of shape, and the
    // heartbeat (60 s) is not due.
    let written = patches(&rig);
    let read_at = v.read_at;
    for _ in 0..3 {
        assert!(rig.clock.advance(READ_PACE));
        rig.decided(2).await;
    }
    assert!(clock.unix_secs() >= read_at + 15);
    assert_eq!(
        patches(&rig),
        written,
        "{:?}",
        rig.world.lock().unwrap().seen
    );
    // etcd gone: the report says none at the next reading, long before
    // the heartbeat.
    etcd.stop().await;
    assert!(rig.clock.advance(READ_PACE));
    rig.until("a report with no view", |r| {
        r.report()
            .and_then(|r| r.host)
            .is_some_and(|h| h.etcd.is_none())
    })
    .await;
    assert!(rig.phases().is_empty(), "{:?}", rig.phases());
}

#[tokio::test]
async fn an_agent_reports_no_etcd_view_even_with_an_etcd_to_read() {
    // An etcd it could read: only the missing datastore keeps it from it.
    let dir = tempfile::tempdir().unwrap();
    let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let etcd = testcp::Etcd::start(
        testcp::EtcdOptions::new("standby-0a1b2c3d", ip, &dir.path().join("etcd")).unwrap(),
    )
    .await
    .expect("a real etcd");
    let file = FileConfig {
        resync_secs: Some(1),
        etcd_url: Some(etcd.client_url().to_string()),
        ..FileConfig::default()
    };
    let rig = Rig::with_config(
        TestHost::new("standby", bin_dir()).as_agent(),
        world_with(idle_node()),
        file,
        Arc::new(Metrics::new()),
    );
    rig.until("a heartbeat", |r| r.report().and_then(|r| r.host).is_some())
        .await;
    rig.decided(2).await;
    let host = rig.report().and_then(|r| r.host).unwrap();
    assert_eq!((host.demotion, host.etcd), (None, None));
}

#[tokio::test]
async fn a_demotion_finishes_without_a_lease_once_the_tombstone_is_there() {
    let own = node(
        "old",
        json!({"node-role.kubernetes.io/etcd": "true"}),
        json!({}),
        false,
    );
    let h = TestHost::new("old", bin_dir()).as_server();
    std::fs::write(h.at("var/lib/rancher/k3s/fleet-role"), "agent\n").unwrap();
    std::fs::write(h.at("var/lib/rancher/k3s/server/db/etcd/tombstone"), "").unwrap();
    let rig = Rig::new(h, world_with(own));
    rig.until("done", |r| {
        r.report().is_some_and(|r| r.phase == Phase::Done)
    })
    .await;
    assert_eq!(
        rig.phases(),
        vec![
            (Phase::Started, None),
            (Phase::Progress, Some(Detail::MemberGone)),
            (Phase::Progress, Some(Detail::AgentReady)),
            (Phase::Done, Some(Detail::AgentReady)),
        ]
    );
    assert!(
        rig.host
            .at("var/lib/rancher/k3s/server/db.demoted")
            .is_dir()
    );
    assert!(rig.host.active("k3s-agent") && !rig.host.active("k3s"));
}

/// A stepped-down server: its role file names the agent, its datastore
/// (member `<node>-0a1b2c3d`) is still there, its server unit runs.
fn stepped_down(node: &str) -> TestHost {
    let h = TestHost::new(node, bin_dir()).as_server();
    std::fs::write(h.at("var/lib/rancher/k3s/fleet-role"), "agent\n").unwrap();
    std::fs::write(
        h.at("var/lib/rancher/k3s/server/db/etcd/name"),
        format!("{node}-0a1b2c3d\n"),
    )
    .unwrap();
    h
}

#[tokio::test]
async fn a_stepped_down_host_whose_etcd_still_lists_its_member_does_not_finish_on_k3s_annotation_alone()
 {
    // k3s wrote removed-node-name, but its RemovePeer matched no member
    // (an address mismatch): the member still runs and votes.
    let dir = tempfile::tempdir().unwrap();
    let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let mut etcd = testcp::Etcd::start(
        testcp::EtcdOptions::new("old-0a1b2c3d", ip, &dir.path().join("etcd")).unwrap(),
    )
    .await
    .expect("a real etcd");
    let own = node(
        "old",
        json!({"node-role.kubernetes.io/etcd": "true"}),
        json!({"etcd.k3s.cattle.io/removed-node-name": "old-0a1b2c3d"}),
        false,
    );
    let h = stepped_down("old");
    let file = FileConfig {
        resync_secs: Some(1),
        etcd_url: Some(etcd.client_url().to_string()),
        ..FileConfig::default()
    };
    let rig = Rig::with_config(h, world_with(own), file, Arc::new(Metrics::new()));
    let view = |r: &Rig| r.report().and_then(|r| r.host).and_then(|h| h.etcd);
    rig.until("a report carrying etcd's view", |r| view(r).is_some())
        .await;
    // Several resyncs with the member listed: no finish taken.
    rig.decided_without_a_step(3).await;
    assert!(rig.phases().is_empty(), "{:?}", rig.phases());
    assert!(rig.host.active("k3s") && !rig.host.active("k3s-agent"));
    // etcd no longer answers (slower than its bound, a certificate that
    // cannot be read, or gone), and no other server is known to ask: no
    // reading says the member is gone, so nothing is finished.
    etcd.stop().await;
    rig.until("a report with no view", |r| view(r).is_none())
        .await;
    rig.decided_without_a_step(3).await;
    assert!(rig.phases().is_empty(), "{:?}", rig.phases());
    assert!(rig.host.active("k3s") && !rig.host.active("k3s-agent"));
    assert!(rig.host.at("var/lib/rancher/k3s/server/db/etcd").is_dir());
}

/// etcd members on `ip` named as k3s names them (`<node>-0a1b2c3d`), all
/// voters ([`testcp::etcd::cluster`]).
async fn etcd_cluster(dir: &Path, ip: std::net::Ipv4Addr, nodes: &[&str]) -> Vec<testcp::Etcd> {
    let names: Vec<String> = nodes.iter().map(|n| format!("{n}-0a1b2c3d")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    testcp::etcd::cluster(dir, ip.into(), &names)
        .await
        .expect("etcd starts")
}

#[tokio::test]
async fn a_stepped_down_host_whose_etcd_is_gone_finishes_only_once_another_member_no_longer_lists_it()
 {
    // k3s was down when the member was removed (no tombstone), and the
    // Node says nothing trustworthy: the host reads etcd through the other
    // members its last local reading listed.
    let dir = tempfile::tempdir().unwrap();
    let ip = std::net::Ipv4Addr::new(127, 0, 0, 23);
    let mut members = etcd_cluster(dir.path(), ip, &["old", "voter-a", "voter-b"]).await;
    let own = node(
        "old",
        json!({}),
        json!({"etcd.k3s.cattle.io/removed-node-name": "old-0a1b2c3d"}),
        false,
    );
    let h = stepped_down("old");
    let file = FileConfig {
        resync_secs: Some(1),
        etcd_url: Some(members[0].client_url().to_string()),
        ..FileConfig::default()
    };
    let rig = Rig::with_config(h, world_with(own), file, Arc::new(Metrics::new()));
    let view = |r: &Rig| r.report().and_then(|r| r.host).and_then(|h| h.etcd);
    rig.until("a report carrying etcd's view of three", |r| {
        view(r).is_some_and(|v| v.members.len() == 3)
    })
    .await;
    let old_id = view(&rig).unwrap().member;
    // Its own etcd gone: the others still list it, so it waits.
    members[0].kill();
    rig.until("a report with no view", |r| view(r).is_none())
        .await;
    rig.decided_without_a_step(3).await;
    assert!(rig.phases().is_empty(), "{:?}", rig.phases());
    assert!(rig.host.active("k3s") && !rig.host.active("k3s-agent"));
    // The member removed (as k3s's removal does, through another member):
    // a reading through the others says so, and it finishes.
    let mut c = etcd_client::Client::connect([members[1].client_url()], None)
        .await
        .unwrap();
    c.member_remove(old_id.0).await.unwrap();
    rig.until("the finish done", |r| {
        r.report()
            .is_some_and(|r| r.step == ReportStep::Finish && r.phase == Phase::Done)
    })
    .await;
    assert!(rig.host.active("k3s-agent") && !rig.host.active("k3s"));
}

#[tokio::test]
async fn a_step_with_a_bad_annotation_is_refused_and_nothing_changes() {
    let bad = node(
        "standby",
        json!({ format!("{P}/desired-role"): "server" }),
        json!({ format!("{P}/role-swap"): "s1\nrm -rf /", format!("{P}/role-step"): "promote", format!("{P}/role-join-node"): "voter-a" }),
        false,
    );
    let mut world = world_with(bad);
    world.lease = Some(lease("s1"));
    let rig = Rig::new(TestHost::new("standby", bin_dir()).as_agent(), world);
    rig.until("a refusal", |r| {
        r.report().is_some_and(|r| r.phase == Phase::Refused)
    })
    .await;
    let r = rig.report().unwrap();
    assert!(r.swap.is_none());
    assert!(
        r.reason
            .as_deref()
            .unwrap()
            .contains("invalid swap id \"s1\\nrm -rf /\""),
        "{:?}",
        r.reason
    );
    rig.decided_without_a_step(2).await;
    assert_eq!(rig.phases().len(), 1, "refused more than once");
    assert!(rig.host.systemd_log().is_empty());
}

#[tokio::test]
async fn a_promotion_on_a_host_whose_role_file_is_damaged_is_refused_and_nothing_changes() {
    let mut world = world_with(promote_node(false));
    world.lease = Some(lease("s1"));
    let host = TestHost::new("standby", bin_dir()).as_agent();
    // Half a write, say: neither server nor agent.
    std::fs::write(host.at("var/lib/rancher/k3s/fleet-role"), "ser").unwrap();
    let before = host.tree();
    let rig = Rig::new(host, world);
    rig.until("a refusal", |r| {
        r.report().is_some_and(|r| r.phase == Phase::Refused)
    })
    .await;
    let r = rig.report().unwrap();
    assert!(
        r.reason.as_deref().unwrap().contains("holds no valid role"),
        "{:?}",
        r.reason
    );
    rig.decided_without_a_step(2).await;
    assert_eq!(rig.phases().len(), 1, "refused more than once");
    assert!(rig.host.systemd_log().is_empty());
    // Only the report changed: the copy kept on the host.
    let mut after = rig.host.tree();
    let kept = after.remove(std::path::Path::new(
        "var/lib/rancher/k3s/fleet-role.report",
    ));
    assert_eq!(before, after, "a refused step changed the host");
    assert_eq!(
        kept.map(|(_, raw)| Report::parse(&String::from_utf8(raw).unwrap()).unwrap()),
        rig.report()
    );
}

fn rollback_node() -> Value {
    node(
        "standby",
        json!({ format!("{P}/desired-role"): "agent" }),
        json!({
            format!("{P}/role-swap"): "s1",
            format!("{P}/role-step"): "rollback",
        }),
        false,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_asked_while_a_promotion_waits_for_a_server_that_never_becomes_ready_is_taken_at_once_and_frees_the_lock()
 {
    let mut world = world_with(promote_node(false));
    world.lease = Some(lease("s1"));
    let host = TestHost::new("standby", bin_dir()).as_agent();
    // k3s's unit as installed, over a k3s that never sends READY=1 (a
    // learner that cannot catch up): a blocking start would never return.
    std::fs::write(
        host.at("etc/systemd/system/k3s.service"),
        "[Unit]\nDescription=k3s (never ready)\n[Service]\nType=notify\nTimeoutStartSec=0\nKillMode=process\nRestart=always\nRestartSec=5s\nExecStart=sleep 300\n[Install]\nWantedBy=multi-user.target\n",
    )
    .unwrap();
    let rig = Rig::new(host, world);
    let root = rig.host.root().to_path_buf();
    rig.until("the promotion waiting for its server", |_| {
        standins::units::state(&root, "k3s").sub == "start"
    })
    .await;
    assert!(rig.report().is_some_and(|r| r.phase == Phase::Started));
    // The controller gives up on the promotion and asks for a rollback:
    // the Lease first, then the Node.
    rig.set_lease(lease_asking("s1", "rollback"));
    rig.world.lock().unwrap().events.push(rollback_node());
    let parked = std::mem::take(&mut rig.world.lock().unwrap().parked);
    drop(parked);
    rig.until("the rollback done", |r| {
        r.report().is_some_and(|r| {
            r.step == protocol::report::ReportStep::Rollback && r.phase == Phase::Done
        })
    })
    .await;
    assert!(standins::units::state(&root, "k3s").is_stopped());
    assert!(rig.host.active("k3s-agent"));
    assert_eq!(rig.host.role().as_deref(), Some("agent"));
    assert_eq!(rig.host.max_active_k3s(), 1, "both units ran at once");
    // Nothing holds the host lock any more.
    let _free = host::lock::HostLock::acquire(
        &rig.host.at("var/lib/rancher/k3s/fleet-role.lock"),
        Duration::ZERO,
        &clock::Clock::system(),
    )
    .expect("the host lock is free");
}

/// A healthy agent's Node: no step asked of it.
fn idle_node() -> Value {
    node("standby", json!({}), json!({}), false)
}

#[tokio::test]
async fn an_idle_watcher_sends_nothing_but_its_watches_over_several_resyncs() {
    // The Lease is held for a swap of other hosts.
    let mut world = world_with(idle_node());
    world.lease = Some(lease("s9"));
    let rig = Rig::new(TestHost::new("standby", bin_dir()).as_agent(), world);
    rig.until("both watches open and the first heartbeat", |r| {
        r.world.lock().unwrap().parked.len() == 1
            && r.world.lock().unwrap().lease_parked.len() == 1
            && r.report().is_some_and(|r| r.host.is_some())
    })
    .await;
    let before = rig.world.lock().unwrap().seen.len();
    // Three resyncs (one a second), each a decision.
    rig.decided_without_a_step(3).await;
    let w = rig.world.lock().unwrap();
    assert_eq!(
        w.seen.len(),
        before,
        "an idle watcher sent requests beyond its watches: {:?}",
        &w.seen[before..]
    );
    drop(w);
    assert_eq!(rig.lease_gets(), 0, "it read the Lease by name");
    assert!(rig.phases().is_empty(), "{:?}", rig.phases());
}

#[tokio::test]
async fn a_lease_back_for_a_started_step_resumes_it_without_waiting_for_a_resync() {
    // The promotion had started when its Lease lapsed: it waits for the Lease.
    let mut world = world_with(promote_node(false));
    let started = promotion_started();
    world.report.insert("standby".into(), started.to_json());
    // An hour's resync: only the Lease's watch can bring the change.
    let rig = Rig::with(
        host_remembering(&started),
        world,
        3600,
        Arc::new(Metrics::new()),
    );
    rig.until("the Lease's watch open and a decision made", |r| {
        r.world.lock().unwrap().lease_parked.len() == 1 && r.decisions.borrow().made >= 1
    })
    .await;
    let d = *rig.decisions.borrow();
    assert_eq!(d.last, Some(Decided::Wait), "{d:?}");
    assert!(rig.phases().is_empty(), "{:?}", rig.phases());
    assert_eq!(rig.host.role().as_deref(), Some("agent"));
    rig.set_lease(lease("s1"));
    rig.until("the learner", |r| {
        r.report()
            .is_some_and(|r| r.detail == Some(Detail::Learner))
    })
    .await;
    assert_eq!(rig.host.role().as_deref(), Some("server"));
    assert_eq!(
        rig.lease_gets(),
        1,
        "one read, once the host lock was taken"
    );
}

#[tokio::test]
async fn a_step_asked_before_the_lease_watch_shows_its_lease_is_decided_on_the_lease_as_it_is() {
    let rig = Rig::new(
        TestHost::new("standby", bin_dir()).as_agent(),
        world_with(idle_node()),
    );
    rig.until("both watches open", |r| {
        r.world.lock().unwrap().parked.len() == 1 && r.world.lock().unwrap().lease_parked.len() == 1
    })
    .await;
    // The controller takes the Lease, then asks for the step; the Node's
    // watch brings the step while the Lease's has not shown the Lease yet.
    rig.world.lock().unwrap().lease = Some(lease("s1"));
    rig.world.lock().unwrap().events.push(promote_node(false));
    drop(std::mem::take(&mut rig.world.lock().unwrap().parked));
    rig.until("the learner", |r| {
        r.report()
            .is_some_and(|r| r.detail == Some(Detail::Learner))
    })
    .await;
    assert_eq!(
        rig.phases()[0],
        (Phase::Started, None),
        "refused on the Lease the watch held"
    );
}

/// `GET path` on `addr`: the status line and the body.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_string(&mut out))
        .await
        .expect("an answer within 30 s")
        .unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[tokio::test]
async fn the_metrics_when_served_count_the_steps_by_outcome_their_durations_and_the_watch_restarts()
{
    let metrics = Arc::new(Metrics::new());
    let addr = metrics
        .clone()
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut world = world_with(promote_node(false));
    world.lease = Some(lease("s1"));
    let rig = Rig::with(
        TestHost::new("standby", bin_dir()).as_agent(),
        world,
        1,
        metrics,
    );
    rig.until("learner", |r| {
        r.report()
            .is_some_and(|r| r.detail == Some(Detail::Learner))
    })
    .await;
    // The Node's watch fails (its connection dropped) and starts again with
    // the learner promoted.
    rig.world.lock().unwrap().events.push(promote_node(true));
    drop(std::mem::take(&mut rig.world.lock().unwrap().parked));
    rig.until("done", |r| {
        r.report().is_some_and(|r| r.phase == Phase::Done)
    })
    .await;
    let (status, text) = http_get(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    for series in [
        "fleet_role_actuator_steps_total{step=\"promote\",outcome=\"done\"} ",
        "fleet_role_actuator_step_duration_seconds_count{step=\"promote\"} ",
        "fleet_role_actuator_watch_restarts_total{watch=\"node\"} ",
    ] {
        assert!(text.contains(series), "no {series} in\n{text}");
    }
    assert!(
        !text.contains("outcome=\"failed\""),
        "a failure counted:\n{text}"
    );
    // Prometheus's own linter finds nothing in a scrape with a step's
    // counter and histogram.
    testcp::promtool::check_metrics(&text).await;
    assert_eq!(http_get(addr, "/healthz").await.0, "HTTP/1.1 200 OK");
}
