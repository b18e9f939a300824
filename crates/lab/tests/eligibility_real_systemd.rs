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

/// Where k3s keeps its datastore, and its snapshots, inside a host.
const DB: &str = "/var/lib/rancher/k3s/server/db";
const SNAPSHOTS: &str = "/var/lib/rancher/k3s/server/db/snapshots";

/// Gives `host` a small filesystem of its own at `path` (a tmpfs of
/// `size`, mounted inside the host), as an operator gives etcd or the
/// snapshots a disk of their own, here one with no room.
fn small_disk(lab: &SystemdLab, host: &str, path: &str, size: &str) {
    let m = lab.machine(host).unwrap();
    let script = format!(
        "mkdir -p {path} && mount -t tmpfs -o size={size},mode=0700 fleet-role-lab-full {path}"
    );
    let o = m.exec(&["sh", "-c", &script], QUICK).unwrap();
    assert!(o.status.success(), "{host}: {script}: {o:?}");
}

/// Takes the small filesystem at `path` away again.
fn free_disk(lab: &SystemdLab, host: &str, path: &str) {
    let o = lab
        .machine(host)
        .unwrap()
        .exec(&["umount", path], QUICK)
        .unwrap();
    assert!(o.status.success(), "{host}: umount {path}: {o:?}");
}

/// What `ls -A` lists at `path` inside `host`.
fn listed(lab: &SystemdLab, host: &str, path: &str) -> String {
    let o = lab
        .machine(host)
        .unwrap()
        .exec(&["ls", "-A", path], QUICK)
        .unwrap();
    o.stdout.trim().to_string()
}

