//! Winding a swap down to the cluster as it was: the incoming host rolled
//! back, its member removed if it has one, the swap's marks cleared.

use super::{
    clean_up::snapshot_marked,
    step::{Progress, enter, overdue, progress, resume_hint, stop, wait},
};
use crate::action::Action;
use crate::gate::failures;
use crate::gates::{gate_quorum_at_host_stop, gate_quorum_for};
use crate::record::{Outcome, StopNote, SwapStep};
use crate::view::{FleetView, Recorded};
use fleetfacts::reasons::{Awaiting, Reason, Write};
use protocol::view::LeaseFacts;
use protocol::{report::ReportStep, validate::StepKind};

/// Back to the cluster as it was: roll the incoming host back and have its
/// member removed if it has one, clear what the swap wrote, release.
pub(super) fn wind_down(v: &FleetView, l: &LeaseFacts, rec: &Recorded, note: StopNote) -> Action {
    if let Some(inc_node) = &rec.incoming
        && let Some(i) = v.node(inc_node.as_str())
    {
        let inc = inc_node.as_str();
        // What the outgoing half is left as (a grow has none).
        let out_still = match &rec.out {
            Some(out) => format!("{out} is still a voter"),
            None => "the other voters are as they were".to_string(),
        };
        // Whether the incoming host was asked to promote (or to roll back)
        // is read from the Lease as much as from its Node: the Lease is the
        // controller's alone to write, where any `patch nodes` holder could
        // rewrite the Node's step mark (a step-down in place of the
        // promotion) and so hide a learner that must be rolled back.
        // And from etcd itself: a member of the incoming host in the
        // servers' agreed view means it joined, whatever the marks say (a
        // swap resumed under a new id asks afresh, so its Lease no longer
        // records the first id's promotion).
        let asked = i.marks.step_kind();
        let lease_asked = l.asked.as_deref().and_then(|a| StepKind::parse(a).ok());
        let joined = v.etcd().of_node(inc).is_some();
        let promotion_asked = joined
            || [asked, lease_asked]
                .iter()
                .any(|a| matches!(a, Some(StepKind::Promote | StepKind::Rollback)));
        if promotion_asked {
            // The rollback asked and its mark in place, or the host's
            // report of it for this swap: its progress is what is read.
            let rollback_marked = (asked == Some(StepKind::Rollback)
                && i.marks.swap.as_deref() == Some(rec.id.as_str()))
                || !matches!(progress(i, &rec.id, ReportStep::Rollback), Progress::None);
            // Asked before by the Lease, its Node's mark gone since (a
            // controller that died between the two writes, or a mark
            // rewritten by another writer): asked again, but only within
            // the rollback's timeout, counted from its first ask.
            if !rollback_marked && lease_asked == Some(StepKind::Rollback) {
                if let Some(a) = enter(v, l, SwapStep::Rollback) {
                    return a;
                }
                if overdue(v, l, SwapStep::Rollback) {
                    return rollback_overdue(v, &note, inc, &out_still, rec);
                }
            }
            if !rollback_marked {
                // A host whose member votes already (etcd may have promoted
                // it before its Node shows `EtcdIsVoter`) stops before its
                // member is removed: with too few healthy voters left that
                // loses quorum, and the removal itself then cannot happen.
                let gate = gate_quorum_at_host_stop(v, inc);
                if !gate.passed {
                    return stop(
                        SwapStep::Rollback,
                        then(
                            &note,
                            Reason::GatesShut {
                                failures: failures(std::slice::from_ref(&gate)),
                            },
                        ),
                        format!(
                            "{inc} still runs its server and its member votes; nothing was rolled back; {out_still}"
                        ),
                        format!(
                            "bring the down voters back (`fleet-role status` names them); then {}",
                            resume_hint(rec)
                        ),
                    );
                }
                return Action::Rollback {
                    node: inc_node.clone(),
                    swap: rec.id.clone(),
                };
            }
            match progress(i, &rec.id, ReportStep::Rollback) {
                Progress::Done(_) => {}
                Progress::Failed(phase, reason) => {
                    return stop(
                        SwapStep::Rollback,
                        then(
                            &note,
                            Reason::HostReported {
                                node: inc.to_string(),
                                step: ReportStep::Rollback,
                                phase,
                                reason,
                            },
                        ),
                        format!("{inc} may run its server or its agent; {out_still}"),
                        format!(
                            "if {inc} refused because etcd promoted its member (its reason says so), it keeps its server and its vote: bring the down voters back, then {}; otherwise run `fleet-role-actuator demote-local --force` on {inc} (idempotent), then {}",
                            resume_hint(rec),
                            resume_hint(rec)
                        ),
                    );
                }
                _ => {
                    if let Some(a) = enter(v, l, SwapStep::Rollback) {
                        return a;
                    }
                    if overdue(v, l, SwapStep::Rollback) {
                        return rollback_overdue(v, &note, inc, &out_still, rec);
                    }
                    return wait(
                        v,
                        l,
                        SwapStep::Rollback,
                        Awaiting::Rollback {
                            node: inc.to_string(),
                        },
                    );
                }
            }
            // Rolled back. Its member, if it has one, goes next.
            if i.has_member() {
                if let Some(a) = enter(v, l, SwapStep::RemoveIncoming) {
                    return a;
                }
                if overdue(v, l, SwapStep::RemoveIncoming) {
                    return stop(
                        SwapStep::RemoveIncoming,
                        then(
                            &note,
                            Reason::MemberNotRemoved {
                                node: inc.to_string(),
                                secs: v.settings.timeouts.remove_incoming,
                            },
                        ),
                        format!("{inc} runs as an agent; its etcd member is still listed"),
                        format!(
                            "check k3s's managed-etcd-controller; then {}",
                            resume_hint(rec)
                        ),
                    );
                }
                if i.k3s.node_name.is_none() {
                    // k3s removes a member by the name in this annotation; a
                    // learner that never published one is removed by k3s's
                    // own learner clean-up.
                } else if i.k3s.remove_requested() {
                    return wait(
                        v,
                        l,
                        SwapStep::RemoveIncoming,
                        Awaiting::MemberRemoval {
                            node: inc.to_string(),
                        },
                    );
                } else {
                    let gate = gate_quorum_for(v, inc, Some(inc));
                    if !gate.passed {
                        return wait(
                            v,
                            l,
                            SwapStep::RemoveIncoming,
                            Awaiting::Gates {
                                before: Write::RemoveIncoming,
                                failures: failures(std::slice::from_ref(&gate)),
                            },
                        );
                    }
                    return Action::RemoveMember {
                        node: inc_node.clone(),
                    };
                }
            }
            if i.has_server_labels() || i.k3s.any() || i.etcd_is_voter {
                return Action::CleanUpServer {
                    node: inc_node.clone(),
                };
            }
        }
        if i.marks.any_annotation() {
            return Action::ClearSwapMarks {
                node: inc_node.clone(),
            };
        }
    }
    if let Some(n) = snapshot_marked(v) {
        return Action::ClearSwapMarks { node: n };
    }
    Action::ReleaseLease {
        outcome: Outcome::WoundDown {
            kind: note.kind,
            reason: note.reason,
        },
    }
}

/// The stop when the incoming host did not report its rollback within
/// the rollback's timeout.
fn rollback_overdue(
    v: &FleetView,
    note: &StopNote,
    inc: &str,
    out_still: &str,
    rec: &Recorded,
) -> Action {
    stop(
        SwapStep::Rollback,
        then(
            note,
            Reason::NotReported {
                node: inc.to_string(),
                step: ReportStep::Rollback,
                secs: v.settings.timeouts.rollback,
            },
        ),
        format!("{inc} was asked to roll back to an agent; {out_still}"),
        format!(
            "check fleet-role-actuator on {inc}; `fleet-role-actuator demote-local --force` there finishes the rollback; then {}",
            resume_hint(rec)
        ),
    )
}

/// The wind-down's reason, then what went wrong on the way back.
fn then(note: &StopNote, then: Reason) -> Reason {
    Reason::Then {
        first: Box::new(note.reason.clone()),
        then: Box::new(then),
    }
}
