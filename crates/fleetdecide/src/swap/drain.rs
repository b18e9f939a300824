//! The drain phase: after the cordon, before the step-down, the outgoing
//! host's pods are evicted (see [`fleetfacts::drain`] for which, and
//! why), within the drain step's timeout. A pod no controller owns stops
//! the swap before anything is evicted, unless the swap is forced.

use super::step::{enter, outgoing, overdue, promoted_clause, resume_hint, wait};
use crate::action::Action;
use crate::record::SwapStep;
use crate::view::{FleetView, Recorded};
use fleetfacts::drain::{PodRef, blocking, named, unmanaged};
use fleetfacts::reasons::{Awaiting, Reason};
use protocol::view::LeaseFacts;

/// The drain's next action for the outgoing Node, once it is cordoned and
/// Ready. `None`: no pod is left that the drain waits for, so the step-down
/// may be asked. A pod whose name could not address it (never written by
/// the API) is never evicted: it keeps the drain open until the timeout
/// stops the swap, and the stop names it.
pub(super) fn drain(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Option<Action> {
    let left = blocking(&v.pods);
    if left.is_empty() {
        return None;
    }
    if let Some(a) = enter(v, l, SwapStep::Drain) {
        return Some(a);
    }
    let out = rec.out_name();
    // What a swap's promotion left beside the outgoing voter (a shrink
    // promoted nothing), and the command that resumes.
    let count = if rec.incoming.is_some() {
        "the cluster has one voter more than configured"
    } else {
        "the voter count is as it was"
    };
    let promoted = promoted_clause(rec);
    let resume = resume_hint(rec);
    let bare = unmanaged(&v.pods);
    if !v.settings.drain_force && !bare.is_empty() {
        // Checked before every round, not only the first: a pod bound to
        // the Node by name skips the scheduler, so the cordon does not keep
        // a new one off. Nothing of the drain is undone by stopping here:
        // the pods already evicted had controllers to start them elsewhere.
        return Some(Action::Stop {
            step: SwapStep::Drain,
            reason: Reason::Unmanaged {
                node: out.to_string(),
                pods: named(&bare),
            },
            left: format!(
                "{promoted}{out} is still a voter, cordoned, no step-down asked: {count}"
            ),
            next: format!(
                "move or delete those pods yourself (`kubectl get pods -A --field-selector spec.nodeName={out}`), then {resume}; or resume it with `--force` (`drain_force = true` for `run`) to evict them, gone for good"
            ),
        });
    }
    if overdue(v, l, SwapStep::Drain) {
        return Some(Action::Stop {
            step: SwapStep::Drain,
            reason: Reason::NotDrained {
                node: out.to_string(),
                secs: v.settings.timeouts.drain,
                pods: named(&left),
            },
            left: format!(
                "{promoted}{out} is still a voter, cordoned, with its pods partly evicted: {count}"
            ),
            next: format!(
                "see why the pods stay (`kubectl get pods -A --field-selector spec.nodeName={out}`, their PodDisruptionBudgets); once they are gone, or with a longer `timeouts.drain`, {resume}"
            ),
        });
    }
    let evict: Vec<PodRef> = left
        .iter()
        .filter(|p| !p.terminating && p.addressable())
        .map(|p| PodRef {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
        })
        .collect();
    if evict.is_empty() {
        return Some(wait(
            v,
            l,
            SwapStep::Drain,
            Awaiting::Drain {
                node: rec.out_name().to_string(),
                pods: named(&left),
            },
        ));
    }
    Some(Action::Evict {
        node: match outgoing(rec) {
            Ok(n) => n.clone(),
            Err(a) => return Some(a),
        },
        pods: evict,
        grace: v.settings.drain_grace,
    })
}
