//! The decision glue: what the watches hold and the host is, handed to
//! [`hostdecide::decide`], and what follows from its answer: nothing, a wait
//! logged, a refusal reported, or a step taken and, once its host part
//! ends, concluded. Every report goes through [`Memory::record`](super::Memory::record).

use hostdecide::{Decision, HostState, Observation, Step, decide, decide::JoinTarget};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{Api, Client};
use protocol::{
    NodeName, Phase, Report, SwapId,
    names::LEASE_NAMESPACE,
    report::{Detail, ReportStep},
    text::one_line,
};
use tracing::{debug, info, warn};

use super::{
    Copy, Decided, Watcher, secs_i64,
    step::{EtcdAccess, LeaseGate, Running, run_host_step, step_bound},
    step_error::StepError,
};
use crate::report;

impl Watcher {
    /// One decision and what follows from it. An `Err` means the API failed.
    pub async fn evaluate(&mut self, client: &Client) -> Result<(), kube::Error> {
        // A report the API refused is sent again once a heartbeat period
        // has passed; a refusal does not keep the heartbeat from beating.
        let again = self
            .memory
            .refused
            .as_ref()
            .is_none_or(|(at, _)| self.ctx.clock.since(*at) >= self.ctx.settings.heartbeat);
        if self.memory.copy == Copy::Unwritten
            && again
            && let Err(e) = self.memory.send(&self.ctx, client).await
            && report::refusal(&e).is_none()
        {
            return Err(e);
        }
        self.heartbeat
            .beat(&self.ctx, &mut self.memory, client)
            .await?;
        let Some(node) = self.seen.node.clone() else {
            return Ok(());
        };
        let names = self.ctx.settings.names.clone();
        let view = kubeview::node_facts(&names, &node);
        let join = match (
            view.marks.step_kind(),
            view.marks.join_node.as_deref().map(NodeName::parse),
        ) {
            (Some(protocol::StepKind::Promote), Some(Ok(name))) => {
                let nodes: Api<Node> = Api::all(client.clone());
                kubeview::join_target(nodes.get_opt(name.as_str()).await?.as_ref())
            }
            _ => JoinTarget::NotLooked,
        };
        self.heartbeat.read_membership(&self.ctx).await;
        let mut decision = self.decision(&view, &join);
        if matches!(decision, Decision::Refuse { .. }) {
            // A refusal is written once and stands, and the Lease's watch may
            // not have shown yet the Lease the controller took before it
            // asked for the step (the two watches deliver in no set order):
            // a refusal is decided on the Lease as the API holds it now.
            let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
            let lease = leases.get_opt(&names.lease_name).await?;
            self.seen.lease_seen(&names, lease);
            decision = self.decision(&view, &join);
        }
        // A demotion whose agent could not start is refused before it
        // changes anything (resumed steps have changed the host already and
        // go on).
        if let Decision::Take {
            swap,
            step: step @ (Step::StepDown | Step::Finish),
            resume: false,
        } = &decision
        {
            let reasons = self.heartbeat.ineligibility(&self.ctx, client).await?;
            if !reasons.is_empty() {
                // Each reason one line (they hold what the host's config
                // files hold), by the one rule.
                let reasons: Vec<String> = reasons.iter().map(|r| one_line(r)).collect();
                decision = Decision::Refuse {
                    swap: swap.clone(),
                    step: step.report_step(),
                    reason: format!(
                        "this host is not eligible for demotion, its agent could not start: {}",
                        reasons.join("; ")
                    ),
                };
            }
        }
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
                        self.ctx
                            .metrics
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
                self.ctx.metrics.step_ended(step.as_str(), "refused");
                let r = Report::next(
                    self.memory.report.as_ref(),
                    swap,
                    step,
                    Phase::Refused,
                    self.ctx.clock.unix_secs(),
                )
                .with_reason(reason);
                self.memory.record(&self.ctx, client, r).await
            }
            Decision::Take { swap, step, resume } => self.take(client, swap, step, resume).await,
        }
    }

    /// The decision on the Node's `view` and the Lease as held, with the
    /// host as it is now.
    fn decision(&self, view: &protocol::NodeFacts, join: &JoinTarget) -> Decision {
        // A role file that exists but cannot be read, or names no valid role,
        // is not "no role": every switch is refused until it is fixed.
        let role_file = host::role::read(&self.ctx.host.paths);
        let role_problem = role_file.as_ref().err().map(ToString::to_string);
        let member = self.ctx.host.member_name();
        let hs = HostState {
            role: role_file.ok().flatten(),
            datastore: self.ctx.host.has_datastore(),
            tombstone: self.ctx.host.has_tombstone(),
            etcd_lists_member: self
                .heartbeat
                .etcd_lists_member(&self.ctx.addresses, member.as_deref()),
            member,
        };
        let decision = decide(&Observation {
            now: self.ctx.clock.unix_secs(),
            node: view,
            lease: self.seen.lease.facts(),
            report: self.memory.report.as_ref(),
            host: hs,
            join,
            identity: &self.ctx.settings.names.controller_identity,
            skew_margin: secs_i64(self.ctx.settings.skew_margin),
            join_port: self.ctx.settings.join_port,
        });
        hostdecide::decide::with_role_file(decision, role_problem.as_deref())
    }

    async fn phase(
        &mut self,
        client: &Client,
        swap: &Option<SwapId>,
        step: ReportStep,
        phase: Phase,
        detail: Option<Detail>,
    ) -> Result<(), kube::Error> {
        let mut r = Report::next(
            self.memory.report.as_ref(),
            swap.clone(),
            step,
            phase,
            self.ctx.clock.unix_secs(),
        );
        if let Some(d) = detail {
            r = r.with_detail(d);
        }
        self.memory.record(&self.ctx, client, r).await
    }

    /// Starts a step: its start reported (unless resumed), then its host
    /// part spawned in a task of its own; [`Watcher::conclude`] follows.
    async fn take(
        &mut self,
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
            self.phase(client, &swap, rstep, Phase::Started, None)
                .await?;
        }
        let budget = host::Budget::within(&self.ctx.clock, step_bound(&self.ctx.settings, &step));
        let host = self.ctx.host.clone().with_budget(budget.clone());
        let lock_timeout = self.ctx.settings.lock_timeout;
        let detail = self.memory.report.as_ref().and_then(|r| r.detail);
        // Every step but a finish needs the Lease (a finish needs none once
        // the member is gone, which its decision checked on the disk).
        let gate = match (&step, &swap) {
            (Step::Finish, _) | (_, None) => None,
            (_, Some(swap)) => Some(LeaseGate {
                leases: Api::namespaced(client.clone(), LEASE_NAMESPACE),
                names: self.ctx.settings.names.clone(),
                swap: swap.clone(),
                node: self.ctx.settings.node.to_string(),
                step: rstep,
                skew_margin: secs_i64(self.ctx.settings.skew_margin),
                clock: self.ctx.clock.clone(),
            }),
        };
        // A step-down first hands etcd's leadership over, through the
        // local member; a rollback removes its own learner.
        let etcd = matches!(step, Step::StepDown | Step::Rollback).then(|| EtcdAccess {
            local: self.ctx.settings.etcd.clone(),
            addresses: self.ctx.addresses.clone(),
            clock: self.ctx.clock.clone(),
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
            started: self.ctx.clock.now(),
            budget,
            task,
        });
        Ok(())
    }

    /// What follows the end of a step's host part: its milestones and its
    /// end reported, or its failure with the state it left.
    pub(super) async fn conclude(
        &mut self,
        client: &Client,
        running: Running,
        outcome: Result<Option<String>, StepError>,
    ) -> Result<(), kube::Error> {
        let Running {
            swap,
            step,
            detail,
            started,
            ..
        } = running;
        let rstep = step.report_step();
        self.ctx
            .metrics
            .step_took(rstep.as_str(), self.ctx.clock.since(started));
        self.ctx.metrics.step_ended(
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
                    self.memory.report.as_ref(),
                    swap,
                    rstep,
                    Phase::Failed,
                    self.ctx.clock.unix_secs(),
                )
                .with_reason(reason);
                return self.memory.record(&self.ctx, client, r).await;
            }
        };
        // k3s promotes a caught-up learner; the Node's EtcdIsVoter (as it is
        // now, not when the step started) says so.
        let view = self
            .seen
            .node
            .as_ref()
            .map(|n| kubeview::node_facts(&self.ctx.settings.names, n))
            .unwrap_or_default();
        for (phase, milestone) in
            hostdecide::milestones::after_host_part(&step, detail, view.etcd_is_voter)
        {
            let mut r = Report::next(
                self.memory.report.as_ref(),
                swap.clone(),
                rstep,
                phase,
                self.ctx.clock.unix_secs(),
            )
            .with_detail(milestone);
            if milestone == Detail::Snapshot {
                r.snapshot_file = host_outcome.clone();
            }
            self.memory.record(&self.ctx, client, r).await?;
        }
        let report = self.memory.report.as_ref();
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
