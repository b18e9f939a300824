//! The invariants watched throughout the campaign, once a second:
//!
//! - a quorum read answers: no stall past [`STALL_BOUND`] unless the
//!   schedule itself has a member down (or had, within the bound);
//! - the voting members are never fewer than the fleet's voters nor more
//!   than one above (a swap adds its incoming voter before it removes the
//!   outgoing one; a member removed first, or two swaps at once, fire it).
//!   It replaced "at most one learner", which could not fire: etcd 3.6
//!   refuses a second learner itself;
//! - no datastore moved while its member could still vote: a host whose
//!   `server/db/etcd` is gone has no voting member in the list read after.
//!
//! The two k3s units never active together is read from each host's
//! journal at the end, which holds the whole campaign.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
    time::Instant,
};

use super::schedule::Budget;
use crate::{etcd_gw, spec::LabSpec};

/// The longest a quorum read may stall with no member down by the schedule.
pub const STALL_BOUND: Duration = Duration::from_secs(30);
/// One probe's bound.
const PROBE: Duration = Duration::from_secs(3);

/// What the watcher found.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    /// The broken invariants, each once per episode.
    pub violations: Vec<String>,
    /// The longest time no quorum read answered, in milliseconds.
    pub longest_stall_ms: u64,
    /// The fewest and the most voting members seen at once.
    pub voting_range: Option<(usize, usize)>,
}

/// The watcher, running until [`Watch::finish`].
pub struct Watch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Findings>,
}

/// The host a member belongs to (k3s names it `<node>-<8 hex>`).
pub fn host_of(member: &str) -> &str {
    member.rsplit_once('-').map_or(member, |(h, _)| h)
}

/// etcd's members now, through any host's member, each given [`PROBE`]
/// (none when no member answers).
pub async fn members(spec: &LabSpec) -> Option<Vec<etcd_gw::Member>> {
    crate::scenario::members_within(spec, PROBE).await.ok()
}

impl Watch {
    /// Starts watching `spec`'s hosts, a fleet of `voters` voters; `budget`
    /// says when the schedule has a member down; `tripped` is set at the
    /// first violation found (the findings come at [`Watch::finish`]).
    pub fn start(
        spec: LabSpec,
        budget: Arc<Mutex<Budget>>,
        voters: usize,
        tripped: Arc<AtomicBool>,
    ) -> anyhow::Result<Watch> {
        let endpoints: Vec<(String, etcd_gw::Endpoint)> = spec
            .hosts
            .iter()
            .map(|h| Ok((h.name.clone(), spec.etcd(h.ip)?)))
            .collect::<anyhow::Result<_>>()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let task =
            tokio::spawn(async move { watch(spec, endpoints, budget, voters, s, tripped).await });
        Ok(Watch { stop, task })
    }

    /// Stops it: what it found.
    pub async fn finish(self) -> Findings {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or_else(|e| Findings {
            violations: vec![format!("the watcher's task ended: {e}")],
            ..Default::default()
        })
    }
}

