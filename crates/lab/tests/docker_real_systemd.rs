//! A mixed fleet: three servers on real systemd and a standby on a Docker
//! host (k3s in two containers of a private dockerd, the actuator beside
//! them), all on the lab's bridge. `fleet-role swap` moves a native voter's
//! seat to the Docker host and back while a writer puts to etcd: each swap
//! keeps every promise the seed's swap keeps, with "never together" read
//! from systemd's journal on the native host and from Docker's own event
//! stream on the Docker host. Fails, never skips, when nspawn or dockerd
//! cannot run.

use lab::scenario;

mod common;
use common::{fleet_role, lab_dir, lab_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_fleet_swaps_a_native_voter_for_a_docker_standby_and_back_with_no_failed_write() {
    let dir = lab_dir();
    let lab = lab_with(3, 0, 1, dir.path()).await;
    let (say, fleet_role) = (|l: &str| eprintln!("{l}"), fleet_role());
    let docker = "docker-1";

    for (out, incoming, way) in [
        ("server-3", docker, "native -> Docker"),
        (docker, "server-3", "Docker -> native"),
    ] {
        let run = scenario::swap_with_controller(&lab, &fleet_role, out, incoming, &say)
            .await
            .unwrap_or_else(|e| panic!("fleet-role swap of {out} for {incoming}: {e:#}"));
        for line in run.lines() {
            println!("{way}: {line}");
        }
        let broken = run.broken_promises(out, incoming);
        assert!(broken.is_empty(), "{way}: promises broken: {broken:#?}");
        // The incoming host's server runs (on the Docker host, its server
        // container), the outgoing one came home as an agent.
        for (host, runs, stopped) in [(incoming, "k3s", "k3s-agent"), (out, "k3s-agent", "k3s")] {
            assert!(
                lab.is_active(host, runs).unwrap(),
                "{way}: {host}'s {runs} does not run"
            );
            assert!(
                !lab.is_active(host, stopped).unwrap(),
                "{way}: {host}'s {stopped} still runs"
            );
        }
    }
    // Docker's events, read again at the end: the two containers never ran
    // together over both swaps.
    assert_eq!(lab.most_k3s_at_once(docker).unwrap(), 1);
}
