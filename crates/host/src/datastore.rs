//! Moving a demoted host's datastore aside. A datastore is never deleted:
//! only the older `db.demoted` copy, and only after the newer one is safely
//! renamed next to it. Every state a crash can leave is picked up again.

use std::fs;

use crate::{
    HostPaths,
    error::{Result, io},
};

/// What [`move_aside`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// `server/db` is now `server/db.demoted`.
    Moved,
    /// There was no `server/db` (already moved, or never a server).
    NothingToMove,
}

/// Moves `server/db` to `server/db.demoted`, keeping only the newest copy.
///
/// The steps, each safe to crash after: rename `db` to `db.demoted.new`;
/// remove the older `db.demoted`; rename `db.demoted.new` to `db.demoted`.
pub fn move_aside(paths: &HostPaths) -> Result<Moved> {
    let (db, newer, demoted) = (paths.db(), paths.db_demoted_new(), paths.db_demoted());
    let had_db = db.exists();
    if had_db {
        if newer.exists() {
            // A crash between the two renames of an earlier demotion left a
            // newer copy; the live db is newer still, so that one goes first.
            fs::remove_dir_all(&newer).map_err(io("removing the interrupted copy", &newer))?;
        }
        fs::rename(&db, &newer).map_err(io("moving the datastore aside to", &newer))?;
    }
    if newer.exists() {
        if demoted.exists() {
            fs::remove_dir_all(&demoted).map_err(io("removing the older copy", &demoted))?;
        }
        fs::rename(&newer, &demoted).map_err(io("moving the datastore into", &demoted))?;
        return Ok(Moved::Moved);
    }
    Ok(Moved::NothingToMove)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(paths: &HostPaths, at: std::path::PathBuf, marker: &str) {
        let _ = paths;
        fs::create_dir_all(at.join("etcd/member/wal")).unwrap();
        fs::write(at.join("etcd/name"), marker).unwrap();
    }

    fn marker(at: std::path::PathBuf) -> String {
        fs::read_to_string(at.join("etcd/name")).unwrap()
    }

    #[test]
    fn finishing_keeps_only_the_newest_datastore_copy() {
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        store(&p, p.db_demoted(), "old");
        store(&p, p.db(), "new");
        assert_eq!(move_aside(&p).unwrap(), Moved::Moved);
        assert!(!p.db().exists());
        assert_eq!(marker(p.db_demoted()), "new");
        assert!(!p.db_demoted_new().exists());
        assert_eq!(move_aside(&p).unwrap(), Moved::NothingToMove);
        assert_eq!(marker(p.db_demoted()), "new");
    }

    #[test]
    fn a_move_interrupted_between_its_renames_is_completed() {
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        store(&p, p.db_demoted(), "old");
        store(&p, p.db_demoted_new(), "new");
        assert_eq!(move_aside(&p).unwrap(), Moved::Moved);
        assert_eq!(marker(p.db_demoted()), "new");
    }

    #[test]
    fn a_datastore_is_never_removed_when_its_move_fails() {
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        store(&p, p.db_demoted(), "old");
        store(&p, p.db(), "new");
        // A file where the new copy must go makes the first rename fail.
        fs::create_dir_all(p.db_demoted_new().join("x")).unwrap();
        fs::write(p.db_demoted_new().join("x/blocker"), "").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let server = p.db().parent().unwrap().to_path_buf();
        fs::set_permissions(&server, fs::Permissions::from_mode(0o555)).unwrap();
        let result = move_aside(&p);
        fs::set_permissions(&server, fs::Permissions::from_mode(0o755)).unwrap();
        if result.is_err() {
            // Either way, both stores are still somewhere.
            assert_eq!(marker(p.db()), "new");
            assert_eq!(marker(p.db_demoted()), "old");
        } else {
            // Running as root, permissions do not stop the move: it completed.
            assert_eq!(marker(p.db_demoted()), "new");
        }
    }
}