async fn watch(
    spec: LabSpec,
    endpoints: Vec<(String, etcd_gw::Endpoint)>,
    budget: Arc<Mutex<Budget>>,
    voters: usize,
    stop: Arc<AtomicBool>,
    tripped: Arc<AtomicBool>,
) -> Findings {
    let clock = clock::Clock::system();
    let mut f = Findings::default();
    let mut stall = Stall::new(clock.now());
    let mut count_said = false;
    let mut had_datastore: BTreeMap<String, bool> = BTreeMap::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let excused = budget.lock().expect("budget").member_down();
        // Datastores first, then the list: a move seen here happened
        // before the list was read.
        let datastore: BTreeMap<String, bool> = spec
            .hosts
            .iter()
            .map(|h| {
                let db = spec
                    .root(&h.name)
                    .join("var/lib/rancher/k3s/server/db/etcd");
                (h.name.clone(), db.exists())
            })
            .collect();
        if let Some(members) = &members(&spec).await {
            let voting = members.iter().filter(|m| !m.is_learner).count();
            f.voting_range = Some(f.voting_range.map_or((voting, voting), |(lo, hi)| {
                (lo.min(voting), hi.max(voting))
            }));
            let wrong = voting_out_of_range(members, voters);
            if let Some(w) = &wrong
                && !count_said
            {
                f.violations.push(w.clone());
            }
            count_said = wrong.is_some();
            f.violations
                .extend(moved_while_voting(&had_datastore, &datastore, members));
        }
        had_datastore = datastore;
        let mut answered = false;
        for (_, ep) in &endpoints {
            if etcd_gw::get_within(ep, "/chaos/probe", PROBE).await.is_ok() {
                answered = true;
                break;
            }
        }
        f.violations
            .extend(stall.observe(clock.now(), answered, excused));
        if !f.violations.is_empty() {
            tripped.store(true, Ordering::Relaxed);
        }
    }
    f.longest_stall_ms = stall.longest_ms;
    f
}

/// The hosts whose `server/db/etcd` was there at the last look and is
/// gone now while `members` (read after) still lists a voting member of
/// theirs: a datastore moved while its member could still vote.
pub fn moved_while_voting(
    before: &BTreeMap<String, bool>,
    now: &BTreeMap<String, bool>,
    members: &[etcd_gw::Member],
) -> Vec<String> {
    now.iter()
        .filter(|(host, has)| !**has && before.get(*host) == Some(&true))
        .filter_map(|(host, _)| {
            let m = members
                .iter()
                .find(|m| !m.is_learner && host_of(&m.name) == host)?;
            Some(format!(
                "{host}'s datastore moved while its member {} could still vote",
                m.name
            ))
        })
        .collect()
}

/// The violation when `members` hold fewer voting members than the
/// fleet's `voters`, or more than one above: one per episode (the caller
/// says it once until it clears).
pub fn voting_out_of_range(members: &[etcd_gw::Member], voters: usize) -> Option<String> {
    let voting: Vec<&str> = members
        .iter()
        .filter(|m| !m.is_learner)
        .map(|m| m.name.as_str())
        .collect();
    (voting.len() < voters || voting.len() > voters + 1).then(|| {
        format!(
            "{} voting members, the fleet has {voters}: {voting:?}",
            voting.len()
        )
    })
}

/// The quorum reads' stalls: the longest, and a violation once per stall
/// that lasts past [`STALL_BOUND`] from the last answer or the last moment
/// the schedule had a member down, whichever is later.
#[derive(Debug)]
pub struct Stall {
    last_ok: Instant,
    last_excused: Instant,
    said: bool,
    /// The longest time with no answer, in milliseconds.
    pub longest_ms: u64,
}

impl Stall {
    /// Watching from `now`.
    pub fn new(now: Instant) -> Stall {
        Stall {
            last_ok: now,
            last_excused: now,
            said: false,
            longest_ms: 0,
        }
    }

    /// One look at `now`: whether a quorum read answered, and whether the
    /// schedule has a member down; the violation, if this look makes one.
    pub fn observe(&mut self, now: Instant, answered: bool, excused: bool) -> Option<String> {
        if excused {
            self.last_excused = now;
        }
        let stalled = now.saturating_duration_since(self.last_ok);
        self.longest_ms = self
            .longest_ms
            .max(u64::try_from(stalled.as_millis()).unwrap_or(u64::MAX));
        if answered {
            self.last_ok = now;
            self.said = false;
            return None;
        }
        if self.said
            || now.saturating_duration_since(self.last_ok.max(self.last_excused)) <= STALL_BOUND
        {
            return None;
        }
        self.said = true;
        Some(format!(
            "no quorum read answered for {} s with no member down by the schedule",
            stalled.as_secs()
        ))
    }
}

#[cfg(test)]
mod tests;
