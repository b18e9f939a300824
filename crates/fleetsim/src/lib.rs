//! The whole swap in a simulated world: the hosts run the real `decide`
//! and report the real milestones, k3s is played by a few rules, and the
//! controller's writes are carried out with the shell's own effects
//! (`effects.rs`). The scenarios and the property tests live beside it.
#![cfg(test)]

mod campaign;
mod etcd;
mod invariants;
mod partition;
mod properties;
mod resize;
mod scenarios;
mod views;

use std::collections::BTreeMap;

use fleetdecide::{fixtures::node_mut, *};
use hostdecide::{
    decide::{Decision, HostState, JoinTarget, LeaseCheck, Observation, Step, decide, lease_holds},
    milestones::after_host_part,
    rollback_stop,
};
use protocol::{
    clock_offset::ClockOffset,
    etcd::{Member, MemberId},
    report::{Detail, Phase, Report, ReportStep},
    validate::{Role, SwapId},
};

// === The whole swap in a simulated world ===

/// The actuator's heartbeat period, in seconds (its default).
const HEARTBEAT: i64 = 60;

/// A host as the simulation keeps it.
#[derive(Debug, Clone, Default)]
struct Host {
    role: Option<Role>,
    datastore: bool,
    tombstone: bool,
    /// k3s up (the host is not down).
    up: bool,
    /// etcd lists a member of this host: k3s joined it and no removal took
    /// it out. The truth, whatever the Node's labels say (others can write
    /// them: an agent dressed as a voter has none).
    member: bool,
    /// etcd promoted its member to a voter, whether or not k3s marked the
    /// Node `EtcdIsVoter`.
    votes: bool,
    /// The tick a fault took it down.
    down_since: Option<usize>,
    /// The tick etcd promoted its member (its first, for a host that
    /// voted from the start: none).
    voted_since: Option<usize>,
}

/// What can go wrong.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    promotion_stalls: bool,
    /// etcd promotes the learner, but k3s never marks its Node
    /// `EtcdIsVoter` (the etcd leader's k3s could not write it).
    voter_unmarked: bool,
    promotion_fails: bool,
    step_down_fails: bool,
    snapshot_fails: bool,
    /// At these ticks, these Nodes go NotReady (their hosts down).
    down_at: [Option<(usize, usize)>; 3],
    /// At this tick the controller is killed and a new one started.
    restart_at: Option<usize>,
    /// At this tick someone else takes the Lease.
    steal_at: Option<usize>,
    /// Seconds each tick advances the clock.
    tick_secs: i64,
    /// No host can read etcd (its own member or another server's): only
    /// a tombstone says a member is gone.
    etcd_unread: bool,
    /// At this tick a `patch nodes` holder copies the Lease's swap id onto
    /// a Node with a step of its choosing: (tick, which Node, which step).
    intruder_at: Option<(usize, usize, Intrusion)>,
    /// Lagging watches, crashes between an effect and its report, a frozen
    /// controller, skewed clocks (`views.rs`).
    chaos: views::Chaos,
}

/// The marks a `patch nodes` holder writes, copying the swap's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Intrusion {
    Promote,
    StepDown,
    Rollback,
    Snapshot,
    /// A `nodes/status` writer (node-problem-detector's role) holds the
    /// Node's `Ready` at False from then on, its host up all along.
    ForgedNotReady,
    /// An agent dressed as a voter: k3s's etcd label (a `patch nodes`
    /// holder) and `EtcdIsVoter` (its kubelet), no member behind them.
    DressedAsVoter,
}

/// How a simulated swap ended, in a word or few: the campaign's summary
/// and the property tests' check that random worlds reach every ending.
fn ending(a: &Action) -> &'static str {
    match a {
        Action::Refuse { .. } => "refused",
        Action::ReleaseLease {
            outcome: Outcome::Done { warning: None },
        } => "done",
        Action::ReleaseLease {
            outcome: Outcome::Done { .. },
        } => "done with a warning",
        Action::ReleaseLease {
            outcome: Outcome::WoundDown { .. },
        } => "wound down",
        Action::Stop {
            step: SwapStep::Rollback,
            ..
        } => "stopped before a rollback",
        Action::Stop { .. } => "stopped",
        Action::Lost { .. } => "lost its Lease",
        _ => "other",
    }
}

