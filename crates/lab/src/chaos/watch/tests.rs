use super::*;

fn member(name: &str, learner: bool) -> etcd_gw::Member {
    etcd_gw::Member {
        id: 1,
        name: name.into(),
        peer_urls: vec![],
        client_urls: vec![],
        is_learner: learner,
    }
}

fn db(v: &[(&str, bool)]) -> BTreeMap<String, bool> {
    v.iter().map(|(h, b)| (h.to_string(), *b)).collect()
}

#[test]
fn a_member_is_its_hosts_by_k3s_naming() {
    assert_eq!(host_of("server-2-1a2b3c4d"), "server-2");
    assert_eq!(host_of("agent-1-00ff00ff"), "agent-1");
}

#[test]
fn a_datastore_gone_while_its_host_still_has_a_voting_member_is_a_violation() {
    let before = db(&[("server-1", true), ("server-2", true)]);
    let now = db(&[("server-1", true), ("server-2", false)]);
    let voting = [
        member("server-1-aaaa0000", false),
        member("server-2-bbbb0000", false),
    ];
    let found = moved_while_voting(&before, &now, &voting);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("server-2's datastore moved"),
        "{found:?}"
    );
}

#[test]
fn a_datastore_gone_after_its_member_left_or_beside_a_new_learner_is_not() {
    let before = db(&[("server-2", true)]);
    let now = db(&[("server-2", false)]);
    // Its member removed first, as the finish does.
    assert!(moved_while_voting(&before, &now, &[member("server-1-aaaa0000", false)]).is_empty());
    // A start over a tombstone backs the old datastore up and joins anew.
    assert!(moved_while_voting(&before, &now, &[member("server-2-cccc0000", true)]).is_empty());
    // Never there: no move.
    let never = db(&[("agent-1", false)]);
    assert!(moved_while_voting(&never, &never, &[member("agent-1-dddd0000", false)]).is_empty());
}

#[test]
fn a_quorum_read_stall_past_the_bound_is_said_once_and_an_answer_ends_it() {
    let t0 = clock::Clock::system().now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut w = Stall::new(t0);
    assert_eq!(w.observe(at(10), false, false), None);
    assert_eq!(w.observe(at(30), false, false), None);
    let v = w.observe(at(31), false, false);
    assert!(v.is_some_and(|v| v.contains("for 31 s")));
    assert_eq!(w.observe(at(40), false, false), None, "said once");
    assert_eq!(w.observe(at(41), true, false), None);
    assert_eq!(w.longest_ms, 41_000);
    // A new stall after the answer is judged afresh.
    assert!(w.observe(at(80), false, false).is_some());
}

#[test]
fn a_stall_while_the_schedule_has_a_member_down_is_excused_until_the_bound_after_it() {
    let t0 = clock::Clock::system().now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut w = Stall::new(t0);
    // A member down by the schedule from 5 s to 50 s.
    for s in (5..=50).step_by(5) {
        assert_eq!(w.observe(at(s), false, true), None);
    }
    assert_eq!(w.observe(at(80), false, false), None);
    assert!(w.observe(at(81), false, false).is_some());
    assert_eq!(w.longest_ms, 81_000);
}

#[test]
fn the_voting_members_may_be_the_fleets_voters_or_one_more_and_nothing_else() {
    let three = [
        member("server-1-a", false),
        member("server-2-b", false),
        member("server-3-c", false),
    ];
    assert_eq!(voting_out_of_range(&three, 3), None);
    let mut four = three.to_vec();
    four.push(member("agent-1-d", false));
    assert_eq!(voting_out_of_range(&four, 3), None);
    // A learner is no voter: three voters and a learner are fine, two and
    // a learner are a member removed before its replacement could vote.
    let mut two = three[..2].to_vec();
    two.push(member("agent-1-d", true));
    let w = voting_out_of_range(&two, 3).unwrap();
    assert!(w.starts_with("2 voting members, the fleet has 3"), "{w}");
    four.push(member("agent-2-e", false));
    assert!(
        voting_out_of_range(&four, 3)
            .unwrap()
            .starts_with("5 voting")
    );
}
