//! `fleet-role abort`: what winding a swap down means where it stands.
//!
//! Before the incoming host is a voter and before the outgoing one is
//! touched, the protocol's own wind-down ([`Action::BeginStop`] and the
//! Lease's `stopping` note, then [`next_action`](crate::swap::next_action)'s rollback, member removal
//! and clearing of marks) puts the cluster back as it was. Past that point
//! (the incoming host votes, or the outgoing one was cordoned, asked to step
//! down or its member's removal asked), going back would mean removing a
//! healthy voter or un-stepping a host the protocol has no step for: the
//! nearest safe point is the swap's end, which clears its marks too.
//! This only decides; the shell drives the swap with [`abort_action`] in
//! front of [`next_action`](crate::swap::next_action).

use crate::view::SwapRecord;
use serde::Serialize;

use crate::action::{Action, SwapState};
use crate::record::{StopKind, StopNote, SwapStep};
use crate::view::FleetView;
use fleetfacts::reasons::Reason;
use fleetfacts::{Class, classify};
use protocol::validate::StepKind;

/// What aborting the swap recorded on the Lease comes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "abort", rename_all = "kebab-case")]
pub enum AbortPlan {
    /// No unfinished swap is recorded: nothing to abort.
    Nothing,
    /// Wind it down to the cluster as it was.
    WindDown,
    /// It is already winding down: let it.
    WindingDown,
    /// Past the point of no return: the nearest safe point is its end.
    Finish {
        /// Why it cannot go back.
        why: String,
    },
}

/// The note an abort winds a swap down with.
pub fn abort_note() -> StopNote {
    StopNote {
        kind: StopKind::Refused,
        reason: Reason::GatesShut {
            failures: "an operator asked to abort it (fleet-role abort)".into(),
        },
    }
}

/// What aborting the swap on `v`'s Lease comes to.
pub fn abort_plan(v: &FleetView) -> AbortPlan {
    let Some(l) = &v.lease else {
        return AbortPlan::Nothing;
    };
    let Some(rec) = l.recorded_swap() else {
        return AbortPlan::Nothing;
    };
    if l.stop_note().is_some() {
        return AbortPlan::WindingDown;
    }
    let finish = |why: String| AbortPlan::Finish { why };
    if let Some(
        step @ (SwapStep::Drain
        | SwapStep::StepDown
        | SwapStep::Removal
        | SwapStep::Finish
        | SwapStep::CleanUp),
    ) = l.current_step()
    {
        return finish(format!("the swap is in its {} step", step.as_str()));
    }
    if let Some(o) = v.node(rec.out_name()) {
        if o.k3s.remove_requested() || o.member_gone() {
            return finish(format!("{}'s etcd member is being removed", rec.out_name()));
        }
        if o.marks.step_kind() == Some(StepKind::StepDown) {
            return finish(format!("{} was asked to step down", rec.out_name()));
        }
        // A swap's cordon comes after its promotion (the marks name the
        // swap by then); a shrink's is its first write to the voter, and a
        // cordon before it is no reason to leave the voter cordoned.
        let shrink = rec.incoming.is_none();
        if o.cordoned && (shrink || o.marks.swap.as_deref() == Some(rec.id.as_str())) {
            return finish(format!("{} was cordoned to step down", rec.out_name()));
        }
    }
    if let Some(i) = v.node(rec.in_name())
        && classify(i) == Class::Voter
    {
        return finish(format!(
            "{} is already a voter; undoing it would remove a healthy voter",
            rec.in_name()
        ));
    }
    AbortPlan::WindDown
}

