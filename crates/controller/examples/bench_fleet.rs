//! `bench_fleet`: `fleet-role run` at fleet scale. Figures, not a test: no
//! timed assertions. Run by `scripts/bench.sh fleet`.
//!
//! For each size N it starts a real etcd and kube-apiserver (testcp) with an
//! audit policy that logs the controller's ServiceAccount, applies
//! `deploy/rbac/`, creates N Nodes in parallel batches (3 voters with k3s's
//! etcd labels, annotations and `EtcdIsVoter`; 2 eligible standbys; the rest
//! plain agents), heartbeats the voters' and standbys' node Leases every 2 s
//! (the agents have none: a Node without a node Lease is judged by its Ready
//! condition alone, and 5,000 heartbeats would measure this machine, not the
//! controller), starts the release `fleet-role run` under its ServiceAccount,
//! lets it settle, and measures:
//!
//! - its peak resident memory (`VmHWM`);
//! - its API requests in a quiet window, from the audit log;
//! - `fleet-role status`'s wall time;
//! - one decision's time, in this process over a view of N Nodes;
//! - the time from one voter's node Lease going stale past
//!   `heartbeat_grace_secs` to the regrade Lease being taken for the swap;
//! - with `--actuator-bin-dir` (where `fleet-role-actuator` and the
//!   `systemctl` and `k3s` stand-ins are), over the first size only and in
//!   the same quiet window: one idle `fleet-role-actuator watch` (resync
//!   every 2 s, as in the lab) for an agent Node of its own, under that
//!   host's own identity (as `fleet-role enroll` makes it): its requests by
//!   verb and resource, and its resident memory.
//!
//! Every wait is bounded; every process started is killed when its guard is
//! dropped (the plane's servers by [`ControlPlane`]'s own guards).
#![forbid(unsafe_code)]

