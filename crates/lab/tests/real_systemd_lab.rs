//! A whole lab on real systemd: servers whose k3s units become active only
//! once the k3s stand-in sends READY=1, an agent, the actuators as the real
//! unit, every host's API and etcd reached from outside over the lab's bridge.
//! Fails (never skips) when containers cannot run here.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use lab::{
    api::Apis,
    bounded, etcd_gw, machine, overlap,
    spec::LabSpec,
    systemd_lab::{Options, SystemdLab},
    world::Bins,
};
use tokio::sync::Mutex;

/// One lab at a time (at most three hosts up): the machine has 2 cores.
static SERIAL: Mutex<()> = Mutex::const_new(());

async fn lab_of(servers: usize, agents: usize, dir: &Path) -> SystemdLab {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_fleet-role-lab"))
        .parent()
        .unwrap();
    let bins = Bins::beside(bin_dir).expect("the workspace's binaries are built");
    let start = Instant::now();
    // FLEET_ROLE_LAB_KEEP=DIR: the lab in DIR, left for a look after the test
    // (each host's journal: journalctl -D DIR/hosts/HOST/var/log/journal).
    let keep = std::env::var_os("FLEET_ROLE_LAB_KEEP").map(std::path::PathBuf::from);
    let lab = SystemdLab::up(
        Options {
            dir: keep.unwrap_or_else(|| dir.join("lab")),
            servers,
            agents,
            timings: Default::default(),
            bins,
        },
        &|l| eprintln!("{l}"),
    )
    .await
    .expect("the lab comes up on real systemd (systemd-nspawn must run here, as root)");
    eprintln!(
        "{servers} servers and {agents} agents up in {:.0}s",
        start.elapsed().as_secs_f32()
    );
    lab
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lab_on_real_systemd_comes_up_with_ready_k3s_units_voters_and_running_actuators() {
    let _turn = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_of(2, 1, dir.path()).await;
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
        assert!(kubeview::condition_true(&n, "Ready"), "{} Ready", h.name);
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
        // Running, not crash-looping through brief activations.
        let restarts = m
            .exec_ok(
                &[
                    "systemctl",
                    "show",
                    "-p",
                    "NRestarts",
                    "--value",
                    "fleet-role-actuator",
                ],
                Duration::from_secs(30),
            )
            .unwrap();
        assert_eq!(restarts.text(), "0", "the actuator on {} restarted", h.name);
        assert_eq!(
            overlap::of_k3s_units(m, Duration::from_secs(60)).unwrap(),
            vec![],
            "{}",
            h.name
        );
    }
    a_switch_runs_in_the_actuators_sandbox_and_nothing_else_is_writable(&lab);
}

