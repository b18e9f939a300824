//! What `fleet-role-actuator watch` shows Prometheus, and its health.
//!
//! Off unless `metrics_address` is set: most hosts need nothing but the
//! report. When set:
//!
//! - `/metrics`: the steps taken by outcome, their host parts' durations,
//!   and the restarts of the watches, through `prometheus-client`;
//! - `/healthz`: 200 while the process serves at all (a liveness probe).
//!
//! The HTTP side is the `endpoints` crate's, shared with the controller.

use std::{
    net::SocketAddr,
    sync::{Arc, atomic::AtomicU64},
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

/// Labels of one series.
type Labels = Vec<(String, String)>;

/// Why the endpoints could not be served.
pub use endpoints::ServeError as MetricsError;

/// The actuator's metrics. Counted whether served or not (a few counters).
pub struct Metrics {
    registry: Registry,
    steps: Family<Labels, Counter>,
    durations: Family<Labels, Histogram, fn() -> Histogram>,
    restarts: Family<Labels, Counter>,
    refused: Family<Labels, Counter>,
    offset: Family<Labels, Gauge<f64, AtomicU64>>,
}

fn step_histogram() -> Histogram {
    // 0.5 s to about half an hour: a snapshot takes seconds, a promotion
    // waits for its learner to catch up (start_wait_secs, 600 by default).
    Histogram::new(exponential_buckets(0.5, 2.0, 13))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric, registered under the prefix `fleet_role_actuator`.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("fleet_role_actuator");
        let build_info = Family::<Labels, Gauge>::default();
        registry.register(
            "build_info",
            "1, labelled with this actuator's release (version) and the protocol version it writes",
            build_info.clone(),
        );
        build_info
            .get_or_create(&vec![
                ("version".into(), protocol::version::RELEASE.into()),
                (
                    "protocol".into(),
                    protocol::version::PROTOCOL_VERSION.to_string(),
                ),
            ])
            .set(1);
        let steps = Family::<Labels, Counter>::default();
        registry.register(
            "steps",
            "Steps this process ended, by step and outcome (done, failed, stopped, refused, cancelled)",
            steps.clone(),
        );
        let durations = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(
            step_histogram as fn() -> Histogram,
        );
        registry.register(
            "step_duration_seconds",
            "How long each step's host part took, from its start to its end, by step",
            durations.clone(),
        );
        let restarts = Family::<Labels, Counter>::default();
        registry.register(
            "watch_restarts",
            "Watch errors after which a watch started again (after a backoff), by watch (node, lease)",
            restarts.clone(),
        );
        // Both watches' series from the start, at 0, so a rate over them
        // reads from the first scrape rather than from the first error.
        for watch in ["node", "lease"] {
            drop(restarts.get_or_create(&vec![("watch".into(), watch.into())]));
        }
        let refused = Family::<Labels, Counter>::default();
        registry.register(
            "writes_refused",
            "Writes of this host's own objects the API refused, by object (report, heartbeat) and the API's reason (Forbidden, NotFound, ...)",
            refused.clone(),
        );
        let offset = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "clock_offset_seconds",
            "How far this host's clock is off the API server's (positive: ahead), from the Date of the API's last answer before a decision: more than bound=\"above\", at most bound=\"at_most\"",
            offset.clone(),
        );
        Self {
            registry,
            steps,
            durations,
            restarts,
            refused,
            offset,
        }
    }

    /// The API's answers showed the host's clock off the API server's by
    /// `offset`.
    pub fn clock_offset(&self, offset: protocol::clock_offset::ClockOffset) {
        #[allow(clippy::cast_precision_loss)] // milliseconds within a lifetime: exact in f64
        for (bound, ms) in [("above", offset.above_ms), ("at_most", offset.at_most_ms)] {
            self.offset
                .get_or_create(&vec![("bound".into(), bound.into())])
                .set(ms as f64 / 1000.0);
        }
    }

    /// The step `step` ended with `outcome`.
    pub fn step_ended(&self, step: &str, outcome: &str) {
        self.steps
            .get_or_create(&vec![
                ("step".into(), step.into()),
                ("outcome".into(), outcome.into()),
            ])
            .inc();
    }

    /// The host part of `step` took `took`.
    pub fn step_took(&self, step: &str, took: Duration) {
        self.durations
            .get_or_create(&vec![("step".into(), step.into())])
            .observe(took.as_secs_f64());
    }

    /// The watch `watch` failed and starts again.
    pub fn watch_restarted(&self, watch: &str) {
        self.restarts
            .get_or_create(&vec![("watch".into(), watch.into())])
            .inc();
    }

    /// The API refused a write of `object` (`report`, `heartbeat`) for
    /// `reason`, the API's own word for it.
    pub fn write_refused(&self, object: &str, reason: &str) {
        self.refused
            .get_or_create(&vec![
                ("object".into(), object.into()),
                ("reason".into(), reason.into()),
            ])
            .inc();
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }

    /// Serves `/metrics` and `/healthz` on `addr` until the process ends.
    /// Returns once bound, with the address bound.
    pub async fn serve(self: Arc<Self>, addr: SocketAddr) -> Result<SocketAddr, MetricsError> {
        endpoints::serve(addr, self).await
    }
}

impl Route for Metrics {
    fn route(&self, path: &str) -> Answer {
        match path {
            "/metrics" => Answer::metrics(self.render()),
            "/healthz" => Answer::ok("ok\n"),
            _ => Answer::not_found("try /metrics or /healthz\n"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_counted_by_step_and_outcome_and_timed_by_step() {
        let m = Metrics::new();
        m.step_ended("promote", "done");
        m.step_ended("promote", "done");
        m.step_took("promote", Duration::from_secs(3));
        m.watch_restarted("lease");
        m.write_refused("report", "Forbidden");
        let text = m.render();
        assert!(
            text.contains(
                "fleet_role_actuator_writes_refused_total{object=\"report\",reason=\"Forbidden\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("fleet_role_actuator_steps_total{step=\"promote\",outcome=\"done\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("fleet_role_actuator_step_duration_seconds_count{step=\"promote\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("fleet_role_actuator_watch_restarts_total{watch=\"lease\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn both_watches_restarts_read_zero_from_the_start() {
        let text = Metrics::new().render();
        for watch in ["node", "lease"] {
            let series = format!("fleet_role_actuator_watch_restarts_total{{watch=\"{watch}\"}} 0");
            assert!(text.contains(&series), "{text}");
        }
    }

    #[test]
    fn the_build_info_names_this_release_and_the_protocol_it_writes() {
        let text = Metrics::new().render();
        let series = format!(
            "fleet_role_actuator_build_info{{version=\"{}\",protocol=\"{}\"}} 1",
            protocol::version::RELEASE,
            protocol::version::PROTOCOL_VERSION
        );
        assert!(text.contains(&series), "{text}");
    }

    #[test]
    fn only_metrics_and_healthz_are_served() {
        let m = Metrics::new();
        assert!(
            endpoints::answer("GET /healthz HTTP/1.1", &m)
                .status
                .starts_with("200")
        );
        assert!(
            endpoints::answer("GET /metrics HTTP/1.1", &m)
                .status
                .starts_with("200")
        );
        assert!(
            endpoints::answer("GET /readyz HTTP/1.1", &m)
                .status
                .starts_with("404")
        );
    }
}