struct World {
    v: FleetView,
    hosts: BTreeMap<String, Host>,
    faults: Faults,
    /// Every write the controller made, in order.
    writes: Vec<Action>,
    /// The tick each of `writes` was made at.
    write_ticks: Vec<usize>,
    /// Quorum violations seen at the moment a removal was asked.
    violations: Vec<String>,
    /// The Node whose `Ready` a `nodes/status` writer holds at False.
    forged_not_ready: Option<String>,
    /// The tick being played.
    tick: usize,
    /// The past the lagging watches read.
    past: views::Past,
    /// What happened, counted.
    counts: views::Counts,
    /// Whether the write whose answer is lost (`Chaos::unacked_at`) was made.
    unacked: bool,
    /// The tick the change being played began at: the faults' ticks count
    /// from it.
    start: usize,
    /// The tick the next change begins at.
    next: usize,
    /// Whether the operator's abort wound the change down.
    aborted: bool,
    /// The host cut from the API, if one is (`partition.rs`).
    cut: Option<partition::Cut>,
    /// The last tick each host was down or cut from the API.
    unreachable: BTreeMap<String, usize>,
    /// etcd's voters before the swap recorded on the Lease began, and that
    /// tick (the campaign's check of a wind-down).
    baseline: Option<(usize, std::collections::BTreeSet<String>)>,
    /// The last tick each host was cut from the API.
    cut_seen: BTreeMap<String, usize>,
}

impl World {
    fn new(v: FleetView, faults: Faults) -> Self {
        let hosts = v
            .nodes
            .iter()
            .map(|n| {
                let server = n.etcd_label;
                (
                    n.name.clone(),
                    Host {
                        role: Some(if server { Role::Server } else { Role::Agent }),
                        datastore: server,
                        tombstone: false,
                        up: n.ready,
                        member: n.has_member(),
                        votes: n.has_member() && n.etcd_is_voter,
                        down_since: None,
                        voted_since: None,
                    },
                )
            })
            .collect();
        let mut w = Self {
            v,
            hosts,
            faults,
            writes: Vec::new(),
            write_ticks: Vec::new(),
            violations: Vec::new(),
            forged_not_ready: None,
            tick: 0,
            past: views::Past::default(),
            counts: views::Counts::default(),
            unacked: false,
            start: 0,
            next: 0,
            aborted: false,
            cut: None,
            unreachable: BTreeMap::new(),
            baseline: None,
            cut_seen: BTreeMap::new(),
        };
        w.report_etcd();
        w
    }

    /// The hosts' actuators report etcd's view: each up one with a member;
    /// an up one without reads none; a down host's view goes stale.
    fn report_etcd(&mut self) {
        let cut = self.cut.as_ref().map(|c| c.name.as_str());
        etcd::report(&mut self.v, &self.hosts, cut);
    }

    fn node(&mut self, name: &str) -> &mut NodeFacts {
        node_mut(&mut self.v, name)
    }

    /// Carries out a controller's write, decided on `view`, with the
    /// shell's own effects.
    fn write(&mut self, view: &FleetView, a: &Action, s: &mut SwapState) {
        self.writes.push(a.clone());
        self.write_ticks.push(self.tick);
        let writer = Writer {
            identity: &self.v.settings.names.controller_identity,
            instance: &s.instance,
            lease_duration: self.v.settings.lease_duration,
            now: self.v.now,
        };
        let lease_written = lease_after(self.v.lease.as_ref(), a, writer);
        let wrote_lease = lease_written.is_some();
        if let Some(after) = lease_written {
            self.v.lease = Some(after);
            if let Action::TakeLease { swap, .. } = a {
                s.taken = Some(swap.clone());
            }
        }
        // A snapshot request writes the Lease (its voter named) and then
        // the Node, as the shell does.
        let Some(node) = a.node().map(ToString::to_string) else {
            assert!(wrote_lease, "a write to the Lease or a Node: {a:?}");
            return;
        };
        if let Action::RemoveMember { .. } = a {
            self.check_quorum(&node);
            self.check_never_down(&node);
        }
        if let Action::Rollback { .. } = a {
            self.check_stop_quorum(&node);
        }
        views::patch_node(self, view, &node, a);
    }

