//! What each process sees of the simulated world when its watches lag:
//! the controller's view of every Node and of the report ConfigMap, and
//! each actuator's view of its own Node and of the regrade Lease, each a
//! few ticks behind the truth by its own lag. A watch delivers one
//! object's events in order, so a view never goes back, but different
//! objects lag differently: a Node's new marks beside an old report, a new
//! Lease beside an old Node. The controller reads its own writes (the
//! shell puts a write's answer into its store at once), and it writes a
//! Node as the shell does, a merge patch of the difference between the
//! Node it saw and the Node it wants, laid over whatever the Node is now.
//!
//! More in docs/internals.md, "fleetsim: views".

use std::collections::VecDeque;

use super::World;
use fleetdecide::{Action, FleetView, LeaseFacts, NodeFacts, node_after};
use protocol::{report::ReportStep, validate::SwapId};

/// The most ticks a watch lags behind the truth.
pub(super) const MAX_LAG: u8 = 3;

/// How many hosts' lags and clocks a drawing sets (a fleet has at most
/// eight Nodes in the simulation; more reuse them by index).
pub(super) const HOSTS: usize = 8;

/// The chaos drawn for one simulated swap, on top of [`super::Faults`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Chaos {
    /// Ticks the controller's watch of each Node (by index) lags.
    pub node_lag: [u8; HOSTS],
    /// Ticks the controller's watch of the report ConfigMap lags (one
    /// object: every host's report lags together).
    pub report_lag: u8,
    /// Ticks each actuator's watch of its own Node lags.
    pub host_node_lag: u8,
    /// Ticks each actuator's watch of the regrade Lease lags.
    pub host_lease_lag: u8,
    /// From these ticks this host (by index) crashes after its next
    /// step's effect and before it reports: the report stays as it was,
    /// the host as the effect left it, and the restarted actuator decides
    /// again.
    pub lost_report_at: [Option<(usize, usize)>; 3],
    /// From this tick, for this many ticks, the controller is frozen: no
    /// decision, no write, no renewal (its Lease may expire meanwhile).
    pub frozen: Option<(usize, usize)>,
    /// Each host's clock, in seconds ahead of the truth (behind when
    /// negative): within the skew margin, but for one host in some of the
    /// seeds with the API's failures (up to four margins off).
    pub skew: [i8; HOSTS],
    /// From this tick, for this many ticks, every write the controller
    /// makes fails before it reaches the API (its API server unreachable,
    /// or answering errors): nothing is written, and it decides again.
    pub api_out: Option<(usize, usize)>,
    /// The first write at or after this tick is carried out, and the
    /// controller is told it failed (its answer lost to a timeout): a
    /// Lease it took that way is one it does not know it holds.
    pub unacked_at: Option<usize>,
    /// From this tick, for this many ticks, this host (by index) is cut
    /// from the API: up, its k3s and its etcd member serving its peers,
    /// but its actuator and its kubelet can neither read nor write
    /// (`partition.rs`).
    pub cut: Option<(usize, usize, usize)>,
    /// This many ticks after each of [`super::Faults::down_at`]'s hosts
    /// went down, it comes back up (a reboot); `None`: it stays down.
    pub back_after: [Option<usize>; 3],
    /// From this tick the operator asks for the change to be aborted
    /// (`fleet-role abort`): the controller puts `abort_action` in front
    /// of `next_action`.
    pub abort_at: Option<usize>,
    /// For this many ticks from the change's first, no controller runs:
    /// the operator starts the change a while after the last one ended,
    /// and the faults drawn for it may come first.
    pub idle: usize,
}

impl Chaos {
    /// Whether any watch lags.
    pub fn lags(&self) -> bool {
        self.node_lag.iter().any(|l| *l > 0)
            || self.report_lag > 0
            || self.host_node_lag > 0
            || self.host_lease_lag > 0
    }

    /// Whether the controller's writes fail at `tick`.
    pub fn api_out_at(&self, tick: usize) -> bool {
        self.api_out
            .is_some_and(|(from, len)| tick >= from && tick < from + len)
    }

    /// Whether the controller is frozen at `tick`.
    pub fn frozen_at(&self, tick: usize) -> bool {
        self.frozen
            .is_some_and(|(from, len)| tick >= from && tick < from + len)
    }

