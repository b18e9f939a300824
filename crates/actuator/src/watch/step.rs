//! The step runner: what follows from a decision (nothing, a wait logged, a
//! refusal reported, or a step taken), and the step's host part, run in a
//! task of its own under a budget that bounds it and can cancel it, so the
//! watcher's loop goes on watching (and can take a rollback) while it runs:
//! the host lock, the Lease read again under it and the etcd work some
//! steps begin with, all async on the runtime, then the host's plan, the
//! one sync part, in a blocking task. Once it ends, its end is concluded
//! and reported.

use std::time::{Duration, Instant};

use clock::Clock;
use hostdecide::{Decision, Step};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{Api, Client};
use protocol::{
    Phase, Report, SwapId,
    clock_offset::ClockOffset,
    names::LEASE_NAMESPACE,
    report::{Detail, ReportStep},
};
use tracing::{debug, info, warn};

use super::{
    context::{Context, chain, secs_i64},
    decisions::{Decided, Decisions},
    memory::Memory,
    step_error::{HostLeft, PlanError, StepError},
};
use crate::config::Settings;

/// The step runner: what the decision being made came to, the decisions
/// counted, and the step taken, whose host part runs in a task of its own
/// until it is concluded.
pub(super) struct StepRunner {
    /// The step whose host part runs now, in its own task.
    running: Option<Running>,
    /// The last reason to wait, as logged (logged again on a change).
    last_wait: Option<String>,
    /// What the decision being made came to (published once it is done).
    decided: Option<Decided>,
    /// The decisions made so far, for those who wait on them.
    decisions: tokio::sync::watch::Sender<Decisions>,
    /// How far the host's clock was off the API server's at the last
    /// decision: a step taken checks its Lease again with it.
    offset: Option<ClockOffset>,
}

impl StepRunner {
    /// No step running, no decision made.
    pub(super) fn new() -> Self {
        Self {
            running: None,
            last_wait: None,
            decided: None,
            decisions: tokio::sync::watch::Sender::new(Decisions::default()),
            offset: None,
        }
    }

    /// Whether a step's host part runs now.
    pub(super) fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// The decisions made, each counted once all it led to was sent.
    pub(super) fn decisions(&self) -> tokio::sync::watch::Receiver<Decisions> {
        self.decisions.subscribe()
    }

    /// A decision starts: it has come to nothing yet (a failed request or
    /// a Node not seen yet cuts it short before it decides).
    pub(super) fn deciding(&mut self) {
        self.decided = None;
    }

    /// The decision is done: counted, with what it came to.
    pub(super) fn count_decision(&mut self) {
        let last = self.decided;
        self.decisions.send_modify(|d| {
            d.made += 1;
            d.last = last;
        });
    }

    /// Cancels the running step's host part, if any (a step cut short
    /// resumes from the report after a restart).
    pub(super) async fn stop(&mut self) {
        if let Some(r) = self.running.take() {
            r.cancel().await;
        }
    }

    /// The end of the running step's task (pending for ever when none
    /// runs; the loop only polls it when one does).
    pub(super) async fn end(&mut self) -> Result<Option<String>, StepError> {
        match &mut self.running {
            Some(r) => (&mut r.task)
                .await
                .unwrap_or_else(|e| Err(StepError::Task(e.to_string()))),
            None => std::future::pending().await,
        }
    }

