//! The simulated etcd as its hosts read it: each up host with a member
//! reports a view of the members, the voters and its own member's health,
//! all taken from the hosts' truth ([`super::Host`]). Never from the
//! Nodes: k3s's etcd label, `EtcdIsVoter` and `Ready` are written by
//! others too (a `patch nodes` or `nodes/status` holder), and a real
//! etcd lists no member for an agent dressed as a voter nor calls a
//! serving member unhealthy because its Node reads NotReady. The
//! controller counts voters from these views (docs/security.md, "Nodes
//! dressed as voters"), so a view built from the Nodes would hand it the
//! intruder's word as etcd's.

use std::collections::BTreeMap;

use super::Host;
use fleetdecide::FleetView;
use protocol::etcd::{EtcdView, Member, MemberId};

/// A member's id, fixed by its host's name (a host rejoins under the same
/// one: the simulation never needs two).
fn id_of(name: &str) -> MemberId {
    MemberId(name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }))
}

/// Whether `h`'s member serves: its host up, its datastore there and no
/// tombstone left by a removal.
pub(super) fn serves(h: &Host) -> bool {
    h.up && h.datastore && !h.tombstone
}

/// Writes the view of every up host with a member, as etcd lists its
/// members now; clears that of an up host with none (an agent reads no
/// etcd, a removed member's etcd stops serving). A down host's view stays
/// as it was, going stale, and so does that of the host `cut` from the
/// API (its heartbeat cannot write it).
pub(super) fn report(v: &mut FleetView, hosts: &BTreeMap<String, Host>, cut: Option<&str>) {
    let truth = |name: &str| hosts.get(name).filter(|h| h.member);
    let members: Vec<Member> = v
        .nodes
        .iter()
        .filter_map(|n| {
            let h = truth(&n.name)?;
            Some(Member {
                id: id_of(&n.name),
                // The name and peer address k3s published on the Node when
                // it joined the member (the simulation's intruders leave
                // k3s's annotations alone).
                name: n
                    .k3s
                    .node_name
                    .clone()
                    .unwrap_or_else(|| format!("{}-0123abcd", n.name)),
                peer_urls: vec![format!(
                    "https://{}:2380",
                    n.k3s.node_address.as_deref().unwrap_or("10.0.9.9")
                )],
                client_urls: vec![],
                learner: !h.votes,
            })
        })
        .collect();
    let leader = v
        .nodes
        .iter()
        .find(|n| truth(&n.name).is_some_and(|h| h.votes && serves(h)))
        .map(|n| id_of(&n.name));
    for n in &mut v.nodes {
        let Some(h) = hosts.get(&n.name).filter(|h| h.up) else {
            continue;
        };
        if cut == Some(n.name.as_str()) {
            continue;
        }
        let Some(part) = n.host.as_mut() else {
            continue;
        };
        part.etcd = h.member.then(|| EtcdView {
            read_at: v.now,
            member: id_of(&n.name),
            members: members.clone(),
            leader,
            raft_term: 2,
            raft_index: 100,
            db_size: 1 << 20,
            alarms: vec![],
            healthy: serves(h),
        });
    }
}
