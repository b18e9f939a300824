//! The snapshot: asked of a healthy voter before anything changes, and
//! waited for.

use super::{
    guard::{guarded, refused, shut},
    promote::before_promote,
    replace_down::replace_down,
    step::{Progress, enter, overdue, progress, wait},
    step_down::before_step_down,
};
use crate::action::Action;
use crate::gates::{promote_gates, removal_gates};
use crate::record::{StopKind, StopNote, SwapStep};
use crate::view::{FleetView, Recorded};
use fleetfacts::reasons::{Awaiting, Reason, VoterFor};
use fleetfacts::{Class, classify, is_healthy_voter};
use protocol::view::{LeaseFacts, NodeFacts};
use protocol::{report::ReportStep, validate::NodeName};

pub(super) fn snapshot(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    // Only the voter the Lease names counts: the request mark is any
    // `patch nodes` holder's to copy onto another Node, and that Node's
    // "done" is no snapshot the controller asked for.
    let requested: Vec<&NodeFacts> = v
        .sorted()
        .into_iter()
        .filter(|n| n.marks.snapshot_request.as_deref() == Some(rec.id.as_str()))
        .filter(|n| l.snapshot_from.as_deref() == Some(n.name.as_str()))
        .collect();
    // A done snapshot on the voter asked: on to the promotion.
    for n in &requested {
        if let Progress::Done(_) = progress(n, &rec.id, ReportStep::Snapshot) {
            // A shrink has nothing to promote: on to its step-down.
            if rec.incoming.is_none() {
                return before_step_down(v, l, rec);
            }
            if v.down(rec.out_name()) {
                return replace_down(v, l, rec);
            }
            return before_promote(v, l, rec);
        }
    }
    if let Some(a) = enter(v, l, SwapStep::Snapshot) {
        return a;
    }
    if let Some(n) = requested.first() {
        return match progress(n, &rec.id, ReportStep::Snapshot) {
            Progress::Failed(phase, reason) => Action::BeginStop {
                note: StopNote {
                    kind: StopKind::Failed,
                    reason: Reason::HostReported {
                        node: n.name.clone(),
                        step: ReportStep::Snapshot,
                        phase,
                        reason,
                    },
                },
            },
            _ if overdue(v, l, SwapStep::Snapshot) => Action::BeginStop {
                note: StopNote {
                    kind: StopKind::Failed,
                    reason: Reason::NotReported {
                        node: n.name.clone(),
                        step: ReportStep::Snapshot,
                        secs: v.settings.timeouts.snapshot,
                    },
                },
            },
            _ => wait(
                v,
                l,
                SwapStep::Snapshot,
                Awaiting::Snapshot {
                    node: n.name.clone(),
                    swap: rec.id.to_string(),
                },
            ),
        };
    }
    // The gates of the write the snapshot comes before.
    let gates = match &rec.incoming {
        Some(i) => promote_gates(v, rec.out.as_ref().map(NodeName::as_str), i.as_str()),
        None => removal_gates(v, rec.out_name(), None),
    };
    guarded(
        v,
        l,
        SwapStep::Snapshot,
        shut(&gates),
        refused,
        || match snapshot_voter(v, rec.out_name()) {
            Some(node) => Action::RequestSnapshot {
                node,
                swap: rec.id.clone(),
            },
            None => Action::BeginStop {
                note: StopNote {
                    kind: StopKind::Refused,
                    reason: Reason::NoHealthyVoter {
                        to: VoterFor::Snapshot,
                        other_than: None,
                    },
                },
            },
        },
    )
}

/// The voter that takes the snapshot: a healthy voter other than the
/// outgoing one, else the outgoing one if it is healthy.
pub fn snapshot_voter(v: &FleetView, out: &str) -> Option<NodeName> {
    let sorted = v.sorted();
    sorted
        .iter()
        .find(|n| n.name != out && classify(n) == Class::Voter && is_healthy_voter(n))
        .or_else(|| sorted.iter().find(|n| n.name == out && is_healthy_voter(n)))
        .and_then(|n| NodeName::parse(&n.name).ok())
}