    /// What follows from `decision`: nothing, a wait logged, a refusal
    /// reported, or a step taken (a running one kept, or cancelled for a
    /// newer one). An `Err` means the API failed.
    pub(super) async fn follow(
        &mut self,
        ctx: &Context,
        memory: &mut Memory,
        client: &Client,
        decision: Decision,
        offset: Option<ClockOffset>,
    ) -> Result<(), kube::Error> {
        // One line per decision at debug level: what a resync or a watch
        // event led to (no request is made for it).
        let decided = Decided::of(&decision);
        debug!(decision = decided.as_str(), "decided");
        self.decided = Some(decided);
        if let Some(running) = &self.running {
            match &decision {
                Decision::Take { swap, step, .. } if running.is(swap, step) => return Ok(()),
                Decision::Take { swap, step, .. } => {
                    // A newer step (a rollback of the promotion that waits for
                    // its server) is taken at once: the running one is
                    // cancelled, and it leaves a state the newer one handles.
                    warn!(
                        running = running.step.report_step().as_str(),
                        next = step.report_step().as_str(),
                        swap = swap.as_ref().map(SwapId::as_str),
                        "cancelling the running step for the next one"
                    );
                    if let Some(r) = self.running.take() {
                        ctx.metrics
                            .step_ended(r.step.report_step().as_str(), "cancelled");
                        if !r.cancel().await {
                            warn!(
                                "the cancelled step has not ended yet; the next one waits for the host lock"
                            );
                        }
                    }
                }
                // Anything else waits until the running step has ended: its
                // end is decided again then.
                _ => return Ok(()),
            }
        }
        match decision {
            Decision::Nothing => {
                self.last_wait = None;
                Ok(())
            }
            Decision::Wait { reason } => {
                if self.last_wait.as_deref() != Some(&reason) {
                    info!("waiting: {reason}");
                    self.last_wait = Some(reason);
                }
                Ok(())
            }
            Decision::Refuse { swap, step, reason } => {
                warn!(
                    swap = swap.as_ref().map(SwapId::as_str),
                    step = step.as_str(),
                    "refused: {reason}"
                );
                ctx.metrics.step_ended(step.as_str(), "refused");
                let r = Report::next(
                    memory.report.as_ref(),
                    swap,
                    step,
                    Phase::Refused,
                    ctx.clock.unix_secs(),
                )
                .with_reason(reason);
                memory.record(ctx, client, r).await
            }
            Decision::Take { swap, step, resume } => {
                self.offset = offset;
                self.take(ctx, memory, client, swap, step, resume).await
            }
        }
    }

    /// Starts a step: its start reported (unless resumed), then its host
    /// part spawned in a task of its own; [`StepRunner::conclude`] follows.
    async fn take(
        &mut self,
        ctx: &Context,
        memory: &mut Memory,
        client: &Client,
        swap: Option<SwapId>,
        step: Step,
        resume: bool,
    ) -> Result<(), kube::Error> {
        let rstep = step.report_step();
        if !resume {
            info!(
                swap = swap.as_ref().map(SwapId::as_str),
                step = rstep.as_str(),
                "step started"
            );
            // The start is written before anything changes: a step whose
            // start cannot be reported is not taken.
            let r = Report::next(
                memory.report.as_ref(),
                swap.clone(),
                rstep,
                Phase::Started,
                ctx.clock.unix_secs(),
            );
            memory.record(ctx, client, r).await?;
        }
        let budget = host::Budget::within(&ctx.clock, step_bound(&ctx.settings, &step));
        let host = ctx.host.clone().with_budget(budget.clone());
        let lock_timeout = ctx.settings.lock_timeout;
        let detail = memory.report.as_ref().and_then(|r| r.detail);
        // Every step but a finish needs the Lease (a finish needs none once
        // the member is gone, which its decision checked on the disk).
        let gate = match (&step, &swap) {
            (Step::Finish, _) | (_, None) => None,
            (_, Some(swap)) => Some(LeaseGate {
                leases: Api::namespaced(client.clone(), LEASE_NAMESPACE),
                names: ctx.settings.names.clone(),
                swap: swap.clone(),
                node: ctx.settings.node.to_string(),
                step: rstep,
                skew_margin: secs_i64(ctx.settings.skew_margin),
                clock: ctx.clock.clone(),
                offset: self.offset,
            }),
        };
        // A step-down first hands etcd's leadership over, through the
        // local member; a rollback removes its own learner.
        let etcd = matches!(step, Step::StepDown | Step::Rollback).then(|| EtcdAccess {
            local: ctx.settings.etcd.clone(),
            addresses: ctx.addresses.clone(),
            clock: ctx.clock.clone(),
        });
        let task = tokio::spawn(run_host_step(
            host,
            step.clone(),
            swap.clone(),
            lock_timeout,
            gate,
            etcd,
        ));
        self.running = Some(Running {
            swap,
            step,
            detail,
            started: ctx.clock.now(),
            budget,
            task,
        });
        Ok(())
    }
    /// What follows the end of the running step's host part (`outcome`,
    /// from [`StepRunner::end`]): its milestones and its end reported, or
    /// its failure with the state it left. `node` is the own Node as last
    /// seen.
    pub(super) async fn conclude(
        &mut self,
        ctx: &Context,
        memory: &mut Memory,
        node: Option<&Node>,
        client: &Client,
        outcome: Result<Option<String>, StepError>,
    ) -> Result<(), kube::Error> {
        let Some(running) = self.running.take() else {
            return Ok(());
        };
        let Running {
            swap,
            step,
            detail,
            started,
            ..
        } = running;
        let rstep = step.report_step();
        ctx.metrics
            .step_took(rstep.as_str(), ctx.clock.since(started));
        ctx.metrics.step_ended(
            rstep.as_str(),
            match &outcome {
                Ok(_) => "done",
                Err(e) => e.outcome(),
            },
        );
        let host_outcome = match outcome {
            Ok(o) => o,
            Err(e) if e.is_stopped() => {
                // Nothing changed and nothing is reported: the report still
                // says `started`, and the next decision waits for the Lease.
                warn!(step = rstep.as_str(), "step stopped, nothing changed: {e}");
                return Ok(());
            }
            Err(e) => {
                let reason = e.to_string();
                warn!(step = rstep.as_str(), "step failed: {reason}");
                let r = Report::next(
                    memory.report.as_ref(),
                    swap,
                    rstep,
                    Phase::Failed,
                    ctx.clock.unix_secs(),
                )
                .with_reason(reason);
                return memory.record(ctx, client, r).await;
            }
        };
        // k3s promotes a caught-up learner; the Node's EtcdIsVoter (as it is
        // now, not when the step started) says so.
        let view = node
            .map(|n| kubeview::node_facts(&ctx.settings.names, n))
            .unwrap_or_default();
        for (phase, milestone) in
            hostdecide::milestones::after_host_part(&step, detail, view.etcd_is_voter)
        {
            let mut r = Report::next(
                memory.report.as_ref(),
                swap.clone(),
                rstep,
                phase,
                ctx.clock.unix_secs(),
            )
            .with_detail(milestone);
            if milestone == Detail::Snapshot {
                r.snapshot_file = host_outcome.clone();
            }
            memory.record(ctx, client, r).await?;
        }
        let report = memory.report.as_ref();
        match report.map(|r| (r.phase, r.detail)) {
            Some((Phase::Done, Some(Detail::Voter))) => info!("promoted: a voter"),
            Some((Phase::Done, Some(Detail::EtcdOnly))) => {
                info!("stepped down to etcd-only; waiting for the member's removal")
            }
            Some((Phase::Done, Some(Detail::AgentReady))) => {
                info!(step = rstep.as_str(), "the host runs as an agent")
            }
            Some((Phase::Done, Some(Detail::Snapshot))) => info!(
                file = report.and_then(|r| r.snapshot_file.as_deref()),
                "snapshot taken"
            ),
            _ => {}
        }
        Ok(())
    }
}

