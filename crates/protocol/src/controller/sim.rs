//! The whole swap in a simulated world: the hosts run the real `decide`,
//! k3s is played by a few rules, and the controller's writes are carried out
//! as the shell carries them out. Scenarios and property tests over random
//! fleets and faults.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::controller::fixtures::*;
use crate::controller::*;
use crate::{
    decide::{Decision, HostState, JoinTarget, Observation, Step, decide},
    validate::Role,
};
#[allow(unused_imports)]
use crate::{
    report::{Detail, Phase, Report, ReportStep},
    validate::{NodeName, SwapId},
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
}

/// What can go wrong.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    promotion_stalls: bool,
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
                    },
                )
            })
            .collect();
        Self {
            v,
            hosts,
            faults,
            writes: Vec::new(),
            violations: Vec::new(),
        }
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
        if let Some(after) = lease_after(self.v.lease.as_ref(), a, writer) {
            self.v.lease = Some(after);
            if let Action::TakeLease { swap, .. } = a {
                s.taken = Some(swap.clone());
            }
            return;
        }
        let node = a
            .node()
            .expect("a write to the Lease or a Node")
            .to_string();
        if let Action::RemoveMember { .. } = a {
            self.check_quorum(&node);
        }
        let after = node_after(self.node(&node), a).expect("a Node write");
        *self.node(&node) = after;
    }

    /// The truth about etcd at the moment a removal is asked: the
    /// members that vote and whether each one's host is up.
    fn check_quorum(&mut self, removing: &str) {
        let mut members = 0;
        let mut healthy = 0;
        let mut removed_healthy = false;
        for n in &self.v.nodes {
            let h = &self.hosts[&n.name];
            if !n.has_member() || !n.etcd_is_voter {
                continue;
            }
            members += 1;
            let up = h.up && n.ready && h.role.is_some() && !h.tombstone && h.datastore;
            if up {
                healthy += 1;
            }
            if n.name == removing {
                removed_healthy = up;
            }
        }
        let is_member = self
            .v
            .node(removing)
            .is_some_and(|n| n.has_member() && n.etcd_is_voter);
        let (m, h) = if is_member {
            (members - 1, healthy - usize::from(removed_healthy))
        } else {
            (members, healthy)
        };
        if !keeps_quorum(m, h) {
            self.violations.push(format!(
                "removing {removing} left {h} healthy of {m} at {}",
                self.v.now
            ));
        }
    }

    /// etcd adds a member only while every voter is reachable.
    fn etcd_accepts_a_member(&self) -> bool {
        self.v.nodes.iter().all(|n| {
            let h = &self.hosts[&n.name];
            !(n.has_member() && n.etcd_is_voter) || (h.up && h.datastore && !h.tombstone)
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
                self.hosts.get_mut(name).unwrap().tombstone = true;
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
        match decision {
            Decision::Refuse { swap, step, reason } => {
                let r = next(swap, step, Phase::Refused, None).with_reason(reason);
                self.node(name).report = Some(r);
            }
            Decision::Take { swap, step, resume } => match step {
                Step::Snapshot => {
                    let r = if faults.snapshot_fails {
                        next(swap, ReportStep::Snapshot, Phase::Failed, None)
                            .with_reason("disk full")
                    } else {
                        let mut r = next(
                            swap.clone(),
                            ReportStep::Snapshot,
                            Phase::Done,
                            Some(Detail::Snapshot),
                        );
                        r.snapshot_file = Some(format!("snap-{}", swap.unwrap()));
                        r
                    };
                    self.node(name).report = Some(r);
                }
                Step::Promote { .. } if !n.etcd_label => {
                    if !resume {
                        let h = self.hosts.get_mut(name).unwrap();
                        h.role = Some(Role::Server);
                        h.datastore = true;
                        h.tombstone = false;
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
                    let prev = self.v.node(name).unwrap().report.clone();
                    let mut r = Report::next(
                        prev.as_ref(),
                        swap,
                        ReportStep::Promote,
                        Phase::Progress,
                        now,
                    );
                    r.detail = Some(Detail::Learner);
                    let n = self.node(name);
                    n.etcd_label = true;
                    n.control_plane_label = true;
                    n.master_label = true;
                    n.k3s.node_name = Some(format!("{name}-00aa11bb"));
                    n.k3s.node_address = Some("10.0.0.99".into());
                    n.k3s.removed_node_name = None;
                    n.k3s.remove = None;
                    n.etcd_is_voter = false;
                    n.report = Some(r);
                }
                Step::Promote { .. } => {
                    if faults.promotion_stalls {
                        return;
                    }
                    let n = self.node(name);
                    n.etcd_is_voter = true;
                    n.report = Some(next(
                        swap,
                        ReportStep::Promote,
                        Phase::Done,
                        Some(Detail::Voter),
                    ));
                }
                Step::StepDown => {
                    let r = if faults.step_down_fails {
                        next(swap, ReportStep::StepDown, Phase::Failed, None)
                            .with_reason("etcd did not serve again")
                    } else {
                        self.hosts.get_mut(name).unwrap().role = Some(Role::Agent);
                        next(
                            swap,
                            ReportStep::StepDown,
                            Phase::Done,
                            Some(Detail::EtcdOnly),
                        )
                    };
                    self.node(name).report = Some(r);
                }
                Step::Rollback | Step::Finish => {
                    let h = self.hosts.get_mut(name).unwrap();
                    h.role = Some(Role::Agent);
                    h.datastore = false;
                    let step = step.report_step();
                    self.node(name).report =
                        Some(next(swap, step, Phase::Done, Some(Detail::AgentReady)));
                }
            },
            Decision::Wait { .. } | Decision::Nothing => {}
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

fn write_kinds(writes: &[Action]) -> Vec<String> {
    writes
        .iter()
        .filter(|a| !matches!(a, Action::RenewLease | Action::MarkStep { .. }))
        .map(|a| {
            let s = serde_json::to_value(a).unwrap();
            let kind = s["action"].as_str().unwrap().to_string();
            match a.node() {
                Some(n) => format!("{kind} {n}"),
                None => kind,
            }
        })
        .collect()
}

fn settled_clean(w: &World) {
    let n1 = w.v.node("n1").unwrap();
    assert_eq!(classify(n1), Class::Agent, "{n1:?}");
    assert!(
        !n1.has_server_labels() && !n1.k3s.any() && !n1.cordoned,
        "{n1:?}"
    );
    assert!(!n1.marks.any_annotation(), "{n1:?}");
    assert_eq!(n1.marks.desired_role.as_deref(), Some("agent"));
    let n4 = w.v.node("n4").unwrap();
    assert!(is_healthy_voter(n4), "{n4:?}");
    assert!(!n4.marks.any_annotation(), "{n4:?}");
    assert!(w.v.nodes.iter().all(|n| !n.marks.any_annotation()));
    let l = w.v.lease.as_ref().unwrap();
    assert!(l.holder.is_none() && l.swap.is_none() && l.stopping.is_none());
    assert_eq!(w.v.nodes.iter().filter(|n| is_healthy_voter(n)).count(), 3);
}

#[test]
fn a_full_swap_takes_every_step_in_order_and_leaves_the_fleet_clean() {
    let mut w = World::new(
        fleet(),
        Faults {
            tick_secs: 2,
            ..Faults::default()
        },
    );
    let mut s = request("n1", "n4");
    let end = w.run(&mut s, 200);
    assert_eq!(
        end,
        Action::ReleaseLease {
            outcome: Outcome::Done { warning: None }
        }
    );
    assert_eq!(
        write_kinds(&w.writes),
        [
            "take-lease",
            "request-snapshot n2",
            "promote n4",
            "cordon n1",
            "step-down n1",
            "remove-member n1",
            "clean-up-server n1",
            "clear-swap-marks n1",
            "uncordon n1",
            "clear-swap-marks n4",
            "clear-swap-marks n2",
            "release-lease",
        ]
    );
    settled_clean(&w);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

#[test]
fn a_promotion_that_never_reaches_voter_is_rolled_back_and_its_member_removed() {
    let mut w = World::new(
        fleet(),
        Faults {
            promotion_stalls: true,
            tick_secs: 5,
            ..Faults::default()
        },
    );
    let end = w.run(&mut request("n1", "n4"), 400);
    let Action::ReleaseLease {
        outcome: Outcome::WoundDown { kind, reason },
    } = end
    else {
        panic!("{end:?}")
    };
    assert_eq!(kind, StopKind::Failed);
    assert!(matches!(reason, Reason::NotVoter { .. }), "{reason:?}");
    let kinds = write_kinds(&w.writes);
    assert!(kinds.contains(&"rollback n4".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"remove-member n4".to_string()), "{kinds:?}");
    assert!(
        !kinds
            .iter()
            .any(|k| k.ends_with(" n1") && !k.starts_with("clear")),
        "{kinds:?}"
    );
    // The cluster as it was.
    let n4 = w.v.node("n4").unwrap();
    assert_eq!(classify(n4), Class::Agent);
    assert!(!n4.has_server_labels() && !n4.marks.any_annotation());
    assert!(
        ["n1", "n2", "n3"]
            .iter()
            .all(|n| is_healthy_voter(w.v.node(n).unwrap()))
    );
    assert!(w.v.lease.as_ref().unwrap().swap.is_none());
}

#[test]
fn a_failed_step_down_stops_with_the_lease_released_and_a_resume_finishes_it() {
    let mut w = World::new(
        fleet(),
        Faults {
            step_down_fails: true,
            tick_secs: 2,
            ..Faults::default()
        },
    );
    let end = w.run(&mut request("n1", "n4"), 200);
    assert!(
        matches!(
            end,
            Action::Stop {
                step: SwapStep::StepDown,
                ..
            }
        ),
        "{end:?}"
    );
    let l = w.v.lease.as_ref().unwrap();
    assert!(l.holder.is_none() && l.stopped.is_some() && l.swap.is_some());
    // The host is fixed; the same swap is asked again.
    w.faults.step_down_fails = false;
    let mut again = SwapState {
        candidate: id("swap-2"),
        instance: "ctl-b".into(),
        ..request("n1", "n4")
    };
    let end = w.run(&mut again, 200);
    assert_eq!(
        end,
        Action::ReleaseLease {
            outcome: Outcome::Done { warning: None }
        }
    );
    settled_clean(&w);
}

#[test]
fn a_down_voter_is_replaced_without_a_step_down_and_left_for_the_operator() {
    let mut v = fleet();
    node_mut(&mut v, "n1").ready = false;
    let mut w = World::new(
        v,
        Faults {
            tick_secs: 2,
            ..Faults::default()
        },
    );
    let end = w.run(&mut request("n1", "n4"), 200);
    let Action::ReleaseLease {
        outcome: Outcome::Done { warning: Some(w_) },
    } = end
    else {
        panic!("{end:?}")
    };
    assert!(w_.contains("demote-local"));
    let kinds = write_kinds(&w.writes);
    assert_eq!(
        kinds[..5],
        [
            "take-lease",
            "request-snapshot n2",
            "cordon n1",
            "remove-member n1",
            "promote n4"
        ],
        "{kinds:?}"
    );
    assert!(!kinds.contains(&"step-down n1".to_string()), "{kinds:?}");
    assert_eq!(classify(w.v.node("n1").unwrap()), Class::Removed);
    assert!(w.violations.is_empty(), "{:?}", w.violations);
}

#[test]
fn a_controller_killed_at_every_step_resumes_and_finishes_cleanly() {
    for kill in 0..30 {
        let mut w = World::new(
            fleet(),
            Faults {
                restart_at: Some(kill),
                tick_secs: 2,
                ..Faults::default()
            },
        );
        let end = w.run(&mut request("n1", "n4"), 400);
        assert_eq!(
            end,
            Action::ReleaseLease {
                outcome: Outcome::Done { warning: None }
            },
            "killed at tick {kill}"
        );
        settled_clean(&w);
        // Never a step asked twice under different ids, never a write
        // while another process held the Lease.
        let promotes = w
            .writes
            .iter()
            .filter(|a| matches!(a, Action::Promote { .. }))
            .count();
        assert_eq!(promotes, 1, "killed at tick {kill}");
    }
}

#[test]
fn a_controller_whose_lease_is_stolen_writes_nothing_more() {
    for steal in 1..12 {
        let mut w = World::new(
            fleet(),
            Faults {
                steal_at: Some(steal),
                tick_secs: 2,
                ..Faults::default()
            },
        );
        let end = w.run(&mut request("n1", "n4"), 200);
        if matches!(end, Action::ReleaseLease { .. }) {
            continue; // the swap ended before the theft
        }
        assert!(
            matches!(end, Action::Lost { .. }),
            "stolen at {steal}: {end:?}"
        );
        assert_eq!(
            w.v.lease.as_ref().unwrap().holder.as_deref(),
            Some("intruder")
        );
    }
}

#[test]
fn the_dry_run_plan_names_the_snapshot_voter_and_the_join_node() {
    let p = plan(&fleet(), "n1", "n4");
    assert!(all_pass(&p.gates));
    assert!(p.steps[1].contains("ask n2"), "{:?}", p.steps);
    assert!(
        p.steps[2].contains("promote n4 joining n2"),
        "{:?}",
        p.steps
    );
    assert_eq!(p.steps.len(), 8);
}

// === Property tests ===

fn arb_fleet() -> impl Strategy<Value = (FleetView, usize, usize)> {
    // 1 to 5 voters (now and then one NotReady), 1 to 3 agents (now and
    // then ineligible or NotReady), configured as many as there are
    // voters or, now and then, 1, 3 or 5.
    (
        prop::collection::vec(prop::bool::weighted(0.93), 1..=5),
        prop::collection::vec(
            (prop::bool::weighted(0.9), prop::bool::weighted(0.93)),
            1..=3,
        ),
        prop::option::weighted(0.15, prop::sample::select(vec![1usize, 3, 5])),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(voters, agents, configured, o, i)| {
            let mut nodes = Vec::new();
            for (k, ready) in voters.iter().enumerate() {
                let mut n = voter(&format!("v{k}"), k as u8 + 1);
                n.ready = *ready;
                nodes.push(n);
            }
            for (k, (eligible, ready)) in agents.iter().enumerate() {
                let mut n = agent(&format!("a{k}"), *eligible);
                n.ready = *ready;
                nodes.push(n);
            }
            let out = o.index(voters.len());
            let inc = voters.len() + i.index(agents.len());
            let mut s = settings();
            s.voters = configured.unwrap_or(voters.len());
            (
                FleetView {
                    now: NOW,
                    settings: s,
                    nodes,
                    lease: None,
                },
                out,
                inc,
            )
        })
}

fn arb_faults() -> impl Strategy<Value = Faults> {
    let down = || prop::option::weighted(0.3, (0usize..60, 0usize..8));
    (
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
        [down(), down(), down()],
        prop::option::weighted(0.3, 0usize..60),
        prop::option::weighted(0.15, 0usize..12),
        1i64..20,
    )
        .prop_map(
            |(stalls, fails, sd, snap, down, restart, steal, tick)| Faults {
                promotion_stalls: stalls,
                promotion_fails: fails && !stalls,
                step_down_fails: sd,
                snapshot_fails: snap && !sd,
                down_at: down,
                restart_at: restart,
                steal_at: steal,
                tick_secs: tick,
            },
        )
}

/// The property tests below are only as good as the worlds they draw:
/// this checks that those worlds reach every ending, and removals.
#[test]
fn the_random_worlds_reach_every_ending_of_a_swap() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut endings: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..300 {
        let (v, out, inc) = arb_fleet().new_tree(&mut runner).unwrap().current();
        let faults = arb_faults().new_tree(&mut runner).unwrap().current();
        let (out, inc) = (v.nodes[out].name.clone(), v.nodes[inc].name.clone());
        let mut w = World::new(v, faults);
        let end = w.run(&mut request(&out, &inc), 2000);
        let key = match end {
            Action::Refuse { .. } => "refused",
            Action::ReleaseLease {
                outcome: Outcome::Done { warning: None },
            } => "done",
            Action::ReleaseLease {
                outcome: Outcome::Done { .. },
            } => "done-with-warning",
            Action::ReleaseLease {
                outcome: Outcome::WoundDown { .. },
            } => "wound-down",
            Action::Stop { .. } => "stopped",
            Action::Lost { .. } => "lost",
            _ => "other",
        };
        *endings.entry(key).or_default() += 1;
        if w.writes
            .iter()
            .any(|a| matches!(a, Action::RemoveMember { .. }))
        {
            *endings.entry("a removal asked").or_default() += 1;
        }
    }
    eprintln!("{endings:?}");
    for key in [
        "refused",
        "done",
        "done-with-warning",
        "wound-down",
        "stopped",
        "lost",
        "a removal asked",
    ] {
        assert!(endings.get(key).copied().unwrap_or(0) >= 3, "{endings:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The invariant: whatever the fleet, whatever goes wrong and
    /// whenever the controller restarts, no removal it asks for leaves
    /// fewer healthy voters than a quorum of the members left, and the
    /// swap always ends.
    #[test]
    fn no_sequence_of_actions_removes_a_member_below_quorum(
        (v, out, inc) in arb_fleet(),
        faults in arb_faults(),
    ) {
        let out = v.nodes[out].name.clone();
        let inc = v.nodes[inc].name.clone();
        let mut w = World::new(v, faults);
        let mut s = request(&out, &inc);
        let end = w.run(&mut s, 2000);
        prop_assert!(w.violations.is_empty(), "{:?}", w.violations);
        prop_assert!(end.is_terminal());
        // A refused swap wrote nothing.
        if matches!(end, Action::Refuse { .. }) {
            let wrote = w.writes.iter().any(|a| a.node().is_some());
            prop_assert!(!wrote || faults.restart_at.is_some());
        }
    }

    /// Every write to a Node is taken with the Lease valid for this
    /// swap, and the gates the decision depends on passed.
    #[test]
    fn every_removal_the_controller_asks_for_passes_the_quorum_gate(
        (v, out, inc) in arb_fleet(),
        faults in arb_faults(),
    ) {
        let out = v.nodes[out].name.clone();
        let inc = v.nodes[inc].name.clone();
        let mut w = World::new(v, faults);
        let mut s = request(&out, &inc);
        // The faults are applied as in every other run: hosts go down, the
        // controller restarts, the Lease is stolen.
        let end = w.run_checked(&mut s, 2000, |w, s, a| {
            if let Action::RemoveMember { node } = a {
                let incoming = w.v.lease.as_ref().and_then(|l| l.swap_in.clone());
                let g = gate_quorum_for(&w.v, node.as_str(), incoming.as_deref());
                prop_assert!(g.passed, "{}", g.reason);
            }
            if a.node().is_some() {
                let l = w.v.lease.as_ref().unwrap();
                prop_assert_eq!(l.instance.as_deref(), Some(s.instance.as_str()));
                prop_assert!(write_may_go(&w.v, l));
            }
            Ok(())
        })?;
        prop_assert!(end.is_terminal());
    }
}
