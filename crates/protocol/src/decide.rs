//! The host's decision: given what the actuator sees (its Node, the regrade
//! Lease, its own last report, its host), take a step, refuse it, wait, or do
//! nothing. Every refusal's reason is written here and nowhere else.

use crate::{
    report::{Report, ReportStep},
    validate::{InvalidValue, JoinUrl, NodeName, Role, StepKind, SwapId, parse_address, shown},
    version,
    view::{LeaseFacts, NodeFacts},
};

/// The host as the actuator finds it on disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostState {
    /// The role file's role; `None` when missing or unreadable.
    pub role: Option<Role>,
    /// Whether `server/db` exists (the host holds a datastore).
    pub datastore: bool,
    /// Whether the datastore holds k3s's tombstone (the member was removed).
    pub tombstone: bool,
    /// The host's etcd member name (`server/db/etcd/name`), if it has one.
    pub member: Option<String>,
    /// Whether the local etcd, read just now, lists this host's member
    /// (`None`: not read, or it did not answer, as a removed member's etcd
    /// does not).
    pub etcd_lists_member: Option<bool>,
}

impl HostState {
    /// Whether the host's member is gone: k3s's tombstone on disk; or no
    /// etcd label on the Node, or k3s's `removed-node-name` naming this
    /// host's member (k3s writes no tombstone when its server was down at
    /// the removal), unless the local etcd still lists the member: k3s
    /// writes `removed-node-name` even when its `RemovePeer` matched no
    /// member (a `node-address` that is not the member's peer address),
    /// and a host that finished then would stop a voter.
    pub fn member_gone(&self, node: &NodeFacts) -> bool {
        let removed = match (&self.member, &node.k3s.removed_node_name) {
            (Some(mine), Some(removed)) => mine == removed,
            _ => false,
        };
        self.tombstone || ((!node.etcd_label || removed) && self.etcd_lists_member != Some(true))
    }
}

/// What the actuator found of the Node a promotion should join.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum JoinTarget {
    /// Not looked up (no promotion asked for, or no valid name to look up).
    #[default]
    NotLooked,
    /// No such Node.
    Missing,
    /// The Node exists; its address (k3s's `etcd.k3s.cattle.io/node-address`
    /// annotation, else its first `InternalIP`), raw.
    Found {
        /// The raw address.
        address: Option<String>,
    },
}

/// Everything one decision looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation<'a> {
    /// Now, unix seconds, by the host's clock.
    pub now: i64,
    /// The host's Node.
    pub node: &'a NodeFacts,
    /// The regrade Lease, if it exists.
    pub lease: Option<&'a LeaseFacts>,
    /// The host's last report, if any.
    pub report: Option<&'a Report>,
    /// The host's disk.
    pub host: HostState,
    /// The promotion's join Node, as looked up.
    pub join: &'a JoinTarget,
    /// The Lease holder the controller uses.
    pub identity: &'a str,
    /// Seconds taken off a Lease's validity for clock skew between hosts.
    pub skew_margin: i64,
    /// The port of the supervisor a promotion joins (k3s: 6443).
    pub join_port: u16,
}

/// A step to take on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Join `join` as a learner and become a voter.
    Promote {
        /// The Node joined.
        join_node: NodeName,
        /// Its supervisor URL.
        join: JoinUrl,
    },
    /// Go to etcd-only and name `agent` in the role file.
    StepDown,
    /// Abandon a promotion and end as an agent.
    Rollback,
    /// The member is gone: stop the server, move the datastore aside, start
    /// the agent.
    Finish,
    /// Take an etcd snapshot named for the swap.
    Snapshot,
}

impl Step {
    /// The step as named in reports.
    pub fn report_step(&self) -> ReportStep {
        match self {
            Step::Promote { .. } => ReportStep::Promote,
            Step::StepDown => ReportStep::StepDown,
            Step::Rollback => ReportStep::Rollback,
            Step::Finish => ReportStep::Finish,
            Step::Snapshot => ReportStep::Snapshot,
        }
    }
}

