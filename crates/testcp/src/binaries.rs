//! Where the etcd and kube-apiserver binaries come from.
//!
//! etcd ships inside the `etcd-bin-vendored` crate. kube-apiserver is built from
//! source once by `scripts/build-kube-apiserver.sh`, because the machines reach
//! no download site for Kubernetes release binaries.

use std::path::{Path, PathBuf};

/// The environment variable that names the kube-apiserver binary to use.
pub const KUBE_APISERVER_ENV: &str = "FLEET_ROLE_KUBE_APISERVER";

/// Errors finding a binary.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `FLEET_ROLE_KUBE_APISERVER` is set but names no file.
    #[error(
        "{KUBE_APISERVER_ENV}={path} is not a file; run scripts/build-kube-apiserver.sh and point it at the path that prints"
    )]
    EnvNotAFile {
        /// The value of the variable.
        path: PathBuf,
    },
    /// No binary in the build script's cache, and the variable is unset.
    #[error(
        "no kube-apiserver binary: run scripts/build-kube-apiserver.sh (about 15 min on 2 cores, once), \
         or set {KUBE_APISERVER_ENV}; searched {searched}/*/kube-apiserver"
    )]
    KubeApiserverNotBuilt {
        /// The cache folder that was searched.
        searched: PathBuf,
    },
    /// The vendored etcd binary is missing (an unsupported target).
    #[error("the etcd-bin-vendored crate has no etcd binary for this target: {0}")]
    Etcd(String),
}

/// The vendored etcd binary.
///
/// # Errors
/// [`Error::Etcd`] on a target that `etcd-bin-vendored` does not ship.
pub fn etcd() -> Result<PathBuf, Error> {
    etcd_bin_vendored::etcd_bin_path()
        .map(Path::to_owned)
        .map_err(|e| Error::Etcd(e.to_string()))
}

/// The kube-apiserver binary: `$FLEET_ROLE_KUBE_APISERVER` if set, else the
/// newest `<workspace>/.cache/kube-apiserver/*/kube-apiserver`.
///
/// # Errors
/// [`Error::KubeApiserverNotBuilt`] with the command to run; tests fail with it
/// rather than skip, so a missing binary is never mistaken for a pass.
pub fn kube_apiserver() -> Result<PathBuf, Error> {
    if let Some(path) = std::env::var_os(KUBE_APISERVER_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Error::EnvNotAFile { path })
        };
    }
    let cache = workspace_root().join(".cache/kube-apiserver");
    newest_build(&cache, "kube-apiserver").ok_or(Error::KubeApiserverNotBuilt { searched: cache })
}

/// The workspace root: this crate lives at `<root>/crates/testcp`.
fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The environment variable that names etcdutl (etcd's offline tool, which
/// the lab's k3s stand-in restores snapshots with).
pub const ETCDUTL_ENV: &str = "FLEET_ROLE_ETCDUTL";

/// etcdutl: `$FLEET_ROLE_ETCDUTL` if set and a file, else the newest
/// `<workspace>/.cache/etcdutl/*/etcdutl` (scripts/build-etcdutl.sh), else
/// `None`: only a cluster reset from a snapshot needs it, and that fails
/// saying so.
pub fn etcdutl() -> Option<PathBuf> {
    match std::env::var_os(ETCDUTL_ENV).map(PathBuf::from) {
        Some(p) if p.is_file() => Some(p),
        Some(_) => None,
        None => newest_build(&workspace_root().join(".cache/etcdutl"), "etcdutl"),
    }
}

/// The most recently built `<cache>/*/<name>`. The build scripts write
/// `<name>.tmp` and rename it, so a build in progress is not picked.
fn newest_build(cache: &Path, name: &str) -> Option<PathBuf> {
    std::fs::read_dir(cache)
        .ok()?
        .filter_map(|entry| {
            let bin = entry.ok()?.path().join(name);
            let modified = bin
                .metadata()
                .ok()
                .filter(|m| m.is_file())?
                .modified()
                .ok()?;
            Some((modified, bin))
        })
        .max()
        .map(|(_, bin)| bin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_finished_build_is_picked_and_unfinished_ones_are_not() {
        let cache = tempfile::tempdir().unwrap();
        assert_eq!(newest_build(cache.path(), "kube-apiserver"), None);
        let old = cache.path().join("v1.36.2-aaaa");
        let new = cache.path().join("v1.36.3-bbbb");
        let building = cache.path().join("v1.36.4-cccc");
        for dir in [&old, &new, &building] {
            std::fs::create_dir(dir).unwrap();
        }
        std::fs::write(old.join("kube-apiserver"), "").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(new.join("kube-apiserver"), "").unwrap();
        std::fs::write(building.join("kube-apiserver.tmp"), "").unwrap();
        assert_eq!(
            newest_build(cache.path(), "kube-apiserver"),
            Some(new.join("kube-apiserver"))
        );
    }

    #[test]
    fn a_missing_build_says_which_script_to_run() {
        let message = Error::KubeApiserverNotBuilt {
            searched: "/x".into(),
        }
        .to_string();
        assert!(
            message.contains("scripts/build-kube-apiserver.sh"),
            "{message}"
        );
    }
}
