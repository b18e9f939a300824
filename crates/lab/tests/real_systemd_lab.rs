//! A whole lab on real systemd: servers whose k3s units become active only
//! once the k3s stand-in sends READY=1, an agent, the actuators as the real
//! unit, every host's API and etcd reached from outside over the lab's bridge.
//! Fails (never skips) when containers cannot run here.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use lab::{
    api::Apis,
    bounded, etcd_gw, machine, overlap,
    scenario::{self, Ask, Hand},
    systemd_lab::SystemdLab,
};
use protocol::{Phase, report::ReportStep};

mod common;
use common::{SERIAL, fleet_role, lab_dir, lab_of, previous_actuator};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lab_on_real_systemd_comes_up_with_ready_k3s_units_voters_and_running_actuators() {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(2, 1, dir.path()).await;
    let spec = &lab.spec;
    assert!(spec.hosts.iter().all(|h| h.ip.octets()[..2] == [198, 18]));

    // Both members vote, as seen from outside through the bridge.
    let (_, members) = etcd_gw::member_list(&spec.etcd(spec.hosts[0].ip).unwrap())
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
        // At its start it read the host's k3s release, the stand-in's
        // own (`k3s --version`), and found it one it was checked against.
        let journal = m
            .journal_of(&["fleet-role-actuator"], Duration::from_secs(60))
            .unwrap();
        let said: Vec<&str> = journal
            .iter()
            .filter_map(|r| r["MESSAGE"].as_str())
            .filter(|l| l.contains("k3s v1.") || l.contains("k3s release"))
            .collect();
        assert!(
            said.iter()
                .any(|l| l.contains(&format!("k3s {}", lab::k3s::VERSION)))
                && !said.iter().any(|l| l.contains("WARN")),
            "{said:?}"
        );
        assert_eq!(
            overlap::of_k3s_units(m, Duration::from_secs(60)).unwrap(),
            vec![],
            "{}",
            h.name
        );
    }
    a_switch_runs_in_the_actuators_sandbox_and_nothing_else_is_writable(&lab);
    a_held_lab_answers_status_and_powers_off_on_down(lab).await;
}

