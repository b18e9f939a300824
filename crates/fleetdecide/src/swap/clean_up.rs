//! The clean-up once the outgoing host finished: server labels and k3s's
//! annotations removed, the swap's marks cleared, the host uncordoned, the
//! Lease released with the outcome.

use super::step::enter;
use crate::action::Action;
use crate::record::{Outcome, SwapStep};
use crate::view::{FleetView, Recorded};
use protocol::report::{Phase, ReportStep};
use protocol::validate::NodeName;
use protocol::view::{LeaseFacts, NodeFacts};

pub(super) fn clean_up(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    if let Some(a) = enter(v, l, SwapStep::CleanUp) {
        return a;
    }
    let out = rec.out_name();
    // Only a host that finished as an agent loses its server labels and cordon.
    let finished = v.node(out).is_some_and(finished);
    if let (Some(o), Some(name)) = (v.node(out), &rec.out) {
        if finished && (o.has_server_labels() || o.k3s.any()) {
            return Action::CleanUpServer { node: name.clone() };
        }
        if o.marks.any_annotation() {
            return Action::ClearSwapMarks { node: name.clone() };
        }
        if finished && o.cordoned {
            return Action::Uncordon { node: name.clone() };
        }
    }
    if let Some(name) = &rec.incoming
        && v.node(name.as_str())
            .is_some_and(|i| i.marks.any_annotation())
    {
        return Action::ClearSwapMarks { node: name.clone() };
    }
    if let Some(n) = snapshot_marked(v) {
        return Action::ClearSwapMarks { node: n };
    }
    let warning = match v.node(out) {
        // A grow: no host stepped down.
        None if rec.out.is_none() => None,
        None => Some(format!(
            "{out}'s Node is gone (k3s removes a deleted Node's member itself)"
        )),
        Some(_) if !finished => Some(format!(
            "{out} was down, so it did not step down or finish: its member is removed; when it boots it comes home as an agent by itself, and `run` tidies its Node (docs/controller.md, \"The replaced host comes home\")"
        )),
        Some(_) => None,
    };
    Action::ReleaseLease {
        outcome: Outcome::Done { warning },
    }
}

/// A Node still asked for a snapshot. At the end of a swap every such
/// request is stale (one swap runs at a time, and a resumed swap may have
/// asked under an earlier id), so all are cleared.
pub(super) fn snapshot_marked(v: &FleetView) -> Option<NodeName> {
    v.sorted()
        .into_iter()
        .find(|n| n.marks.snapshot_request.is_some())
        .and_then(|n| NodeName::parse(&n.name).ok())
}

/// The host reported its finish done, its Node is Ready, and the kubelet
/// renewed its node Lease after the finish began.
pub fn finished(o: &NodeFacts) -> bool {
    let Some(r) = &o.report else {
        return false;
    };
    r.step == ReportStep::Finish
        && r.phase == Phase::Done
        && o.ready
        && o.lease_renewed_at.is_some_and(|t| t > r.started_at)
}