/// A step whose host part runs in a task of its own.
struct Running {
    swap: Option<SwapId>,
    step: Step,
    /// The report's milestone when the host part started.
    detail: Option<Detail>,
    /// When the host part started (its duration's metric).
    started: Instant,
    budget: host::Budget,
    task: tokio::task::JoinHandle<Result<Option<String>, StepError>>,
}

impl Running {
    /// Whether this is `step` of `swap`.
    fn is(&self, swap: &Option<SwapId>, step: &Step) -> bool {
        &self.swap == swap && self.step.report_step() == step.report_step()
    }

    /// Cancels the host part and gives it [`CANCEL_GRACE`] to let go;
    /// says whether it ended within it.
    async fn cancel(self) -> bool {
        self.budget.cancel();
        tokio::time::timeout(CANCEL_GRACE, self.task).await.is_ok()
    }
}

/// The Lease, read again once a step holds the host lock: the wait for the
/// lock (up to `lock_timeout`, 60 s) can outlast the Lease that let the step
/// start, and a step taken without its Lease could cost quorum.
struct LeaseGate {
    leases: Api<Lease>,
    names: protocol::Names,
    swap: SwapId,
    /// This host's Node: the Lease must still name it for the step.
    node: String,
    step: ReportStep,
    skew_margin: i64,
    clock: Clock,
    /// How far the host's clock was off the API server's when the step
    /// was taken.
    offset: Option<ClockOffset>,
}

