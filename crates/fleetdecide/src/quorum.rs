//! The quorum arithmetic: how many voting members there are, how many are
//! healthy, and whether a removal keeps a majority.

use serde::Serialize;

use crate::view::FleetView;
use fleetfacts::{is_healthy_voter, is_voting};
use protocol::view::NodeFacts;

// === The quorum arithmetic ===

pub use protocol::etcd::{keeps_quorum, quorum};

/// What a removal takes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Removing {
    /// A healthy voting member.
    HealthyVoter,
    /// A voting member that is down (NotReady, or its host left).
    DownVoter,
    /// A member that does not vote (a learner).
    NonVoter,
}

/// The voting members as the controller counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct VoterCount {
    /// Voting members whose Nodes are seen.
    pub seen: usize,
    /// Voting members with no Node seen: the configured count minus the
    /// voting members seen (not counting the swap's incoming host); each
    /// counts as down.
    pub missing: usize,
    /// Healthy voting members.
    pub healthy: usize,
}

impl VoterCount {
    /// All voting members, seen or not.
    pub fn members(&self) -> usize {
        self.seen + self.missing
    }

    /// Members and healthy members left after `removing` one.
    pub fn after_removal(&self, removing: Removing) -> (usize, usize) {
        match removing {
            Removing::HealthyVoter => (
                self.members().saturating_sub(1),
                self.healthy.saturating_sub(1),
            ),
            Removing::DownVoter => (self.members().saturating_sub(1), self.healthy),
            Removing::NonVoter => (self.members(), self.healthy),
        }
    }

    /// Whether removing one member keeps quorum.
    pub fn removal_keeps_quorum(&self, removing: Removing) -> bool {
        let (m, h) = self.after_removal(removing);
        keeps_quorum(m, h)
    }
}

/// Counts the voting members. `incoming` (the swap's incoming host) is not
/// counted against the configured number when working out missing voters,
/// since it is there in addition to them while the swap runs.
pub fn count_voters(v: &FleetView, incoming: Option<&str>) -> VoterCount {
    let mut seen = v.nodes.iter().filter(|n| is_voting(n)).count();
    let mut healthy = v.nodes.iter().filter(|n| is_healthy_voter(n)).count();
    let mut seen_not_incoming = v
        .nodes
        .iter()
        .filter(|n| is_voting(n) && Some(n.name.as_str()) != incoming)
        .count();
    // The smaller of the Nodes' count and etcd's: a Node's voter label
    // and condition are written by others too, a member only by etcd.
    let p = v.etcd();
    if p.known() {
        let (members, _) = p.voters_after(None);
        let incoming_votes = incoming
            .and_then(|i| p.of_node(i))
            .is_some_and(|m| !m.member.learner);
        seen = seen.min(members);
        healthy = healthy.min(seen);
        seen_not_incoming =
            seen_not_incoming.min(members.saturating_sub(usize::from(incoming_votes)));
    }
    VoterCount {
        seen,
        missing: v.settings.voters.saturating_sub(seen_not_incoming),
        healthy,
    }
}

