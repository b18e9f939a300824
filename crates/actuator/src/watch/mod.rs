//! The watcher: its own Node and the regrade Lease, each watched by name
//! (never polled), a decision on every change of either and on every resync
//! (from what the watches hold: a Lease lapses with time, not with an
//! event), and the step carried out and reported.
//!
//! The report is the watcher's memory. It is read once per run, kept in
//! memory after, and written before a step starts, at each milestone and at
//! the end, so a restarted actuator resumes a started step and never repeats
//! a settled one.
//!
//! The [`Watcher`] is composed of owned parts, one per file, each with its
//! own methods: the report in memory and its writing ([`memory`]), what the
//! watches have shown ([`seen`]), the heartbeat and the host's own checks
//! ([`heartbeat`]), and the step runner: what follows from a decision and a
//! step's host part in its own task ([`step`]). What they all read is the
//! [`context`]. Between them, as functions given the parts they need: the
//! watch streams ([`streams`]), one session over one API server
//! ([`session`]) and the decision ([`decision`]). What the decisions came
//! to is [`decisions`]'s, and how a step can end short of its end
//! [`step_error`]'s.
//!
//! This file only wires the parts: none of them takes a name from it.

mod context;
mod decision;
mod decisions;
mod heartbeat;
mod memory;
mod seen;
mod session;
mod step;
mod step_error;
mod streams;

use std::{future::Future, sync::Arc, time::Duration};

use clock::Clock;
use futures::pin_mut;
use kube::Client;
use protocol::Report;
use tracing::{info, warn};

use crate::{cluster::Candidates, config::Settings, metrics::Metrics};
use context::Context;
use heartbeat::Heartbeat;
use memory::Memory;
use seen::Seen;
use step::StepRunner;

pub use decisions::{Decided, Decisions};
pub use session::SessionEnd;
pub use step::step_bound;
pub use step_error::{HostLeft, PlanError, StepError};
pub use streams::WATCH_TIMEOUT_SECS;

/// The watcher's state, kept across sessions (API candidates).
///
/// Composed of owned parts, one per file, which this wires: each part's
/// methods are given the other parts they need.
pub struct Watcher {
    /// What every part reads: the settings, the host, the clock, the
    /// metrics and this host's addresses.
    ctx: Context,
    /// The report: the memory of steps.
    memory: Memory,
    /// What the watches have shown: the own Node and the regrade Lease.
    seen: Seen,
    /// What the heartbeat reads and when it last wrote.
    heartbeat: Heartbeat,
    /// The decisions, and the step whose host part runs now.
    steps: StepRunner,
}

impl Watcher {
    /// A watcher for the host the settings name, reading time from `clock`;
    /// a Docker host's calls block on `runtime`.
    pub fn new(settings: Settings, clock: Clock, runtime: &tokio::runtime::Handle) -> Self {
        let host = settings.host(&clock, runtime);
        Self::with_host(settings, host, clock)
    }

    /// A watcher acting on `host` (tests give one whose programs are
    /// stand-ins; a build with the `failpoint` feature one with its
    /// observer).
    pub fn with_host(settings: Settings, host: host::Host, clock: Clock) -> Self {
        Self {
            heartbeat: Heartbeat::new(&settings.etcd, &clock),
            ctx: Context {
                settings,
                host,
                server_clock: kubeaccess::server_clock::ServerClock::new(clock.clone()),
                clock,
                metrics: Arc::new(Metrics::new()),
                addresses: host::addresses::LocalAddresses::read(std::path::Path::new("/proc/net"))
                    .unwrap_or_default(),
            },
            memory: Memory::default(),
            seen: Seen::default(),
            steps: StepRunner::new(),
        }
    }

    /// Counts into `metrics` (the ones `/metrics` serves) from now on.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.ctx.metrics = metrics;
        self
    }

    /// The host's addresses the Node's InternalIP is checked against (by
    /// default those under `/proc/net` when the watcher was made).
    pub fn with_addresses(mut self, addresses: host::addresses::LocalAddresses) -> Self {
        self.ctx.addresses = addresses;
        self
    }

    /// The last report written (or read).
    pub fn report(&self) -> Option<&Report> {
        self.memory.report.as_ref()
    }

    /// The decisions this watcher has made, each counted once all it led to
    /// was sent: a caller that must know a change was decided on (a test
    /// asserting what was not sent) waits on this rather than on time.
    pub fn decisions(&self) -> tokio::sync::watch::Receiver<Decisions> {
        self.steps.decisions()
    }

    /// One session against one API server: watch the Node and the Lease,
    /// decide on each change and on each resync tick.
    pub async fn session(&mut self, client: Client) -> SessionEnd {
        session::run(
            &self.ctx,
            &mut self.memory,
            &mut self.heartbeat,
            &mut self.seen,
            &mut self.steps,
            client,
        )
        .await
    }

    /// One decision and what follows from it. An `Err` means the API failed.
    pub async fn evaluate(&mut self, client: &Client) -> Result<(), kube::Error> {
        decision::evaluate(
            &self.ctx,
            &mut self.memory,
            &mut self.heartbeat,
            &mut self.seen,
            &mut self.steps,
            client,
        )
        .await
    }

    /// Runs sessions over the candidates until `shutdown` resolves: when the
    /// API server in use fails, the next candidate is tried, and the report
    /// kept in memory means no step is repeated across the move.
    pub async fn run(
        &mut self,
        candidates: Candidates,
        shutdown: impl Future<Output = ()>,
    ) -> anyhow::Result<()> {
        pin_mut!(shutdown);
        let mut candidates = candidates.with_server_clock(self.ctx.server_clock.clone());
        let mut failures = 0u32;
        loop {
            let client = candidates.client()?;
            info!(
                api = candidates.current(),
                "watching node {}", self.ctx.settings.node
            );
            let end = tokio::select! {
                end = self.session(client) => end,
                () = &mut shutdown => SessionEnd::Shutdown,
            };
            match end {
                SessionEnd::Shutdown => {
                    // A step cut short resumes from the report after a restart.
                    self.steps.stop().await;
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
}
