//! A step's host part, run in a task of its own under a budget that bounds
//! it and can cancel it, so the watcher's loop goes on watching (and can
//! take a rollback) while it runs: the host lock, the Lease read again
//! under it and the etcd work some steps begin with, all async on the
//! runtime, then the host's plan, the one sync part, in a blocking task.

use std::time::{Duration, Instant};

use clock::Clock;
use hostdecide::Step;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use protocol::{SwapId, report::Detail, report::ReportStep};
use tracing::{debug, warn};

use super::{
    chain,
    step_error::{HostLeft, PlanError, StepError},
};
use crate::config::Settings;

/// A step whose host part runs in a task of its own.
pub(super) struct Running {
    pub(super) swap: Option<SwapId>,
    pub(super) step: Step,
    /// The report's milestone when the host part started.
    pub(super) detail: Option<Detail>,
    /// When the host part started (its duration's metric).
    pub(super) started: Instant,
    pub(super) budget: host::Budget,
    pub(super) task: tokio::task::JoinHandle<Result<Option<String>, StepError>>,
}

impl Running {
    /// Whether this is `step` of `swap`.
    pub(super) fn is(&self, swap: &Option<SwapId>, step: &Step) -> bool {
        &self.swap == swap && self.step.report_step() == step.report_step()
    }

    /// Cancels the host part and gives it [`CANCEL_GRACE`] to let go;
    /// says whether it ended within it.
    pub(super) async fn cancel(self) -> bool {
        self.budget.cancel();
        tokio::time::timeout(CANCEL_GRACE, self.task).await.is_ok()
    }
}

/// The Lease, read again once a step holds the host lock: the wait for the
/// lock (up to `lock_timeout`, 60 s) can outlast the Lease that let the step
/// start, and a step taken without its Lease could cost quorum.
pub(super) struct LeaseGate {
    pub(super) leases: Api<Lease>,
    pub(super) names: protocol::Names,
    pub(super) swap: SwapId,
    /// This host's Node: the Lease must still name it for the step.
    pub(super) node: String,
    pub(super) step: ReportStep,
    pub(super) skew_margin: i64,
    pub(super) clock: Clock,
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
        })
    }
}

/// What a step reaches etcd with.
pub(super) struct EtcdAccess {
    /// The local member.
    pub(super) local: etcdview::Endpoint,
    /// This host's addresses (a learner never started has only its peer
    /// address to be known by).
    pub(super) addresses: host::addresses::LocalAddresses,
    pub(super) clock: Clock,
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

/// The end of the running step's task (pending for ever when none runs;
/// the loop only polls it when one does).
pub(super) async fn step_end(running: &mut Option<Running>) -> Result<Option<String>, StepError> {
    match running {
        Some(r) => (&mut r.task)
            .await
            .unwrap_or_else(|e| Err(StepError::Task(e.to_string()))),
        None => std::future::pending().await,
    }
}

/// The host-local part of a step, under the host lock. Returns the snapshot
/// file for a snapshot, or how it failed and what it left.
///
/// The lock, the Lease's check and the etcd work are async, here on the
/// step's task; the plan is the host's sync work and runs in one blocking
/// task (a rollback's server stop before its learner's removal is another:
/// see [`crate::learner`]).
pub(super) async fn run_host_step(
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
    // stops its server, then removes this host's learner through the voter
    // it joined (best effort: the rollback goes on; see `learner`).
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
