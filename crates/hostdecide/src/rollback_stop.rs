//! Whether a rollback may stop this host's server, decided on etcd's own
//! member list and the health of each voting member, under the host lock
//! just before the stop.
//!
//! The controller asks a rollback of an incoming host it saw as a learner,
//! or as a voter whose stop keeps quorum (its `quorum-at-host-stop` gate).
//! Its views lag etcd: k3s's etcd leader promotes a caught-up learner every
//! 15 s (`manageLearners` in k3s's `pkg/etcd/etcd.go`), so the learner the
//! controller saw may vote by the time the host acts. Growing from one voter,
//! that promotion makes two, and stopping the new one leaves etcd without
//! quorum until it comes back. The host reads the truth itself: if its
//! member votes, the other voters must be a healthy quorum of all the voting
//! members (its own still counted: it is removed only after the stop), or
//! the rollback is refused, nothing changed, and the host keeps its server
//! and its vote.

use protocol::etcd::{Member, MemberId, keeps_quorum, quorum};

/// Why the stop is refused; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this host's member {id} votes (etcd promoted it) and {healthy} of the other voting members answer as healthy, under the {quorum} of {voters} a quorum needs while it is stopped: the rollback is refused and the host keeps its server and its vote until the other voters are back"
)]
pub struct StopRefused {
    /// This host's member.
    pub id: MemberId,
    /// The other voting members answering as healthy.
    pub healthy: usize,
    /// All the voting members, this host's included.
    pub voters: usize,
    /// Their quorum.
    pub quorum: usize,
}

/// Whether the server of the host whose member is `own` may stop.
/// `members` is etcd's list as read just now; `voter_health` says, for each
/// voting member, whether it served a linearizable read when asked (one not
/// listed counts as unhealthy). A member that is a learner, or none at all
/// (`own` is `None`, or etcd does not list it), holds no vote: its stop
/// takes nothing from quorum.
pub fn may_stop(
    members: &[Member],
    own: Option<MemberId>,
    voter_health: &[(MemberId, bool)],
) -> Result<(), StopRefused> {
    #[cfg(feature = "plant")]
    if plants::active(plants::Plant::SkipHostQuorumAtRollback) {
        return Ok(());
    }
    let Some(me) = own.and_then(|id| members.iter().find(|m| m.id == id)) else {
        return Ok(());
    };
    if me.learner {
        return Ok(());
    }
    let voters: Vec<MemberId> = members
        .iter()
        .filter(|m| !m.learner)
        .map(|m| m.id)
        .collect();
    let healthy = voters
        .iter()
        .filter(|id| **id != me.id)
        .filter(|id| voter_health.iter().any(|(h, ok)| h == *id && *ok))
        .count();
    if keeps_quorum(voters.len(), healthy) {
        Ok(())
    } else {
        Err(StopRefused {
            id: me.id,
            healthy,
            voters: voters.len(),
            quorum: quorum(voters.len()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, learner: bool) -> Member {
        Member {
            id: MemberId(id),
            name: format!("n{id}-00aa11bb"),
            peer_urls: vec![format!("https://10.0.0.{id}:2380")],
            client_urls: vec![],
            learner,
        }
    }

    fn all_healthy(members: &[Member]) -> Vec<(MemberId, bool)> {
        members.iter().map(|m| (m.id, true)).collect()
    }

    #[test]
    fn a_learner_or_a_member_etcd_does_not_list_may_always_stop() {
        let members = [member(1, false), member(2, true)];
        assert_eq!(may_stop(&members, Some(MemberId(2)), &[]), Ok(()));
        assert_eq!(may_stop(&members, Some(MemberId(9)), &[]), Ok(()));
        assert_eq!(may_stop(&members, None, &[]), Ok(()));
    }

    #[test]
    fn a_member_promoted_beside_one_voter_may_not_stop_since_one_of_two_is_no_quorum() {
        let members = [member(1, false), member(2, false)];
        let r = may_stop(&members, Some(MemberId(2)), &all_healthy(&members));
        assert_eq!(
            r,
            Err(StopRefused {
                id: MemberId(2),
                healthy: 1,
                voters: 2,
                quorum: 2
            })
        );
        assert!(r.unwrap_err().to_string().contains("keeps its server"));
    }

    #[test]
    fn a_promoted_member_among_three_healthy_others_may_stop() {
        let members = [
            member(1, false),
            member(2, false),
            member(3, false),
            member(4, false),
        ];
        assert_eq!(
            may_stop(&members, Some(MemberId(4)), &all_healthy(&members)),
            Ok(())
        );
    }

    #[test]
    fn its_own_health_is_not_counted_and_an_unlisted_voter_is_unhealthy() {
        let members = [
            member(1, false),
            member(2, false),
            member(3, false),
            member(4, false),
        ];
        // Three of four would be a quorum only with its own vote counted.
        let health = [
            (MemberId(1), true),
            (MemberId(2), true),
            (MemberId(4), true),
        ];
        let r = may_stop(&members, Some(MemberId(4)), &health);
        assert_eq!(r.map_err(|e| (e.healthy, e.quorum)), Err((2, 3)));
    }
}