impl LeaseGate {
    /// Whether the Lease is still held for the step's swap: one read,
    /// bounded by the client's timeouts ([`crate::cluster`]).
    async fn check(&self) -> Result<(), String> {
        let lease = self
            .leases
            .get_opt(&self.names.lease_name)
            .await
            .map_err(|e| {
                format!(
                    "the regrade Lease could not be read again once the host lock was taken: {}",
                    chain(&e)
                )
            })?;
        let facts = lease.map(|l| kubeview::lease_facts(&self.names, &l));
        hostdecide::decide::lease_holds(&hostdecide::decide::LeaseCheck {
            lease: facts.as_ref(),
            identity: &self.names.controller_identity,
            swap: &self.swap,
            node: &self.node,
            step: self.step,
            now: self.clock.unix_secs(),
            skew_margin: self.skew_margin,
            clock: self.offset,
        })
    }
}

/// What a step reaches etcd with.
struct EtcdAccess {
    /// The local member.
    local: etcdaccess::Endpoint,
    /// This host's addresses (a learner never started has only its peer
    /// address to be known by).
    addresses: host::addresses::LocalAddresses,
    clock: Clock,
}

/// How long a cancelled step is given to let go (its programs are killed
/// and its waits wake at once; this covers a machine too loaded to run them).
/// Past it the next step goes on: it waits for the host lock, which the
/// cancelled one still holds, so the two never act at once.
const CANCEL_GRACE: Duration = Duration::from_secs(30);

/// The bound of a step's host part: the host lock's wait, then every wait
/// the step may make, and its `systemctl` calls. Past it the step is
/// cancelled, so the host lock is never held longer.
///
/// Saturating: the settings are bounded when read (a week each), but a sum
/// that overflowed would panic the watcher; at worst it is `Duration::MAX`,
/// which [`host::Budget::within`] takes as no deadline past each wait's own.
pub fn step_bound(s: &Settings, step: &Step) -> Duration {
    let sum = |ds: &[Duration]| ds.iter().fold(Duration::ZERO, |a, d| a.saturating_add(*d));
    let calls = s.systemctl_timeout.saturating_mul(12);
    // A Docker host's stop is one call that returns once the container
    // stopped, its grace on top of the call's bound: at most two a step.
    let graces = s
        .docker
        .as_ref()
        .map_or(Duration::ZERO, |d| d.stop_grace.saturating_mul(2));
    let waits = match step {
        Step::Promote { .. } | Step::Rollback | Step::Finish => {
            sum(&[s.stop_wait.saturating_mul(2), s.start_wait])
        }
        Step::StepDown => sum(&[s.stop_wait, s.start_wait, s.etcd_wait]),
        Step::Snapshot => s.snapshot_timeout,
    };
    sum(&[s.lock_timeout, calls, graces, waits])
}

/// The host-local part of a step, under the host lock. Returns the snapshot
/// file for a snapshot, or how it failed and what it left.
///
/// The lock, the Lease's check and the etcd work are async, here on the
/// step's task; the plan is the host's sync work and runs in one blocking
/// task (a rollback's server stop before its learner's removal is another:
/// see [`crate::learner`]).
async fn run_host_step(
    host: host::Host,
    step: Step,
    swap: Option<SwapId>,
    lock_timeout: Duration,
    gate: Option<LeaseGate>,
    etcd: Option<EtcdAccess>,
) -> Result<Option<String>, StepError> {
    let lock = host
        .lock_async(lock_timeout)
        .await
        .map_err(|e| StepError::Lock(Box::new(e)))?;
    // The Lease again, now that nothing else can act on the host: it let
    // the step start, but may have lapsed while the step waited.
    if let Some(gate) = &gate
        && let Err(why) = gate.check().await
    {
        drop(lock);
        return Err(StepError::LeaseLapsed(why));
    }
    // Under the lock and the Lease, before any change: a step-down hands
    // leadership over (a failure changes nothing, and says so); a rollback
    // is refused if etcd promoted this host's member since the controller
    // looked and its stop would leave no healthy quorum, then stops its
    // server and removes this host's learner through the voter it joined
    // (best effort: the rollback goes on; see `learner`).
    let mut name_server = None;
    if let Some(e) = &etcd {
        match step {
            Step::StepDown if host.role().ok().flatten() == Some(protocol::Role::Server) => {
                let before = match crate::leadership::hand_over(&e.local, &e.clock).await {
                    Ok(_) => crate::join::for_step_down(&host, &e.local, &e.clock).await,
                    Err(why) => Err(why),
                };
                match before {
                    Ok(join) => name_server = join,
                    Err(why) => {
                        drop(lock);
                        let left = blocking(move || HostLeft::read(&host)).await?;
                        return Err(StepError::BeforeChange { why, left });
                    }
                }
            }
            Step::Rollback => {
                if let Err(why) = crate::learner::may_stop(&e.local, e.clock.unix_secs()).await {
                    drop(lock);
                    let left = blocking(move || HostLeft::read(&host)).await?;
                    return Err(StepError::BeforeChange { why, left });
                }
                if let Some(join) = host.join_server() {
                    let ep = crate::learner::endpoint_of(&e.local, &join);
                    crate::learner::remove_own(&ep, &host, &e.addresses).await;
                }
            }
            _ => {}
        }
    }
    blocking(move || {
        let outcome = host_step(&host, &step, swap.as_ref(), name_server.as_ref());
        // The lock goes before the state is read, so a step that replaces
        // this one (a rollback) is not kept waiting by that read.
        drop(lock);
        outcome.map_err(|source| StepError::Plan {
            source: Box::new(source),
            left: HostLeft::read(&host),
        })
    })
    .await?
}

