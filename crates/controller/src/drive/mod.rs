//! The loop that drives a swap: read the cluster, ask the pure core for the
//! next action, carry it out, read again. And `run`, which picks swaps by
//! policy and drives them one at a time.
//!
//! `swap` and `run` read the cluster from watches ([`crate::watch`]) and
//! decide again when something that matters changed or at the next moment
//! the clock could change an answer ([`fleetdecide::next_edge`]); there is no poll.
//!
//! The only state kept here is which swap this process took the Lease for
//! ([`SwapState::taken`]): a controller killed anywhere in this loop and
//! started again finds the swap's progress on the Lease, the Nodes and the
//! hosts' reports, and goes on (or cleans up) from there.

use fleetdecide::SwapRecord;
use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use clock::Clock;
use fleetdecide::{Action, Outcome, RunDecision, SwapState};
use kube::Client;
use protocol::{NodeName, SwapId};
use serde_json::json;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::{
    act::{ActError, Actor},
    config::Settings,
    drain,
    metrics::Metrics,
    observe,
    output::Printer,
    watch::FleetWatch,
};

/// The longest the loop sleeps with nothing changed and no time-based edge
/// ahead: it then decides again on what the watches hold (no request), so
/// that no wait is unbounded even if a watch stalled silently.
const LONGEST_SLEEP: Duration = Duration::from_secs(300);

/// After a change, how long to gather more before deciding: a write of
/// ours or a host's report often comes with a second change right behind.
const COALESCE: Duration = Duration::from_millis(50);

/// While a queued change waits for the fleet to settle, how often it
/// looks again with no watched change.
const SETTLE_RECHECK_SECS: i64 = 5;

/// How long the API may fail in a row before the controller gives up (it
/// keeps its Lease while it retries; a swap given up on resumes when the
/// controller is run again).
const API_PATIENCE: Duration = Duration::from_secs(300);

mod error;

pub use self::error::{Error, Result, chain};
pub use crate::ending::Ending;

/// One controller process.
pub struct Driver {
    client: Client,
    settings: Settings,
    actor: Actor,
    instance: String,
    shutdown: watch::Receiver<bool>,
    fleet: Option<Arc<FleetWatch>>,
    metrics: Arc<Metrics>,
    /// Abort: wind the swap down (or let it finish past the point of no
    /// return) instead of driving it on.
    abort: bool,
}

/// A new swap id: `swap-YYYYMMDD-HHMMSS-XXXX`, now by `clock` (a DNS
/// label, and a safe snapshot file name).
pub fn new_swap_id(clock: &Clock) -> SwapId {
    let now = k8s_openapi::jiff::Timestamp::from_second(clock.unix_secs())
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let id = format!("swap-{}-{}", now.strftime("%Y%m%d-%H%M%S"), random_hex(4));
    SwapId::parse(&id).expect("a generated swap id is valid")
}

/// A new controller instance id (tells two processes of one identity apart).
pub fn new_instance(identity: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    fleetdecide::one_line(&format!(
        "{identity}@{host}-{}-{}",
        std::process::id(),
        random_hex(6)
    ))
}

/// `len` random hex digits: std's per-process random hash keys (no clock:
/// a test's standing clock must not make two ids alike), salted with a
/// counter so that two ids of one process differ.
fn random_hex(len: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNT.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())[..len].to_string()
}

impl Driver {
    /// A controller process over `client`.
    pub fn new(client: Client, settings: Settings, shutdown: watch::Receiver<bool>) -> Self {
        let instance = new_instance(&settings.names().controller_identity);
        let metrics = Arc::new(Metrics::new());
        Self {
            actor: Actor::new(client.clone(), settings.clone()),
            client,
            settings,
            instance,
            shutdown,
            fleet: None,
            metrics,
            abort: false,
        }
    }

    /// Checks this process's clock against the API server's, as `seen`
    /// reads it from the clients' answers, before every write.
    pub fn with_server_clock(mut self, seen: kubeaccess::server_clock::ServerClock) -> Self {
        self.actor = self.actor.with_server_clock(seen);
        self
    }

    /// Counts into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The metrics counted into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Reads the cluster from `fleet`'s watches instead of lists.
    pub fn with_watch(mut self, fleet: Arc<FleetWatch>) -> Self {
        self.actor = self.actor.with_watch(fleet.clone());
        self.fleet = Some(fleet);
        self
    }

