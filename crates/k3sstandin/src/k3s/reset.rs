//! `k3s server --cluster-reset [--cluster-reset-restore-path=FILE]`: the
//! member made the only one of a new cluster, from a snapshot when one is
//! named, then the process exits (k3s: `pkg/cluster/managed.go`, `start`;
//! `pkg/etcd/etcd.go`, `Reset` and `Restore`).
//!
//! As k3s does it:
//! - a reset is refused while the flag file of an earlier one stands
//!   (`server/db/reset-flag`); a normal start removes that file;
//! - a restore path that does not exist, or is a directory, is refused
//!   before anything moves;
//! - the datastore is moved aside whole (`server/db/etcd-old-UNIX`), and
//!   the snapshot restored in its place by etcd's own restore (etcdutl,
//!   the package k3s links), under the member's current name;
//! - the member takes a new name (`NODE-8HEX`), the flag file is written,
//!   and etcd starts with `--force-new-cluster`;
//! - once it serves as the one voter, named as it should be, the process
//!   says so and exits 0.
//!
//! Not imitated: k3s's compressed (`.zip`) and S3 snapshots, refused here
//! with a message saying so.

use std::{
    net::Ipv4Addr,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, bail};
use testcp::{ClusterState, Etcd, Probe, binaries::ETCDUTL_ENV};
use tracing::info;

use super::{Ctx, member, retry::retried};
use crate::{etcd_gw, spec::LabSpec};

/// The longest a restore (etcdutl) or the reset member's start may take.
const BOUND: Duration = Duration::from_secs(60);

/// The file a reset leaves (k3s's `ResetFile`: `server/db/reset-flag`).
pub fn flag_file(db: &Path) -> PathBuf {
    db.join("reset-flag")
}

/// Where k3s moves the datastore before a restore: `etcd-old-UNIX` beside it.
pub fn moved_aside(db: &Path, unix: i64) -> PathBuf {
    db.join(format!("etcd-old-{unix}"))
}

/// Why a restore path is refused before anything moves (k3s's messages),
/// or `None`.
pub fn refused_restore_path(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Err(_) => Some(format!(
            "etcd: snapshot path does not exist: {}",
            path.display()
        )),
        Ok(m) if m.is_dir() => Some(format!(
            "etcd: snapshot path must be a file, not a directory: {}",
            path.display()
        )),
        Ok(_) if path.extension().is_some_and(|e| e == "zip") => Some(format!(
            "{}: a compressed snapshot, which the lab's k3s stand-in does not restore \
             (k3s unpacks it first)",
            path.display()
        )),
        Ok(_) => None,
    }
}