    /// The truth about etcd: the members that vote, how many of them are
    /// healthy (the host up with its datastore, no tombstone), and whether
    /// `node` is one of them and one of those healthy. Counted on the
    /// hosts alone, never on their Nodes: k3s's etcd label, `EtcdIsVoter`
    /// and `Ready` are written by others too (a `patch nodes` or
    /// `nodes/status` holder), and etcd's quorum is its members' (an agent
    /// dressed as a voter adds none, a host forged NotReady still serves).
    /// A host that went down more recently than the controller's watches
    /// could show counts as up: that race is no observer's to win (a real
    /// Node turns NotReady only 40 s after its kubelet stops), and etcd's
    /// own check refuses a removal without a quorum of started members.
    fn voters_truth(&self, node: &str) -> (usize, usize, Option<bool>) {
        let (mut members, mut healthy, mut of_node) = (0, 0, None);
        for n in &self.v.nodes {
            let h = &self.hosts[&n.name];
            if !(h.member && h.votes) {
                continue;
            }
            let up = (h.up || views::down_unseen(self, &n.name))
                && h.role.is_some()
                && !h.tombstone
                && h.datastore;
            members += 1;
            healthy += usize::from(up);
            if n.name == node {
                of_node = Some(up);
            }
        }
        (members, healthy, of_node)
    }

    /// A member is removed ahead of its host's step-down only when that
    /// host is really down: a host up all along whose role file still names
    /// the server (no step-down, no rollback) and whose member votes was
    /// taken for down on evidence another principal wrote.
    fn check_never_down(&mut self, removing: &str) {
        let Some(h) = self.hosts.get(removing) else {
            return;
        };
        if self.reached_lately(removing) || partition::lately_cut_and_looking_down(self, removing) {
            // Down, or cut from the API long enough to look down
            // (`partition::looks_down`), within the controller's lag: its
            // Node's NotReady and its stale report are no other
            // principal's word, and the removal is the quorum check's.
            if h.up && h.votes {
                self.counts.cut_members_removed += u64::from(partition::is_cut(self, removing));
            }
            return;
        }
        if h.up && h.down_since.is_none() && h.role == Some(Role::Server) && h.datastore && h.votes
        {
            let cut = if partition::is_cut(self, removing) {
                " (cut from the API, its own view of etcd still trusted)"
            } else {
                ""
            };
            self.violations.push(format!(
                "removing {removing}'s member, its host up{cut} and a voter, with no step-down at {}",
                self.v.now
            ));
        }
    }

    /// Whether `name` was down (or cut from the API and looking down) at
    /// some tick the controller's lagging views may still show.
    fn reached_lately(&self, name: &str) -> bool {
        self.unreachable
            .get(name)
            .is_some_and(|t| t + usize::from(views::MAX_LAG) + 1 >= self.tick)
    }

    /// At the moment a removal is asked, the healthy voters left must be
    /// a quorum of the members left.
    fn check_quorum(&mut self, removing: &str) {
        let (m, h) = match self.voters_truth(removing) {
            (m, h, Some(up)) => (m - 1, h - usize::from(up)),
            (m, h, None) => (m, h),
        };
        if !keeps_quorum(m, h) {
            self.violations.push(format!(
                "removing {removing} left {h} healthy of {m} at {}",
                self.v.now
            ));
        }
    }

    /// At the moment a voting host is asked to stop (a rollback: its
    /// member is removed only after), the healthy voters left must be a
    /// quorum of all the voting members. A host that does not vote, or is
    /// down already, takes nothing away.
    ///
    /// A learner etcd promotes within the controller's lag is still the
    /// learner it saw, and the rollback is asked of a voter: such an ask is
    /// counted, not failed; the host's own check before the stop refuses
    /// it below quorum ([`World::check_host_stop_quorum`] holds that).
    fn check_stop_quorum(&mut self, stopping: &str) {
        let (m, h, of_node) = self.voters_truth(stopping);
        if of_node == Some(true) && !keeps_quorum(m, h - 1) {
            if views::promoted_unseen(self, stopping) {
                self.counts.stops_of_unseen_voters += 1;
                return;
            }
            self.violations.push(format!(
                "stopping {stopping} left {} healthy of {m} at {}",
                h - 1,
                self.v.now
            ));
        }
    }

