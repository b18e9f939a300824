//! What the lab tests on real systemd share: one lab at a time, a lab's
//! directory outside `/tmp`, a lab brought up from the built binaries, and
//! the path of the built `fleet-role`.
#![allow(dead_code)] // each test binary uses its own part of this module

use std::path::Path;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use lab::{
    api::Apis,
    lab_setup::Bins,
    scenario::Hand,
    systemd_lab::{Options, SystemdLab},
};
use protocol::{Names, names::LEASE_NAMESPACE};
use tokio::sync::Mutex;

/// One lab at a time (at most three hosts up): the machine has 2 cores.
pub static SERIAL: Mutex<()> = Mutex::const_new(());

/// A lab's directory, outside `/tmp`: the actuator's unit has
/// `PrivateTmp=yes`, and the `k3s etcd-snapshot save` it runs (the lab's
/// stand-in) must find the lab's files, so they cannot be under `/tmp`.
pub fn lab_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

pub async fn lab_of(servers: usize, agents: usize, dir: &Path) -> SystemdLab {
    lab_with(servers, agents, 0, dir).await
}

/// [`lab_of`], with `docker_agents` more agents on Docker hosts.
pub async fn lab_with(
    servers: usize,
    agents: usize,
    docker_agents: usize,
    dir: &Path,
) -> SystemdLab {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_fleet-role-lab"))
        .parent()
        .unwrap();
    let bins = Bins::beside(bin_dir).expect("the workspace's binaries are built");
    let start = clock::Clock::system().now();
    // FLEET_ROLE_LAB_KEEP=DIR: the lab in DIR, left for a look after the test
    // (each host's journal: journalctl -D DIR/hosts/HOST/var/log/journal).
    let keep = std::env::var_os("FLEET_ROLE_LAB_KEEP").map(std::path::PathBuf::from);
    let lab = SystemdLab::up(
        Options {
            dir: keep.unwrap_or_else(|| dir.join("lab")),
            servers,
            agents,
            docker_agents,
            timings: Default::default(),
            bins,
        },
        &|l| eprintln!("{l}"),
    )
    .await
    .expect("the lab comes up on real systemd (systemd-nspawn must run here, as root)");
    eprintln!(
        "{servers} servers, {agents} agents and {docker_agents} Docker agents up in {:.0}s",
        start.elapsed().as_secs_f32()
    );
    lab
}

/// The built `fleet-role` binary.
/// The previous release's actuator (`scripts/build-previous-actuator.sh`,
/// which `scripts/test.sh` runs and names in
/// `FLEET_ROLE_PREVIOUS_ACTUATOR`): a test of a fleet mid-upgrade fails
/// without it rather than skip.
#[allow(dead_code, reason = "one test binary uses it")]
pub fn previous_actuator() -> std::path::PathBuf {
    let p = std::env::var_os("FLEET_ROLE_PREVIOUS_ACTUATOR").map(std::path::PathBuf::from);
    match p {
        Some(p) if p.is_file() => p,
        _ => panic!(
            "FLEET_ROLE_PREVIOUS_ACTUATOR names no file: run scripts/build-previous-actuator.sh and set it to the path it prints (scripts/test.sh does)"
        ),
    }
}

pub fn fleet_role() -> std::path::PathBuf {
    let p = Path::new(env!("CARGO_BIN_EXE_fleet-role-lab")).with_file_name("fleet-role");
    assert!(
        p.is_file(),
        "{} is missing: build the workspace's binaries first",
        p.display()
    );
    p
}

/// What a swap must leave as it was when it is refused: the k3s units' states,
/// the role files, the datastores, fleet-role's marks on the Nodes, and the
/// regrade Lease's holder and fleet-role's annotations on it.
#[derive(Debug, PartialEq)]
pub struct Unchanged {
    pub units: Vec<(String, String, String)>,
    pub role_files: Vec<String>,
    pub datastores: Vec<bool>,
    pub marks: Vec<Vec<String>>,
    pub lease: Option<(Option<String>, Vec<String>)>,
}

pub async fn unchanged(lab: &SystemdLab, hand: &Hand) -> Unchanged {
    let mut u = Unchanged {
        units: vec![],
        role_files: vec![],
        datastores: vec![],
        marks: vec![],
        lease: None,
    };
    let prefix = Names::default().prefix;
    for h in &lab.spec.hosts {
        let m = lab.machine(&h.name).unwrap();
        for unit in ["k3s", "k3s-agent"] {
            u.units
                .push((h.name.clone(), unit.into(), m.active_state(unit).unwrap()));
        }
        let root = lab.spec.root(&h.name);
        u.role_files
            .push(std::fs::read_to_string(root.join("var/lib/rancher/k3s/fleet-role")).unwrap());
        u.datastores.push(
            root.join("var/lib/rancher/k3s/server/db/etcd/member")
                .is_dir(),
        );
        let node = hand.node(&h.name).await.unwrap();
        u.marks.push(
            node.metadata
                .annotations
                .unwrap_or_default()
                .into_keys()
                .filter(|k| k.starts_with(&prefix))
                .collect(),
        );
    }
    // The holder and fleet-role's annotations (a recorded swap is one).
    u.lease = lease(&hand.apis).await.map(|l| {
        (
            l.spec.and_then(|s| s.holder_identity),
            l.metadata
                .annotations
                .unwrap_or_default()
                .into_keys()
                .filter(|k| k.starts_with(&prefix))
                .collect(),
        )
    });
    u
}

