//! The voter set as policy: how many voters may fail at each moment of a
//! change ([`Tolerance`]), how voters spread over zones ([`Spread`]), and
//! the path from the set as it stands to the configured one, one member at
//! a time ([`path`]).
//!
//! A change of membership is modelled as the events etcd sees
//! ([`Event`]): a member joins and votes, a member's etcd restarts (the
//! outgoing host's k3s restarts etcd-only: its member is down for the
//! restart's seconds), a member leaves. A swap, a grow and a shrink are
//! sequences of those events ([`Move::events`]), so the dry run of each and
//! the planner count the same way.

use crate::pacing::resting_until;
use crate::view::FleetView;
use std::collections::BTreeMap;

use serde::Serialize;

use fleetfacts::{Class, classify};
use protocol::view::NodeFacts;

use crate::quorum;

// === Fault tolerance ===

/// The voting members at one moment and how many more of them may fail
/// with quorum kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Tolerance {
    /// Voting members.
    pub voting: usize,
    /// Healthy voting members.
    pub healthy: usize,
    /// The majority etcd needs.
    pub quorum: usize,
    /// How many more voting members may fail with quorum kept; `None`:
    /// quorum is already lost.
    #[serde(rename = "mayFail")]
    pub may_fail: Option<usize>,
}

impl Tolerance {
    /// The tolerance of `voting` members of which `healthy` are healthy.
    pub fn of(voting: usize, healthy: usize) -> Self {
        let healthy = healthy.min(voting);
        let q = quorum(voting);
        Self {
            voting,
            healthy,
            quorum: q,
            // No member at all is no quorum: `quorum(0)` is 1.
            may_fail: (healthy >= q).then(|| healthy - q),
        }
    }

    /// The tolerance as one number for comparisons: `-1` when quorum is
    /// lost.
    pub fn margin(&self) -> i64 {
        self.may_fail
            .map_or(-1, |m| i64::try_from(m).unwrap_or(i64::MAX))
    }

    /// The tolerance after `event`.
    pub fn after(&self, event: Event) -> Self {
        let (v, h) = (self.voting, self.healthy);
        match event {
            Event::Joins => Self::of(v + 1, h + 1),
            Event::Restarts => Self::of(v, h.saturating_sub(1)),
            Event::Restarted => Self::of(v, h + 1),
            Event::Leaves { healthy: true } => Self::of(v.saturating_sub(1), h.saturating_sub(1)),
            Event::Leaves { healthy: false } => Self::of(v.saturating_sub(1), h),
        }
    }

    /// Operator's words: "3 voting, quorum 2, 1 more may fail".
    pub fn describe(&self) -> String {
        let fail = match self.may_fail {
            Some(n) => format!("{n} more may fail"),
            None => "quorum lost".to_string(),
        };
        format!(
            "{} voting ({} healthy), quorum {}, {fail}",
            self.voting, self.healthy, self.quorum
        )
    }
}

/// What etcd sees of one member during a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A member joins (as a learner, which does not vote) and is promoted:
    /// one more voting member, healthy.
    Joins,
    /// A healthy member's etcd stops for a restart (the step-down's
    /// restart of k3s as etcd-only).
    Restarts,
    /// That member's etcd is back.
    Restarted,
    /// A member is removed.
    Leaves {
        /// Whether it was healthy when removed.
        healthy: bool,
    },
}

// === Moves ===

/// One change of the voter set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "move", rename_all = "kebab-case")]
pub enum Move {
    /// A standby joins and votes: one voter more.
    Grow {
        /// The standby.
        incoming: String,
    },
    /// A voter steps down and leaves: one voter less.
    Shrink {
        /// The voter.
        out: String,
    },
    /// A standby joins, then a voter leaves: the count is kept.
    Swap {
        /// The voter.
        out: String,
        /// The standby.
        incoming: String,
    },
}

impl Move {
    /// The events etcd sees, in order; `out_healthy`: whether the leaving
    /// voter is healthy (a down one is removed without a step-down, so
    /// nothing of it restarts).
    pub fn events(&self, out_healthy: bool) -> Vec<Event> {
        let leave = if out_healthy {
            vec![
                Event::Restarts,
                Event::Restarted,
                Event::Leaves { healthy: true },
            ]
        } else {
            vec![Event::Leaves { healthy: false }]
        };
        match self {
            Move::Grow { .. } => vec![Event::Joins],
            Move::Shrink { .. } => leave,
            Move::Swap { .. } => [vec![Event::Joins], leave].concat(),
        }
    }

    /// The move in the words of the CLI.
    pub fn describe(&self) -> String {
        match self {
            Move::Grow { incoming } => format!("grow --in {incoming}"),
            Move::Shrink { out } => format!("shrink --out {out}"),
            Move::Swap { out, incoming } => format!("swap --out {out} --in {incoming}"),
        }
    }
}