    /// The actuator's check before a rollback stops its server
    /// (`hostdecide::rollback_stop`), on etcd's truth: every member with
    /// its vote, each voter healthy as [`World::voters_truth`] counts it.
    fn rollback_may_stop(&self, name: &str) -> Result<(), rollback_stop::StopRefused> {
        let mut members = Vec::new();
        let mut health = Vec::new();
        let mut own = None;
        for (i, n) in self.v.nodes.iter().enumerate() {
            let h = &self.hosts[&n.name];
            if !h.member {
                continue;
            }
            let id = MemberId(i as u64 + 1);
            members.push(Member {
                id,
                name: format!("{}-00aa11bb", n.name),
                peer_urls: vec![],
                client_urls: vec![],
                learner: !h.votes,
            });
            let up = (h.up || views::down_unseen(self, &n.name))
                && h.role.is_some()
                && !h.tombstone
                && h.datastore;
            health.push((id, up));
            if n.name == name {
                own = Some(id);
            }
        }
        rollback_stop::may_stop(&members, own, &health)
    }

    /// At the moment a host's server stops for a rollback, a member of its
    /// that votes leaves a healthy quorum of all the voting members: the
    /// controller's gate reads views that lag etcd, the host's own check
    /// reads etcd (seeds 51762 and 109612 found the lag).
    fn check_host_stop_quorum(&mut self, stopping: &str) {
        let (m, h, of_node) = self.voters_truth(stopping);
        if of_node == Some(true) && !keeps_quorum(m, h - 1) {
            self.violations.push(format!(
                "stopping {stopping} (its rollback) left {} healthy of {m} at {}",
                h - 1,
                self.v.now
            ));
        }
    }

    /// etcd adds a member only while every voter is reachable (its own
    /// voters: a Node dressed as one is none).
    fn etcd_accepts_a_member(&self) -> bool {
        self.hosts
            .values()
            .all(|h| !(h.member && h.votes) || etcd::serves(h))
    }

    /// One round of the hosts (through the real `decide`) and k3s.
    fn react(&mut self) {
        let now = self.v.now;
        let names: Vec<String> = self.v.nodes.iter().map(|n| n.name.clone()).collect();
        for name in &names {
            self.react_host(name, now);
        }
        // k3s: the member-removal controller, and promotion of learners.
        for name in &names {
            let n = self.node(name);
            if n.k3s.remove_requested()
                && n.etcd_label
                && n.k3s.node_name.is_some()
                && !n.member_gone()
            {
                n.k3s.removed_node_name = n.k3s.node_name.take();
                n.k3s.node_address = None;
                let h = self.hosts.get_mut(name).unwrap();
                h.tombstone = true;
                h.member = false;
                h.votes = false;
            }
        }
        // Kubelets renew their node Leases. A host whose server waits to
        // join etcd runs no kubelet (its agent is stopped, and k3s starts
        // the server's once etcd is ready).
        for name in &names {
            let h = &self.hosts[name];
            let joining = h.role == Some(Role::Server) && !h.member;
            let up = h.up && !joining;
            let forged = self.forged_not_ready.as_deref() == Some(name.as_str());
            let cut = partition::is_cut(self, name);
            let n = self.node(name);
            if cut && up {
                partition::kubelet(n, now);
                continue;
            }
            n.ready = up && !forged;
            if up {
                n.lease_renewed_at = Some(now);
            }
        }
        self.report_etcd();
        self.heartbeats(now);
    }

    /// Each up actuator that reaches the API writes its heartbeat (the
    /// report's host part) once per period, by its own clock.
    fn heartbeats(&mut self, now: i64) {
        for i in 0..self.v.nodes.len() {
            let name = &self.v.nodes[i].name;
            if !self.hosts[name].up || partition::is_cut(self, name) {
                continue;
            }
            let t = now + i64::from(self.faults.chaos.skew[i % views::HOSTS]);
            if let Some(h) = self.v.nodes[i].host.as_mut()
                && t.saturating_sub(h.heartbeat_at) >= HEARTBEAT
            {
                h.heartbeat_at = t;
            }
        }
    }