    /// Whether host `index` is cut from the API at `tick`.
    pub fn cut_at(&self, tick: usize) -> Option<usize> {
        let (from, len, host) = self.cut?;
        (tick >= from && tick < from + len).then_some(host % HOSTS)
    }

    /// Which of [`Chaos::lost_report_at`] makes host `index` lose the
    /// report of a step it takes at `tick`, among those not `fired` yet.
    pub fn loses_report(&self, index: usize, tick: usize, fired: &[bool; 3]) -> Option<usize> {
        self.lost_report_at.iter().enumerate().find_map(|(k, at)| {
            let (t, h) = (*at)?;
            (!fired[k] && t <= tick && h % HOSTS == index % HOSTS).then_some(k)
        })
    }
}

/// The truth at the start of a tick.
#[derive(Debug, Clone)]
pub(super) struct Snapshot {
    tick: usize,
    nodes: Vec<NodeFacts>,
    lease: Option<LeaseFacts>,
}

/// The past the lagging watches read from, and the controller's own
/// writes it reads back.
#[derive(Debug, Clone, Default)]
pub(super) struct Past {
    snapshots: VecDeque<Snapshot>,
    /// The controller's last write of each Node: its tick and the Node the
    /// write's answer carried.
    pub own: Vec<Option<(usize, NodeFacts)>>,
    /// Which of the drawn crashes have happened.
    pub crashed: [bool; 3],
}

/// What the campaign counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Decisions the controller took (`next_action`).
    pub controller_steps: u64,
    /// Decisions the hosts took (`decide`).
    pub host_steps: u64,
    /// Node views the controller decided on that differed from the truth.
    pub stale_node_views: u64,
    /// Views an actuator decided on that differed from the truth.
    pub stale_host_views: u64,
    /// Reports lost to a crash after a step's effect.
    pub lost_reports: u64,
    /// Ticks the controller spent frozen.
    pub frozen_ticks: u64,
    /// The controller's writes that failed before reaching the API.
    pub failed_writes: u64,
    /// Writes carried out whose answer the controller lost.
    pub unacked_writes: u64,
    /// Ticks a host spent cut from the API while up.
    pub cut_ticks: u64,
    /// Decisions a host cut from the API took on its frozen views.
    pub cut_decisions: u64,
    /// Reports a host cut from the API kept in memory, unwritten, and
    /// wrote once it reached the API again.
    pub cut_reports: u64,
    /// Members removed while their host was up but cut from the API.
    pub cut_members_removed: u64,
    /// Hosts that came back up after a drawn span down.
    pub returns: u64,
    /// Changes played (a seed plays several in turn).
    pub changes: u64,
    /// Changes the operator asked to abort, and those the abort wound
    /// down (the others were past the point of no return).
    pub aborts: u64,
    pub aborts_wound_down: u64,
    /// Rollbacks asked of a voter etcd had promoted within the controller's
    /// lag, below quorum: the host's own check refuses each.
    pub stops_of_unseen_voters: u64,
}

impl Counts {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Counts) {
        self.controller_steps += other.controller_steps;
        self.host_steps += other.host_steps;
        self.stale_node_views += other.stale_node_views;
        self.stale_host_views += other.stale_host_views;
        self.lost_reports += other.lost_reports;
        self.frozen_ticks += other.frozen_ticks;
        self.failed_writes += other.failed_writes;
        self.unacked_writes += other.unacked_writes;
        self.cut_ticks += other.cut_ticks;
        self.cut_decisions += other.cut_decisions;
        self.cut_reports += other.cut_reports;
        self.cut_members_removed += other.cut_members_removed;
        self.returns += other.returns;
        self.changes += other.changes;
        self.aborts += other.aborts;
        self.aborts_wound_down += other.aborts_wound_down;
        self.stops_of_unseen_voters += other.stops_of_unseen_voters;
    }
}

/// Copies what the report ConfigMap holds of a host onto `node`.
fn take_report(node: &mut NodeFacts, from: &NodeFacts) {
    node.report = from.report.clone();
    node.report_protocol = from.report_protocol.clone();
    node.host = from.host.clone();
}

