//! What every phase shares: entering a step (and its mark on the Lease),
//! its deadline, a wait, a host's progress from its report, and a stop.

use crate::action::Action;
use crate::record::SwapStep;
use crate::view::{FleetView, Recorded, SwapRecord};
use fleetfacts::reasons::{Awaiting, Reason};
use protocol::text::one_line;
use protocol::view::{LeaseFacts, NodeFacts};
use protocol::{
    report::{Detail, Phase, Report, ReportStep},
    validate::{NodeName, SwapId},
};

/// Entering a step: the mark on the Lease when the step changes (its
/// timeout runs from the mark), unless the swap is halted at a safe point
/// while paused. `None`: the step is entered already, go on.
pub(super) fn enter(v: &FleetView, l: &LeaseFacts, step: SwapStep) -> Option<Action> {
    let halted = v.paused() && l.current_step() == Some(SwapStep::Paused);
    (!halted && (l.current_step() != Some(step) || l.step_since.is_none()))
        .then_some(Action::MarkStep { step })
}

/// When `step` times out, from its mark on the Lease. The mark is read from
/// the Lease (untrusted), so the sum saturates.
pub(super) fn deadline(v: &FleetView, l: &LeaseFacts, step: SwapStep) -> Option<i64> {
    if l.current_step() != Some(step) {
        // Halted while paused: the timeout does not run.
        return None;
    }
    l.step_deadline(&v.settings.timeouts)
}

/// Whether `step` has timed out.
pub(super) fn overdue(v: &FleetView, l: &LeaseFacts, step: SwapStep) -> bool {
    deadline(v, l, step).is_some_and(|d| v.now >= d)
}

/// A wait in `step`, with its deadline.
pub(super) fn wait(v: &FleetView, l: &LeaseFacts, step: SwapStep, reason: Awaiting) -> Action {
    Action::Wait {
        step,
        reason,
        deadline: deadline(v, l, step),
    }
}

/// The report's state of `step` of `swap` on a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Progress {
    /// Nothing reported for this step of this swap.
    None,
    /// Started, with the last milestone.
    Running(Option<Detail>),
    /// Done, with the last milestone and the report.
    Done(Box<Report>),
    /// Refused or failed, with the reason.
    Failed(Phase, String),
}

pub(super) fn progress(n: &NodeFacts, swap: &SwapId, step: ReportStep) -> Progress {
    let Some(r) = &n.report else {
        return Progress::None;
    };
    if r.swap.as_ref() == Some(swap) && r.step == step {
        return match r.phase {
            Phase::Started | Phase::Progress => Progress::Running(r.detail),
            Phase::Done => Progress::Done(Box::new(r.clone())),
            p @ (Phase::Refused | Phase::Failed) => Progress::Failed(
                p,
                r.reason
                    .as_deref()
                    .map_or_else(|| "no reason given".into(), one_line),
            ),
        };
    }
    match r
        .settled
        .iter()
        .rev()
        .find(|s| s.swap.as_ref() == Some(swap) && s.step == step)
    {
        Some(s) if s.phase == Phase::Done => {
            // Done earlier; the report has moved on to another step since.
            let mut done = r.clone();
            done.step = step;
            done.phase = Phase::Done;
            Progress::Done(Box::new(done))
        }
        Some(s) => Progress::Failed(s.phase, "reported earlier in this swap".into()),
        None => Progress::None,
    }
}

pub(super) fn paused(l: &LeaseFacts, step: SwapStep) -> Action {
    if l.current_step() != Some(SwapStep::Paused) {
        Action::MarkStep {
            step: SwapStep::Paused,
        }
    } else {
        Action::Paused { step }
    }
}

/// A milestone as shown in a wait's reason.
pub(super) fn detail_word(d: Detail) -> &'static str {
    match d {
        Detail::Learner => "learner",
        Detail::Voter => "voter",
        Detail::EtcdOnly => "etcd-only",
        Detail::MemberGone => "member gone",
        Detail::AgentReady => "agent ready",
        Detail::Snapshot => "snapshot",
    }
}

pub(super) fn stop(step: SwapStep, reason: Reason, left: String, next: String) -> Action {
    Action::Stop {
        step,
        reason,
        left,
        next,
    }
}

pub(super) fn resume_hint(rec: &Recorded) -> String {
    format!(
        "`{}` resumes the {}",
        rec.resume_command(),
        rec.change().as_str()
    )
}

/// What a swap's promotion left, at the head of a stopped step-down's or
/// removal's state: "n4 is a voter (promoted by this swap); ". Empty in a
/// shrink, which promoted nothing.
pub(super) fn promoted_clause(rec: &Recorded) -> String {
    rec.incoming
        .as_ref()
        .map(|i| format!("{i} is a voter (promoted by this swap); "))
        .unwrap_or_default()
}

/// The outgoing host, in a phase that only a swap or a shrink reaches
/// (`drive` sends a grow to none of them). Without one the Lease is not a
/// change this controller can drive on, and it writes nothing more.
pub(super) fn outgoing(rec: &Recorded) -> Result<&NodeName, Action> {
    rec.out.as_ref().ok_or_else(|| Action::Lost {
        reason: format!("swap {} has no outgoing host for this step", rec.id),
    })
}

/// The incoming host, in a phase that only a swap or a grow reaches.
pub(super) fn incoming(rec: &Recorded) -> Result<&NodeName, Action> {
    rec.incoming.as_ref().ok_or_else(|| Action::Lost {
        reason: format!("swap {} has no incoming host for this step", rec.id),
    })
}
