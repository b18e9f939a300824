//! `fleet-role-actuator remove-ghost`: whether a member etcd lists and no
//! Node stands for may be removed by hand, decided on etcd's own member
//! list, the Nodes, the regrade Lease and the health of each voting member.
//!
//! A ghost is the member of a host that is gone (its Node deleted, k3s#11231,
//! or a member added outside k3s): it may vote with nothing behind it, and
//! quorum counts it. Removing a member that is really down never lowers the
//! healthy count, so it cannot cost quorum; the danger is removing one that
//! is not a ghost. So:
//!
//! - no Node may stand for it by k3s's own rule (its name and, where the
//!   Node publishes one, its address: [`Member::belongs_to`]). A Node is any
//!   `patch nodes` holder's to create or dress, so a forged Node can only
//!   make a ghost look owned (a refusal, the safe side);
//! - it must not answer as healthy when asked itself: a Node whose address
//!   annotation another writer changed can make a live member look like a
//!   ghost, and a live member serves;
//! - the voters left must be a healthy quorum of the voters after the
//!   removal, in case etcd's view of it is not this one;
//! - no change may hold the regrade Lease (the controller reads etcd's
//!   membership for its gates while it moves voters).

use protocol::{
    LeaseFacts,
    etcd::{Member, MemberId, keeps_quorum, quorum},
    text::one_line,
};

use crate::learner_removal::member_named;

/// A Node as the ghost check reads it: its name and the etcd address k3s
/// published on it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddress {
    /// The Node's name.
    pub name: String,
    /// Its `etcd.k3s.cattle.io/node-address`.
    pub address: Option<String>,
}

/// Why the removal is refused; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No member matches what was asked.
    #[error(
        "etcd lists no member {asked} (its id as `fleet-role status` or the host's report lists it, or its name): nothing to remove"
    )]
    NoSuchMember {
        /// What was asked, escaped.
        asked: String,
    },
    /// A Node stands for the member.
    #[error(
        "member {id} ({name}) is the member of the Node {node}: not a ghost; a host's voter leaves through a swap or a shrink (`fleet-role shrink --out {node}`)"
    )]
    HasNode {
        /// Its id.
        id: MemberId,
        /// Its name, escaped.
        name: String,
        /// The Node, escaped.
        node: String,
    },
    /// The member answers as healthy.
    #[error(
        "member {id} ({name}) answers as healthy: a member that serves is no ghost of a host gone; find its host first"
    )]
    Serves {
        /// Its id.
        id: MemberId,
        /// Its name, escaped.
        name: String,
    },
    /// A change holds the regrade Lease.
    #[error("the change {0} holds the regrade Lease: wait for it to end, or `fleet-role abort`")]
    ChangeUnderWay(String),
    /// The voters left are no healthy quorum.
    #[error(
        "{healthy} of the {voters} voting members left would answer as healthy, under the {quorum} a quorum needs: bring the voters back first"
    )]
    VotersUnhealthy {
        /// The voting members left answering as healthy.
        healthy: usize,
        /// The voting members left.
        voters: usize,
        /// Their quorum.
        quorum: usize,
    },
}