/// What the host should do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Take (or resume) a step.
    Take {
        /// The swap it belongs to (a finish may have none).
        swap: Option<SwapId>,
        /// The step.
        step: Step,
        /// Whether the report shows it started already (a restart resumes it).
        resume: bool,
    },
    /// Report a refusal; change nothing.
    Refuse {
        /// The swap, when its id was valid.
        swap: Option<SwapId>,
        /// The step refused.
        step: ReportStep,
        /// Why, safe for one log line.
        reason: String,
    },
    /// Nothing now and nothing reported, but the situation may change by
    /// itself (a member that has not gone yet, a Lease not yet renewed).
    Wait {
        /// Why, for the log.
        reason: String,
    },
    /// Nothing asked, or what is asked is settled.
    Nothing,
}

/// Decides what the host does now. Pure: same observation, same decision.
///
/// In order:
/// 1. a finish the report shows started is resumed, if the disk agrees;
/// 2. a host whose role file says `agent` and that still holds a datastore
///    finishes once its member is gone ([`HostState::member_gone`]), with
///    no Lease needed: finishing can never cost quorum;
/// 3. a snapshot request is taken on a voter while the Lease is held for its
///    swap;
/// 4. a role step is taken while the Lease is held for its swap, its
///    `desired-role` goes with it, and the host can take it.
///
/// A snapshot request or role step whose marks (the Node's or the Lease's
/// `protocol`) are of a version this build does not know is refused
/// ([`marks_known`]): a newer controller may mean something else by them.
///
/// A step settled in the report (done, refused, failed) is never taken again:
/// the controller decides what follows by writing a new swap or step.
pub fn decide(o: &Observation<'_>) -> Decision {
    let report = o.report;
    let annotated_swap = o
        .node
        .marks
        .swap
        .as_deref()
        .and_then(|s| SwapId::parse(s).ok());

    // 1. A finish the report shows started: resume it, since the datastore
    // may already be moved and only the agent left to start. The report is
    // untrusted (another host's credential could have written it), so the
    // disk must agree: the role file names the agent, and the member is
    // gone or its datastore is already moved aside. A forged "finish
    // started" under a voter changes nothing.
    let finish_may_resume =
        o.host.role == Some(Role::Agent) && (!o.host.datastore || o.host.member_gone(o.node));
    if let Some(r) =
        report.filter(|r| finish_may_resume && r.is_running(r.swap.as_ref(), ReportStep::Finish))
    {
        return Decision::Take {
            swap: r.swap.clone(),
            step: Step::Finish,
            resume: true,
        };
    }

    // 2. The finish of a demotion.
    if o.host.role == Some(Role::Agent) && o.host.datastore {
        let swap = annotated_swap
            .clone()
            .or_else(|| report.and_then(|r| r.swap.clone()));
        // A finish that failed is left to the operator (see the recovery
        // docs): retrying it in a loop would hide the failure.
        let settled = report.is_some_and(|r| r.has_settled(swap.as_ref(), ReportStep::Finish));
        if o.host.member_gone(o.node) && !settled {
            return Decision::Take {
                swap,
                step: Step::Finish,
                resume: false,
            };
        }
        // While the member stays nothing is finished and nothing is reported.
        if o.node.marks.step.is_none() && o.node.marks.snapshot_request.is_none() {
            return Decision::Wait {
                reason: "the role file names the agent; waiting for the etcd member to be removed"
                    .into(),
            };
        }
    }

    // 3. A snapshot request.
    if let Some(raw) = o.node.marks.snapshot_request.as_deref() {
        match SwapId::parse(raw) {
            Err(e) => {
                if let Some(d) = refuse_once(report, None, ReportStep::Snapshot, e.to_string()) {
                    return d;
                }
            }
            Ok(swap)
                if report.is_some_and(|r| r.has_settled(Some(&swap), ReportStep::Snapshot)) => {}
            Ok(swap) => {
                let resume =
                    report.is_some_and(|r| r.is_running(Some(&swap), ReportStep::Snapshot));
                if let Err(why) = marks_known(o) {
                    return refuse_or_wait(resume, Some(swap), ReportStep::Snapshot, why);
                }
                if let Err(why) = lease_gate(o, &swap) {
                    return refuse_or_wait(resume, Some(swap), ReportStep::Snapshot, why);
                }
                if o.host.role != Some(Role::Server) || !o.node.etcd_is_voter {
                    return Decision::Refuse {
                        swap: Some(swap),
                        step: ReportStep::Snapshot,
                        reason:
                            "a snapshot is taken only on an etcd voter, and this host is not one"
                                .into(),
                    };
                }
                return Decision::Take {
                    swap: Some(swap),
                    step: Step::Snapshot,
                    resume,
                };
            }
        }
    }

    // 4. A role step.
    let Some(raw_step) = o.node.marks.step.as_deref() else {
        return Decision::Nothing;
    };
    let swap = match o.node.marks.swap.as_deref().map(SwapId::parse) {
        None => {
            return refuse_once(
                report,
                None,
                step_or_unknown(raw_step),
                "role-step is set without role-swap".into(),
            )
            .unwrap_or(Decision::Nothing);
        }
        Some(Err(e)) => {
            return refuse_once(report, None, step_or_unknown(raw_step), e.to_string())
                .unwrap_or(Decision::Nothing);
        }
        Some(Ok(s)) => s,
    };
    let kind = match StepKind::parse(raw_step) {
        Ok(k) => k,
        Err(e) => {
            return refuse_once(report, Some(swap), ReportStep::Unknown, e.to_string())
                .unwrap_or(Decision::Nothing);
        }
    };
    let rstep = ReportStep::from(kind);
    if report.is_some_and(|r| r.has_settled(Some(&swap), rstep)) {
        return Decision::Nothing;
    }
    let resume = report.is_some_and(|r| r.is_running(Some(&swap), rstep));
    if let Err(why) = marks_known(o) {
        return refuse_or_wait(resume, Some(swap), rstep, why);
    }

    let desired = o.node.marks.desired_role.as_deref().map(Role::parse);
    match desired {
        Some(Ok(role)) if role == kind.desired_role() => {}
        Some(Ok(role)) => {
            let why = format!(
                "{kind} needs desired-role {}, and the Node asks for {role}",
                kind.desired_role()
            );
            return refuse_or_wait(resume, Some(swap), rstep, why);
        }
        Some(Err(e)) => return refuse_or_wait(resume, Some(swap), rstep, e.to_string()),
        None => {
            let why = format!(
                "{kind} needs desired-role {}, and the Node has none",
                kind.desired_role()
            );
            return refuse_or_wait(resume, Some(swap), rstep, why);
        }
    }
    if let Err(why) = lease_gate(o, &swap) {
        return refuse_or_wait(resume, Some(swap), rstep, why);
    }

    let step = match kind {
        StepKind::Promote => match promote_target(o) {
            Ok(step) => step,
            Err(why) => return refuse_or_wait(resume, Some(swap), rstep, why),
        },
        StepKind::StepDown => {
            // A resumed step-down may already have named the agent: the
            // step is idempotent and checks etcd again before reporting.
            if !resume && o.host.role != Some(Role::Server) {
                let why = match o.host.role {
                    Some(role) => {
                        format!("step-down needs a server, and the role file names the {role}")
                    }
                    None => "step-down needs a server, and the role file is missing or unreadable"
                        .into(),
                };
                return Decision::Refuse {
                    swap: Some(swap),
                    step: rstep,
                    reason: why,
                };
            }
            Step::StepDown
        }
        StepKind::Rollback => Step::Rollback,
    };
    Decision::Take {
        swap: Some(swap),
        step,
        resume,
    }
}

