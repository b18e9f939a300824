//! `bench_reports`: what N reporting hosts cost etcd and the API server.
//! Figures, not a test: no timed assertions. Run by
//! `scripts/bench.sh reports --hosts N --seconds S --heartbeat-secs H`.
//!
//! It starts a real etcd and kube-apiserver (testcp), applies
//! `deploy/rbac/`, creates N Nodes (3 voters, 2 eligible standbys, the rest
//! agents), enrolls N
//! hosts each with its own identity and token, starts the release
//! `fleet-role run` under its ServiceAccount, and runs N reporting hosts in
//! this process, each with its own credential (one connection pool, one
//! bearer token per host), staggered over the heartbeat period. Each host
//! writes as its actuator does:
//!
//! - `--mode hosts` (this release): the actuator's own code
//!   (`actuator::report::Published`): its heartbeat Lease renewed every
//!   period, its report written once (an agent's verdict does not change)
//!   or, on a server carrying an etcd view, every period;
//! - `--mode shared` (earlier releases): the request their actuator sent,
//!   a server-side apply of its own key of the shared ConfigMap
//!   `platform/fleet-role-actuators` under its own field manager, with its
//!   report (heartbeat and `seq` moved on) every period, under the identity
//!   their `enroll` made (a ServiceAccount in `platform` and three bindings).
//!
//! After one period of warm-up it measures S seconds: the writes accepted
//! (and refused), the bytes etcd took in puts (etcd's own
//! `etcd_debugging_mvcc_total_put_size_in_bytes`, keys and values of every
//! revision written, between the two ends of the window), etcd's database
//! size at the end (`etcd_mvcc_db_total_size_in_bytes`: no compaction runs
//! within the window unless it passes the API server's 5 minutes), the
//! controller's resident memory at the end, and the API server's requests
//! (`apiserver_request_total`) over the window. The last line:
//!
//! `reports: hosts=N heartbeat=Hs writes/s=W etcd-bytes/s=B bytes/host/heartbeat=P etcd-db-bytes=D controller-rss-mb=R api-requests/s=Q`
//!
//! with P = B × H / N. Every wait is bounded; every process started is
//! killed when its guard is dropped.
#![forbid(unsafe_code)]

mod common;

