//! What the controller's writes do: the regrade Lease after an action, a
//! Node after an action, and whether an irreversible write may go now.
//!
//! One pure function per effect. The shell (the `controller` crate) turns
//! the before and after of each into its one API write (`kubeview` maps the
//! difference onto the Lease object or a Node's merge patch), and the
//! simulations apply the same functions to their plain views, so the model
//! the quorum properties are proved against is the shell's own.

use crate::action::{Action, Start};
use crate::pacing::{SwapEnding, record_ending};
use crate::record::{LastSwap, Outcome, StopNote};
use crate::view::FleetView;
use protocol::text::one_line;
use protocol::{
    report::ReportStep,
    validate::StepKind,
    view::{LeaseFacts, NodeFacts},
};

/// Who writes the Lease: the values a Lease write takes from the writer
/// rather than from the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Writer<'a> {
    /// The holder identity every controller shares (the hosts check it).
    pub identity: &'a str,
    /// This process's instance id.
    pub instance: &'a str,
    /// The Lease's duration, in seconds.
    pub lease_duration: i64,
    /// Now, unix seconds.
    pub now: i64,
}

/// The regrade Lease after `action`, from the Lease as read (`None` when
/// it does not exist yet). `None` when the action does not write the Lease.
pub fn lease_after(
    before: Option<&LeaseFacts>,
    action: &Action,
    w: Writer<'_>,
) -> Option<LeaseFacts> {
    let mut l = before.cloned().unwrap_or_default();
    match action {
        Action::TakeLease {
            swap,
            out,
            incoming,
            start,
        } => {
            l.holder = Some(w.identity.to_string());
            l.instance = Some(w.instance.to_string());
            l.renew_time = Some(w.now);
            l.duration_secs = Some(w.lease_duration);
            l.swap = Some(swap.to_string());
            l.swap_out = out.as_ref().map(ToString::to_string);
            l.swap_in = incoming.as_ref().map(ToString::to_string);
            l.protocol = Some(protocol::version::mark());
            l.stopped = None;
            // A swap taken over from a controller that went away goes on
            // in its step, with its timer; any other starts afresh.
            if *start != Start::Abandoned {
                l.step = None;
                l.step_since = None;
                // Asked again as the swap gets there (a resumed swap may
                // ask another voter for its snapshot).
                l.snapshot_from = None;
                l.join_address = None;
                l.asked = None;
            }
            // A stopped swap resumed keeps its wind-down, if one had begun.
            if *start == Start::Fresh {
                l.stopping = None;
            }
        }
        Action::RenewLease => l.renew_time = Some(w.now),
        // Each ask of a host is named on the Lease first, then its Node is
        // marked (see `node_after`): a host takes a step only when the Lease
        // asks for it (and names it), and only the controller writes the
        // Lease, where any `patch nodes` holder can mark a Node.
        Action::RequestSnapshot { node, .. } => {
            l.renew_time = Some(w.now);
            l.snapshot_from = Some(node.to_string());
            l.asked = Some(ReportStep::Snapshot.as_str().into());
        }
        Action::Promote { .. } | Action::StepDown { .. } | Action::Rollback { .. } => {
            l.renew_time = Some(w.now);
            if let Action::Promote { join_address, .. } = action {
                l.join_address = join_address.clone();
            }
            let step = match action {
                Action::Promote { .. } => StepKind::Promote,
                Action::StepDown { .. } => StepKind::StepDown,
                _ => StepKind::Rollback,
            };
            l.asked = Some(step.as_str().into());
        }
        Action::MarkStep { step } => {
            l.renew_time = Some(w.now);
            l.step = Some(step.as_str().into());
            l.step_since = Some(w.now);
        }
        Action::BeginStop { note } => {
            l.renew_time = Some(w.now);
            l.stopping = Some(serde_json::to_string(note).expect("a note serializes"));
        }
        Action::ReleaseLease { outcome } => {
            let last = LastSwap {
                swap: l.swap.clone().unwrap_or_default(),
                out: l.swap_out.clone().unwrap_or_default(),
                incoming: l.swap_in.clone().unwrap_or_default(),
                at: w.now,
                outcome: outcome.clone(),
            };
            // Kept for `run`'s pacing (the delay between swaps, the cap on
            // failed swaps of a voter, a replaced host's healthy period).
            let endings = record_ending(
                l.endings.as_deref(),
                SwapEnding {
                    swap: last.swap.clone(),
                    out: last.out.clone(),
                    at: w.now,
                    failed: !matches!(outcome, Outcome::Done { .. }),
                },
            );
            l = LeaseFacts {
                duration_secs: l.duration_secs,
                paused: l.paused,
                last_swap: Some(serde_json::to_string(&last).expect("a summary serializes")),
                endings: Some(endings),
                ..LeaseFacts::default()
            };
        }
        Action::Stop { reason, .. } => {
            l.holder = None;
            l.instance = None;
            l.renew_time = None;
            l.stopped = Some(one_line(&reason.to_string()));
            // A stop is a failed try of the voter, counted by `run`'s cap.
            l.endings = Some(record_ending(
                l.endings.as_deref(),
                SwapEnding {
                    swap: l.swap.clone().unwrap_or_default(),
                    out: l.swap_out.clone().unwrap_or_default(),
                    at: w.now,
                    failed: true,
                },
            ));
        }
        _ => return None,
    }
    Some(l)
}