/// Applies the role file's state to a decision: a step that would switch
/// the host is refused (or, once started, waits) while the role file exists
/// but cannot be read or names no valid role. [`HostState::role`] reads such a
/// file as `None`, which must never be taken for "no role": a host whose
/// file was damaged may be either, and every switch reads and writes it.
/// `problem` says what is wrong with the file, `None` when it is fine or
/// missing.
pub fn with_role_file(decision: Decision, problem: Option<&str>) -> Decision {
    let Some(problem) = problem else {
        return decision;
    };
    match decision {
        Decision::Take { swap, step, resume } if !matches!(step, Step::Snapshot) => {
            let why = format!(
                "{problem}: the host's role is unknown, so no switch is made until it names server or agent"
            );
            refuse_or_wait(resume, swap, step.report_step(), why)
        }
        other => other,
    }
}

fn step_or_unknown(raw: &str) -> ReportStep {
    StepKind::parse(raw).map_or(ReportStep::Unknown, ReportStep::from)
}

/// A refusal, unless the report already carries this very refusal (an invalid
/// value has no swap to settle under, so the same reason stands for it).
fn refuse_once(
    report: Option<&Report>,
    swap: Option<SwapId>,
    step: ReportStep,
    reason: String,
) -> Option<Decision> {
    let same = report.is_some_and(|r| {
        r.swap == swap
            && r.step == step
            && r.phase == crate::Phase::Refused
            && r.reason.as_deref() == Some(&reason)
    });
    if same || report.is_some_and(|r| swap.is_some() && r.has_settled(swap.as_ref(), step)) {
        None
    } else {
        Some(Decision::Refuse { swap, step, reason })
    }
}

