//! Crash at every change, on real systemd: each host plan (promote,
//! rollback, step-down, finish) carried out by the actuator under its
//! failpoint (`/var/lib/rancher/k3s/fleet-role.failpoint`, see
//! `crates/actuator/src/failpoint.rs`), which SIGKILLs the actuator after
//! each change in turn; systemd starts it again each time and it resumes the
//! step from its report. Each plan must still end `done` with the k3s units
//! never active together, the datastore where it belongs, and no settled
//! step started again. Fails (never skips) when containers cannot run here.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use lab::{
    scenario::{self, Ask, Hand},
    systemd_lab::SystemdLab,
};
use protocol::{
    Phase,
    names::{
        K3S_CONTROL_PLANE_LABEL, K3S_ETCD_NODE_ADDRESS, K3S_ETCD_NODE_NAME, K3S_ETCD_REMOVE,
        K3S_ETCD_REMOVED_NODE_NAME, K3S_ETCD_ROLE_LABEL, K3S_MASTER_LABEL,
    },
    report::{Detail, ReportStep},
};
use serde_json::json;

mod common;
use common::{SERIAL, lab_dir, lab_of};

const ACTUATOR: &str = "fleet-role-actuator";
/// How long one plan, crashing after each of its changes, may take to end.
const STEP_BOUND: Duration = Duration::from_secs(400);

/// A restart a second after each crash instead of the shipped five, so the
/// ~30 crashes of this file take half a minute rather than three. At one a
/// second, systemd's default start limit (5 starts in 10 s) would stop the
/// unit for good part-way through a plan of quick changes, so it is lifted
/// here. The shipped unit needs neither: its `RestartSec=5` never reaches
/// the limit, however often the actuator dies.
const FAST_RESTART: &str = "[Unit]\nStartLimitIntervalSec=0\n\n[Service]\nRestartSec=1\n";

fn root(lab: &SystemdLab, host: &str) -> PathBuf {
    lab.spec.root(host)
}

/// The failpoint's file on a host, as seen from here (the actuator's
/// `failpoint::file`: its path under the host's k3s data dir).
fn failpoint(lab: &SystemdLab, host: &str) -> PathBuf {
    host::HostPaths::new(root(lab, host))
        .data_dir()
        .join("fleet-role.failpoint")
}

fn show(lab: &SystemdLab, host: &str, prop: &str, unit: &str) -> String {
    let m = lab.machine(host).unwrap();
    let out = tokio::task::block_in_place(|| {
        m.exec_ok(
            &["systemctl", "show", "-p", prop, "--value", unit],
            Duration::from_secs(60),
        )
    })
    .unwrap();
    out.text().to_string()
}

/// The actuator's restarts by systemd so far (`NRestarts`).
fn restarts(lab: &SystemdLab, host: &str) -> u32 {
    show(lab, host, "NRestarts", ACTUATOR).parse().unwrap()
}

/// The failpoint set on `host`: the actuator dies after each change it makes
/// from now on. Returns its restarts so far.
fn arm(lab: &SystemdLab, host: &str) -> u32 {
    std::fs::write(failpoint(lab, host), "").unwrap();
    restarts(lab, host)
}

/// The failpoint removed from `host`; returns the changes the actuator was
/// killed after, in order, once it is checked that each crash was one
/// restart by systemd and that the failpoint fired at all.
fn disarm(lab: &SystemdLab, host: &str, restarts_before: u32, plan: &str) -> Vec<String> {
    let file = failpoint(lab, host);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    let crashed: Vec<String> = text.lines().map(str::to_string).collect();
    let restarted = restarts(lab, host) - restarts_before;
    println!(
        "{plan} on {host}: killed after each of {} changes, restarted {restarted} times:",
        crashed.len()
    );
    for c in &crashed {
        println!("  killed after: {c}");
    }
    assert!(
        !crashed.is_empty(),
        "the failpoint never fired during the {plan} on {host}"
    );
    assert_eq!(
        restarted as usize,
        crashed.len(),
        "the {plan} on {host}: each kill must be one restart by systemd, and nothing else"
    );
    assert_eq!(
        show(lab, host, "ActiveState", ACTUATOR),
        "active",
        "the actuator on {host} is not running after the {plan}"
    );
    crashed
}