/// The tolerance after each of `events` from `start`, and the lowest on
/// the way (the start included).
pub fn walk(start: Tolerance, events: &[Event]) -> (Vec<Tolerance>, Tolerance) {
    let mut at = start;
    let mut lowest = start;
    let mut each = Vec::with_capacity(events.len());
    for e in events {
        at = at.after(*e);
        if at.margin() < lowest.margin() {
            lowest = at;
        }
        each.push(at);
    }
    (each, lowest)
}

// === Spread ===

/// A host as the voter set sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Host {
    /// The Node's name.
    pub name: String,
    /// Its zone (the value of the settings' `spread_label`); `None`: unlabelled, counted
    /// as one zone of its own.
    pub zone: Option<String>,
    /// A voter: healthy (Ready, its member voting). A standby: free and
    /// rested, so always healthy.
    pub healthy: bool,
}

/// The zone an unlabelled host counts in.
pub const NO_ZONE: &str = "(no zone)";

impl Host {
    fn zone(&self) -> &str {
        self.zone.as_deref().unwrap_or(NO_ZONE)
    }
}

/// How voters spread over zones: voters per zone, and the rule's bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Spread {
    /// Voters per zone (zones that have eligible hosts and no voter show 0).
    pub zones: BTreeMap<String, usize>,
    /// The rule's bound: at most ⌈voters / zones⌉ in a zone.
    pub cap: usize,
    /// The fewest voters the fullest zone could hold with the hosts each
    /// zone has: the rule where the zones allow it.
    pub best: usize,
}

impl Spread {
    /// The voters in the fullest zone.
    pub fn fullest(&self) -> usize {
        self.zones.values().copied().max().unwrap_or(0)
    }

    /// Whether the fullest zone holds no more than the zones allow.
    pub fn holds(&self) -> bool {
        self.fullest() <= self.best
    }

    /// "zone-a 2, zone-b 1 (at most 2 per zone: holds)".
    pub fn describe(&self) -> String {
        let zones: Vec<String> = self.zones.iter().map(|(z, n)| format!("{z} {n}")).collect();
        let verdict = if self.holds() {
            "holds".to_string()
        } else {
            format!("{} in one zone, {} possible", self.fullest(), self.best)
        };
        format!(
            "{} (at most {} per zone: {verdict})",
            zones.join(", "),
            self.cap
        )
    }
}

/// The spread of `voters`, over the zones of `voters` and `standbys`.
pub fn spread(voters: &[Host], standbys: &[Host]) -> Spread {
    let mut zones: BTreeMap<String, usize> = BTreeMap::new();
    let mut hosts: BTreeMap<String, usize> = BTreeMap::new();
    for h in standbys {
        zones.entry(h.zone().to_string()).or_default();
        *hosts.entry(h.zone().to_string()).or_default() += 1;
    }
    for h in voters {
        *zones.entry(h.zone().to_string()).or_default() += 1;
        *hosts.entry(h.zone().to_string()).or_default() += 1;
    }
    let n = voters.len();
    let k = zones.len().max(1);
    Spread {
        cap: n.div_ceil(k),
        best: best_fullest(n, &hosts),
        zones,
    }
}

/// The fewest voters the fullest zone can hold when `n` voters are placed
/// over zones with `hosts` hosts each (water-filling: the smallest bound
/// `b` with `sum(min(hosts, b)) >= n`).
fn best_fullest(n: usize, hosts: &BTreeMap<String, usize>) -> usize {
    (0..=n)
        .find(|b| hosts.values().map(|h| (*h).min(*b)).sum::<usize>() >= n)
        .unwrap_or(n)
}

/// The voters and the free, rested standbys of `v` as the voter set sees
/// them ([`standbys`]); a voter is healthy when Ready with its
/// member voting. A voter whose Node is missing is not among them (the
/// quorum gates count it as down, and `status`'s `Voters:` line names it).
pub fn hosts_of(v: &crate::view::FleetView) -> (Vec<Host>, Vec<Host>) {
    let host = |n: &protocol::view::NodeFacts, healthy: bool| Host {
        name: n.name.clone(),
        zone: n.zone.clone(),
        healthy,
    };
    let voters = v
        .sorted()
        .into_iter()
        .filter(|n| fleetfacts::classify(n) == fleetfacts::Class::Voter)
        .map(|n| host(n, fleetfacts::is_healthy_voter(n)))
        .collect();
    let standbys = standbys(v).into_iter().map(|n| host(n, true)).collect();
    (voters, standbys)
}

/// The path of `v`'s voter set to its configured count
/// ([`crate::settings::Settings::voters`]).
pub fn path_of(v: &crate::view::FleetView) -> Path {
    let (voters, free) = hosts_of(v);
    path(&voters, &free, v.settings.voters)
}

