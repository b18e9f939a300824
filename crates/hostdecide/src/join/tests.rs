//! Unit tests of `join.rs`: which voter a step-down names in `server:`.
use super::*;
use protocol::etcd::{Member, MemberId};

/// A member on 10.0.0.`id`: a voter or learner, started or not.
fn member(id: u64, learner: bool, started: bool) -> Member {
    Member {
        id: MemberId(id),
        name: if started {
            format!("n{id}-0000000{id}")
        } else {
            String::new()
        },
        peer_urls: vec![format!("https://10.0.0.{id}:2380")],
        client_urls: if started {
            vec![format!("https://10.0.0.{id}:2379")]
        } else {
            vec![]
        },
        learner,
    }
}

/// The view of member `me` over `members`.
fn view(me: u64, members: Vec<Member>) -> EtcdView {
    EtcdView {
        read_at: 0,
        member: MemberId(me),
        members,
        leader: Some(MemberId(me)),
        raft_term: 2,
        raft_index: 10,
        db_size: 1,
        alarms: vec![],
        healthy: true,
    }
}

fn url(s: &str) -> JoinUrl {
    JoinUrl::parse(s).unwrap()
}

fn at(s: &str) -> Configured<'static> {
    Configured::Url(Box::leak(Box::new(url(s))))
}

#[test]
fn a_first_server_whose_agent_names_a_voter_still_there_is_left_as_it_is() {
    let v = view(1, vec![member(1, false, true), member(2, false, true)]);
    assert_eq!(
        for_step_down(&v, Configured::Nothing, at("https://10.0.0.2:6443")),
        JoinChoice::Keep
    );
}

#[test]
fn a_host_whose_units_both_name_a_voter_still_there_is_left_as_it_is() {
    let v = view(
        3,
        vec![
            member(1, false, true),
            member(2, false, true),
            member(3, false, true),
        ],
    );
    let two = at("https://10.0.0.2:6443");
    assert_eq!(
        for_step_down(&v, two, at("https://10.0.0.1:6443")),
        JoinChoice::Keep
    );
}

#[test]
fn a_server_that_names_a_voter_swapped_out_since_is_given_the_lowest_voter_there_at_its_port() {
    // 10.0.0.3 joined through 10.0.0.1, since swapped out.
    let v = view(
        3,
        vec![
            member(4, false, true),
            member(2, false, true),
            member(3, false, true),
        ],
    );
    let old = at("https://10.0.0.1:7443");
    assert_eq!(
        for_step_down(&v, old, old),
        JoinChoice::Name(url("https://10.0.0.2:7443"))
    );
}

#[test]
fn an_agent_with_no_server_or_a_stale_one_is_given_the_voter_its_server_unit_names() {
    let v = view(
        3,
        vec![
            member(1, false, true),
            member(2, false, true),
            member(3, false, true),
        ],
    );
    let two = at("https://10.0.0.2:6443");
    assert_eq!(
        for_step_down(&v, two, Configured::Nothing),
        JoinChoice::Name(url("https://10.0.0.2:6443"))
    );
    assert_eq!(
        for_step_down(&v, two, at("https://10.0.0.9:6443")),
        JoinChoice::Name(url("https://10.0.0.2:6443"))
    );
    // The first server (no server: at all) and an agent with none: a voter.
    assert_eq!(
        for_step_down(&v, Configured::Nothing, Configured::Nothing),
        JoinChoice::Name(url("https://10.0.0.1:6443"))
    );
}

#[test]
fn the_host_itself_a_learner_and_a_member_not_started_are_never_named() {
    // Only this host's member, a learner and an unstarted voter remain.
    let v = view(
        1,
        vec![
            member(1, false, true),
            member(2, true, true),
            member(3, false, false),
        ],
    );
    for s in [
        "https://10.0.0.1:6443",
        "https://10.0.0.2:6443",
        "https://10.0.0.3:6443",
    ] {
        assert_eq!(for_step_down(&v, at(s), at(s)), JoinChoice::NoVoter, "{s}");
    }
}

#[test]
fn a_server_named_by_dns_name_is_replaced_by_a_voter_s_address() {
    // A name cannot be matched against etcd's peer addresses without a
    // lookup the step-down does not make: an address is named instead.
    let v = view(1, vec![member(1, false, true), member(2, false, true)]);
    let name = at("https://server-2:6443");
    assert_eq!(
        for_step_down(&v, name, name),
        JoinChoice::Name(url("https://10.0.0.2:6443"))
    );
}

#[test]
fn a_server_value_that_is_no_url_is_replaced_by_a_voter_at_k3s_s_port() {
    let v = view(1, vec![member(1, false, true), member(3, false, true)]);
    assert_eq!(
        for_step_down(&v, Configured::NotAUrl, Configured::NotAUrl),
        JoinChoice::Name(url("https://10.0.0.3:6443"))
    );
}
