//! Moving a demoted host's etcd datastore aside.
//!
//! Only `server/db/etcd` moves, as k3s's own `backupDirWithRetention` moves
//! it: `server/db/snapshots` (and its metadata) stay where k3s keeps them, so
//! the swap's snapshot survives any number of demotions. The datastore goes
//! to `server/db.demoted/etcd`; only the newest copy is kept, and the older
//! one is removed only once the newer is in its place. Every rename is made
//! durable (its directories synced), and every state a crash can leave is
//! picked up again by the next run.

use std::{fs, path::Path};

use crate::{
    HostPaths,
    error::{Result, io},
    fsutil::{rename_durably, sync_dir},
};

/// What [`move_aside`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// `server/db/etcd` is now `server/db.demoted/etcd`.
    Moved,
    /// There was no `server/db/etcd` (already moved, or never a server).
    NothingToMove,
}

/// Moves `server/db/etcd` to `server/db.demoted/etcd`, keeping only the
/// newest copy. The caller must have confirmed the server unit stopped.
///
/// The steps, each safe to crash after: rename `db/etcd` into
/// `db.demoted.new/`; rename the older `db.demoted` to `db.demoted.old`;
/// rename `db.demoted.new` to `db.demoted`; remove `db.demoted.old`.
pub fn move_aside(paths: &HostPaths, clock: &clock::Clock) -> Result<Moved> {
    let (etcd, newer, demoted, older) = (
        paths.etcd_dir(),
        paths.db_demoted_new(),
        paths.db_demoted(),
        paths.db_demoted_old(),
    );
    let server = demoted.parent().unwrap_or(Path::new("/")).to_path_buf();
    if etcd.exists() {
        if newer.exists() {
            // A crash in an earlier demotion left a newer copy; the live
            // datastore is newer still, so that one goes first.
            fs::remove_dir_all(&newer).map_err(io("removing the interrupted copy", &newer))?;
            sync_dir(&server)?;
        }
        create_private_dir(&newer)?;
        sync_dir(&server)?;
        rename_durably(&etcd, &newer.join("etcd"))?;
    }
    if newer.join("etcd").exists() {
        if demoted.exists() {
            if older.exists() {
                remove_older(paths, clock)?;
            }
            rename_durably(&demoted, &older)?;
        }
        rename_durably(&newer, &demoted)?;
        remove_older(paths, clock)?;
        return Ok(Moved::Moved);
    }
    if newer.exists() {
        // Made but never filled: the live datastore was not moved into it.
        fs::remove_dir_all(&newer).map_err(io("removing the empty copy", &newer))?;
        sync_dir(&server)?;
    }
    if demoted.join("etcd").exists() && older.exists() {
        // A crash between the newer copy's rename and the older's removal.
        remove_older(paths, clock)?;
    }
    Ok(Moved::NothingToMove)
}

/// Removes the older copy's datastore. Anything else found in it (a copy
/// made by an earlier version of fleet-role moved the whole `server/db`,
/// snapshots included) is kept under `db.demoted.kept-<unix>`, never deleted.
fn remove_older(paths: &HostPaths, clock: &clock::Clock) -> Result<()> {
    let older = paths.db_demoted_old();
    let server = older.parent().unwrap_or(Path::new("/")).to_path_buf();
    let etcd = older.join("etcd");
    if etcd.exists() {
        fs::remove_dir_all(&etcd).map_err(io("removing the older copy", &etcd))?;
    }
    if fs::remove_dir(&older).is_err() && older.exists() {
        let secs = clock.unix_secs();
        rename_durably(&older, &server.join(format!("db.demoted.kept-{secs}")))?;
    }
    sync_dir(&server)
}

fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    // k3s keeps its datastore 0700: the copy is created so from the start.
    fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(io("creating", dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn store(at: PathBuf, marker: &str) {
        fs::create_dir_all(at.join("member/wal")).unwrap();
        fs::write(at.join("name"), marker).unwrap();
    }

    fn marker(at: PathBuf) -> String {
        fs::read_to_string(at.join("name")).unwrap()
    }

    #[test]
    fn finishing_keeps_only_the_newest_datastore_copy() {
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        store(p.db_demoted().join("etcd"), "old");
        store(p.etcd_dir(), "new");
        assert_eq!(
            move_aside(&p, &clock::Clock::system()).unwrap(),
            Moved::Moved
        );
        assert!(!p.etcd_dir().exists());
        assert_eq!(marker(p.db_demoted().join("etcd")), "new");
        assert!(!p.db_demoted_new().exists());
        assert!(!p.db_demoted_old().exists());
        assert_eq!(
            move_aside(&p, &clock::Clock::system()).unwrap(),
            Moved::NothingToMove
        );
        assert_eq!(marker(p.db_demoted().join("etcd")), "new");
    }

    #[test]
    fn a_snapshot_survives_two_demotions() {
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        let snapshot = p.snapshots().join("swap-1-old-voter-1700000000");
        fs::create_dir_all(p.snapshots()).unwrap();
        fs::write(&snapshot, "etcd snapshot").unwrap();
        store(p.etcd_dir(), "first life");
        assert_eq!(
            move_aside(&p, &clock::Clock::system()).unwrap(),
            Moved::Moved
        );
        // Promoted again: k3s makes a new datastore beside the snapshots.
        store(p.etcd_dir(), "second life");
        assert_eq!(
            move_aside(&p, &clock::Clock::system()).unwrap(),
            Moved::Moved
        );
        assert_eq!(fs::read_to_string(&snapshot).unwrap(), "etcd snapshot");
        assert_eq!(marker(p.db_demoted().join("etcd")), "second life");
        assert!(!p.etcd_dir().exists());
    }

    #[test]
    fn a_move_interrupted_at_any_step_is_completed_with_the_newest_copy() {
        // After the first rename: the live store is in db.demoted.new.
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        store(p.db_demoted().join("etcd"), "old");
        store(p.db_demoted_new().join("etcd"), "new");
        assert_eq!(
            move_aside(&p, &clock::Clock::system()).unwrap(),
            Moved::Moved
        );
        assert_eq!(marker(p.db_demoted().join("etcd")), "new");
        // After the older copy was renamed away, before the newer took its place.
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        store(p.db_demoted_old().join("etcd"), "old");
        store(p.db_demoted_new().join("etcd"), "new");
        assert_eq!(
            move_aside(&p, &clock::Clock::system()).unwrap(),
            Moved::Moved
        );
        assert_eq!(marker(p.db_demoted().join("etcd")), "new");
        assert!(!p.db_demoted_old().exists());
        // After the newer took its place, before the older was removed.
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        store(p.db_demoted_old().join("etcd"), "old");
        store(p.db_demoted().join("etcd"), "new");
        assert_eq!(
            move_aside(&p, &clock::Clock::system()).unwrap(),
            Moved::NothingToMove
        );
        assert_eq!(marker(p.db_demoted().join("etcd")), "new");
        assert!(!p.db_demoted_old().exists());
    }

    #[test]
    fn an_older_copy_holding_more_than_a_datastore_is_kept_aside_not_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        // The layout of an earlier version: the whole server/db, snapshots too.
        store(p.db_demoted().join("etcd"), "old");
        fs::create_dir_all(p.db_demoted().join("snapshots")).unwrap();
        fs::write(p.db_demoted().join("snapshots/s-1"), "snap").unwrap();
        store(p.etcd_dir(), "new");
        assert_eq!(
            move_aside(&p, &clock::Clock::system()).unwrap(),
            Moved::Moved
        );
        assert_eq!(marker(p.db_demoted().join("etcd")), "new");
        let kept: Vec<_> = fs::read_dir(p.db().parent().unwrap())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|e| e.to_string_lossy().contains("db.demoted.kept-"))
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(
            fs::read_to_string(kept[0].join("snapshots/s-1")).unwrap(),
            "snap"
        );
    }

    #[test]
    fn a_datastore_is_never_removed_when_its_move_fails() {
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        store(p.db_demoted().join("etcd"), "old");
        store(p.etcd_dir(), "new");
        use std::os::unix::fs::PermissionsExt;
        let server = p.db().parent().unwrap().to_path_buf();
        fs::set_permissions(&server, fs::Permissions::from_mode(0o555)).unwrap();
        let result = move_aside(&p, &clock::Clock::system());
        fs::set_permissions(&server, fs::Permissions::from_mode(0o755)).unwrap();
        if result.is_err() {
            // Either way, both stores are still somewhere.
            assert_eq!(marker(p.etcd_dir()), "new");
            assert_eq!(marker(p.db_demoted().join("etcd")), "old");
        } else {
            // Running as root, permissions do not stop the move: it completed.
            assert_eq!(marker(p.db_demoted().join("etcd")), "new");
        }
    }
}
