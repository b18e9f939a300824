//! What `fleet-role run` shows Prometheus, and its health endpoints.
//!
//! Served only when `metrics_address` (or `run --metrics-address`) is set:
//!
//! - `/metrics`: the text exposition format (OpenMetrics text, which
//!   Prometheus reads), through `prometheus-client`;
//! - `/healthz`: 200 while the process serves at all (a liveness probe);
//! - `/readyz`: 200 once the watches have listed the cluster, 503 before
//!   (a readiness probe; a standby is ready too: it is ready to lead).
//!
//! The fleet's state (etcd's membership, the Lease's pause, swap and last
//! ending, what is degraded) is read from the same [`FleetView`] and by the
//! same functions as the gates and `fleet-role status`: one model, so an
//! alert fires exactly when a gate would shut. Those series appear once
//! this process has observed the fleet (while it leads, or under
//! `run --dry-run`) and are withdrawn when it stops leading, so a query
//! over every instance reads the leader's alone; a value that is not known
//! (no server reports etcd's view, no swap ever ended) has no sample
//! rather than a sentinel.
//!
//! The HTTP side (the request read, the answer written, every wait bounded)
//! is the `endpoints` crate's, shared with the actuator.

use fleetdecide::SwapRecord;
use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use endpoints::{Answer, Route};
use fleetdecide::{FleetView, degradations, one_line, pending_learners, standbys};
use prometheus_client::{
    encoding::text::encode,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

use crate::cluster::Credential;

/// Labels of one series.
type Labels = Vec<(String, String)>;

/// Why the endpoints could not be served.
pub use endpoints::ServeError as MetricsError;

/// A gauge whose samples come and go: each [`Shown::show`] sets the series
/// given and withdraws those no longer given, so a scrape never sees a
/// stale one (nor, for a series kept, a moment without it).
#[derive(Default)]
struct Shown {
    family: Family<Labels, Gauge>,
    /// The label sets shown now.
    shown: Mutex<Vec<Labels>>,
}

impl Shown {
    fn show(&self, series: Vec<(Labels, i64)>) {
        let mut shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
        for (labels, value) in &series {
            self.family.get_or_create(labels).set(*value);
        }
        for old in shown.iter() {
            if !series.iter().any(|(l, _)| l == old) {
                self.family.remove(old);
            }
        }
        *shown = series.into_iter().map(|(l, _)| l).collect();
    }

    /// One unlabelled sample, or none.
    fn one(&self, value: Option<i64>) {
        self.show(value.map(|v| (Vec::new(), v)).into_iter().collect());
    }
}

/// `n` as a gauge's value.
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The controller's metrics.
pub struct Metrics {
    registry: Registry,
    swaps: Family<Labels, Counter>,
    refusals: Family<Labels, Counter>,
    steps: Family<Labels, Histogram, fn() -> Histogram>,
    voters_healthy: Shown,
    learners: Shown,
    members: Shown,
    ghosts: Shown,
    paused: Shown,
    swap_in_progress: Shown,
    step_deadline: Shown,
    degraded: Shown,
    last_swap_end: Shown,
    last_swap_failed: Shown,
    credential_expiry: Shown,
    voters_configured: Shown,
    standbys: Shown,
    heartbeats: Shown,
    host_credentials: Shown,
    regrade_lease_held: Gauge,
    leader: Gauge,
    ready: AtomicBool,
    /// Where the credential's expiry is read at each scrape.
    credential: Credential,
}

fn step_histogram() -> Histogram {
    // 1 s to about an hour: a snapshot takes seconds, a promotion minutes.
    Histogram::new(exponential_buckets(1.0, 2.0, 13))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric, registered under the prefix `fleet_role`.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("fleet_role");
        let build_info = Family::<Labels, Gauge>::default();
        registry.register(
            "build_info",
            "1, labelled with the version of this fleet-role build",
            build_info.clone(),
        );
        build_info
            .get_or_create(&vec![("version".into(), env!("CARGO_PKG_VERSION").into())])
            .set(1);
        let swaps = Family::<Labels, Counter>::default();
        registry.register(
            "swaps",
            "Swaps this process ended, by outcome (done, refused, failed, stopped, lost, interrupted)",
            swaps.clone(),
        );
        let refusals = Family::<Labels, Counter>::default();
        registry.register(
            "gate_refusals",
            "Swaps refused, by the gate that was shut",
            refusals.clone(),
        );
        let steps = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(
            step_histogram as fn() -> Histogram,
        );
        registry.register(
            "step_duration_seconds",
            "How long each step of a swap took, as this process saw it",
            steps.clone(),
        );
        let shown = |registry: &mut Registry, name: &str, help: &str| {
            let s = Shown::default();
            registry.register(name, help, s.family.clone());
            s
        };
        let voters_healthy = shown(
            &mut registry,
            "voters_healthy",
            "etcd voting members healthy by their own host's fresh view (etcd's membership as the servers report it); no sample while no server reports one",
        );
        let members = shown(
            &mut registry,
            "members",
            "etcd voting members (etcd's membership as the servers report it); no sample while no server reports one",
        );
        let ghosts = shown(
            &mut registry,
            "ghost_members",
            "etcd members no Node matches (the no-ghost-member gate); no sample while no server reports etcd's view",
        );
        let learners = shown(
            &mut registry,
            "learners",
            "Learners pending, by the Nodes and by etcd's membership (the no-learner gate)",
        );
        let paused = shown(
            &mut registry,
            "paused",
            "1 while the regrade Lease records a pause (fleet-role pause), else 0",
        );
        let swap_in_progress = shown(
            &mut registry,
            "swap_in_progress",
            "1 while the regrade Lease is held for a swap, labelled with the step it records and the hosts it moves (outgoing, incoming; - for none); no sample otherwise",
        );
        let step_deadline = shown(
            &mut registry,
            "swap_step_deadline_timestamp_seconds",
            "When the step of the swap in progress times out (unix seconds), labelled with the step; no sample without a swap or for a step with no timeout",
        );
        let degraded = shown(
            &mut registry,
            "degraded",
            "1 for each kind of thing degraded about the fleet (as fleet-role status says), by reason; no sample when nothing is",
        );
        let last_swap_end = shown(
            &mut registry,
            "last_swap_end_timestamp_seconds",
            "When the last swap ended (unix seconds), as the regrade Lease records it, whoever ran it; no sample before the first",
        );
        let last_swap_failed = shown(
            &mut registry,
            "last_swap_failed",
            "1 when the last voter change wound down or stopped part-way, 0 when it finished, as the regrade Lease records it, whoever ran it; no sample before the first",
        );
        let credential_expiry = shown(
            &mut registry,
            "credential_expiry_timestamp_seconds",
            "When the controller's bearer token lapses (unix seconds, its exp claim); no sample when the credential is not a token that says",
        );
        let voters_configured = shown(
            &mut registry,
            "voters_configured",
            "The voters the settings ask for (voters)",
        );
        let standbys = shown(
            &mut registry,
            "standbys",
            "Eligible agents run could promote now (Ready, uncordoned, no step asked, rested after a replacement)",
        );
        let heartbeats = shown(
            &mut registry,
            "host_heartbeat_timestamp_seconds",
            "When each eligible host's or server's actuator last wrote its heartbeat (unix seconds, as the host wrote it), by node, and whether it votes in etcd (voter=yes|no)",
        );
        let host_credentials = shown(
            &mut registry,
            "host_credential_expiry_timestamp_seconds",
            "When each host's actuator credential lapses (unix seconds, its token's exp as the host reports it), by node; no sample for a host that reports none",
        );
        let regrade_lease_held = Gauge::default();
        registry.register(
            "regrade_lease_held",
            "1 while this process holds the regrade Lease for a swap",
            regrade_lease_held.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this process leads (run's leader election)",
            leader.clone(),
        );
        Self {
            registry,
            swaps,
            refusals,
            steps,
            voters_healthy,
            learners,
            members,
            ghosts,
            paused,
            swap_in_progress,
            step_deadline,
            degraded,
            last_swap_end,
            last_swap_failed,
            credential_expiry,
            voters_configured,
            standbys,
            heartbeats,
            host_credentials,
            regrade_lease_held,
            leader,
            ready: AtomicBool::new(false),
            credential: Credential::Unknown,
        }
    }

    /// Reads the credential's expiry from `credential` at each scrape.
    pub fn with_credential(mut self, credential: Credential) -> Self {
        self.credential = credential;
        self
    }

    /// A swap ended with `outcome` (the word `swap` prints last).
    pub fn swap_ended(&self, outcome: &str) {
        self.swaps
            .get_or_create(&vec![("outcome".into(), outcome.into())])
            .inc();
    }

    /// A swap was refused by the gate `gate`.
    pub fn refused_by(&self, gate: &str) {
        self.refusals
            .get_or_create(&vec![("gate".into(), gate.into())])
            .inc();
    }

    /// The step `step` took `took`.
    pub fn step_took(&self, step: &str, took: Duration) {
        self.steps
            .get_or_create(&vec![("step".into(), step.into())])
            .observe(took.as_secs_f64());
    }

    /// What a view shows: etcd's membership and the learners as the gates
    /// read them, the Lease's pause, swap and last ending, what is
    /// degraded, and whether `instance` holds the regrade Lease.
    pub fn observed(&self, v: &FleetView, instance: &str) {
        let etcd = v.etcd();
        let by_etcd = |n: usize| etcd.known().then(|| count(n));
        let (voting, healthy) = etcd.voters_after(None);
        self.members.one(by_etcd(voting));
        self.voters_healthy.one(by_etcd(healthy));
        self.ghosts.one(by_etcd(etcd.ghosts().count()));
        self.learners
            .one(Some(count(pending_learners(v, None).len())));
        self.paused.one(Some(i64::from(v.paused())));
        self.voters_configured.one(Some(count(v.settings.voters)));
        self.standbys.one(Some(count(standbys(v).len())));
        // The host's own claim of when it wrote: an alert on its age finds
        // an actuator that stopped writing (a compromised host can only
        // make its own look fresh, which the gates do not take on trust).
        // `voter` tells the alert a voter's silence (at once) from a
        // standby's (a laptop asleep for the night): etcd's membership as
        // the servers report it, else the Node's class (a label, never a
        // decision).
        let voting = |n: &protocol::NodeFacts| match etcd.known() {
            true => etcd.of_node(&n.name).is_some_and(|m| !m.member.learner),
            false => fleetdecide::is_voting(n),
        };
        self.heartbeats.show(
            v.nodes
                .iter()
                .filter_map(|n| {
                    let at = n.host.as_ref()?.heartbeat_at;
                    let voter = if voting(n) { "yes" } else { "no" };
                    Some((
                        vec![
                            ("node".into(), n.name.clone()),
                            ("voter".into(), voter.into()),
                        ],
                        at,
                    ))
                })
                .collect(),
        );
        // The host's own claim, for an alert before the hosts enrolled
        // together lapse together.
        self.host_credentials.show(
            v.nodes
                .iter()
                .filter_map(|n| {
                    let exp = n.host.as_ref()?.credential_expires_at?;
                    Some((vec![("node".into(), n.name.clone())], exp))
                })
                .collect(),
        );
        let swapping = v
            .lease
            .as_ref()
            .filter(|l| l.is_held(v.now) && l.swap.is_some());
        self.swap_in_progress.show(
            swapping
                .map(|l| {
                    // The step as this build knows it; a Lease written by
                    // another version may name one it does not.
                    let step = match (l.current_step(), l.step.as_deref()) {
                        (Some(s), _) => s.as_str(),
                        (None, None) => "none",
                        (None, Some(_)) => "unknown",
                    };
                    // The Lease's halves are the controller's to write (an
                    // admin's besides); shown on one line all the same.
                    let half = |h: &Option<String>| h.as_deref().map_or("-".into(), one_line);
                    (
                        vec![
                            ("step".into(), step.into()),
                            ("outgoing".into(), half(&l.swap_out)),
                            ("incoming".into(), half(&l.swap_in)),
                        ],
                        1,
                    )
                })
                .into_iter()
                .collect(),
        );
        self.step_deadline.show(
            swapping
                .and_then(|l| {
                    let step = l.current_step()?;
                    let at = l.step_deadline(&v.settings.timeouts)?;
                    Some((vec![("step".into(), step.as_str().into())], at))
                })
                .into_iter()
                .collect(),
        );
        let mut reasons: Vec<_> = degradations(v).into_iter().map(|d| d.reason).collect();
        reasons.sort_unstable();
        reasons.dedup();
        self.degraded.show(
            reasons
                .into_iter()
                .map(|r| (vec![("reason".into(), r.as_str().into())], 1))
                .collect(),
        );
        let last = v
            .lease
            .as_ref()
            .and_then(|l| fleetdecide::endings_of(l).into_iter().max_by_key(|e| e.at));
        self.last_swap_end.one(last.as_ref().map(|e| e.at));
        self.last_swap_failed
            .one(last.as_ref().map(|e| i64::from(e.failed)));
        let held = swapping.is_some_and(|l| l.instance.as_deref() == Some(instance));
        self.regrade_lease_held.set(i64::from(held));
    }

    /// Whether this process leads. A process that stops leading withdraws
    /// what it showed of the fleet: the new leader shows it now.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
        if !leading {
            for s in [
                &self.voters_healthy,
                &self.learners,
                &self.members,
                &self.ghosts,
                &self.paused,
                &self.swap_in_progress,
                &self.step_deadline,
                &self.degraded,
                &self.last_swap_end,
                &self.last_swap_failed,
                &self.voters_configured,
                &self.standbys,
                &self.heartbeats,
                &self.host_credentials,
            ] {
                s.show(Vec::new());
            }
            self.regrade_lease_held.set(0);
        }
    }

    /// Whether the watches have listed the cluster.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// The exposition text, the credential's expiry read now (a token
    /// file is rotated under the process).
    pub fn render(&self) -> String {
        self.credential_expiry.one(self.credential.expiry());
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }

    /// Serves `/metrics`, `/healthz` and `/readyz` on `addr` until the
    /// process ends. Returns once bound, with the address bound (a port 0
    /// is chosen by the kernel).
    pub async fn serve(self: Arc<Self>, addr: SocketAddr) -> Result<SocketAddr, MetricsError> {
        endpoints::serve(addr, self).await
    }
}

impl Route for Metrics {
    fn route(&self, path: &str) -> Answer {
        match path {
            "/metrics" => Answer::metrics(self.render()),
            "/healthz" => Answer::ok("ok\n"),
            "/readyz" if self.ready.load(Ordering::Relaxed) => Answer::ok("ok\n"),
            "/readyz" => Answer::unavailable("the watches have not listed the cluster yet\n"),
            _ => Answer::not_found("try /metrics, /healthz or /readyz\n"),
        }
    }
}

#[cfg(test)]
mod tests;