/// `fleet-role-lab up` holds its lab for `status`, `down` and the host
/// actions from other processes: the same exchange over the lab's socket.
async fn a_held_lab_answers_status_and_powers_off_on_down(lab: SystemdLab) {
    let dir = lab.spec.dir.clone();
    let spec = lab.spec.clone();
    let leader = lab.machine("server-1").unwrap().leader();
    let agent_leader = lab.machine("agent-1").unwrap().leader();
    let holder = tokio::spawn({
        let dir = dir.clone();
        async move { lab::held_lab::hold(lab, &dir, &|l| eprintln!("{l}")).await }
    });
    let mut status = Err(anyhow::anyhow!("not asked"));
    for _ in 0..100 {
        status = lab::held_lab::ask(&dir, "status").await;
        if status.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = status.expect("the holder answers");
    assert!(
        status.contains("server-1") && status.contains("active: k3s,fleet-role-actuator"),
        "{status}"
    );
    host_actions_on_a_held_lab(&dir, &spec, agent_leader).await;
    let down = lab::held_lab::ask(&dir, "down").await.unwrap();
    assert!(down.ends_with("the lab is down\n"), "{down}");
    holder.await.unwrap().unwrap();
    assert!(
        !std::path::Path::new(&format!("/proc/{leader}")).exists(),
        "server-1's systemd is gone"
    );
    assert!(lab::held_lab::ask(&dir, "status").await.is_err());
}

/// `poweroff`, `boot`, `cut` and `restore` asked of the holder, as
/// `fleet-role-lab poweroff HOST` (and the rest) ask it: each does what it
/// says, and a name the lab does not have, or an action it does not know,
/// is refused with nothing done.
async fn host_actions_on_a_held_lab(
    dir: &std::path::Path,
    spec: &lab::spec::LabSpec,
    agent_leader: u32,
) {
    let ask = |what: &'static str| lab::held_lab::ask(dir, what);
    assert_eq!(
        ask("poweroff agent-1").await.unwrap(),
        "agent-1 is powered off\n"
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{agent_leader}")).exists(),
        "agent-1's systemd is gone"
    );
    assert_eq!(ask("boot agent-1").await.unwrap(), "agent-1 booted\n");
    assert_eq!(
        ask("boot agent-1").await.unwrap(),
        "agent-1 was running already\n"
    );
    // Booted as at any boot: its enabled units start again.
    let clock = clock::Clock::system();
    let booted = clock.now();
    loop {
        let status = ask("status").await.unwrap();
        if status.lines().any(|l| {
            l.starts_with("agent-1 ") && l.contains("active: k3s-agent,fleet-role-actuator")
        }) {
            break;
        }
        assert!(clock.since(booted) < Duration::from_secs(120), "{status}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Cut off, server-2's etcd does not answer from outside; restored, it
    // does again.
    let ip = spec.hosts.iter().find(|h| h.name == "server-2").unwrap().ip;
    let ep = spec.etcd(ip).unwrap();
    assert_eq!(
        ask("cut server-2").await.unwrap(),
        "server-2 is cut off the network\n"
    );
    assert!(etcd_gw::member_list(&ep).await.is_err());
    assert_eq!(
        ask("restore server-2").await.unwrap(),
        "server-2 is back on the network\n"
    );
    let back = clock.now();
    while etcd_gw::member_list(&ep).await.is_err() {
        assert!(
            clock.since(back) < Duration::from_secs(60),
            "server-2's etcd never answered again"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        ask("poweroff nosuch").await.unwrap(),
        "error: no host nosuch in this lab\n"
    );
    assert!(
        ask("frobnicate server-1")
            .await
            .unwrap()
            .starts_with("unknown request")
    );
    assert!(
        ask("poweroff")
            .await
            .unwrap()
            .starts_with("unknown request")
    );
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
    let server = lab::spec::LabSpec::api_url(lab.spec.hosts[0].ip);
    std::fs::write(&join, format!("server: {server}\n")).unwrap();
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
    // The join drop-in stays: the agent bootstraps from the server it names.
    assert!(join.exists() && !unit_join.exists(), "{log}");
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
    // The unit as shipped again, running: the host boots as any other.
    std::fs::remove_file(&dropin).unwrap();
    std::fs::remove_file(&join).unwrap();
    let o = m.systemctl(&["daemon-reload"], quick).unwrap();
    assert!(o.status.success(), "daemon-reload: {o:?}");
    let o = m
        .systemctl(&["restart", "fleet-role-actuator"], quick)
        .unwrap();
    assert!(o.status.success(), "restart: {o:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_join_keeps_a_plain_start_blocked_and_becomes_active_once_it_votes() {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
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
    let (_, members) = etcd_gw::member_list(&lab.spec.etcd(lab.spec.hosts[0].ip).unwrap())
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_swap_on_real_systemd_keeps_every_promise_with_the_units_never_together_and_the_restore_runbook_takes_the_fleet_back_to_its_snapshot()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(3, 1, dir.path()).await;
    // The regrade watcher runs on the voter, under fleet-role's drop-in.
    let m = lab.machine("server-3").unwrap();
    lab.wait_active("server-3", "fleet-regrade", Duration::from_secs(60))
        .await
        .unwrap();
    let r = scenario::swap_by_hand(&lab, "server-3", "agent-1", &|l| eprintln!("{l}"))
        .await
        .expect("the swap on real systemd");
    for line in r.lines() {
        println!("{line}");
    }
    // "Never together" is read from each host's journal (systemd's own
    // records of the units' states), not from a counter of the lab's.
    let broken = r.broken_promises("server-3", "agent-1");
    assert!(broken.is_empty(), "promises broken: {broken:#?}");
    assert_eq!(m.active_state("k3s-agent").unwrap(), "active");
    assert_eq!(m.active_state("k3s").unwrap(), "inactive");
    // The step-down stopped the watcher, and its condition keeps it from
    // starting again on the host that is an agent now.
    assert_eq!(m.active_state("fleet-regrade").unwrap(), "inactive");
    let o = m
        .systemctl(&["start", "fleet-regrade"], Duration::from_secs(60))
        .unwrap();
    eprintln!("systemctl start fleet-regrade: {o:?}");
    assert_eq!(m.active_state("fleet-regrade").unwrap(), "inactive");
    let result = m
        .exec_ok(
            &[
                "systemctl",
                "show",
                "-p",
                "Result",
                "--value",
                "fleet-regrade",
            ],
            Duration::from_secs(30),
        )
        .unwrap();
    assert_eq!(result.text(), "exec-condition", "skipped by its condition");
    the_restore_runbook_takes_the_fleet_back_to_the_swaps_snapshot(&lab, &r.snapshot).await;
}

/// docs/recovery.md's restore, run as written on every host after the
/// swap: the voter holding the snapshot reset from it, the other voters of
/// the snapshot's time (the outgoing host among them) rejoined through it,
/// the incoming host ended as an agent, the Lease's swap aborted. A
/// ConfigMap written after the snapshot is gone, the snapshot's voters
/// vote again, and `fleet-role status` exits 0.
async fn the_restore_runbook_takes_the_fleet_back_to_the_swaps_snapshot(
    lab: &SystemdLab,
    snapshot: &str,
) {
    use k8s_openapi::api::core::v1::ConfigMap;
    let clock = clock::Clock::system();
    let t0 = clock.now();
    let restored = lab
        .spec
        .hosts
        .iter()
        .find(|h| {
            lab.spec
                .root(&h.name)
                .join(snapshot.trim_start_matches('/'))
                .is_file()
        })
        .expect("a voter holds the swap's snapshot")
        .clone();
    let file = snapshot.rsplit('/').next().unwrap().to_string();
    let restored_ip = restored.ip.to_string();
    let fill = [("FILE", file.as_str()), ("RESTORED", restored_ip.as_str())];
    // Written after the snapshot: the restore must take it away.
    let apis = Apis::for_lab(&lab.spec).unwrap();
    let after: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "written-after-the-snapshot", "namespace": "default"}
    }))
    .unwrap();
    apis.any(|c| {
        let cm = after.clone();
        async move {
            Api::<ConfigMap>::namespaced(c, "default")
                .create(&Default::default(), &cm)
                .await
        }
    })
    .await
    .unwrap();
    let listed = runbook_on(lab, &restored.name, "restore-look", &fill).join("");
    assert!(
        listed.contains(&file),
        "`k3s etcd-snapshot ls` lists {file}: {listed}"
    );
    let hosts: Vec<String> = lab.spec.hosts.iter().map(|h| h.name.clone()).collect();
    for h in &hosts {
        runbook_on(lab, h, "restore-stop", &fill);
    }
    let said = runbook_on(lab, &restored.name, "restore-reset", &fill).join("");
    assert!(
        said.contains("Managed etcd cluster membership has been reset"),
        "the reset says it is done: {said}"
    );
    common::admin_runbook(lab, "restore-pause", &restored.name, &fill).await;
    runbook_on(lab, &restored.name, "restore-kubelet", &fill);
    // The other voters of the snapshot's time: the servers of the lab
    // (server-3 stepped down after the snapshot); agent-1 came in after it.
    for h in hosts
        .iter()
        .filter(|h| h.starts_with("server") && **h != restored.name)
    {
        runbook_on(lab, h, "restore-rejoin", &fill);
    }
    runbook_on(lab, "agent-1", "restore-incoming", &fill);
    runbook_on(lab, "agent-1", "restore-agent", &fill);
    for h in &hosts {
        runbook_on(lab, h, "restore-actuator", &fill);
    }
    common::admin_runbook(lab, "restore-end", &restored.name, &fill).await;
    let gone = apis
        .any(|c| async move {
            Api::<ConfigMap>::namespaced(c, "default")
                .get_opt("written-after-the-snapshot")
                .await
        })
        .await
        .unwrap();
    assert!(
        gone.is_none(),
        "the ConfigMap written after the snapshot is still there"
    );
    let start = clock.now();
    loop {
        let voters = etcd_voters(lab).await;
        let out = fleet_role_status(lab);
        if voters == ["server-1", "server-2", "server-3"] && out.status.code() == Some(0) {
            break;
        }
        assert!(
            clock.since(start) < Duration::from_secs(180),
            "after the restore runbook: voters {voters:?}, `fleet-role status` {}:\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    eprintln!(
        "restored from {file} on {} by the runbook, healthy in {:.0}s",
        restored.name,
        clock.since(t0).as_secs_f32()
    );
}

/// The runbook block `mark` of docs/recovery.md run on `host` as an
/// operator there runs it: each line as written through `sh -c` (bounded),
/// `fill`'s placeholders replaced, each required to succeed; their output.
fn runbook_on(lab: &SystemdLab, host: &str, mark: &str, fill: &[(&str, &str)]) -> Vec<String> {
    let m = lab.machine(host).unwrap();
    testcp::runbook::commands(mark)
        .into_iter()
        .map(|c| {
            let c = fill.iter().fold(c, |c, (from, to)| c.replace(from, to));
            let o = m
                .exec(&["sh", "-c", &c], Duration::from_secs(150))
                .unwrap_or_else(|e| panic!("{mark} on {host}: `{c}`: {e}"));
            eprintln!("{host}$ {c}: {}\n{}{}", o.status, o.stdout, o.stderr);
            assert!(
                o.status.success(),
                "{mark} on {host}: `{c}` failed ({}):\n{}{}",
                o.status,
                o.stdout,
                o.stderr
            );
            format!("{}{}", o.stdout, o.stderr)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_role_swap_on_real_systemd_of_the_etcd_leader_moves_leadership_first_keeps_every_promise_with_a_voter_on_the_previous_release_and_a_node_patchers_rollback_marks_stop_no_other_voter()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(3, 1, dir.path()).await;
    // The voter to swap out is etcd's leader: its actuator must hand the
    // leadership over before its step-down.
    let leader = etcd_gw::status(&lab.spec.etcd(lab.spec.hosts[0].ip).unwrap())
        .await
        .unwrap()
        .leader;
    let mut out = None;
    for h in lab
        .spec
        .hosts
        .iter()
        .filter(|h| h.name.starts_with("server"))
    {
        let me = etcd_gw::status(&lab.spec.etcd(h.ip).unwrap())
            .await
            .unwrap()
            .member;
        if me == leader {
            out = Some(h.name.clone());
        }
    }
    let out = out.expect("one server leads etcd");
    // A voter outside the swap that is not its snapshot voter either (the
    // controller asks the first healthy voter other than the outgoing one).
    let bystander = lab
        .spec
        .hosts
        .iter()
        .rev()
        .find(|h| h.name.starts_with("server") && h.name != out)
        .map(|h| h.name.clone())
        .unwrap();
    // The third voter still runs the previous release's actuator (a fleet
    // mid-upgrade): its reports go to its key of the shared ConfigMap, and
    // the controller must read its etcd view there for the swap's gates.
    let held_back = lab
        .spec
        .hosts
        .iter()
        .find(|h| h.name.starts_with("server") && h.name != out && h.name != bystander)
        .map(|h| h.name.clone())
        .unwrap();
    lab::previous_release::run_previous_actuator(&lab, &held_back, &previous_actuator())
        .await
        .expect("the previous release's actuator runs");
    // A swap that would ask the held-back host a step is refused by its
    // release once its report is read (it names none: every actuator
    // before the oldest this controller drives), and nothing changes.
    let refused = {
        let clock = clock::Clock::system();
        let t0 = clock.now();
        loop {
            let dry = common::fleet_role_cmd(
                &lab,
                &["swap", "--dry-run", "--out", &held_back, "--in", "agent-1"],
            )
            .await;
            let stdout = String::from_utf8_lossy(&dry.stdout).into_owned();
            let line = common::gate(&stdout, "supported-release").map(|(p, l)| (p, l.to_string()));
            if let Some((false, l)) = line.as_ref()
                && l.contains("reports no release")
            {
                assert_eq!(dry.status.code(), Some(1), "{stdout}");
                break l.clone();
            }
            assert!(
                clock.since(t0) < Duration::from_secs(120),
                "the held-back host's release never refused the swap:\n{stdout}"
            );
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    };
    assert!(refused.contains(&held_back), "{refused}");
    let hand = Hand::new(&lab.spec).unwrap();
    let patcher = Apis::for_lab_as(
        &lab.spec,
        &lab::lab_setup::patch_nodes_token(&hand.apis).await.unwrap(),
    )
    .unwrap();
    let (say, fleet_role) = (|l: &str| eprintln!("{l}"), fleet_role());
    let (r, attack) = tokio::join!(
        scenario::swap_with_controller(&lab, &fleet_role, &out, "agent-1", &say),
        rollback_marks_on_a_voter_outside_the_swap(&lab, &patcher, &bystander, "agent-1"),
    );
    let r = r.expect("fleet-role swap on real systemd");
    for line in r.lines() {
        println!("{line}");
    }
    let broken = r.broken_promises(&out, "agent-1");
    assert!(broken.is_empty(), "promises broken: {broken:#?}");
    assert!(!r.snapshot.is_empty(), "no snapshot reported");
    // The old voter carries no server role label any more and is schedulable.
    let node = Hand::new(&lab.spec).unwrap().node(&out).await.unwrap();
    let labels = node.metadata.labels.unwrap_or_default();
    assert!(
        !labels.contains_key(protocol::names::K3S_ETCD_ROLE_LABEL),
        "{labels:?}"
    );
    assert!(!node.spec.and_then(|s| s.unschedulable).unwrap_or(false));
    let m = lab.machine(&out).unwrap();
    assert_eq!(m.active_state("k3s-agent").unwrap(), "active");
    assert_eq!(m.active_state("k3s").unwrap(), "inactive");
    // Its actuator moved the leadership, once, before its step-down.
    let journal = m
        .journal_of(&["fleet-role-actuator"], Duration::from_secs(60))
        .unwrap();
    let moved: Vec<&str> = journal
        .iter()
        .filter_map(|r| r["MESSAGE"].as_str())
        .filter(|m| m.contains("etcd leadership moved from"))
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    eprintln!("{}", moved[0]);

    // The voter a patch-nodes user marked for a rollback of this swap
    // refused it and kept its server: the swap over (`r`'s writer saw no
    // failed write), its k3s is still the one it ran before the marks, and
    // its datastore and role file are in place.
    let invocation = attack;
    let m = lab.machine(&bystander).unwrap();
    assert_eq!(
        m.exec(&["systemctl", "is-active", "k3s"], Duration::from_secs(10))
            .unwrap()
            .text(),
        "active"
    );
    assert_eq!(
        k3s_invocation(m),
        invocation,
        "{bystander}'s k3s was restarted"
    );
    let root = lab.spec.root(&bystander);
    assert!(root.join("var/lib/rancher/k3s/server/db/etcd").is_dir());
    assert_eq!(
        std::fs::read_to_string(root.join("var/lib/rancher/k3s/fleet-role")).unwrap(),
        "server\n"
    );
    let voters: Vec<String> = scenario::members(&lab.spec)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| !m.is_learner)
        .map(|m| m.name)
        .collect();
    assert!(
        voters
            .iter()
            .any(|v| v.starts_with(&format!("{bystander}-"))),
        "{bystander}'s member no longer votes: {voters:?}"
    );

    // The held-back voter reported through the shared ConfigMap all along,
    // with its etcd view, which the swap's gates took from there.
    let shared = hand
        .shared_report(&held_back)
        .await
        .unwrap()
        .expect("the previous release's report, under its key of the shared ConfigMap");
    let part = shared.host.expect("its host part");
    assert!(
        part.etcd.is_some(),
        "no etcd view in {held_back}'s shared report"
    );
    let age = clock::Clock::system().unix_secs() - part.heartbeat_at;
    assert!(age < 120, "{held_back}'s shared report is {age} s old");
    // Of its two reports (its own ConfigMap, last written before it was
    // held back, and the shared key), the shared one is the newer, and is
    // what is read (its own would have a lower `seq`).
    let read = hand.report(&held_back).await.unwrap().expect("a report");
    assert!(read.seq >= shared.seq, "{} < {}", read.seq, shared.seq);

    // `status` calls the fleet degraded for the held-back host's release
    // (`release-unsupported`), and the runbook's look, as docs/recovery.md
    // gives it, names it. Upgraded as docs/upgrade.md has it, the host's
    // next report names this release and the fleet is healthy again.
    let older = format!("no swap involving them runs): {held_back})");
    let shown = runbook_look(&lab, "release-unsupported", &held_back, &bystander).await;
    assert!(shown.contains(&older), "{shown}");
    lab::previous_release::upgrade_actuator(&lab, &held_back)
        .await
        .expect("the held-back host is upgraded");
    // Through a server that stays: the swapped-out one may have been the
    // first server.
    let clock = clock::Clock::system();
    let t0 = clock.now();
    loop {
        let o = common::fleet_role_via(&lab, &bystander, &["status"]).await;
        let shown = String::from_utf8_lossy(&o.stdout).to_string();
        if o.status.code() == Some(0) {
            assert!(!shown.contains(&older), "{shown}");
            break;
        }
        assert!(
            clock.since(t0) < Duration::from_secs(120),
            "the upgraded fleet never turned healthy:\n{shown}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// systemd's invocation id of the host's k3s unit: a stop and start, or a
/// restart, gives it a new one.
fn k3s_invocation(m: &machine::Machine) -> String {
    tokio::task::block_in_place(|| {
        m.exec_ok(
            &["systemctl", "show", "-p", "InvocationID", "--value", "k3s"],
            Duration::from_secs(10),
        )
    })
    .unwrap()
    .text()
    .to_string()
}

/// What a holder of `patch nodes` only (`patcher`) can do to a voter outside
/// a swap: once the controller holds the regrade Lease for its swap and has
/// named `incoming` on it, the swap's id is copied onto `bystander` with a
/// rollback's marks, written as the controller writes them. The host
/// reports the rollback refused, naming the swap's incoming host, while its
/// k3s stays active. Returns its k3s unit's invocation id from before the
/// marks.
async fn rollback_marks_on_a_voter_outside_the_swap(
    lab: &SystemdLab,
    patcher: &Apis,
    bystander: &str,
    incoming: &str,
) -> String {
    let hand = Hand::new(&lab.spec).unwrap();
    let names = protocol::Names::default();
    // The credential holds nothing but `patch nodes`: the Lease is not its
    // to write.
    let denied = patcher
        .any(|c| {
            let name = names.lease_name.clone();
            async move {
                Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
                    c,
                    protocol::names::LEASE_NAMESPACE,
                )
                .patch(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(
                        serde_json::json!({"metadata": {"annotations": {"x": "y"}}}),
                    ),
                )
                .await
            }
        })
        .await
        .expect_err("a patch-nodes user patched the regrade Lease");
    assert!(
        matches!(denied.downcast_ref::<kube::Error>(), Some(kube::Error::Api(a)) if a.code == 403),
        "{denied:#}"
    );
    // The swap under way: the Lease held, for a swap, naming its incoming host.
    let start = clock::Clock::system().now();
    let swap = loop {
        if let Some(l) = common::lease(&hand.apis).await {
            let a = l.metadata.annotations.unwrap_or_default();
            if l.spec.and_then(|s| s.holder_identity).is_some()
                && a.get(&names.lease_swap_in()).map(String::as_str) == Some(incoming)
                && let Some(swap) = a.get(&names.lease_swap())
            {
                break swap.clone();
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "the regrade Lease never named {incoming} as a swap's incoming host"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let m = lab.machine(bystander).unwrap();
    let invocation = k3s_invocation(m);
    assert!(
        !invocation.is_empty(),
        "{bystander}'s k3s has no invocation"
    );
    let marks = serde_json::json!({"metadata": {
        "labels": { names.desired_role(): "agent" },
        "annotations": { names.role_swap(): &swap, names.role_step(): "rollback" },
    }});
    // The admission policy `fleet-role-controller-only` refuses them.
    let refused = patcher
        .patch_node(bystander, &marks)
        .await
        .expect_err("a patch-nodes user wrote fleet-role's marks on a Node");
    assert!(
        matches!(refused.downcast_ref::<kube::Error>(), Some(kube::Error::Api(a)) if a.code == 403),
        "{refused:#}"
    );
    // The host's own check, as where the policy is not installed: the
    // same marks written with the admin's credential.
    hand.patch_node(bystander, marks)
        .await
        .expect("an administrator writes a Node's marks");
    eprintln!(
        "rollback marks of swap {swap} refused to a patch-nodes user and written on {bystander} by the admin, {:.1}s after the Lease named {incoming}",
        start.elapsed().as_secs_f32()
    );
    let start = clock::Clock::system().now();
    let report = loop {
        if let Ok(Some(r)) = hand.report(bystander).await
            && r.swap.as_ref().map(|s| s.as_str()) == Some(swap.as_str())
            && r.step == ReportStep::Rollback
            && r.phase.is_settled()
        {
            break r;
        }
        assert_eq!(
            m.active_state("k3s").unwrap(),
            "active",
            "{bystander}'s k3s left active under the marks"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{bystander} never reported the rollback of {swap}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!(
        "{bystander}: rollback {:?}: {}",
        report.phase,
        report.reason.as_deref().unwrap_or_default()
    );
    assert_eq!(report.phase, Phase::Refused, "{report:?}");
    let reason = report.reason.unwrap_or_default();
    assert!(
        reason.contains(&format!("names \"{incoming}\" as the swap's incoming host")),
        "{reason}"
    );
    assert_eq!(m.active_state("k3s").unwrap(), "active");
    invocation
}

/// `fleet-role run` with `config` through `kubeconfig`, and what it prints
/// (echoed as it comes).
fn spawn_run(
    config: &std::path::Path,
    kubeconfig: &std::path::Path,
) -> (
    tokio::process::Child,
    std::sync::Arc<std::sync::Mutex<String>>,
) {
    let mut run = tokio::process::Command::new(fleet_role())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--config")
        .arg(config)
        .arg("run")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let printed = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(run.stdout.take().unwrap()).lines();
        let printed = printed.clone();
        tokio::spawn(async move {
            while let Ok(Some(l)) = lines.next_line().await {
                println!("run: {l}");
                let mut p = printed.lock().unwrap();
                p.push_str(&l);
                p.push('\n');
            }
        });
    }
    (run, printed)
}

/// Waits until `run` has printed `what`, within `bound`.
async fn wait_printed(printed: &std::sync::Mutex<String>, what: &str, bound: Duration) {
    let clock = clock::Clock::system();
    let start = clock.now();
    while !printed.lock().unwrap().contains(what) {
        assert!(
            clock.since(start) < bound,
            "run never said {what:?} within {} s:\n{}",
            bound.as_secs(),
            printed.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Asserts that `run` has started no swap so far.
fn swapped_nothing(printed: &std::sync::Mutex<String>) {
    let said = printed.lock().unwrap();
    assert!(!said.contains("swap out"), "{said}");
}

/// Stops `run` as systemd would (SIGTERM: it steps down as leader at a
/// safe point), within a bound.
async fn stop_run(run: &mut tokio::process::Child) {
    let pid = run.id().expect("run is running").to_string();
    let o = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .output()
        .unwrap();
    assert!(o.status.success(), "kill: {o:?}");
    tokio::time::timeout(Duration::from_secs(60), run.wait())
        .await
        .expect("run stopped within 60 s of SIGTERM")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_role_run_on_real_systemd_holds_a_voter_in_maintenance_and_outside_its_window_then_replaces_it_and_it_comes_home_as_an_agent()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let mut lab = lab_of(3, 2, dir.path()).await;
    let config = lab.spec.dir.join("fleet-role.toml");
    // The controller's kubeconfig names server-2, the server that dies: it
    // fails over to the next of the servers listed.
    let hosts = lab.spec.hosts.clone();
    let url = |h: &str| {
        let ip = hosts.iter().find(|x| x.name == h).unwrap().ip;
        lab::spec::LabSpec::api_url(ip)
    };
    // First with a window closed now (an hour, starting two hours from
    // now, UTC), through server-2 (which dies); then with no window,
    // through the servers left.
    let hour = (clock::Clock::system().unix_secs() / 3600 + 2) % 24;
    let settings = |window: bool| {
        let servers: Vec<String> = if window {
            ["server-2", "server-1", "server-3"]
        } else {
            ["server-1", "server-3", "server-2"]
        }
        .iter()
        .map(|h| format!("\"{}\"", url(h)))
        .collect();
        format!(
            "grace_period_secs = 5\nmaintenance_grace_secs = 3600\nheartbeat_grace_secs = 10\nactuator_heartbeat_max_age_secs = 30\nsettle_secs = 5\nstandby_min_healthy_secs = 5\npoll_millis = 500\napi_servers = [{}]\n{}",
            servers.join(", "),
            if window {
                format!(
                    "[window]\nstart = \"{hour:02}:00\"\nend = \"{:02}:00\"\n",
                    (hour + 1) % 24
                )
            } else {
                String::new()
            }
        )
    };
    std::fs::write(&config, settings(true)).unwrap();
    let spec = lab.spec.clone();
    let kubeconfig = |h: &str| lab::lab_setup::kubeconfig_for(&spec, h).unwrap();
    let (mut run, printed) = spawn_run(&config, &kubeconfig("server-2"));
    wait_printed(&printed, "leading:", Duration::from_secs(120)).await;
    // server-2 is cordoned for maintenance (as `kubectl drain` or kured
    // would), then powers off: down past the ordinary grace, it is given
    // the maintenance grace (an hour) and not replaced.
    let apis = Apis::for_lab(&lab.spec).unwrap();
    let cordon = |on: bool| {
        let apis = &apis;
        async move {
            apis.any(|c| async move {
                Api::<Node>::all(c)
                    .patch(
                        "server-2",
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(
                            serde_json::json!({"spec": {"unschedulable": on}}),
                        ),
                    )
                    .await
            })
            .await
            .unwrap();
        }
    };
    cordon(true).await;
    lab.poweroff("server-2").unwrap();
    wait_printed(
        &printed,
        "server-2 is NotReady, within a maintenance grace (at most 3600 s): it is cordoned",
        Duration::from_secs(120),
    )
    .await;
    // Said once the ordinary grace had run out: nothing was swapped.
    swapped_nothing(&printed);
    // Uncordoned, it is past its grace, but `run` is outside its window:
    // it says when it next may, and swaps nothing.
    cordon(false).await;
    wait_printed(
        &printed,
        "server-2 has been NotReady for over 5 s, but outside its window",
        Duration::from_secs(120),
    )
    .await;
    swapped_nothing(&printed);
    // It had moved off server-2's API server when server-2 went.
    let said = printed.lock().unwrap().clone();
    assert!(
        said.contains(&format!(
            "the API server {}/ stopped serving; moving to {}/",
            url("server-2"),
            url("server-1")
        )),
        "{said}"
    );
    // `run` again with no window: the same down voter is replaced.
    stop_run(&mut run).await;
    std::fs::write(&config, settings(false)).unwrap();
    let (mut run, printed) = spawn_run(&config, &kubeconfig("server-1"));
    let stopped = clock::Clock::system().now();
    let mut replaced = false;
    while stopped.elapsed() < Duration::from_secs(240) {
        if let Ok(m) = lab::scenario::members(&lab.spec).await {
            let voters: Vec<&str> = m
                .iter()
                .filter(|x| !x.is_learner)
                .map(|x| x.name.as_str())
                .collect();
            if voters.len() == 3
                && voters.iter().any(|v| v.starts_with("agent-1-"))
                && !voters.iter().any(|v| v.starts_with("server-2-"))
            {
                replaced = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        replaced,
        "run did not replace the stopped voter within 240 s"
    );
    println!(
        "replaced {:.1}s after run started with no window",
        stopped.elapsed().as_secs_f64()
    );
    // The swap ends with its warning before server-2 is back: what tidies
    // its Node is then `run`'s own tidy, not the swap's clean-up.
    wait_printed(
        &printed,
        "done: the swap is complete",
        Duration::from_secs(120),
    )
    .await;
    the_replaced_voter_boots_and_comes_home_as_an_agent_with_no_command_typed_on_it(&mut lab).await;
    let said = printed.lock().unwrap().clone();
    for tidy in [
        "uncordon server-2: server-2 came home as an agent",
        "remove server-2's server role labels and k3s etcd annotations: server-2 came home as an agent",
    ] {
        assert!(said.contains(tidy), "{said}");
    }
    voters_spread_over_two_zones(&lab, &printed).await;
    forged_readiness_and_voters_move_nothing(&lab, &printed).await;
    let _ = run.kill().await;
    for h in &lab.spec.hosts {
        assert_eq!(
            lab.most_k3s_at_once(&h.name).unwrap(),
            1,
            "k3s units together on {}",
            h.name
        );
    }
}

/// The voters' names, as etcd lists its voting members (`<node>-<8 hex>`).
async fn etcd_voters(lab: &SystemdLab) -> Vec<String> {
    let mut v: Vec<String> = lab::scenario::members(&lab.spec)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| !m.is_learner)
        .filter_map(|m| m.name.rsplit_once('-').map(|(n, _)| n.to_string()))
        .collect();
    v.sort();
    v
}

/// With `run` running and no window, what common add-ons' permissions can
/// write about the voters changes nothing: a `nodes/status` writer
/// (node-problem-detector's own role) forging a voter NotReady since long
/// ago, every 0.1 s for well past the grace period, gets no member removed
/// (its kubelet renews its node Lease and its own view of etcd vouches for
/// it); an agent dressed as a voter (k3s's etcd label by the lab's
/// patch-nodes user, `EtcdIsVoter` by that same status writer) makes `run`
/// move nothing and `status` degraded, where it used to count four voters.
async fn forged_readiness_and_voters_move_nothing(
    lab: &SystemdLab,
    printed: &std::sync::Mutex<String>,
) {
    let admin = Apis::for_lab(&lab.spec).unwrap();
    let npd = Apis::for_lab_as(
        &lab.spec,
        &lab::lab_setup::node_status_token(&admin).await.unwrap(),
    )
    .unwrap();
    let patcher = Apis::for_lab_as(
        &lab.spec,
        &lab::lab_setup::patch_nodes_token(&admin).await.unwrap(),
    )
    .unwrap();
    let before = etcd_voters(lab).await;
    let target = before
        .iter()
        .find(|n| n.starts_with("server-"))
        .expect("a server votes")
        .clone();
    let swaps_before = printed.lock().unwrap().matches("swap out").count();
    let status = |node: String, value: serde_json::Value| {
        let npd = &npd;
        async move {
            npd.any(|c| {
                let (node, value) = (node.clone(), value.clone());
                async move {
                    Api::<Node>::all(c)
                        .patch_status(
                            &node,
                            &kube::api::PatchParams::default(),
                            &kube::api::Patch::Strategic(value),
                        )
                        .await
                }
            })
            .await
        }
    };
    let forged = serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": "False",
        "reason": "KernelDeadlock", "message": "forged by a node-problem-detector credential",
        "lastTransitionTime": "2020-01-01T00:00:00Z", "lastHeartbeatTime": "2020-01-01T00:00:00Z"}]}});
    let clock = clock::Clock::system();
    let started = clock.now();
    // Past the grace (5 s) and the node Lease's grace (10 s), with room:
    // long enough for every rule that could have fired (the node Lease
    // stays fresh, renewed by the real kubelet, so the views' age of 30 s
    // never comes into it).
    let mut disputed = None;
    let mut looked = None;
    while clock.since(started) < Duration::from_secs(25) {
        status(target.clone(), forged.clone())
            .await
            .expect("node-problem-detector's role patches a Node's status");
        if disputed.is_none() && clock.since(started) > Duration::from_secs(15) {
            // `status` names the dispute (`ready-disputed`).
            disputed = Some(String::from_utf8_lossy(&fleet_role_status(lab).stdout).to_string());
        }
        if disputed.is_some() && looked.is_none() {
            // The runbook's look, as docs/recovery.md gives it, run by an
            // administrator while the forgery stands: the forged reason and
            // message, and the writers of the Node's status.
            let yaml = runbook_look(lab, "ready-disputed", &target, "server-1").await;
            looked = yaml.contains("reason: KernelDeadlock").then_some(yaml);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let disputed = disputed.unwrap_or_default();
    assert!(
        disputed.contains(&format!("{target} reads NotReady, but")),
        "{disputed}"
    );
    let looked = looked.expect("the runbook's look never showed the forged Ready");
    assert!(
        looked.contains("message: forged by a node-problem-detector credential")
            && looked.contains("managedFields:")
            && looked.contains("subresource: status"),
        "{looked}"
    );
    // The writer stopped, the kubelet's next status puts Ready back and
    // `status` drops the dispute.
    let calm = clock.now();
    loop {
        let shown = String::from_utf8_lossy(&fleet_role_status(lab).stdout).to_string();
        if !shown.contains("reads NotReady, but") {
            break;
        }
        assert!(
            clock.since(calm) < Duration::from_secs(60),
            "the dispute stayed after its writer stopped:\n{shown}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(
        printed.lock().unwrap().matches("swap out").count(),
        swaps_before,
        "a swap was started over a forged NotReady:\n{}",
        printed.lock().unwrap()
    );
    assert_eq!(etcd_voters(lab).await, before, "etcd's voters changed");
    // An agent dressed as a voter: one that was never a server (a host
    // that came home as an agent would be tidied by `run` instead).
    let standby = ["agent-2", "agent-1"]
        .into_iter()
        .map(String::from)
        .chain(lab.spec.hosts.iter().map(|h| h.name.clone()))
        .find(|n| !before.contains(n))
        .expect("a host that does not vote");
    patcher
        .patch_node(
            &standby,
            &serde_json::json!({"metadata": {"labels": {"node-role.kubernetes.io/etcd": "true"}}}),
        )
        .await
        .expect("a patch-nodes user sets k3s's etcd label");
    let now = "2026-01-01T00:00:00Z";
    status(
        standby.clone(),
        serde_json::json!({"status": {"conditions": [{"type": "EtcdIsVoter", "status": "True",
            "reason": "MemberIsVoter", "lastTransitionTime": now, "lastHeartbeatTime": now}]}}),
    )
    .await
    .expect("a nodes/status writer sets EtcdIsVoter");
    wait_printed(
        printed,
        &format!("no move while voter Node(s) have no voting member in etcd: {standby}"),
        Duration::from_secs(60),
    )
    .await;
    let out = fleet_role_status(lab);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("voter Node(s) with no voting member in etcd"),
        "{text}"
    );
    let said = printed.lock().unwrap().clone();
    assert!(!said.contains("shrink:"), "{said}");
    assert_eq!(etcd_voters(lab).await, before, "etcd's voters changed");
    // Undressed, as the admin would.
    admin
        .patch_node(
            &standby,
            &serde_json::json!({"metadata": {"labels": {"node-role.kubernetes.io/etcd": null}}}),
        )
        .await
        .unwrap();
}

/// The runbook block `mark` of docs/recovery.md, its `NODE` filled with
/// `node`, run as written by the lab's administrator (kubectl and
/// `fleet-role` on `PATH`, the admin kubeconfig naming `via`'s API server);
/// the first line's output.
async fn runbook_look(lab: &SystemdLab, mark: &str, node: &str, via: &str) -> String {
    let ran = common::admin_runbook(lab, mark, via, &[("NODE", node)]).await;
    String::from_utf8_lossy(&ran[0].1.stdout).to_string()
}

/// `fleet-role status` on the lab, its output.
fn fleet_role_status(lab: &SystemdLab) -> std::process::Output {
    fleet_role_cmd(lab, "status")
}

/// `fleet-role COMMAND` on the lab, its output.
fn fleet_role_cmd(lab: &SystemdLab, command: &str) -> std::process::Output {
    std::process::Command::new(fleet_role())
        .args([
            "--kubeconfig",
            &lab::lab_setup::kubeconfig(&lab.spec).display().to_string(),
            command,
        ])
        .output()
        .unwrap()
}

/// Two zones: the voters (server-1, server-3, agent-1) and agent-2 in zone
/// a, server-2 (home as an agent, its finish having removed its server
/// certificates) in zone b. `run` swaps a voter of zone a for server-2,
/// which joins again as k3s would, its etcd certificates made from the
/// join server's bootstrap data, and etcd's voters end spread: two in a,
/// one in b.
async fn voters_spread_over_two_zones(lab: &SystemdLab, printed: &std::sync::Mutex<String>) {
    let apis = Apis::for_lab(&lab.spec).unwrap();
    // The labels go on one Node at a time: paused, `run` takes no swap
    // from a half-labelled fleet (agent-2 with no zone yet looked like a
    // zone of its own).
    let paused = fleet_role_cmd(lab, "pause");
    assert!(paused.status.success(), "pause: {paused:?}");
    for (node, zone) in [
        ("server-1", "a"),
        ("server-3", "a"),
        ("agent-1", "a"),
        ("agent-2", "a"),
        ("server-2", "b"),
    ] {
        let patch =
            serde_json::json!({"metadata": {"labels": {"topology.kubernetes.io/zone": zone}}});
        apis.patch_node(node, &patch).await.unwrap();
    }
    let resumed = fleet_role_cmd(lab, "resume");
    assert!(resumed.status.success(), "resume: {resumed:?}");
    let clock = clock::Clock::system();
    let labelled = clock.now();
    while !printed.lock().unwrap().contains("to spread the voters") {
        if clock.since(labelled) > Duration::from_secs(120) {
            let status = fleet_role_status(lab);
            panic!(
                "run did not swap to spread the voters within 120 s:\n{}\nstatus:\n{}",
                printed.lock().unwrap(),
                String::from_utf8_lossy(&status.stdout)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    loop {
        let members = lab::scenario::members(&lab.spec).await.unwrap_or_default();
        let voters: Vec<&str> = members
            .iter()
            .filter(|m| !m.is_learner)
            .map(|m| m.name.as_str())
            .collect();
        if members.len() == 3 && voters.iter().any(|v| v.starts_with("server-2-")) {
            println!(
                "voters spread over two zones {:.1}s after the labels: {voters:?}",
                clock.since(labelled).as_secs_f64()
            );
            break;
        }
        if clock.since(labelled) > Duration::from_secs(360) {
            panic!(
                "the voters were not spread within 360 s: {voters:?}\n{}\nserver-2's actuator:\n{}",
                printed.lock().unwrap(),
                common::last_said(lab, "server-2", &["fleet-role-actuator"], 40)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The swap ends; run then leaves the set as the zones allow: idle, and
    // no second swap to spread them.
    let said = || printed.lock().unwrap().clone();
    let start = clock.now();
    loop {
        let text = said();
        let after = text
            .match_indices("done: the swap is complete")
            .nth(1)
            .map(|(i, _)| &text[i..]);
        if let Some(after) = after
            && after.contains("idle: every voter is healthy and eligible")
        {
            assert!(!after.contains("to spread the voters"), "{text}");
            break;
        }
        assert!(clock.since(start) < Duration::from_secs(300), "{text}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// server-2, replaced while it was off, boots again with its role file
/// naming the server and its datastore's member removed: with `run` still
/// leading and nothing typed on the host, it ends running the agent only,
/// Ready, its Node tidied by `run` (no server labels or k3s annotations,
/// uncordoned), etcd holding three voters and no member of it, and
/// `fleet-role status` healthy.
async fn the_replaced_voter_boots_and_comes_home_as_an_agent_with_no_command_typed_on_it(
    lab: &mut SystemdLab,
) {
    assert!(lab.boot("server-2").unwrap(), "server-2 was off");
    let clock = clock::Clock::system();
    let booted = clock.now();
    let apis = Apis::for_lab(&lab.spec).unwrap();
    let mut last = String::new();
    loop {
        let node = apis
            .any(|c| async move { Api::<Node>::all(c).get("server-2").await })
            .await;
        let m = lab.machine("server-2").unwrap();
        let agent = m.active_state("k3s-agent").unwrap_or_default();
        let server = m.active_state("k3s").unwrap_or_default();
        let members = lab::scenario::members(&lab.spec).await.unwrap_or_default();
        let voters = members.iter().filter(|x| !x.is_learner).count();
        let its_member = members.iter().any(|x| x.name.starts_with("server-2-"));
        if let Ok(n) = &node {
            let view = kubeview::node_facts(&Default::default(), n);
            let now = format!(
                "k3s-agent {agent}, k3s {server}; Ready {}; server labels {}; k3s annotations {}; cordoned {}; {voters} voters; its member listed {its_member}",
                view.ready,
                view.has_server_labels(),
                view.k3s.any(),
                view.cordoned
            );
            if agent == "active"
                && server == "inactive"
                && view.ready
                && !view.has_server_labels()
                && !view.k3s.any()
                && !view.cordoned
                && voters == 3
                && members.len() == 3
                && !its_member
            {
                println!(
                    "server-2 came home {:.1}s after it booted: {now}",
                    clock.since(booted).as_secs_f64()
                );
                break;
            }
            if now != last {
                println!("server-2: {now}");
                last = now;
            }
        }
        assert!(
            clock.since(booted) < Duration::from_secs(300),
            "server-2 did not come home within 300 s of its boot: {last}\n{}",
            lab.machine("server-2")
                .unwrap()
                .journal_of(&["fleet-role-actuator"], Duration::from_secs(30))
                .map(|j| j
                    .iter()
                    .filter_map(|r| r["MESSAGE"].as_str().map(str::to_string))
                    .collect::<Vec<_>>()
                    .join("\n"))
                .unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The role file names the agent; the datastore is moved aside, kept.
    let root = lab.spec.root("server-2");
    assert_eq!(
        std::fs::read_to_string(root.join("var/lib/rancher/k3s/fleet-role"))
            .unwrap()
            .trim(),
        "agent"
    );
    assert!(!root.join("var/lib/rancher/k3s/server/db/etcd").exists());
    // `fleet-role status` says nothing is degraded (the servers' views of
    // etcd take in the change one heartbeat at a time).
    let healthy = clock.now();
    loop {
        let out = fleet_role_status(lab);
        if out.status.code() == Some(0) {
            break;
        }
        assert!(
            clock.since(healthy) < Duration::from_secs(120),
            "status is not healthy: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_on_real_systemd_whose_server_never_becomes_ready_is_rolled_back_at_once_and_the_lock_is_free()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(1, 2, dir.path()).await;
    let hand = Hand::new(&lab.spec).unwrap();
    let n = hand.names.clone();
    let swap = format!("swap-{}", clock::Clock::system().unix_secs());
    hand.hold_lease(&swap, "server-2", "agent-1", &n.controller_identity)
        .await
        .unwrap();
    // agent-2 runs no etcd: a join to it can never succeed.
    hand.ask(
        "agent-1",
        Ask::Promote {
            swap: &swap,
            join: "agent-2",
        },
    )
    .await
    .unwrap();
    let start = clock::Clock::system().now();
    while !hand
        .report("agent-1")
        .await
        .ok()
        .flatten()
        .is_some_and(|r| r.step == ReportStep::Promote)
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the promotion did not start"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // k3s.service is Type=notify with TimeoutStartSec=0: a learner that
    // never joins never sends READY=1, so its start never ends by itself.
    // The controller's part: no voter in time, so roll it back while the
    // server unit is still starting.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(
        lab.machine("agent-1").unwrap().active_state("k3s").unwrap(),
        "activating",
        "the server unit that cannot join is not still starting"
    );
    let r = hand.report("agent-1").await.unwrap().unwrap();
    assert_ne!(
        r.phase,
        Phase::Done,
        "a promotion to an unreachable voter finished: {r:?}"
    );
    hand.hold_lease(&swap, "server-2", "agent-1", &n.controller_identity)
        .await
        .unwrap();
    hand.ask("agent-1", Ask::Rollback).await.unwrap();
    hand.wait_step(
        "agent-1",
        &swap,
        ReportStep::Rollback,
        Duration::from_secs(120),
        &|r| println!("{r:?}"),
    )
    .await
    .unwrap();
    let root = lab.spec.root("agent-1");
    let rolled_back = clock::Clock::system().now();
    assert_eq!(
        std::fs::read_to_string(root.join("var/lib/rancher/k3s/fleet-role"))
            .unwrap()
            .trim(),
        "agent"
    );
    assert!(
        lab.is_active("agent-1", "k3s-agent").unwrap() && !lab.is_active("agent-1", "k3s").unwrap()
    );
    assert!(
        !root
            .join("etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml")
            .exists()
    );
    assert_eq!(lab.most_k3s_at_once("agent-1").unwrap(), 1);
    // The cluster is as it was: one voter, no learner.
    let members = scenario::members(&lab.spec).await.unwrap();
    assert_eq!(members.len(), 1, "{members:?}");
    assert!(members[0].name.starts_with("server-1-"));
    lab::lab_setup::wait_condition(&hand.apis, "agent-1", "Ready", Duration::from_secs(60))
        .await
        .unwrap();
    // The host lock is free: a local switch takes it at once.
    let out = lab
        .machine("agent-1")
        .unwrap()
        .exec(
            &[
                "fleet-role-actuator",
                "demote-local",
                "--check",
                "--lock-timeout",
                "1",
            ],
            Duration::from_secs(60),
        )
        .unwrap();
    assert!(out.status.success(), "{} {}", out.stdout, out.stderr);
    println!(
        "rolled back and checked in {:.1}s",
        rolled_back.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_promotion_removes_its_learner_and_the_same_host_is_promoted_again_at_once() {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(1, 1, dir.path()).await;
    let hand = Hand::new(&lab.spec).unwrap();
    let n = hand.names.clone();
    // agent-1's etcd does not start: its join adds a learner that never
    // catches up, as a host too slow or cut off would leave one.
    let fails = lab
        .spec
        .root("agent-1")
        .join("var/lib/rancher/fleet-role-lab-etcd-fails");
    std::fs::write(&fails, "").unwrap();
    let promote = |swap: String| {
        let hand = &hand;
        let n = &n;
        async move {
            hand.hold_lease(&swap, "server-2", "agent-1", &n.controller_identity)
                .await
                .unwrap();
            hand.ask(
                "agent-1",
                Ask::Promote {
                    swap: &swap,
                    join: "server-1",
                },
            )
            .await
            .unwrap();
        }
    };
    let first = format!("swap-{}-a", clock::Clock::system().unix_secs());
    promote(first.clone()).await;
    let start = clock::Clock::system().now();
    loop {
        let members = scenario::members(&lab.spec).await.unwrap();
        if members.iter().any(|m| m.is_learner) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no learner joined: {members:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    hand.hold_lease(&first, "server-2", "agent-1", &n.controller_identity)
        .await
        .unwrap();
    hand.ask("agent-1", Ask::Rollback).await.unwrap();
    hand.wait_step_holding(
        "agent-1",
        (&first, "server-2", "agent-1", &n.controller_identity),
        ReportStep::Rollback,
        Duration::from_secs(180),
        &|_| {},
    )
    .await
    .unwrap();
    // No learner is left behind (k3s would remove it only after 5 minutes).
    let members = scenario::members(&lab.spec).await.unwrap();
    assert_eq!(members.len(), 1, "{members:?}");
    assert!(members[0].name.starts_with("server-1-"));

    // The same host, promoted again right away, joins and votes.
    std::fs::remove_file(&fails).unwrap();
    let again = format!("swap-{}-b", clock::Clock::system().unix_secs());
    promote(again.clone()).await;
    hand.wait_step_holding(
        "agent-1",
        (&again, "server-2", "agent-1", &n.controller_identity),
        ReportStep::Promote,
        Duration::from_secs(240),
        &|_| {},
    )
    .await
    .unwrap();
    let members = scenario::members(&lab.spec).await.unwrap();
    assert_eq!(members.len(), 2, "{members:?}");
    assert!(members.iter().all(|m| !m.is_learner), "{members:?}");
    hand.release_lease().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_rebooted_mid_promotion_on_real_systemd_converges_without_repeating_a_settled_step()
{
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let mut lab = lab_of(1, 1, dir.path()).await;
    let hand = Hand::new(&lab.spec).unwrap();
    let n = hand.names.clone();
    let swap = format!("swap-{}", clock::Clock::system().unix_secs());
    // Five earlier swaps' snapshots (the retention kept by default) and one
    // of k3s's own schedule: the new one pushes the oldest swap's out.
    let snapshots = lab
        .spec
        .root("server-1")
        .join("var/lib/rancher/k3s/server/db/snapshots");
    std::fs::create_dir_all(&snapshots).unwrap();
    for name in (1..=5)
        .map(|i| format!("swap-old{i}-server-1-{}", 100 + i))
        .chain(["etcd-snapshot-server-1-50".to_string()])
    {
        std::fs::write(snapshots.join(name), "an earlier snapshot\n").unwrap();
    }
    hand.hold_lease(&swap, "server-2", "agent-1", &n.controller_identity)
        .await
        .unwrap();
    hand.ask("server-1", Ask::Snapshot { swap: &swap })
        .await
        .unwrap();
    hand.wait_step(
        "server-1",
        &swap,
        ReportStep::Snapshot,
        Duration::from_secs(60),
        &|_| {},
    )
    .await
    .unwrap();
    let names = |dir: &std::path::Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let kept = names(&snapshots);
    assert!(
        !kept.contains(&"swap-old1-server-1-101".to_string())
            && kept.contains(&"swap-old2-server-1-102".to_string())
            && kept.contains(&"etcd-snapshot-server-1-50".to_string()),
        "the swap's snapshot step prunes the oldest swap snapshot only: {kept:?}"
    );
    assert_eq!(
        kept.iter().filter(|n| n.starts_with("swap-")).count(),
        5,
        "{kept:?}"
    );
    hand.ask(
        "agent-1",
        Ask::Promote {
            swap: &swap,
            join: "server-1",
        },
    )
    .await
    .unwrap();
    let start = clock::Clock::system().now();
    while !hand
        .report("agent-1")
        .await
        .ok()
        .flatten()
        .is_some_and(|r| r.step == ReportStep::Promote && r.detail.is_some())
    {
        assert!(start.elapsed() < Duration::from_secs(60), "no learner");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let started = hand.report("agent-1").await.unwrap().unwrap().started_at;
    println!("rebooting agent-1 mid-promotion");
    lab.reboot("agent-1").unwrap();
    // Rebooting server-1 too: its settled snapshot must not be taken again.
    lab.reboot("server-1").unwrap();
    let r = hand
        .wait_step_holding(
            "agent-1",
            (&swap, "server-2", "agent-1", &n.controller_identity),
            ReportStep::Promote,
            Duration::from_secs(180),
            &|r| println!("{r:?}"),
        )
        .await
        .unwrap();
    // A promotion started again would report a new start time.
    assert_eq!(r.started_at, started, "the promotion was started again");
    let snaps = names(&snapshots)
        .iter()
        .filter(|n| n.starts_with(&format!("{swap}-")))
        .count();
    assert_eq!(snaps, 1, "the settled snapshot was taken again");
    // (The report is the record of a step's start: its `started_at` above.
    // The actuator's journal is not, here: a host's first-boot records of
    // its service were seen missing after the reboot.)
    let members = scenario::members(&lab.spec).await.unwrap();
    assert_eq!(
        members.iter().filter(|m| !m.is_learner).count(),
        2,
        "{members:?}"
    );
    assert_eq!(lab.most_k3s_at_once("agent-1").unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_down_on_real_systemd_whose_etcd_does_not_come_back_leaves_the_role_file_naming_the_server()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(3, 0, dir.path()).await;
    let hand = Hand::new(&lab.spec).unwrap();
    let n = hand.names.clone();
    let root = lab.spec.root("server-3");
    // A shorter wait for etcd on this host, and a k3s whose etcd will not start again.
    let cfg = root.join("etc/fleet-role/actuator.toml");
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "etcd_wait_secs = 60",
        "etcd_wait_secs = 8\nstart_wait_secs = 20",
    );
    std::fs::write(&cfg, text).unwrap();
    lab.systemctl("server-3", &["restart", "fleet-role-actuator"])
        .unwrap();
    std::fs::write(root.join("var/lib/rancher/fleet-role-lab-etcd-fails"), "").unwrap();
    let swap = format!("swap-{}", clock::Clock::system().unix_secs());
    hand.hold_lease(&swap, "server-3", "agent-1", &n.controller_identity)
        .await
        .unwrap();
    hand.ask(
        "server-3",
        Ask::StepDown {
            swap: &swap,
            cordon: true,
        },
    )
    .await
    .unwrap();
    let err = hand
        .wait_step(
            "server-3",
            &swap,
            ReportStep::StepDown,
            Duration::from_secs(120),
            &|r| println!("{r:?}"),
        )
        .await
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("Failed") && msg.contains("role file server"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("var/lib/rancher/k3s/fleet-role"))
            .unwrap()
            .trim(),
        "server"
    );
    // The two voters left keep the cluster writable.
    let url = lab
        .spec
        .etcd(lab.spec.host("server-1").unwrap().ip)
        .unwrap();
    lab::etcd_gw::put(&url, "/lab/after-failed-step-down", "ok")
        .await
        .unwrap();
}

/// A host onboarded with its bundle's one command, on real systemd: the
/// lab's agent stripped to what the package leaves (no settings, no
/// credential, the watcher off), `fleet-role enroll agent-1 --bundle`, the
/// bundle copied into the host, `sh install.sh` run there as root (its real
/// hostname, systemctl and `fleet-role-actuator status` against the API
/// servers found from the Nodes, verified with the bundle's CA); then the
/// host reports, a second run changes nothing, and a swap promotes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_onboarded_by_its_bundles_install_sh_alone_reports_and_a_swap_promotes_it() {
    use k8s_openapi::api::coordination::v1::Lease;
    const BOUND: Duration = Duration::from_secs(180);
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(3, 1, dir.path()).await;
    let host = "agent-1";
    let m = lab.machine(host).unwrap();
    let root = lab.spec.root(host);
    m.exec_ok(
        &["systemctl", "disable", "--now", "fleet-role-actuator"],
        BOUND,
    )
    .unwrap();
    for f in ["actuator.toml", "token", "ca.crt"] {
        std::fs::remove_file(root.join("etc/fleet-role").join(f)).unwrap();
    }

    // The admin's command; the bundle lands in the lab's directory, which
    // every host sees at the same path (the copy to the host).
    let bundle = lab.spec.dir.join("agent-1.bundle");
    let install = bundle.join("install.sh");
    let install = install.to_str().unwrap();
    let out = common::fleet_role_cmd(
        &lab,
        &["enroll", host, "--bundle", bundle.to_str().unwrap()],
    )
    .await;
    assert!(out.status.success());
    // The API servers from the Nodes: the servers by name, the host last.
    let settings: toml::Table = std::fs::read_to_string(bundle.join("actuator.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let ip = |name: &str| lab.spec.hosts.iter().find(|h| h.name == name).unwrap().ip;
    let want: Vec<toml::Value> = ["server-1", "server-2", "server-3", host]
        .iter()
        .map(|n| toml::Value::String(format!("https://{}:6443", ip(n))))
        .collect();
    assert_eq!(settings["api"].as_array().unwrap(), &want);

    // The host's one command.
    let started = clock::Clock::system().wall();
    let o = m.exec(&["sh", install], BOUND).unwrap();
    eprintln!("install.sh:\n{}{}", o.stdout, o.stderr);
    assert!(o.status.success(), "install.sh: {}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains("wrote /etc/fleet-role/token (mode 600)"),
        "{}",
        o.stdout
    );
    lab.wait_active(host, "fleet-role-actuator", BOUND)
        .await
        .unwrap();
    // Its heartbeat, renewed by the watcher the bundle configured.
    let apis = Apis::for_lab(&lab.spec).unwrap();
    let begun = clock::Clock::system().now();
    loop {
        let lease = apis
            .any(|c| async move {
                Api::<Lease>::namespaced(c, "fleet-role-hosts")
                    .get("agent-1")
                    .await
            })
            .await;
        let renewed = lease
            .ok()
            .and_then(|l| l.spec?.renew_time)
            .is_some_and(|t| std::time::SystemTime::from(t.0) > started);
        if renewed {
            break;
        }
        assert!(
            begun.elapsed() < BOUND,
            "no heartbeat from the onboarded host"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // Again: nothing changes, nothing restarts.
    let o = m.exec(&["sh", install], BOUND).unwrap();
    assert!(
        o.status.success(),
        "install.sh again: {}{}",
        o.stdout,
        o.stderr
    );
    assert!(o.stdout.contains("nothing to change"), "{}", o.stdout);

    // A swap promotes it.
    let r = scenario::swap_by_hand(&lab, "server-3", host, &|l| eprintln!("{l}"))
        .await
        .expect("the swap to the onboarded host");
    let broken = r.broken_promises("server-3", host);
    assert!(broken.is_empty(), "promises broken: {broken:#?}");
    assert_eq!(m.active_state("k3s").unwrap(), "active");
}
