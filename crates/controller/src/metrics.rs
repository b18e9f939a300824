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
//! The HTTP side (the request read, the answer written, every wait bounded)
//! is the `endpoints` crate's, shared with the actuator.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicI64, Ordering},
    },
    time::Duration,
};

use endpoints::{Answer, Route};
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
use protocol::controller::{Class, FleetView, classify, count_voters, is_healthy_voter};

/// Labels of one series.
type Labels = Vec<(String, String)>;

/// Why the endpoints could not be served.
pub use endpoints::ServeError as MetricsError;

/// The controller's metrics.
pub struct Metrics {
    registry: Registry,
    swaps: Family<Labels, Counter>,
    refusals: Family<Labels, Counter>,
    steps: Family<Labels, Histogram, fn() -> Histogram>,
    voters_healthy: Gauge,
    learners: Gauge,
    members: Gauge,
    regrade_lease_held: Gauge,
    leader: Gauge,
    since_last_swap: Gauge,
    last_swap_at: AtomicI64,
    ready: AtomicBool,
    /// Reads now for the time since the last swap.
    clock: clock::Clock,
}

fn step_histogram() -> Histogram {
    // 1 s to about an hour: a snapshot takes seconds, a promotion minutes.
    Histogram::new(exponential_buckets(1.0, 2.0, 13))
}

impl Metrics {
    /// Every metric, registered under the prefix `fleet_role`, with the
    /// time since the last swap read from `clock`.
    pub fn new(clock: clock::Clock) -> Self {
        let mut registry = Registry::with_prefix("fleet_role");
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
        let voters_healthy = Gauge::default();
        registry.register(
            "voters_healthy",
            "etcd voters Ready with EtcdIsVoter",
            voters_healthy.clone(),
        );
        let learners = Gauge::default();
        registry.register("learners", "etcd learners pending", learners.clone());
        let members = Gauge::default();
        registry.register(
            "members",
            "etcd voting members, counting configured voters not seen as down",
            members.clone(),
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
        let since_last_swap = Gauge::default();
        registry.register(
            "seconds_since_last_swap",
            "Seconds since the last swap ended, as recorded on the regrade Lease (-1: none recorded)",
            since_last_swap.clone(),
        );
        since_last_swap.set(-1);
        Self {
            registry,
            swaps,
            refusals,
            steps,
            voters_healthy,
            learners,
            members,
            regrade_lease_held,
            leader,
            since_last_swap,
            last_swap_at: AtomicI64::new(i64::MIN),
            ready: AtomicBool::new(false),
            clock,
        }
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

    /// What a view shows: the voters, learners and members, the regrade
    /// Lease held by `instance`, the last swap's time.
    pub fn observed(&self, v: &FleetView, instance: &str) {
        let count = count_voters(v, None);
        let gauge = |g: &Gauge, n: usize| g.set(i64::try_from(n).unwrap_or(i64::MAX));
        gauge(
            &self.voters_healthy,
            v.nodes.iter().filter(|n| is_healthy_voter(n)).count(),
        );
        gauge(
            &self.learners,
            v.nodes
                .iter()
                .filter(|n| classify(n) == Class::Learner)
                .count(),
        );
        gauge(&self.members, count.members());
        let held = v.lease.as_ref().is_some_and(|l| {
            l.is_held(v.now) && l.instance.as_deref() == Some(instance) && l.swap.is_some()
        });
        self.regrade_lease_held.set(i64::from(held));
        if let Some(last) = v.lease.as_ref().and_then(|l| l.last()) {
            self.last_swap_at.store(last.at, Ordering::Relaxed);
        }
    }

    /// Whether this process leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Whether the watches have listed the cluster.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// The exposition text, the time since the last swap computed now.
    pub fn render(&self) -> String {
        let at = self.last_swap_at.load(Ordering::Relaxed);
        if at != i64::MIN {
            let since = self.clock.unix_secs().saturating_sub(at).max(0);
            self.since_last_swap.set(since);
        }
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
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_counted_under_its_gate() {
        let m = Metrics::new(clock::Clock::manual(1_000));
        m.refused_by("voters-healthy");
        m.refused_by("voters-healthy");
        let text = m.render();
        assert!(
            text.contains("fleet_role_gate_refusals_total{gate=\"voters-healthy\"} 2"),
            "{text}"
        );
    }

    #[test]
    fn readyz_answers_503_until_the_watches_have_listed() {
        let m = Metrics::new(clock::Clock::manual(1_000));
        assert!(
            endpoints::answer("GET /readyz HTTP/1.1", &m)
                .status
                .starts_with("503")
        );
        m.set_ready(true);
        assert!(
            endpoints::answer("GET /readyz HTTP/1.1", &m)
                .status
                .starts_with("200")
        );
        assert!(
            endpoints::answer("GET /healthz HTTP/1.1", &m)
                .status
                .starts_with("200")
        );
        assert!(
            endpoints::answer("POST /metrics HTTP/1.1", &m)
                .status
                .starts_with("405")
        );
        assert!(
            endpoints::answer("GET /nope HTTP/1.1", &m)
                .status
                .starts_with("404")
        );
    }

    #[test]
    fn with_no_swap_recorded_the_time_since_the_last_one_reads_minus_one() {
        let text = Metrics::new(clock::Clock::manual(1_000)).render();
        assert!(
            text.contains("fleet_role_seconds_since_last_swap -1"),
            "{text}"
        );
    }
}
