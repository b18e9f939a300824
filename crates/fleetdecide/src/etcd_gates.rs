//! The gates on etcd's own view, as the servers report it ([`Picture`]):
//! the membership the Nodes cannot show (learners, ghosts), that the
//! servers agree on it, alarms, and the quorum counted over etcd's members.
//!
//! A voter swap that trusted the Nodes alone would count a ghost member
//! (one whose Node was deleted, k3s#11231) as nothing, miss a learner (a
//! learner's Node carries no etcd metadata until it is promoted) and take a
//! `NOSPACE` alarm for health. So the swap is refused, and each write
//! waits, until every server that reports agrees with the Nodes.
//!
//! The picture itself is [`FleetView::etcd`] (with the Nodes' other views,
//! in `view.rs`).

use crate::gate::{Gate, GateName};
use crate::quorum::{keeps_quorum, quorum};
use crate::view::FleetView;
use fleetfacts::members::{MappedMember, Picture};

/// A member as messages name it: its Node, or its etcd name and id.
pub(super) fn member_label(m: &MappedMember) -> String {
    match &m.node {
        Some(n) => n.clone(),
        None => format!("{} ({})", member_name(m), m.member.id),
    }
}

/// A member's etcd name, one line; a member added but never started has
/// none.
fn member_name(m: &MappedMember) -> String {
    if m.member.name.is_empty() {
        "(unnamed)".into()
    } else {
        protocol::text::one_line(&m.member.name)
    }
}

/// Gate: some server reported a fresh view of etcd, and the servers that
/// did list the same members. Without a view the other etcd gates cannot
/// see anything, so none is a refusal, never a pass.
pub fn gate_etcd_views_agree(v: &FleetView, p: &Picture) -> Gate {
    let name = GateName::EtcdViewsAgree;
    if !p.known() {
        return Gate::fail(
            name,
            format!(
                "no server reported etcd's view in the last {} s; an etcd alarm (NOSPACE, CORRUPT) refuses every write, the reports too (`etcd alarm list` on a server), else check the servers' fleet-role-actuator (its etcd_url and k3s's etcd client certificate: journalctl -u fleet-role-actuator); docs/recovery.md, \"No fresh view of etcd\"",
                v.settings.actuator_heartbeat_max_age
            ),
        );
    }
    if p.disagreeing.is_empty() {
        Gate::pass(
            name,
            format!(
                "etcd's view from {}: {} member(s)",
                p.reporters.join(", "),
                p.members.len()
            ),
        )
    } else {
        Gate::fail(
            name,
            format!(
                "the servers list different etcd members: {} differ from what most views list; wait for the membership to settle, or look with `fleet-role status`",
                p.disagreeing.join(", ")
            ),
        )
    }
}

/// Gate: every etcd member maps to a Node (by k3s's member name and, where
/// the Node publishes one, its address). A ghost votes and counts toward
/// quorum with no host behind it.
pub fn gate_no_ghost_member(p: &Picture) -> Gate {
    let name = GateName::NoGhostMember;
    let ghosts: Vec<String> = p
        .ghosts()
        .map(|m| {
            format!(
                "{} ({}, peer {})",
                member_name(m),
                m.member.id,
                m.member.peer_host().map_or("none", |h| h)
            )
        })
        .collect();
    if ghosts.is_empty() {
        Gate::pass(name, "every etcd member has its Node")
    } else {
        Gate::fail(
            name,
            format!(
                "etcd member(s) with no Node: {}; if the host is gone, `fleet-role-actuator remove-ghost ID` on a server removes the member (docs/recovery.md)",
                ghosts.join(", ")
            ),
        )
    }
}

/// The gates on etcd's own view that every write is guarded by too.
pub(super) fn etcd_view_gates(v: &FleetView) -> [Gate; 4] {
    let p = v.etcd();
    [
        gate_etcd_views_agree(v, &p),
        gate_no_ghost_member(&p),
        gate_voters_are_members(v, &p),
        gate_no_etcd_alarm(&p),
    ]
}

