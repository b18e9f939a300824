//! The server's secrets a finished host no longer needs.
//!
//! More in docs/internals.md, "host: secrets".

use std::{fs, io::ErrorKind, path::PathBuf};

use crate::{
    HostPaths,
    error::{Result, io},
    fsutil::sync_dir,
};

/// The secrets this host still holds, of those a finish removes.
pub fn present(paths: &HostPaths) -> Vec<PathBuf> {
    paths
        .server_secrets()
        .into_iter()
        .filter(|p| fs::symlink_metadata(p).is_ok())
        .collect()
}

/// Removes the server's secrets ([`HostPaths::server_secrets`]) and syncs
/// their directories, so the removal survives a power cut. What is already
/// gone is skipped, so a finish resumed after a crash removes the rest.
/// Returns what was removed.
pub fn remove(paths: &HostPaths) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for path in paths.server_secrets() {
        let gone = match fs::symlink_metadata(&path) {
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => Err(e),
            Ok(m) if m.is_dir() => fs::remove_dir_all(&path),
            Ok(_) => fs::remove_file(&path),
        };
        gone.map_err(io("removing the server's secret", &path))?;
        if let Some(dir) = path.parent() {
            sync_dir(dir)?;
        }
        removed.push(path);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_keys_and_fleet_roles_auto_deploy_file_go_and_the_token_datastore_snapshots_and_k3ss_manifests_stay()
     {
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        let server = p.at("var/lib/rancher/k3s/server");
        let secret = [
            "tls/server-ca.key",
            "tls/client-admin.key",
            "tls/etcd/peer-ca.key",
            "cred/passwd",
            "cred/encryption-config.json",
            "manifests/fleet-role.yaml",
        ];
        let kept = [
            "token",
            "agent-token",
            "db/snapshots/fleet-role-s1-runner-3",
            "db.demoted/etcd/member/snap/db",
            "manifests/coredns.yaml",
        ];
        for f in secret.iter().chain(&kept) {
            fs::create_dir_all(server.join(f).parent().unwrap()).unwrap();
            fs::write(server.join(f), "x").unwrap();
        }
        fs::create_dir_all(p.k3s_config().parent().unwrap()).unwrap();
        fs::write(p.at("etc/rancher/k3s/k3s.yaml"), "admin").unwrap();
        fs::write(p.k3s_config(), "token: x\n").unwrap();
        assert_eq!(present(&p).len(), 4);

        let removed = remove(&p).unwrap();
        assert_eq!(removed, p.server_secrets().to_vec());
        for f in secret {
            assert!(!server.join(f).exists(), "{f} is left");
        }
        assert!(!p.at("etc/rancher/k3s/k3s.yaml").exists());
        for f in kept {
            assert!(server.join(f).exists(), "{f} is gone");
        }
        assert!(p.k3s_config().exists());
        // Again: nothing left to remove, nothing fails.
        assert!(present(&p).is_empty());
        assert!(remove(&p).unwrap().is_empty());
    }
}
