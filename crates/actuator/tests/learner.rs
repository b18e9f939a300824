//! A rollback's removal of its own learner, against a real etcd and the
//! systemctl stand-in: the host's server (the learner's etcd) is stopped and
//! confirmed stopped before the learner is removed, and nothing is removed
//! when that cannot be confirmed.

use std::{net::Ipv4Addr, path::Path, time::Duration};

use actuator::learner;
use etcdaccess::Endpoint;
use host::addresses::LocalAddresses;
use protocol::etcd::MemberId;
use standins::fixture::TestHost;
use testcp::{Etcd, EtcdOptions, Probe};

fn bin_dir() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_fleet-role-actuator"))
        .parent()
        .unwrap()
}

/// A one-member etcd and a learner added to it, never started, whose peer
/// address (`127.0.0.1`) is this host's: what a rolled-back promotion
/// leaves. Returns the member, its endpoint and the learner's id.
async fn etcd_with_a_learner(dir: &Path) -> (Etcd, Endpoint, MemberId) {
    let opts = EtcdOptions::new("voter", Ipv4Addr::new(127, 0, 0, 23).into(), dir).unwrap();
    let mut etcd = Etcd::spawn(opts).unwrap();
    etcd.wait_healthy(Probe::Linearizable, Duration::from_secs(120))
        .await
        .expect("etcd starts");
    let ep = Endpoint {
        url: etcd.client_url().to_string(),
        tls: None,
        timeout: Duration::from_secs(10),
    };
    let id = MemberId(testcp::etcd::add_learner(&ep.url, "http://127.0.0.1:1").await);
    (etcd, ep, id)
}

fn loopback() -> LocalAddresses {
    LocalAddresses::parse("  |-- 127.0.0.0\n     /8 host LOCAL\n", "")
}

fn listed(rt: &tokio::runtime::Runtime, ep: &Endpoint, id: MemberId) -> bool {
    rt.block_on(etcdaccess::read(ep, 0))
        .unwrap()
        .member(id)
        .is_some()
}

#[test]
fn a_rollback_removes_its_learner_only_once_its_server_is_confirmed_stopped() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (_etcd, ep, id) = rt.block_on(etcd_with_a_learner(dir.path()));
    let h = TestHost::new("learner-host", bin_dir()).as_server();
    assert!(h.active("k3s"));

    // No systemctl to be found: the server cannot be confirmed stopped, so
    // the learner stays (k3s's stall timeout removes it).
    let blind = host::Host::new(h.root(), "learner-host", clock::Clock::system())
        .with_search_path(dir.path().join("no-programs-here"));
    assert_eq!(
        rt.block_on(learner::remove_own(&ep, &blind, &loopback())),
        None
    );
    assert!(
        listed(&rt, &ep, id),
        "a learner removed under a running server"
    );
    assert!(h.active("k3s"));

    // The server stops first, then the learner goes; the server stays
    // enabled (the rollback's plan disables it).
    let host = host::Host::new(h.root(), "learner-host", clock::Clock::system())
        .with_search_path(h.path_env());
    assert_eq!(
        rt.block_on(learner::remove_own(&ep, &host, &loopback())),
        Some(id)
    );
    assert!(!h.active("k3s") && h.enabled("k3s"));
    assert!(!listed(&rt, &ep, id));
    assert!(
        h.systemd_log()
            .iter()
            .any(|l| l.contains("stop") && l.contains("k3s")),
        "{:?}",
        h.systemd_log()
    );
}

#[test]
fn a_rollback_may_stop_a_learner_or_an_etcd_that_serves_nothing_but_not_a_voter_whose_stop_loses_quorum()
 {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (_etcd, voter, _learner) = rt.block_on(etcd_with_a_learner(dir.path()));

    // Read through the one voter, as the host whose member etcd promoted
    // would read through its own: its stop leaves no voter at all.
    let refused = rt
        .block_on(learner::may_stop(&voter, 0))
        .expect_err("the only voter's stop was let through");
    assert!(refused.contains("votes (etcd promoted it)"), "{refused}");
    assert!(
        refused.contains("0 of the other voting members"),
        "{refused}"
    );

    // A host whose etcd serves nothing (its server never became ready, or
    // it is a learner refusing linearizable reads) holds no healthy vote.
    let silent = Endpoint {
        url: "http://127.0.0.1:1".into(),
        tls: None,
        timeout: Duration::from_secs(2),
    };
    assert_eq!(rt.block_on(learner::may_stop(&silent, 0)), Ok(()));
}
