//! The swap's state machine: [`next_action`] reads where the swap stands
//! from the cluster and returns the one next write or wait. Each phase is a
//! file of its own.

use crate::view::SwapRecord;
mod clean_up;
mod drain;
mod guard;
mod promote;
mod removal;
mod replace_down;
mod snapshot;
mod step;
mod step_down;
#[cfg(test)]
mod tests;
mod wind_down;

pub use clean_up::finished;
pub use promote::join_voter;
pub use snapshot::snapshot_voter;

use self::{
    clean_up::clean_up,
    promote::{Order, promote_wait, promoted},
    removal::{removal, stepped_down},
    replace_down::replace_down,
    snapshot::snapshot,
    step_down::{before_step_down, step_down_wait},
    wind_down::wind_down,
};
use crate::action::{Action, Start, SwapState};
use crate::gate::all_pass;
use crate::gates::{gate_not_paused, preflight};
use crate::record::SwapStep;
use crate::resize::{grow_gates, shrink_gates};
use crate::view::{FleetView, Recorded, VoterChange};
use protocol::text::one_line;
use protocol::validate::{NodeName, StepKind};
use protocol::view::LeaseFacts;

/// The one next thing to do for the swap `s`, given the cluster `v`. Pure.
pub fn next_action(v: &FleetView, s: &SwapState) -> Action {
    // A Lease naming this instance is this state's only once it took it.
    // `run` keeps its instance name from one leadership to the next, so a
    // session cut short mid-swap (its leadership lost to a partition)
    // leaves the Lease under the name the next session has. Driven on, that
    // session's every write would be refused by the recheck, which wants
    // the swap it took, and the swap would never move again. It waits for
    // the Lease to lapse and takes the swap over, as a restarted
    // controller does.
    let ours = v
        .lease
        .as_ref()
        .filter(|l| l.instance.as_deref() == Some(s.instance.as_str()) && s.taken.is_some());
    let Some(l) = ours else {
        if s.taken.is_some() {
            return Action::Lost {
                reason: describe_lease(v),
            };
        }
        return start(v, s);
    };
    let Some(rec) = l.recorded_swap() else {
        return Action::Lost {
            reason: "the Lease names this controller but no valid swap".into(),
        };
    };
    if l.holder.as_deref() != Some(v.settings.names.controller_identity.as_str())
        || rec.out != s.out
        || rec.incoming != s.incoming
        || s.taken.as_ref().is_some_and(|t| *t != rec.id)
    {
        return Action::Lost {
            reason: describe_lease(v),
        };
    }
    if renew_due(v, l) {
        return Action::RenewLease;
    }
    drive(v, l, &rec)
}

pub(super) fn describe_lease(v: &FleetView) -> String {
    match &v.lease {
        None => "the regrade Lease is gone".into(),
        Some(l) => format!(
            "the regrade Lease is held by {} (instance {}) for swap {}",
            one_line(l.holder.as_deref().unwrap_or("nobody")),
            one_line(l.instance.as_deref().unwrap_or("none")),
            one_line(l.swap.as_deref().unwrap_or("none"))
        ),
    }
}

/// A third of the duration has passed since the last renewal (or the
/// Lease has no renew time).
pub(super) fn renew_due(v: &FleetView, l: &LeaseFacts) -> bool {
    match l.renew_time {
        None => true,
        Some(r) => v.now >= r.saturating_add((v.settings.lease_duration / 3).max(1)),
    }
}

pub(super) fn start(v: &FleetView, s: &SwapState) -> Action {
    if let Some(l) = &v.lease
        && let Some(rec) = l.recorded_swap()
        && rec.out == s.out
        && rec.incoming == s.incoming
    {
        if l.is_held(v.now) {
            return Action::WaitForLease {
                until: l.expiry().unwrap_or(v.now),
                reason: format!(
                    "swap {} of the same Nodes is held by controller instance {} until it lapses",
                    rec.id,
                    one_line(l.instance.as_deref().unwrap_or("unknown"))
                ),
            };
        }
        // The Lease's own swap, re-taken (a failover, a restart, an abort):
        // `no-other-swap` is about other swaps, and marks another principal
        // left on some Node must not keep the recorded one from finishing
        // or winding down.
        let gates = vec![gate_not_paused(v)];
        if !all_pass(&gates) {
            return Action::Refuse { gates };
        }
        let (swap, start) = if l.stopped.is_some() {
            (s.candidate.clone(), Start::Stopped)
        } else {
            (rec.id, Start::Abandoned)
        };
        return Action::TakeLease {
            swap,
            out: s.out.clone(),
            incoming: s.incoming.clone(),
            start,
        };
    }
    let gates = start_gates(v, s);
    if all_pass(&gates) {
        Action::TakeLease {
            swap: s.candidate.clone(),
            out: s.out.clone(),
            incoming: s.incoming.clone(),
            start: Start::Fresh,
        }
    } else {
        Action::Refuse { gates }
    }
}

