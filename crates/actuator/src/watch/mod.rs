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
//! One file per concept: the report in memory ([`memory`]), the watch
//! streams ([`streams`]), what they have shown ([`seen`]), one session over
//! one API server ([`session`]), the heartbeat and the host's own checks
//! ([`heartbeat`]), the decision and what follows from it ([`decision`]),
//! a step's host part in its own task ([`step`]), and how it can end short
//! of its end ([`step_error`]).

mod decision;
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
use protocol::Report;
use tracing::{info, warn};

use crate::{cluster::Candidates, config::Settings, metrics::Metrics};
use memory::{Copy, Memory};
use seen::Seen;

pub use step::step_bound;
pub use step_error::{HostLeft, PlanError, StepError};
pub use streams::WATCH_TIMEOUT_SECS;

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

/// What a decision was ([`hostdecide::Decision`]'s kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// Nothing to do.
    Nothing,
    /// A step waits (for its Lease, a server, ...).
    Wait,
    /// A step refused.
    Refuse,
    /// A step taken (or its running host part kept).
    Take,
}

impl Decided {
    /// The kind of `d`.
    pub fn of(d: &hostdecide::Decision) -> Self {
        match d {
            hostdecide::Decision::Nothing => Decided::Nothing,
            hostdecide::Decision::Wait { .. } => Decided::Wait,
            hostdecide::Decision::Refuse { .. } => Decided::Refuse,
            hostdecide::Decision::Take { .. } => Decided::Take,
        }
    }

    /// Its name in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Decided::Nothing => "nothing",
            Decided::Wait => "wait",
            Decided::Refuse => "refuse",
            Decided::Take => "take",
        }
    }
}

/// The decisions a watcher has made so far ([`Watcher::decisions`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decisions {
    /// How many: each counted once all it led to was sent.
    pub made: u64,
    /// What the last one was (none: it was cut short before deciding, by
    /// a failed request or a Node not seen yet).
    pub last: Option<Decided>,
}

/// What every part of the watcher reads and none changes.
struct Context {
    settings: Settings,
    host: host::Host,
    /// The one clock every reading of time goes through.
    clock: Clock,
    metrics: Arc<Metrics>,
    /// This host's addresses, read at start.
    addresses: host::addresses::LocalAddresses,
}

/// The watcher's state, kept across sessions (API candidates).
pub struct Watcher {
    ctx: Context,
    /// What the watches have shown: the own Node and the regrade Lease.
    seen: Seen,
    memory: Memory,
    /// The last reason to wait, as logged (logged again on a change).
    last_wait: Option<String>,
    /// The step whose host part runs now, in its own task.
    running: Option<step::Running>,
    /// What the heartbeat reads and when it last wrote.
    heartbeat: heartbeat::Heartbeat,
    /// What the decision being made came to (published once it is done).
    decided: Option<Decided>,
    /// The decisions made so far (see [`Watcher::decisions`]).
    decisions: tokio::sync::watch::Sender<Decisions>,
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
            heartbeat: heartbeat::Heartbeat::new(&settings.etcd, &clock),
            ctx: Context {
                settings,
                host,
                clock,
                metrics: Arc::new(Metrics::new()),
                addresses: host::addresses::LocalAddresses::read(std::path::Path::new("/proc/net"))
                    .unwrap_or_default(),
            },
            seen: Seen::default(),
            memory: Memory::default(),
            last_wait: None,
            running: None,
            decided: None,
            decisions: tokio::sync::watch::Sender::new(Decisions::default()),
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

    /// Whether a step's host part runs now.
    pub fn step_running(&self) -> bool {
        self.running.is_some()
    }

    /// The last report written (or read).
    pub fn report(&self) -> Option<&Report> {
        self.memory.report.as_ref()
    }

    /// The decisions this watcher has made, each counted once all it led to
    /// was sent: a caller that must know a change was decided on (a test
    /// asserting what was not sent) waits on this rather than on time.
    pub fn decisions(&self) -> tokio::sync::watch::Receiver<Decisions> {
        self.decisions.subscribe()
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
                "watching node {}", self.ctx.settings.node
            );
            let end = tokio::select! {
                end = self.session(client) => end,
                () = &mut shutdown => SessionEnd::Shutdown,
            };
            match end {
                SessionEnd::Shutdown => {
                    // A step cut short resumes from the report after a restart.
                    if let Some(r) = self.running.take() {
                        r.cancel().await;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_seconds_saturate_rather_than_wrapping_negative() {
        assert_eq!(secs_i64(Duration::MAX), i64::MAX);
        assert_eq!(secs_i64(Duration::from_secs(5)), 5);
    }
}
