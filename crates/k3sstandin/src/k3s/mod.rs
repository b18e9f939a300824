//! The k3s stand-in: `k3s server` (and its `--cluster-reset`), `k3s agent`
//! and `k3s etcd-snapshot save|prune|ls`,
//! doing what shared `K3S.md` says k3s does, with real etcd members and a real
//! kube-apiserver. What it leaves out is listed in `docs/testing.md`.

pub mod agent;
mod bootstrap;
pub mod cli;
pub mod config;
pub mod deploy;
pub mod election;
pub mod learners;
mod member;
pub mod node;
pub mod pods;
mod removal;
pub mod reset;
mod retry;
pub mod server;
pub mod supervisor;
pub mod token;
pub mod tombstone;

use std::path::PathBuf;

use anyhow::Context;

use crate::spec::LabSpec;

/// The release `k3s --version` names: one whose source the stand-in was
/// checked against (docs/lab.md names the files).
pub const VERSION: &str = "v1.34.3+k3s1";

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

    /// The host's etcd as k3s's own clients reach it: TLS with the
    /// host's `server/tls/etcd/` client certificate, at `url`.
    pub fn etcd(&self, url: &str) -> anyhow::Result<crate::etcd_gw::Endpoint> {
        let tls = crate::etcd_tls::client_config(&self.at(crate::lab_pki::HOST_ETCD_TLS))?;
        Ok(crate::etcd_gw::Endpoint::tls(url, tls))
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
/// (default `server/db/snapshots`), `.zip` with `etcd-snapshot-compress`.
/// A learner takes none, as in k3s.
pub async fn snapshot_save(ctx: &Ctx, name: &str) -> anyhow::Result<PathBuf> {
    let clock = clock::Clock::system();
    protocol::SwapId::parse(name)?;
    let ip = ctx.ip()?;
    let url = ctx.etcd(&LabSpec::etcd_url(ip))?;
    let (me, members) = crate::etcd_gw::member_list(&url)
        .await
        .context("etcd-snapshot error: cannot reach the local etcd (is k3s running?)")?;
    if members.iter().any(|m| m.id == me && m.is_learner) {
        anyhow::bail!("etcd-snapshot error: this member is a learner; learners take no snapshots");
    }
    let hold = ctx.spec.hold_snapshots_file();
    let held = clock.now();
    while hold.exists() && clock.since(held) < crate::spec::SNAPSHOT_HOLD_BOUND {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let data = crate::etcd_gw::snapshot(&url).await?;
    write_snapshot(ctx, name, &data, clock.unix_secs())
}

/// The server process's config and its `etcd-snapshot-dir` (default
/// `server/db/snapshots`): `save` and `prune` ask the server's supervisor,
/// so its config files and its unit's command line say where.
fn snapshot_dir(ctx: &Ctx) -> anyhow::Result<(config::K3sConfig, PathBuf)> {
    let server =
        config::K3sConfig::load(&ctx.root, &config::server_unit_args(&ctx.root), |_| None)?;
    let dir = match server.get("etcd-snapshot-dir") {
        Some(d) => ctx.at(d.trim_start_matches('/')),
        None => ctx.at("var/lib/rancher/k3s/server/db/snapshots"),
    };
    Ok((server, dir))
}

/// `k3s etcd-snapshot prune --name PREFIX --snapshot-retention KEEP`: the
/// local snapshots of that prefix past the newest `keep` are removed, by
/// k3s's rule (`snapshotRetention`, `pkg/etcd/snapshot.go`:
/// [`crate::snapshots::to_prune`]). Like `save` it asks the running
/// server, so with no local etcd answering it fails. Returns the removed
/// files.
pub async fn snapshot_prune(ctx: &Ctx, prefix: &str, keep: usize) -> anyhow::Result<Vec<PathBuf>> {
    local_etcd_answers(ctx).await?;
    let (_, dir) = snapshot_dir(ctx)?;
    let names: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(es) => es
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    let mut removed = Vec::new();
    for name in crate::snapshots::to_prune(&names, prefix, keep) {
        let file = dir.join(name);
        std::fs::remove_file(&file)?;
        removed.push(file);
    }
    Ok(removed)
}

/// `k3s etcd-snapshot ls`: the local snapshots, one a line under k3s's
/// header (`Name Location Size Created`), by name. Like `save` it asks
/// the running server, so with no local etcd answering it fails.
pub async fn snapshot_ls(ctx: &Ctx) -> anyhow::Result<Vec<String>> {
    local_etcd_answers(ctx).await?;
    let (_, dir) = snapshot_dir(ctx)?;
    let mut rows: Vec<(String, u64)> = match std::fs::read_dir(&dir) {
        Ok(es) => es
            .filter_map(|e| e.ok())
            .filter(|e| !e.file_name().to_string_lossy().ends_with(".part"))
            .map(|e| {
                let size = e.metadata().map(|m| m.len()).unwrap_or(0);
                (e.file_name().to_string_lossy().into_owned(), size)
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    rows.sort();
    // The folder as the host sees it.
    let at = format!("/{}", dir.strip_prefix(&ctx.root).unwrap_or(&dir).display());
    let mut out = vec!["Name Location Size Created".to_string()];
    for (name, size) in rows {
        out.push(format!("{name} file://{at}/{name} {size}"));
    }
    Ok(out)
}

/// The CLI's `ls` and `prune` ask the running server: an error when the
/// local etcd does not answer.
async fn local_etcd_answers(ctx: &Ctx) -> anyhow::Result<()> {
    let url = ctx.etcd(&LabSpec::etcd_url(ctx.ip()?))?;
    crate::etcd_gw::member_list(&url)
        .await
        .context("etcd-snapshot error: cannot reach the local etcd (is k3s running?)")?;
    Ok(())
}

/// Writes a snapshot's `data` where and as k3s does (`pkg/etcd/snapshot.go`):
/// in `etcd-snapshot-dir` as the server process has it (`save` asks the
/// server's supervisor: its config files, then its unit's command line),
/// named `<name>-<node>-<unix>`; with `etcd-snapshot-compress`, only
/// `<that>.zip`, one entry of that name (`compressSnapshot`; the
/// uncompressed file is removed). As etcd's client saves it
/// (`SaveWithVersion`, `client/v3/snapshot/v3_snapshot.go`): into
/// `<file>.part`, synced, then renamed; a failed write (a full disk)
/// removes the part and leaves nothing.
pub fn write_snapshot(ctx: &Ctx, name: &str, data: &[u8], now: i64) -> anyhow::Result<PathBuf> {
    let (server, dir) = snapshot_dir(ctx)?;
    std::fs::create_dir_all(&dir)?;
    let base = format!("{name}-{}-{now}", ctx.node()?);
    let (file, contents) = if server.flag("etcd-snapshot-compress") {
        (
            dir.join(format!("{base}.zip")),
            crate::zip::one_entry(&base, data, now)?,
        )
    } else {
        (dir.join(&base), data.to_vec())
    };
    let part = PathBuf::from(format!("{}.part", file.display()));
    let written = (|| {
        use std::io::Write;
        let mut f = std::fs::File::create(&part)?;
        f.write_all(&contents)?;
        f.sync_all()?;
        std::fs::rename(&part, &file)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&part);
        return Err(anyhow::Error::new(e).context(format!(
            "etcd-snapshot error: could not save {}",
            file.display()
        )));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx_with(root: &std::path::Path, config: &str) -> Ctx {
        let d = root.join("etc/rancher/k3s");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("config.yaml"), config).unwrap();
        Ctx {
            root: root.to_path_buf(),
            config: config::K3sConfig::read(root).unwrap(),
            spec: LabSpec {
                dir: root.to_path_buf(),
                hosts: vec![],
                kube_apiserver: "kube-apiserver".into(),
                etcd: "etcd".into(),
                etcdutl: None,
                actuator: "actuator".into(),
                standin_dir: root.to_path_buf(),
                lab_bin: "lab".into(),
                timings: Default::default(),
            },
        }
    }

    #[test]
    fn the_actuator_finds_a_compressed_snapshot_the_stand_in_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_with(
            dir.path(),
            "node-name: n1\netcd-snapshot-dir: /srv/snaps\netcd-snapshot-compress: true\n",
        );
        let name = protocol::SwapId::parse("swap-7").unwrap();
        let file = write_snapshot(&ctx, name.as_str(), b"etcd data", 1_796_136_054).unwrap();
        assert_eq!(
            file,
            dir.path().join("srv/snaps/swap-7-n1-1796136054.zip"),
            "named as k3s names it"
        );
        let paths = host::HostPaths::new(dir.path());
        let config = host::k3s::SnapshotConfig::read(&paths).unwrap();
        assert_eq!(
            host::k3s::find_snapshot(&config, "n1", &name),
            Some(file.clone())
        );
        // Only the archive is left, and it holds the snapshot under its name.
        assert_eq!(
            std::fs::read_dir(file.parent().unwrap()).unwrap().count(),
            1
        );
        let out = std::process::Command::new("unzip")
            .arg("-p")
            .arg(&file)
            .arg("swap-7-n1-1796136054")
            .output()
            .expect("unzip runs");
        assert_eq!(out.stdout, b"etcd data");
    }

    #[test]
    fn without_compression_the_snapshot_is_the_plain_file() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_with(dir.path(), "node-name: n1\n");
        let file = write_snapshot(&ctx, "swap-7", b"etcd data", 100).unwrap();
        assert_eq!(
            file,
            dir.path()
                .join("var/lib/rancher/k3s/server/db/snapshots/swap-7-n1-100")
        );
        assert_eq!(std::fs::read(&file).unwrap(), b"etcd data");
    }

    #[test]
    fn a_snapshot_that_cannot_be_saved_leaves_no_part_behind() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_with(dir.path(), "node-name: n1\n");
        let snapshots = dir.path().join("var/lib/rancher/k3s/server/db/snapshots");
        // Its name taken by a directory: the rename fails, as a write to a
        // full disk does, after the part was written.
        std::fs::create_dir_all(snapshots.join("swap-7-n1-100/x")).unwrap();
        let e = write_snapshot(&ctx, "swap-7", b"etcd data", 100).unwrap_err();
        assert!(format!("{e:#}").contains("etcd-snapshot error"), "{e:#}");
        let left: Vec<_> = std::fs::read_dir(&snapshots)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["swap-7-n1-100"]);
    }
}