    fn react_host(&mut self, name: &str, now: i64) {
        let host = self.hosts[name].clone();
        if !host.up {
            return;
        }
        let index = self.v.nodes.iter().position(|x| x.name == name).unwrap();
        let server_now = now;
        let now = now + i64::from(self.faults.chaos.skew[index % views::HOSTS]);
        // The offset the host's heartbeat measured against the API server
        // (whose clock is the truth here), to the second as the server
        // stamps its writes.
        let clock = ClockOffset::of_write(now * 1000, now * 1000, server_now);
        if partition::is_cut(self, name) {
            partition::react(self, name, &host, now, clock);
            return;
        }
        // What the truth is (k3s's part is played on it), and what the
        // actuator's watches show it.
        let n = self.v.node(name).unwrap().clone();
        let (seen, lease, lease_tick) = views::host_view(self, name);
        let join = match n.marks.join_node.as_deref().and_then(|j| self.v.node(j)) {
            Some(j) => JoinTarget::Found {
                address: j.k3s.node_address.clone(),
            },
            None if n.marks.join_node.is_some() => JoinTarget::Missing,
            None => JoinTarget::NotLooked,
        };
        let decision = self.decide_on(
            name,
            &host,
            now,
            clock,
            &seen,
            lease.as_ref(),
            n.report.as_ref(),
            &join,
        );
        let prev = n.report.clone();
        if let Decision::Take {
            swap: Some(swap),
            step,
            resume,
        } = &decision
            && step.report_step() != ReportStep::Finish
        {
            // The actuator reads the Lease again once it holds the host
            // lock, by its own clock: a step whose Lease lapsed meanwhile
            // changes nothing and reports nothing past `started`.
            let rstep = step.report_step();
            let held = lease_holds(&LeaseCheck {
                lease: self.v.lease.as_ref(),
                identity: &self.v.settings.names.controller_identity,
                swap,
                node: name,
                step: rstep,
                now,
                skew_margin: self.v.settings.skew_margin,
                clock,
            });
            if held.is_err() {
                if !resume {
                    let r = Report::next(
                        prev.as_ref(),
                        Some(swap.clone()),
                        rstep,
                        Phase::Started,
                        now,
                    );
                    self.node(name).report = Some(r);
                }
                return;
            }
            // Whatever the host's clock and views said, the step acts
            // while the controller's Lease truly holds.
            let truth = self.v.now;
            if !self.v.lease.as_ref().is_some_and(|l| l.valid_at(truth, 0)) {
                self.violations.push(format!(
                    "{name} acted on {} for {swap} at {truth} with the Lease lapsed",
                    rstep.as_str()
                ));
            }
        }
        if let Decision::Take {
            swap,
            step,
            resume: false,
        } = &decision
        {
            self.check_take(
                name,
                &host,
                swap.as_ref(),
                step.report_step(),
                lease_tick,
                now,
            );
        }
        let crash = match decision {
            Decision::Take { .. } => {
                let fired = &self.past.crashed;
                self.faults
                    .chaos
                    .loses_report(index, self.tick - self.start, fired)
            }
            _ => None,
        };
        self.carry_out(name, decision, now, prev.as_ref());
        if let Some(k) = crash
            && self.v.node(name).unwrap().report != prev
        {
            self.node(name).report = prev;
            self.past.crashed[k] = true;
            self.counts.lost_reports += 1;
        }
    }

    /// The real `decide` on what the actuator on `name` sees and holds.
    #[allow(clippy::too_many_arguments)]
    fn decide_on(
        &mut self,
        name: &str,
        host: &Host,
        now: i64,
        clock: Option<ClockOffset>,
        seen: &NodeFacts,
        lease: Option<&LeaseFacts>,
        report: Option<&Report>,
        join: &JoinTarget,
    ) -> Decision {
        self.counts.host_steps += 1;
        decide(&Observation {
            now,
            node: seen,
            lease,
            report,
            host: HostState {
                role: host.role,
                datastore: host.datastore,
                tombstone: host.tombstone,
                member: host.datastore.then(|| format!("{name}-00aa11bb")),
                // A reading of etcd, as the actuator makes it (locally, or
                // through another server once its own etcd is gone).
                etcd_lists_member: (!self.faults.etcd_unread).then_some(host.member),
            },
            join,
            identity: &self.v.settings.names.controller_identity,
            skew_margin: self.v.settings.skew_margin,
            clock,
            join_port: 6443,
        })
    }