/// The gates a new change passes before its Lease is taken: a swap's
/// preflight, or a grow's or shrink's own over it and the hosts queued
/// after it (so that the count it heads for is odd).
pub fn start_gates(v: &FleetView, s: &SwapState) -> Vec<super::Gate> {
    fn queue<'a>(first: &'a NodeName, then: &'a [NodeName]) -> Vec<&'a str> {
        std::iter::once(first)
            .chain(then)
            .map(NodeName::as_str)
            .collect()
    }
    match (&s.out, &s.incoming) {
        (Some(out), Some(inc)) => preflight(v, out.as_str(), inc.as_str()),
        (None, Some(inc)) => grow_gates(v, &queue(inc, &s.queued)),
        (Some(out), None) => shrink_gates(v, &queue(out, &s.queued)),
        (None, None) => vec![super::Gate::fail(
            super::GateName::NoOtherSwap,
            "a change names neither an outgoing nor an incoming host",
        )],
    }
}

pub(super) fn drive(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    if let Some(note) = l.stop_note() {
        return wind_down(v, l, rec, note);
    }
    // The clean-up erases the evidence the other steps are read from, so
    // once it has begun the Lease's step alone says where the swap is.
    if l.current_step() == Some(SwapStep::CleanUp) {
        return clean_up(v, l, rec);
    }
    match rec.change() {
        VoterChange::Swap => drive_swap(v, l, rec),
        VoterChange::Grow => drive_grow(v, l, rec),
        VoterChange::Shrink => drive_shrink(v, l, rec),
    }
}

fn drive_swap(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    let o = v.node(rec.out_name());
    let i = v.node(rec.in_name());
    let incoming_promoted = i.is_some_and(promoted);
    let in_removal = matches!(l.current_step(), Some(SwapStep::Removal | SwapStep::Finish));
    let removal_begun = match o {
        Some(o) => o.k3s.remove_requested() || o.member_gone() || in_removal,
        // A deleted Node's member is removed by k3s itself (its `onRemove`).
        None => incoming_promoted || in_removal || l.current_step() == Some(SwapStep::StepDown),
    };
    if removal_begun {
        // A down outgoing voter is removed before the promotion (see
        // `replace_down`); once it is gone the promotion follows.
        if !incoming_promoted && o.is_some_and(|o| !stepped_down(o, &rec.id)) {
            return replace_down(v, l, rec);
        }
        return removal(v, l, rec);
    }
    if o.is_some_and(|o| o.marks.step_kind() == Some(StepKind::StepDown)) {
        return step_down_wait(v, l, rec);
    }
    if incoming_promoted {
        return before_step_down(v, l, rec);
    }
    let outgoing_down = v.down(rec.out_name());
    if let Some(i) = i
        && i.marks.step_kind() == Some(StepKind::Promote)
    {
        // etcd adds no member while a voter is unreachable: a promotion
        // that has not joined yet waits for the down voter's removal.
        if outgoing_down && !i.has_member() {
            return replace_down(v, l, rec);
        }
        return promote_wait(v, l, rec, i, Order::BeforeRemoval);
    }
    snapshot(v, l, rec)
}

/// A grow: the snapshot, the promotion, the clean-up; no voter steps down.
fn drive_grow(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    let i = v.node(rec.in_name());
    if i.is_some_and(promoted) {
        return clean_up(v, l, rec);
    }
    if let Some(i) = i
        && i.marks.step_kind() == Some(StepKind::Promote)
    {
        return promote_wait(v, l, rec, i, Order::BeforeRemoval);
    }
    snapshot(v, l, rec)
}

/// A shrink: the snapshot, then the step-down and removal as a swap's,
/// with nothing promoted first. A down voter is not asked to step down:
/// its member is removed (`before_step_down`'s gates count it as down).
fn drive_shrink(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    let o = v.node(rec.out_name());
    let in_removal = matches!(l.current_step(), Some(SwapStep::Removal | SwapStep::Finish));
    let removal_begun = match o {
        Some(o) => o.k3s.remove_requested() || o.member_gone() || in_removal,
        // A deleted Node's member is removed by k3s itself (its `onRemove`).
        None => true,
    };
    if removal_begun {
        return removal(v, l, rec);
    }
    if o.is_some_and(|o| o.marks.step_kind() == Some(StepKind::StepDown)) {
        return step_down_wait(v, l, rec);
    }
    if matches!(l.current_step(), Some(SwapStep::Drain | SwapStep::StepDown)) {
        return before_step_down(v, l, rec);
    }
    snapshot(v, l, rec)
}
