//! `run`'s policy: which voter to replace, with which standby, and when.
use crate::view::SwapRecord;
use crate::voterset::free_standby;
use protocol::text::one_line;

use serde::Serialize;

use crate::action::Action;
use crate::grace::{GraceKind, grace_for};
use crate::pacing::{Pace, pace, resting_until};
use crate::tidy;
use crate::view::{FleetView, half_name};
use crate::voterset;
use fleetfacts::window::show_time;
use fleetfacts::{Class, classify};
use protocol::validate::NodeName;
use protocol::view::NodeFacts;

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
    /// Start (or resume) a grow (only `incoming`) or a shrink (only `out`):
    /// the voter set's count moving toward the configured one.
    Resize {
        /// The voter to remove (a shrink).
        out: Option<NodeName>,
        /// The standby to promote (a grow).
        incoming: Option<NodeName>,
        /// The host of the same move queued after it, when this one alone
        /// would leave an even count (its gates count it).
        queued: Vec<NodeName>,
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

impl RunDecision {
    /// The change it starts, in a few words ("swap out n1, in n4", "grow:
    /// promote n4, then n5", "shrink: step n1 down"); `None` when it starts
    /// none.
    pub fn change_words(&self) -> Option<String> {
        match self {
            RunDecision::Swap { out, incoming, .. } => {
                Some(format!("swap out {out}, in {incoming}"))
            }
            RunDecision::Resize {
                out,
                incoming,
                queued,
                ..
            } => {
                let then: String = queued.iter().map(|n| format!(", then {n}")).collect();
                Some(match (out, incoming) {
                    (_, Some(i)) => format!("grow: promote {i}{then}"),
                    (Some(o), None) => format!("shrink: step {o} down{then}"),
                    (None, None) => "nothing".into(),
                })
            }
            RunDecision::Tidy { .. } | RunDecision::Idle { .. } => None,
        }
    }
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
/// ([`voterset::standby_for`]); with every voter healthy and eligible,
/// the voter set's path is followed one move at a time ([`voterset::path`]):
/// a grow or shrink toward the configured count first, then a swap that
/// spreads the voters over the zones, paced the same way. A grow or shrink
/// left unfinished is taken up as a swap is.
///
/// [`Settings::standby_min_healthy`]: crate::settings::Settings::standby_min_healthy
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
            // A grow or shrink is taken up as a swap is; the voter set's
            // path then goes on from the count it leaves.
            let kind = rec.change().as_str();
            let resume = |why: String| match (rec.out.clone(), rec.incoming.clone()) {
                (Some(out), Some(incoming)) => RunDecision::Swap { out, incoming, why },
                (out, incoming) => RunDecision::Resize {
                    out,
                    incoming,
                    queued: Vec::new(),
                    why,
                },
            };
            let Some(stopped) = l.stopped.as_deref() else {
                return resume(format!(
                    "{kind} {} is unfinished (its controller went away; resumed whatever the window)",
                    rec.id
                ));
            };
            return match pace(v, rec.out_name()) {
                Pace::Go => resume(format!(
                    "{kind} {} is unfinished (stopped: {})",
                    rec.id,
                    one_line(stopped)
                )),
                Pace::Wait { until, why } => idle(
                    format!(
                        "{kind} {} stopped ({}) and is not retried yet: {why}",
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
    // The voter Nodes are counted and chosen from below: with Nodes that
    // claim more voters than etcd has (a label and a condition others can
    // write), a shrink would remove real members toward a count that is
    // not there, and a fake voter "replaced" would swap a real one's
    // place. No move until the two agree (`voters-are-members` refuses
    // every swap meanwhile, and `status` names the Nodes).
    let without = crate::etcd_gates::voters_without_member(v, &v.etcd());
    if !without.is_empty() {
        return idle(
            format!(
                "no move while voter Node(s) have no voting member in etcd: {}",
                without.join(", ")
            ),
            None,
        );
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
            // Down only on evidence no add-on can forge: a NotReady another
            // principal wrote (or a node Lease it aged) replaces nothing.
            if let Err(why) = v.down_evidence(&n.name) {
                waiting.push(format!("{why}: not replaced"));
                continue;
            }
            // No known time: counted from now, never from the past.
            let since = n.ready_since.unwrap_or(v.now);
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
        if let Some(t) = resting_until(v, n) {
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
/// ([`voterset::path`]). A grow or shrink toward the configured count, or a
/// swap that spreads the voters over more zones, is made, paced as any
/// swap ([`count_move`]).
fn voter_set(v: &FleetView) -> RunDecision {
    let p = voterset::path_of(v);
    let seen = p.start.voting;
    let count = if seen == v.settings.voters {
        String::new()
    } else {
        format!("; {seen} voters seen, {} configured", v.settings.voters)
    };
    let idle = |why: String, until: Option<i64>| RunDecision::Idle { why, until };
    // A standby still resting stands by later, and the path may change
    // then by time alone.
    let rested_at = v
        .nodes
        .iter()
        .filter(|n| free_standby(n))
        .filter_map(|n| resting_until(v, n))
        .min();
    let Some(first) = p.stages.first() else {
        return idle(
            format!("every voter is healthy and eligible{count}"),
            rested_at,
        );
    };
    if let Some(d) = count_move(v, &p) {
        return d;
    }
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

/// The path's first move when it changes the count: a grow or a shrink,
/// with the second host of a pair queued when the first alone would leave
/// an even count. Paced as a swap (the window, the delay after the last
/// change, the cap on a voter's failed changes and the back-off), except
/// that from an even count (the middle of a pair, or one left by a change
/// that failed) neither the window nor the delay holds it back: an even
/// count is not left standing until the window opens again. `None`: the
/// first move is a swap.
fn count_move(v: &FleetView, p: &voterset::Path) -> Option<RunDecision> {
    let first = p.stages.first()?;
    let host = |m: &voterset::Move| match m {
        voterset::Move::Grow { incoming } => Some((true, incoming.clone())),
        voterset::Move::Shrink { out } => Some((false, out.clone())),
        voterset::Move::Swap { .. } => None,
    };
    let (grow, name) = host(&first.change)?;
    let idle = |why: String, until| Some(RunDecision::Idle { why, until });
    let Ok(node) = NodeName::parse(&name) else {
        return idle(
            format!("{}, but {name} is not a valid name", first.why),
            None,
        );
    };
    let queued: Vec<NodeName> = if first.after.voting.is_multiple_of(2) {
        p.stages
            .get(1)
            .and_then(|s| host(&s.change))
            .filter(|(g, _)| *g == grow)
            .and_then(|(_, n)| NodeName::parse(&n).ok())
            .into_iter()
            .collect()
    } else {
        Vec::new()
    };
    let (out, incoming) = if grow {
        (None, Some(node))
    } else {
        (Some(node), None)
    };
    let why = format!("toward {} voters: {}", v.settings.voters, first.why);
    // From an even count, the window and the delay after the last change
    // do not hold the move back; the cap on failures and the back-off do.
    let paced = if p.start.voting.is_multiple_of(2) {
        let mut unhurried = v.clone();
        unhurried.settings.window = None;
        unhurried.settings.settle = 0;
        pace(&unhurried, half_name(out.as_ref()))
    } else {
        pace(v, half_name(out.as_ref()))
    };
    if let Pace::Wait { until, why: wait } = paced {
        return idle(
            format!(
                "the voter set's next move is `{}` ({}), but {wait}",
                first.change.describe(),
                first.why
            ),
            until,
        );
    }
    Some(RunDecision::Resize {
        out,
        incoming,
        queued,
        why,
    })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod spread_tests;