/// A step that has started is half done, so it cannot be "refused with
/// nothing changed": it waits for the gate to open again instead.
fn refuse_or_wait(
    resume: bool,
    swap: Option<SwapId>,
    step: ReportStep,
    reason: String,
) -> Decision {
    if resume {
        Decision::Wait {
            reason: format!("{} resumes once: {reason}", step.as_str()),
        }
    } else {
        Decision::Refuse { swap, step, reason }
    }
}

/// The gate on the controller's marks: the Node's `protocol` annotation and
/// the regrade Lease's are of a version this build knows (none written is
/// version 1, as every controller before versions were marked).
pub fn marks_known(o: &Observation<'_>) -> Result<(), String> {
    let fix = "upgrade this host's fleet-role-actuator before the controller (see docs/upgrade.md)";
    version::check(o.node.marks.protocol.as_deref())
        .map_err(|e| format!("the Node's marks: {e}; {fix}"))?;
    if let Some(l) = o.lease {
        version::check(l.protocol.as_deref())
            .map_err(|e| format!("the regrade Lease: {e}; {fix}"))?;
    }
    Ok(())
}

/// The gate: the Lease is held by the controller's identity for this swap and
/// has not expired, with `skew_margin` taken off its validity so that a host
/// whose clock runs behind the controller's still sees it expire in time.
pub fn lease_gate(o: &Observation<'_>, swap: &SwapId) -> Result<(), String> {
    lease_holds(o.lease, o.identity, swap, o.now, o.skew_margin)
}

/// [`lease_gate`] on its own: whether `lease` is held by `identity` for
/// `swap` at `now`. The actuator asks it again once a step has the host
/// lock, since the wait for the lock may have outlasted the Lease.
pub fn lease_holds(
    lease: Option<&LeaseFacts>,
    identity: &str,
    swap: &SwapId,
    now: i64,
    skew_margin: i64,
) -> Result<(), String> {
    let Some(lease) = lease else {
        return Err("the regrade Lease does not exist".into());
    };
    match lease.holder.as_deref() {
        Some(h) if h == identity => {}
        Some(h) => {
            return Err(format!(
                "the regrade Lease is held by {}, not {}",
                shown(h),
                identity
            ));
        }
        None => return Err("the regrade Lease has no holder".into()),
    }
    match lease.swap.as_deref() {
        Some(s) if s == swap.as_str() => {}
        Some(s) => {
            return Err(format!(
                "the regrade Lease is held for swap {}, not {swap}",
                shown(s)
            ));
        }
        None => return Err(format!("the regrade Lease names no swap, not {swap}")),
    }
    if lease.expiry().is_none() {
        return Err("the regrade Lease has no renew time or duration".into());
    }
    if !lease.valid_at(now, skew_margin) {
        return Err(format!("the regrade Lease for swap {swap} has expired"));
    }
    Ok(())
}

fn promote_target(o: &Observation<'_>) -> Result<Step, String> {
    let raw = o
        .node
        .marks
        .join_node
        .as_deref()
        .ok_or("promote needs role-join-node, and the Node has none")?;
    let join_node = NodeName::parse(raw).map_err(|e: InvalidValue| e.to_string())?;
    if join_node.as_str() == o.node.name {
        return Err("promote cannot join the host to itself".into());
    }
    let address = match o.join {
        JoinTarget::NotLooked => {
            return Err(format!("the join node {join_node} was not looked up"));
        }
        JoinTarget::Missing => return Err(format!("the join node {join_node} does not exist")),
        JoinTarget::Found { address: None } => {
            return Err(format!("the join node {join_node} has no address"));
        }
        JoinTarget::Found { address: Some(a) } => parse_address(a).map_err(|e| e.to_string())?,
    };
    Ok(Step::Promote {
        join: JoinUrl::for_address(address, o.join_port),
        join_node,
    })
}
