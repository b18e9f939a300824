//! A mixed fleet: three servers on real systemd and a standby on a Docker
//! host (k3s in two containers of a private dockerd, the actuator beside
//! them), all on the lab's bridge. `fleet-role swap` moves a native voter's
//! seat to the Docker host and back while a writer puts to etcd: each swap
//! keeps every promise the seed's swap keeps, with "never together" read
//! from systemd's journal on the native host and from Docker's own event
//! stream on the Docker host. Fails, never skips, when nspawn or dockerd
//! cannot run.

use lab::{hosts::Hosts, scenario};

mod common;
use common::{fleet_role, lab_dir, lab_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_fleet_swaps_a_native_voter_for_a_docker_standby_and_back_with_no_failed_write() {
    let dir = lab_dir();
    let lab = lab_with(3, 0, 1, dir.path()).await;
    let (say, fleet_role) = (|l: &str| eprintln!("{l}"), fleet_role());
    let docker = "docker-1";

    let there = scenario::swap_with_controller(&lab, &fleet_role, "server-3", docker, &say)
        .await
        .expect("fleet-role swap of server-3 for the Docker host");
    for line in there.lines() {
        println!("native -> Docker: {line}");
    }
    let broken = there.broken_promises("server-3", docker);
    assert!(broken.is_empty(), "promises broken: {broken:#?}");
    assert!(
        lab.is_active(docker, "k3s").unwrap(),
        "its server container runs"
    );
    assert!(!lab.is_active(docker, "k3s-agent").unwrap());
    assert!(lab.is_active("server-3", "k3s-agent").unwrap());

    let back = scenario::swap_with_controller(&lab, &fleet_role, docker, "server-3", &say)
        .await
        .expect("fleet-role swap of the Docker host for server-3");
    for line in back.lines() {
        println!("Docker -> native: {line}");
    }
    let broken = back.broken_promises(docker, "server-3");
    assert!(broken.is_empty(), "promises broken: {broken:#?}");
    assert!(
        lab.is_active(docker, "k3s-agent").unwrap(),
        "it came home as an agent"
    );
    assert!(!lab.is_active(docker, "k3s").unwrap());
    assert!(lab.is_active("server-3", "k3s").unwrap());
    // Docker's events, read again at the end: the two containers never ran
    // together over both swaps.
    assert_eq!(lab.most_k3s_at_once(docker).unwrap(), 1);
}
