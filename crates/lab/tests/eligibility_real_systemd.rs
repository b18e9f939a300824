//! A demotion that would leave an agent unable to start, on real systemd:
//! the k3s stand-in's agent fails on a server-only key in k3s's config as
//! k3s's does (and its unit restart-loops), and the actuator refuses to
//! demote a server whose config holds one, changing nothing.

use std::time::Duration;

use lab::{
    scenario::{self, Hand},
    systemd_lab::SystemdLab,
};
use protocol::report::{Eligibility, HostPart};

mod common;
use common::{SERIAL, fleet_role, lab_dir, lab_of, unchanged};

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
async fn a_server_only_key_in_k3s_config_fails_the_agent_and_its_server_is_not_demoted_and_a_standby_without_a_server_token_is_not_promoted()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(2, 1, dir.path()).await;
    let hand = Hand::new(&lab.spec).unwrap();

    // A server-only key in server-2's config.yaml: its actuator reports it
    // ineligible, and `fleet-role swap` of it is refused before anything is
    // written.
    let sroot = lab.spec.root("server-2");
    let config = sroot.join("etc/rancher/k3s/config.yaml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("etcd-snapshot-dir: /var/lib/rancher/snapshots\n");
    std::fs::write(&config, text).unwrap();
    let start = clock::Clock::system().now();
    loop {
        let r = hand.report("server-2").await.unwrap();
        if let Some(HostPart {
            demotion: Some(Eligibility::Ineligible { .. }),
            ..
        }) = r.and_then(|r| r.host)
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "server-2 never reported itself ineligible"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let before = unchanged(&lab, &hand).await;
    let out = std::process::Command::new(fleet_role())
        .args([
            "--kubeconfig",
            &lab::lab_setup::kubeconfig(&lab.spec).display().to_string(),
            "swap",
            "--out",
            "server-2",
            "--in",
            "agent-1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.lines().any(|l| l.contains("FAIL")
            && l.contains("outgoing-demotable")
            && l.contains("etcd-snapshot-dir")),
        "{stdout}"
    );
    assert_eq!(
        unchanged(&lab, &hand).await,
        before,
        "the refused swap changed something"
    );

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
    let start = clock::Clock::system().now();
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

    // By hand, the server is not demoted either, even with --force (which
    // only passes the member check), and nothing on it changes.
    let server = lab.machine("server-2").unwrap();
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

    // A standby whose join token only its agent reads (install.sh's agent
    // install): its actuator reports it could not join, and a swap that
    // would promote it is refused at incoming-eligible before any write.
    std::fs::remove_file(dropins.join("50-operator.yaml")).unwrap();
    let aconfig = root.join("etc/rancher/k3s/config.yaml");
    let text = std::fs::read_to_string(&aconfig).unwrap();
    let token = text
        .lines()
        .find(|l| l.starts_with("token:"))
        .expect("the lab's config names the token")
        .to_string();
    std::fs::write(&aconfig, text.replace(&format!("{token}\n"), "")).unwrap();
    let env = root.join("etc/systemd/system/k3s-agent.service.env");
    let mut etext = std::fs::read_to_string(&env).unwrap_or_default();
    let value = token.trim_start_matches("token:").trim().trim_matches('"');
    etext.push_str(&format!("K3S_TOKEN={value}\n"));
    std::fs::write(&env, etext).unwrap();
    // The agent was still in systemd's restart loop from the key above, and
    // a start between two of these edits fails for want of a token. One
    // blocking restart settles it on the edited files (a `Type=notify` start
    // returns once ready) before "nothing changed" is measured.
    let o = agent.systemctl(&["restart", "k3s-agent"], QUICK).unwrap();
    assert!(o.status.success(), "restart: {o:?}");
    assert_eq!(agent.active_state("k3s-agent").unwrap(), "active");
    let start = clock::Clock::system().now();
    loop {
        let r = hand.report("agent-1").await.unwrap();
        if let Some(HostPart {
            promotion: Some(Eligibility::Ineligible { reasons }),
            ..
        }) = r.and_then(|r| r.host)
            && reasons.iter().any(|r| r.contains("no join token"))
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "agent-1 never reported that it could not join"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let before = unchanged(&lab, &hand).await;
    let out = std::process::Command::new(fleet_role())
        .args([
            "--kubeconfig",
            &lab::lab_setup::kubeconfig(&lab.spec).display().to_string(),
            "swap",
            "--out",
            "server-1",
            "--in",
            "agent-1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.contains("FAIL")
            && l.contains("incoming-eligible")
            && l.contains("no join token")),
        "{stdout}"
    );
    assert_eq!(
        unchanged(&lab, &hand).await,
        before,
        "the refused swap changed something"
    );
}

/// The first server (`K3S_CLUSTER_INIT` in its unit's environment, nothing
/// server-only in config.yaml) swapped out by `fleet-role swap`: its agent
/// starts from `K3S_URL` in k3s-agent.service.env, and fleet-role's etcd-only
/// drop-in (server-only keys) is gone before it does. Then the second
/// server, which joined through the first (`K3S_URL` in k3s.service.env
/// names it, and it is an agent now: no supervisor answers there), is
/// swapped out too: its step-down names a voter that is there, so its
/// etcd-only k3s bootstraps and comes up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_server_laid_out_for_either_role_is_swapped_out_and_its_agent_starts_then_a_server_that_joined_through_it_steps_down_cleanly()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(3, 2, dir.path()).await;
    let root = lab.spec.root("server-1");
    let config = std::fs::read_to_string(root.join("etc/rancher/k3s/config.yaml")).unwrap();
    assert!(!config.contains("cluster-init"), "{config}");
    // The lab's kubeconfig names the first server's API, which goes with it:
    // the controller is pointed at the second, as an operator would.
    let kubeconfig = lab::lab_setup::kubeconfig(&lab.spec);
    let first = lab::spec::LabSpec::api_url(lab.spec.hosts[0].ip);
    let second = lab::spec::LabSpec::api_url(lab.spec.hosts[1].ip);
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    std::fs::write(&kubeconfig, text.replace(&first, &second)).unwrap();
    let r = scenario::swap_with_controller(&lab, &fleet_role(), "server-1", "agent-1", &|l| {
        eprintln!("{l}")
    })
    .await
    .expect("fleet-role swap of the first server");
    for line in r.lines() {
        println!("{line}");
    }
    // Every promise, the writes' included: a put is given longer than
    // etcd's own request timeout, so a slow one on a loaded machine is a
    // figure in the report's lines, not a failure (scenario::Writer).
    let broken = r.broken_promises("server-1", "agent-1");
    assert!(broken.is_empty(), "promises broken: {broken:#?}");
    let m = lab.machine("server-1").unwrap();
    assert_eq!(m.active_state("k3s-agent").unwrap(), "active");
    assert_eq!(m.active_state("k3s").unwrap(), "inactive");
    assert!(
        !root
            .join("etc/rancher/k3s/config.yaml.d/90-fleet-role-etcd-only.yaml")
            .exists()
    );
    // Its agent bootstrapped from the server its env file names.
    assert!(
        root.join("var/lib/rancher/k3s/agent/etc/k3s-agent-load-balancer.json")
            .exists()
    );

    // The second server joined through the first, which is gone.
    let env2 = std::fs::read_to_string(
        lab.spec
            .root("server-2")
            .join("etc/systemd/system/k3s.service.env"),
    )
    .unwrap();
    assert!(env2.contains(&first), "{env2}");
    // The servers' etcd views settle after the first swap (each reports with
    // its heartbeat): `fleet-role status` exits 0 once they agree.
    let start = clock::Clock::system().now();
    loop {
        let status = std::process::Command::new(fleet_role())
            .args(["--kubeconfig", &kubeconfig.display().to_string(), "status"])
            .output()
            .unwrap();
        if status.status.success() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "the fleet never settled after the first swap:\n{}",
            String::from_utf8_lossy(&status.stdout)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let r = scenario::swap_with_controller(&lab, &fleet_role(), "server-2", "agent-2", &|l| {
        eprintln!("{l}")
    })
    .await
    .expect("fleet-role swap of a server that joined through the first");
    for line in r.lines() {
        println!("{line}");
    }
    let broken: Vec<String> = r
        .broken_promises("server-2", "agent-2")
        .into_iter()
        .filter(|b| !b.starts_with("writes failed"))
        .collect();
    assert!(broken.is_empty(), "promises broken: {broken:#?}");
    let m2 = lab.machine("server-2").unwrap();
    assert_eq!(m2.active_state("k3s-agent").unwrap(), "active");
    // The event this test is about happened: the step-down found the first
    // server gone and named another voter.
    let said: Vec<String> = m2
        .journal_of(&["fleet-role-actuator"], std::time::Duration::from_secs(30))
        .unwrap()
        .iter()
        .filter_map(|r| r["MESSAGE"].as_str().map(str::to_string))
        .filter(|m| m.contains("the step-down names"))
        .collect();
    assert!(
        said.iter()
            .any(|m| m.contains("k3s.service.env") && !m.contains(&format!("names {first}"))),
        "no step-down renamed the server: {said:?}"
    );
}
