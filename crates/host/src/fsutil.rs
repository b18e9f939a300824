//! Small file operations that leave no half-written file behind.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
};

use crate::error::{Result, io};

/// Writes `contents` to `path` atomically: a temporary file in the same
/// directory, flushed to disk, then renamed over the target. A crash leaves
/// the old file or the new one, never a torn one (k3s and systemd read these).
///
/// The file is created with its final `mode` (never widened by a chmod
/// after, so no reader sees it with a looser mode), and the directory is
/// synced after the rename, so the new name survives a power cut.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().unwrap_or(Path::new("/"));
    fs::create_dir_all(dir).map_err(io("creating", dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    // A temporary file left by a crashed writer with this pid is stale.
    let _ = fs::remove_file(&tmp);
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
            .map_err(io("creating", &tmp))?;
        f.write_all(contents).map_err(io("writing", &tmp))?;
        f.sync_all().map_err(io("syncing", &tmp))?;
        fs::rename(&tmp, path).map_err(io("renaming into place", path))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Syncs a directory, so that a rename or removal in it is on disk.
pub fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("syncing the directory", dir))
}

/// Renames `from` to `to` and syncs the directories of both.
pub fn rename_durably(from: &Path, to: &Path) -> Result<()> {
    fs::rename(from, to).map_err(io("renaming to", to))?;
    let root = Path::new("/");
    let (a, b) = (from.parent().unwrap_or(root), to.parent().unwrap_or(root));
    sync_dir(b)?;
    if a != b {
        sync_dir(a)?;
    }
    Ok(())
}

/// Whether `path` holds exactly `contents`.
pub fn holds(path: &Path, contents: &[u8]) -> bool {
    fs::read(path).is_ok_and(|c| c == contents)
}

/// Removes a file if it is there, then syncs its directory, so that the
/// removal survives a power cut: a later step builds on the file being gone
/// (an agent started with the etcd-only drop-in back in `config.yaml.d`
/// fails on `disable-apiserver`), and an unsynced unlink can come back.
///
/// The directory is synced even when the file is already gone: an earlier
/// run may have removed it and crashed before its sync. Returns whether the
/// file was there. Every removal of a drop-in goes through here.
pub fn remove_durably(path: &Path) -> Result<bool> {
    remove_then_sync(path, sync_dir)
}

/// [`remove_durably`] with the directory sync given, so that a test can
/// observe it (a power cut cannot be had in a test).
fn remove_then_sync(path: &Path, sync: impl FnOnce(&Path) -> Result<()>) -> Result<bool> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let removed = match fs::remove_file(path) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(io("removing", path)(e)),
    };
    if !removed && !dir.exists() {
        // No directory, no entry to make durable.
        return Ok(false);
    }
    sync(dir)?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_leaves_only_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/file.conf");
        write_atomic(&p, b"one", 0o644).unwrap();
        write_atomic(&p, b"two", 0o600).unwrap();
        assert!(holds(&p, b"two"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let names: Vec<_> = fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("file.conf")]);
        assert!(remove_durably(&p).unwrap());
        assert!(!remove_durably(&p).unwrap());
    }

    #[test]
    fn a_removal_is_followed_by_a_sync_of_its_directory_once_the_file_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("conf.d/90-dropin.yaml");
        write_atomic(&p, b"x: 1\n", 0o644).unwrap();
        let synced = std::cell::RefCell::new(vec![]);
        let record = |d: &Path| {
            // At the sync, the name is already gone from the directory.
            synced.borrow_mut().push((d.to_path_buf(), p.exists()));
            Ok(())
        };
        assert!(remove_then_sync(&p, record).unwrap());
        assert_eq!(*synced.borrow(), vec![(dir.path().join("conf.d"), false)]);
        // Gone already (an earlier run removed it, maybe without its sync):
        // the directory is synced again.
        assert!(!remove_then_sync(&p, record).unwrap());
        assert_eq!(synced.borrow().len(), 2);
        // A failed sync is the removal's failure, not a silent success.
        let err = remove_then_sync(&p, |d| {
            Err(io("syncing the directory", d)(std::io::Error::other("EIO")))
        })
        .unwrap_err();
        assert!(err.to_string().contains("conf.d"), "{err}");
    }
}
