//! The watcher: its own Node and the regrade Lease, each watched by name
//! (never polled), a decision on every change of either and on every resync
//! (from what the watches hold: a Lease lapses with time, not with an
//! event), and the step carried out and reported.
//!
//! The report is the watcher's memory. It is read once per session, kept in
//! memory after, and written before a step starts, at each milestone and at
//! the end, so a restarted actuator resumes a started step and never repeats
//! a settled one.

use std::{
    fmt::Debug,
    future::Future,
    sync::Arc,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use futures::{StreamExt, pin_mut};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{
    Api, Client, Resource,
    runtime::{WatchStreamExt, utils::Backoff, watcher},
};
use protocol::{
    Decision, HostState, LeaseFacts, NodeName, Observation, Phase, Report, Role, Step, SwapId,
    decide,
    decide::JoinTarget,
    etcd::EtcdView,
    names::LEASE_NAMESPACE,
    report::{Detail, Eligibility, HostPart, ReportStep},
};
use tracing::{debug, info, warn};

use crate::{cluster::Candidates, config::Settings, metrics::Metrics, report};

/// Now, unix seconds.
pub(crate) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, secs_i64)
}

/// Whole seconds of `d` as i64, saturating (an `as` cast would wrap a huge
/// one negative: a skew margin that lengthens a Lease rather than
/// shortening it).
pub(crate) fn secs_i64(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// An error with its causes, on one line (a TLS failure's reason is only in
/// the causes: "client error (Connect)" alone says nothing).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// How a watch session ended.
#[derive(Debug, PartialEq, Eq)]
pub enum SessionEnd {
    /// Asked to stop.
    Shutdown,
    /// The API server in use failed; try the next candidate.
    ApiTrouble,
    /// The watcher must not act at all (a report that does not parse, a
    /// Node whose address is another machine's); the reason says what to fix.
    Refused(String),
}

/// The watcher's state, kept across sessions (API candidates).
pub struct Watcher {
    settings: Settings,
    host: host::Host,
    node: Option<Node>,
    /// The regrade Lease as its watch last showed it (`None`: absent).
    lease: Option<LeaseFacts>,
    /// Whether this session's Lease watch has listed: no decision is made
    /// before, as an absent Lease and an unknown one are not the same.
    lease_listed: bool,
    report: Option<Report>,
    report_loaded: bool,
    /// A report that could not be written yet; retried first thing.
    unsent: bool,
    last_wait: Option<String>,
    last_view: Option<protocol::NodeFacts>,
    /// When the credential's lapse was last warned about (once an hour).
    expiry_warned: Option<std::time::Instant>,
    /// The step whose host part runs now, in its own task.
    running: Option<Running>,
    metrics: Arc<Metrics>,
    /// This host's addresses, read at start.
    addresses: host::addresses::LocalAddresses,
    /// Whether the Node's InternalIP was found to be one of them.
    address_checked: bool,
    /// When the host part was last written (`None`: not yet this run).
    last_beat: Option<Instant>,
    /// The server Nodes as last listed, for the demotion verdict between
    /// two heartbeats.
    servers: Option<Vec<host::eligibility::ServerNode>>,
    /// The local etcd member's view, read for the heartbeat.
    etcd_view: crate::etcdreport::ViewReader,
    /// The member list read through another server, when the local member
    /// does not answer.
    remote: crate::membership::RemoteReader,
}

/// A step whose host part runs in a blocking task of its own, under a
/// budget that bounds it and can cancel it, so the watcher's loop goes on
/// watching (and can take a rollback) while it runs.
struct Running {
    swap: Option<SwapId>,
    step: Step,
    /// The report's milestone when the host part started.
    detail: Option<Detail>,
    /// When the host part started (its duration's metric).
    started: Instant,
    budget: host::Budget,
    task: tokio::task::JoinHandle<Result<Option<String>, StepEnd>>,
}

/// How a step's host part ended short of its end.
#[derive(Debug)]
enum StepEnd {
    /// It failed part-way; the reason says what state the host was left in.
    Failed(String),
    /// It stopped before changing anything (its Lease lapsed while it
    /// waited for the host lock). The report still says `started`, so the
    /// step resumes when the Lease is back for its swap, or the controller
    /// asks for another.
    Stopped(String),
}

/// The Lease, read again once a step holds the host lock: the wait for the
/// lock (up to `lock_timeout`, 60 s) can outlast the Lease that let the step
/// start, and a step taken without its Lease could cost quorum.
struct LeaseGate {
    handle: tokio::runtime::Handle,
    leases: Api<Lease>,
    names: protocol::Names,
    swap: SwapId,
    /// This host's Node: the Lease must still name it for the step.
    node: String,
    step: ReportStep,
    skew_margin: i64,
}

/// What a step reaches etcd with, from its blocking thread.
struct EtcdAccess {
    handle: tokio::runtime::Handle,
    /// The local member.
    local: etcdview::Endpoint,
    /// This host's addresses (a learner never started has only its peer
    /// address to be known by).
    addresses: host::addresses::LocalAddresses,
}

impl LeaseGate {
    /// Whether the Lease is still held for the step's swap. Called on the
    /// step's blocking thread, so it may block on the request.
    fn check(&self) -> Result<(), String> {
        let lease = self
            .handle
            .block_on(self.leases.get_opt(&self.names.lease_name))
            .map_err(|e| {
                format!(
                    "the regrade Lease could not be read again once the host lock was taken: {}",
                    chain(&e)
                )
            })?;
        let facts = lease.map(|l| kubeview::lease_facts(&self.names, &l));
        protocol::decide::lease_holds(&protocol::decide::LeaseCheck {
            lease: facts.as_ref(),
            identity: &self.names.controller_identity,
            swap: &self.swap,
            node: &self.node,
            step: self.step,
            now: now(),
            skew_margin: self.skew_margin,
        })
    }
}

impl Running {
    fn is(&self, swap: &Option<SwapId>, step: &Step) -> bool {
        &self.swap == swap && self.step.report_step() == step.report_step()
    }
}

/// How long a cancelled step is given to let go (its programs are killed
/// and its waits wake at once; this covers a machine too loaded to run them).
/// Past it the next step goes on: it waits for the host lock, which the
/// cancelled one still holds, so the two never act at once.
const CANCEL_GRACE: Duration = Duration::from_secs(30);

/// The bound of a step's host part: the host lock's wait, then every wait
/// the step may make, and its `systemctl` calls. Past it the step is
/// cancelled, so the host lock is never held longer.
///
/// Saturating: the settings are bounded when read (a week each), but a sum
/// that overflowed would panic the watcher; at worst it is `Duration::MAX`,
/// which [`host::Budget::within`] takes as no deadline past each wait's own.
pub fn step_bound(s: &Settings, step: &Step) -> Duration {
    let sum = |ds: &[Duration]| ds.iter().fold(Duration::ZERO, |a, d| a.saturating_add(*d));
    let calls = s.systemctl_timeout.saturating_mul(12);
    let waits = match step {
        Step::Promote { .. } | Step::Rollback | Step::Finish => {
            sum(&[s.stop_wait.saturating_mul(2), s.start_wait])
        }
        Step::StepDown => sum(&[s.stop_wait, s.start_wait, s.etcd_wait]),
        Step::Snapshot => s.snapshot_timeout,
    };
    sum(&[s.lock_timeout, calls, waits])
}

impl Watcher {
    /// A watcher for the host the settings name.
    pub fn new(settings: Settings) -> Self {
        // The failpoint is off unless the host asks for it (a testing aid).
        let host = settings
            .host()
            .with_after_change(crate::failpoint::after_change);
        Self::with_host(settings, host)
    }

    /// A watcher acting on `host` (tests give one whose programs are stand-ins).
    pub fn with_host(settings: Settings, host: host::Host) -> Self {
        Self {
            etcd_view: crate::etcdreport::ViewReader::new(&settings.etcd),
            settings,
            host,
            node: None,
            lease: None,
            lease_listed: false,
            report: None,
            report_loaded: false,
            unsent: false,
            last_wait: None,
            last_view: None,
            expiry_warned: None,
            running: None,
            metrics: Arc::new(Metrics::new()),
            addresses: host::addresses::LocalAddresses::read(std::path::Path::new("/proc/net"))
                .unwrap_or_default(),
            address_checked: false,
            last_beat: None,
            servers: None,
            remote: crate::membership::RemoteReader::default(),
        }
    }

    /// Counts into `metrics` (the ones `/metrics` serves) from now on.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The host's addresses the Node's InternalIP is checked against (by
    /// default those under `/proc/net` when the watcher was made).
    pub fn with_addresses(mut self, addresses: host::addresses::LocalAddresses) -> Self {
        self.addresses = addresses;
        self
    }

    /// Refuses a Node whose InternalIP is not an address of this host (the
    /// first time the Node is seen with one): its steps are another
    /// machine's.
    fn check_address(&mut self, node: Option<&Node>) -> Result<(), String> {
        let ip = node.and_then(kubeview::internal_ip);
        if let (false, Some(ip)) = (self.address_checked, ip) {
            host::identity::check_internal_ip(self.settings.node.as_str(), &ip, &self.addresses)
                .map_err(|e| e.to_string())?;
            self.address_checked = true;
        }
        Ok(())
    }

    /// Whether a step's host part runs now.
    pub fn step_running(&self) -> bool {
        self.running.is_some()
    }

    /// The last report written (or read).
    pub fn report(&self) -> Option<&Report> {
        self.report.as_ref()
    }

    /// Runs sessions over the candidates until `shutdown` resolves: when the
    /// API server in use fails, the next candidate is tried, and the report
    /// kept in memory means no step is repeated across the move.
    pub async fn run(
        &mut self,
        mut candidates: Candidates,
        shutdown: impl Future<Output = ()>,
    ) -> anyhow::Result<()> {
        pin_mut!(shutdown);
        let mut failures = 0u32;
        loop {
            let client = candidates.client()?;
            info!(
                api = candidates.current(),
                "watching node {}", self.settings.node
            );
            let end = tokio::select! {
                end = self.session(client) => end,
                () = &mut shutdown => SessionEnd::Shutdown,
            };
            match end {
                SessionEnd::Shutdown => {
                    // A step cut short resumes from the report after a restart.
                    if let Some(r) = self.running.take() {
                        r.budget.cancel();
                        let _ = tokio::time::timeout(CANCEL_GRACE, r.task).await;
                    }
                    return Ok(());
                }
                // Nothing changed on the host: a refusal, for the exit code.
                SessionEnd::Refused(why) => {
                    return Err(anyhow::anyhow!(why)
                        .context(protocol::exit::Marked(protocol::exit::Exit::Refused)));
                }
                SessionEnd::ApiTrouble => {
                    failures += 1;
                    let next = candidates.rotate().to_string();
                    warn!(next = %next, "the API server failed; moving to the next candidate");
                    // A full round of failed candidates backs off, up to 10 s.
                    if (failures as usize).is_multiple_of(candidates.len()) {
                        let wait = Duration::from_millis(500 * u64::from(failures.min(20)));
                        tokio::select! {
                            () = tokio::time::sleep(wait) => {}
                            () = &mut shutdown => return Ok(()),
                        }
                    }
                }
            }
        }
    }

    /// One session against one API server: watch the Node and the Lease,
    /// decide on each change and on each resync tick.
    pub async fn session(&mut self, client: Client) -> SessionEnd {
        // A new session decides once both watches have listed, whatever
        // they show.
        self.last_view = None;
        self.lease_listed = false;
        self.warn_expiry();
        if !self.report_loaded {
            let node = self.settings.node.as_str();
            match report::load(&client, &self.settings.names, node, &self.host.paths).await {
                Ok((r, behind)) => {
                    self.report = r;
                    self.report_loaded = true;
                    // The API's copy behind the host's (a write lost before
                    // a crash) is brought up to it first thing.
                    self.unsent = behind;
                }
                Err(report::LoadError::Api(e)) => {
                    warn!(error = %chain(&e), "cannot read the report");
                    return SessionEnd::ApiTrouble;
                }
                Err(e) => return SessionEnd::Refused(e.to_string()),
            }
        }
        let nodes = watch_named(
            Api::<Node>::all(client.clone()),
            self.settings.node.as_str(),
        );
        let leases = watch_named(
            Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE),
            &self.settings.names.lease_name,
        );
        pin_mut!(nodes, leases);
        let mut tick = tokio::time::interval(self.settings.resync);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Errors in a row, by watch.
        let (mut node_errors, mut lease_errors) = (0u32, 0u32);
        loop {
            let changed = tokio::select! {
                event = nodes.next() => match event {
                    Some(Ok(node)) => {
                        node_errors = 0;
                        if let Err(why) = self.check_address(node.as_ref()) {
                            return SessionEnd::Refused(why);
                        }
                        // A kubelet heartbeat changes the Node every few seconds
                        // without changing anything fleet-role reads: only a
                        // change of the view is worth a decision.
                        let view = node.as_ref().map(|n| kubeview::node_facts(&self.settings.names, n));
                        let changed = view != self.last_view;
                        self.node = node;
                        self.last_view = view;
                        changed
                    }
                    Some(Err(e)) => {
                        if self.watch_failed("node", &e, &mut node_errors) {
                            return SessionEnd::ApiTrouble;
                        }
                        false
                    }
                    None => return SessionEnd::ApiTrouble,
                },
                event = leases.next() => match event {
                    Some(Ok(lease)) => {
                        lease_errors = 0;
                        let facts = lease.map(|l| kubeview::lease_facts(&self.settings.names, &l));
                        let changed = !self.lease_listed || facts != self.lease;
                        self.lease = facts;
                        self.lease_listed = true;
                        changed
                    }
                    Some(Err(e)) => {
                        if self.watch_failed("lease", &e, &mut lease_errors) {
                            return SessionEnd::ApiTrouble;
                        }
                        false
                    }
                    None => return SessionEnd::ApiTrouble,
                },
                _ = tick.tick() => {
                    self.warn_expiry();
                    true
                }
                outcome = step_end(&mut self.running), if self.running.is_some() => {
                    let Some(running) = self.running.take() else { continue };
                    if self.conclude(&client, running, outcome).await.is_err() {
                        return SessionEnd::ApiTrouble;
                    }
                    false
                }
            };
            if changed
                && self.node.is_some()
                && self.lease_listed
                && self.evaluate(&client).await.is_err()
            {
                return SessionEnd::ApiTrouble;
            }
        }
    }

    /// A watch failed: counted and logged; its stream starts it again after
    /// a backoff ([`WatchBackoff`]). Returns whether the API server itself
    /// is in trouble (errors in a row; the watcher relists by itself after a
    /// 410 Gone).
    fn watch_failed(&self, watch: &str, e: &watcher::Error, in_a_row: &mut u32) -> bool {
        *in_a_row += 1;
        self.metrics.watch_restarted(watch);
        warn!(watch, error = %chain(e), "watch error");
        *in_a_row >= 3
    }

    /// Warns (at most once an hour) while the credential is within
    /// [`crate::cluster::EXPIRY_WARNING_SECS`] of lapsing: a lapsed token
    /// fails every request, and the host would stop taking steps.
    fn warn_expiry(&mut self) {
        let hour = Duration::from_secs(3600);
        if self.expiry_warned.is_some_and(|t| t.elapsed() < hour) {
            return;
        }
        let Some(exp) = self
            .settings
            .token_file
            .as_deref()
            .and_then(crate::cluster::token_expiry)
        else {
            return;
        };
        if let Some(w) = crate::cluster::expiry_warning(exp, now()) {
            warn!(expires = exp, "{w}");
            self.expiry_warned = Some(std::time::Instant::now());
        }
    }

    /// Writes the report's host part when a heartbeat is due (once per
    /// [`Settings::heartbeat`]), the demotion verdict changed, or etcd's
    /// view changed shape ([`EtcdView::same_shape`]): the config files are
    /// read each time (no request), the server Nodes are listed once a
    /// period. Only a server host has a verdict: one the role file names,
    /// or one that still holds its datastore (a stepped-down server names
    /// the agent already, and its removal and finish are still ahead).
    ///
    /// Only a host that holds its datastore reads etcd's view (paced and
    /// bounded, [`crate::etcdreport`]): without one there is no member to
    /// read. A server whose unit is stopped still holds its datastore; its
    /// reading fails and it reports no view, which is what it is.
    async fn beat(&mut self, client: &Client) -> Result<(), kube::Error> {
        let due = self
            .last_beat
            .is_none_or(|t| t.elapsed() >= self.settings.heartbeat);
        let server = matches!(host::role::read(&self.host.paths), Ok(Some(Role::Server)))
            || self.host.has_datastore();
        let demotion = if server {
            if due || self.servers.is_none() {
                self.servers = Some(self.server_nodes(client).await?);
            }
            let config = host::eligibility::read(&self.host.paths);
            Some(Eligibility::of(&host::eligibility::assess(
                &config,
                self.settings.node.as_str(),
                self.servers.as_deref(),
            )))
        } else {
            None
        };
        let etcd = if self.host.has_datastore() {
            self.etcd_view.current(now()).await
        } else {
            self.etcd_view.forget();
            self.remote.forget();
            None
        };
        let reported = self.report.as_ref().and_then(|r| r.host.as_ref());
        let changed = reported.is_none_or(|h| {
            h.demotion != demotion || !EtcdView::same_shape(h.etcd.as_ref(), etcd.as_ref())
        });
        if !due && !changed {
            return Ok(());
        }
        if changed && let Some(Eligibility::Ineligible { reasons }) = &demotion {
            // Said once, on the change; the verdict is in the report and in
            // `fleet-role status`, where the operator looks.
            info!("this host may not be demoted: {}", reasons.join("; "));
        }
        let t = now();
        let part = HostPart {
            heartbeat_at: t,
            demotion,
            etcd,
        };
        self.last_beat = Some(Instant::now());
        let r = Report::with_host_part(self.report.as_ref(), part, t);
        self.record(client, r).await
    }

    /// One decision and what follows from it. An `Err` means the API failed.
    pub async fn evaluate(&mut self, client: &Client) -> Result<(), kube::Error> {
        if self.unsent {
            self.send(client).await?;
        }
        self.beat(client).await?;
        let Some(node) = self.node.clone() else {
            return Ok(());
        };
        let names = self.settings.names.clone();
        let view = kubeview::node_facts(&names, &node);
        let join = match (
            view.marks.step_kind(),
            view.marks.join_node.as_deref().map(NodeName::parse),
        ) {
            (Some(protocol::StepKind::Promote), Some(Ok(name))) => {
                let nodes: Api<Node> = Api::all(client.clone());
                kubeview::join_target(nodes.get_opt(name.as_str()).await?.as_ref())
            }
            _ => JoinTarget::NotLooked,
        };
        self.read_membership().await;
        let mut decision = self.decision(&view, &join);
        if matches!(decision, Decision::Refuse { .. }) {
            // A refusal is written once and stands, and the Lease's watch may
            // not have shown yet the Lease the controller took before it
            // asked for the step (the two watches deliver in no set order):
            // a refusal is decided on the Lease as the API holds it now.
            let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
            self.lease = leases
                .get_opt(&names.lease_name)
                .await?
                .map(|l| kubeview::lease_facts(&names, &l));
            decision = self.decision(&view, &join);
        }
        // A demotion whose agent could not start is refused before it
        // changes anything (resumed steps have changed the host already and
        // go on).
        if let Decision::Take {
            swap,
            step: step @ (Step::StepDown | Step::Finish),
            resume: false,
        } = &decision
        {
            let reasons = self.ineligibility(client).await?;
            if !reasons.is_empty() {
                decision = Decision::Refuse {
                    swap: swap.clone(),
                    step: step.report_step(),
                    // One line: control characters of the host's files escaped.
                    reason: format!(
                        "this host is not eligible for demotion, its agent could not start: {}",
                        reasons.join("; ")
                    )
                    .chars()
                    .flat_map(char::escape_debug)
                    .collect(),
                };
            }
        }
        // One line per decision at debug level: what a resync or a watch
        // event led to (no request is made for it).
        debug!(
            decision = match &decision {
                Decision::Nothing => "nothing",
                Decision::Wait { .. } => "wait",
                Decision::Refuse { .. } => "refuse",
                Decision::Take { .. } => "take",
            },
            "decided"
        );
        if let Some(running) = &self.running {
            match &decision {
                Decision::Take { swap, step, .. } if running.is(swap, step) => return Ok(()),
                Decision::Take { swap, step, .. } => {
                    // A newer step (a rollback of the promotion that waits for
                    // its server) is taken at once: the running one is
                    // cancelled, and it leaves a state the newer one handles.
                    warn!(
                        running = running.step.report_step().as_str(),
                        next = step.report_step().as_str(),
                        swap = swap.as_ref().map(SwapId::as_str),
                        "cancelling the running step for the next one"
                    );
                    if let Some(r) = self.running.take() {
                        r.budget.cancel();
                        self.metrics
                            .step_ended(r.step.report_step().as_str(), "cancelled");
                        if tokio::time::timeout(CANCEL_GRACE, r.task).await.is_err() {
                            warn!(
                                "the cancelled step has not ended yet; the next one waits for the host lock"
                            );
                        }
                    }
                }
                // Anything else waits until the running step has ended: its
                // end is decided again then.
                _ => return Ok(()),
            }
        }
        match decision {
            Decision::Nothing => {
                self.last_wait = None;
                Ok(())
            }
            Decision::Wait { reason } => {
                if self.last_wait.as_deref() != Some(&reason) {
                    info!("waiting: {reason}");
                    self.last_wait = Some(reason);
                }
                Ok(())
            }
            Decision::Refuse { swap, step, reason } => {
                warn!(
                    swap = swap.as_ref().map(SwapId::as_str),
                    step = step.as_str(),
                    "refused: {reason}"
                );
                self.metrics.step_ended(step.as_str(), "refused");
                let r = Report::next(self.report.as_ref(), swap, step, Phase::Refused, now())
                    .with_reason(reason);
                self.record(client, r).await
            }
            Decision::Take { swap, step, resume } => self.take(client, swap, step, resume).await,
        }
    }

    /// Why this host's agent could not start were it demoted
    /// ([`host::eligibility`]), with the server Nodes as the API shows them
    /// now. An `Err` means the API failed.
    async fn ineligibility(&mut self, client: &Client) -> Result<Vec<String>, kube::Error> {
        let servers = self.server_nodes(client).await?;
        let config = host::eligibility::read(&self.host.paths);
        let reasons =
            host::eligibility::assess(&config, self.settings.node.as_str(), Some(&servers));
        self.servers = Some(servers);
        Ok(reasons)
    }

    /// The Nodes with k3s's control-plane label, as the API shows them now.
    async fn server_nodes(
        &self,
        client: &Client,
    ) -> Result<Vec<host::eligibility::ServerNode>, kube::Error> {
        let nodes: Api<Node> = Api::all(client.clone());
        let selector = format!("{}=true", protocol::names::K3S_CONTROL_PLANE_LABEL);
        let list = nodes
            .list(&kube::api::ListParams::default().labels(&selector))
            .await?;
        let servers: Vec<host::eligibility::ServerNode> = list
            .items
            .iter()
            .map(|n| host::eligibility::ServerNode {
                name: n.metadata.name.clone().unwrap_or_default(),
                ready: n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
                addresses: n
                    .status
                    .as_ref()
                    .and_then(|s| s.addresses.as_ref())
                    .map(|a| a.iter().map(|a| a.address.clone()).collect())
                    .unwrap_or_default(),
            })
            .collect();
        Ok(servers)
    }

    /// Whether the local member's last view lists this host's member
    /// ([`crate::membership::listed`]).
    fn listed_locally(&self, member: Option<&str>) -> Option<bool> {
        self.etcd_view
            .cached()
            .and_then(|v| crate::membership::listed(v, member, &self.addresses))
    }

    /// Reads etcd's member list through another server when a decision
    /// hangs on it and the local member cannot say: the host holds a
    /// datastore with no tombstone, its role file does not name the server
    /// (a stepped-down host waiting to finish, a promotion over a
    /// datastore), and the local view is missing or inconclusive. Paced
    /// and bounded ([`crate::membership::RemoteReader::read`]).
    async fn read_membership(&mut self) {
        let server = matches!(host::role::read(&self.host.paths), Ok(Some(Role::Server)));
        let member = self.host.member_name();
        if server
            || !self.host.has_datastore()
            || self.host.has_tombstone()
            || self.listed_locally(member.as_deref()).is_some()
        {
            return;
        }
        let mut extra: Vec<String> = self
            .host
            .join_server()
            .map(|j| j.host().to_string())
            .into_iter()
            .collect();
        for s in self.servers.iter().flatten() {
            if s.name != self.settings.node.as_str() {
                // Only addresses: a Node's Hostname entry would need a
                // name lookup, and TLS checks the address k3s certified.
                let ips = s
                    .addresses
                    .iter()
                    .filter(|a| a.parse::<std::net::IpAddr>().is_ok());
                extra.extend(ips.cloned());
            }
        }
        let candidates =
            crate::membership::candidates(&self.settings.etcd, self.etcd_view.last_read(), &extra);
        self.remote
            .read(&candidates, member.as_deref(), &self.addresses, now())
            .await;
    }

    /// The decision on the Node's `view` and the Lease as held, with the
    /// host as it is now.
    fn decision(&self, view: &protocol::NodeFacts, join: &JoinTarget) -> Decision {
        // A role file that exists but cannot be read, or names no valid role,
        // is not "no role": every switch is refused until it is fixed.
        let role_file = host::role::read(&self.host.paths);
        let role_problem = role_file.as_ref().err().map(ToString::to_string);
        let member = self.host.member_name();
        let hs = HostState {
            role: role_file.ok().flatten(),
            datastore: self.host.has_datastore(),
            tombstone: self.host.has_tombstone(),
            etcd_lists_member: self
                .listed_locally(member.as_deref())
                .or(self.remote.answer()),
            member,
        };
        let decision = decide(&Observation {
            now: now(),
            node: view,
            lease: self.lease.as_ref(),
            report: self.report.as_ref(),
            host: hs,
            join,
            identity: &self.settings.names.controller_identity,
            skew_margin: secs_i64(self.settings.skew_margin),
            join_port: self.settings.join_port,
        });
        protocol::decide::with_role_file(decision, role_problem.as_deref())
    }

    async fn send(&mut self, client: &Client) -> Result<(), kube::Error> {
        if let Some(r) = &self.report {
            // The host's copy first: a report lost on its way to the API is
            // still known at the next start. A copy that cannot be written
            // is said loudly; the API's copy still stands behind it.
            if let Err(e) = report::write_local(&self.host.paths, r) {
                warn!(error = %e, "cannot keep the report on the host");
            }
            report::write(client, &self.settings.names, self.settings.node.as_str(), r).await?;
        }
        self.unsent = false;
        Ok(())
    }

    /// Keeps `r` as the report and writes it. The in-memory report moves on
    /// even when the write fails (it is retried first thing next time), so a
    /// step is never repeated for want of a write.
    async fn record(&mut self, client: &Client, r: Report) -> Result<(), kube::Error> {
        self.report = Some(r);
        self.unsent = true;
        self.send(client).await
    }

    async fn phase(
        &mut self,
        client: &Client,
        swap: &Option<SwapId>,
        step: ReportStep,
        phase: Phase,
        detail: Option<Detail>,
    ) -> Result<(), kube::Error> {
        let mut r = Report::next(self.report.as_ref(), swap.clone(), step, phase, now());
        if let Some(d) = detail {
            r = r.with_detail(d);
        }
        self.record(client, r).await
    }

    /// Starts a step: its start reported (unless resumed), then its host
    /// part spawned in a task of its own; [`Watcher::conclude`] follows.
    async fn take(
        &mut self,
        client: &Client,
        swap: Option<SwapId>,
        step: Step,
        resume: bool,
    ) -> Result<(), kube::Error> {
        let rstep = step.report_step();
        if !resume {
            info!(
                swap = swap.as_ref().map(SwapId::as_str),
                step = rstep.as_str(),
                "step started"
            );
            // The start is written before anything changes: a step whose
            // start cannot be reported is not taken.
            self.phase(client, &swap, rstep, Phase::Started, None)
                .await?;
        }
        let budget = host::Budget::within(step_bound(&self.settings, &step));
        let host = self.host.clone().with_budget(budget.clone());
        let lock_timeout = self.settings.lock_timeout;
        let detail = self.report.as_ref().and_then(|r| r.detail);
        // Every step but a finish needs the Lease (a finish needs none once
        // the member is gone, which its decision checked on the disk).
        let gate = match (&step, &swap) {
            (Step::Finish, _) | (_, None) => None,
            (_, Some(swap)) => Some(LeaseGate {
                handle: tokio::runtime::Handle::current(),
                leases: Api::namespaced(client.clone(), LEASE_NAMESPACE),
                names: self.settings.names.clone(),
                swap: swap.clone(),
                node: self.settings.node.to_string(),
                step: rstep,
                skew_margin: secs_i64(self.settings.skew_margin),
            }),
        };
        // A step-down first hands etcd's leadership over, through the
        // local member; a rollback removes its own learner.
        let etcd = matches!(step, Step::StepDown | Step::Rollback).then(|| EtcdAccess {
            handle: tokio::runtime::Handle::current(),
            local: self.settings.etcd.clone(),
            addresses: self.addresses.clone(),
        });
        let task = tokio::task::spawn_blocking({
            let step = step.clone();
            let swap = swap.clone();
            move || {
                run_host_step(
                    &host,
                    &step,
                    swap.as_ref(),
                    lock_timeout,
                    gate.as_ref(),
                    etcd.as_ref(),
                )
            }
        });
        self.running = Some(Running {
            swap,
            step,
            detail,
            started: Instant::now(),
            budget,
            task,
        });
        Ok(())
    }

    /// What follows the end of a step's host part: its milestones and its
    /// end reported, or its failure with the state it left.
    async fn conclude(
        &mut self,
        client: &Client,
        running: Running,
        outcome: Result<Option<String>, StepEnd>,
    ) -> Result<(), kube::Error> {
        let Running {
            swap,
            step,
            detail,
            started,
            ..
        } = running;
        let rstep = step.report_step();
        self.metrics.step_took(rstep.as_str(), started.elapsed());
        self.metrics.step_ended(
            rstep.as_str(),
            match &outcome {
                Ok(_) => "done",
                Err(StepEnd::Stopped(_)) => "stopped",
                Err(StepEnd::Failed(_)) => "failed",
            },
        );
        let host_outcome = match outcome {
            Ok(o) => o,
            Err(StepEnd::Stopped(reason)) => {
                // Nothing changed and nothing is reported: the report still
                // says `started`, and the next decision waits for the Lease.
                warn!(
                    step = rstep.as_str(),
                    "step stopped, nothing changed: {reason}"
                );
                return Ok(());
            }
            Err(StepEnd::Failed(reason)) => {
                warn!(step = rstep.as_str(), "step failed: {reason}");
                let r = Report::next(self.report.as_ref(), swap, rstep, Phase::Failed, now())
                    .with_reason(reason);
                return self.record(client, r).await;
            }
        };
        // k3s promotes a caught-up learner; the Node's EtcdIsVoter (as it is
        // now, not when the step started) says so.
        let view = self
            .node
            .as_ref()
            .map(|n| kubeview::node_facts(&self.settings.names, n))
            .unwrap_or_default();
        for (phase, milestone) in
            protocol::milestones::after_host_part(&step, detail, view.etcd_is_voter)
        {
            let mut r = Report::next(self.report.as_ref(), swap.clone(), rstep, phase, now())
                .with_detail(milestone);
            if milestone == Detail::Snapshot {
                r.snapshot_file = host_outcome.clone();
            }
            self.record(client, r).await?;
        }
        match self.report.as_ref().map(|r| (r.phase, r.detail)) {
            Some((Phase::Done, Some(Detail::Voter))) => info!("promoted: a voter"),
            Some((Phase::Done, Some(Detail::EtcdOnly))) => {
                info!("stepped down to etcd-only; waiting for the member's removal")
            }
            Some((Phase::Done, Some(Detail::AgentReady))) => {
                info!(step = rstep.as_str(), "the host runs as an agent")
            }
            Some((Phase::Done, Some(Detail::Snapshot))) => info!(
                file = self
                    .report
                    .as_ref()
                    .and_then(|r| r.snapshot_file.as_deref()),
                "snapshot taken"
            ),
            _ => {}
        }
        Ok(())
    }
}

