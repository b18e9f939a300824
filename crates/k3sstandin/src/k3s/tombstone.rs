//! The tombstone: what a removed member leaves (`server/db/etcd/tombstone`)
//! and what k3s does when it starts over one.
//!
//! k3s (`pkg/etcd/etcd.go`, `Register`): "tombstone file has been detected,
//! removing data dir to rejoin the cluster"; `backupDirWithRetention` renames
//! `db/etcd` to `db/etcd-backup-<unix>`, after removing every earlier
//! `etcd-backup*` directory but the 5 newest by modification time
//! (`maxBackupRetention`; so 6 are left once the new one is added), and the
//! member name goes with it. Since k3s-io/k3s#13624 (Feb 2026, back-ported
//! to 1.32–1.35) a server with no `--server` refuses to start over a
//! tombstone rather than found a new cluster beside the old one (a split
//! brain): "tombstone file has been detected but --server is empty…", the
//! datastore left where it is, and the unit restarts (`Restart=always`) until
//! an operator acts.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, bail};

/// k3s's `maxBackupRetention`: earlier backups kept before a new one is made.
pub const MAX_BACKUP_RETENTION: usize = 5;

/// k3s's refusal (since k3s-io/k3s#13624) to start over a tombstone with no
/// server to rejoin through.
pub const NO_SERVER: &str = "tombstone file has been detected but --server is empty: backup and delete ${datadir}/server/db to create a new cluster, or set --server to rejoin";

/// Writes the empty tombstone, 0600, as k3s does on `ErrMemberRemoved`.
pub fn write(tombstone: &Path) -> anyhow::Result<()> {
    std::fs::write(tombstone, "")?;
    std::fs::set_permissions(tombstone, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// What a start does with `etcd_dir` (`server/db/etcd`): nothing without a
/// tombstone; with one and a `server` to rejoin through, the datastore backed
/// up ([`backup_with_retention`]) and the backup's path returned; with one
/// and no server, k3s's refusal, nothing moved.
///
/// # Errors
/// The refusal ([`NO_SERVER`]), or the backup's I/O error.
pub fn on_start(
    etcd_dir: &Path,
    server: Option<&str>,
    now_unix: i64,
) -> anyhow::Result<Option<PathBuf>> {
    if !etcd_dir.join("tombstone").exists() {
        return Ok(None);
    }
    if server.is_none_or(str::is_empty) {
        bail!(NO_SERVER);
    }
    tracing::info!("tombstone file has been detected, removing data dir to rejoin the cluster");
    backup_with_retention(etcd_dir, MAX_BACKUP_RETENTION, now_unix)
        .context("backing up the removed member's datastore")
}

/// k3s's `backupDirWithRetention`: `dir` renamed to `<dir>-backup-<unix>`,
/// after the earlier `<dir>-backup*` directories beyond the `keep` newest
/// (by modification time) are removed. `None` when `dir` does not exist.
///
/// # Errors
/// Reading the parent directory, removing an old backup, or the rename.
pub fn backup_with_retention(
    dir: &Path,
    keep: usize,
    now_unix: i64,
) -> anyhow::Result<Option<PathBuf>> {
    if !dir.exists() {
        return Ok(None);
    }
    let parent = dir.parent().context("the datastore has no parent")?;
    let base = dir
        .file_name()
        .context("the datastore has no name")?
        .to_string_lossy()
        .into_owned();
    let backup = parent.join(format!("{base}-backup-{now_unix}"));
    let mut backups = vec![];
    for entry in std::fs::read_dir(parent)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_dir()
            && entry
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("{base}-backup"))
        {
            backups.push((meta.modified()?, entry.path()));
        }
    }
    // Newest first, as k3s sorts them.
    backups.sort_by_key(|b| std::cmp::Reverse(b.0));
    for (_, old) in backups.iter().skip(keep) {
        std::fs::remove_dir_all(old).with_context(|| old.display().to_string())?;
    }
    std::fs::rename(dir, &backup)?;
    tracing::info!("the datastore is backed up to {}", backup.display());
    Ok(Some(backup))
}

#[cfg(test)]
mod tests;