/// The Node after `action`, from the Node as read. `None` when the action
/// does not write a Node.
pub fn node_after(before: &NodeFacts, action: &Action) -> Option<NodeFacts> {
    let mut n = before.clone();
    let ask = |n: &mut NodeFacts, step: StepKind, swap: &str, join: Option<String>| {
        n.marks.protocol = Some(protocol::version::mark());
        n.marks.desired_role = Some(step.desired_role().as_str().into());
        n.marks.swap = Some(swap.into());
        n.marks.step = Some(step.as_str().into());
        n.marks.join_node = join;
    };
    match action {
        Action::RequestSnapshot { swap, .. } => {
            n.marks.protocol = Some(protocol::version::mark());
            n.marks.snapshot_request = Some(swap.to_string());
        }
        Action::Promote { join, swap, .. } => {
            ask(
                &mut n,
                StepKind::Promote,
                swap.as_str(),
                Some(join.to_string()),
            );
        }
        Action::Rollback { swap, .. } => ask(&mut n, StepKind::Rollback, swap.as_str(), None),
        Action::StepDown { swap, .. } => ask(&mut n, StepKind::StepDown, swap.as_str(), None),
        Action::Cordon { .. } => n.cordoned = true,
        Action::Uncordon { .. } => n.cordoned = false,
        Action::RemoveMember { .. } => n.k3s.remove = Some("true".into()),
        Action::CleanUpServer { .. } => {
            n.etcd_label = false;
            n.control_plane_label = false;
            n.master_label = false;
            n.k3s = Default::default();
            // The agent never clears k3s's EtcdIsVoter: the shell sets it
            // False, so the Node does not claim a voter.
            n.etcd_is_voter = false;
        }
        Action::ClearSwapMarks { .. } => {
            n.marks.swap = None;
            n.marks.step = None;
            n.marks.join_node = None;
            n.marks.snapshot_request = None;
            n.marks.protocol = None;
        }
        _ => return None,
    }
    Some(n)
}

/// The regrade Lease after an operator's `abort` asks its holder to wind
/// the swap down: the note alone (the holder's renewal, step and swap are
/// its own to write; it meets a 409 on its next write and reads the note).
pub fn lease_asked_to_stop(before: &LeaseFacts, note: &StopNote) -> LeaseFacts {
    LeaseFacts {
        stopping: Some(serde_json::to_string(note).expect("a note serializes")),
        ..before.clone()
    }
}

/// The regrade Lease after `pause` (`true`) or `resume` (`false`): the flag
/// alone, whoever holds the Lease.
pub fn lease_paused(before: &LeaseFacts, paused: bool) -> LeaseFacts {
    LeaseFacts {
        paused,
        ..before.clone()
    }
}