/// The standby a swap of `out` promotes: of `standbys`, one of the zone
/// that holds the fewest of `voters` once `out` has left (ties: zone, then
/// name; with no zones, the first name).
pub fn standby_for(voters: &[Host], out: &str, standbys: &[Host]) -> Option<String> {
    let staying: Vec<Host> = voters.iter().filter(|h| h.name != out).cloned().collect();
    emptiest_standby(&staying, standbys)
}

// === The path ===

/// One move of a path, with the tolerance it keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stage {
    /// The move.
    #[serde(flatten)]
    pub change: Move,
    /// Why this move.
    pub why: String,
    /// The lowest tolerance while it runs (the outgoing voter's restart
    /// as etcd-only included).
    pub lowest: Tolerance,
    /// The tolerance once it is done.
    pub after: Tolerance,
    /// The spread once it is done.
    pub spread: Spread,
}

/// The path from the voter set as it stands to the configured one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Path {
    /// The tolerance now.
    pub start: Tolerance,
    /// The spread now.
    pub spread: Spread,
    /// The moves, in order.
    pub stages: Vec<Stage>,
    /// Why the path stops short of the configured set, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub short: Option<String>,
}

impl Path {
    /// The tolerance at the end of the path.
    pub fn end(&self) -> Tolerance {
        self.stages.last().map_or(self.start, |s| s.after)
    }
}

/// The path from `voters` to `target` voters spread over zones, using the
/// free standbys `standbys`, one member at a time:
///
/// 1. The count first. A grow from an odd count takes two standbys in
///    succession (an even count is only passed through, never left
///    standing, and never entered without the move that leaves it); with
///    fewer standbys than that it stops short. A shrink removes down
///    voters first (which raises the tolerance), then voters of the
///    fullest zone.
/// 2. Then the spread: while the fullest zone holds at least two voters
///    more than the emptiest zone that has a standby, one of its voters is
///    swapped for that standby. After the swap the two zones differ by at
///    most one the other way, so no later swap undoes it, and the path ends
///    with the fullest zone as low as the zones' hosts allow
///    ([`Spread::best`]).
///
/// A set without quorum gets no path: etcd takes no membership change
/// then.
pub fn path(voters: &[Host], standbys: &[Host], target: usize) -> Path {
    let start = Tolerance::of(voters.len(), voters.iter().filter(|h| h.healthy).count());
    let spread_now = spread(voters, standbys);
    if start.may_fail.is_none() {
        return Path {
            start,
            spread: spread_now,
            stages: vec![],
            short: Some(format!(
                "quorum is lost ({}): etcd takes no change of members",
                start.describe()
            )),
        };
    }
    let mut free = standbys.to_vec();
    free.sort_by(|a, b| a.name.cmp(&b.name));
    let mut w = Walker {
        set: voters.to_vec(),
        free,
        at: start,
        stages: vec![],
    };
    let mut short = None;
    // Each move takes a standby or a voter out of the reckoning, so a path
    // has at most as many moves as there are hosts; the bound holds that
    // should a move ever fail to.
    let most = voters.len() + standbys.len();
    // 1. The count.
    while w.set.len() < target && w.stages.len() < most {
        let need = if w.set.len() % 2 == 1 { 2 } else { 1 };
        if w.free.len() < need {
            short = Some(format!(
                "{target} voters configured, {} standing: the next step up needs {need} free standby at once, {} free",
                w.set.len(),
                w.free.len()
            ));
            break;
        }
        for _ in 0..need {
            let Some(incoming) = emptiest_standby(&w.set, &w.free) else {
                break;
            };
            let why = format!(
                "{target} voters configured, {} standing; {incoming}'s zone has the fewest voters",
                w.set.len()
            );
            w.push(Move::Grow { incoming }, why);
        }
    }
    while w.set.len() > target && w.stages.len() < most {
        // From an odd count two voters go, as one queued shrink, so that
        // no even count is left standing; tried first, and not taken when
        // a moment of it would lose quorum (the `shrink` command's
        // `quorum-after-removal` refuses the same).
        let need = if w.set.len() % 2 == 1 { 2 } else { 1 }.min(w.set.len() - target);
        let mut trial = w.clone();
        for _ in 0..need {
            let Some(out) = fullest_voter(&trial.set) else {
                break;
            };
            let why = format!("{target} voters configured, {} standing", trial.set.len());
            trial.push(Move::Shrink { out }, why);
        }
        if let Some(lost) = trial.stages[w.stages.len()..]
            .iter()
            .find(|st| st.lowest.may_fail.is_none())
        {
            short = Some(format!(
                "{target} voters configured, {} standing: {} would lose quorum ({}) while its host restarts as etcd-only",
                w.set.len(),
                lost.change.describe(),
                lost.lowest.describe()
            ));
            break;
        }
        if trial.stages.len() == w.stages.len() {
            break;
        }
        w = trial;
    }
    // 2. The spread.
    while w.stages.len() < most
        && let Some((out, incoming)) = spread_swap(&w.set, &w.free)
    {
        let why = format!(
            "{out}'s zone has two voters more than {incoming}'s: {}",
            spread(&w.set, &w.free).describe()
        );
        w.push(Move::Swap { out, incoming }, why);
    }
    Path {
        start,
        spread: spread_now,
        stages: w.stages,
        short,
    }
}