/// What removing `n`'s member takes away.
pub fn removing(n: &NodeFacts) -> Removing {
    if is_healthy_voter(n) {
        Removing::HealthyVoter
    } else if is_voting(n) {
        Removing::DownVoter
    } else {
        Removing::NonVoter
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use proptest::prelude::*;

    // === The quorum arithmetic ===

    #[test]
    fn quorum_is_a_strict_majority() {
        for (members, q) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)] {
            assert_eq!(quorum(members), q, "{members} members");
        }
        assert!(!keeps_quorum(0, 1), "no member left is never a quorum");
        assert!(keeps_quorum(1, 1));
    }

    #[test]
    fn a_removal_keeps_quorum_only_when_the_healthy_voters_left_are_a_majority() {
        // (voting members, healthy, removing, keeps quorum)
        let table = [
            (4, 4, Removing::HealthyVoter, true), // the swap's removal: 3 of 3
            (4, 3, Removing::HealthyVoter, true), // 2 of 3
            (4, 2, Removing::HealthyVoter, false), // 1 of 3
            (4, 3, Removing::DownVoter, true),    // 3 of 3
            (3, 2, Removing::DownVoter, true),    // 2 of 2
            (3, 1, Removing::DownVoter, false),   // 1 of 2
            (3, 2, Removing::HealthyVoter, false), // 1 of 2
            (3, 3, Removing::HealthyVoter, true), // 2 of 2
            (2, 2, Removing::HealthyVoter, true), // 1 of 1
            (1, 1, Removing::HealthyVoter, false), // nothing left
            (3, 1, Removing::NonVoter, false),    // 1 of 3 already lost
            (3, 2, Removing::NonVoter, true),     // a learner: 2 of 3
            (5, 3, Removing::HealthyVoter, false), // 2 of 4
            (5, 4, Removing::HealthyVoter, true), // 3 of 4
        ];
        for (members, healthy, what, expected) in table {
            let count = VoterCount {
                seen: members,
                missing: 0,
                healthy,
            };
            assert_eq!(
                count.removal_keeps_quorum(what),
                expected,
                "{members} members, {healthy} healthy, removing {what:?}"
            );
        }
    }

    #[test]
    fn a_missing_voter_counts_as_down() {
        let mut v = fleet();
        v.nodes.retain(|n| n.name != "n3");
        let count = count_voters(&v, None);
        assert_eq!((count.seen, count.missing, count.healthy), (2, 1, 2));
        assert_eq!(count.members(), 3);
    }

    #[test]
    fn a_voting_incoming_member_is_left_out_of_etcds_count_of_the_others_and_a_learner_is_not() {
        // n4 promoted (a voting member); n3's Node dressed as a voter with
        // no member of its own: etcd lists n1, n2 and n4.
        let mut v = after_promotion();
        node_mut(&mut v, "n3").etcd_label = false;
        refresh_etcd_views_voting(&mut v, |_| true, |_| false);
        node_mut(&mut v, "n3").etcd_label = true;
        let count = count_voters(&v, Some("n4"));
        // The others: n1 and n2 by etcd (3 members less n4), not the Nodes' 3.
        assert_eq!(count.missing, 1, "{count:?}");
        // n4 still a learner: etcd's voters are n1 and n2, none of them
        // the incoming host, so one voter is missing all the same.
        let mut learning = after_promotion();
        node_mut(&mut learning, "n3").etcd_label = false;
        node_mut(&mut learning, "n4").etcd_is_voter = false;
        refresh_etcd_views_voting(&mut learning, |_| true, |_| false);
        node_mut(&mut learning, "n3").etcd_label = true;
        let count = count_voters(&learning, Some("n4"));
        assert_eq!((count.seen, count.missing), (2, 1), "{count:?}");
    }

    proptest! {
        #[test]
        fn keeps_quorum_means_the_healthy_left_outnumber_the_rest(members in 0usize..50, healthy in 0usize..50) {
            let healthy = healthy.min(members);
            let ok = keeps_quorum(members, healthy);
            prop_assert_eq!(ok, members > 0 && 2 * healthy > members);
        }

        #[test]
        fn removing_a_healthy_voter_never_keeps_quorum_where_removing_a_down_one_would_not(
            members in 1usize..30, healthy in 0usize..30,
        ) {
            let healthy = healthy.min(members);
            let count = VoterCount { seen: members, missing: 0, healthy };
            if count.removal_keeps_quorum(Removing::HealthyVoter) {
                prop_assert!(count.removal_keeps_quorum(Removing::DownVoter));
            }
            if count.removal_keeps_quorum(Removing::DownVoter) {
                prop_assert!(count.removal_keeps_quorum(Removing::NonVoter) || healthy * 2 <= members);
            }
        }
    }
}
