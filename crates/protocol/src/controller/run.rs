//! `run`'s policy: which voter to replace, with which standby, and when.
use crate::controller::text::one_line;

use serde::Serialize;

use super::{
    Class, FleetView, GraceKind, NodeFacts, Pace, classify, grace_for, life::show_time, pace,
    standby_ready_at,
};
use crate::validate::NodeName;

// === `run` ===

/// What `run` decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum RunDecision {
    /// Start (or resume) this swap.
    Swap {
        /// The voter to replace.
        out: NodeName,
        /// The standby to promote.
        incoming: NodeName,
        /// Why.
        why: String,
    },
    /// Nothing to do now.
    Idle {
        /// Why, and which grace or rule holds `run` back.
        why: String,
        /// When the answer may change by time alone (unix seconds): a
        /// voter's grace runs out, the window opens, a back-off ends, a
        /// standby's healthy period is over. `None`: only a change in the
        /// cluster can change it.
        #[serde(skip_serializing_if = "Option::is_none")]
        until: Option<i64>,
    },
}

/// The `run` policy: replace a voter that has been NotReady past its grace
/// ([`grace_for`]: the ordinary one, or a maintenance grace for a voter
/// that shows planned maintenance), or sits on a host not eligible to vote,
/// with a healthy eligible standby. One swap at a time; a new swap, or a
/// retry of one that stopped, only when [`pace`] lets it (the window, the
/// delay between swaps, the cap on failed swaps of the voter). A swap whose
/// controller went away (its Lease lapsed, nothing stopped it) is resumed
/// at once, whatever the window: it began inside it, and a swap left
/// half-way is worse than one finished late. A host `run` replaced stands
/// by again only after [`Settings::standby_min_healthy`]. The voter count
/// is left as it is: a swap never changes it.
///
/// [`Settings::standby_min_healthy`]: super::Settings::standby_min_healthy
pub fn run_decision(v: &FleetView) -> RunDecision {
    let idle = |why: String, until: Option<i64>| RunDecision::Idle { why, until };
    if v.paused() {
        return idle("paused".into(), None);
    }
    if let Some(l) = &v.lease {
        if let Some(rec) = l.recorded_swap() {
            if l.is_held(v.now) {
                return idle(format!("swap {} is running", rec.id), None);
            }
            let Some(stopped) = l.stopped.as_deref() else {
                return RunDecision::Swap {
                    out: rec.out,
                    incoming: rec.incoming,
                    why: format!(
                        "swap {} is unfinished (its controller went away; resumed whatever the window)",
                        rec.id
                    ),
                };
            };
            return match pace(v, rec.out.as_str()) {
                Pace::Go => RunDecision::Swap {
                    out: rec.out,
                    incoming: rec.incoming,
                    why: format!(
                        "swap {} is unfinished (stopped: {})",
                        rec.id,
                        one_line(stopped)
                    ),
                },
                Pace::Wait { until, why } => idle(
                    format!(
                        "swap {} stopped ({}) and is not retried yet: {why}",
                        rec.id,
                        one_line(stopped)
                    ),
                    until,
                ),
            };
        }
        if l.is_held(v.now) {
            return idle(
                format!(
                    "the Lease is held by {}",
                    one_line(l.holder.as_deref().unwrap_or_default())
                ),
                None,
            );
        }
    }
    let sorted = v.sorted();
    let mut wanted: Vec<(&NodeFacts, String)> = Vec::new();
    let mut waiting: Vec<String> = Vec::new();
    let mut soonest: Option<i64> = None;
    let mut sooner = |t: Option<i64>| {
        if let Some(t) = t {
            soonest = Some(soonest.map_or(t, |s: i64| s.min(t)));
        }
    };
    for n in sorted.iter().filter(|n| classify(n) == Class::Voter) {
        if !n.ready {
            let since = n.ready_since.unwrap_or(i64::MIN);
            let g = grace_for(n, &v.settings, since);
            if v.now >= g.deadline {
                let over = g.deadline.saturating_sub(since);
                let why = match g.kind {
                    GraceKind::Failure => format!("{} has been NotReady for over {over} s", n.name),
                    GraceKind::Maintenance => format!(
                        "{} has been NotReady for over {over} s, past {}",
                        n.name, g.why
                    ),
                };
                wanted.push((n, why));
            } else {
                waiting.push(format!(
                    "{} is NotReady, within {}; it is replaced from {} unless it is back",
                    n.name,
                    g.why,
                    show_time(g.deadline, v.settings.window.as_ref().map(|w| w.zone()))
                ));
                sooner(Some(g.deadline));
            }
        }
    }
    for n in sorted.iter().filter(|n| classify(n) == Class::Voter) {
        if !n.eligible && n.ready {
            wanted.push((
                n,
                format!(
                    "{} is not eligible to vote (no {}=true)",
                    n.name,
                    v.settings.names.eligible()
                ),
            ));
        }
    }
    if wanted.is_empty() {
        if !waiting.is_empty() {
            return idle(
                format!("no voter to replace yet: {}", waiting.join("; ")),
                soonest,
            );
        }
        let voters = sorted
            .iter()
            .filter(|n| classify(n) == Class::Voter)
            .count();
        let note = if voters == v.settings.voters {
            String::new()
        } else {
            format!(
                "; {voters} voters seen, {} configured (run swaps voters, it never adds or removes one)",
                v.settings.voters
            )
        };
        return idle(format!("every voter is healthy and eligible{note}"), None);
    }
    let mut held_back: Vec<String> = Vec::new();
    let mut chosen = None;
    for (n, why) in wanted {
        match pace(v, &n.name) {
            Pace::Go => {
                chosen = Some((n, why));
                break;
            }
            Pace::Wait { until, why: wait } => {
                held_back.push(format!("{why}, but {wait}"));
                sooner(until);
            }
        }
    }
    let Some((out, why)) = chosen else {
        held_back.extend(waiting);
        return idle(held_back.join("; "), soonest);
    };
    let free = |n: &&&NodeFacts| {
        classify(n) == Class::Agent
            && !n.has_server_labels()
            && n.eligible
            && n.ready
            && !n.cordoned
            && !n.marks.any_annotation()
    };
    let mut resting: Vec<String> = Vec::new();
    let mut rested = None;
    for n in sorted.iter().filter(free) {
        match standby_ready_at(v, n) {
            Some(t) if v.now < t => {
                resting.push(format!(
                    "{} was replaced lately and may stand by from {} (Ready for {} s)",
                    n.name,
                    show_time(t, v.settings.window.as_ref().map(|w| w.zone())),
                    v.settings.standby_min_healthy
                ));
                sooner(Some(t));
            }
            _ => {
                rested = Some(*n);
                break;
            }
        }
    }
    match rested.and_then(|n| NodeName::parse(&n.name).ok()) {
        Some(incoming) => match NodeName::parse(&out.name) {
            Ok(out) => RunDecision::Swap { out, incoming, why },
            Err(e) => idle(format!("{why}, but its name is not valid: {e}"), None),
        },
        None => idle(
            format!(
                "{why}, but no healthy eligible standby (an agent with {}=true) is free{}",
                v.settings.names.eligible(),
                if resting.is_empty() {
                    String::new()
                } else {
                    format!(": {}", resting.join("; "))
                }
            ),
            soonest,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::{fixtures::*, *};
    #[allow(unused_imports)]
    use crate::{
        report::{Detail, Phase, Report, ReportStep},
        validate::{NodeName, SwapId},
    };

    // === `run` ===

    #[test]
    fn run_replaces_a_voter_not_ready_past_the_grace_period() {
        let mut v = fleet();
        let n2 = node_mut(&mut v, "n2");
        n2.ready = false;
        n2.ready_since = Some(NOW - 100);
        assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
        node_mut(&mut v, "n2").ready_since = Some(NOW - 301);
        assert_eq!(
            run_decision(&v),
            RunDecision::Swap {
                out: name("n2"),
                incoming: name("n4"),
                why: "n2 has been NotReady for over 300 s".into()
            }
        );
    }

    #[test]
    fn run_replaces_a_voter_on_a_host_not_eligible() {
        let mut v = fleet();
        node_mut(&mut v, "n3").eligible = false;
        let RunDecision::Swap { out, incoming, .. } = run_decision(&v) else {
            panic!()
        };
        assert_eq!((out.as_str(), incoming.as_str()), ("n3", "n4"));
    }

    #[test]
    fn run_does_nothing_without_a_free_eligible_standby() {
        let mut v = fleet();
        node_mut(&mut v, "n3").eligible = false;
        node_mut(&mut v, "n4").cordoned = true;
        let RunDecision::Idle { why, .. } = run_decision(&v) else {
            panic!()
        };
        assert!(why.contains("no healthy eligible standby"), "{why}");
    }

    #[test]
    fn run_never_promotes_a_standby_that_carries_only_the_old_label() {
        let mut v = fleet();
        node_mut(&mut v, "n3").eligible = false;
        let n4 = node_mut(&mut v, "n4");
        n4.eligible = false;
        n4.legacy_eligible = true;
        let RunDecision::Idle { why, .. } = run_decision(&v) else {
            panic!("a standby whose own kubelet could label it was chosen")
        };
        assert!(why.contains(crate::names::ELIGIBLE_LABEL), "{why}");
    }

    #[test]
    fn run_waits_between_swaps_and_resumes_an_unfinished_one_first() {
        let mut v = fleet();
        node_mut(&mut v, "n3").eligible = false;
        let last = LastSwap {
            swap: "swap-0".into(),
            out: "n9".into(),
            incoming: "n3".into(),
            at: NOW - 10,
            outcome: Outcome::Done { warning: None },
        };
        v.lease = Some(LeaseFacts {
            last_swap: Some(serde_json::to_string(&last).unwrap()),
            ..LeaseFacts::default()
        });
        assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
        // settle is 60 s: idle until exactly 60 s after the last swap.
        v.now = NOW - 10 + v.settings.settle - 1;
        assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
        v.now = NOW - 10 + v.settings.settle;
        assert!(matches!(run_decision(&v), RunDecision::Swap { .. }));
        let mut l = lease_held_by("fleet-role", "ctl-b", "swap-0", "n2", "n5");
        l.holder = None;
        l.stopped = Some("x".into());
        v.lease = Some(l);
        let RunDecision::Swap { out, incoming, .. } = run_decision(&v) else {
            panic!()
        };
        assert_eq!((out.as_str(), incoming.as_str()), ("n2", "n5"));
    }

    #[test]
    fn run_is_idle_while_paused_or_while_a_swap_runs() {
        let mut v = fleet();
        node_mut(&mut v, "n3").eligible = false;
        v.lease = Some(LeaseFacts {
            paused: true,
            ..LeaseFacts::default()
        });
        assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
        v.lease = Some(lease_held_by("fleet-role", "ctl-b", "swap-0", "n2", "n5"));
        assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
    }

    #[test]
    fn run_at_rest_says_when_the_voters_seen_differ_from_the_configured_count() {
        let v = fleet();
        assert_eq!(
            run_decision(&v),
            RunDecision::Idle {
                why: "every voter is healthy and eligible".into(),
                until: None
            }
        );
        let mut v = fleet();
        v.settings.voters = 5;
        let RunDecision::Idle { why, .. } = run_decision(&v) else {
            panic!()
        };
        assert!(
            why.ends_with(
                "; 3 voters seen, 5 configured (run swaps voters, it never adds or removes one)"
            ),
            "{why}"
        );
    }

    #[test]
    fn a_voter_not_ready_since_no_known_time_counts_as_past_the_grace() {
        let mut v = fleet();
        let n2 = node_mut(&mut v, "n2");
        n2.ready = false;
        n2.ready_since = None;
        assert!(matches!(run_decision(&v), RunDecision::Swap { .. }));
    }
}