/// The voter Nodes (by k3s's etcd label and `EtcdIsVoter`, or its
/// `Unhealthy` over it) whose voting member the agreed view of etcd does
/// not list, sorted. Nothing while no view is known.
pub fn voters_without_member(v: &FleetView, p: &Picture) -> Vec<String> {
    if !p.known() {
        return Vec::new();
    }
    v.sorted()
        .into_iter()
        .filter(|n| fleetfacts::classify(n) == fleetfacts::Class::Voter)
        .filter(|n| p.of_node(&n.name).is_none_or(|m| m.member.learner))
        .map(|n| n.name.clone())
        .collect()
}

/// Gate: every voter Node has its voting member in etcd's view, the
/// mirror of [`gate_no_ghost_member`]. The label and the condition that
/// make a Node a voter are written by others too (any `patch nodes`
/// holder for the label, the host's own kubelet or any `nodes/status`
/// holder for the condition): Nodes dressed as voters would be counted,
/// and a shrink toward the configured count would remove real members.
pub fn gate_voters_are_members(v: &FleetView, p: &Picture) -> Gate {
    let name = GateName::VotersAreMembers;
    let missing = voters_without_member(v, p);
    if missing.is_empty() {
        Gate::pass(name, "every voter Node has its voting member in etcd")
    } else {
        Gate::fail(
            name,
            format!(
                "voter Node(s) with no voting member in etcd: {}; the Nodes claim more voters than etcd has (see `fleet-role status`; a label or condition written by another principal, or a member not yet promoted)",
                missing.join(", ")
            ),
        )
    }
}

/// Gate: no alarm is raised on any member (`NOSPACE` makes etcd refuse
/// writes; `CORRUPT` means a member's data cannot be trusted).
pub fn gate_no_etcd_alarm(p: &Picture) -> Gate {
    let name = GateName::NoEtcdAlarm;
    if p.alarms.is_empty() {
        Gate::pass(name, "no etcd alarm")
    } else {
        Gate::fail(
            name,
            format!(
                "etcd alarm: {}; clear its cause and disarm it first (docs/recovery.md, \"No fresh view of etcd\")",
                p.alarms.join(", ")
            ),
        )
    }
}

/// The learners etcd lists, other than `except`'s.
pub(super) fn etcd_learners(p: &Picture, except: Option<&str>) -> Vec<String> {
    p.learners()
        .filter(|m| m.node.is_none() || m.node.as_deref() != except)
        .map(member_label)
        .collect()
}

/// The etcd side of a removal's quorum: members and healthy members once
/// `removed`'s member is gone, with the incoming host counted as a healthy
/// voter when `promoting` (the count before its promotion). `None` when no
/// view is known (the `etcd-views-agree` gate refuses then).
pub(super) fn etcd_after_removal(
    p: &Picture,
    removed: &str,
    promoting: Option<&str>,
) -> Option<(usize, usize)> {
    if !p.known() {
        return None;
    }
    let (mut m, mut h) = p.voters_after(Some(removed));
    if let Some(inc) = promoting
        && p.of_node(inc)
            .is_none_or(|x| x.member.learner || !x.healthy)
    {
        m += usize::from(p.of_node(inc).is_none_or(|x| x.member.learner));
        h += 1;
    }
    Some((m, h))
}