    /// A new step a host takes must be one the controller asked of it as
    /// of the Lease it saw (written before `lease_tick`), and a promotion
    /// or a finish never goes over a datastore whose member votes.
    fn check_take(
        &mut self,
        name: &str,
        host: &Host,
        swap: Option<&SwapId>,
        rstep: ReportStep,
        lease_tick: usize,
        now: i64,
    ) {
        if rstep != ReportStep::Finish && !views::asked_by(self, name, swap, rstep, lease_tick) {
            self.violations.push(format!(
                "{name} took {} for {swap:?}, which the controller did not ask of it, at {now}",
                rstep.as_str()
            ));
        }
        if (rstep == ReportStep::Finish
            || (rstep == ReportStep::Promote && host.role != Some(Role::Server)))
            && host.datastore
            && host.member
        {
            self.violations.push(format!(
                "{name} took {} over a datastore whose member votes, at {now}",
                rstep.as_str()
            ));
        }
    }

    /// Carries out `decision` on `name`'s host.
    fn carry_out(&mut self, name: &str, decision: Decision, now: i64, prev: Option<&Report>) {
        let next =
            |swap: Option<SwapId>, step: ReportStep, phase: Phase, detail: Option<Detail>| {
                let mut r = Report::next(prev, swap, step, phase, now);
                if detail.is_some() {
                    r.detail = detail;
                }
                r
            };
        let faults = self.faults;
        match decision {
            Decision::Refuse { swap, step, reason } => {
                let r = next(swap, step, Phase::Refused, None).with_reason(reason);
                self.node(name).report = Some(r);
            }
            Decision::Take { swap, step, resume } => match step {
                Step::Snapshot => {
                    if faults.snapshot_fails {
                        let r = next(swap, ReportStep::Snapshot, Phase::Failed, None)
                            .with_reason("disk full");
                        self.node(name).report = Some(r);
                    } else {
                        self.milestones(name, swap.clone(), &step);
                        let file = format!("snap-{}", swap.unwrap());
                        self.node(name).report.as_mut().unwrap().snapshot_file = Some(file);
                    }
                }
                Step::Promote { .. } if !self.hosts[name].member => {
                    // k3s joins a host with no member (whatever labels others
                    // wrote on its Node). The plan's changes, each
                    // idempotent: a resumed step makes those left (a first
                    // try the Lease's fresh read stopped made none).
                    let h = self.hosts.get_mut(name).unwrap();
                    if h.role != Some(Role::Server) || !h.datastore {
                        h.role = Some(Role::Server);
                        h.datastore = true;
                        h.tombstone = false;
                        h.votes = false;
                    }
                    if !resume {
                        if faults.promotion_fails {
                            let r = next(swap, ReportStep::Promote, Phase::Failed, None)
                                .with_reason("k3s did not start");
                            self.node(name).report = Some(r);
                            return;
                        }
                        self.node(name).report = Some(next(
                            swap.clone(),
                            ReportStep::Promote,
                            Phase::Started,
                            None,
                        ));
                    }
                    // etcd's strict reconfiguration check: no member is
                    // added while a voter is unreachable (k3s retries).
                    if !self.etcd_accepts_a_member() {
                        return;
                    }
                    self.hosts.get_mut(name).unwrap().member = true;
                    let n = self.node(name);
                    n.etcd_label = true;
                    n.control_plane_label = true;
                    n.master_label = true;
                    n.k3s.node_name = Some(format!("{name}-00aa11bb"));
                    n.k3s.node_address = Some("10.0.0.99".into());
                    n.k3s.removed_node_name = None;
                    n.k3s.remove = None;
                    n.etcd_is_voter = false;
                    self.milestones(name, swap, &step);
                }
                Step::Promote { .. } => {
                    if faults.promotion_stalls {
                        return;
                    }
                    let tick = self.tick;
                    let h = self.hosts.get_mut(name).unwrap();
                    h.voted_since.get_or_insert(tick);
                    h.votes = true;
                    if faults.voter_unmarked {
                        return;
                    }
                    self.node(name).etcd_is_voter = true;
                    self.milestones(name, swap, &step);
                }
                Step::StepDown => {
                    if faults.step_down_fails {
                        let r = next(swap, ReportStep::StepDown, Phase::Failed, None)
                            .with_reason("etcd did not serve again");
                        self.node(name).report = Some(r);
                    } else {
                        self.hosts.get_mut(name).unwrap().role = Some(Role::Agent);
                        self.milestones(name, swap, &step);
                    }
                }
                Step::Rollback => {
                    if let Err(why) = self.rollback_may_stop(name) {
                        let r = next(swap, ReportStep::Rollback, Phase::Failed, None)
                            .with_reason(why.to_string());
                        self.node(name).report = Some(r);
                        return;
                    }
                    self.check_host_stop_quorum(name);
                    let h = self.hosts.get_mut(name).unwrap();
                    h.role = Some(Role::Agent);
                    h.datastore = false;
                    self.milestones(name, swap, &step);
                }
                Step::Finish => {
                    let h = self.hosts.get_mut(name).unwrap();
                    h.role = Some(Role::Agent);
                    h.datastore = false;
                    self.milestones(name, swap, &step);
                }
            },
            Decision::Wait { .. } | Decision::Nothing => {}
        }
    }