/// The ghost to remove, or why not. `members` is etcd's list as this host's
/// member gives it; `nodes` the cluster's Nodes; `health` says, for each
/// member asked (the voters and the one named), whether it served a
/// linearizable read (one not listed counts as unhealthy); `lease` the
/// regrade Lease (`None`: there is none), judged at `now` with `margin`
/// seconds of clock skew.
pub fn verdict(
    members: &[Member],
    asked: &str,
    nodes: &[NodeAddress],
    health: &[(MemberId, bool)],
    lease: Option<&LeaseFacts>,
    now: i64,
    margin: i64,
) -> Result<MemberId, Refusal> {
    let m = member_named(members, asked).ok_or_else(|| Refusal::NoSuchMember {
        asked: one_line(asked),
    })?;
    let name = if m.name.is_empty() {
        "never started, no name".to_string()
    } else {
        one_line(&m.name)
    };
    if let Some(n) = nodes
        .iter()
        .find(|n| m.belongs_to(&n.name, n.address.as_deref()))
    {
        return Err(Refusal::HasNode {
            id: m.id,
            name,
            node: one_line(&n.name),
        });
    }
    let healthy = |id: MemberId| health.iter().any(|(h, ok)| *h == id && *ok);
    if healthy(m.id) {
        return Err(Refusal::Serves { id: m.id, name });
    }
    if let Some(l) = lease
        && let Some(swap) = l.swap.as_deref()
        // Valid by a clock `margin` seconds behind this one.
        && l.valid_at(now.saturating_sub(margin.max(0)), 0)
    {
        return Err(Refusal::ChangeUnderWay(one_line(swap)));
    }
    let left: Vec<MemberId> = members
        .iter()
        .filter(|v| !v.learner && v.id != m.id)
        .map(|v| v.id)
        .collect();
    let healthy_left = left.iter().filter(|id| healthy(**id)).count();
    if !keeps_quorum(left.len(), healthy_left) {
        return Err(Refusal::VotersUnhealthy {
            healthy: healthy_left,
            voters: left.len(),
            quorum: quorum(left.len()),
        });
    }
    Ok(m.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, name: &str, host: &str, learner: bool) -> Member {
        Member {
            id: MemberId(id),
            name: name.into(),
            peer_urls: vec![format!("https://{host}:2380")],
            client_urls: vec![],
            learner,
        }
    }

    fn node(name: &str, address: &str) -> NodeAddress {
        NodeAddress {
            name: name.into(),
            address: Some(address.into()),
        }
    }

    /// Three hosts' voters and a ghost voter whose host is gone.
    fn cluster() -> (Vec<Member>, Vec<NodeAddress>, Vec<(MemberId, bool)>) {
        let members = vec![
            member(1, "s1-00000001", "10.0.0.1", false),
            member(2, "s2-00000002", "10.0.0.2", false),
            member(3, "s3-00000003", "10.0.0.3", false),
            member(9, "gone-00000009", "10.0.0.9", false),
        ];
        let nodes = vec![
            node("s1", "10.0.0.1"),
            node("s2", "10.0.0.2"),
            node("s3", "10.0.0.3"),
        ];
        let health = vec![
            (MemberId(1), true),
            (MemberId(2), true),
            (MemberId(3), true),
        ];
        (members, nodes, health)
    }

    #[test]
    fn a_ghost_no_node_stands_for_is_removed_by_its_id_or_its_name() {
        let (m, n, h) = cluster();
        assert_eq!(
            verdict(&m, "0000000000000009", &n, &h, None, 0, 0),
            Ok(MemberId(9))
        );
        assert_eq!(
            verdict(&m, "gone-00000009", &n, &h, None, 0, 0),
            Ok(MemberId(9))
        );
    }

    #[test]
    fn a_member_a_node_stands_for_is_refused_naming_the_node() {
        let (m, n, h) = cluster();
        let r = verdict(&m, "2", &n, &h, None, 0, 0).unwrap_err();
        assert!(
            matches!(&r, Refusal::HasNode { node, .. } if node == "s2"),
            "{r}"
        );
        assert!(r.to_string().contains("shrink --out s2"), "{r}");
    }

    #[test]
    fn a_member_whose_node_publishes_another_address_is_a_ghost_unless_it_serves() {
        let (m, mut n, mut h) = cluster();
        n[1].address = Some("10.0.0.22".into());
        // A writer moved s2's address annotation: s2's member looks like
        // a ghost, but it answers as healthy.
        assert!(matches!(
            verdict(&m, "2", &n, &h, None, 0, 0),
            Err(Refusal::Serves { .. })
        ));
        h.retain(|(id, _)| *id != MemberId(2));
        assert_eq!(verdict(&m, "2", &n, &h, None, 0, 0), Ok(MemberId(2)));
    }

    #[test]
    fn a_change_holding_the_lease_refuses_and_a_lapsed_one_does_not() {
        let (m, n, h) = cluster();
        let lease = LeaseFacts {
            swap: Some("swap-1".into()),
            holder: Some("fleet-role".into()),
            renew_time: Some(100),
            duration_secs: Some(15),
            ..LeaseFacts::default()
        };
        assert!(matches!(
            verdict(&m, "9", &n, &h, Some(&lease), 110, 2),
            Err(Refusal::ChangeUnderWay(s)) if s == "swap-1"
        ));
        assert_eq!(
            verdict(&m, "9", &n, &h, Some(&lease), 200, 2),
            Ok(MemberId(9))
        );
    }

    #[test]
    fn a_removal_leaving_no_healthy_quorum_is_refused() {
        let (m, n, _) = cluster();
        let h = [(MemberId(1), true)];
        let r = verdict(&m, "9", &n, &h, None, 0, 0).unwrap_err();
        assert_eq!(
            r,
            Refusal::VotersUnhealthy {
                healthy: 1,
                voters: 3,
                quorum: 2
            }
        );
    }

    #[test]
    fn an_unknown_member_is_refused() {
        let (m, n, h) = cluster();
        assert!(matches!(
            verdict(&m, "77", &n, &h, None, 0, 0),
            Err(Refusal::NoSuchMember { .. })
        ));
    }
}
