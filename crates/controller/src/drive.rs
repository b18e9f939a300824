//! The loop that drives a swap: read the cluster, ask the pure core for the
//! next action, carry it out, read again. And `run`, which picks swaps by
//! policy and drives them one at a time.
//!
//! The only state kept here is which swap this process took the Lease for
//! ([`SwapState::taken`]): a controller killed anywhere in this loop and
//! started again finds the swap's progress on the Lease, the Nodes and the
//! hosts' reports, and goes on (or cleans up) from there.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use kube::Client;
use protocol::{
    NodeName, SwapId,
    controller::{self, Action, Outcome, RunDecision, StopKind, SwapState},
};
use serde_json::json;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::{
    act::{ActError, Actor},
    config::Settings,
    observe,
    output::Printer,
};

/// How long the API may fail in a row before the controller gives up (it
/// keeps its Lease while it retries; a swap given up on resumes when the
/// controller is run again).
const API_PATIENCE: Duration = Duration::from_secs(300);

/// How a swap ended for this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Done.
    Done {
        /// Something left for the operator.
        warning: Option<String>,
    },
    /// Refused by a gate before anything was written.
    Refused(String),
    /// Wound down to the cluster as it was.
    WoundDown {
        /// Refused or failed.
        kind: StopKind,
        /// Why.
        reason: String,
    },
    /// Stopped part-way.
    Stopped {
        /// The full message: why, the state left, what next.
        message: String,
    },
    /// The Lease was taken by someone else; nothing more was written.
    Lost(String),
    /// Interrupted by a signal; the Lease lapses and a new run resumes.
    Interrupted,
}

impl Ending {
    /// The exit code: 0 done, 1 refused by a gate, 2 failed.
    pub fn exit_code(&self) -> u8 {
        match self {
            Ending::Done { .. } => 0,
            Ending::Refused(_)
            | Ending::WoundDown {
                kind: StopKind::Refused,
                ..
            } => 1,
            _ => 2,
        }
    }

    /// The result word and message printed last.
    pub fn summary(&self) -> (&'static str, String) {
        match self {
            Ending::Done { warning: None } => ("done", "the swap is complete".into()),
            Ending::Done { warning: Some(w) } => ("done", format!("the swap is complete; {w}")),
            Ending::Refused(why) => ("refused", format!("nothing was changed: {why}")),
            Ending::WoundDown { kind, reason } => (
                match kind {
                    StopKind::Refused => "refused",
                    StopKind::Failed => "failed",
                },
                format!("the swap was wound down and the cluster is as it was: {reason}"),
            ),
            Ending::Stopped { message } => ("stopped", message.clone()),
            Ending::Lost(why) => (
                "lost",
                format!("{why}; this controller wrote nothing more (see `fleet-role status`)"),
            ),
            Ending::Interrupted => (
                "interrupted",
                "the swap is left as it stands; its Lease lapses and running the same swap again resumes it".into(),
            ),
        }
    }
}

/// One controller process.
pub struct Driver {
    client: Client,
    settings: Settings,
    actor: Actor,
    instance: String,
    shutdown: watch::Receiver<bool>,
}

/// A new swap id: `swap-YYYYMMDD-HHMMSS-XXXX` (a DNS label, and a safe
/// snapshot file name).
pub fn new_swap_id() -> SwapId {
    let now = k8s_openapi::jiff::Timestamp::now();
    let id = format!("swap-{}-{}", now.strftime("%Y%m%d-%H%M%S"), random_hex(4));
    SwapId::parse(&id).expect("a generated swap id is valid")
}

/// A new controller instance id (tells two processes of one identity apart).
pub fn new_instance(identity: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    controller::one_line(&format!(
        "{identity}@{host}-{}-{}",
        std::process::id(),
        random_hex(6)
    ))
}

fn random_hex(len: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{:016x}", h.finish())[..len].to_string()
}

impl Driver {
    /// A controller process over `client`.
    pub fn new(client: Client, settings: Settings, shutdown: watch::Receiver<bool>) -> Self {
        let instance = new_instance(&settings.names().controller_identity);
        Self {
            actor: Actor::new(client.clone(), settings.clone()),
            client,
            settings,
            instance,
            shutdown,
        }
    }

    /// The actor (for `pause` and `resume`).
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// Reads the cluster.
    pub async fn observe(&self) -> anyhow::Result<observe::Observed> {
        observe::observe(&self.client, &self.settings)
            .await
            .context("reading the cluster")
    }