/// Whether an irreversible write may go now: the Lease is valid beyond the
/// skew margin (the shell checks this on a fresh read right before each
/// write to a Node; the Lease is not a fence, so as late as possible).
pub fn write_may_go(v: &FleetView, l: &LeaseFacts) -> bool {
    l.valid_at(v.now, v.settings.skew_margin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Outcome, Reason, StopKind, StopNote, SwapEnding, SwapStep, fixtures::*};

    fn writer() -> Writer<'static> {
        Writer {
            identity: "fleet-role",
            instance: ME,
            lease_duration: 60,
            now: NOW,
        }
    }

    fn take(start: Start) -> Action {
        Action::TakeLease {
            swap: id("swap-2"),
            out: Some(name("n1")),
            incoming: Some(name("n4")),
            start,
        }
    }

    fn winding_down() -> LeaseFacts {
        LeaseFacts {
            step: Some("rollback".into()),
            step_since: Some(NOW - 30),
            stopping: Some("{\"kind\":\"failed\",\"reason\":\"x\"}".into()),
            stopped: Some("earlier".into()),
            renew_time: Some(NOW - 100),
            duration_secs: Some(60),
            ..lease_held_by("someone", "ctl-old", "swap-1", "n1", "n4")
        }
    }

    #[test]
    fn an_abort_or_a_pause_changes_its_one_annotation_and_nothing_the_holder_owns() {
        let before = winding_down();
        let note = crate::abort_note();
        let asked = lease_asked_to_stop(&before, &note);
        assert_eq!(
            asked.stopping.as_deref(),
            Some(serde_json::to_string(&note).unwrap().as_str())
        );
        assert_eq!(
            LeaseFacts {
                stopping: before.stopping.clone(),
                ..asked
            },
            before
        );
        let paused = lease_paused(&before, true);
        assert!(paused.paused);
        assert_eq!(lease_paused(&paused, false), before);
    }

    #[test]
    fn a_fresh_take_starts_the_swap_afresh_and_holds_the_lease_for_this_process() {
        let l = lease_after(Some(&winding_down()), &take(Start::Fresh), writer()).unwrap();
        assert_eq!(l.holder.as_deref(), Some("fleet-role"));
        assert_eq!(l.instance.as_deref(), Some(ME));
        assert_eq!((l.renew_time, l.duration_secs), (Some(NOW), Some(60)));
        assert_eq!(l.swap.as_deref(), Some("swap-2"));
        assert_eq!(l.protocol.as_deref(), Some("1"));
        assert_eq!(
            (l.step, l.step_since, l.stopping, l.stopped),
            (None, None, None, None)
        );
    }

    #[test]
    fn a_takeover_keeps_the_step_and_its_timer_and_a_resumed_stop_keeps_its_wind_down() {
        let before = winding_down();
        let l = lease_after(Some(&before), &take(Start::Abandoned), writer()).unwrap();
        assert_eq!(
            (l.step.clone(), l.step_since),
            (before.step.clone(), before.step_since)
        );
        assert_eq!(l.stopping, before.stopping);
        assert_eq!(l.stopped, None);
        let l = lease_after(Some(&before), &take(Start::Stopped), writer()).unwrap();
        assert_eq!((l.step, l.step_since), (None, None));
        assert_eq!(l.stopping, before.stopping);
    }

    #[test]
    fn marking_a_step_and_beginning_a_stop_renew_the_lease() {
        let before = winding_down();
        let l = lease_after(
            Some(&before),
            &Action::MarkStep {
                step: SwapStep::Promote,
            },
            writer(),
        )
        .unwrap();
        assert_eq!(
            (l.step.as_deref(), l.step_since, l.renew_time),
            (Some("promote"), Some(NOW), Some(NOW))
        );
        let note = StopNote {
            kind: StopKind::Refused,
            reason: Reason::GatesShut {
                failures: "gates".into(),
            },
        };
        let l = lease_after(Some(&before), &Action::BeginStop { note }, writer()).unwrap();
        assert_eq!(l.renew_time, Some(NOW));
        assert!(l.stopping.unwrap().contains("refused"));
        let l = lease_after(Some(&before), &Action::RenewLease, writer()).unwrap();
        assert_eq!(l.renew_time, Some(NOW));
        assert_eq!(l.step, before.step);
    }

    #[test]
    fn a_release_clears_the_swap_and_keeps_the_pause_the_duration_and_the_outcome() {
        let mut before = winding_down();
        before.paused = true;
        let outcome = Outcome::Done { warning: None };
        let l = lease_after(
            Some(&before),
            &Action::ReleaseLease {
                outcome: outcome.clone(),
            },
            writer(),
        )
        .unwrap();
        assert!(l.paused);
        assert_eq!(l.duration_secs, Some(60));
        assert_eq!(
            (
                l.holder,
                l.instance,
                l.renew_time,
                l.swap,
                l.step,
                l.stopping
            ),
            (None, None, None, None, None, None)
        );
        assert_eq!(l.protocol, None);
        let last: LastSwap = serde_json::from_str(l.last_swap.as_deref().unwrap()).unwrap();
        assert_eq!(
            (last.swap.as_str(), last.out.as_str(), last.at, last.outcome),
            ("swap-1", "n1", NOW, outcome)
        );
    }

    #[test]
    fn a_stop_frees_the_lease_and_keeps_the_swap_and_its_reason_on_one_line() {
        let before = winding_down();
        let stop = Action::Stop {
            step: SwapStep::StepDown,
            reason: Reason::Unreadable {
                raw: "bad\nthing".into(),
            },
            left: String::new(),
            next: String::new(),
        };
        let l = lease_after(Some(&before), &stop, writer()).unwrap();
        assert_eq!((l.holder, l.instance, l.renew_time), (None, None, None));
        assert_eq!(l.swap, before.swap);
        assert_eq!(l.stopped.as_deref(), Some("bad\\nthing"));
    }

    #[test]
    fn each_ending_is_kept_on_the_lease_a_stop_and_a_wind_down_as_failed_a_done_swap_not() {
        let before = winding_down();
        let stop = Action::Stop {
            step: SwapStep::StepDown,
            reason: Reason::Unreadable { raw: "x".into() },
            left: String::new(),
            next: String::new(),
        };
        let stopped = lease_after(Some(&before), &stop, writer()).unwrap();
        let first = SwapEnding {
            swap: before.swap.clone().unwrap(),
            out: before.swap_out.clone().unwrap(),
            at: NOW,
            failed: true,
        };
        assert_eq!(crate::pacing::endings_of(&stopped), vec![first.clone()]);
        let release = |outcome: Outcome| {
            let mut b = before.clone();
            b.endings = stopped.endings.clone();
            lease_after(Some(&b), &Action::ReleaseLease { outcome }, writer()).unwrap()
        };
        let done = release(Outcome::Done { warning: None });
        assert_eq!(
            crate::pacing::endings_of(&done),
            vec![
                first.clone(),
                SwapEnding {
                    failed: false,
                    ..first.clone()
                }
            ]
        );
        let wound = release(Outcome::WoundDown {
            kind: StopKind::Failed,
            reason: Reason::Unreadable { raw: "x".into() },
        });
        assert_eq!(
            crate::pacing::endings_of(&wound),
            vec![first.clone(), first]
        );
    }

    #[test]
    fn node_writes_change_only_what_each_action_names() {
        let v = fleet();
        let n1 = v.node("n1").unwrap();
        let promote = Action::Promote {
            node: name("n1"),
            join: name("n2"),
            join_address: None,
            swap: id("s1"),
        };
        let after = node_after(n1, &promote).unwrap();
        assert_eq!(after.marks.desired_role.as_deref(), Some("server"));
        assert_eq!(after.marks.step_kind(), Some(StepKind::Promote));
        assert_eq!(after.marks.join_node.as_deref(), Some("n2"));
        assert_eq!(after.marks.protocol.as_deref(), Some("1"));
        assert_eq!(
            NodeFacts {
                marks: n1.marks.clone(),
                ..after.clone()
            },
            *n1
        );
        let down = node_after(
            &after,
            &Action::StepDown {
                node: name("n1"),
                swap: id("s1"),
            },
        )
        .unwrap();
        assert_eq!(down.marks.desired_role.as_deref(), Some("agent"));
        assert_eq!(down.marks.join_node, None);
        let mut unmarked = n1.clone();
        unmarked.marks.protocol = None;
        for ask in [
            Action::StepDown {
                node: name("n1"),
                swap: id("s1"),
            },
            Action::Rollback {
                node: name("n1"),
                swap: id("s1"),
            },
            Action::RequestSnapshot {
                node: name("n1"),
                swap: id("s1"),
            },
        ] {
            let asked = node_after(&unmarked, &ask).unwrap();
            assert_eq!(asked.marks.protocol.as_deref(), Some("1"), "{ask:?}");
        }
        let cleared = node_after(&down, &Action::ClearSwapMarks { node: name("n1") }).unwrap();
        assert!(!cleared.marks.any_annotation());
        assert_eq!(cleared.marks.protocol, None);
        assert_eq!(cleared.marks.desired_role.as_deref(), Some("agent"));
        let clean = node_after(n1, &Action::CleanUpServer { node: name("n1") }).unwrap();
        assert!(!clean.has_server_labels() && !clean.k3s.any() && !clean.etcd_is_voter);
        assert!(
            node_after(n1, &Action::Cordon { node: name("n1") })
                .unwrap()
                .cordoned
        );
        let removing = node_after(n1, &Action::RemoveMember { node: name("n1") }).unwrap();
        assert!(removing.k3s.remove_requested());
        assert_eq!(node_after(n1, &Action::RenewLease), None);
        assert_eq!(
            lease_after(None, &Action::Cordon { node: name("n1") }, writer()),
            None
        );
    }

    #[test]
    fn a_write_may_go_only_while_the_lease_outlives_the_skew_margin() {
        let mut v = fleet();
        let mut l = lease_held_by("fleet-role", ME, "s1", "n1", "n4");
        l.duration_secs = Some(60);
        let margin = v.settings.skew_margin;
        l.renew_time = Some(v.now - 60 + margin + 1);
        assert!(write_may_go(&v, &l));
        l.renew_time = Some(v.now - 60 + margin);
        assert!(!write_may_go(&v, &l));
        l.renew_time = Some(i64::MAX);
        v.now = i64::MAX - 1;
        assert!(
            !write_may_go(&v, &l),
            "a renew time near the end of time saturates"
        );
    }
}
