use super::*;

fn member(name: &str) -> etcd_gw::Member {
    etcd_gw::Member {
        id: 1,
        name: name.into(),
        peer_urls: vec![],
        client_urls: vec![],
        is_learner: true,
    }
}

#[test]
fn remove_peer_takes_only_the_member_whose_name_and_peer_host_both_match() {
    let m = etcd_gw::Member {
        id: 9,
        name: "server-2-0a1b2c3d".into(),
        peer_urls: vec!["https://198.18.3.2:2380".into()],
        client_urls: vec![],
        is_learner: false,
    };
    let members = [m.clone()];
    assert_eq!(
        remove_peer_target(&members, "server-2-0a1b2c3d", "198.18.3.2"),
        Some(&m)
    );
    // The right name at another address, or another name: nothing.
    assert_eq!(
        remove_peer_target(&members, "server-2-0a1b2c3d", "198.18.3.9"),
        None
    );
    assert_eq!(
        remove_peer_target(&members, "server-2-ffffffff", "198.18.3.2"),
        None
    );
}

#[test]
fn a_join_is_refused_while_a_member_carries_the_nodes_name() {
    let left = [member("server-1-0a1b2c3d"), member("agent-1-deadbeef")];
    assert_eq!(
        duplicate_member(&left, "agent-1").as_deref(),
        Some("agent-1-deadbeef")
    );
    // A name that only starts like the node's is another node.
    assert_eq!(duplicate_member(&left, "agent"), None);
    assert_eq!(
        duplicate_member(&[member("agent-10-deadbeef")], "agent-1"),
        None
    );
    // A learner that has not started yet has no name.
    assert_eq!(duplicate_member(&[member("")], "agent-1"), None);
}