    fn stopping(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Sleeps one poll interval, or less if a signal arrives.
    async fn pause_a_moment(&mut self) {
        let poll = self.settings.poll;
        let _ = tokio::time::timeout(poll, self.shutdown.changed()).await;
    }

    /// Drives the swap of `out` for `incoming` to its end.
    pub async fn swap(
        &mut self,
        out: NodeName,
        incoming: NodeName,
        printer: &mut Printer,
    ) -> anyhow::Result<Ending> {
        let mut state = SwapState {
            out,
            incoming,
            candidate: new_swap_id(),
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
                return Ok(Ending::Interrupted);
            }
            let obs = match self.observe().await {
                Ok(o) => o,
                Err(e) => {
                    self.api_trouble(&mut failing_since, e)?;
                    self.pause_a_moment().await;
                    continue;
                }
            };
            let action = controller::next_action(&obs.view, &state);
            if let Some(m) = milestone(&obs, &action) {
                printer.line(&m, json!({"milestone": m}));
            }
            printer.action(&action);
            match &action {
                Action::Wait { .. } | Action::Paused { .. } => {
                    failing_since = None;
                    self.pause_a_moment().await;
                    continue;
                }
                Action::WaitForLease { .. } => {
                    let since = *waiting_for_lease.get_or_insert_with(Instant::now);
                    if since.elapsed() > lease_patience {
                        bail!(
                            "the regrade Lease stayed held by another controller process for {} s: it is alive; see `fleet-role status`",
                            lease_patience.as_secs()
                        );
                    }
                    self.pause_a_moment().await;
                    continue;
                }
                Action::Refuse { gates } => {
                    return Ok(Ending::Refused(controller::failures(gates)));
                }
                Action::Lost { reason } => return Ok(Ending::Lost(reason.clone())),
                _ => {}
            }
            match self.write(&obs, &action, &mut state).await {
                Ok(()) => failing_since = None,
                Err(ActError::Lost(why)) => {
                    printer.line(
                        &format!("lost the regrade Lease: {why}; writing nothing more"),
                        json!({}),
                    );
                    return Ok(Ending::Lost(why));
                }
                Err(ActError::Conflict) => {
                    info!("the regrade Lease changed since it was read; reading again");
                    continue;
                }
                Err(e) => {
                    self.api_trouble(&mut failing_since, anyhow::Error::new(e))?;
                    self.pause_a_moment().await;
                    continue;
                }
            }
            self.actor
                .events(&obs, &action, state.taken.as_ref().map(SwapId::as_str))
                .await;
            match action {
                Action::ReleaseLease {
                    outcome: Outcome::Done { warning },
                } => return Ok(Ending::Done { warning }),
                Action::ReleaseLease {
                    outcome: Outcome::WoundDown { kind, reason },
                } => {
                    return Ok(Ending::WoundDown {
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

    async fn write(
        &self,
        obs: &observe::Observed,
        action: &Action,
        state: &mut SwapState,
    ) -> Result<(), ActError> {
        if action.node().is_some() {
            self.actor.recheck_lease(state).await?;
            self.actor.node_write(obs, action).await
        } else {
            self.actor.lease_write(obs, action, state).await
        }
    }

    fn api_trouble(
        &self,
        failing_since: &mut Option<Instant>,
        e: anyhow::Error,
    ) -> anyhow::Result<()> {
        let since = *failing_since.get_or_insert_with(Instant::now);
        if since.elapsed() > API_PATIENCE {
            return Err(e.context(format!(
                "the API failed for over {} s; run the same command again to resume",
                API_PATIENCE.as_secs()
            )));
        }
        warn!("{e:#}; retrying");
        Ok(())
    }

    /// `run`: swaps by policy, one at a time, until a signal.
    pub async fn run(&mut self, printer: &mut Printer) -> anyhow::Result<()> {
        let mut last_idle: Option<String> = None;
        let mut failing_since: Option<Instant> = None;
        let backoff = Duration::from_secs(self.settings.core.settle.max(1).unsigned_abs());
        loop {
            if self.stopping() {
                printer.line("stopping on a signal", json!({}));
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
            match controller::run_decision(&obs.view) {
                RunDecision::Idle { why } => {
                    if last_idle.as_deref() != Some(why.as_str()) {
                        printer.line(&format!("idle: {why}"), json!({"idle": why}));
                        last_idle = Some(why);
                    }
                    self.pause_a_moment().await;
                }
                RunDecision::Swap { out, incoming, why } => {
                    last_idle = None;
                    printer.line(
                        &format!("swap out {out}, in {incoming}: {why}"),
                        json!({"out": out, "in": incoming, "why": why}),
                    );
                    let ending = self.swap(out, incoming, printer).await?;
                    let (word, message) = ending.summary();
                    printer.result(word, ending.exit_code(), &message);
                    if ending == Ending::Interrupted {
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
        controller::SwapStep::Snapshot => {
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
                controller::one_line(file)
            ))
        }
        controller::SwapStep::Promote => {
            let i = node(&l.swap_in)?;
            controller::is_healthy_voter(i).then(|| format!("{} is a voter", i.name))
        }
        controller::SwapStep::Removal => {
            let o = node(&l.swap_out)?;
            let mut m = o
                .member_gone()
                .then(|| format!("k3s removed {}'s etcd member", o.name))?;
            if controller::finished(o) {
                m.push_str(&format!(
                    "; {} runs as an agent: Ready, node Lease renewed since its finish began",
                    o.name
                ));
            }
            Some(m)
        }
        controller::SwapStep::Finish => {
            let o = node(&l.swap_out)?;
            controller::finished(o).then(|| {
                format!(
                    "{} runs as an agent: Ready, node Lease renewed since its finish began",
                    o.name
                )
            })
        }
        _ => None,
    }
}
