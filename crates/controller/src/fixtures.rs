//! Test fixtures shared by the unit tests of `status` and `metrics`: one
//! fleet as etcd and the reports show it.

use protocol::{
    etcd::{EtcdView, Member, MemberId},
    report::{Eligibility, HostPart},
    view::NodeFacts,
};

/// The tests' now, in unix seconds.
pub const NOW: i64 = 10_000;

/// Member `id` of `node`, by k3s's member name.
pub fn member(id: u64, node: &str, learner: bool) -> Member {
    Member {
        id: MemberId(id),
        name: format!("{node}-0a1b2c3d"),
        peer_urls: vec![format!("https://10.0.0.{id}:2380")],
        client_urls: vec![],
        learner,
    }
}

/// A server's view of etcd, read by its own member `me` at `read_at`, with
/// `leader` leading.
pub fn etcd_view(me: u64, read_at: i64, leader: u64, members: Vec<Member>) -> EtcdView {
    EtcdView {
        read_at,
        member: MemberId(me),
        members,
        leader: Some(MemberId(leader)),
        raft_term: 3,
        raft_index: 77,
        db_size: 3 << 20,
        alarms: vec![],
        healthy: true,
    }
}

/// A Ready Node `nN` (a voter with k3s's marks, or an agent) whose host
/// beat 5 s ago, reporting `etcd`.
pub fn node(name: &str, voter: bool, etcd: Option<EtcdView>) -> NodeFacts {
    let mut n = NodeFacts {
        name: name.into(),
        ready: true,
        etcd_label: voter,
        etcd_is_voter: voter,
        control_plane_label: voter,
        host: Some(HostPart {
            heartbeat_at: NOW - 5,
            demotion: voter.then_some(Eligibility::Ok),
            promotion: None,
            etcd,
        }),
        ..NodeFacts::default()
    };
    n.k3s.node_address = voter.then(|| format!("10.0.0.{}", &name[1..]));
    n
}