/// The voter set as a path is walked.
#[derive(Clone)]
struct Walker {
    set: Vec<Host>,
    free: Vec<Host>,
    at: Tolerance,
    stages: Vec<Stage>,
}

impl Walker {
    /// Takes `change`: counts its events, applies it, records the stage.
    fn push(&mut self, change: Move, why: String) {
        let out_healthy = match &change {
            Move::Shrink { out } | Move::Swap { out, .. } => {
                self.set.iter().any(|h| &h.name == out && h.healthy)
            }
            Move::Grow { .. } => true,
        };
        let (each, lowest) = walk(self.at, &change.events(out_healthy));
        self.at = each.last().copied().unwrap_or(self.at);
        apply(&mut self.set, &mut self.free, &change);
        self.stages.push(Stage {
            change,
            why,
            lowest,
            after: self.at,
            spread: spread(&self.set, &self.free),
        });
    }
}

/// `set` and `free` after `change`.
fn apply(set: &mut Vec<Host>, free: &mut Vec<Host>, change: &Move) {
    let take = |from: &mut Vec<Host>, name: &str| {
        from.iter()
            .position(|h| h.name == name)
            .map(|i| from.remove(i))
    };
    match change {
        Move::Grow { incoming } => {
            if let Some(h) = take(free, incoming) {
                set.push(h);
            }
        }
        Move::Shrink { out } => {
            // A host that left the voters rests before it stands by again.
            take(set, out);
        }
        Move::Swap { out, incoming } => {
            take(set, out);
            if let Some(h) = take(free, incoming) {
                set.push(h);
            }
        }
    }
}

/// Voters per zone.
fn per_zone(set: &[Host]) -> BTreeMap<&str, usize> {
    let mut m = BTreeMap::new();
    for h in set {
        *m.entry(h.zone()).or_default() += 1;
    }
    m
}

/// The standby of the zone with the fewest voters (ties: zone, then name).
fn emptiest_standby(set: &[Host], free: &[Host]) -> Option<String> {
    let zones = per_zone(set);
    free.iter()
        .min_by_key(|h| (zones.get(h.zone()).copied().unwrap_or(0), h.zone(), &h.name))
        .map(|h| h.name.clone())
}

/// The voter to shrink: a down one first, else one of the fullest zone
/// (ties: zone, then the last name, so the first-named voters stay).
fn fullest_voter(set: &[Host]) -> Option<String> {
    let zones = per_zone(set);
    set.iter()
        .max_by(|a, b| {
            let key = |h: &Host| (!h.healthy, zones.get(h.zone()).copied().unwrap_or(0));
            key(a)
                .cmp(&key(b))
                .then_with(|| b.zone().cmp(a.zone()))
                .then_with(|| a.name.cmp(&b.name))
        })
        .map(|h| h.name.clone())
}

/// A swap that evens the spread: a voter of the fullest zone for a standby
/// of the emptiest zone that has one, when the first holds at least two
/// voters more (after the swap they are no more than level, so no swap
/// is ever undone).
fn spread_swap(set: &[Host], free: &[Host]) -> Option<(String, String)> {
    let zones = per_zone(set);
    let count = |z: &str| zones.get(z).copied().unwrap_or(0);
    let incoming = free
        .iter()
        .min_by_key(|h| (count(h.zone()), h.zone(), &h.name))?;
    let out = set
        .iter()
        .filter(|h| h.zone() != incoming.zone())
        .max_by(|a, b| {
            (count(a.zone()), !a.healthy)
                .cmp(&(count(b.zone()), !b.healthy))
                .then_with(|| b.zone().cmp(a.zone()))
                .then_with(|| a.name.cmp(&b.name))
        })?;
    (count(out.zone()) >= count(incoming.zone()) + 2)
        .then(|| (out.name.clone(), incoming.name.clone()))
}

/// Whether `n` could stand in for a voter now, but for the rest a host
/// `run` replaced lately must take ([`crate::pacing::standby_ready_at`]):
/// an eligible, Ready, uncordoned agent with no server labels and no step
/// asked of it.
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
        .filter(|n| resting_until(v, n).is_none())
        .collect()
}

#[cfg(test)]
mod tests;