/// The truth's Node with the fields a controller's merge patch sets
/// (those that differ between `before` and `after`) laid over it.
fn merged(truth: &NodeFacts, before: &NodeFacts, after: &NodeFacts) -> NodeFacts {
    let mut n = truth.clone();
    macro_rules! lay {
        ($($field:ident).+) => {
            if before.$($field).+ != after.$($field).+ {
                n.$($field).+ = after.$($field).+.clone();
            }
        };
    }
    lay!(marks.desired_role);
    lay!(marks.swap);
    lay!(marks.step);
    lay!(marks.join_node);
    lay!(marks.snapshot_request);
    lay!(marks.protocol);
    lay!(cordoned);
    lay!(etcd_label);
    lay!(control_plane_label);
    lay!(master_label);
    lay!(etcd_is_voter);
    // k3s's annotations, each its own key in the patch.
    lay!(k3s.node_name);
    lay!(k3s.node_address);
    lay!(k3s.remove);
    lay!(k3s.removed_node_name);
    n
}

// === The World's lagging views ===

/// Keeps the truth at the start of `tick` for the lagging watches.
pub(super) fn remember(w: &mut World, tick: usize) {
    w.tick = tick;
    if !w.faults.chaos.lags() {
        return;
    }
    let past = &mut w.past;
    past.snapshots.push_back(Snapshot {
        tick,
        nodes: w.v.nodes.clone(),
        lease: w.v.lease.clone(),
    });
    while past.snapshots.len() > usize::from(MAX_LAG) {
        past.snapshots.pop_front();
    }
}

/// The snapshot `lag` ticks back (`None` for the truth itself).
fn back(w: &World, lag: u8) -> Option<&Snapshot> {
    if lag == 0 {
        return None;
    }
    let want = (w.tick + 1).saturating_sub(usize::from(lag));
    let s = &w.past.snapshots;
    s.iter().find(|x| x.tick >= want).or(s.back())
}

/// The controller's view: each Node by its own lag (or as its last
/// write left it, when that is newer), the reports by theirs.
pub(super) fn controller_view(w: &mut World) -> FleetView {
    let c = w.faults.chaos;
    if !c.lags() {
        return w.v.clone();
    }
    let mut v = w.v.clone();
    let reports = back(w, c.report_lag).map(|s| s.nodes.clone());
    for (i, n) in v.nodes.iter_mut().enumerate() {
        let lagged = back(w, c.node_lag[i % HOSTS]);
        let (from, tick) = match lagged {
            Some(s) => (s.nodes.get(i).cloned(), s.tick),
            None => (None, usize::MAX),
        };
        let own = w.past.own.get(i).cloned().flatten();
        let seen = match (from, own) {
            (_, Some((w, node))) if w >= tick && tick != usize::MAX => Some(node),
            (Some(node), _) => Some(node),
            (None, _) => None,
        };
        if let Some(mut node) = seen.filter(|x| x.name == n.name) {
            take_report(&mut node, n);
            *n = node;
        }
        if let Some(old) = reports.as_ref().and_then(|r| r.get(i)) {
            take_report(n, old);
        }
    }
    let stale = v
        .nodes
        .iter()
        .zip(&w.v.nodes)
        .filter(|(a, b)| a != b)
        .count();
    w.counts.stale_node_views += stale as u64;
    v
}

/// Carries out a Node write the controller decided on `view` as the
/// shell does: the difference between the Node it saw and the Node it
/// wants, over the Node as it is; the answer goes into its store.
pub(super) fn patch_node(w: &mut World, view: &FleetView, name: &str, a: &Action) {
    let truth = w.node(name).clone();
    let before = view.node(name).cloned().unwrap_or_else(|| truth.clone());
    let after = node_after(&before, a).expect("a Node write");
    let written = merged(&truth, &before, &after);
    *w.node(name) = written.clone();
    if let Some(i) = w.v.nodes.iter().position(|n| n.name == name) {
        if w.past.own.len() <= i {
            w.past.own.resize(i + 1, None);
        }
        w.past.own[i] = Some((w.tick, written));
    }
}

