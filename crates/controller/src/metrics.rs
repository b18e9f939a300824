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
//! The server is a few lines over a `TcpListener` rather than an HTTP
//! framework: three GET paths, no body, one response per connection, every
//! read bounded. It needs no new dependency beyond `prometheus-client`.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicI64, Ordering},
    },
    time::Duration,
};

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
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use tracing::{debug, warn};

/// Labels of one series.
type Labels = Vec<(String, String)>;

/// The longest a client may take to send its request.
const READ_BOUND: Duration = Duration::from_secs(5);

/// Why the endpoints could not be served.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address could not be bound.
    #[error("cannot serve metrics on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

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
            let since = crate::observe::now().saturating_sub(at).max(0);
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
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| MetricsError::Bind { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| MetricsError::Bind { addr, source })?;
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let me = self.clone();
                        tokio::spawn(async move {
                            if let Err(e) = me.answer(stream).await {
                                debug!("a metrics request: {e}");
                            }
                        });
                    }
                    Err(e) => {
                        warn!("accepting a metrics connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Ok(bound)
    }

    async fn answer(&self, mut stream: TcpStream) -> std::io::Result<()> {
        let mut buf = vec![0u8; 4096];
        let mut len = 0;
        // The request line is all that is read; a client too slow or too
        // long is cut off.
        let read = tokio::time::timeout(READ_BOUND, async {
            while len < buf.len() {
                let n = stream.read(&mut buf[len..]).await?;
                if n == 0 {
                    break;
                }
                len += n;
                if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Ok::<_, std::io::Error>(())
        })
        .await;
        if !matches!(read, Ok(Ok(()))) {
            return Ok(());
        }
        let head = String::from_utf8_lossy(&buf[..len]);
        let (status, kind, body) = self.route(head.lines().next().unwrap_or_default());
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        tokio::time::timeout(READ_BOUND, stream.write_all(response.as_bytes()))
            .await
            .map_err(|_| std::io::Error::other("write timed out"))??;
        let _ = stream.shutdown().await;
        Ok(())
    }

    /// The answer to a request line: status, content type, body.
    fn route(&self, line: &str) -> (&'static str, &'static str, String) {
        const PLAIN: &str = "text/plain; charset=utf-8";
        let mut parts = line.split_whitespace();
        let (method, path) = (parts.next(), parts.next());
        if method != Some("GET") {
            return ("405 Method Not Allowed", PLAIN, "GET only\n".into());
        }
        match path.map(|p| p.split('?').next().unwrap_or(p)) {
            Some("/metrics") => (
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                self.render(),
            ),
            Some("/healthz") => ("200 OK", PLAIN, "ok\n".into()),
            Some("/readyz") if self.ready.load(Ordering::Relaxed) => {
                ("200 OK", PLAIN, "ok\n".into())
            }
            Some("/readyz") => (
                "503 Service Unavailable",
                PLAIN,
                "the watches have not listed the cluster yet\n".into(),
            ),
            _ => (
                "404 Not Found",
                PLAIN,
                "try /metrics, /healthz or /readyz\n".into(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_counted_under_its_gate() {
        let m = Metrics::new();
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
        let m = Metrics::new();
        assert!(m.route("GET /readyz HTTP/1.1").0.starts_with("503"));
        m.set_ready(true);
        assert!(m.route("GET /readyz HTTP/1.1").0.starts_with("200"));
        assert!(m.route("GET /healthz HTTP/1.1").0.starts_with("200"));
        assert!(m.route("POST /metrics HTTP/1.1").0.starts_with("405"));
        assert!(m.route("GET /nope HTTP/1.1").0.starts_with("404"));
    }

    #[test]
    fn with_no_swap_recorded_the_time_since_the_last_one_reads_minus_one() {
        let text = Metrics::new().render();
        assert!(
            text.contains("fleet_role_seconds_since_last_swap -1"),
            "{text}"
        );
    }
}