mod common;

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    fs,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, bail};
use clap::Parser;
use clock::Clock;
use common::{
    STANDBYS, VOTERS, apply_rbac, create_nodes, node, node_names, proc_kib, say, spawn_logged,
    stamp, write_kubeconfig, write_private,
};
use fleetdecide::{SwapState, next_action, run_decision};
use k8s_openapi::{
    api::{
        coordination::v1::{Lease, LeaseSpec},
        core::v1::Node,
    },
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use protocol::{Names, SwapId};
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use testcp::ControlPlane;
use tokio::process::{Child, Command};

/// The controller's ServiceAccount, as the audit log names it.
const CONTROLLER_USER: &str = "system:serviceaccount:platform:fleet-role";

/// The measured actuator's ServiceAccount: its host's own identity, as
/// `fleet-role enroll bench-actuator` makes it.
const ACTUATOR_USER: &str = "system:serviceaccount:platform:fleet-role-actuator-bench-actuator";
/// The Node of the measured actuator (an agent, not eligible).
const ACTUATOR_NODE: &str = "bench-actuator";

/// Metadata of every request by the two ServiceAccounts; nothing else.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [\"RequestReceived\"]
rules:
- level: Metadata
  users: [\"system:serviceaccount:platform:fleet-role\", \"system:serviceaccount:platform:fleet-role-actuator-bench-actuator\"]
- level: None
";

/// `run`'s settings here: a voter is replaced as soon as its node Lease is
/// stale past the (shortest allowed) heartbeat grace.
const CONFIG: &str = "voters = 3
grace_period_secs = 0
heartbeat_grace_secs = 5
settle_secs = 0
leader_lease_duration_secs = 15
";

/// The heartbeat grace of [`CONFIG`].
const HEARTBEAT_GRACE_SECS: i64 = 5;
/// How often the simulated kubelets renew their node Leases.
const HEARTBEAT: Duration = Duration::from_secs(2);
/// Nodes created at once.
/// The voters and the standbys (the rest are agents).
/// The voter whose kubelet stops.
const STALE_VOTER: &str = "voter-3";

/// Measures `fleet-role run` over fleets of several sizes.
#[derive(Debug, Parser)]
struct Args {
    /// The fleet sizes (Nodes).
    #[arg(long, value_delimiter = ',', default_value = "50,500,5000")]
    sizes: Vec<usize>,
    /// The quiet window's length, in seconds.
    #[arg(long, default_value_t = 60)]
    quiet_secs: u64,
    /// The `fleet-role` binary (default: beside this example's directory).
    #[arg(long)]
    fleet_role: Option<PathBuf>,
    /// Also measure an idle actuator, with the binaries in this directory.
    #[arg(long)]
    actuator_bin_dir: Option<PathBuf>,
}

/// One size's figures.
#[derive(Debug, Default)]
struct Row {
    nodes: usize,
    create_secs: f64,
    hwm_kib: u64,
    rss_kib: u64,
    watches: usize,
    others: usize,
    other_kinds: BTreeMap<String, usize>,
    stale_to_taken: Option<f64>,
    rule_to_taken: Option<f64>,
    status_ms: Vec<f64>,
    actuator: Option<ActuatorFigures>,
    run_decision_us: f64,
    next_action_us: f64,
    assemble_us: f64,
    facts_us: f64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    common::main("bench_fleet", |clock| run(args, clock))
}

async fn run(args: Args, clock: Clock) -> anyhow::Result<()> {
    let clock = &clock;
    let exe = std::env::current_exe()?;
    let fleet_role = match args.fleet_role.clone() {
        Some(p) => p,
        // target/release/examples/bench_fleet -> target/release/fleet-role
        None => exe
            .parent()
            .and_then(Path::parent)
            .context("no directory above the example")?
            .join("fleet-role"),
    };
    anyhow::ensure!(
        fleet_role.is_file(),
        "{} is missing: cargo build --release --bin fleet-role",
        fleet_role.display()
    );
    let mut rows = Vec::new();
    for (i, &n) in args.sizes.iter().enumerate() {
        anyhow::ensure!(n >= VOTERS.len() + STANDBYS.len(), "a size below 5 Nodes");
        say(clock, &format!("=== {n} Nodes ==="));
        let actuator = args.actuator_bin_dir.as_deref().filter(|_| i == 0);
        let row = measure(n, &args, &fleet_role, actuator, clock).await?;
        say(clock, &format!("{row:?}"));
        rows.push(row);
    }
    let machine = load_line();
    println!();
    println!(
        "| Nodes | peak RSS (VmHWM) | requests in a quiet {} s (watches / others) | stale past grace -> Lease taken | `status` wall | `run_decision` | `next_action` | view assembly | every Node's facts |",
        args.quiet_secs
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let others: Vec<String> = r
            .other_kinds
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        println!(
            "| {} | {:.1} MB | {} / {}{} | {} | {} | {:.1} µs | {:.1} µs | {:.0} µs | {:.0} µs |",
            r.nodes,
            r.hwm_kib as f64 / 1024.0,
            r.watches,
            r.others,
            if others.is_empty() {
                String::new()
            } else {
                format!(" ({})", others.join(", "))
            },
            match (r.stale_to_taken, r.rule_to_taken) {
                (Some(a), Some(b)) => format!("{a:.2} s ({b:.2} s after the 1 s rule allows)"),
                _ => "not taken within 120 s".into(),
            },
            r.status_ms
                .iter()
                .map(|m| format!("{:.2} s", m / 1000.0))
                .collect::<Vec<_>>()
                .join(", "),
            r.run_decision_us,
            r.next_action_us,
            r.assemble_us,
            r.facts_us,
        );
    }
    for r in &rows {
        if let Some(a) = &r.actuator {
            println!();
            println!(
                "actuator (watch, resync 2 s, {} Nodes): {} requests in the quiet {} s ({} watches / {} others{}), {:.1} requests a minute; resident {:.1} MB (peak {:.1} MB)",
                r.nodes,
                a.watches + a.others,
                args.quiet_secs,
                a.watches,
                a.others,
                if a.kinds.is_empty() {
                    String::new()
                } else {
                    format!(
                        ": {}",
                        a.kinds
                            .iter()
                            .map(|(k, v)| format!("{v} {k}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
                (a.watches + a.others) as f64 * 60.0 / args.quiet_secs as f64,
                a.rss_kib as f64 / 1024.0,
                a.hwm_kib as f64 / 1024.0,
            );
        }
    }
    println!();
    println!("machine: {machine}");
    Ok(())
}

fn load_line() -> String {
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    format!(
        "{cpus} cores, load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

// === The world ===

/// A plane with the audit log, the RBAC, and the controller's files.
struct World {
    plane: ControlPlane,
    admin: Client,
    audit_log: PathBuf,
    kubeconfig: PathBuf,
    config: PathBuf,
    dir: tempfile::TempDir,
}

impl World {
    async fn start() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("bench-fleet-").tempdir()?;
        let policy = dir.path().join("audit-policy.yaml");
        fs::write(&policy, AUDIT_POLICY)?;
        let audit_log = dir.path().join("audit.log");
        let plane = ControlPlane::start_with_apiserver_args(vec![
            format!("--audit-policy-file={}", policy.display()),
            format!("--audit-log-path={}", audit_log.display()),
            "--audit-log-format=json".into(),
            "--audit-log-maxsize=0".into(),
        ])
        .await?;
        apply_rbac(&plane).await?;
        let admin = plane.admin_client()?;
        let token = plane
            .service_account_token("platform", "fleet-role")
            .await?;
        let kubeconfig = write_kubeconfig(&plane, dir.path(), "fleet-role", &token)?;
        let config = dir.path().join("controller.toml");
        fs::write(&config, CONFIG)?;
        Ok(Self {
            plane,
            admin,
            audit_log,
            kubeconfig,
            config,
            dir,
        })
    }

    /// `fleet-role ARGS` with this world's kubeconfig and config; its
    /// output goes to `log` (killed when dropped).
    fn fleet_role(&self, bin: &Path, args: &[&str], log: &str) -> anyhow::Result<Child> {
        let mut command = Command::new(bin);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env_remove("KUBECONFIG");
        spawn_logged(command, &self.dir.path().join(log), "info")
    }
}

// === The fleet ===

/// Creates the Nodes (status included, as a kubelet registers) and the
/// node Leases of the voters and standbys.
async fn create_fleet(
    admin: &Client,
    names: &Names,
    n: usize,
    clock: &Clock,
) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(admin.clone());
    let all = node_names(n);
    create_nodes(admin, names, &all, clock).await?;
    // The API server keeps a created Node's status (a kubelet registers so);
    // make sure, since every figure depends on the voters being seen.
    for name in VOTERS.iter().chain(STANDBYS.iter()) {
        let got = nodes.get(name).await?;
        if !kubeview::condition_true(&got, "Ready") {
            let status = node(names, name, 0, clock)?.status;
            nodes
                .patch_status(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "status": status })),
                )
                .await?;
        }
    }
    let sample = nodes.get(all.last().expect("Nodes")).await?;
    if !kubeview::condition_true(&sample, "Ready") {
        say(
            clock,
            "note: the agents' Ready condition was dropped on create",
        );
    }
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "kube-node-lease");
    for name in VOTERS.iter().chain(STANDBYS.iter()) {
        leases
            .create(
                &PostParams::default(),
                &Lease {
                    metadata: ObjectMeta {
                        name: Some((*name).into()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some((*name).into()),
                        lease_duration_seconds: Some(40),
                        renew_time: Some(MicroTime(stamp(clock))),
                        ..LeaseSpec::default()
                    }),
                },
            )
            .await?;
    }
    Ok(())
}

/// The kubelets of the voters and standbys, renewing their node Leases
/// every [`HEARTBEAT`]; a name put in `stopped` stops renewing. Aborted
/// when dropped.
struct Kubelets {
    stopped: Arc<Mutex<BTreeSet<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Kubelets {
    fn start(admin: Client, clock: Clock) -> Self {
        let stopped = Arc::new(Mutex::new(BTreeSet::new()));
        let s = stopped.clone();
        let task = tokio::spawn(async move {
            let leases: Api<Lease> = Api::namespaced(admin, "kube-node-lease");
            loop {
                for name in VOTERS.iter().chain(STANDBYS.iter()) {
                    if s.lock().expect("not poisoned").contains(*name) {
                        continue;
                    }
                    let renew = json!({"spec": {"renewTime": MicroTime(stamp(&clock))}});
                    if let Err(e) = leases
                        .patch(name, &PatchParams::default(), &Patch::Merge(renew))
                        .await
                    {
                        say(&clock, &format!("kubelet {name}: {e}"));
                    }
                }
                tokio::time::sleep(HEARTBEAT).await;
            }
        });
        Self { stopped, task }
    }

    fn stop(&self, name: &str) {
        self.stopped
            .lock()
            .expect("not poisoned")
            .insert(name.into());
    }
}

impl Drop for Kubelets {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// === The audit log ===

/// One audited request.
#[derive(Debug, Clone)]
struct Audited {
    id: String,
    user: String,
    verb: String,
    what: String,
}

/// The audit log's events from byte `offset` on, and the new offset. Only
/// whole lines are read: a line still being written is left for next time.
fn read_audit(path: &Path, offset: usize) -> (Vec<Audited>, usize) {
    let Ok(text) = fs::read(path) else {
        return (Vec::new(), offset);
    };
    let Some(tail) = text.get(offset..) else {
        return (Vec::new(), offset);
    };
    let end = tail.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut events = Vec::new();
    for line in String::from_utf8_lossy(&tail[..end]).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let s = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let name = s("/objectRef/name");
        events.push(Audited {
            id: s("/auditID"),
            user: s("/user/username"),
            verb: s("/verb"),
            what: format!(
                "{} {}{}",
                s("/verb"),
                s("/objectRef/resource"),
                if name.is_empty() {
                    String::new()
                } else {
                    format!("/{name}")
                }
            ),
        });
    }
    (events, offset + end)
}

/// Reads the audit log as it grows, remembering every request seen, so a
/// window counts only requests made in it (a watch opened before it is
/// not counted when it ends in it).
struct AuditTail {
    path: PathBuf,
    offset: usize,
    seen: HashSet<String>,
}

impl AuditTail {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            offset: 0,
            seen: HashSet::new(),
        }
    }

    /// The requests first seen since the last call.
    fn new_requests(&mut self) -> Vec<Audited> {
        let (events, offset) = read_audit(&self.path, self.offset);
        self.offset = offset;
        events
            .into_iter()
            .filter(|e| self.seen.insert(e.id.clone()))
            .collect()
    }
}

// === /proc ===

// === One size ===

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The median time of `f` in microseconds, over `runs` runs.
fn time_us<T>(clock: &Clock, runs: usize, mut f: impl FnMut() -> T) -> f64 {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = clock.now();
        std::hint::black_box(f());
        times.push(clock.since(t).as_secs_f64() * 1e6);
    }
    median(times)
}

