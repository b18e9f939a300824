//! The whole swap in a simulated world: the hosts run the real `decide`
//! and report the real milestones, k3s is played by a few rules, and the
//! controller's writes are carried out with the shell's own effects
//! (`effects.rs`). The scenarios and the property tests live beside it.

mod properties;
mod scenarios;

use std::collections::BTreeMap;

use crate::{
    controller::{
        fixtures::{node_mut, refresh_etcd_views_voting},
        *,
    },
    decide::{Decision, HostState, JoinTarget, Observation, Step, decide},
    milestones::after_host_part,
    report::{Detail, Phase, Report, ReportStep},
    validate::{Role, SwapId},
};

// === The whole swap in a simulated world ===

/// A host as the simulation keeps it.
#[derive(Debug, Clone, Default)]
struct Host {
    role: Option<Role>,
    datastore: bool,
    tombstone: bool,
    /// k3s up (the host is not down).
    up: bool,
    /// etcd promoted its member to a voter, whether or not k3s marked the
    /// Node `EtcdIsVoter`.
    votes: bool,
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
}

/// The marks a `patch nodes` holder writes, copying the swap's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Intrusion {
    Promote,
    StepDown,
    Rollback,
    Snapshot,
}

struct World {
    v: FleetView,
    hosts: BTreeMap<String, Host>,
    faults: Faults,
    /// Every write the controller made, in order.
    writes: Vec<Action>,
    /// Quorum violations seen at the moment a removal was asked.
    violations: Vec<String>,
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
                        votes: n.etcd_is_voter,
                    },
                )
            })
            .collect();
        let mut w = Self {
            v,
            hosts,
            faults,
            writes: Vec::new(),
            violations: Vec::new(),
        };
        w.report_etcd();
        w
    }

    /// The hosts' actuators report etcd's view: each up one whose Node
    /// shows a member; an up one without reads none; a down host's view
    /// goes stale.
    fn report_etcd(&mut self) {
        let hosts = &self.hosts;
        refresh_etcd_views_voting(
            &mut self.v,
            |n| hosts.get(&n.name).is_some_and(|h| h.up),
            |n| hosts.get(&n.name).is_some_and(|h| h.votes),
        );
    }

    fn node(&mut self, name: &str) -> &mut NodeFacts {
        node_mut(&mut self.v, name)
    }

    /// Carries out a controller's write with the shell's own effects.
    fn write(&mut self, a: &Action, s: &mut SwapState) {
        self.writes.push(a.clone());
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
        }
        if let Action::Rollback { .. } = a {
            self.check_stop_quorum(&node);
        }
        let after = node_after(self.node(&node), a).expect("a Node write");
        *self.node(&node) = after;
    }

    /// The truth about etcd: the members that vote, how many of them are
    /// healthy (the host up with its datastore, no tombstone), and whether
    /// `node` is one of them and one of those healthy.
    fn voters_truth(&self, node: &str) -> (usize, usize, Option<bool>) {
        let (mut members, mut healthy, mut of_node) = (0, 0, None);
        for n in &self.v.nodes {
            let h = &self.hosts[&n.name];
            if !n.has_member() || !(n.etcd_is_voter || h.votes) {
                continue;
            }
            let up = h.up && n.ready && h.role.is_some() && !h.tombstone && h.datastore;
            members += 1;
            healthy += usize::from(up);
            if n.name == node {
                of_node = Some(up);
            }
        }
        (members, healthy, of_node)
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
    fn check_stop_quorum(&mut self, stopping: &str) {
        let (m, h, of_node) = self.voters_truth(stopping);
        if of_node == Some(true) && !keeps_quorum(m, h - 1) {
            self.violations.push(format!(
                "stopping {stopping} left {} healthy of {m} at {}",
                h - 1,
                self.v.now
            ));
        }
    }

    /// etcd adds a member only while every voter is reachable.
    fn etcd_accepts_a_member(&self) -> bool {
        self.v.nodes.iter().all(|n| {
            let h = &self.hosts[&n.name];
            !(n.has_member() && (n.etcd_is_voter || h.votes))
                || (h.up && h.datastore && !h.tombstone)
        })
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
                h.votes = false;
            }
        }
        // Kubelets renew their node Leases. A host whose server waits to
        // join etcd runs no kubelet (its agent is stopped, and k3s starts
        // the server's once etcd is ready).
        for name in &names {
            let h = &self.hosts[name];
            let joining = h.role == Some(Role::Server) && !self.v.node(name).unwrap().etcd_label;
            let up = h.up && !joining;
            let n = self.node(name);
            n.ready = up;
            if up {
                n.lease_renewed_at = Some(now);
            }
        }
        self.report_etcd();
    }

    fn react_host(&mut self, name: &str, now: i64) {
        let host = self.hosts[name].clone();
        if !host.up {
            return;
        }
        let n = self.v.node(name).unwrap().clone();
        let join = match n.marks.join_node.as_deref().and_then(|j| self.v.node(j)) {
            Some(j) => JoinTarget::Found {
                address: j.k3s.node_address.clone(),
            },
            None if n.marks.join_node.is_some() => JoinTarget::Missing,
            None => JoinTarget::NotLooked,
        };
        let decision = decide(&Observation {
            now,
            node: &n,
            lease: self.v.lease.as_ref(),
            report: n.report.as_ref(),
            host: HostState {
                role: host.role,
                datastore: host.datastore,
                tombstone: host.tombstone,
                member: host.datastore.then(|| format!("{name}-00aa11bb")),
                // A reading of etcd, as the actuator makes it (locally, or
                // through another server once its own etcd is gone).
                etcd_lists_member: (!self.faults.etcd_unread).then(|| n.has_member() || host.votes),
            },
            join: &join,
            identity: &self.v.settings.names.controller_identity,
            skew_margin: 1,
            join_port: 6443,
        });
        let prev = n.report.clone();
        let next =
            |swap: Option<SwapId>, step: ReportStep, phase: Phase, detail: Option<Detail>| {
                let mut r = Report::next(prev.as_ref(), swap, step, phase, now);
                if detail.is_some() {
                    r.detail = detail;
                }
                r
            };
        let faults = self.faults;
        if let Decision::Take {
            swap,
            step,
            resume: false,
        } = &decision
        {
            let rstep = step.report_step();
            if rstep != ReportStep::Finish && !self.asked(name, swap.as_ref(), rstep) {
                self.violations.push(format!(
                    "{name} took {} for {swap:?}, which the controller did not ask of it, at {now}",
                    rstep.as_str()
                ));
            }
            let votes = n.has_member() || host.votes;
            if (rstep == ReportStep::Finish
                || (rstep == ReportStep::Promote && host.role != Some(Role::Server)))
                && host.datastore
                && votes
            {
                self.violations.push(format!(
                    "{name} took {} over a datastore whose member votes, at {now}",
                    rstep.as_str()
                ));
            }
        }
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
                Step::Promote { .. } if !n.etcd_label => {
                    if !resume {
                        let h = self.hosts.get_mut(name).unwrap();
                        h.role = Some(Role::Server);
                        h.datastore = true;
                        h.tombstone = false;
                        h.votes = false;
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
                    self.hosts.get_mut(name).unwrap().votes = true;
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
                Step::Rollback | Step::Finish => {
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
        let Some(swap) = self.v.lease.as_ref().and_then(|l| l.swap.clone()) else {
            return;
        };
        let join = self
            .v
            .nodes
            .iter()
            .find(|n| n.etcd_label)
            .map(|n| n.name.clone());
        let name = self.v.nodes[which % self.v.nodes.len()].name.clone();
        let m = &mut self.node(&name).marks;
        m.protocol = Some(crate::version::mark());
        let (step, role) = match what {
            Intrusion::Snapshot => {
                m.snapshot_request = Some(swap);
                return;
            }
            Intrusion::Promote => ("promote", "server"),
            Intrusion::StepDown => ("step-down", "agent"),
            Intrusion::Rollback => ("rollback", "agent"),
        };
        m.swap = Some(swap);
        m.step = Some(step.into());
        m.desired_role = Some(role.into());
        m.join_node = join;
    }

    /// Whether the controller's last ask of `name` was `step` for `swap`:
    /// a host acts on what the controller asked of it, whatever else its
    /// Node's marks say.
    fn asked(&self, name: &str, swap: Option<&SwapId>, step: ReportStep) -> bool {
        let last = self
            .writes
            .iter()
            .rev()
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

    /// Reports the milestones of `step` once its host part is done, as the
    /// actuator does (the one list in `protocol::milestones`).
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
        for tick in 0..max_ticks {
            for (at, which) in self.faults.down_at.into_iter().flatten() {
                if at != tick {
                    continue;
                }
                let name = self.v.nodes[which % self.v.nodes.len()].name.clone();
                self.hosts.get_mut(&name).unwrap().up = false;
                self.node(&name).ready = false;
                self.node(&name).ready_since = Some(self.v.now);
            }
            if self.faults.restart_at == Some(tick) {
                *s = SwapState {
                    instance: format!("ctl-{tick}"),
                    candidate: SwapId::parse(&format!("swap-r{tick}")).unwrap(),
                    taken: None,
                    ..s.clone()
                };
            }
            if let Some((at, which, what)) = self.faults.intruder_at
                && at == tick
            {
                self.intrude(which, what);
            }
            if self.faults.steal_at == Some(tick)
                && let Some(l) = self.v.lease.as_mut()
            {
                l.holder = Some("intruder".into());
                l.instance = Some("intruder-1".into());
                l.renew_time = Some(self.v.now);
            }
            // Several controller actions per tick (writes are quick);
            // the hosts react between ticks.
            for _ in 0..8 {
                let a = next_action(&self.v, s);
                check(self, s, &a)?;
                if a.writes() {
                    self.write(&a, s);
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
