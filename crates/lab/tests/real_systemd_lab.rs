//! A whole lab on real systemd: servers whose k3s units become active only
//! once the k3s stand-in sends READY=1, an agent, the actuators as the real
//! unit, every host's API and etcd reached from outside over the lab's bridge.
//! Fails (never skips) when containers cannot run here.

use std::{path::Path, time::Duration};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use lab::{
    api::Apis,
    etcd_gw, overlap,
    spec::LabSpec,
    systemd_lab::{Options, SystemdLab},
    world::{self, Bins},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lab_on_real_systemd_comes_up_with_ready_k3s_units_voters_and_running_actuators() {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_fleet-role-lab"))
        .parent()
        .unwrap();
    let bins = Bins::beside(bin_dir).expect("the workspace's binaries are built");
    let dir = tempfile::tempdir().unwrap();
    let lab = SystemdLab::up(
        Options {
            dir: dir.path().join("lab"),
            servers: 2,
            agents: 1,
            timings: Default::default(),
            bins,
        },
        &|l| eprintln!("{l}"),
    )
    .await
    .expect("the lab comes up on real systemd (systemd-nspawn must run here, as root)");
    let spec = &lab.spec;
    assert!(spec.hosts.iter().all(|h| h.ip.octets()[..2] == [198, 18]));

    // Both members vote, as seen from outside through the bridge.
    let (_, members) = etcd_gw::member_list(&LabSpec::etcd_url(spec.hosts[0].ip))
        .await
        .unwrap();
    assert_eq!(members.len(), 2, "{members:?}");
    assert!(members.iter().all(|m| !m.is_learner), "{members:?}");

    let apis = Apis::for_lab(spec).unwrap();
    for h in &spec.hosts {
        let n = apis
            .any(|c| {
                let n = h.name.clone();
                async move { Api::<Node>::all(c).get(&n).await }
            })
            .await
            .unwrap();
        assert!(world::condition(&n, "Ready"), "{} Ready", h.name);
        let m = lab.machine(&h.name).unwrap();
        let unit = if h.name.starts_with("server") {
            "k3s"
        } else {
            "k3s-agent"
        };
        // Active, not activating: READY=1 reached systemd.
        assert_eq!(
            m.active_state(unit).unwrap(),
            "active",
            "{unit} on {}",
            h.name
        );
        lab.wait_active(&h.name, "fleet-role-actuator", Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(
            overlap::of_k3s_units(m, Duration::from_secs(60)).unwrap(),
            vec![],
            "{}",
            h.name
        );
    }
}