/// The last records of `host`'s actuator, for a failure's message: what a
/// run in CI leaves to look at once its lab is gone.
fn actuator_log(lab: &SystemdLab, host: &str) -> String {
    let Ok(m) = lab.machine(host) else {
        return format!("no host {host}");
    };
    match m.journal_of(&["fleet-role-actuator"], Duration::from_secs(30)) {
        Ok(records) => {
            let lines: Vec<String> = records
                .iter()
                .filter_map(|r| r.get("MESSAGE").and_then(|v| v.as_str()))
                .map(str::to_string)
                .collect();
            let tail = lines.len().saturating_sub(60);
            format!(
                "{host}'s actuator, its last records:\n{}",
                lines[tail..].join("\n")
            )
        }
        Err(e) => format!("{host}'s journal could not be read: {e}"),
    }
}

fn has(crashed: &[String], change: &str) -> bool {
    crashed.iter().any(|c| c.starts_with(change))
}

/// Waits until `host` reports `step` of `swap` (any phase) and returns its
/// start time.
async fn started(hand: &Hand, host: &str, swap: &str, step: ReportStep) -> i64 {
    let start = clock::Clock::system().now();
    loop {
        if let Ok(Some(r)) = hand.report(host).await
            && r.swap.as_ref().is_some_and(|s| s.as_str() == swap)
            && r.step == step
        {
            return r.started_at;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{host} did not start the {} of {swap}",
            step.as_str()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits for the step to end `done` and checks it was never started again:
/// the report keeps the start time it first showed.
async fn settles(
    lab: &SystemdLab,
    hand: &Hand,
    host: &str,
    swap: &str,
    step: ReportStep,
) -> protocol::report::Report {
    let first = started(hand, host, swap, step).await;
    let r = hand
        .wait_step(host, swap, step, STEP_BOUND, &|r| {
            println!("  {host}: {} {:?} {:?}", r.step.as_str(), r.phase, r.detail)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", actuator_log(lab, host)));
    assert_eq!(r.phase, Phase::Done);
    assert_eq!(
        r.started_at,
        first,
        "the {} on {host} was started again",
        step.as_str()
    );
    r
}

/// How many times the actuator on `host` started each (swap, step) anew, from
/// its journal (`step started`; a resumed step does not say it).
fn starts(lab: &SystemdLab, host: &str) -> BTreeMap<String, usize> {
    let m = lab.machine(host).unwrap();
    // Every record of the host, not only the unit's: a record sent just
    // before the failpoint's SIGKILL reaches journald after its sender is
    // gone, and journald can no longer tell the dead pid's unit, so
    // `journalctl -u` misses it. Only the actuator logs "step started".
    let records = tokio::task::block_in_place(|| m.journal(&[], Duration::from_secs(60))).unwrap();
    let mut out = BTreeMap::new();
    for r in records {
        let msg = r["MESSAGE"].as_str().unwrap_or_default();
        if let Some((_, fields)) = msg.split_once("step started") {
            *out.entry(fields.trim().to_string()).or_insert(0) += 1;
        }
    }
    out
}

fn member_name(dir: PathBuf) -> Option<String> {
    std::fs::read_to_string(dir.join("name"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn role_file(lab: &SystemdLab, host: &str) -> String {
    std::fs::read_to_string(root(lab, host).join("var/lib/rancher/k3s/fleet-role"))
        .unwrap()
        .trim()
        .to_string()
}

fn never_together(lab: &SystemdLab, host: &str) {
    assert_eq!(
        lab.most_k3s_at_once(host).unwrap(),
        1,
        "k3s and k3s-agent were active together on {host}"
    );
}

/// Keeps the regrade Lease held for whichever swap `swap` names (server-2
/// out, agent-1 in, as both swaps here are), as the controller does, until
/// dropped.
fn renew_lease(lab: &SystemdLab, swap: Arc<Mutex<String>>) -> tokio::task::JoinHandle<()> {
    let hand = Hand::new(&lab.spec).unwrap();
    tokio::spawn(async move {
        loop {
            let s = swap.lock().unwrap().clone();
            let _ = hand
                .hold_lease(&s, "server-2", "agent-1", &hand.names.controller_identity)
                .await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    })
}

/// Has k3s remove `host`'s member (its removal controller acts on the Node's
/// annotation) and waits until it says so.
async fn remove_member(hand: &Hand, host: &str) {
    hand.patch_node(
        host,
        json!({"metadata": {"annotations": { K3S_ETCD_REMOVE: "true" }}}),
    )
    .await
    .unwrap();
    let start = clock::Clock::system().now();
    loop {
        let node = hand.node(host).await.unwrap();
        if node
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(K3S_ETCD_REMOVED_NODE_NAME))
        {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "k3s did not remove the member of {host}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_actuator_killed_after_each_change_of_every_plan_on_real_systemd_ends_each_step_with_nothing_lost_or_repeated()
 {
    let _turn = SERIAL.lock().await;
    let t0 = clock::Clock::system().now();
    let dir = lab_dir();
    let lab = lab_of(2, 1, dir.path()).await;
    let hand = Hand::new(&lab.spec).unwrap();
    let n = hand.names.clone();
    for h in ["server-1", "server-2", "agent-1"] {
        let d = root(&lab, h).join("etc/systemd/system/fleet-role-actuator.service.d");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("90-crash-test.conf"), FAST_RESTART).unwrap();
        lab.systemctl(h, &["daemon-reload"]).unwrap();
    }
    let swap_a = format!("swap-{}", clock::Clock::system().unix_secs());
    let current = Arc::new(Mutex::new(swap_a.clone()));
    let renewer = renew_lease(&lab, current.clone());
    hand.hold_lease(&swap_a, "server-2", "agent-1", &n.controller_identity)
        .await
        .unwrap();
    let agent_paths = host::HostPaths::new(root(&lab, "agent-1"));

    // 1. Promote agent-1, joining server-1.
    let mark = clock::Clock::system().now();
    let before = arm(&lab, "agent-1");
    hand.ask(
        "agent-1",
        Ask::Promote {
            swap: &swap_a,
            join: "server-1",
        },
    )
    .await
    .unwrap();
    let r = settles(&lab, &hand, "agent-1", &swap_a, ReportStep::Promote).await;
    let crashed = disarm(&lab, "agent-1", before, "promotion");
    println!("promotion: {:.0}s", mark.elapsed().as_secs_f64());
    assert_eq!(r.detail, Some(Detail::Voter));
    for c in [
        "write /etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml",
        "write /etc/systemd/system/k3s.service.d/90-fleet-role-join.conf",
        "systemctl daemon-reload",
        "name server in",
        "systemctl stop k3s-agent",
        "systemctl enable --now k3s ",
    ] {
        assert!(has(&crashed, c), "no kill after '{c}': {crashed:?}");
    }
    assert_eq!(role_file(&lab, "agent-1"), "server");
    // systemd runs k3s with the drop-in it was given, the reload not lost
    // to the kill after the write.
    assert_eq!(show(&lab, "agent-1", "NeedDaemonReload", "k3s"), "no");
    assert!(
        show(&lab, "agent-1", "Environment", "k3s").contains("FLEET_ROLE_JOIN_URL="),
        "k3s runs without its join drop-in"
    );
    let promoted_member = member_name(agent_paths.etcd_dir())
        .expect("the promoted server holds its datastore in server/db/etcd");
    assert!(
        lab.is_active("agent-1", "k3s").unwrap() && !lab.is_active("agent-1", "k3s-agent").unwrap()
    );
    never_together(&lab, "agent-1");
    let members = scenario::members(&lab.spec).await.unwrap();
    assert_eq!(
        members.iter().filter(|m| !m.is_learner).count(),
        3,
        "{members:?}"
    );

    // 2. Roll that promotion back (three voters: the two others keep quorum).
    let mark = clock::Clock::system().now();
    let before = arm(&lab, "agent-1");
    hand.ask("agent-1", Ask::Rollback).await.unwrap();
    let r = settles(&lab, &hand, "agent-1", &swap_a, ReportStep::Rollback).await;
    let crashed = disarm(&lab, "agent-1", before, "rollback");
    println!("rollback: {:.0}s", mark.elapsed().as_secs_f64());
    assert_eq!(r.detail, Some(Detail::AgentReady));
    // The server's stop comes before the plan (the learner is removed
    // only once its etcd is down, see the actuator's `learner` module), so
    // the plan's first change is the disable.
    for c in [
        "systemctl disable k3s",
        "move /var/lib/rancher/k3s/server/db/etcd to",
        "remove /etc/systemd/system/k3s.service.d/90-fleet-role-join.conf",
        "systemctl daemon-reload",
        "name agent in",
        "systemctl enable --now k3s-agent",
    ] {
        assert!(has(&crashed, c), "no kill after '{c}': {crashed:?}");
    }
    assert_eq!(role_file(&lab, "agent-1"), "agent");
    assert_eq!(show(&lab, "agent-1", "NeedDaemonReload", "k3s"), "no");
    assert!(!show(&lab, "agent-1", "Environment", "k3s").contains("FLEET_ROLE_JOIN_URL="));
    assert!(!agent_paths.etcd_dir().exists());
    assert_eq!(
        member_name(agent_paths.db_demoted().join("etcd")),
        Some(promoted_member),
        "the rolled-back server's datastore is not in server/db.demoted/etcd"
    );
    assert!(
        lab.is_active("agent-1", "k3s-agent").unwrap() && !lab.is_active("agent-1", "k3s").unwrap()
    );
    never_together(&lab, "agent-1");
    // The controller's part after a rollback: the member removed, the marks cleared.
    remove_member(&hand, "agent-1").await;
    hand.patch_node(
        "agent-1",
        json!({"metadata": {
            "labels": { K3S_CONTROL_PLANE_LABEL: null, K3S_MASTER_LABEL: null, K3S_ETCD_ROLE_LABEL: null },
            "annotations": { K3S_ETCD_NODE_NAME: null, K3S_ETCD_NODE_ADDRESS: null, K3S_ETCD_REMOVED_NODE_NAME: null, K3S_ETCD_REMOVE: null,
                             n.role_swap(): null, n.role_step(): null, n.role_join_node(): null }}}),
    )
    .await
    .unwrap();

    // 3. A new swap: agent-1 promoted again (no failpoint), so server-2 can
    // step down with two voters left.
    let swap_b = format!("swap-{}", clock::Clock::system().unix_secs() + 1);
    *current.lock().unwrap() = swap_b.clone();
    hand.hold_lease(&swap_b, "server-2", "agent-1", &n.controller_identity)
        .await
        .unwrap();
    hand.ask(
        "agent-1",
        Ask::Promote {
            swap: &swap_b,
            join: "server-1",
        },
    )
    .await
    .unwrap();
    settles(&lab, &hand, "agent-1", &swap_b, ReportStep::Promote).await;
    // A snapshot on server-2, which its demotion must keep.
    hand.ask("server-2", Ask::Snapshot { swap: &swap_b })
        .await
        .unwrap();
    settles(&lab, &hand, "server-2", &swap_b, ReportStep::Snapshot).await;
    let out_paths = host::HostPaths::new(root(&lab, "server-2"));
    let snapshots = || {
        let mut s: Vec<String> = std::fs::read_dir(out_paths.snapshots())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        s.sort();
        s
    };
    let snaps = snapshots();
    assert!(!snaps.is_empty());
    let out_member = member_name(out_paths.etcd_dir()).unwrap();

    // 4. Step server-2 down to etcd-only.
    let mark = clock::Clock::system().now();
    let before = arm(&lab, "server-2");
    hand.ask(
        "server-2",
        Ask::StepDown {
            swap: &swap_b,
            cordon: true,
        },
    )
    .await
    .unwrap();
    let r = settles(&lab, &hand, "server-2", &swap_b, ReportStep::StepDown).await;
    let crashed = disarm(&lab, "server-2", before, "step-down");
    println!("step-down: {:.0}s", mark.elapsed().as_secs_f64());
    assert_eq!(r.detail, Some(Detail::EtcdOnly));
    for c in [
        "write /etc/rancher/k3s/config.yaml.d/90-fleet-role-etcd-only.yaml",
        "systemctl restart k3s",
        "kill every pod's shim",
        "wait for etcd to serve again",
        "name agent in",
    ] {
        assert!(has(&crashed, c), "no kill after '{c}': {crashed:?}");
    }
    assert_eq!(role_file(&lab, "server-2"), "agent");
    assert_eq!(
        member_name(out_paths.etcd_dir()).as_deref(),
        Some(out_member.as_str())
    );
    assert!(lab.is_active("server-2", "k3s").unwrap());
    never_together(&lab, "server-2");

    // 5. Its member removed by k3s, then its finish as an agent (no Lease:
    // the actuator finishes by itself once the member is gone).
    // The lab's k3s writes none of the server's secrets a finish removes
    // (real k3s writes them all): stand-ins for them, so that change is made.
    for s in out_paths.server_secrets() {
        if !s.exists() {
            let file = if s.ends_with("k3s.yaml") || s.ends_with("fleet-role.yaml") {
                s.clone()
            } else {
                s.join("lab.key")
            };
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, "secret\n").unwrap();
        }
    }
    let mark = clock::Clock::system().now();
    let before = arm(&lab, "server-2");
    remove_member(&hand, "server-2").await;
    let r = settles(&lab, &hand, "server-2", &swap_b, ReportStep::Finish).await;
    let crashed = disarm(&lab, "server-2", before, "finish");
    println!("finish: {:.0}s", mark.elapsed().as_secs_f64());
    assert_eq!(r.detail, Some(Detail::AgentReady));
    for c in [
        "systemctl stop k3s ",
        "move /var/lib/rancher/k3s/server/db/etcd to",
        "systemctl enable --now k3s-agent",
        "remove the server's secrets",
    ] {
        assert!(has(&crashed, c), "no kill after '{c}': {crashed:?}");
    }
    assert!(!out_paths.etcd_dir().exists());
    for s in out_paths.server_secrets() {
        assert!(!s.exists(), "{} is left after the finish", s.display());
    }
    assert_eq!(
        member_name(out_paths.db_demoted().join("etcd")).as_deref(),
        Some(out_member.as_str()),
        "the finished server's datastore is not in server/db.demoted/etcd"
    );
    assert_eq!(snapshots(), snaps, "the snapshots were not kept");
    assert!(
        lab.is_active("server-2", "k3s-agent").unwrap()
            && !lab.is_active("server-2", "k3s").unwrap()
    );
    never_together(&lab, "server-2");
    renewer.abort();

    // Across the whole run: every step started once, never again after a crash.
    for h in ["server-1", "server-2", "agent-1"] {
        never_together(&lab, h);
        let s = starts(&lab, h);
        println!("{h}: steps started {s:?}");
        assert!(
            s.values().all(|&k| k == 1),
            "a step was started more than once on {h}: {s:?}"
        );
    }
    assert_eq!(
        starts(&lab, "agent-1").len(),
        3,
        "promote, rollback, promote"
    );
    assert_eq!(
        starts(&lab, "server-2").len(),
        3,
        "snapshot, step-down, finish"
    );
    let members = scenario::members(&lab.spec).await.unwrap();
    assert_eq!(members.len(), 2, "{members:?}");
    assert!(members.iter().all(|m| !m.is_learner), "{members:?}");
    println!(
        "crash at every change: {:.0}s in all",
        t0.elapsed().as_secs_f64()
    );
}
