//! What the benchmarks share: their lines on stderr, the kubeconfig a
//! process they start runs with, and a process's memory from `/proc`.
#![allow(dead_code, reason = "each benchmark uses a part")]

use std::{
    fs,
    io::Write,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use anyhow::Context;
use clock::Clock;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::{api::core::v1::Node, jiff::Timestamp};
use kube::{Api, Client, api::PostParams};
use protocol::{
    Names,
    names::{
        K3S_CONTROL_PLANE_LABEL, K3S_ETCD_IS_VOTER, K3S_ETCD_NODE_ADDRESS, K3S_ETCD_NODE_NAME,
        K3S_ETCD_ROLE_LABEL, K3S_MASTER_LABEL,
    },
};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use testcp::ControlPlane;

/// Runs a benchmark's body on a runtime of two workers (the machine's),
/// with the machine's clock read here at the edge and passed down; an
/// error is said as `name: error` and exits 2.
pub fn main<F, Fut>(name: &str, body: F) -> std::process::ExitCode
where
    F: FnOnce(Clock) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match rt.block_on(body(Clock::system())) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

/// One line of progress on stderr, with the wall time.
pub fn say(clock: &Clock, line: &str) {
    let now = Timestamp::try_from(clock.wall()).unwrap_or(Timestamp::UNIX_EPOCH);
    eprintln!("[{}] {line}", now.strftime("%H:%M:%S"));
}

/// Starts `command` with its output to `log` (appended to nothing: a new
/// file) and `FLEET_ROLE_LOG` at `level`; killed when its guard is dropped.
pub fn spawn_logged(
    mut command: tokio::process::Command,
    log: &Path,
    level: &str,
) -> anyhow::Result<tokio::process::Child> {
    let out = fs::File::create(log)?;
    Ok(command
        .env("FLEET_ROLE_LOG", level)
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()?)
}

/// Applies `deploy/rbac/` (the actuators', then the controller's) as the
/// installer does.
pub async fn apply_rbac(plane: &ControlPlane) -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for f in ["deploy/rbac/actuator.yaml", "deploy/rbac/controller.yaml"] {
        plane
            .apply_yaml_file(&root.join(f))
            .await
            .with_context(|| format!("applying {f}"))?;
    }
    Ok(())
}

/// Writes `text` to `path`, mode 0600 (a token or a kubeconfig naming one).
pub fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// A kubeconfig for `user` with `token` (kept in a file beside it) on the
/// plane's first API server.
pub fn write_kubeconfig(
    plane: &ControlPlane,
    dir: &Path,
    user: &str,
    token: &SecretString,
) -> anyhow::Result<PathBuf> {
    let token_file = dir.join(format!("{user}.token"));
    write_private(&token_file, token.expose_secret())?;
    let kubeconfig = dir.join(format!("{user}.kubeconfig"));
    write_private(
        &kubeconfig,
        &format!(
            "apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster:
    server: {url}
    certificate-authority: {ca}
users:
- name: {user}
  user:
    tokenFile: {token}
contexts:
- name: bench
  context:
    cluster: bench
    user: {user}
current-context: bench
",
            url = plane.urls()[0],
            ca = plane.ca_file().display(),
            token = token_file.display()
        ),
    )?;
    Ok(kubeconfig)
}

/// A `/proc/PID/status` field in KiB.
pub fn proc_kib(pid: u32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

// === The fleet ===

/// Nodes created at once.
pub const BATCH: usize = 32;
/// The voters' Nodes.
pub const VOTERS: [&str; 3] = ["voter-1", "voter-2", "voter-3"];
/// The eligible standbys' Nodes.
pub const STANDBYS: [&str; 2] = ["standby-1", "standby-2"];

/// Now, as an API time.
pub fn now_json(clock: &Clock) -> Value {
    json!(kubeview::time::at_second(clock.unix_secs()))
}

/// Now, precisely, by `clock`.
pub fn stamp(clock: &Clock) -> Timestamp {
    Timestamp::try_from(clock.wall()).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Node `name` as k3s and its kubelet leave it: a voter with k3s's etcd
/// labels, annotations and `EtcdIsVoter=True`, an eligible standby, or a
/// plain agent; all Ready.
pub fn node(names: &Names, name: &str, index: usize, clock: &Clock) -> anyhow::Result<Node> {
    let voter = VOTERS.contains(&name);
    let eligible = voter || STANDBYS.contains(&name);
    let address = format!(
        "10.{}.{}.{}",
        index / 65536 % 256,
        index / 256 % 256,
        index % 256
    );
    let mut labels = serde_json::Map::new();
    let mut annotations = serde_json::Map::new();
    if eligible {
        labels.insert(names.eligible(), json!("true"));
    }
    let mut conditions = vec![json!({
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "lastTransitionTime": now_json(clock), "lastHeartbeatTime": now_json(clock),
    })];
    if voter {
        for l in [
            K3S_ETCD_ROLE_LABEL,
            K3S_CONTROL_PLANE_LABEL,
            K3S_MASTER_LABEL,
        ] {
            labels.insert(l.into(), json!("true"));
        }
        annotations.insert(
            K3S_ETCD_NODE_NAME.into(),
            json!(format!("{name}-{:08x}", 0x1000_0000 + index)),
        );
        annotations.insert(K3S_ETCD_NODE_ADDRESS.into(), json!(address));
        conditions.push(json!({
            "type": K3S_ETCD_IS_VOTER, "status": "True", "reason": "MemberIsVoter",
            "lastTransitionTime": now_json(clock),
        }));
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "status": {
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": address}],
        },
    }))?)
}

/// The voters, the standbys, then `n - 5` agents.
pub fn node_names(n: usize) -> Vec<String> {
    let agents = n - VOTERS.len() - STANDBYS.len();
    VOTERS
        .iter()
        .chain(STANDBYS.iter())
        .map(|s| (*s).to_string())
        .chain((1..=agents).map(|i| format!("agent-{i:05}")))
        .collect()
}

/// Creates the Nodes `all` ([`node`]), `BATCH` at a time.
pub async fn create_nodes(
    admin: &Client,
    names: &Names,
    all: &[String],
    clock: &Clock,
) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(admin.clone());
    futures::stream::iter(all.iter().enumerate())
        .map(|(i, name)| {
            let nodes = nodes.clone();
            async move {
                let node = node(names, name, i + 1, clock)?;
                nodes
                    .create(&PostParams::default(), &node)
                    .await
                    .with_context(|| format!("creating Node {name}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(BATCH)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}