use std::{
    fs,
    path::PathBuf,
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use clap::{Parser, ValueEnum};
use clock::Clock;
use common::{
    STANDBYS, VOTERS, apply_rbac, create_nodes, node_names, proc_kib, say, spawn_logged,
    write_kubeconfig,
};
use futures::StreamExt;
use k8s_openapi::{
    api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::MicroTime, jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use protocol::{
    Names, NodeName, Report,
    etcd::{EtcdView, Member, MemberId},
    names::REPORT_CONFIGMAP,
    report::{Eligibility, HostPart},
};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use testcp::ControlPlane;
use tokio::process::Command;

/// How the hosts report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// This release: a heartbeat Lease and a report ConfigMap per host.
    Hosts,
    /// Earlier releases: every host's key of one shared ConfigMap.
    Shared,
}

#[derive(Debug, Parser)]
struct Args {
    /// How many reporting hosts.
    #[arg(long, default_value_t = 100)]
    hosts: usize,
    /// How long the measured window lasts, after one period of warm-up.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Each host's heartbeat period.
    #[arg(long, default_value_t = 10)]
    heartbeat_secs: u64,
    /// How the hosts report.
    #[arg(long, value_enum, default_value_t = Mode::Hosts)]
    mode: Mode,
    /// Where the release `fleet-role` is.
    #[arg(long)]
    controller_bin: PathBuf,
}

/// The servers among the hosts (the voters; the rest are agents).
const SERVERS: usize = VOTERS.len();
/// Requests in flight while setting up.
const SETUP_AT_ONCE: usize = 16;

fn main() -> ExitCode {
    let args = Args::parse();
    common::main("bench_reports", |clock| run(args, clock))
}

/// What the hosts did, counted as they go.
#[derive(Default)]
struct Counts {
    accepted: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
}

impl Counts {
    fn count<T>(&self, r: &Result<T, kube::Error>) {
        let c = match r {
            Ok(_) => &self.accepted,
            Err(kube::Error::Api(s)) if (400..500).contains(&s.code) => &self.refused,
            Err(_) => &self.failed,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn read(&self) -> (u64, u64, u64) {
        (
            self.accepted.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

async fn run(args: Args, clock: Clock) -> anyhow::Result<()> {
    let least = VOTERS.len() + STANDBYS.len();
    anyhow::ensure!(args.hosts >= least, "--hosts must be at least {least}");
    anyhow::ensure!(
        args.heartbeat_secs > 0,
        "--heartbeat-secs must be at least 1"
    );
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    say(
        &clock,
        &format!(
            "{} hosts, mode {:?}, heartbeat {} s, {} s measured (load average before: {})",
            args.hosts,
            args.mode,
            args.heartbeat_secs,
            args.seconds,
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        ),
    );
    let dir = tempfile::Builder::new()
        .prefix("bench-reports-")
        .tempdir()?;
    let mut plane = ControlPlane::start().await?;
    apply_rbac(&plane).await?;
    let admin = plane.admin_client()?;
    let names = Names::default();
    let nodes = node_names(args.hosts);

    say(&clock, "creating the Nodes");
    // Ready, the voters with k3s's marks and 2 standbys eligible, as `run`
    // needs to start; no node Leases (a Node without one is judged by its
    // Ready condition), so nothing goes stale and `run` stays quiet.
    create_nodes(&admin, &names, &nodes, &clock).await?;

    say(&clock, "enrolling the hosts");
    let enrolled = futures::stream::iter(nodes.iter())
        .map(|n| enroll(&plane, &names, n, args.mode))
        .buffer_unordered(SETUP_AT_ONCE)
        .collect::<Vec<_>>()
        .await;
    let mut tokens = std::collections::BTreeMap::new();
    for e in enrolled {
        let (node, token) = e?;
        tokens.insert(node, token);
    }

    say(&clock, "starting fleet-role run");
    let token = plane
        .service_account_token("platform", "fleet-role")
        .await?;
    let kubeconfig = write_kubeconfig(&plane, dir.path(), "fleet-role", &token)?;
    let config = dir.path().join("controller.toml");
    fs::write(&config, "voters = 3\n")?;
    let mut command = Command::new(&args.controller_bin);
    command
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--config")
        .arg(&config)
        .arg("run")
        .env_remove("KUBECONFIG");
    let controller = spawn_logged(command, &dir.path().join("run.log"), "warn")
        .context("starting fleet-role run")?;
    let controller_pid = controller.id().context("fleet-role run's pid")?;

    // One connection pool for every host, each request with its host's own
    // token: 5,000 TLS connections would measure this machine, not the
    // API server's work.
    let url = plane.urls()[0].clone();
    let base = Client::try_from(plane.pki().client_config(&url, None))?;
    let period = Duration::from_secs(args.heartbeat_secs);
    let counts = Arc::new(Counts::default());
    let started = clock.now();
    let warm_up_end = started + period;
    let end = warm_up_end + Duration::from_secs(args.seconds);
    say(&clock, "the hosts report");
    let mut tasks = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let client = host_client(&base, &tokens[node]);
        let host = Host {
            node: node.clone(),
            server: i < SERVERS,
            names: names.clone(),
            client,
            clock: clock.clone(),
            period,
            counts: counts.clone(),
        };
        // Staggered over the period, as hosts started at random times are.
        let offset = period.mul_f64(i as f64 / args.hosts as f64);
        let mode = args.mode;
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(offset).await;
            host.beat_until(mode, end).await;
        }));
    }
    let etcd_metrics = plane.etcd().options().metrics_url.clone();
    tokio::time::sleep(warm_up_end.saturating_duration_since(clock.now())).await;
    let from = clock.now();
    let before = (
        etcd_figure(&etcd_metrics, "etcd_debugging_mvcc_total_put_size_in_bytes").await?,
        api_requests(&admin).await?,
        counts.read(),
    );
    say(&clock, "measuring");
    tokio::time::sleep(end.saturating_duration_since(clock.now())).await;
    let after = (
        etcd_figure(&etcd_metrics, "etcd_debugging_mvcc_total_put_size_in_bytes").await?,
        api_requests(&admin).await?,
        counts.read(),
    );
    // The window as it was: the first reading may have come late on a
    // loaded machine.
    let secs = clock.since(from).as_secs_f64();
    for t in tasks {
        t.abort();
    }
    let db = etcd_figure(&etcd_metrics, "etcd_mvcc_db_total_size_in_bytes").await?;
    let mut controller = controller;
    if let Some(status) = controller.try_wait()? {
        let log = fs::read_to_string(dir.path().join("run.log")).unwrap_or_default();
        anyhow::bail!("fleet-role run ended ({status}) before the window's end:\n{log}");
    }
    let rss_mb = proc_kib(controller_pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0;
    let hwm_mb = proc_kib(controller_pid, "VmHWM:").unwrap_or(0) as f64 / 1024.0;
    let writes = (after.2.0 - before.2.0) as f64 / secs;
    let bytes = (after.0 - before.0) / secs;
    let per_host = bytes * args.heartbeat_secs as f64 / args.hosts as f64;
    let requests = (after.1.total - before.1.total) / secs;
    let mut by_kind: Vec<(String, f64)> = after
        .1
        .by_kind
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                (v - before.1.by_kind.get(k).copied().unwrap_or(0.0)) / secs,
            )
        })
        .filter(|(_, v)| *v >= 0.05)
        .collect();
    by_kind.sort_by(|a, b| b.1.total_cmp(&a.1));
    let by_kind: Vec<String> = by_kind
        .iter()
        .take(6)
        .map(|(k, v)| format!("{k} {v:.1}/s"))
        .collect();
    let (refused, failed) = (after.2.1 - before.2.1, after.2.2 - before.2.2);
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    say(
        &clock,
        &format!(
            "window: {secs:.1} s, {} writes accepted, {refused} refused, {failed} failed; API requests by verb, resource and code: {}; controller peak {hwm_mb:.1} MB; load average after: {}",
            after.2.0 - before.2.0,
            by_kind.join(", "),
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        ),
    );
    println!(
        "reports: hosts={} heartbeat={}s writes/s={writes:.1} etcd-bytes/s={bytes:.0} bytes/host/heartbeat={per_host:.0} etcd-db-bytes={db:.0} controller-rss-mb={rss_mb:.1} api-requests/s={requests:.1}",
        args.hosts, args.heartbeat_secs
    );
    drop(controller);
    Ok(())
}