/// The server ends each watch (the own Node's, the Lease's) after this many
/// seconds, and the watcher resumes it from where it was: an idle actuator's
/// only requests. It must be shorter than the client's read timeout
/// ([`crate::cluster::READ_TIMEOUT`]), or a healthy but quiet watch would
/// fail as if its API server had hung.
pub const WATCH_TIMEOUT_SECS: u32 = 20;

/// The end of the running step's task (pending for ever when none runs;
/// the loop only polls it when one does).
async fn step_end(running: &mut Option<Running>) -> Result<Option<String>, StepEnd> {
    match running {
        Some(r) => (&mut r.task)
            .await
            .unwrap_or_else(|e| Err(StepEnd::Failed(format!("the step's task failed: {e}")))),
        None => std::future::pending().await,
    }
}

/// One object watched by name (a field selector on `metadata.name`, which
/// the actuator's role allows for just that name): `Some` when it is listed,
/// added or changed, `None` when it is deleted or missing from a (re)list.
/// This is kube's `watch_object`, with the server-side timeout
/// [`WATCH_TIMEOUT_SECS`], which `watch_object` does not let one set, and a
/// [`WatchBackoff`] after each error.
fn watch_named<K>(
    api: Api<K>,
    name: &str,
) -> impl futures::Stream<Item = Result<Option<K>, watcher::Error>> + Send + use<K>
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let config = watcher::Config::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(WATCH_TIMEOUT_SECS);
    let mut listed = false;
    watcher::watcher(api, config)
        .backoff(WatchBackoff::default())
        .filter_map(move |event| {
            let object = match event {
                Ok(watcher::Event::Init) => {
                    listed = false;
                    None
                }
                Ok(watcher::Event::InitApply(o)) => {
                    listed = true;
                    Some(Ok(Some(o)))
                }
                Ok(watcher::Event::Apply(o)) => Some(Ok(Some(o))),
                Ok(watcher::Event::Delete(_)) => Some(Ok(None)),
                // A (re)list without the object: it is gone.
                Ok(watcher::Event::InitDone) => (!listed).then_some(Ok(None)),
                Err(e) => Some(Err(e)),
            };
            futures::future::ready(object)
        })
}

