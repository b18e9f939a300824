//! Test fixtures shared by the unit tests of `status` and `metrics`: one
//! fleet as etcd and the reports show it.

use protocol::{
    etcd::EtcdView,
    report::{Eligibility, HostPart},
    view::NodeFacts,
};

/// The tests' now, in unix seconds.
pub const NOW: i64 = 10_000;

pub use fleetdecide::fixtures::{etcd_view, member};

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
            release: Some(protocol::version::RELEASE.into()),
            credential_expires_at: None,
        }),
        ..NodeFacts::default()
    };
    n.k3s.node_address = voter.then(|| format!("10.0.0.{}", &name[1..]));
    n
}
