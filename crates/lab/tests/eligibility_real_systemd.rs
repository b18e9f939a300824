//! A demotion that would leave an agent unable to start, on real systemd:
//! the k3s stand-in's agent fails on a server-only key in k3s's config as
//! k3s's does (and its unit restart-loops), and the actuator refuses to
//! demote a server whose config holds one, changing nothing.

use std::time::{Duration, Instant};

use lab::systemd_lab::SystemdLab;

mod common;
use common::{SERIAL, lab_dir, lab_of};

const QUICK: Duration = Duration::from_secs(60);

/// Runs `command` as the actuator's unit (its sandbox as shipped, its command
/// replaced by a drop-in); returns whether it succeeded and what it said.
fn run_as_actuator(lab: &SystemdLab, host: &str, command: &str) -> (bool, String) {
    let m = lab.machine(host).unwrap();
    let root = lab.spec.root(host);
    let o = m
        .systemctl(&["stop", "fleet-role-actuator"], QUICK)
        .unwrap();
    assert!(o.status.success(), "stop: {o:?}");
    let dropin = root.join("etc/systemd/system/fleet-role-actuator.service.d/99-lab.conf");
    std::fs::create_dir_all(dropin.parent().unwrap()).unwrap();
    let out = root.join("var/lib/rancher/lab-unit.out");
    std::fs::write(
        &dropin,
        format!(
            "[Service]\nType=oneshot\nRestart=no\nStandardOutput=truncate:/var/lib/rancher/lab-unit.out\nStandardError=append:/var/lib/rancher/lab-unit.out\nExecStart=\nExecStart={command}\n"
        ),
    )
    .unwrap();
    let o = m.systemctl(&["daemon-reload"], QUICK).unwrap();
    assert!(o.status.success(), "daemon-reload: {o:?}");
    let o = m
        .systemctl(&["start", "fleet-role-actuator"], QUICK)
        .unwrap();
    let log = format!(
        "{}\n{}",
        std::fs::read_to_string(&out).unwrap_or_default(),
        o.stderr.trim()
    );
    (o.status.success(), log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_only_key_in_k3s_config_fails_the_agent_and_its_server_is_not_demoted() {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(2, 1, dir.path()).await;

    // The lab's behaviour: an agent whose config holds a server-only key
    // fails as k3s's does, and systemd restarts it again and again.
    let agent = lab.machine("agent-1").unwrap();
    let root = lab.spec.root("agent-1");
    let dropins = root.join("etc/rancher/k3s/config.yaml.d");
    std::fs::create_dir_all(&dropins).unwrap();
    std::fs::write(dropins.join("50-operator.yaml"), "cluster-init: true\n").unwrap();
    let o = agent
        .systemctl(&["restart", "--no-block", "k3s-agent"], QUICK)
        .unwrap();
    assert!(o.status.success(), "restart: {o:?}");
    let start = Instant::now();
    let restarts = loop {
        let o = agent
            .systemctl(&["show", "-p", "NRestarts", "--value", "k3s-agent"], QUICK)
            .unwrap();
        let n: u32 = o.stdout.trim().parse().unwrap_or(0);
        if n >= 2 || start.elapsed() > Duration::from_secs(120) {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(restarts >= 2, "k3s-agent restarted {restarts} times");
    assert_ne!(agent.active_state("k3s-agent").unwrap(), "active");
    let journal = agent.journal(&["k3s-agent"], QUICK).unwrap();
    assert!(
        journal.iter().any(|e| e["MESSAGE"]
            .as_str()
            .is_some_and(|m| m.contains("flag provided but not defined: -cluster-init"))),
        "k3s's message in the journal"
    );

    // The product: a server with a server-only key in config.yaml is not
    // demoted, even with --force (which only passes the member check), and
    // nothing on it changes.
    let server = lab.machine("server-2").unwrap();
    let sroot = lab.spec.root("server-2");
    let config = sroot.join("etc/rancher/k3s/config.yaml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("etcd-snapshot-dir: /var/lib/rancher/snapshots\n");
    std::fs::write(&config, text).unwrap();
    let (ok, log) = run_as_actuator(
        &lab,
        "server-2",
        "/usr/bin/fleet-role-actuator demote-local --force",
    );
    assert!(!ok, "demote-local went ahead:\n{log}");
    assert!(log.contains("not eligible for demotion"), "{log}");
    assert!(
        log.contains("flag provided but not defined: -etcd-snapshot-dir"),
        "{log}"
    );
    assert_eq!(server.active_state("k3s").unwrap(), "active");
    assert_eq!(server.active_state("k3s-agent").unwrap(), "inactive");
    assert_eq!(
        std::fs::read_to_string(sroot.join("var/lib/rancher/k3s/fleet-role")).unwrap(),
        "server\n"
    );
    assert!(
        sroot
            .join("var/lib/rancher/k3s/server/db/etcd/member")
            .is_dir()
    );
    assert!(!sroot.join("var/lib/rancher/k3s/server/db.demoted").exists());
}
