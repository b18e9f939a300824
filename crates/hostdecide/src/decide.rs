//! The host's decision: given what the actuator sees (its Node, the regrade
//! Lease, its own last report, its host), take a step, refuse it, wait, or do
//! nothing. Every refusal's reason is written here and nowhere else.

use protocol::view::RemovalMark;
use protocol::{
    clock_offset::{ClockOffset, allowed_offset_ms, off_reason},
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
    /// Whether etcd, read just now, lists this host's member: the local
    /// member's own view, or, when that cannot be read (a removed member's
    /// etcd does not answer), a healthy voter's view read through another
    /// server. `None`: no reading succeeded.
    pub etcd_lists_member: Option<bool>,
}

impl HostState {
    /// Whether the host's member is gone, on a positive reading only: k3s's
    /// tombstone on disk, or etcd read successfully not listing it.
    ///
    /// Nothing on the Node counts: its etcd label and k3s's
    /// `removed-node-name` are any `patch nodes` holder's to write, and k3s
    /// writes `removed-node-name` even when its `RemovePeer` matched no
    /// member. A reading that failed (etcd slower than its bound, a
    /// certificate that cannot be read) is no answer: a host that finished
    /// on it would stop a member that may still vote, and move its
    /// datastore aside.
    pub fn member_gone(&self) -> bool {
        let mark = if self.tombstone {
            RemovalMark::Proof
        } else {
            RemovalMark::None
        };
        protocol::view::member_gone(mark, self.etcd_lists_member)
    }

    /// Whether the host's member is gone on a reading that names it: k3s's
    /// tombstone, or etcd read not listing the member by the name in its
    /// datastore. Stricter than [`HostState::member_gone`]: with no name
    /// to look for, etcd can only be asked for an unnamed member at this
    /// host's address, and a voter whose name file was lost would then
    /// read as gone. What a server that comes home by itself needs.
    pub fn member_gone_for_good(&self) -> bool {
        self.tombstone || (self.member.is_some() && self.etcd_lists_member == Some(false))
    }

