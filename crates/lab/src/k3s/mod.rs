//! The k3s stand-in: `k3s server`, `k3s agent` and `k3s etcd-snapshot save`,
//! doing what shared `K3S.md` says k3s does, with real etcd members and a real
//! kube-apiserver. What it leaves out is listed in `docs/testing.md`.

pub mod agent;
pub mod config;
pub mod node;
pub mod server;

use std::path::PathBuf;

use anyhow::Context;

use crate::spec::LabSpec;

/// What a k3s process on one host knows: its root, its config, the lab.
pub struct Ctx {
    /// The host root.
    pub root: PathBuf,
    /// The merged k3s config.
    pub config: config::K3sConfig,
    /// The lab.
    pub spec: LabSpec,
}

impl Ctx {
    /// Reads the context from `FLEET_ROLE_ROOT` and `FLEET_ROLE_LAB`; the
    /// config from the host's files, `args` (the flags after the subcommand,
    /// as the unit's `ExecStart` gives them) and the `K3S_*` environment
    /// (the unit's `EnvironmentFile=`s), with k3s's precedence
    /// ([`config::K3sConfig::load`]).
    pub fn load(args: &[String]) -> anyhow::Result<Ctx> {
        let root = PathBuf::from(
            std::env::var_os("FLEET_ROLE_ROOT").context("k3s (stand-in) needs FLEET_ROLE_ROOT")?,
        );
        let lab = PathBuf::from(
            std::env::var_os("FLEET_ROLE_LAB").context("k3s (stand-in) needs FLEET_ROLE_LAB")?,
        );
        let config = config::K3sConfig::load(&root, args, |v| std::env::var(v).ok())?;
        let spec = LabSpec::load(&lab)?;
        Ok(Ctx { root, config, spec })
    }

    /// `rel` under the root.
    pub fn at(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The host's address.
    pub fn ip(&self) -> anyhow::Result<std::net::Ipv4Addr> {
        self.config
            .get("node-ip")
            .context("node-ip is not set")?
            .parse()
            .context("node-ip")
    }

    /// The host's Node name.
    pub fn node(&self) -> anyhow::Result<String> {
        self.config
            .get("node-name")
            .map(str::to_string)
            .context("node-name is not set")
    }
}

/// Tells systemd the service is ready (`READY=1` to `$NOTIFY_SOCKET`), as
/// k3s does for its `Type=notify` units. Without a notify socket (under the
/// `systemctl` stand-in) it does nothing.
pub fn notify_ready(what: &str) {
    match sd_notify::notify(&[sd_notify::NotifyState::Ready]) {
        Ok(()) => tracing::info!("k3s {what} is ready (READY=1 sent if systemd asked for it)"),
        Err(e) => tracing::warn!("k3s {what}: READY=1: {e}"),
    }
}

/// `k3s etcd-snapshot save --name NAME`: a real snapshot of the local member,
/// written as k3s names it: `<etcd-snapshot-dir>/<name>-<node>-<unix>`
/// (default `server/db/snapshots`). A learner takes none, as in k3s.
/// Compression (`etcd-snapshot-compress`) is not imitated.
pub async fn snapshot_save(ctx: &Ctx, name: &str) -> anyhow::Result<PathBuf> {
    protocol::SwapId::parse(name)?;
    let ip = ctx.ip()?;
    let url = LabSpec::etcd_url(ip);
    let (me, members) = crate::etcd_gw::member_list(&url)
        .await
        .context("etcd-snapshot error: cannot reach the local etcd (is k3s running?)")?;
    if members.iter().any(|m| m.id == me && m.is_learner) {
        anyhow::bail!("etcd-snapshot error: this member is a learner; learners take no snapshots");
    }
    let data = crate::etcd_gw::snapshot(&url).await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    // k3s (pkg/etcd/snapshot.go) writes where `etcd-snapshot-dir` says, as
    // the server process has it (`save` asks the server's supervisor):
    // its config files, then its unit's command line.
    let server =
        config::K3sConfig::load(&ctx.root, &config::server_unit_args(&ctx.root), |_| None)?;
    let dir = match server.get("etcd-snapshot-dir") {
        Some(d) => ctx.at(d.trim_start_matches('/')),
        None => ctx.at("var/lib/rancher/k3s/server/db/snapshots"),
    };
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("{name}-{}-{now}", ctx.node()?));
    std::fs::write(&file, data)?;
    Ok(file)
}
