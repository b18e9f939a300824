//! Property tests over random fleets and faults: no removal below quorum,
//! every write under a valid Lease, every swap ends; and a check that the
//! random worlds reach every ending.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::{Faults, Intrusion, World};
use fleetdecide::{fixtures::*, *};

// === Property tests ===

pub(super) fn arb_fleet() -> impl Strategy<Value = (FleetView, usize, usize)> {
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
                    lease: Some(protocol::LeaseFacts::default()),
                    pods: vec![],
                },
                out,
                inc,
            )
        })
}

pub(super) fn arb_faults() -> impl Strategy<Value = Faults> {
    let down = || prop::option::weighted(0.3, (0usize..60, 0usize..8));
    (
        (prop::bool::weighted(0.15), prop::bool::weighted(0.15)),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
        [down(), down(), down()],
        prop::option::weighted(0.3, 0usize..60),
        prop::option::weighted(0.15, 0usize..12),
        1i64..20,
        prop::bool::weighted(0.1),
        prop::option::weighted(
            0.3,
            (
                0usize..60,
                0usize..8,
                prop::sample::select(vec![
                    Intrusion::Promote,
                    Intrusion::StepDown,
                    Intrusion::Rollback,
                    Intrusion::Snapshot,
                    Intrusion::ForgedNotReady,
                    Intrusion::DressedAsVoter,
                ]),
            ),
        ),
    )
        .prop_map(
            |(
                (stalls, unmarked),
                fails,
                sd,
                snap,
                down,
                restart,
                steal,
                tick,
                unread,
                intruder,
            )| Faults {
                promotion_stalls: stalls,
                voter_unmarked: unmarked && !stalls,
                promotion_fails: fails && !stalls,
                step_down_fails: sd,
                snapshot_fails: snap && !sd,
                down_at: down,
                restart_at: restart,
                steal_at: steal,
                tick_secs: tick,
                etcd_unread: unread,
                intruder_at: intruder,
                chaos: Default::default(),
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
    for _ in 0..400 {
        let (v, out, inc) = arb_fleet().new_tree(&mut runner).unwrap().current();
        let faults = arb_faults().new_tree(&mut runner).unwrap().current();
        let (out, inc) = (v.nodes[out].name.clone(), v.nodes[inc].name.clone());
        let mut w = World::new(v, faults);
        let end = w.run(&mut request(&out, &inc), 2000);
        *endings.entry(super::ending(&end)).or_default() += 1;
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
        "done with a warning",
        "wound down",
        "stopped",
        "stopped before a rollback",
        "lost its Lease",
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

/// What etcd shows that the Nodes do not, drawn for the property below.
#[derive(Debug, Clone, Copy)]
enum Hidden {
    /// Nothing: etcd lists the members the Nodes show.
    Nothing,
    /// A voter no Node matches (its Node deleted).
    Ghost,
    /// A learner whose Node, an agent's, shows nothing of it.
    InvisibleLearner,
    /// An alarm on one member.
    Alarm,
    /// Every view older than the bound.
    Stale,
    /// One server's view lists a member fewer.
    Disagreeing,
    /// A ghost voter, and an agent (a compromised CI runner, writing its
    /// own report) reports the newest view, with the ghost renamed to
    /// itself and healthy.
    GhostForgedAway,
}

fn arb_hidden() -> impl Strategy<Value = Hidden> {
    prop::sample::select(vec![
        Hidden::Nothing,
        Hidden::Ghost,
        Hidden::InvisibleLearner,
        Hidden::Alarm,
        Hidden::Stale,
        Hidden::Disagreeing,
        Hidden::GhostForgedAway,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever the fleet, and wherever etcd's leader is, what etcd alone
    /// shows shuts the gate that guards against it, and nothing else of
    /// etcd's view shuts a gate when etcd agrees with the Nodes.
    #[test]
    fn what_only_etcd_shows_shuts_its_gate_wherever_the_leader_is(
        (v, out, inc) in arb_fleet(),
        hidden in arb_hidden(),
        leader in any::<prop::sample::Index>(),
    ) {
        let out = v.nodes[out].name.clone();
        let inc = v.nodes[inc].name.clone();
        let mut v = with_etcd_views(v);
        let phantom = |learner: bool, name: &str| protocol::etcd::Member {
            id: protocol::etcd::MemberId(0xdead_beef),
            name: format!("{name}-0a1b2c3d"),
            peer_urls: vec!["https://10.9.9.9:2380".into()],
            client_urls: vec![],
            learner,
        };
        let hider = v
            .nodes
            .iter()
            .find(|n| !n.etcd_label && n.name != inc)
            .map(|n| n.name.clone());
        let reporters: Vec<String> = v.etcd().reporters;
        for n in &mut v.nodes {
            let Some(e) = n.host.as_mut().and_then(|h| h.etcd.as_mut()) else {
                continue;
            };
            e.leader = Some(e.members[leader.index(e.members.len())].id);
            match hidden {
                Hidden::Nothing => {}
                Hidden::Ghost | Hidden::GhostForgedAway => e.members.push(phantom(false, "gone")),
                Hidden::InvisibleLearner => {
                    if let Some(h) = &hider {
                        e.members.push(phantom(true, h));
                    }
                }
                Hidden::Alarm => e.alarms.push(protocol::etcd::Alarm {
                    member: e.members[0].id,
                    kind: "NOSPACE".into(),
                }),
                Hidden::Stale => e.read_at = NOW - 1000,
                Hidden::Disagreeing => {
                    if reporters.len() >= 2 && Some(&n.name) == reporters.last() {
                        e.read_at = NOW - 1;
                        // It lists one member fewer than the others (never its own).
                        let mine = e.member;
                        let drop = e.members.iter().position(|m| m.id != mine);
                        if let Some(i) = drop {
                            e.members.remove(i);
                            if e.leader.is_some_and(|l| !e.members.iter().any(|m| m.id == l)) {
                                e.leader = Some(mine);
                            }
                        }
                    }
                }
            }
        }
        if let (Hidden::GhostForgedAway, Some(forger)) = (hidden, &hider) {
            let seen = v.nodes.iter().find_map(|n| n.host.as_ref()?.etcd.clone());
            if let Some(mut e) = seen {
                let ghost = e.members.len() - 1;
                e.members[ghost].name = format!("{forger}-0a1b2c3d");
                e.member = e.members[ghost].id;
                e.read_at = NOW;
                e.healthy = true;
                let f = node_mut(&mut v, forger);
                f.host.get_or_insert_with(|| alive(None)).etcd = Some(e);
            }
        }
        let gates = preflight(&v, &out, &inc);
        let shut = |g: GateName| gates.iter().any(|x| x.name == g && !x.passed);
        let etcd = [
            GateName::EtcdViewsAgree,
            GateName::NoGhostMember,
            GateName::NoEtcdAlarm,
        ];
        let known = !reporters.is_empty();
        match hidden {
            Hidden::Nothing if known => {
                for g in etcd {
                    prop_assert!(!shut(g), "{}", failures(&gates));
                }
            }
            Hidden::Ghost | Hidden::GhostForgedAway if known => {
                prop_assert!(shut(GateName::NoGhostMember), "{}", failures(&gates));
            }
            Hidden::InvisibleLearner if known && hider.is_some() => {
                prop_assert!(shut(GateName::NoLearner), "{}", failures(&gates));
            }
            Hidden::Alarm if known => prop_assert!(shut(GateName::NoEtcdAlarm)),
            Hidden::Disagreeing if reporters.len() >= 2 => {
                prop_assert!(shut(GateName::EtcdViewsAgree), "{}", failures(&gates));
            }
            _ => prop_assert!(shut(GateName::EtcdViewsAgree) || !known || hidden_is_moot(hidden)),
        }
    }
}

/// A drawing that could not hide anything in its fleet (no agent to hide
/// a learner behind, one reporter only to disagree with).
fn hidden_is_moot(h: Hidden) -> bool {
    matches!(h, Hidden::InvisibleLearner | Hidden::Disagreeing)
}
