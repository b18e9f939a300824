//! The quorum invariants count etcd's truth, the hosts', never what others
//! wrote on the Nodes: an intruder's labels or conditions must not make a
//! safe removal look unsafe, nor an unsafe one safe.

use super::{Faults, Intrusion, World};
use fleetdecide::fixtures::fleet;

/// `fleet()`'s world: n1, n2, n3 voting; n4 and n5 agents.
fn world() -> World {
    World::new(fleet(), Faults::default())
}

#[test]
fn an_agent_dressed_as_a_voter_is_no_member_of_the_quorum_invariants_count() {
    let mut w = world();
    // n4's Node given k3s's etcd label and `EtcdIsVoter`; no member.
    w.intrude(3, Intrusion::DressedAsVoter);
    assert!(w.v.node("n4").unwrap().etcd_is_voter);
    assert_eq!(w.voters_truth("n4"), (3, 3, None));
}

#[test]
fn a_voter_forged_not_ready_counts_as_the_healthy_member_it_is() {
    let mut w = world();
    w.intrude(1, Intrusion::ForgedNotReady);
    w.react();
    assert!(!w.v.node("n2").unwrap().ready);
    assert_eq!(w.voters_truth("n2"), (3, 3, Some(true)));
}

#[test]
fn a_voter_whose_host_is_down_counts_as_an_unhealthy_member() {
    let mut w = world();
    let h = w.hosts.get_mut("n3").unwrap();
    h.up = false;
    h.down_since = Some(0);
    w.tick = 10;
    assert_eq!(w.voters_truth("n3"), (3, 2, Some(false)));
}
