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
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(Path::new("/"));
    fs::create_dir_all(dir).map_err(io("creating", dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = fs::File::create(&tmp).map_err(io("creating", &tmp))?;
        f.write_all(contents).map_err(io("writing", &tmp))?;
        f.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(io("setting the mode of", &tmp))?;
        f.sync_all().map_err(io("syncing", &tmp))?;
        fs::rename(&tmp, path).map_err(io("renaming into place", path))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
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
        let names: Vec<_> = fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("file.conf")]);
        assert!(remove_if_present(&p).unwrap());
        assert!(!remove_if_present(&p).unwrap());
    }
}