/// `fleet-role ARGS` through server-1's API: its exit code and output.
async fn fleet_role_says(lab: &SystemdLab, args: &[&str]) -> (Option<i32>, String) {
    let kubeconfig = lab::lab_setup::kubeconfig_for(&lab.spec, "server-1").unwrap();
    let out = tokio::process::Command::new(fleet_role())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(args)
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `fleet-role ARGS` (a swap) with a regrade Lease 15 s long, killed once
/// etcd has four voters: the incoming host promoted, the outgoing one not
/// yet removed.
async fn interrupted_after_the_promotion(lab: &SystemdLab, args: &[&str]) {
    let kubeconfig = lab::lab_setup::kubeconfig_for(&lab.spec, "server-1").unwrap();
    let config = lab.spec.dir.join("short-lease.toml");
    std::fs::write(&config, "lease_duration_secs = 15\n").unwrap();
    let mut child = tokio::process::Command::new(fleet_role())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--config")
        .arg(&config)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let clock = clock::Clock::system();
    let t0 = clock.now();
    loop {
        let (voters, _) = common::etcd_members(lab).await;
        if voters.len() == 4 {
            break;
        }
        if let Ok(Some(ended)) = child.try_wait() {
            panic!("the swap ended ({ended}) before it was cut off; voters {voters:?}");
        }
        assert!(
            clock.since(t0) < Duration::from_secs(300),
            "the incoming host never voted; voters {voters:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    child.kill().await.unwrap();
    eprintln!(
        "the swap cut off {:.0}s after it began, four voters standing",
        clock.since(t0).as_secs_f32()
    );
}

/// The regrade Lease as `fleet-role status --output json` shows it.
async fn lease_status(lab: &SystemdLab) -> serde_json::Value {
    let (_, out) = fleet_role_says(lab, &["status", "--output", "json"]).await;
    let json = out.lines().next().unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(json)
        .unwrap_or_else(|e| panic!("status --output json: {e}: {out}"))["lease"]
        .clone()
}

/// Asserts that a wound-down swap left the hosts, their Nodes' marks and
/// etcd's members as `before` (the Lease records its ending).
async fn hosts_unchanged(
    lab: &SystemdLab,
    hand: &Hand,
    before: &common::Unchanged,
    members_before: &(Vec<String>, Vec<String>),
    said: &str,
) {
    let after = unchanged(lab, hand).await;
    let on_hosts = |u: &common::Unchanged| {
        (
            u.units.clone(),
            u.role_files.clone(),
            u.datastores.clone(),
            u.marks.clone(),
        )
    };
    assert_eq!(on_hosts(&after), on_hosts(before), "{said}");
    assert_eq!(&common::etcd_members(lab).await, members_before);
}

/// A full disk, on real systemd, at the two places a swap writes before
/// anything changes: a standby whose datastore's disk filled after it was
/// found eligible refuses its promotion at the step, naming the free
/// space, and changes nothing; a snapshot folder with no room stops the
/// swap with the disk's error, leaves no part of a snapshot and nothing
/// changed; once the disk has room, the same `fleet-role swap` runs, is
/// cut off after the promotion (its controller killed), is called
/// abandoned by `status` with the command that takes it up, and that
/// command, as the runbook gives it, ends it done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_under_the_datastore_or_the_snapshots_stops_the_swap_changing_nothing_until_it_has_room_and_the_swap_cut_off_after_its_promotion_is_taken_up_by_the_runbook()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(3, 1, dir.path()).await;
    let hand = Hand::new(&lab.spec).unwrap();
    let swap = ["swap", "--out", "server-3", "--in", "agent-1"];
    common::until_gates_pass(&lab, &swap).await;
    let members_before = common::etcd_members(&lab).await;
    let before = unchanged(&lab, &hand).await;

    // The datastore's disk fills between the gates and the promotion: the
    // snapshot is held (the stand-in's inject file) while agent-1's
    // `server/db` gets a disk of 64 MiB, under the 2 GiB a copy of etcd
    // may need.
    let hold = lab.spec.hold_snapshots_file();
    std::fs::create_dir_all(hold.parent().unwrap()).unwrap();
    std::fs::write(&hold, "").unwrap();
    let swapping = tokio::spawn({
        let kubeconfig = lab::lab_setup::kubeconfig_for(&lab.spec, "server-1").unwrap();
        async move {
            tokio::process::Command::new(fleet_role())
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(swap)
                .output()
                .await
                .unwrap()
        }
    });
    let clock = clock::Clock::system();
    let t0 = clock.now();
    loop {
        let r = hand.report("server-1").await.unwrap();
        if r.is_some_and(|r| r.step == protocol::report::ReportStep::Snapshot) {
            break;
        }
        assert!(
            clock.since(t0) < Duration::from_secs(120),
            "server-1 never began the swap's snapshot"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    small_disk(&lab, "agent-1", DB, "64m");
    std::fs::remove_file(&hold).unwrap();
    let out = swapping.await.unwrap();
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(0), "{said}");
    let lease = lease_status(&lab).await;
    let ending = format!("{} {}", lease["stopped"], lease["lastSwap"]);
    assert!(
        ending.contains("MiB free where k3s keeps its datastore"),
        "{ending}\n{said}"
    );
    eprintln!("the swap onto a full datastore disk ended: {ending}");
    // Nothing changed on agent-1 (still the agent, nothing on its small
    // disk) nor anywhere else, etcd's members included.
    assert_eq!(listed(&lab, "agent-1", DB), "");
    hosts_unchanged(&lab, &hand, &before, &members_before, &said).await;
    free_disk(&lab, "agent-1", DB);
    if !lease["stopped"].is_null() {
        let (code, out) = fleet_role_says(&lab, &["abort"]).await;
        assert_eq!(code, Some(0), "abort: {out}");
    }

    // The snapshot folder full: every voter that may take the snapshot
    // has 64 KiB there.
    common::until_gates_pass(&lab, &swap).await;
    for s in ["server-1", "server-2", "server-3"] {
        small_disk(&lab, s, SNAPSHOTS, "64k");
    }
    let (code, said) = fleet_role_says(&lab, &swap).await;
    assert_ne!(code, Some(0), "{said}");
    let lease = lease_status(&lab).await;
    let ending = format!("{} {}", lease["stopped"], lease["lastSwap"]);
    assert!(
        ending.to_lowercase().contains("no space left on"),
        "{ending}\n{said}"
    );
    eprintln!("the swap onto a full snapshot folder ended: {ending}");
    for s in ["server-1", "server-2", "server-3"] {
        assert_eq!(
            listed(&lab, s, SNAPSHOTS),
            "",
            "{s}: a part of a snapshot is left"
        );
    }
    hosts_unchanged(&lab, &hand, &before, &members_before, &said).await;

    // Room again. The same command takes the swap up, and is cut off
    // once the incoming host votes (killed, as a closed lid or a dropped
    // ssh leaves it; its Lease 15 s long): `status` calls the fleet
    // degraded and names the command that takes the swap up, and that
    // command, as docs/recovery.md gives it, ends the swap done.
    for s in ["server-1", "server-2", "server-3"] {
        free_disk(&lab, s, SNAPSHOTS);
    }
    interrupted_after_the_promotion(&lab, &swap).await;
    let clock = clock::Clock::system();
    let t0 = clock.now();
    let status = loop {
        let (code, out) = fleet_role_says(&lab, &["status"]).await;
        if code == Some(5) && out.contains("no controller holds it") {
            break out;
        }
        assert!(
            clock.since(t0) < Duration::from_secs(120),
            "the interrupted swap is not called abandoned ({code:?}):\n{out}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    for said in [
        "is recorded on the regrade Lease and no controller holds it",
        "`fleet-role swap --out server-3 --in agent-1` takes it up",
        "etcd has 4 voting members, an even count",
    ] {
        assert!(status.contains(said), "status says {said:?}:\n{status}");
    }
    let ran = common::admin_runbook(
        &lab,
        "swap-abandoned",
        "server-1",
        &[("OUT", "server-3"), ("IN", "agent-1")],
    )
    .await;
    assert_eq!(ran.len(), 1, "the runbook is the one command");
    // The servers' reports of etcd's members lag the swap's end by a
    // heartbeat (`etcd-views` until they agree).
    let t0 = clock.now();
    loop {
        let (code, said) = fleet_role_says(&lab, &["status"]).await;
        if code == Some(0) {
            break;
        }
        assert!(
            clock.since(t0) < Duration::from_secs(120),
            "status after the runbook ({code:?}):\n{said}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let (voters, learners) = common::etcd_members(&lab).await;
    assert!(learners.is_empty(), "{learners:?}");
    assert_eq!(voters.len(), 3, "{voters:?}");
    assert!(
        voters.iter().any(|v| v.starts_with("agent-1")),
        "{voters:?}"
    );
    assert!(
        !voters.iter().any(|v| v.starts_with("server-3")),
        "{voters:?}"
    );
}