/// Runs the host's sync work `f` in a blocking task (its programs and
/// waits would hold up the runtime's one worker, and a Docker host's calls
/// block on the runtime's handle, which panics on a task); a task that
/// panicked is a failed step.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, StepError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StepError::Task(e.to_string()))
}

/// The host's plan for `step`, applied (a snapshot taken and named); a
/// step-down names `name_server` in `server:` when given.
fn host_step(
    host: &host::Host,
    step: &Step,
    swap: Option<&SwapId>,
    name_server: Option<&protocol::JoinUrl>,
) -> Result<Option<String>, PlanError> {
    let plan = match step {
        Step::Promote { join, .. } => host.plan_promote(join),
        // A planted defect (a testing aid of the failpoint's build).
        #[cfg(feature = "failpoint")]
        Step::StepDown
            if crate::plant::planted(&host.paths) == Some(plants::Plant::FinishAtStepDown) =>
        {
            host.plan_finish()
        }
        Step::StepDown => host.plan_step_down(name_server),
        Step::Rollback => host.plan_rollback(),
        Step::Finish => host.plan_finish(),
        Step::Snapshot => {
            let swap = swap.ok_or(PlanError::NoSwap)?;
            let file = host.snapshot(swap)?;
            // The snapshot is taken: pruning the older ones is
            // housekeeping, and its failure fails nothing.
            match host.prune_snapshots() {
                Ok(Some(left)) if left > host.snapshot_retention as usize => warn!(
                    "k3s etcd-snapshot prune left {left} swap snapshots, more than the {} kept (a k3s that prunes by another rule?)",
                    host.snapshot_retention
                ),
                Ok(_) => {}
                Err(e) => warn!("pruning the older swap snapshots: {e}; every snapshot is kept"),
            }
            return Ok(Some(file));
        }
    }?;
    for change in &plan {
        debug!("{}", host.show(change));
    }
    host.apply(&plan)?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steps_bound_saturates_rather_than_overflowing_on_huge_settings() {
        let file: crate::config::FileConfig = toml::from_str("").unwrap();
        let mut s = Settings::resolve(
            file,
            crate::config::Overrides {
                node: Some("n".into()),
                ..Default::default()
            },
        )
        .unwrap();
        for d in [
            &mut s.lock_timeout,
            &mut s.systemctl_timeout,
            &mut s.stop_wait,
            &mut s.start_wait,
            &mut s.etcd_wait,
            &mut s.snapshot_timeout,
        ] {
            *d = Duration::MAX;
        }
        for step in [Step::Rollback, Step::StepDown, Step::Snapshot, Step::Finish] {
            assert_eq!(step_bound(&s, &step), Duration::MAX);
        }
    }

    #[test]
    fn a_docker_hosts_step_is_given_two_stops_graces_more() {
        let file: crate::config::FileConfig = toml::from_str("").unwrap();
        let o = || crate::config::Overrides {
            node: Some("n".into()),
            ..Default::default()
        };
        let native = Settings::resolve(file, o()).unwrap();
        let docker: crate::config::FileConfig =
            toml::from_str("[docker]\nstop_grace_secs = 45").unwrap();
        let docker = Settings::resolve(docker, o()).unwrap();
        assert_eq!(
            step_bound(&docker, &Step::Finish),
            step_bound(&native, &Step::Finish) + Duration::from_secs(90)
        );
    }
}