/// Makes `node`'s identity as `mode`'s release made it; returns a token.
async fn enroll(
    plane: &ControlPlane,
    names: &Names,
    node: &str,
    mode: Mode,
) -> anyhow::Result<(String, SecretString)> {
    let id = kubeview::Identity::of(&NodeName::parse(node)?)?;
    let (objects, namespace) = match mode {
        Mode::Hosts => (id.objects(names), names.hosts_namespace.clone()),
        Mode::Shared => (id.legacy_objects(names), names.report_namespace.clone()),
    };
    for o in objects {
        plane.apply_yaml(&o.to_string()).await?;
    }
    let token = plane.service_account_token(&namespace, id.name()).await?;
    Ok((node.to_string(), token))
}

/// A client that sends every request over `base`'s connections with
/// `token` as its bearer token.
fn host_client(base: &Client, token: &SecretString) -> Client {
    let base = base.clone();
    let mut auth = http::HeaderValue::from_str(&format!("Bearer {}", token.expose_secret()))
        .expect("a token is a header value");
    auth.set_sensitive(true);
    let service = tower::service_fn(move |mut req: http::Request<kube::client::Body>| {
        let base = base.clone();
        req.headers_mut()
            .insert(http::header::AUTHORIZATION, auth.clone());
        async move { base.send(req).await }
    });
    Client::new(service, "default")
}

/// One reporting host.
struct Host {
    node: String,
    server: bool,
    names: Names,
    client: Client,
    clock: Clock,
    period: Duration,
    counts: Arc<Counts>,
}

impl Host {
    /// Its host part now: a server's with its view of a 3-member etcd, an
    /// agent's with its promotion verdict.
    fn part(&self, t: i64) -> HostPart {
        let etcd = self.server.then(|| EtcdView {
            read_at: t,
            member: MemberId(1),
            members: (1..=SERVERS as u64)
                .map(|i| Member {
                    id: MemberId(i),
                    name: format!("voter-{i}-0a1b2c3d"),
                    peer_urls: vec![format!("https://10.0.0.{i}:2380")],
                    client_urls: vec![format!("https://10.0.0.{i}:2379")],
                    learner: false,
                })
                .collect(),
            leader: Some(MemberId(1)),
            raft_term: 2,
            raft_index: 1000 + t.unsigned_abs(),
            db_size: 20_000_000,
            alarms: vec![],
            healthy: true,
        });
        HostPart {
            heartbeat_at: t,
            demotion: self.server.then_some(Eligibility::Ok),
            promotion: (!self.server).then_some(Eligibility::Ok),
            etcd,
            release: None,
            credential_expires_at: None,
        }
    }