/// What the actuator on `name` sees: its Node by its lag (with its own
/// report, which it wrote), the Lease by its lag, and the tick of the
/// Lease it sees (the truth's for no lag).
pub(super) fn host_view(w: &mut World, name: &str) -> (NodeFacts, Option<LeaseFacts>, usize) {
    let c = w.faults.chaos;
    let truth = w.v.node(name).cloned().expect("a host has a Node");
    let mut node = truth.clone();
    if let Some(s) = back(w, c.host_node_lag)
        && let Some(old) = s.nodes.iter().find(|n| n.name == name)
    {
        node = old.clone();
        take_report(&mut node, &truth);
    }
    let (lease, tick) = match back(w, c.host_lease_lag) {
        Some(s) => (s.lease.clone(), s.tick),
        None => (w.v.lease.clone(), usize::MAX),
    };
    if node != truth || lease != w.v.lease {
        w.counts.stale_host_views += 1;
    }
    (node, lease, tick)
}

/// Whether `name` went down too recently for the controller's views to
/// show it: within the lag of its Node's watch or of the reports'.
pub(super) fn down_unseen(w: &World, name: &str) -> bool {
    let c = &w.faults.chaos;
    let Some(since) = w.hosts.get(name).and_then(|h| h.down_since) else {
        return false;
    };
    let i = w.v.nodes.iter().position(|n| n.name == name).unwrap_or(0);
    let lag = c.node_lag[i % HOSTS].max(c.report_lag);
    lag > 0 && since + usize::from(lag) + 1 > w.tick
}

/// Whether etcd promoted `name`'s member too recently for the
/// controller's views to show it: within the lag of its Node's watch or of
/// the reports'.
pub(super) fn promoted_unseen(w: &World, name: &str) -> bool {
    let c = &w.faults.chaos;
    let Some(since) = w.hosts.get(name).and_then(|h| h.voted_since) else {
        return false;
    };
    let i = w.v.nodes.iter().position(|n| n.name == name).unwrap_or(0);
    let lag = c.node_lag[i % HOSTS].max(c.report_lag);
    lag > 0 && since + usize::from(lag) + 1 > w.tick
}

/// Whether the controller's last ask of `name`, among its writes made
/// before `tick` (all of them for `usize::MAX`), was `step` for `swap`:
/// a host acts on what the controller asked of it as of the Lease it
/// sees, whatever else its Node's marks say.
pub(super) fn asked_by(
    w: &World,
    name: &str,
    swap: Option<&SwapId>,
    step: ReportStep,
    tick: usize,
) -> bool {
    let last = w
        .writes
        .iter()
        .zip(&w.write_ticks)
        .rev()
        .filter(|(_, t)| tick == usize::MAX || **t < tick)
        .map(|(a, _)| a)
        .find(|a| a.node().is_some_and(|n| n.as_str() == name) && a.writes_lease_first());
    let (kind, asked_swap) = match last {
        Some(Action::RequestSnapshot { swap, .. }) => (ReportStep::Snapshot, swap),
        Some(Action::Promote { swap, .. }) => (ReportStep::Promote, swap),
        Some(Action::StepDown { swap, .. }) => (ReportStep::StepDown, swap),
        Some(Action::Rollback { swap, .. }) => (ReportStep::Rollback, swap),
        _ => return false,
    };
    kind == step && Some(asked_swap) == swap
}

#[test]
fn a_write_decided_on_a_stale_node_sets_only_the_fields_it_changes_over_the_node_as_it_is() {
    use fleetdecide::fixtures::voter;
    let seen = voter("v1", 1);
    // Since the controller saw it, k3s marked the member removed and the
    // host's kubelet went NotReady.
    let mut truth = seen.clone();
    truth.k3s.removed_node_name = Some("v1-00aa11bb".into());
    truth.ready = false;
    let a = Action::Cordon {
        node: protocol::validate::NodeName::parse("v1").unwrap(),
    };
    let after = node_after(&seen, &a).unwrap();
    let written = merged(&truth, &seen, &after);
    assert!(written.cordoned);
    assert_eq!(
        written.k3s.removed_node_name.as_deref(),
        Some("v1-00aa11bb")
    );
    assert!(!written.ready);
}