/// The wait before a failed watch starts again: 300 ms more after each
/// error in a row, up to 6 s; reset by any event. The loop goes on (steps,
/// the other watch, resyncs, shutdown) while a watch waits.
#[derive(Debug, Default)]
struct WatchBackoff {
    errors: u32,
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.errors = (self.errors + 1).min(20);
        Some(Duration::from_millis(300 * u64::from(self.errors)))
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.errors = 0;
    }
}

/// The host-local part of a step, under the host lock. Returns the snapshot
/// file for a snapshot, or the reason it failed (one line, no secrets: it is
/// made of paths, unit names and validated values).
fn run_host_step(
    host: &host::Host,
    step: &Step,
    swap: Option<&SwapId>,
    lock_timeout: Duration,
    gate: Option<&LeaseGate>,
    etcd: Option<&EtcdAccess>,
) -> Result<Option<String>, StepEnd> {
    let lock = match host.lock(lock_timeout) {
        Ok(l) => l,
        Err(e) => return Err(StepEnd::Failed(e.to_string())),
    };
    // The Lease again, now that nothing else can act on the host: it let
    // the step start, but may have lapsed while the step waited.
    if let Some(Err(why)) = gate.map(LeaseGate::check) {
        drop(lock);
        return Err(StepEnd::Stopped(format!(
            "{why} (checked again once the host lock was taken)"
        )));
    }
    // Under the lock and the Lease, before any change: a step-down hands
    // leadership over (a failure changes nothing, and says so); a rollback
    // stops its server, then removes this host's learner through the voter
    // it joined (best effort: the rollback goes on; see `learner`).
    if let Some(e) = etcd {
        match step {
            Step::StepDown if host.role().ok().flatten() == Some(protocol::Role::Server) => {
                if let Err(why) = crate::leadership::hand_over(&e.handle, &e.local) {
                    drop(lock);
                    return Err(StepEnd::Failed(format!(
                        "{why}; nothing was changed: {}",
                        left_state(host)
                    )));
                }
            }
            Step::Rollback => {
                if let Some(join) = host.join_server() {
                    let ep = crate::learner::endpoint_of(&e.local, &join);
                    crate::learner::remove_own(&e.handle, &ep, host, &e.addresses);
                }
            }
            _ => {}
        }
    }
    let outcome = host_step(host, step, swap);
    // The lock goes before the state is read, so a step that replaces this
    // one (a rollback) is not kept waiting by that read.
    drop(lock);
    outcome.map_err(|reason| StepEnd::Failed(format!("{reason}; {}", left_state(host))))
}

