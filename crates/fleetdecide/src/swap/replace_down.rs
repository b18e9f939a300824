//! Replacing a down outgoing voter: its member removed before the standby
//! joins, since etcd adds no member while a voter is unreachable.

use super::{
    guard::{guarded, refused, shut},
    promote::{Order, before_promote, promote_request, promote_wait},
    step::{enter, outgoing, overdue, resume_hint, stop, wait},
};
use crate::action::Action;
use crate::gates::down_removal_gates;
use crate::record::SwapStep;
use crate::view::{FleetView, Recorded};
use fleetfacts::reasons::{Awaiting, Reason, Write};
use protocol::view::LeaseFacts;

/// Replacing a down voter. etcd (with k3s's strict reconfiguration check)
/// adds no member, not even a learner, while a voter is unreachable, so the
/// usual order (promote, then remove) cannot work: the down voter's member
/// is removed first, which cannot cost quorum (it counts as down already,
/// and the gate checks the rest), then the standby is promoted. Once the
/// member is gone the cluster cannot be put back as it was, so a failure
/// from there stops the swap (resumable) rather than winding it down.
pub(super) fn replace_down(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    let out_node = match outgoing(rec) {
        Ok(n) => n.clone(),
        Err(a) => return a,
    };
    let (out, inc) = (out_node.as_str(), rec.in_name());
    let i = v.node(inc);
    if let Some(o) = v.node(out)
        && !o.member_gone()
    {
        // Re-confirmed right before every write of this path: a voter that
        // is not down by etcd's own evidence (it never was, and only its
        // Node said so; or it came back) goes the ordinary way, promotion
        // first. The cordon stays; the step-down needs it anyway. With no
        // view of etcd known nothing is confirmed either way: the removal's
        // gates (`etcd-views-agree`) hold it. The Lease is in the removal
        // here, so the promotion's step is marked first, and the promotion
        // (asked already or not) is decided from there.
        if !o.k3s.remove_requested() && v.etcd().known() && !v.down(out) {
            return before_promote(v, l, rec);
        }
        if let Some(a) = enter(v, l, SwapStep::Removal) {
            return a;
        }
        let left = format!(
            "{out} is down{}; k3s was {}asked to remove its member; {inc} {}",
            if o.cordoned { " and cordoned" } else { "" },
            if o.k3s.remove_requested() {
                ""
            } else {
                "not yet "
            },
            if i.is_some_and(|i| i.marks.step.is_some()) {
                "was asked to promote and waits for the removal"
            } else {
                "is not promoted yet"
            }
        );
        if overdue(v, l, SwapStep::Removal) {
            return stop(
                SwapStep::Removal,
                Reason::MemberNotRemoved {
                    node: out.to_string(),
                    secs: v.settings.timeouts.removal,
                },
                left,
                format!(
                    "check the voters' health and k3s's managed-etcd-controller; then {}",
                    resume_hint(rec)
                ),
            );
        }
        if o.k3s.remove_requested() {
            return wait(
                v,
                l,
                SwapStep::Removal,
                Awaiting::DownVoterRemoval {
                    node: out.to_string(),
                },
            );
        }
        let gates = down_removal_gates(v, out, inc);
        let on_shut = |failures| {
            let touched = o.cordoned || i.is_some_and(|i| i.marks.step.is_some());
            if !touched {
                return refused(failures);
            }
            wait(
                v,
                l,
                SwapStep::Removal,
                Awaiting::Gates {
                    before: Write::Removal,
                    failures,
                },
            )
        };
        return guarded(v, l, SwapStep::Removal, shut(&gates), on_shut, || {
            if o.cordoned {
                Action::RemoveMember {
                    node: out_node.clone(),
                }
            } else {
                Action::Cordon {
                    node: out_node.clone(),
                }
            }
        });
    }
    // The down voter's member is gone: promote the standby.
    // (A standby not asked yet is asked by `promote_wait` itself: its marks
    // do not name this swap.)
    match i {
        Some(i) => promote_wait(v, l, rec, i, Order::AfterDownRemoval),
        None => promote_request(v, l, rec, Order::AfterDownRemoval),
    }
}
