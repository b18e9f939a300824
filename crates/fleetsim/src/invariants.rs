//! The quorum invariants, and the simulated etcd the hosts read, hold
//! etcd's truth (the hosts'), never what others wrote on the Nodes: an
//! intruder's labels or conditions must not make a safe removal look
//! unsafe to the invariant, nor hand the controller a member etcd lacks.

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

/// The members listed in `host`'s view of etcd, by name, and whether its
/// own is healthy (`None`: it reports no view).
fn listed(w: &World, host: &str) -> Option<(Vec<String>, bool)> {
    let view = w.v.node(host)?.host.as_ref()?.etcd.as_ref()?;
    let names = view.members.iter().map(|m| m.name.clone()).collect();
    Some((names, view.healthy))
}

#[test]
fn an_agent_dressed_as_a_voter_is_listed_in_no_hosts_view_of_etcd_and_reads_none() {
    let mut w = world();
    w.intrude(3, Intrusion::DressedAsVoter);
    w.react();
    let (members, _) = listed(&w, "n1").expect("n1 reads etcd");
    assert_eq!(members.len(), 3, "{members:?}");
    assert!(!members.iter().any(|m| m.starts_with("n4")), "{members:?}");
    assert_eq!(listed(&w, "n4"), None);
}

#[test]
fn a_voter_forged_not_ready_reports_its_member_healthy() {
    let mut w = world();
    w.intrude(1, Intrusion::ForgedNotReady);
    w.react();
    assert!(!w.v.node("n2").unwrap().ready);
    assert!(listed(&w, "n2").expect("n2 reads etcd").1);
}
