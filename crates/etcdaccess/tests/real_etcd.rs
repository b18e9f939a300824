//! The client against real etcd: a three-member cluster on loopback (plain
//! HTTP here; the lab's hosts read theirs over TLS with k3s's files).

use std::{net::Ipv4Addr, time::Duration};

use etcdaccess::{Endpoint, Error};
use protocol::etcd::MemberId;
use testcp::{ClusterState, Etcd, EtcdOptions};

/// Three members on `ip` ([`testcp::etcd::cluster`]).
async fn cluster(dir: &std::path::Path, ip: Ipv4Addr) -> Vec<Etcd> {
    testcp::etcd::cluster(dir, ip.into(), &["m1", "m2", "m3"])
        .await
        .expect("etcd starts")
}

fn endpoint(e: &Etcd) -> Endpoint {
    Endpoint {
        url: e.client_url().to_string(),
        tls: None,
        timeout: Duration::from_secs(10),
    }
}

#[tokio::test]
async fn a_members_view_lists_every_member_the_leader_and_its_health_and_leadership_moves_on_request()
 {
    let dir = tempfile::tempdir().unwrap();
    let members = cluster(dir.path(), Ipv4Addr::new(127, 0, 0, 21)).await;
    let view = etcdaccess::read(&endpoint(&members[0]), 1000)
        .await
        .unwrap();
    assert_eq!(view.read_at, 1000);
    assert_eq!(view.members.len(), 3);
    assert!(view.healthy && view.alarms.is_empty(), "{view:?}");
    assert!(view.members.iter().all(|m| !m.learner));
    let mut names: Vec<&str> = view.members.iter().map(|m| m.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["m1", "m2", "m3"]);
    let leader = view.leader.expect("a leader");
    assert!(view.raft_term >= 2 && view.raft_index > 0 && view.db_size > 0);

    // The leader hands its leadership to another voter (asked through
    // itself, as etcd requires).
    let mut on_leader = None;
    for m in &members {
        if etcdaccess::read(&endpoint(m), 0).await.unwrap().member == leader {
            on_leader = Some(m);
        }
    }
    let on_leader = on_leader.expect("one member is the leader");
    let to = view.members.iter().find(|m| m.id != leader).unwrap().id;
    etcdaccess::move_leader(&endpoint(on_leader), to)
        .await
        .unwrap();
    let mut now = None;
    for _ in 0..100 {
        now = etcdaccess::read(&endpoint(&members[0]), 0)
            .await
            .unwrap()
            .leader;
        if now == Some(to) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(now, Some(to));
}

#[tokio::test]
async fn a_learner_shows_in_the_view_and_only_a_learner_is_removed_by_remove_learner() {
    let dir = tempfile::tempdir().unwrap();
    let members = cluster(dir.path(), Ipv4Addr::new(127, 0, 0, 22)).await;
    let ep = endpoint(&members[0]);
    // A learner added and never started: what a rolled-back promotion leaves.
    let id = MemberId(testcp::etcd::add_learner(&ep.url, "http://127.0.0.1:1").await);
    let view = etcdaccess::read(&ep, 0).await.unwrap();
    let learner = view.member(id).expect("the learner is listed");
    assert!(learner.learner && learner.name.is_empty());
    assert_eq!(view.learners().count(), 1);

    let voter = view.voters().next().unwrap().id;
    assert!(matches!(
        etcdaccess::remove_learner(&ep, voter).await,
        Err(Error::Refused(_))
    ));
    assert!(matches!(
        etcdaccess::move_leader(&ep, id).await,
        Err(Error::Refused(_))
    ));
    etcdaccess::remove_learner(&ep, id).await.unwrap();
    let view = etcdaccess::read(&ep, 0).await.unwrap();
    assert_eq!((view.members.len(), view.learners().count()), (3, 0));
    // Gone already: nothing to do, no error.
    etcdaccess::remove_learner(&ep, id).await.unwrap();
}

/// Why a rollback stops its server before removing its learner, and why
/// that is not enough to make the check and the removal one (see the
/// actuator's `learner` module): etcd promotes a learner on its leader's
/// record of the learner's log, which does not fall when the learner stops;
/// but a voter that is down is outside the active quorum, and removing it
/// leaves the voters there were before.
#[tokio::test]
async fn a_caught_up_learner_whose_etcd_stopped_can_still_be_promoted_and_is_then_removed_as_a_down_voter()
 {
    let dir = tempfile::tempdir().unwrap();
    let ip = Ipv4Addr::new(127, 0, 0, 24);
    let members = cluster(dir.path(), ip).await;
    let ep = endpoint(&members[0]);
    let mut c = etcd_client::Client::connect([ep.url.as_str()], None)
        .await
        .unwrap();
    let mut opts = EtcdOptions::new("m4", ip.into(), &dir.path().join("learner")).unwrap();
    let id = MemberId(testcp::etcd::add_learner(&ep.url, &opts.peer_url).await);
    let mut initial: Vec<String> = members.iter().map(|m| m.options().peer_entry()).collect();
    initial.push(opts.peer_entry());
    opts.initial_cluster = initial.join(",");
    opts.initial_cluster_state = ClusterState::Existing;
    let mut learner = Etcd::spawn(opts).unwrap();
    // Caught up: its applied index reaches the voters'.
    let mut lc = etcd_client::Client::connect([learner.client_url()], None)
        .await
        .unwrap();
    let mut caught_up = false;
    for _ in 0..600 {
        let target = c.status().await.unwrap().raft_index();
        if let Ok(s) = lc.status().await
            && s.raft_applied_index() >= target
        {
            caught_up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(caught_up, "the learner caught up");
    learner.stop().await;

    // Stopped, it is still promoted (what k3s's leader asks every 15 s).
    c.member_promote(id.0)
        .await
        .expect("a caught-up learner is promoted with its etcd stopped");
    // Seen voting before the removal, it is refused by remove_learner...
    assert!(matches!(
        etcdaccess::remove_learner(&ep, id).await,
        Err(Error::Refused(_))
    ));
    // ...but promoted between its check and its removal, it would be
    // removed: etcd takes it, being down, and the three voters that were
    // there before serve on.
    c.member_remove(id.0)
        .await
        .expect("a down voter is removed");
    let view = etcdaccess::read(&ep, 0).await.unwrap();
    assert_eq!((view.members.len(), view.learners().count()), (3, 0));
    assert!(view.healthy, "{view:?}");
}

#[tokio::test]
async fn a_member_that_does_not_answer_is_an_error_within_the_bound() {
    // A port that accepts nothing: the connection fails or times out, and
    // the error names the endpoint.
    let ep = Endpoint {
        url: "http://127.0.0.1:1".into(),
        tls: None,
        timeout: Duration::from_secs(2),
    };
    let e = etcdaccess::read(&ep, 0).await.unwrap_err();
    assert!(e.to_string().contains("127.0.0.1:1"), "{e}");
}