/// The etcd half of a quorum gate's text and verdict, `None` when unknown.
pub(super) fn etcd_quorum_text(after: Option<(usize, usize)>) -> (bool, String) {
    match after {
        None => (true, String::new()),
        Some((m, h)) => (
            keeps_quorum(m, h),
            format!(
                "; by etcd's members: {h} healthy of {m} voting, quorum {}",
                quorum(m)
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{fixtures::*, *};
    use protocol::etcd::EtcdView;
    use protocol::etcd::{Alarm, Member, MemberId};

    fn phantom(learner: bool) -> Member {
        Member {
            id: MemberId(0xdead),
            name: "phantom-0a1b2c3d".into(),
            peer_urls: vec!["https://10.9.9.9:2380".into()],
            client_urls: vec![],
            learner,
        }
    }

    /// Every server's view gets `f` applied.
    fn each_view(v: &mut FleetView, f: impl Fn(&mut EtcdView)) {
        for n in &mut v.nodes {
            if let Some(view) = n.host.as_mut().and_then(|h| h.etcd.as_mut()) {
                f(view);
            }
        }
    }

    #[test]
    fn a_healthy_fleets_views_pass_every_etcd_gate() {
        let v = fleet();
        let p = v.etcd();
        assert_eq!(p.reporters, ["n1", "n2", "n3"]);
        for g in [
            gate_etcd_views_agree(&v, &p),
            gate_no_ghost_member(&p),
            gate_voters_are_members(&v, &p),
            gate_no_etcd_alarm(&p),
        ] {
            assert!(g.passed, "{}", g.reason);
        }
    }

    /// n4 and n5, agents, dressed as voters: k3s's etcd label (any `patch
    /// nodes` holder) and `EtcdIsVoter` (their own kubelets, or any
    /// `nodes/status` holder). etcd lists three members.
    fn dressed_as_voters() -> FleetView {
        let mut v = fleet();
        v.settings.voters = 3;
        for n in ["n4", "n5"] {
            let n = node_mut(&mut v, n);
            n.etcd_label = true;
            n.etcd_is_voter = true;
        }
        v
    }

    #[test]
    fn agents_dressed_as_voters_are_not_counted_and_move_nothing() {
        let v = dressed_as_voters();
        assert_eq!(classify(v.node("n4").unwrap()), Class::Voter);
        let p = v.etcd();
        let g = gate_voters_are_members(&v, &p);
        assert!(!g.passed && g.reason.contains("n4, n5"), "{}", g.reason);
        // Counted as etcd counts them: three, as configured.
        let count = count_voters(&v, None);
        assert_eq!((count.seen, count.missing), (3, 0));
        // `run` shrinks nothing toward a count that is not there.
        let d = run_decision(&v);
        let RunDecision::Idle { why, .. } = &d else {
            panic!("{d:?}")
        };
        assert!(why.contains("no voting member in etcd: n4, n5"), "{why}");
        // A shrink asked by hand is refused, and `status` is degraded.
        let shrink = shrink_gates(&v, &["n3"]);
        assert!(
            shrink
                .iter()
                .any(|g| g.name == GateName::VotersAreMembers && !g.passed),
            "{}",
            failures(&shrink)
        );
        assert!(
            degradations(&v)
                .iter()
                .any(|d| d.reason == DegradedReason::VoterWithoutMember)
        );
    }

    #[test]
    fn a_learner_only_etcd_lists_refuses_the_swap() {
        let mut v = fleet();
        // n4 joined as a learner: its Node shows nothing of it.
        each_view(&mut v, |e| {
            let mut m = phantom(true);
            m.name = "n4-0a1b2c3d".into();
            e.members.push(m);
        });
        assert_eq!(refused_by(&start(&v)), vec![GateName::NoLearner]);
        let g = gate(&preflight(&v, "n1", "n4"), GateName::NoLearner).clone();
        assert!(g.reason.contains("n4"), "{}", g.reason);
        // The swap's own incoming host is let through while it joins.
        assert!(gate_no_learner(&v, Some("n4")).passed);
        // One with no Node is named by its etcd name, and never excepted.
        let mut v = fleet();
        each_view(&mut v, |e| e.members.push(phantom(true)));
        let g = gate_no_learner(&v, Some("n4"));
        assert!(
            !g.passed && g.reason.contains("phantom-0a1b2c3d"),
            "{}",
            g.reason
        );
    }

    #[test]
    fn a_ghost_voter_refuses_the_swap_and_counts_as_down() {
        let mut v = fleet();
        each_view(&mut v, |e| e.members.push(phantom(false)));
        let refused = refused_by(&start(&v));
        assert!(refused.contains(&GateName::NoGhostMember), "{refused:?}");
        let g = gate(&preflight(&v, "n1", "n4"), GateName::QuorumAfterRemoval).clone();
        // n2, n3, n4 promoted, and the ghost down: 3 healthy of 4.
        assert!(g.reason.contains("3 healthy of 4"), "{}", g.reason);
        let g = gate_no_ghost_member(&v.etcd());
        assert!(g.reason.contains("10.9.9.9"), "{}", g.reason);
        // One added straight to etcd and never started has no name.
        each_view(&mut v, |e| e.members.last_mut().unwrap().name.clear());
        let g = gate_no_ghost_member(&v.etcd());
        assert!(
            g.reason.contains("(unnamed) (000000000000dead"),
            "{}",
            g.reason
        );
    }

    #[test]
    fn three_ghost_voters_make_the_removal_lose_quorum_by_etcds_count() {
        let mut v = fleet();
        each_view(&mut v, |e| {
            for id in [0xdead, 0xbeef, 0xf00d] {
                let mut ghost = phantom(false);
                ghost.id = MemberId(id);
                e.members.push(ghost);
            }
        });
        // By the Nodes, 3 of 3 after the removal; by etcd 3 of 6.
        let g = gate_quorum_after_removal(&v, "n1", "n4", Count::IncomingPromoted);
        assert!(!g.passed, "{}", g.reason);
    }

    #[test]
    fn an_alarm_on_any_member_refuses_the_swap() {
        let mut v = fleet();
        each_view(&mut v, |e| {
            e.alarms.push(Alarm {
                member: e.members[2].id,
                kind: "NOSPACE".into(),
            });
        });
        assert_eq!(refused_by(&start(&v)), vec![GateName::NoEtcdAlarm]);
        let g = gate_no_etcd_alarm(&v.etcd());
        assert!(g.reason.contains("NOSPACE on n3"), "{}", g.reason);
    }

    #[test]
    fn no_fresh_view_or_disagreeing_views_refuse_the_swap() {
        let mut v = fleet();
        each_view(&mut v, |e| e.read_at = NOW - 500);
        assert_eq!(refused_by(&start(&v)), vec![GateName::EtcdViewsAgree]);
        let mut v = fleet();
        if let Some(e) = node_mut(&mut v, "n3")
            .host
            .as_mut()
            .and_then(|h| h.etcd.as_mut())
        {
            e.members.remove(1);
            e.read_at = NOW - 10;
        }
        assert_eq!(refused_by(&start(&v)), vec![GateName::EtcdViewsAgree]);
        let g = gate(&preflight(&v, "n1", "n4"), GateName::EtcdViewsAgree).clone();
        assert!(g.reason.contains("n3"), "{}", g.reason);
    }

    #[test]
    fn a_voter_whose_host_reports_etcd_unhealthy_counts_as_down_by_etcds_count() {
        let mut v = fleet();
        let sicken = |v: &mut FleetView, n: &str| {
            if let Some(e) = node_mut(v, n).host.as_mut().and_then(|h| h.etcd.as_mut()) {
                e.healthy = false;
            }
        };
        sicken(&mut v, "n3");
        // The Nodes look healthy; etcd's members say 2 healthy of 3 after
        // n1 goes and n4 joins: enough.
        let g = gate_quorum_after_removal(&v, "n1", "n4", Count::IncomingPromoted);
        assert!(g.passed, "{}", g.reason);
        assert!(
            g.reason.contains("by etcd's members: 2 healthy of 3"),
            "{}",
            g.reason
        );
        sicken(&mut v, "n2");
        let g = gate_quorum_after_removal(&v, "n1", "n4", Count::IncomingPromoted);
        assert!(!g.passed, "{}", g.reason);
        assert!(
            g.reason.contains("by etcd's members: 1 healthy of 3"),
            "{}",
            g.reason
        );
    }

    #[test]
    fn the_preflight_counts_the_incoming_host_as_a_future_healthy_voter_however_etcd_lists_it() {
        let mut v = fleet();
        let n4 = |learner: bool| Member {
            id: MemberId(4),
            name: "n4-0a1b2c3d".into(),
            peer_urls: vec!["https://10.0.0.4:2380".into()],
            client_urls: vec![],
            learner,
        };
        let after = |v: &FleetView| etcd_after_removal(&v.etcd(), "n1", Some("n4"));
        // Not listed: n2, n3 and n4 to come.
        assert_eq!(after(&v), Some((3, 3)));
        // A learner already: the same count, it is to vote.
        each_view(&mut v, |e| e.members.push(n4(true)));
        assert_eq!(after(&v), Some((3, 3)));
        // A voter whose host does not vouch for it (no view of its own):
        // counted once, healthy-to-be.
        each_view(&mut v, |e| {
            e.members.pop();
            e.members.push(n4(false));
        });
        assert_eq!(after(&v), Some((3, 3)));
        // Without counting it as promoting: n4 down, 2 healthy of 3.
        assert_eq!(etcd_after_removal(&v.etcd(), "n1", None), Some((3, 2)));
    }

    fn start(v: &FleetView) -> Action {
        next_action(v, &request("n1", "n4"))
    }
}