/// The action an abort takes in place of `next` (what [`next_action`](crate::swap::next_action)
/// decided for `s`), if any: once this process holds the Lease for the
/// swap, the wind-down's note is written first. `None`: do `next`.
pub fn abort_action(v: &FleetView, s: &SwapState, next: &Action) -> Option<Action> {
    let held = s.taken.is_some()
        && !matches!(
            next,
            Action::TakeLease { .. }
                | Action::Lost { .. }
                | Action::WaitForLease { .. }
                | Action::Refuse { .. }
        );
    (held && abort_plan(v) == AbortPlan::WindDown).then(|| Action::BeginStop { note: abort_note() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::next_action;
    use protocol::report::{Phase, ReportStep};

    #[test]
    fn with_no_swap_recorded_there_is_nothing_to_abort() {
        assert_eq!(abort_plan(&fleet()), AbortPlan::Nothing);
    }

    #[test]
    fn a_grow_is_wound_down_until_its_host_votes_and_a_shrink_until_its_voter_is_cordoned() {
        // A grow of n4: wound down while it promotes, finished once n4 votes.
        let mut v = fleet();
        v.lease = Some(lease_held_by("fleet-role", ME, "swap-1", "", "n4"));
        assert_eq!(abort_plan(&v), AbortPlan::WindDown);
        *node_mut(&mut v, "n4") = voter("n4", 4);
        assert!(matches!(abort_plan(&v), AbortPlan::Finish { .. }));
        // A shrink of n1: wound down before its cordon, finished after.
        let mut v = fleet();
        v.lease = Some(lease_held_by("fleet-role", ME, "swap-1", "n1", ""));
        assert_eq!(abort_plan(&v), AbortPlan::WindDown);
        // Cordoned, with no step asked yet (paused after the cordon): the
        // cordon is the shrink's, and it is finished, not left cordoned.
        node_mut(&mut v, "n1").cordoned = true;
        assert!(matches!(abort_plan(&v), AbortPlan::Finish { .. }));
    }

    #[test]
    fn a_swap_waiting_for_its_snapshot_is_wound_down_to_the_cluster_as_it_was() {
        let v = ours(fleet(), Some(SwapStep::Snapshot));
        assert_eq!(abort_plan(&v), AbortPlan::WindDown);
        assert_eq!(
            abort_action(&v, &taken(), &next_action(&v, &taken())),
            Some(Action::BeginStop { note: abort_note() })
        );
    }

    #[test]
    fn a_promotion_under_way_is_wound_down_and_the_protocol_rolls_the_learner_back() {
        let mut v = ours(fleet(), Some(SwapStep::Promote));
        let n4 = node_mut(&mut v, "n4");
        n4.marks.desired_role = Some("server".into());
        n4.marks.swap = Some("swap-1".into());
        n4.marks.step = Some("promote".into());
        n4.etcd_label = true;
        assert_eq!(abort_plan(&v), AbortPlan::WindDown);
        // Once the note is on the Lease, the protocol's own wind-down goes on.
        let mut noted = v.clone();
        noted.lease.as_mut().unwrap().stopping =
            Some(serde_json::to_string(&abort_note()).unwrap());
        assert_eq!(abort_plan(&noted), AbortPlan::WindingDown);
        assert!(matches!(
            next_action(&noted, &taken()),
            Action::Rollback { .. }
        ));
        assert_eq!(
            abort_action(&noted, &taken(), &next_action(&noted, &taken())),
            None
        );
    }

    #[test]
    fn a_swap_whose_incoming_host_votes_already_is_finished_not_undone() {
        let v = ours(after_promotion(), Some(SwapStep::Promote));
        assert!(
            matches!(abort_plan(&v), AbortPlan::Finish { why } if why.contains("already a voter"))
        );
        assert_eq!(abort_action(&v, &taken(), &next_action(&v, &taken())), None);
    }

    #[test]
    fn a_swap_past_its_step_down_or_removal_is_finished() {
        for step in [
            SwapStep::StepDown,
            SwapStep::Removal,
            SwapStep::Finish,
            SwapStep::CleanUp,
        ] {
            let v = ours(fleet(), Some(step));
            assert!(
                matches!(abort_plan(&v), AbortPlan::Finish { .. }),
                "{step:?}"
            );
        }
        let mut v = ours(fleet(), Some(SwapStep::Promote));
        node_mut(&mut v, "n1").k3s.remove = Some("true".into());
        assert!(
            matches!(abort_plan(&v), AbortPlan::Finish { why } if why.contains("n1's etcd member"))
        );
    }

    #[test]
    fn an_abort_writes_nothing_before_this_process_holds_the_lease() {
        let mut v = ours(fleet(), Some(SwapStep::Snapshot));
        v.lease.as_mut().unwrap().instance = Some("ctl-other".into());
        let s = request("n1", "n4");
        let next = next_action(&v, &s);
        assert!(matches!(next, Action::WaitForLease { .. }), "{next:?}");
        assert_eq!(abort_action(&v, &s, &next), None);
    }

    #[test]
    fn a_stopped_swap_before_the_promotion_is_wound_down_after_it_is_taken_over() {
        let mut v = ours(fleet(), Some(SwapStep::Snapshot));
        let l = v.lease.as_mut().unwrap();
        l.holder = None;
        l.stopped = Some("earlier".into());
        node_mut(&mut v, "n2").report =
            Some(report("swap-1", ReportStep::Snapshot, Phase::Failed, None));
        assert_eq!(abort_plan(&v), AbortPlan::WindDown);
    }

    #[test]
    fn a_cordon_counts_as_the_step_down_begun_only_when_this_swap_made_it() {
        let mut v = ours(fleet(), Some(SwapStep::Snapshot));
        node_mut(&mut v, "n1").cordoned = true;
        assert_eq!(
            abort_plan(&v),
            AbortPlan::WindDown,
            "cordoned by someone else"
        );
        node_mut(&mut v, "n1").marks.swap = Some("swap-0".into());
        assert_eq!(abort_plan(&v), AbortPlan::WindDown, "marks of another swap");
        node_mut(&mut v, "n1").marks.swap = Some("swap-1".into());
        assert!(matches!(abort_plan(&v), AbortPlan::Finish { .. }));
        node_mut(&mut v, "n1").cordoned = false;
        assert_eq!(
            abort_plan(&v),
            AbortPlan::WindDown,
            "this swap's marks, not cordoned"
        );
    }

    #[test]
    fn an_abort_winds_down_only_a_swap_this_process_took_and_still_drives() {
        let v = ours(fleet(), Some(SwapStep::Snapshot));
        let wait = Action::Wait {
            step: SwapStep::Snapshot,
            reason: crate::Awaiting::NoNode { node: "n2".into() },
            deadline: None,
        };
        let taken_state = taken();
        assert!(matches!(
            abort_action(&v, &taken_state, &wait),
            Some(Action::BeginStop { .. })
        ));
        assert_eq!(
            abort_action(&v, &request("n1", "n4"), &wait),
            None,
            "not taken"
        );
        let take = Action::TakeLease {
            swap: id("swap-1"),
            out: Some(name("n1")),
            incoming: Some(name("n4")),
            start: crate::Start::Abandoned,
        };
        assert_eq!(
            abort_action(&v, &taken_state, &take),
            None,
            "the Lease is not ours yet"
        );
    }
}