/// The actuator's unit as shipped, its command replaced by a drop-in (the
/// sandbox stays the unit's): `demote-local` on the agent takes the host
/// lock, removes fleet-role's drop-ins, reloads systemd and starts the agent
/// through `systemctl`; a write outside what the unit allows fails.
fn a_switch_runs_in_the_actuators_sandbox_and_nothing_else_is_writable(lab: &SystemdLab) {
    let quick = Duration::from_secs(60);
    let m = lab.machine("agent-1").unwrap();
    let root = lab.spec.root("agent-1");
    let o = m
        .systemctl(&["stop", "fleet-role-actuator"], quick)
        .unwrap();
    assert!(o.status.success(), "stop: {o:?}");
    let join = root.join("etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml");
    std::fs::create_dir_all(join.parent().unwrap()).unwrap();
    std::fs::write(&join, "server: https://198.18.0.9:6443\n").unwrap();
    let unit_join = root.join("etc/systemd/system/k3s.service.d/90-fleet-role-join.conf");
    std::fs::write(&unit_join, "[Service]\nEnvironment=FLEET_ROLE_JOIN=x\n").unwrap();
    let dropin = root.join("etc/systemd/system/fleet-role-actuator.service.d/99-lab.conf");
    std::fs::create_dir_all(dropin.parent().unwrap()).unwrap();
    // The command's output in a file systemd opens for it (the journal of a
    // lab host, at debug level, may lag behind a unit that ends at once).
    let out = root.join("var/lib/rancher/lab-unit.out");
    let run = |command: &str| {
        std::fs::write(
            &dropin,
            format!(
                "[Service]\nType=oneshot\nRestart=no\nStandardOutput=truncate:/var/lib/rancher/lab-unit.out\nExecStart=\nExecStart={command}\n"
            ),
        )
        .unwrap();
        let o = m.systemctl(&["daemon-reload"], quick).unwrap();
        assert!(o.status.success(), "daemon-reload: {o:?}");
        let o = m
            .systemctl(&["start", "fleet-role-actuator"], quick)
            .unwrap();
        let log = format!(
            "{}\n{}",
            std::fs::read_to_string(&out).unwrap_or_default(),
            o.stderr.trim()
        );
        (o.status.success(), log)
    };

    let (ok, log) = run("/usr/bin/fleet-role-actuator demote-local");
    assert!(ok, "demote-local failed in the unit's sandbox:\n{log}");
    assert!(!join.exists() && !unit_join.exists(), "{log}");
    assert!(root.join("var/lib/rancher/k3s/fleet-role.lock").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("var/lib/rancher/k3s/fleet-role")).unwrap(),
        "agent\n"
    );
    assert_eq!(m.active_state("k3s-agent").unwrap(), "active");

    let (ok, log) = run("/bin/sh -c \"touch /etc/fleet-role/written-by-the-actuator\"");
    assert!(!ok, "the unit wrote under /etc/fleet-role:\n{log}");
    assert!(!root.join("etc/fleet-role/written-by-the-actuator").exists());
    assert!(log.contains("Read-only file system"), "{log}");

    // Another lab host's address as k3s's node-ip: in this host's network
    // namespace it is no address of this host, and `watch` refuses to start.
    let other = lab.spec.hosts[0].ip.to_string();
    let ip = root.join("etc/rancher/k3s/config.yaml.d/95-lab-ip.yaml");
    std::fs::write(&ip, format!("node-ip: {other}\n")).unwrap();
    let (ok, log) = run("/usr/bin/fleet-role-actuator watch");
    std::fs::remove_file(&ip).unwrap();
    assert!(!ok, "watch started with another host's node-ip:\n{log}");
    assert!(
        log.contains(&format!("(not an address of this host) says \"{other}\"")),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_join_keeps_a_plain_start_blocked_and_becomes_active_once_it_votes() {
    let _turn = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_of(1, 1, dir.path()).await;
    let quick = Duration::from_secs(30);
    let m = lab.machine("agent-1").unwrap();
    // The server's part of a promotion, by hand and with nothing else acting:
    // the actuator is stopped, the agent stopped (confirmed), the role file
    // names the server.
    for unit in ["fleet-role-actuator", "k3s-agent"] {
        let o = m.systemctl(&["stop", unit], quick).unwrap();
        assert!(o.status.success(), "stop {unit}: {o:?}");
    }
    assert_eq!(m.active_state("k3s-agent").unwrap(), "inactive");
    std::fs::write(
        lab.spec
            .root("agent-1")
            .join("var/lib/rancher/k3s/fleet-role"),
        "server\n",
    )
    .unwrap();

    // Cut off, it cannot reach the server it joins: k3s never sends READY=1,
    // and a plain start (what hung the actuator) does not return.
    lab.net().cut_off("agent-1").unwrap();
    let started = m.systemctl(&["start", "k3s"], Duration::from_secs(30));
    assert!(
        matches!(
            &started,
            Err(machine::Error::Exec {
                source: bounded::Error::Timeout { .. },
                ..
            })
        ),
        "a plain start of a server that cannot join must still wait: {started:?}"
    );
    assert_eq!(m.active_state("k3s").unwrap(), "activating");

    // Back on the network it joins as a learner, is promoted, and only then
    // is its unit active.
    lab.net().restore("agent-1").unwrap();
    lab.wait_active("agent-1", "k3s", Duration::from_secs(300))
        .await
        .unwrap();
    let (_, members) = etcd_gw::member_list(&LabSpec::etcd_url(lab.spec.hosts[0].ip))
        .await
        .unwrap();
    assert_eq!(members.len(), 2, "{members:?}");
    assert!(members.iter().all(|mb| !mb.is_learner), "{members:?}");
    assert_eq!(
        overlap::of_k3s_units(m, Duration::from_secs(60)).unwrap(),
        vec![],
        "the agent was stopped before the server started"
    );
}