    /// A `patch nodes` holder copies the swap's id onto a Node with marks
    /// of its choosing (the Lease itself it cannot write).
    fn intrude(&mut self, which: usize, what: Intrusion) {
        let target = self.v.nodes[which % self.v.nodes.len()].name.clone();
        match what {
            Intrusion::ForgedNotReady => {
                self.forged_not_ready = Some(target);
                return;
            }
            Intrusion::DressedAsVoter => {
                let n = self.node(&target);
                if !n.has_member() {
                    n.etcd_label = true;
                    n.etcd_is_voter = true;
                }
                return;
            }
            _ => {}
        }
        let Some(swap) = self.v.lease.as_ref().and_then(|l| l.swap.clone()) else {
            return;
        };
        let join = self
            .v
            .nodes
            .iter()
            .find(|n| n.etcd_label)
            .map(|n| n.name.clone());
        let m = &mut self.node(&target).marks;
        m.protocol = Some(protocol::version::mark());
        let (step, role) = match what {
            Intrusion::Snapshot => {
                m.snapshot_request = Some(swap);
                return;
            }
            Intrusion::Promote => ("promote", "server"),
            Intrusion::StepDown => ("step-down", "agent"),
            Intrusion::Rollback => ("rollback", "agent"),
            Intrusion::ForgedNotReady | Intrusion::DressedAsVoter => return,
        };
        m.swap = Some(swap);
        m.step = Some(step.into());
        m.desired_role = Some(role.into());
        m.join_node = join;
    }

    /// Reports the milestones of `step` once its host part is done, as the
    /// actuator does (the one list in `hostdecide::milestones`).
    fn milestones(&mut self, name: &str, swap: Option<SwapId>, step: &Step) {
        let now = self.v.now;
        let n = self.node(name);
        let last = n.report.as_ref().and_then(|r| r.detail);
        for (phase, milestone) in after_host_part(step, last, n.etcd_is_voter) {
            let r = Report::next(
                n.report.as_ref(),
                swap.clone(),
                step.report_step(),
                phase,
                now,
            )
            .with_detail(milestone);
            n.report = Some(r);
        }
    }

    /// A drawn fault takes `name`'s host down at `tick`: its Node NotReady.
    fn take_down(&mut self, name: &str, tick: usize) {
        let h = self.hosts.get_mut(name).unwrap();
        h.up = false;
        h.down_since = Some(tick);
        self.unreachable.insert(name.to_string(), tick);
        partition::went_down(self, name);
        let now = self.v.now;
        let n = self.node(name);
        n.ready = false;
        n.ready_since = Some(now);
    }

    /// `name`'s host comes back up at `tick` (a reboot): what its disk
    /// holds (its role, its datastore, a tombstone) and its report in the
    /// API are as they were; its actuator starts afresh and decides on
    /// them, its kubelet renews its node Lease at the next round.
    fn bring_back(&mut self, name: &str, tick: usize) {
        let h = self.hosts.get_mut(name).unwrap();
        h.up = true;
        h.down_since = None;
        self.unreachable.insert(name.to_string(), tick);
        self.counts.returns += 1;
        let now = self.v.now;
        self.node(name).ready_since = Some(now);
    }

