//! The step-down of the outgoing voter: its gates, the cordon, the drain
//! (its own step, [`super::drain`]), the request and the wait for `etcd-only`.

use super::{
    drain::drain,
    guard::{guarded, shut},
    removal::{removal, stepped_down},
    step::{
        Progress, enter, outgoing, overdue, progress, promoted_clause, resume_hint, stop, wait,
    },
};
use crate::action::Action;
use crate::gates::removal_gates;
use crate::record::SwapStep;
use crate::view::{FleetView, Recorded, SwapRecord};
use fleetfacts::reasons::{Awaiting, Reason, Write};
use protocol::view::LeaseFacts;
use protocol::{report::ReportStep, validate::NodeName};

pub(super) fn before_step_down(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    // The drain is a step of its own (its own timeout); the gates, the pause
    // and the cordon are checked in it as before the step-down.
    let step = if l.current_step() == Some(SwapStep::Drain) {
        SwapStep::Drain
    } else {
        SwapStep::StepDown
    };
    if let Some(a) = enter(v, l, step) {
        return a;
    }
    let out = rec.out_name();
    let gates = removal_gates(v, out, rec.incoming.as_ref().map(NodeName::as_str));
    let left = match &rec.incoming {
        Some(inc) => format!(
            "{inc} is a voter (promoted by this swap) and {out} is still a voter: the cluster has one voter more than configured"
        ),
        None => format!(
            "{out} is still a voter (cordoned, if the step-down's cordon was written): the voter count is as it was"
        ),
    };
    let on_shut = |failures: String| shut_before_step_down(v, l, rec, step, &left, failures);
    guarded(v, l, SwapStep::StepDown, shut(&gates), on_shut, || {
        step_down_write(v, l, rec, step)
    })
}

/// The gates before the step-down (or what precedes it in `step`) shut:
/// a wait, until the step's timeout, then a stop that leaves `left`.
fn shut_before_step_down(
    v: &FleetView,
    l: &LeaseFacts,
    rec: &Recorded,
    step: SwapStep,
    left: &str,
    failures: String,
) -> Action {
    if overdue(v, l, step) {
        return stop(
            step,
            Reason::GatesStayedShut {
                before: Write::StepDown,
                failures,
            },
            left.to_string(),
            format!(
                "restore the voters' health (`fleet-role status`), then {}",
                resume_hint(rec)
            ),
        );
    }
    wait(
        v,
        l,
        step,
        Awaiting::Gates {
            before: Write::StepDown,
            failures,
        },
    )
}

/// The write the step-down's guard lets through: the cordon, a down
/// voter's removal, the drain, or the step-down itself.
fn step_down_write(v: &FleetView, l: &LeaseFacts, rec: &Recorded, step: SwapStep) -> Action {
    let out_node = match outgoing(rec) {
        Ok(n) => n.clone(),
        Err(a) => return a,
    };
    let out = out_node.as_str();
    let Some(o) = v.node(out) else {
        return wait(
            v,
            l,
            step,
            Awaiting::NoNode {
                node: out.to_string(),
            },
        );
    };
    if !o.cordoned {
        return Action::Cordon { node: out_node };
    }
    if v.down(out) {
        // A down voter cannot step down; removing its member cannot cost
        // quorum (it counts as down already) and the gates just said so.
        // Down by evidence ([`FleetView::down_evidence`]): a voter that only
        // reads NotReady is asked to step down, and refuses if it cannot.
        return Action::RemoveMember { node: out_node };
    }
    if let Some(a) = drain(v, l, rec) {
        return a;
    }
    if step == SwapStep::Drain {
        // Drained: the step-down's own timeout runs from here.
        return Action::MarkStep {
            step: SwapStep::StepDown,
        };
    }
    Action::StepDown {
        node: out_node,
        swap: rec.id.clone(),
    }
}

pub(super) fn step_down_wait(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    let out_node = match outgoing(rec) {
        Ok(n) => n.clone(),
        Err(a) => return a,
    };
    let out = out_node.as_str();
    let Some(o) = v.node(out) else {
        return removal(v, l, rec);
    };
    if stepped_down(o, &rec.id) {
        return removal(v, l, rec);
    }
    let state = progress(o, &rec.id, ReportStep::StepDown);
    if let Some(a) = enter(v, l, SwapStep::StepDown) {
        return a;
    }
    let left = format!(
        "{}{out} is cordoned and was asked to step down; its role file names the server unless its report says otherwise",
        promoted_clause(rec)
    );
    if o.marks.swap.as_deref() != Some(rec.id.as_str()) {
        // Asked under an earlier id of this swap: ask again under this one,
        // once its gates pass; gates that stay shut past the step's timeout
        // stop it, as before the first ask.
        let gates = removal_gates(v, out, rec.incoming.as_ref().map(NodeName::as_str));
        let on_shut = |failures: String| {
            shut_before_step_down(v, l, rec, SwapStep::StepDown, &left, failures)
        };
        return guarded(v, l, SwapStep::StepDown, shut(&gates), on_shut, || {
            Action::StepDown {
                node: out_node.clone(),
                swap: rec.id.clone(),
            }
        });
    }
    match state {
        Progress::Failed(phase, reason) => stop(
            SwapStep::StepDown,
            Reason::HostReported {
                node: out.to_string(),
                step: ReportStep::StepDown,
                phase,
                reason,
            },
            left,
            format!(
                "see {out}'s report and docs/recovery.md; once its k3s is healthy, {}",
                resume_hint(rec)
            ),
        ),
        _ if overdue(v, l, SwapStep::StepDown) => stop(
            SwapStep::StepDown,
            Reason::NotReported {
                node: out.to_string(),
                step: ReportStep::StepDown,
                secs: v.settings.timeouts.step_down,
            },
            left,
            format!(
                "check fleet-role-actuator on {out} (`journalctl -u fleet-role-actuator`); then {}",
                resume_hint(rec)
            ),
        ),
        _ => wait(
            v,
            l,
            SwapStep::StepDown,
            Awaiting::StepDown {
                node: out.to_string(),
            },
        ),
    }
}