async fn wait_until<F, Fut>(
    clock: &Clock,
    what: &str,
    limit: Duration,
    mut check: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let started = clock.now();
    while !check().await? {
        if clock.since(started) > limit {
            bail!("{what}: not within {} s", limit.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn lease_holder(admin: &Client, ns: &str, name: &str) -> anyhow::Result<Option<String>> {
    Ok(Api::<Lease>::namespaced(admin.clone(), ns)
        .get_opt(name)
        .await?
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty()))
}

async fn measure(
    n: usize,
    args: &Args,
    fleet_role: &Path,
    actuator_bins: Option<&Path>,
    clock: &Clock,
) -> anyhow::Result<Row> {
    let mut row = Row {
        nodes: n,
        ..Row::default()
    };
    let world = World::start().await?;
    let settings =
        controller::config::Settings::resolve(toml::from_str(CONFIG).context("CONFIG")?, None)?
            .with_clock(clock.clone());
    let names = settings.names().clone();
    let t = clock.now();
    create_fleet(&world.admin, &names, n, clock).await?;
    row.create_secs = clock.since(t).as_secs_f64();
    say(
        clock,
        &format!("{n} Nodes created in {:.1} s", row.create_secs),
    );
    let kubelets = Kubelets::start(world.admin.clone(), clock.clone());

    // One decision, in this process, over the same Nodes.
    let nodes = Api::<Node>::all(world.admin.clone())
        .list(&ListParams::default())
        .await?
        .items;
    anyhow::ensure!(nodes.len() == n, "{} Nodes listed of {n}", nodes.len());
    // As `run` does: each Node's facts are mapped once per resourceVersion
    // and kept beside the store; a decision assembles the view from
    // them (clones), applies the heartbeat rule and decides.
    let facts: Vec<_> = nodes
        .iter()
        .map(|node| {
            (
                kubeview::node_facts(&names, node),
                node.metadata.uid.clone(),
            )
        })
        .collect();
    let assemble = || {
        controller::observe::assemble(
            &settings,
            facts.iter().cloned(),
            |_| Some(clock.unix_secs()),
            &controller::observe::Reports::default(),
            None,
            &mut fleetdecide::Sightings::default(),
        )
    };
    let runs = if n >= 5000 { 51 } else { 201 };
    row.facts_us = time_us(clock, runs, || {
        nodes
            .iter()
            .map(|node| kubeview::node_facts(&names, node))
            .collect::<Vec<_>>()
    });
    row.assemble_us = time_us(clock, runs, &assemble);
    let view = assemble().view;
    row.run_decision_us = time_us(clock, runs, || run_decision(&view));
    let swap = SwapState {
        out: Some(protocol::NodeName::parse(STALE_VOTER)?),
        incoming: Some(protocol::NodeName::parse(STANDBYS[0])?),
        queued: Vec::new(),
        candidate: SwapId::parse("bench-1")?,
        instance: "bench".into(),
        taken: None,
    };
    row.next_action_us = time_us(clock, runs, || next_action(&view, &swap));
    say(
        clock,
        &format!(
            "decision: run_decision {:.1} µs, next_action {:.1} µs, view assembly {:.0} µs, every Node's facts (a relist) {:.0} µs (median of {runs})",
            row.run_decision_us, row.next_action_us, row.assemble_us, row.facts_us
        ),
    );

    let actuator = match actuator_bins {
        Some(bins) => Some(Actuator::start(&world, bins, clock).await?),
        None => None,
    };

    // `fleet-role run`, settled: the leader Lease held, then 5 s without a
    // request but watches and the leader Lease's.
    let mut audit = AuditTail::new(world.audit_log.clone());
    let controller = world.fleet_role(fleet_role, &["run"], "run.log")?;
    let pid = controller.id().context("fleet-role run has a pid")?;
    wait_until(
        clock,
        "the leader Lease taken",
        Duration::from_secs(120),
        || async {
            Ok(lease_holder(&world.admin, "platform", "fleet-role-leader")
                .await?
                .is_some())
        },
    )
    .await?;
    let started = clock.now();
    let mut last_busy = clock.now();
    while clock.since(last_busy) < Duration::from_secs(5) {
        anyhow::ensure!(
            clock.since(started) < Duration::from_secs(120),
            "fleet-role run did not settle within 120 s"
        );
        for e in audit.new_requests() {
            if e.user == CONTROLLER_USER
                && e.verb != "watch"
                && !e.what.ends_with("leases/fleet-role-leader")
            {
                last_busy = clock.now();
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    say(
        clock,
        &format!(
            "settled {:.1} s after the leader Lease was taken",
            started.elapsed().as_secs_f64()
        ),
    );

    // The quiet window.
    audit.new_requests();
    tokio::time::sleep(Duration::from_secs(args.quiet_secs)).await;
    // The audit log is written as each request ends; give it a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let window = audit.new_requests();
    if let Some(a) = &actuator {
        let mut f = ActuatorFigures {
            rss_kib: proc_kib(a.pid, "VmRSS:").unwrap_or(0),
            hwm_kib: proc_kib(a.pid, "VmHWM:").unwrap_or(0),
            ..ActuatorFigures::default()
        };
        for e in window.iter().filter(|e| e.user == ACTUATOR_USER) {
            if e.verb == "watch" {
                f.watches += 1;
            } else {
                f.others += 1;
            }
            *f.kinds.entry(e.what.clone()).or_default() += 1;
        }
        say(clock, &format!("actuator: {f:?}"));
        row.actuator = Some(f);
    }
    drop(actuator);
    for e in window.into_iter().filter(|e| e.user == CONTROLLER_USER) {
        if e.verb == "watch" {
            row.watches += 1;
        } else {
            row.others += 1;
        }
        *row.other_kinds.entry(e.what).or_default() += usize::from(e.verb != "watch");
    }
    row.other_kinds.retain(|_, v| *v > 0);
    row.rss_kib = proc_kib(pid, "VmRSS:").unwrap_or(0);
    say(
        clock,
        &format!(
            "quiet {} s: {} watches, {} others {:?}; resident {} KiB",
            args.quiet_secs, row.watches, row.others, row.other_kinds, row.rss_kib
        ),
    );

    // `status`'s wall time.
    for _ in 0..3 {
        let t = clock.now();
        let child = world.fleet_role(fleet_role, &["status"], "status.log")?;
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .context("fleet-role status within 60 s")??;
        let took = clock.since(t).as_secs_f64() * 1000.0;
        if !out.status.success() {
            say(
                clock,
                &format!("fleet-role status exited {:?}", out.status.code()),
            );
        }
        row.status_ms.push(took);
    }
    say(clock, &format!("status: {:?} ms", row.status_ms));

    // A voter's kubelet stops; the time from its node Lease going stale
    // past the grace to the regrade Lease taken for the swap.
    kubelets.stop(STALE_VOTER);
    // Let a renewal in flight land before reading the last renew time.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let renewed = Api::<Lease>::namespaced(world.admin.clone(), "kube-node-lease")
        .get(STALE_VOTER)
        .await?
        .spec
        .and_then(|s| s.renew_time)
        .context("the stale voter's node Lease has a renew time")?
        .0;
    let stale_at = renewed.as_millisecond() as f64 / 1000.0 + HEARTBEAT_GRACE_SECS as f64;
    // `apply_heartbeats` counts whole seconds: stale once now - renewed > grace.
    let rule_at = (renewed.as_second() + HEARTBEAT_GRACE_SECS + 1) as f64;
    let taken = async {
        wait_until(
            clock,
            "the regrade Lease taken",
            Duration::from_secs(120),
            || async {
                Ok(lease_holder(&world.admin, "kube-system", &names.lease_name)
                    .await?
                    .is_some())
            },
        )
        .await
    };
    match taken.await {
        Ok(()) => {
            let at = clock.unix_millis() as f64 / 1000.0;
            row.stale_to_taken = Some(at - stale_at);
            row.rule_to_taken = Some(at - rule_at);
            say(
                clock,
                &format!(
                    "stale -> Lease taken: {:.2} s ({:.2} s after the rule allows)",
                    at - stale_at,
                    at - rule_at
                ),
            );
        }
        Err(e) => say(clock, &format!("{e:#}")),
    }
    row.hwm_kib = proc_kib(pid, "VmHWM:").unwrap_or(0);
    drop(controller);
    drop(kubelets);
    drop(world);
    Ok(row)
}

// === The actuator ===

/// An idle actuator's figures.
#[derive(Debug, Default)]
struct ActuatorFigures {
    watches: usize,
    others: usize,
    kinds: BTreeMap<String, usize>,
    rss_kib: u64,
    hwm_kib: u64,
}

/// One `fleet-role-actuator watch` on an agent host of its own (killed
/// when dropped; its host root removed).
struct Actuator {
    pid: u32,
    _child: Child,
    _host: standins::fixture::TestHost,
}

impl Actuator {
    async fn start(world: &World, bins: &Path, clock: &Clock) -> anyhow::Result<Self> {
        let node = node(&Names::default(), ACTUATOR_NODE, 0, clock)?;
        Api::<Node>::all(world.admin.clone())
            .create(&PostParams::default(), &node)
            .await?;
        let host = standins::fixture::TestHost::new(ACTUATOR_NODE, bins).as_agent();
        // The host's own identity, as `fleet-role enroll` makes it.
        let id = kubeview::Identity::of(&protocol::NodeName::parse(ACTUATOR_NODE)?)?;
        for object in id.objects(&Names::default()) {
            world.plane.apply_yaml(&object.to_string()).await?;
        }
        let token = world
            .plane
            .service_account_token("platform", id.name())
            .await?;
        let token_file = world.dir.path().join("actuator.token");
        write_private(&token_file, token.expose_secret())?;
        let config = world.dir.path().join("actuator.toml");
        // The lab's resync (the default is 10 s): the "33 a minute".
        fs::write(&config, "resync_secs = 2\n")?;
        let command = Command::from(host.actuator(&[
            "--config",
            &config.display().to_string(),
            "watch",
            "--api",
            &world.plane.urls()[0],
            "--ca-file",
            &world.plane.ca_file().display().to_string(),
            "--token-file",
            &token_file.display().to_string(),
        ]));
        let child = spawn_logged(command, &world.dir.path().join("actuator.log"), "info")
            .context("starting fleet-role-actuator watch")?;
        let pid = child.id().context("the actuator has a pid")?;
        Ok(Self {
            pid,
            _child: child,
            _host: host,
        })
    }
}
