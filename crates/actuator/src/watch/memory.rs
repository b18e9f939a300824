//! The report as the watcher holds it: its memory of steps, read once per
//! run and kept here after, how it stands against the API's copy, and its
//! writing (the host's copy, then the API's).

use kube::Client;
use protocol::Report;
use tracing::{info, warn};

use super::context::Context;
use crate::report;

/// The report as the watcher holds it: its memory of steps.
#[derive(Debug, Default)]
pub(super) struct Memory {
    /// The last report written (or read).
    pub(super) report: Option<Report>,
    /// How it stands against the API's copy.
    pub(super) copy: Copy,
    /// The host's objects in the API as last read or written.
    pub(super) published: crate::report::Published,
    /// The API's refusal of the last report sent, while it stands, and
    /// when it was said: the same report is sent again at most once a
    /// heartbeat period (a new one at once), and the refusal rides on the
    /// heartbeat, where `status` shows it.
    pub(super) refused: Option<(std::time::Instant, crate::report::Refusal)>,
    /// The refusal was said or lifted since the heartbeat last carried it:
    /// the heartbeat is due at the next decision, not a period later.
    pub(super) refusal_changed: bool,
}

impl Memory {
    /// Whether `refusal` is not the one the last report met (a new one is
    /// said; the same one again is not).
    pub(super) fn is_new(&self, refusal: &crate::report::Refusal) -> bool {
        self.refused.as_ref().is_none_or(|(_, r)| r != refusal)
    }

    /// Reads the report (the host's copy and the API's) into memory; an
    /// API's copy behind the host's (a write lost before a crash) is
    /// brought up to it first thing.
    pub(super) async fn load(
        &mut self,
        ctx: &Context,
        client: &Client,
    ) -> Result<(), report::LoadError> {
        let node = ctx.settings.node.as_str();
        let (r, behind) = self
            .published
            .load(client, &ctx.settings.names, node, &ctx.host.paths)
            .await?;
        self.report = r;
        self.copy = if behind {
            Copy::Unwritten
        } else {
            Copy::Written
        };
        Ok(())
    }

    /// Takes up the report kept on the host when it is newer than memory's
    /// (a higher `seq`): only a switch by hand (`promote-local`,
    /// `demote-local`) writes it while this watcher runs, and it says what
    /// the host now is. Sent to the API at the next decision.
    pub(super) fn adopt_host_copy(&mut self, ctx: &Context) {
        if self.copy == Copy::NotRead {
            return;
        }
        let Ok(Some(kept)) = report::read_local(&ctx.host.paths) else {
            return;
        };
        if self.report.as_ref().is_none_or(|r| kept.seq > r.seq) {
            info!(
                step = kept.step.as_str(),
                "the report kept on the host moved on (a switch by hand): taken up"
            );
            self.report = Some(kept);
            self.copy = Copy::Unwritten;
        }
    }

    /// Sends the report in memory: the host's copy first, then the API's.
    /// A refusal is said once (with the API's own words), counted, and
    /// kept for the heartbeat to carry; the report stays unwritten.
    pub(super) async fn send(&mut self, ctx: &Context, client: &Client) -> Result<(), kube::Error> {
        if let Some(r) = &self.report {
            // The host's copy first: a report lost on its way to the API is
            // still known at the next start. A copy that cannot be written
            // is said loudly; the API's copy still stands behind it.
            if let Err(e) = report::write_local(&ctx.host.paths, r) {
                warn!(error = %e, "cannot keep the report on the host");
            }
            let node = ctx.settings.node.as_str();
            let written = self
                .published
                .write(client, &ctx.settings.names, node, r)
                .await;
            if let Err(e) = written {
                if let Some(refusal) = report::refusal(&e) {
                    ctx.metrics.write_refused("report", &refusal.reason);
                    if self.is_new(&refusal) {
                        warn!(
                            object =
                                format!("ConfigMap {}/{node}", ctx.settings.names.hosts_namespace),
                            "the API refused this host's report: {refusal}"
                        );
                        // The heartbeat carries it from the next decision
                        // on, not a period later.
                        self.refusal_changed = true;
                    }
                    self.refused = Some((ctx.clock.now(), refusal));
                }
                return Err(e);
            }
            if self.refused.take().is_some() {
                info!("the API accepted this host's report again");
                self.refusal_changed = true;
            }
        }
        self.copy = Copy::Written;
        Ok(())
    }

    /// Keeps `r` as the report and writes it. The in-memory report moves on
    /// even when the write fails (it is retried first thing next time), so a
    /// step is never repeated for want of a write.
    pub(super) async fn record(
        &mut self,
        ctx: &Context,
        client: &Client,
        r: Report,
    ) -> Result<(), kube::Error> {
        self.report = Some(r);
        self.copy = Copy::Unwritten;
        self.send(ctx, client).await
    }
}

/// How the report in memory stands against the API's copy.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Copy {
    /// Not read yet: the next session reads it (the host's copy and the
    /// API's) before anything else.
    #[default]
    NotRead,
    /// The API holds what memory holds.
    Written,
    /// Memory is ahead of the API (a write that failed, or the API's copy
    /// found behind the host's): written first thing at the next decision.
    Unwritten,
}
