//! `run`'s policy: which voter to replace, with which standby, and when.
use crate::controller::text::one_line;

use serde::Serialize;

use super::{Class, FleetView, NodeFacts, classify};
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
        /// Why.
        why: String,
    },
}

/// The `run` policy: replace a voter that has been NotReady past the grace
/// period, or sits on a host not eligible to vote, with a healthy eligible
/// standby. One swap at a time, with `settle` seconds between swaps; an
/// unfinished swap on the Lease is resumed first. The voter count is left as
/// it is: a swap never changes it.
pub fn run_decision(v: &FleetView) -> RunDecision {
    let idle = |why: String| RunDecision::Idle { why };
    if v.paused() {
        return idle("paused".into());
    }
    if let Some(l) = &v.lease {
        if let Some(rec) = l.recorded_swap() {
            if l.is_held(v.now) {
                return idle(format!("swap {} is running", rec.id));
            }
            return RunDecision::Swap {
                out: rec.out,
                incoming: rec.incoming,
                why: format!(
                    "swap {} is unfinished{}",
                    rec.id,
                    l.stopped
                        .as_deref()
                        .map(|s| format!(" (stopped: {})", one_line(s)))
                        .unwrap_or_default()
                ),
            };
        }
        if l.is_held(v.now) {
            return idle(format!(
                "the Lease is held by {}",
                one_line(l.holder.as_deref().unwrap_or_default())
            ));
        }
        if let Some(last) = l.last()
            && v.now < last.at.saturating_add(v.settings.settle)
        {
            return idle(format!(
                "settling for {} s after swap {}",
                v.settings.settle,
                one_line(&last.swap)
            ));
        }
    }
    let sorted = v.sorted();
    let grace = v.settings.grace_period;
    let mut wanted: Vec<(&NodeFacts, String)> = Vec::new();
    for n in sorted.iter().filter(|n| classify(n) == Class::Voter) {
        if !n.ready {
            let since = n.ready_since.unwrap_or(i64::MIN);
            if v.now.saturating_sub(since) >= grace {
                wanted.push((
                    n,
                    format!("{} has been NotReady for over {grace} s", n.name),
                ));
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
    let Some((out, why)) = wanted.into_iter().next() else {
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
        return idle(format!("every voter is healthy and eligible{note}"));
    };
    let standby = sorted.iter().find(|n| {
        classify(n) == Class::Agent
            && !n.has_server_labels()
            && n.eligible
            && n.ready
            && !n.cordoned
            && !n.marks.any_annotation()
    });
    match standby.and_then(|n| NodeName::parse(&n.name).ok()) {
        Some(incoming) => match NodeName::parse(&out.name) {
            Ok(out) => RunDecision::Swap { out, incoming, why },
            Err(e) => idle(format!("{why}, but its name is not valid: {e}")),
        },
        None => idle(format!(
            "{why}, but no healthy eligible standby (an agent with {}=true) is free",
            v.settings.names.eligible()
        )),
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
        let RunDecision::Idle { why } = run_decision(&v) else {
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
        let RunDecision::Idle { why } = run_decision(&v) else {
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
                why: "every voter is healthy and eligible".into()
            }
        );
        let mut v = fleet();
        v.settings.voters = 5;
        let RunDecision::Idle { why } = run_decision(&v) else {
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
