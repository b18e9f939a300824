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

/// Removes a file if it is there.
pub fn remove_if_present(path: &Path) -> Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io("removing", path)(e)),
    }
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
        assert!(remove_if_present(&p).unwrap());
        assert!(!remove_if_present(&p).unwrap());
    }
}