    /// This process's instance id (recorded on the Lease it takes).
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Replaces what stops the loop at its next safe point (`run` stops
    /// on a signal and on losing its leadership).
    pub fn set_stop(&mut self, stop: watch::Receiver<bool>) {
        self.shutdown = stop;
    }

    /// The actor (for `pause` and `resume`).
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// Reads the cluster: from the watches' stores if it has them, else by
    /// listing once.
    pub async fn observe(&self) -> Result<observe::Observed> {
        let mut obs = match &self.fleet {
            Some(f) => f.snapshot(&self.settings),
            None => observe::observe(&self.client, &self.settings)
                .await
                .map_err(Error::Read)?,
        };
        // The outgoing Node's pods, only while they matter: from the drain
        // to the step-down's request (pods are not watched: one list per
        // decision in those steps).
        if let Some(l) = &obs.view.lease
            && matches!(
                l.current_step(),
                Some(fleetdecide::SwapStep::Drain | fleetdecide::SwapStep::StepDown)
            )
            && let Some(rec) = l.recorded_swap()
            && let Some(out) = &rec.out
        {
            obs.view.pods = drain::pods_on(&self.client, out.as_str()).await?;
        }
        Ok(obs)
    }

    fn stopping(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Sleeps one poll interval, or less if a signal arrives: after an API
    /// error, before trying again.
    async fn pause_a_moment(&mut self) {
        let poll = self.settings.poll;
        let _ = tokio::time::timeout(poll, self.shutdown.changed()).await;
    }

    /// Waits for a change the watches report, the unix second `edge`, a
    /// signal, or [`LONGEST_SLEEP`], whichever comes first. Without watches
    /// (never in `swap` or `run`), one poll interval.
    async fn wait_for_change(&mut self, edge: Option<i64>) {
        let Some(fleet) = self.fleet.clone() else {
            self.pause_a_moment().await;
            return;
        };
        let mut changed = fleet.changed();
        changed.borrow_and_update();
        let sleep = edge
            .map(|e| {
                let now_ms = u128::from(self.settings.clock.unix_millis());
                let at_ms = u128::try_from(e.max(0)).unwrap_or(0).saturating_mul(1000);
                Duration::from_millis(
                    u64::try_from(at_ms.saturating_sub(now_ms)).unwrap_or(u64::MAX),
                )
            })
            .unwrap_or(LONGEST_SLEEP)
            .min(LONGEST_SLEEP);
        tokio::select! {
            r = changed.changed() => {
                if r.is_ok() {
                    tokio::time::sleep(COALESCE).await;
                }
            }
            _ = self.shutdown.changed() => {}
            _ = tokio::time::sleep(sleep) => {}
        }
    }

    /// Waits, up to `bound`, for the gates before a new change of `out` for
    /// `incoming` to pass, saying each new reason it waits for. What the
    /// second host of a grow or shrink does: the change before it just
    /// ended, and the servers' reports of etcd's members (`etcd-views-agree`)
    /// or a voter's readiness lag it by seconds. Past the bound it returns,
    /// and the change's own start refuses with the reason.
    pub async fn settle(
        &mut self,
        out: Option<NodeName>,
        incoming: Option<NodeName>,
        queued: Vec<NodeName>,
        bound: Duration,
        printer: &mut Printer,
    ) -> Result<()> {
        let state = SwapState {
            out,
            incoming,
            queued,
            candidate: new_swap_id(&self.settings.clock),
            instance: self.instance.clone(),
            taken: None,
        };
        let since = self.settings.clock.now();
        let mut said: Option<String> = None;
        while !self.stopping() && self.settings.clock.since(since) < bound {
            let obs = self.observe().await?;
            let gates = fleetdecide::start_gates(&obs.view, &state);
            if fleetdecide::all_pass(&gates) {
                break;
            }
            let why = fleetdecide::failures(&gates);
            if said.as_deref() != Some(why.as_str()) {
                printer.line(
                    &format!("waiting for the fleet to settle: {why}"),
                    json!({"settling": why}),
                );
                said = Some(why);
            }
            // Reports and Nodes are watched; the edge bounds a missed one.
            let edge = obs.view.now.saturating_add(SETTLE_RECHECK_SECS);
            self.wait_for_change(Some(edge)).await;
        }
        Ok(())
    }

    /// Drives the swap of `out` for `incoming` to its end.
    pub async fn swap(
        &mut self,
        out: NodeName,
        incoming: NodeName,
        printer: &mut Printer,
    ) -> Result<Ending> {
        self.change(Some(out), Some(incoming), Vec::new(), printer)
            .await
    }

    /// Drives one change to its end: a swap (both halves), a grow (only
    /// `incoming`) or a shrink (only `out`). `queued` names the hosts a
    /// grow or shrink goes on with afterwards, which its gates count.
    pub async fn change(
        &mut self,
        out: Option<NodeName>,
        incoming: Option<NodeName>,
        queued: Vec<NodeName>,
        printer: &mut Printer,
    ) -> Result<Ending> {
        let mut step: Option<(String, Instant)> = None;
        let ending = self
            .drive_swap(out, incoming, queued, printer, &mut step)
            .await?;
        if let Some((s, since)) = step
            && !matches!(ending, Ending::Interrupted { .. } | Ending::Lost(_))
        {
            self.metrics.step_took(&s, self.settings.clock.since(since));
        }
        self.metrics.swap_ended(ending.summary().0);
        Ok(ending)
    }

    /// Winds the swap of `out` for `incoming` down, or lets it finish when
    /// it is past the point of no return (`fleet-role abort`).
    pub async fn abort(
        &mut self,
        out: Option<NodeName>,
        incoming: Option<NodeName>,
        printer: &mut Printer,
    ) -> Result<Ending> {
        self.abort = true;
        self.change(out, incoming, Vec::new(), printer).await
    }

    async fn drive_swap(
        &mut self,
        out: Option<NodeName>,
        incoming: Option<NodeName>,
        queued: Vec<NodeName>,
        printer: &mut Printer,
        step: &mut Option<(String, Instant)>,
    ) -> Result<Ending> {
        let mut state = SwapState {
            out: out.clone(),
            incoming: incoming.clone(),
            queued,
            candidate: new_swap_id(&self.settings.clock),
            instance: self.instance.clone(),
            taken: None,
        };
        let mut failing_since: Option<Instant> = None;
        let mut waiting_for_lease: Option<Instant> = None;
        let lease_patience = Duration::from_secs(
            self.settings
                .core
                .lease_duration
                .unsigned_abs()
                .saturating_mul(2)
                .saturating_add(10),
        );
        loop {
            if self.stopping() {
                return Ok(Ending::Interrupted {
                    out,
                    incoming,
                    taken: state.taken.is_some(),
                });
            }
            let obs = match self.observe().await {
                Ok(o) => o,
                Err(e) => {
                    self.api_trouble(&mut failing_since, e)?;
                    self.pause_a_moment().await;
                    continue;
                }
            };
            self.metrics.observed(&obs.view, &self.instance);
            // The gates read this clock too (heartbeats' and views' ages):
            // a change this process has not begun is refused for its clock
            // first, under its own name, rather than for what it skews.
            if state.taken.is_none()
                && let Err(ActError::ClockOff(why)) = self.actor.check_clock()
            {
                return Ok(Ending::Refused(why));
            }
            let mut action = fleetdecide::next_action(&obs.view, &state);
            if self.abort
                && let Some(a) = fleetdecide::abort_action(&obs.view, &state, &action)
            {
                action = a;
            }
            if let Some(m) = milestone(&obs, &action) {
                printer.line(&m, json!({"milestone": m}));
            }
            printer.action(&action);
            match &action {
                Action::Wait {
                    deadline, reason, ..
                } => {
                    failing_since = None;
                    let mut edge = fleetdecide::next_edge(&obs.view, *deadline);
                    if matches!(reason, fleetdecide::Awaiting::Drain { .. }) {
                        // Pods are not watched: look again shortly.
                        let again = obs
                            .view
                            .now
                            .saturating_add(fleetdecide::drain::DRAIN_RECHECK_SECS);
                        edge = Some(edge.map_or(again, |e| e.min(again)));
                    }
                    self.wait_for_change(edge).await;
                    continue;
                }
                Action::Paused { .. } => {
                    failing_since = None;
                    let edge = fleetdecide::next_edge(&obs.view, None);
                    self.wait_for_change(edge).await;
                    continue;
                }
                Action::WaitForLease { until, .. } => {
                    let since = *waiting_for_lease.get_or_insert_with(|| self.settings.clock.now());
                    if self.settings.clock.since(since) > lease_patience {
                        return Err(Error::LeaseHeld {
                            secs: lease_patience.as_secs(),
                        });
                    }
                    let edge = fleetdecide::next_edge(&obs.view, Some(*until));
                    self.wait_for_change(edge).await;
                    continue;
                }
                Action::Refuse { gates } => {
                    for g in gates.iter().filter(|g| !g.passed) {
                        self.metrics.refused_by(g.name.as_str());
                    }
                    return Ok(Ending::Refused(fleetdecide::failures(gates)));
                }
                Action::Lost { reason } => return Ok(Ending::Lost(reason.clone())),
                _ => {}
            }
            if self.stopping() {
                // The signal came while deciding: nothing of this action
                // was written, which is a safe point too.
                return Ok(Ending::Interrupted {
                    out,
                    incoming,
                    taken: state.taken.is_some(),
                });
            }
            match self.write(&obs, &action, &mut state).await {
                Ok(()) => {
                    failing_since = None;
                    if let Action::MarkStep { step: s } = &action {
                        if let Some((prev, since)) = step.take() {
                            self.metrics
                                .step_took(&prev, self.settings.clock.since(since));
                        }
                        *step = Some((s.as_str().to_string(), self.settings.clock.now()));
                    }
                }
                Err(ActError::Lost(why)) => {
                    printer.line(
                        &format!("lost the regrade Lease: {why}; writing nothing more"),
                        json!({}),
                    );
                    return Ok(Ending::Lost(why));
                }
                // Before the Lease is taken nothing was written: the change
                // is refused. Later, the writes wait (within the API's
                // patience) for the clock to be set right.
                Err(ActError::ClockOff(why)) if state.taken.is_none() => {
                    return Ok(Ending::Refused(why));
                }
                Err(ActError::Conflict) => {
                    info!("the regrade Lease changed since it was read; reading again");
                    if let Err(e) = self.actor.reread_lease().await {
                        self.api_trouble(&mut failing_since, e.into())?;
                        self.pause_a_moment().await;
                    }
                    continue;
                }
                Err(e) => {
                    self.api_trouble(&mut failing_since, e.into())?;
                    self.pause_a_moment().await;
                    continue;
                }
            }
            self.actor
                .events(&obs, &action, state.taken.as_ref().map(SwapId::as_str))
                .await;
            let change =
                fleetdecide::VoterChange::of(state.out.is_some(), state.incoming.is_some());
            match action {
                Action::ReleaseLease {
                    outcome: Outcome::Done { warning },
                } => return Ok(Ending::Done { change, warning }),
                Action::ReleaseLease {
                    outcome: Outcome::WoundDown { kind, reason },
                } => {
                    return Ok(Ending::WoundDown {
                        change,
                        kind,
                        reason: reason.to_string(),
                    });
                }
                Action::Stop { .. } => {
                    return Ok(Ending::Stopped {
                        message: action.describe(),
                    });
                }
                _ => {}
            }
        }
    }

    /// Carries out one action's writes, the Lease checked again right
    /// before any that cannot be undone. (The actor puts what each write
    /// returns into the watches' store, so the next decision reads its own
    /// writes.)
    async fn write(
        &self,
        obs: &observe::Observed,
        action: &Action,
        state: &mut SwapState,
    ) -> Result<(), ActError> {
        self.actor.check_clock()?;
        if let Action::Evict { pods, grace, .. } = action {
            // Evictions end pods: as irreversible as a Node write, so the
            // Lease is checked right before them too.
            self.actor.recheck_lease(state).await?;
            let answers = drain::evict(&self.client, pods, *grace).await?;
            // A budget's refusal is asked again at the retry pace, never in
            // a tight loop; accepted evictions are watched terminate.
            if answers
                .iter()
                .any(|(_, a)| matches!(a, drain::Evicted::Refused(_)))
            {
                let pace = Duration::from_secs(fleetdecide::drain::EVICTION_RETRY_SECS);
                let mut stop = self.shutdown.clone();
                let _ = tokio::time::timeout(pace, stop.changed()).await;
            }
        } else if action.node().is_some() {
            if action.writes_lease_first() {
                self.actor.lease_write(obs, action, state).await?;
            }
            self.actor.recheck_lease(state).await?;
            self.actor.node_write(obs, action).await?;
        } else {
            self.actor.lease_write(obs, action, state).await?;
        }
        Ok(())
    }

    /// Counts a failure of the API toward [`API_PATIENCE`]: said and
    /// retried within it, the error that ends the drive past it.
    fn api_trouble(&self, failing_since: &mut Option<Instant>, e: Error) -> Result<()> {
        let since = *failing_since.get_or_insert_with(|| self.settings.clock.now());
        if self.settings.clock.since(since) > API_PATIENCE {
            return Err(Error::ApiPatience {
                secs: API_PATIENCE.as_secs(),
                last: Box::new(e),
            });
        }
        warn!("{}; retrying", e.said());
        Ok(())
    }
}

/// `run`, the policy loop: each decision of the pure core
/// ([`fleetdecide::run_decision`]) carried out in turn, a swap, a grow or a
/// shrink driven to its end by the same [`Driver`] as `fleet-role swap`.
impl Driver {
    /// Refuses to start `run` over a fleet whose labels would have it
    /// churn (see [`fleetdecide::eligibility_shortfall`]).
    pub async fn check_eligibility(&self) -> Result<()> {
        let obs = self.observe().await?;
        if let Some(why) =
            fleetdecide::eligibility_shortfall(&obs.view, self.settings.replace_ineligible)
        {
            return Err(Error::WillNotStart { why });
        }
        Ok(())
    }

    /// `run`: swaps by policy, one at a time, until a signal (or, under
    /// leader election, the loss of the leadership). With `dry_run`, only
    /// prints each decision and why, and writes nothing.
    pub async fn run(&mut self, printer: &mut Printer, dry_run: bool) -> Result<()> {
        let mut last_idle: Option<String> = None;
        let mut failing_since: Option<Instant> = None;
        let backoff = Duration::from_secs(self.settings.core.settle.max(1).unsigned_abs());
        loop {
            if self.stopping() {
                printer.line("stopping at a safe point", json!({}));
                return Ok(());
            }
            let obs = match self.observe().await {
                Ok(o) => {
                    failing_since = None;
                    o
                }
                Err(e) => {
                    self.api_trouble(&mut failing_since, e)?;
                    self.pause_a_moment().await;
                    continue;
                }
            };
            self.metrics.observed(&obs.view, &self.instance);
            let decided = fleetdecide::run_decision(&fleetdecide::run_view(
                &obs.view,
                self.settings.replace_ineligible,
            ));
            // When the decision may change by time alone (a grace running
            // out, the window opening, a back-off ending), as well as the
            // view's own edges.
            let until = match &decided {
                RunDecision::Idle { until, .. } => until.filter(|t| *t > obs.view.now),
                RunDecision::Swap { .. }
                | RunDecision::Resize { .. }
                | RunDecision::Tidy { .. } => None,
            };
            let edge = |view: &fleetdecide::FleetView| {
                let e = fleetdecide::next_edge(view, None);
                match (e, until) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            };
            if dry_run {
                let line = match &decided {
                    RunDecision::Idle { why, .. } => format!("dry run: would stay idle: {why}"),
                    RunDecision::Tidy { action, why } => {
                        format!("dry run: would {}: {why}", action.describe())
                    }
                    RunDecision::Swap { out, incoming, why } => {
                        let p = fleetdecide::plan(&obs.view, out.as_str(), incoming.as_str());
                        let verdict = if fleetdecide::all_pass(&p.gates) {
                            "every gate passes".to_string()
                        } else {
                            format!("it would be refused: {}", fleetdecide::failures(&p.gates))
                        };
                        format!("dry run: would swap out {out}, in {incoming}: {why}; {verdict}")
                    }
                    RunDecision::Resize {
                        out,
                        incoming,
                        queued,
                        why,
                    } => {
                        let hosts: Vec<&str> = out
                            .iter()
                            .chain(incoming)
                            .chain(queued)
                            .map(NodeName::as_str)
                            .collect();
                        let (what, p) = if incoming.is_some() {
                            ("grow", fleetdecide::plan_grow(&obs.view, &hosts))
                        } else {
                            ("shrink", fleetdecide::plan_shrink(&obs.view, &hosts))
                        };
                        let verdict = if fleetdecide::all_pass(&p.gates) {
                            "every gate passes".to_string()
                        } else {
                            format!("it would be refused: {}", fleetdecide::failures(&p.gates))
                        };
                        format!(
                            "dry run: would {what} ({}): {why}; {verdict}",
                            hosts.join(", ")
                        )
                    }
                };
                if last_idle.as_deref() != Some(line.as_str()) {
                    // The voter set's whole path, each step's tolerance with it.
                    let path = fleetdecide::voterset::path_of(&obs.view);
                    let set = crate::status::voter_set_lines(&path, &self.settings);
                    let fields = json!({"dryRun": true, "decision": decided, "voterSet": path});
                    printer.line(&format!("{line}\n{}", set.join("\n")), fields);
                    last_idle = Some(line);
                }
                let edge = edge(&obs.view);
                self.wait_for_change(edge).await;
                continue;
            }
            match decided {
                RunDecision::Idle { why, until } => {
                    if last_idle.as_deref() != Some(why.as_str()) {
                        printer.line(
                            &format!("idle: {why}"),
                            json!({"idle": why, "until": until}),
                        );
                        last_idle = Some(why);
                    }
                    let edge = edge(&obs.view);
                    self.wait_for_change(edge).await;
                }
                RunDecision::Tidy { action, why } => {
                    last_idle = None;
                    match self.actor.tidy_write(&obs, &action).await {
                        Ok(true) => printer.line(
                            &format!("{}: {why}", action.describe()),
                            json!({"tidy": action, "why": why}),
                        ),
                        // A swap took the Lease meanwhile: decided again.
                        Ok(false) => {}
                        Err(e) => {
                            self.api_trouble(&mut failing_since, e.into())?;
                            self.pause_a_moment().await;
                        }
                    }
                }
                RunDecision::Swap { .. } | RunDecision::Resize { .. } => {
                    last_idle = None;
                    let words = decided.change_words().unwrap_or_default();
                    let (out, incoming, queued, why) = match decided {
                        RunDecision::Swap { out, incoming, why } => {
                            (Some(out), Some(incoming), Vec::new(), why)
                        }
                        RunDecision::Resize {
                            out,
                            incoming,
                            queued,
                            why,
                        } => (out, incoming, queued, why),
                        _ => unreachable!("matched above"),
                    };
                    let kind = fleetdecide::VoterChange::of(out.is_some(), incoming.is_some());
                    printer.line(
                        &format!("{words}: {why}"),
                        json!({"move": kind, "out": out, "in": incoming, "queued": queued, "why": why}),
                    );
                    let ending = self.change(out, incoming, queued, printer).await?;
                    let (word, message) = ending.summary();
                    printer.result(word, ending.exit_code(), &message);
                    if matches!(ending, Ending::Interrupted { .. }) {
                        return Ok(());
                    }
                    if !matches!(ending, Ending::Done { .. }) {
                        // A refused or failed swap is tried again only after
                        // the settle time, not in a tight loop.
                        let _ = tokio::time::timeout(backoff, self.shutdown.changed()).await;
                    }
                }
            }
        }
    }
}

/// What the step just left says, for the story `swap` prints: the
/// snapshot's file, the new voter, the member's removal, the agent.
fn milestone(obs: &observe::Observed, action: &Action) -> Option<String> {
    let Action::MarkStep { .. } = action else {
        return None;
    };
    let l = obs.view.lease.as_ref()?;
    let node = |n: &Option<String>| n.as_deref().and_then(|n| obs.view.node(n));
    match l.current_step()? {
        fleetdecide::SwapStep::Snapshot => {
            let swap = l.swap.as_deref()?;
            let n = obs
                .view
                .nodes
                .iter()
                .find(|n| n.marks.snapshot_request.as_deref() == Some(swap))?;
            let r = n.report.as_ref()?;
            (r.swap.as_ref().map(SwapId::as_str) == Some(swap)).then_some(())?;
            let file = r.snapshot_file.as_deref()?;
            Some(format!(
                "snapshot taken on {}: {}",
                n.name,
                fleetdecide::one_line(file)
            ))
        }
        fleetdecide::SwapStep::Promote => {
            let i = node(&l.swap_in)?;
            fleetdecide::is_healthy_voter(i).then(|| format!("{} is a voter", i.name))
        }
        fleetdecide::SwapStep::Removal => {
            let o = node(&l.swap_out)?;
            let mut m = obs
                .view
                .member_gone(&o.name)
                .then(|| format!("k3s removed {}'s etcd member", o.name))?;
            if fleetdecide::finished(o) {
                m.push_str(&format!(
                    "; {} runs as an agent: Ready, node Lease renewed since its finish began",
                    o.name
                ));
            }
            Some(m)
        }
        fleetdecide::SwapStep::Finish => {
            let o = node(&l.swap_out)?;
            fleetdecide::finished(o).then(|| {
                format!(
                    "{} runs as an agent: Ready, node Lease renewed since its finish began",
                    o.name
                )
            })
        }
        _ => None,
    }
}