/// Runs the reset; `Ok` once the member serves alone (the process then
/// exits 0, as k3s's does).
pub async fn run(
    ctx: &Ctx,
    ip: Ipv4Addr,
    db: &Path,
    own: &etcd_gw::Endpoint,
) -> anyhow::Result<()> {
    let flag = flag_file(db);
    if flag.exists() {
        bail!(
            "cluster-reset was successfully performed, please remove the cluster-reset flag and \
             start k3s normally, if you need to perform another cluster reset, you must first \
             manually delete the {} file",
            flag.display()
        );
    }
    let node = ctx.node()?;
    let etcd_dir = db.join("etcd");
    let peer_url = LabSpec::etcd_peer_url(ip);
    if let Some(path) = ctx.config.get("cluster-reset-restore-path") {
        let snapshot = Path::new(path);
        if let Some(why) = refused_restore_path(snapshot) {
            bail!("{why}");
        }
        // The name the member has now (k3s reads it before the restore).
        let current = std::fs::read_to_string(etcd_dir.join("name"))
            .map(|n| n.trim().to_string())
            .unwrap_or_else(|_| member::new_name(&node));
        let aside = moved_aside(db, clock::Clock::system().unix_secs());
        if etcd_dir.exists() {
            std::fs::rename(&etcd_dir, &aside)
                .with_context(|| format!("moving {} aside", etcd_dir.display()))?;
            info!("Pre-restore etcd database moved to {}", aside.display());
        }
        restore(snapshot, &etcd_dir, &current, &peer_url).await?;
        info!(
            "restored {} into {}",
            snapshot.display(),
            etcd_dir.display()
        );
    }
    // k3s's `setName(true)`: a new member name, written before etcd starts.
    let name = member::new_name(&node);
    std::fs::create_dir_all(&etcd_dir)?;
    std::fs::write(etcd_dir.join("name"), &name)?;
    std::fs::write(&flag, "").with_context(|| format!("writing {}", flag.display()))?;
    let mut opts = member::etcd_options(
        ctx,
        ip,
        &etcd_dir,
        &name,
        format!("{name}={peer_url}"),
        ClusterState::New,
    )?;
    opts.extra_args.push("--force-new-cluster".into());
    let mut etcd = Etcd::spawn(opts).context("starting etcd for the reset")?;
    etcd.wait_healthy(Probe::Linearizable, BOUND)
        .await
        .context("etcd did not serve as a cluster of one after the reset")?;
    // k3s's `Test`: this member votes and is the only one, by its new name.
    let (_, members) = retried(
        "the reset cluster's members",
        Duration::from_secs(30),
        Duration::from_millis(500),
        || etcd_gw::member_list(own),
    )
    .await?;
    let alone = members.len() == 1 && members[0].name == name && !members[0].is_learner;
    etcd.kill();
    if !alone {
        bail!("the reset left other members: {members:?}");
    }
    info!(
        "Managed etcd cluster membership has been reset, restart without --cluster-reset flag \
         now. Backup and delete ${{datadir}}/server/db on each peer etcd server and rejoin the \
         nodes"
    );
    Ok(())
}

/// etcd's own restore of `snapshot` into `data_dir` (which must not exist)
/// as the one member `name` at `peer_url`, bounded.
async fn restore(
    snapshot: &Path,
    data_dir: &Path,
    name: &str,
    peer_url: &str,
) -> anyhow::Result<()> {
    let etcdutl = std::env::var_os(ETCDUTL_ENV).map(PathBuf::from).with_context(|| {
        format!("{ETCDUTL_ENV} is not set: the lab restores through etcdutl (scripts/build-etcdutl.sh)")
    })?;
    let run = tokio::process::Command::new(&etcdutl)
        .arg("snapshot")
        .arg("restore")
        .arg(snapshot)
        .arg("--name")
        .arg(name)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--wal-dir")
        .arg(data_dir.join("member/wal"))
        .arg("--initial-cluster")
        .arg(format!("{name}={peer_url}"))
        .arg("--initial-advertise-peer-urls")
        .arg(peer_url)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(BOUND, run)
        .await
        .with_context(|| {
            format!(
                "etcdutl ran past {}s restoring {}",
                BOUND.as_secs(),
                snapshot.display()
            )
        })?
        .with_context(|| format!("running {}", etcdutl.display()))?;
    if !out.status.success() {
        bail!(
            "restoring {} failed ({}): {}",
            snapshot.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_path_that_is_missing_a_directory_or_compressed_is_refused_in_k3s_words() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nothing");
        assert_eq!(
            refused_restore_path(&missing).unwrap(),
            format!("etcd: snapshot path does not exist: {}", missing.display())
        );
        assert!(
            refused_restore_path(dir.path())
                .unwrap()
                .starts_with("etcd: snapshot path must be a file, not a directory")
        );
        let zip = dir.path().join("swap-1-n1-5.zip");
        std::fs::write(&zip, "PK").unwrap();
        assert!(refused_restore_path(&zip).unwrap().contains("compressed"));
        let file = dir.path().join("swap-1-n1-5");
        std::fs::write(&file, "bolt").unwrap();
        assert_eq!(refused_restore_path(&file), None);
    }

    #[test]
    fn the_datastore_goes_aside_beside_itself_named_for_the_time_and_the_flag_beside_it() {
        let db = Path::new("/var/lib/rancher/k3s/server/db");
        assert_eq!(
            moved_aside(db, 1_700_000_000),
            Path::new("/var/lib/rancher/k3s/server/db/etcd-old-1700000000")
        );
        assert_eq!(flag_file(db), db.join("reset-flag"));
    }
}