/// What the host was left as, for a failure's report. Read without the
/// step's budget: a cancelled step still says where it stopped.
fn left_state(host: &host::Host) -> String {
    let host = host.clone().with_budget(host::Budget::unbounded());
    let s = crate::local::local_status(&host);
    format!(
        "host left with role file {}, k3s {}, k3s-agent {}",
        s.role.map_or("missing or invalid", |r| r.as_str()),
        s.server,
        s.agent,
    )
}

fn host_step(
    host: &host::Host,
    step: &Step,
    swap: Option<&SwapId>,
) -> Result<Option<String>, String> {
    let plan = match step {
        Step::Promote { join, .. } => host.plan_promote(join),
        Step::StepDown => host.plan_step_down(),
        Step::Rollback => host.plan_demote(),
        Step::Finish => host.plan_finish(),
        Step::Snapshot => {
            let swap = swap.ok_or("a snapshot needs a swap to name it")?;
            return host.snapshot(swap).map(Some).map_err(|e| e.to_string());
        }
    }
    .map_err(|e| e.to_string())?;
    for change in &plan {
        debug!("{}", host.show(change));
    }
    host.apply(&plan).map_err(|e| e.to_string())?;
    Ok(None)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steps_bound_saturates_rather_than_overflowing_on_huge_settings() {
        let file: crate::config::FileConfig = toml::from_str("").unwrap();
        let mut s = Settings::resolve(
            file,
            crate::config::Overrides {
                node: Some("n".into()),
                ..Default::default()
            },
        )
        .unwrap();
        for d in [
            &mut s.lock_timeout,
            &mut s.systemctl_timeout,
            &mut s.stop_wait,
            &mut s.start_wait,
            &mut s.etcd_wait,
            &mut s.snapshot_timeout,
        ] {
            *d = Duration::MAX;
        }
        for step in [Step::Rollback, Step::StepDown, Step::Snapshot, Step::Finish] {
            assert_eq!(step_bound(&s, &step), Duration::MAX);
        }
        assert_eq!(secs_i64(Duration::MAX), i64::MAX);
        assert_eq!(secs_i64(Duration::from_secs(5)), 5);
    }
}
