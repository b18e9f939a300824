//! `run`, the policy loop: each decision of the pure core
//! ([`controller::run_decision`]) carried out in turn, a swap, a grow or a
//! shrink driven to its end by the same [`Driver`] as `fleet-role swap`.

use super::*;

impl Driver {
    /// Refuses to start `run` over a fleet whose labels would have it
    /// churn (see [`policy::eligibility_shortfall`]).
    pub async fn check_eligibility(&self) -> Result<()> {
        let obs = self.observe().await?;
        if let Some(why) =
            policy::eligibility_shortfall(&obs.view, self.settings.replace_ineligible)
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
            let decided = controller::run_decision(&policy::run_view(
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
            let edge = |view: &controller::FleetView| {
                let e = wake::next_edge(view, None);
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
                        let p = controller::plan(&obs.view, out.as_str(), incoming.as_str());
                        let verdict = if controller::all_pass(&p.gates) {
                            "every gate passes".to_string()
                        } else {
                            format!("it would be refused: {}", controller::failures(&p.gates))
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
                            ("grow", controller::plan_grow(&obs.view, &hosts))
                        } else {
                            ("shrink", controller::plan_shrink(&obs.view, &hosts))
                        };
                        let verdict = if controller::all_pass(&p.gates) {
                            "every gate passes".to_string()
                        } else {
                            format!("it would be refused: {}", controller::failures(&p.gates))
                        };
                        format!(
                            "dry run: would {what} ({}): {why}; {verdict}",
                            hosts.join(", ")
                        )
                    }
                };
                if last_idle.as_deref() != Some(line.as_str()) {
                    // The voter set's whole path, each step's tolerance with it.
                    let path = controller::voterset::path_of(&obs.view);
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
                    let kind = controller::Change::of(out.is_some(), incoming.is_some());
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
