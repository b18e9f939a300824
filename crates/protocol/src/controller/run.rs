//! `run`'s policy: which voter to replace, with which standby, and when.
use crate::text::one_line;

use serde::Serialize;

use super::{
    Action, Class, FleetView, GraceKind, NodeFacts, Pace, classify, grace_for, life::show_time,
    pace, standby_ready_at, tidy, voterset,
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
    /// Write to a returned host's Node, outside any swap ([`tidy`]): it
    /// came home as an agent by itself, and its Node still shows the
    /// server it was.
    Tidy {
        /// The write.
        action: Action,
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
/// with a healthy eligible standby; first, with no swap under way, tidy
/// the Node of a host that came home as an agent ([`tidy`]). One swap at a time; a new swap, or a
/// retry of one that stopped, only when [`pace`] lets it (the window, the
/// delay between swaps, the cap on failed swaps of the voter). A swap whose
/// controller went away (its Lease lapsed, nothing stopped it) is resumed
/// at once, whatever the window: it began inside it, and a swap left
/// half-way is worse than one finished late. A host `run` replaced stands
/// by again only after [`Settings::standby_min_healthy`]. The standby
/// promoted is one of the zone that keeps the fewest voters
/// ([`voterset::standby_for`]); with every voter healthy and eligible, a
/// swap that spreads the voters over the zones is made, paced the same
/// way ([`voterset::path`]). The voter count is left as it is: a swap
/// never changes it.
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
            let (Some(out), Some(incoming)) = (rec.out.clone(), rec.incoming.clone()) else {
                // A grow or shrink is the operator's (run never starts
                // one): resumed by its own command, which knows the hosts
                // queued after it, so that no even count is left standing.
                let change = rec.change();
                return idle(
                    format!(
                        "{} {} ({}) is unfinished; `{}` resumes it (queue the hosts that were to follow it too)",
                        change.as_str(),
                        rec.id,
                        super::view::halves(rec.out.as_ref(), rec.incoming.as_ref()),
                        change.command(rec.out_name(), rec.in_name())
                    ),
                    None,
                );
            };
            let Some(stopped) = l.stopped.as_deref() else {
                return RunDecision::Swap {
                    out,
                    incoming,
                    why: format!(
                        "swap {} is unfinished (its controller went away; resumed whatever the window)",
                        rec.id
                    ),
                };
            };
            return match pace(v, rec.out_name()) {
                Pace::Go => RunDecision::Swap {
                    out,
                    incoming,
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
    // A returned host tidied first: it is then a plain agent, and soon a
    // standby. No window holds it back: it touches no member of etcd.
    if let Some(t) = tidy(v) {
        return RunDecision::Tidy {
            action: t.action,
            why: t.why,
        };
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
        return voter_set(v);
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
    let mut resting: Vec<String> = Vec::new();
    for n in sorted.iter().filter(|n| free_standby(n)) {
        if let Some(t) = standby_ready_at(v, n).filter(|t| v.now < *t) {
            resting.push(format!(
                "{} was replaced lately and may stand by from {} (Ready for {} s)",
                n.name,
                show_time(t, v.settings.window.as_ref().map(|w| w.zone())),
                v.settings.standby_min_healthy
            ));
            sooner(Some(t));
        }
    }
    // Of the rested standbys, one of the zone with the fewest voters.
    let (voters, free) = voterset::hosts_of(v);
    let rested = voterset::standby_for(&voters, &out.name, &free);
    match rested.and_then(|n| NodeName::parse(&n).ok()) {
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

/// `run` with every voter healthy and eligible: the voter set's next move
/// ([`voterset::path`]). A swap that spreads the voters over more zones is
/// made, paced as any swap; a grow or shrink toward the configured count
/// is only said (`run` does not add or remove a voter).
fn voter_set(v: &FleetView) -> RunDecision {
    let p = voterset::path_of(v);
    let seen = p.start.voting;
    let count = if seen == v.settings.voters {
        String::new()
    } else {
        format!(
            "; {seen} voters seen, {} configured (run swaps voters, it never adds or removes one)",
            v.settings.voters
        )
    };
    let idle = |why: String, until: Option<i64>| RunDecision::Idle { why, until };
    // A standby still resting stands by later, and the path may change
    // then by time alone.
    let rested_at = v
        .nodes
        .iter()
        .filter(|n| free_standby(n))
        .filter_map(|n| standby_ready_at(v, n))
        .filter(|t| *t > v.now)
        .min();
    let Some(first) = p.stages.first() else {
        return idle(
            format!("every voter is healthy and eligible{count}"),
            rested_at,
        );
    };
    let spreading = v.settings.spread_label.is_some() && seen == v.settings.voters;
    match &first.change {
        voterset::Move::Swap { out, incoming } if spreading => {
            let names = NodeName::parse(out).and_then(|o| Ok((o, NodeName::parse(incoming)?)));
            let Ok((out_name, incoming_name)) = names else {
                return idle(format!("{}, but a name is not valid", first.why), None);
            };
            match pace(v, out) {
                Pace::Go => RunDecision::Swap {
                    out: out_name,
                    incoming: incoming_name,
                    why: format!("to spread the voters: {}", first.why),
                },
                Pace::Wait { until, why } => idle(
                    format!(
                        "every voter is healthy; a swap would spread them ({}), but {why}",
                        first.why
                    ),
                    until,
                ),
            }
        }
        _ => idle(
            format!(
                "every voter is healthy and eligible{count}; the voter set's next move would be `{}`",
                first.change.describe()
            ),
            rested_at,
        ),
    }
}

/// Whether `n` could stand in for a voter now, but for the rest a host
/// `run` replaced lately must take ([`standby_ready_at`]): an eligible,
/// Ready, uncordoned agent with no server labels and no step asked of it.
pub fn free_standby(n: &NodeFacts) -> bool {
    classify(n) == Class::Agent
        && !n.has_server_labels()
        && n.eligible
        && n.ready
        && !n.cordoned
        && !n.marks.any_annotation()
}

/// The standbys `run` could promote now: free ([`free_standby`]) and
/// rested, in name order.
pub fn standbys(v: &FleetView) -> Vec<&NodeFacts> {
    v.sorted()
        .into_iter()
        .filter(|n| free_standby(n))
        .filter(|n| standby_ready_at(v, n).is_none_or(|t| v.now >= t))
        .collect()
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
    use jiff::tz::TimeZone;

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

    // === A fleet's ordinary life ===

    fn down<'a>(v: &'a mut FleetView, name: &str, since: i64) -> &'a mut NodeFacts {
        let n = node_mut(v, name);
        n.ready = false;
        n.ready_since = Some(since);
        n
    }

    #[test]
    fn a_cordoned_voter_is_not_replaced_within_its_maintenance_grace_and_the_same_voter_uncordoned_is()
     {
        let mut v = fleet();
        down(&mut v, "n2", NOW - 1000).cordoned = true;
        let RunDecision::Idle { why, until } = run_decision(&v) else {
            panic!("a cordoned voter was replaced within its maintenance grace")
        };
        assert!(
            why.starts_with("no voter to replace yet: n2 is NotReady, within a maintenance grace (at most 1800 s): it is cordoned; it is replaced from"),
            "{why}"
        );
        assert_eq!(until, Some(NOW - 1000 + 1800));
        node_mut(&mut v, "n2").cordoned = false;
        let RunDecision::Swap { out, why, .. } = run_decision(&v) else {
            panic!()
        };
        assert_eq!(
            (out.as_str(), why.as_str()),
            ("n2", "n2 has been NotReady for over 300 s")
        );
        // Cordoned, and down past the maintenance grace: replaced as ever.
        down(&mut v, "n2", NOW - 1800).cordoned = true;
        let RunDecision::Swap { why, .. } = run_decision(&v) else {
            panic!()
        };
        assert_eq!(
            why,
            "n2 has been NotReady for over 1800 s, past a maintenance grace (at most 1800 s): it is cordoned"
        );
    }

    #[test]
    fn a_voter_under_kured_or_the_operators_maintenance_mark_waits_for_its_grace() {
        let mut v = fleet();
        down(&mut v, "n2", NOW - 400).maintenance.kured_reboot = Some("x".into());
        assert!(
            matches!(run_decision(&v), RunDecision::Idle { until: Some(t), .. } if t == NOW - 400 + 1800)
        );
        let n2 = down(&mut v, "n2", NOW - 400);
        n2.maintenance.kured_reboot = None;
        n2.maintenance.until = Some((NOW + 100).to_string());
        assert!(
            matches!(run_decision(&v), RunDecision::Idle { until: Some(t), .. } if t == NOW + 100)
        );
        v.now = NOW + 100;
        assert!(matches!(run_decision(&v), RunDecision::Swap { .. }));
    }

    fn at(s: &str) -> i64 {
        s.parse::<jiff::Timestamp>().unwrap().as_second()
    }

    #[test]
    fn run_outside_its_window_takes_no_action_and_says_when_it_next_may_and_inside_acts() {
        let mut v = fleet();
        v.now = at("2026-12-07T12:00:00Z");
        for n in &mut v.nodes {
            n.lease_renewed_at = Some(v.now);
        }
        v.settings.window = Some(
            Window::new(
                &["mon".to_string()],
                "22:00",
                "23:00",
                fixed_zone("+01:00").unwrap(),
                "+01:00",
            )
            .unwrap(),
        );
        node_mut(&mut v, "n3").eligible = false;
        let RunDecision::Idle { why, until } = run_decision(&v) else {
            panic!("run acted outside its window")
        };
        assert_eq!(
            why,
            "n3 is not eligible to vote (no node-restriction.kubernetes.io/fleet-role-voter-eligible=true), but outside its window (mon 22:00:00-23:00:00 +01:00): it next may at 2026-12-07T22:00:00+01:00[+01:00]"
        );
        assert_eq!(until, Some(at("2026-12-07T21:00:00Z")));
        v.now = at("2026-12-07T21:00:00Z");
        assert!(matches!(run_decision(&v), RunDecision::Swap { .. }));
    }

    #[test]
    fn the_retry_cap_stops_run_from_trying_a_voter_that_failed_twice() {
        let mut v = fleet();
        down(&mut v, "n2", NOW - 4000);
        v.lease = Some(lease_with_endings(&[("n2", NOW - 3000, true)]));
        assert!(
            matches!(run_decision(&v), RunDecision::Swap { .. }),
            "one failure, 3000 s ago, is past its back-off"
        );
        v.lease = Some(lease_with_endings(&[
            ("n2", NOW - 3000, true),
            ("n2", NOW - 2000, true),
        ]));
        let RunDecision::Idle { why, until } = run_decision(&v) else {
            panic!("a voter that failed twice was tried a third time")
        };
        assert!(
            why.contains("n2 failed 2 times within 86400 s (the cap is 2)"),
            "{why}"
        );
        assert_eq!(until, Some(NOW - 3000 + 86_400));
        // Another voter due for replacement is not held back by n2's cap.
        node_mut(&mut v, "n3").eligible = false;
        let RunDecision::Swap { out, .. } = run_decision(&v) else {
            panic!()
        };
        assert_eq!(out.as_str(), "n3");
    }

    #[test]
    fn a_stopped_swap_is_retried_as_pacing_allows_and_an_abandoned_one_is_resumed_at_once() {
        let mut v = fleet();
        let mut l = lease_held_by("fleet-role", "ctl-b", "swap-0", "n2", "n5");
        l.holder = None;
        l.renew_time = None;
        l.stopped = Some("the step-down failed".into());
        l.endings = lease_with_endings(&[("n2", NOW - 30, true)]).endings;
        v.lease = Some(l.clone());
        let RunDecision::Idle { why, until } = run_decision(&v) else {
            panic!("a stopped swap was retried within the settle time")
        };
        assert!(
            why.starts_with("swap swap-0 stopped (the step-down failed) and is not retried yet: settling for 60 s after swap swap-0; n2 failed 1 time(s) lately; backing off 600 s after the last"),
            "{why}"
        );
        assert_eq!(until, Some(NOW - 30 + 600));
        v.now = NOW - 30 + 600;
        assert!(matches!(run_decision(&v), RunDecision::Swap { .. }));
        // Its controller went away (nothing stopped it): resumed at once,
        // even outside a window.
        v.now = NOW;
        l.stopped = None;
        v.lease = Some(l);
        v.settings.window = Some(Window::new(&[], "00:00", "00:01", TimeZone::UTC, "UTC").unwrap());
        let RunDecision::Swap { why, .. } = run_decision(&v) else {
            panic!()
        };
        assert!(why.contains("its controller went away"), "{why}");
    }

    #[test]
    fn a_host_run_replaced_is_chosen_as_a_standby_only_after_its_healthy_period() {
        let mut v = fleet();
        node_mut(&mut v, "n3").eligible = false;
        v.lease = Some(lease_with_endings(&[("n4", NOW - 600, false)]));
        node_mut(&mut v, "n4").ready_since = Some(NOW - 200);
        let RunDecision::Idle { why, until } = run_decision(&v) else {
            panic!("a host back for 200 s was chosen")
        };
        assert!(
            why.ends_with("is free: n4 was replaced lately and may stand by from 1970-01-12T14:43:20Z (Ready for 3600 s)"),
            "{why}"
        );
        assert_eq!(until, Some(NOW - 200 + 3600));
        v.now = NOW - 200 + 3600;
        for n in &mut v.nodes {
            n.lease_renewed_at = Some(v.now);
        }
        assert!(matches!(run_decision(&v), RunDecision::Swap { .. }));
    }

    mod property {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Whatever the clock, the window, the voters down and the
            /// endings kept: `run` starts a swap only inside its window,
            /// `settle` after the last ending, and never a swap of a voter
            /// that failed `retry_max` times within the period.
            #[test]
            fn run_never_starts_a_swap_outside_its_window_nor_past_the_cap(
                now in 0_i64..4_000_000_000,
                start in 0_u32..24, len in 1_u32..12,
                day_mask in 1_u8..128,
                downs in proptest::collection::vec((0_usize..3, 0_i64..10_000, any::<bool>()), 0..3),
                ineligible in proptest::option::of(0_usize..3),
                endings in proptest::collection::vec((0_usize..3, 0_i64..200_000, any::<bool>()), 0..8),
                retry_max in 1_u32..4,
                stopped in any::<bool>(),
            ) {
                let names = ["n1", "n2", "n3"];
                let mut v = fleet();
                v.now = now;
                v.settings.retry_max = retry_max;
                let days: Vec<String> = (0..7).filter(|d| day_mask & (1 << d) != 0).map(|d| DAYS[d].to_string()).collect();
                let end = (start + len) % 24;
                let window = Window::new(&days, &format!("{start:02}:00"), &format!("{end:02}:00"), TimeZone::UTC, "UTC").unwrap();
                v.settings.window = Some(window.clone());
                for n in &mut v.nodes {
                    n.lease_renewed_at = Some(now);
                    if let Some(h) = n.host.as_mut() { h.heartbeat_at = now; }
                }
                for (i, ago, cordoned) in &downs {
                    down(&mut v, names[*i], now - ago).cordoned = *cordoned;
                }
                if let Some(i) = ineligible { node_mut(&mut v, names[i]).eligible = false; }
                let kept: Vec<(&str, i64, bool)> = endings.iter().map(|(i, ago, failed)| (names[*i], now - ago, *failed)).collect();
                let mut l = lease_with_endings(&kept);
                if stopped {
                    let mut rec = lease_held_by("fleet-role", "ctl-b", "swap-9", "n2", "n4");
                    rec.holder = None;
                    rec.renew_time = None;
                    rec.stopped = Some("x".into());
                    rec.endings = l.endings.clone();
                    l = rec;
                }
                v.lease = Some(l.clone());
                if let RunDecision::Swap { out, .. } = run_decision(&v) {
                    prop_assert!(window.contains(now), "a swap outside the window");
                    let all = l.endings();
                    if let Some(last) = all.iter().map(|e| e.at).max() {
                        prop_assert!(now >= last + v.settings.settle, "a swap within the settle time");
                    }
                    let ok = all.iter().filter(|e| e.out == out.as_str() && !e.failed).map(|e| e.at).max();
                    let failed = all.iter().filter(|e| e.out == out.as_str() && e.failed
                        && e.at > now - v.settings.retry_period && ok.is_none_or(|ok| e.at > ok)).count();
                    prop_assert!(failed < retry_max as usize, "a swap of a voter at its cap");
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "run_spread_tests.rs"]
mod spread_tests;