    async fn beat_until(&self, mode: Mode, end: std::time::Instant) {
        let mut published = actuator::report::Published::default();
        let mut report: Option<Report> = None;
        let mut tick = tokio::time::interval(self.period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while self.clock.now() < end {
            tick.tick().await;
            let t = self.clock.unix_secs();
            let next = Report::with_host_part(report.as_ref(), self.part(t), t);
            match mode {
                Mode::Hosts => {
                    // As the actuator: the report on a change (an agent's,
                    // once) or with an etcd view; the heartbeat every period.
                    if report.is_none() || self.server {
                        let r = published
                            .write(&self.client, &self.names, &self.node, &next)
                            .await;
                        self.counts.count(&r);
                        report = Some(next);
                    }
                    let millis = i64::try_from(self.clock.unix_millis()).unwrap_or(0);
                    let stamp = MicroTime(
                        Timestamp::from_millisecond(millis).unwrap_or(Timestamp::UNIX_EPOCH),
                    );
                    let secs = i32::try_from(self.period.as_secs() * 2).unwrap_or(i32::MAX);
                    let r = published
                        .renew(&self.client, &self.names, &self.node, stamp, secs, None)
                        .await;
                    self.counts.count(&r);
                }
                Mode::Shared => {
                    let api: Api<ConfigMap> =
                        Api::namespaced(self.client.clone(), &self.names.report_namespace);
                    let body = json!({
                        "apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": REPORT_CONFIGMAP, "namespace": self.names.report_namespace},
                        "data": { &self.node: next.to_json() },
                    });
                    let params = PatchParams::apply(&self.names.report_field_manager(&self.node));
                    let r = api
                        .patch(REPORT_CONFIGMAP, &params, &Patch::Apply(&body))
                        .await;
                    self.counts.count(&r);
                    report = Some(next);
                }
            }
        }
    }
}

/// One figure of etcd's `/metrics` (plain HTTP on its metrics URL).
async fn etcd_figure(metrics_url: &str, name: &str) -> anyhow::Result<f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authority = metrics_url
        .strip_prefix("http://")
        .context("etcd's metrics URL is plain HTTP")?;
    let fetch = async {
        let mut c = tokio::net::TcpStream::connect(authority).await?;
        c.write_all(
            // HTTP/1.0: a body whole, never in chunks that could cut a line.
            format!("GET /metrics HTTP/1.0\r\nHost: {authority}\r\n\r\n").as_bytes(),
        )
        .await?;
        let mut out = String::new();
        c.read_to_string(&mut out).await?;
        anyhow::Ok(out)
    };
    let text = tokio::time::timeout(Duration::from_secs(30), fetch)
        .await
        .context("etcd's metrics within 30 s")??;
    figure(&text, name).with_context(|| format!("no {name} in etcd's metrics"))
}

/// The sum of every sample of `name` in a Prometheus exposition.
fn figure(text: &str, name: &str) -> Option<f64> {
    let values: Vec<f64> = text
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// The requests the API server has answered (`apiserver_request_total`):
/// in all, and by verb, resource and code.
struct Requests {
    total: f64,
    by_kind: std::collections::BTreeMap<String, f64>,
}

/// Every request the API server has answered.
async fn api_requests(admin: &Client) -> anyhow::Result<Requests> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let text = tokio::time::timeout(Duration::from_secs(30), admin.request_text(req))
        .await
        .context("the API server's metrics within 30 s")??;
    let total = figure(&text, "apiserver_request_total").context("no apiserver_request_total")?;
    let label = |l: &str, k: &str| {
        l.split_once(&format!("{k}=\""))
            .and_then(|(_, r)| r.split_once('"'))
            .map(|(v, _)| v.to_string())
            .unwrap_or_default()
    };
    let mut by_kind = std::collections::BTreeMap::new();
    for l in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let Some(v) = l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        let kind = format!(
            "{} {} {}",
            label(l, "verb"),
            label(l, "resource"),
            label(l, "code")
        );
        *by_kind.entry(kind).or_insert(0.0) += v;
    }
    Ok(Requests { total, by_kind })
}