pub async fn lease(apis: &Apis) -> Option<Lease> {
    let name = Names::default().lease_name;
    apis.any(|c| {
        let name = name.clone();
        async move {
            Api::<Lease>::namespaced(c, LEASE_NAMESPACE)
                .get_opt(&name)
                .await
        }
    })
    .await
    .unwrap()
}

/// The last `n` messages `units` logged on `host`, one a line (empty when
/// the host's journal cannot be read): what a failing test shows of the
/// host it waited on.
pub fn last_said(lab: &SystemdLab, host: &str, units: &[&str], n: usize) -> String {
    let said: Vec<String> = lab
        .machine(host)
        .ok()
        .and_then(|m| m.journal(units, std::time::Duration::from_secs(30)).ok())
        .map(|es| {
            es.iter()
                .filter_map(|e| e["MESSAGE"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    said[said.len().saturating_sub(n)..].join("\n")
}

/// Waits, up to 3 minutes, until `fleet-role ARGS --dry-run` passes every
/// gate: the change before it just ended, and the servers' reports of
/// etcd's members lag it by seconds (`etcd-views-agree`), which an
/// operator sees as a refusal saying so.
pub async fn until_gates_pass(lab: &SystemdLab, args: &[&str]) {
    let kubeconfig = lab::lab_setup::kubeconfig_for(&lab.spec, "server-1").unwrap();
    let clock = clock::Clock::system();
    let t0 = clock.now();
    loop {
        let out = tokio::process::Command::new(fleet_role())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .arg("--dry-run")
            .output()
            .await
            .unwrap();
        if out.status.success() {
            return;
        }
        assert!(
            clock.since(t0) < std::time::Duration::from_secs(180),
            "the gates of fleet-role {} stayed shut:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}

/// etcd's own members, seen through server-1: (voters, learners), by name.
pub async fn etcd_members(lab: &SystemdLab) -> (Vec<String>, Vec<String>) {
    let spec = &lab.spec;
    let ep = spec.etcd(spec.host("server-1").unwrap().ip).unwrap();
    let (_, list) = lab::etcd_gw::member_list(&ep).await.unwrap();
    let mut voters: Vec<String> = list
        .iter()
        .filter(|m| !m.is_learner)
        .map(|m| m.name.clone())
        .collect();
    let learners: Vec<String> = list
        .iter()
        .filter(|m| m.is_learner)
        .map(|m| m.name.clone())
        .collect();
    voters.sort();
    (voters, learners)
}

/// `fleet-role ARGS` with a kubeconfig naming server-1 and the lab's
/// fleet-role config, bounded.
pub async fn fleet_role_cmd(lab: &SystemdLab, args: &[&str]) -> std::process::Output {
    fleet_role_via(lab, "server-1", args).await
}

/// [`fleet_role_cmd`] through `host`'s API server (one that stays when
/// server-1 may have been swapped out), bounded.
pub async fn fleet_role_via(lab: &SystemdLab, host: &str, args: &[&str]) -> std::process::Output {
    let kubeconfig = lab::lab_setup::kubeconfig_for(&lab.spec, host).unwrap();
    let mut cmd = tokio::process::Command::new(fleet_role());
    cmd.arg("--kubeconfig").arg(&kubeconfig).args(args);
    let out = tokio::time::timeout(std::time::Duration::from_secs(300), cmd.output())
        .await
        .expect("fleet-role answered within 300 s")
        .unwrap();
    eprintln!(
        "fleet-role {}: {}\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The gate line `name` of a dry run or a refused swap
/// (`  pass NAME  reason` / `  FAIL NAME  reason`): whether it passed, and
/// the line.
pub fn gate<'a>(stdout: &'a str, name: &str) -> Option<(bool, &'a str)> {
    stdout.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        let verdict = words.next()?;
        (words.next()? == name && matches!(verdict, "pass" | "FAIL"))
            .then_some((verdict == "pass", l))
    })
}

/// The runbook block `mark` of docs/recovery.md, `fill`'s placeholders
/// replaced, run as written by the lab's administrator (kubectl and
/// `fleet-role` on `PATH`, the admin kubeconfig naming `via`'s API server);
/// each line's output.
pub async fn admin_runbook(
    lab: &SystemdLab,
    mark: &str,
    via: &str,
    fill: &[(&str, &str)],
) -> Vec<(String, std::process::Output)> {
    use secrecy::ExposeSecret;
    let kubectl = testcp::runbook::kubectl();
    let fleet_role = fleet_role();
    let kubeconfig = lab::lab_setup::kubeconfig_for(&lab.spec, via).unwrap();
    let tokens = testcp::tokens::TokenAuthFile::load(&lab.spec.tokens_file()).unwrap();
    let home = lab.spec.dir.join("runbook-home");
    std::fs::create_dir_all(&home).unwrap();
    let shell = testcp::runbook::Shell {
        home: &home,
        programs: &[("kubectl", &kubectl), ("fleet-role", &fleet_role)],
        env: &[("KUBECONFIG", &kubeconfig)],
        secret: tokens.admin_token().expose_secret(),
    };
    testcp::runbook::run(&shell, mark, fill).await
}