    /// Whether the host holds a datastore whose member may still vote: one
    /// not proved gone ([`HostState::member_gone`]).
    pub fn member_may_vote(&self) -> bool {
        self.datastore && !self.member_gone()
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
    /// How far the host's clock is off the API server's, as the API's
    /// answers showed (`None`: not measured yet).
    pub clock: Option<ClockOffset>,
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
///    finishes once its member is gone ([`HostState::member_gone`]: a
///    tombstone, or etcd read not listing it), with no Lease needed:
///    finishing can never cost quorum;
/// 3. a host whose role file says `server` and whose member was removed
///    while it was down comes home as an agent by itself
///    ([`come_home`]), on a reading of its member gone that names it;
/// 4. a snapshot request is taken on a voter while the Lease is held for its
///    swap;
/// 5. a role step is taken while the Lease is held for its swap, its
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
    let finish_may_resume = o.host.role == Some(Role::Agent) && !o.host.member_may_vote();
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
        if o.host.member_gone() && !settled {
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

    // 3. A replaced server comes home.
    if let Some(d) = come_home(o) {
        return d;
    }

    // 4. A snapshot request.
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
                match lease_verdict(o, &swap, ReportStep::Snapshot, resume) {
                    Ok(()) => {}
                    // A snapshot asked ahead of its stage does not hold up
                    // a role step the Node also asks for (a stale or copied
                    // request on the outgoing voter, say).
                    Err(Decision::Wait { .. }) if o.node.marks.step.is_some() => {
                        return decide_role_step(o);
                    }
                    Err(d) => return d,
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

    // 5. A role step.
    decide_role_step(o)
}

/// Rule 3 of [`decide`]: a server whose member was removed while it was
/// down (a laptop that slept through its replacement, a host powered off
/// past its grace) finishes as an agent by itself, with no Lease and no
/// operator: its role file still names the server, but its member is gone,
/// so the only role it can take is the agent's, and finishing can never
/// cost quorum.
///
/// Only on a positive reading that the member is gone
/// ([`HostState::member_gone_for_good`]), and only while nothing else is
/// asked of the host: a role step or a snapshot on its Node, a step its
/// report shows under way, or the regrade Lease naming it the incoming
/// host of a swap (a promotion's datastore exists before etcd lists its
/// member). A finish with no swap that failed is left to the operator, as
/// any failed finish.
fn come_home(o: &Observation<'_>) -> Option<Decision> {
    if o.host.role != Some(Role::Server) {
        return None;
    }
    let asked = o.node.marks.step.is_some() || o.node.marks.snapshot_request.is_some();
    let incoming = o
        .lease
        .is_some_and(|l| l.swap_in.as_deref() == Some(o.node.name.as_str()));
    if asked || incoming {
        return None;
    }
    let take = |resume| {
        Some(Decision::Take {
            swap: None,
            step: Step::Finish,
            resume,
        })
    };
    // One the report shows under way resumes (a reboot came between the
    // datastore's move and the role file's write), if the disk agrees: the
    // member is gone, or its datastore is moved aside already.
    if o.report
        .is_some_and(|r| r.is_running(None, ReportStep::Finish))
    {
        let agrees = !o.host.datastore || o.host.member_gone_for_good();
        return if agrees { take(true) } else { None };
    }
    if !o.host.datastore || !o.host.member_gone_for_good() {
        return None;
    }
    // The last thing reported: a step under way, or a homecoming already
    // settled (a failed one is left to the operator, as any failed finish).
    let busy_or_settled = o.report.is_some_and(|r| {
        (!r.phase.is_settled() && r.step != ReportStep::None)
            || (r.swap.is_none() && r.step == ReportStep::Finish)
    });
    if busy_or_settled {
        return None;
    }
    take(false)
}

/// Step 5 of [`decide`]: a role step asked on the Node.
fn decide_role_step(o: &Observation<'_>) -> Decision {
    let report = o.report;
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
    // A step-down still asked once the same swap's finish was taken is
    // past, not refused: the member's removal can come while the step-down
    // still runs (it checks etcd again before reporting), the finish then
    // cancels it, and the Node asks for the step-down until the clean-up.
    // Refusing it would write over the finish's report, and the controller
    // would read the host as never finished (the chaos campaign's seed 11).
    if kind == StepKind::StepDown
        && report.is_some_and(|r| r.swap.as_ref() == Some(&swap) && r.step == ReportStep::Finish)
    {
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
    if let Err(d) = lease_verdict(o, &swap, rstep, resume) {
        return d;
    }

    let step = match kind {
        StepKind::Promote => {
            // A promotion over a datastore moves it aside; done while its
            // member may still vote (an etcd-only voter whose role file
            // already names the agent, a role file lost), it stops a voter.
            if o.host.role != Some(Role::Server) && o.host.member_may_vote() {
                let why = format!(
                    "the datastore holds an etcd member that may still vote{} and the role file {}; a promotion would move it aside",
                    o.host
                        .member
                        .as_deref()
                        .map(|m| format!(" ({})", shown(m)))
                        .unwrap_or_default(),
                    match o.host.role {
                        Some(r) => format!("names the {r}"),
                        None => "is missing or unreadable".into(),
                    }
                );
                return refuse_or_wait(resume, Some(swap), rstep, why);
            }
            match promote_target(o) {
                Ok(step) => step,
                Err(why) => return refuse_or_wait(resume, Some(swap), rstep, why),
            }
        }
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
        StepKind::Rollback => {
            // A rollback moves the datastore aside. Resumed over a member
            // that may vote, it is taken only while the Lease still shows
            // the controller asked for it (after its quorum gate): a
            // resume needs no new ask, and the member may have become a
            // voter since.
            if resume
                && o.host.member_may_vote()
                && let Some(Err(why)) = o.lease.map(|l| lease_asks_now(l, rstep))
            {
                return refuse_or_wait(resume, Some(swap), rstep, why);
            }
            Step::Rollback
        }
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

/// Applies the datastore's room to a decision: a promotion not yet begun is
/// refused while the disk where k3s keeps its datastore is too small for a
/// copy of etcd. The host's eligibility said so before the swap picked it;
/// this is the check at the step itself, for a disk that filled since: k3s
/// would start a member onto it. A promotion already begun is left to go
/// on: its own member has written to that disk since it was judged, and
/// one that cannot write fails its start and is rolled back. `short` says
/// why the room is short (read only for a promotion), `None` when it is
/// not.
pub fn with_datastore_room(decision: Decision, short: Option<&str>) -> Decision {
    let Some(short) = short else {
        return decision;
    };
    match decision {
        Decision::Take {
            swap,
            step: Step::Promote { .. },
            resume: false,
        } => Decision::Refuse {
            swap,
            step: ReportStep::Promote,
            reason: format!(
                "{short}: etcd would fail on a full disk, so this host is not promoted"
            ),
        },
        other => other,
    }
}

/// Whether `decision` takes a promotion: the only step whose decision
/// needs the datastore's room read ([`with_datastore_room`]).
pub fn takes_promotion(decision: &Decision) -> bool {
    matches!(
        decision,
        Decision::Take {
            step: Step::Promote { .. },
            ..
        }
    )
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
            && r.phase == protocol::Phase::Refused
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

/// The gate: the Lease is held by the controller's identity for this swap,
/// has not expired (with `skew_margin` taken off its validity so that a
/// host whose clock runs behind the controller's still sees it expire in
/// time), and names this host for `step` ([`lease_names_host`]).
pub fn lease_gate(o: &Observation<'_>, swap: &SwapId, step: ReportStep) -> Result<(), String> {
    lease_holds(&LeaseCheck {
        step,
        ..check(o, swap)
    })
}

/// The Lease's verdict on a step: `Ok` to take it; a refusal (or, for a
/// resumed step, a wait) when [`lease_gate`] fails; a wait, with nothing
/// reported, while a step not yet started is not the one the controller
/// last asked for ([`lease_asks_now`]): marks copied onto the swap's own
/// host ahead of time are taken once the controller asks, not refused for
/// good (a refusal settles the step for the swap).
fn lease_verdict(
    o: &Observation<'_>,
    swap: &SwapId,
    step: ReportStep,
    resume: bool,
) -> Result<(), Decision> {
    let early = |why: String| Decision::Wait {
        reason: format!("{} waits: {why}", step.as_str()),
    };
    // A snapshot asked of no voter yet: the request on the Node came
    // first, from someone else.
    if !resume
        && let Some(l) = o.lease
        && step == ReportStep::Snapshot
        && l.snapshot_from.is_none()
        && lease_holds(&check(o, swap)).is_ok()
    {
        return Err(early(
            "the regrade Lease names no snapshot voter yet".into(),
        ));
    }
    if let Err(why) = lease_gate(o, swap, step) {
        return Err(refuse_or_wait(resume, Some(swap.clone()), step, why));
    }
    match o.lease {
        Some(l) if !resume => lease_asks_now(l, step).map_err(early),
        _ => Ok(()),
    }
}

fn check<'a>(o: &'a Observation<'a>, swap: &'a SwapId) -> LeaseCheck<'a> {
    LeaseCheck {
        lease: o.lease,
        identity: o.identity,
        swap,
        node: &o.node.name,
        step: ReportStep::None,
        now: o.now,
        skew_margin: o.skew_margin,
        clock: o.clock,
    }
}

/// What [`lease_holds`] checks the Lease against.
#[derive(Debug, Clone, Copy)]
pub struct LeaseCheck<'a> {
    /// The regrade Lease, if it exists.
    pub lease: Option<&'a LeaseFacts>,
    /// The controller's holder identity.
    pub identity: &'a str,
    /// The swap the step belongs to.
    pub swap: &'a SwapId,
    /// This host's Node.
    pub node: &'a str,
    /// The step.
    pub step: ReportStep,
    /// Now, unix seconds, by the host's clock.
    pub now: i64,
    /// Seconds taken off the Lease's validity for clock skew.
    pub skew_margin: i64,
    /// How far the host's clock is off the API server's (`None`: not
    /// measured yet).
    pub clock: Option<ClockOffset>,
}

/// [`lease_gate`] on its own: whether the Lease is held by the controller
/// for the swap at `now` and names this host for the step. The actuator
/// asks it again once a step has the host lock, since the wait for the
/// lock may have outlasted the Lease.
pub fn lease_holds(c: &LeaseCheck<'_>) -> Result<(), String> {
    let LeaseCheck {
        lease,
        identity,
        swap,
        now,
        skew_margin,
        ..
    } = *c;
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
    // The margin below allows for clocks that disagree by that much at
    // most; one surely further off the API server's cannot judge the
    // Lease either way (behind, it would take a lapsed Lease for held).
    if let Some(off) = c
        .clock
        .and_then(|o| o.beyond(allowed_offset_ms(skew_margin)))
    {
        return Err(off_reason("this host's", off, skew_margin));
    }
    if !lease.valid_at(now, skew_margin) {
        return Err(format!("the regrade Lease for swap {swap} has expired"));
    }
    lease_names_host(lease, c.node, c.step)
}

/// Whether the controller's last ask recorded on the Lease is `step`. The
/// controller names each step on the Lease ([`LeaseFacts::asked`]) in the
/// same action as it marks the Node, after its gates passed, and only the
/// controller writes the Lease; a step's marks are any `patch nodes`
/// holder's to write. So marks copied onto the swap's own host ahead of
/// time (a step-down before the drain and the removal gates, a rollback of
/// a promoted voter with no quorum check) wait until the controller asks
/// for that step itself. Checked before a step starts, not when one
/// resumes: the host's own report says it started, and the controller may
/// have asked for more since.
pub fn lease_asks_now(lease: &LeaseFacts, step: ReportStep) -> Result<(), String> {
    match lease.asked.as_deref() {
        Some(s) if s == step.as_str() => Ok(()),
        Some(s) => Err(format!(
            "the regrade Lease shows the controller last asked for {}, not {}",
            shown(s),
            step.as_str()
        )),
        None => Err(format!(
            "the regrade Lease shows no step asked yet, not {}",
            step.as_str()
        )),
    }
}

/// Whether the Lease names this host for `step`: `promote` and `rollback`
/// only on the swap's incoming host, `step-down` only on its outgoing host,
/// a snapshot only on the voter the swap asked. The marks on a Node are
/// any `patch nodes` holder's to write (kured, node-feature-discovery, an
/// operator's script), and with the Lease held for a real swap, its id
/// copied onto another voter would otherwise stop that voter too; the
/// Lease is the controller's alone.
pub fn lease_names_host(lease: &LeaseFacts, node: &str, step: ReportStep) -> Result<(), String> {
    #[cfg(feature = "plant")]
    if plants::active(plants::Plant::SkipLeaseNamesHost) {
        return Ok(());
    }
    let (named, what) = match step {
        ReportStep::Promote | ReportStep::Rollback => (&lease.swap_in, "incoming host"),
        ReportStep::StepDown => (&lease.swap_out, "outgoing host"),
        ReportStep::Snapshot => (&lease.snapshot_from, "snapshot voter"),
        // A finish needs no Lease; nothing else is a step.
        ReportStep::Finish | ReportStep::Unknown | ReportStep::None => return Ok(()),
    };
    match named.as_deref() {
        Some(n) if n == node => Ok(()),
        Some(n) => Err(format!(
            "the regrade Lease names {} as the swap's {what}, not this host: {} is taken only there",
            shown(n),
            step.as_str()
        )),
        None => Err(format!(
            "the regrade Lease names no {what}: {} is taken only on the host it names",
            step.as_str()
        )),
    }
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
    // The join Node's address is any `patch nodes` holder's (or its
    // kubelet's) to point elsewhere, and the server token goes to it: the
    // address the controller recorded on the Lease, from etcd's own view
    // of that member, must be the same. (A Lease written by a controller
    // older than this rule records none.)
    if let Some(recorded) = o.lease.and_then(|l| l.join_address.as_deref()) {
        let same = parse_address(recorded).is_ok_and(|r| r == address);
        if !same {
            return Err(format!(
                "the join node {join_node}'s address {address} is not the one the regrade Lease records from etcd's view ({})",
                shown(recorded)
            ));
        }
    }
    Ok(Step::Promote {
        join: JoinUrl::for_address(address, o.join_port),
        join_node,
    })
}