    /// Runs the controller (restarting it or stealing its Lease when the
    /// faults say so) until it ends; returns its last action.
    fn run(&mut self, s: &mut SwapState, max_ticks: usize) -> Action {
        self.run_checked(s, max_ticks, |_, _, _| {
            Ok::<(), std::convert::Infallible>(())
        })
        .expect("no check to fail")
    }

    /// [`World::run`], calling `check` with every action the controller
    /// decides, before it is carried out; the first failed check ends it.
    fn run_checked<E>(
        &mut self,
        s: &mut SwapState,
        max_ticks: usize,
        mut check: impl FnMut(&World, &SwapState, &Action) -> Result<(), E>,
    ) -> Result<Action, E> {
        let base = self.next;
        self.start = base;
        self.aborted = false;
        let abort = self.faults.chaos.abort_at;
        for tick in base..base + max_ticks {
            // The faults' ticks count from the change's start.
            let rel = tick - base;
            self.next = tick + 1;
            views::remember(self, tick);
            for (k, down) in self.faults.down_at.into_iter().enumerate() {
                let Some((at, which)) = down else {
                    continue;
                };
                let name = self.v.nodes[which % self.v.nodes.len()].name.clone();
                if at == rel {
                    self.take_down(&name, tick);
                }
                let back = self.faults.chaos.back_after[k].map(|d| at + d.max(1));
                if back == Some(rel) && self.hosts[&name].down_since.is_some() {
                    self.bring_back(&name, tick);
                }
            }
            partition::at_tick(self, rel, tick);
            if self.faults.restart_at == Some(rel) {
                *s = SwapState {
                    instance: format!("ctl-{tick}"),
                    candidate: SwapId::parse(&format!("swap-r{tick}")).unwrap(),
                    taken: None,
                    ..s.clone()
                };
            }
            if let Some((at, which, what)) = self.faults.intruder_at
                && at == rel
            {
                self.intrude(which, what);
            }
            if self.faults.steal_at == Some(rel)
                && let Some(l) = self.v.lease.as_mut()
            {
                l.holder = Some("intruder".into());
                l.instance = Some("intruder-1".into());
                l.renew_time = Some(self.v.now);
            }
            // Several controller actions per tick (writes are quick);
            // the hosts react between ticks.
            let frozen = self.faults.chaos.frozen_at(rel);
            self.counts.frozen_ticks += u64::from(frozen);
            // Before the operator starts the change, the fleet goes on.
            let idle = rel < self.faults.chaos.idle;
            for _ in 0..if frozen || idle { 0 } else { 8 } {
                let view = views::controller_view(self);
                let mut a = next_action(&view, s);
                // The operator's abort, once asked: `fleet-role abort`
                // puts its action in front of the controller's.
                if abort.is_some_and(|at| rel >= at)
                    && let Some(stop) = abort_action(&view, s, &a)
                {
                    self.counts.aborts_wound_down += u64::from(!self.aborted);
                    self.aborted = true;
                    a = stop;
                }
                self.counts.controller_steps += 1;
                check(self, s, &a)?;
                if a.writes() && self.faults.chaos.api_out_at(rel) {
                    // Nothing reached the API; the shell decides again.
                    self.counts.failed_writes += 1;
                    break;
                }
                if a.writes() {
                    let taken = s.taken.clone();
                    self.write(&view, &a, s);
                    if self.faults.chaos.unacked_at.is_some_and(|at| rel >= at) && !self.unacked {
                        // Done, and reported failed: the shell knows only
                        // what it knew before, and decides again.
                        self.unacked = true;
                        self.counts.unacked_writes += 1;
                        s.taken = taken;
                        break;
                    }
                }
                if a.is_terminal() {
                    return Ok(a);
                }
                if !a.writes() {
                    break;
                }
            }
            self.v.now += self.faults.tick_secs.max(1);
            self.react();
        }
        panic!(
            "the swap did not end within {max_ticks} ticks: {:#?}",
            self.writes.last()
        );
    }
}
