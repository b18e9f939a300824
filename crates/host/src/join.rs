//! The server this host's k3s bootstraps from (`server:`), as k3s would
//! read it, and whether fleet-role's join drop-in decides it.
//!
//! k3s turns every config file's keys into flags, a later file winning
//! (`pkg/configfilearg/parser.go`), and a flag beats the `K3S_URL`
//! environment variable install.sh writes to `k3s.service.env`. So the
//! server is the last config file's `server:` (`crate::k3s_config`'s
//! order), else `K3S_URL` from that file.

use std::path::PathBuf;

use protocol::JoinUrl;

use crate::{HostPaths, k3s_config, paths::JOIN_DROPIN};

/// Where install.sh keeps the server unit's environment (`K3S_URL`,
/// `K3S_TOKEN`): read for `K3S_URL` only.
pub const SERVER_ENV_FILE: &str = "etc/systemd/system/k3s.service.env";

/// The `server:` k3s would start with, and the file that sets it: `None`
/// when none sets one (the cluster's first server). A value that is no
/// join URL is `Err` with the file: k3s would not reach it either.
pub fn configured(paths: &HostPaths) -> Option<(Result<JoinUrl, String>, PathBuf)> {
    #[derive(Default, serde::Deserialize)]
    struct ServerKey {
        server: Option<String>,
    }
    let from_files = k3s_config::read(paths).into_iter().rev().find_map(|f| {
        // An unusable file sets nothing fleet-role can read; eligibility
        // refuses a demotion over one before any step-down.
        let value = f.content.ok()?.get::<ServerKey>().ok()?.server?;
        Some((
            JoinUrl::parse(value.trim()).map_err(|e| e.to_string()),
            f.path,
        ))
    });
    from_files.or_else(|| {
        let file = paths.at(SERVER_ENV_FILE);
        let text = std::fs::read_to_string(&file).ok()?;
        let value = text.lines().find_map(|l| {
            let l = l.trim().strip_prefix("export ").unwrap_or(l.trim());
            l.strip_prefix("K3S_URL=")
        })?;
        let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
        (!value.is_empty()).then(|| (JoinUrl::parse(value).map_err(|e| e.to_string()), file))
    })
}

/// The config file sorting after fleet-role's join drop-in that sets
/// `server:`, if any: a join drop-in written now would not be what k3s reads.
pub fn overridden_by(paths: &HostPaths) -> Option<PathBuf> {
    let ours = paths.k3s_dropins().join(JOIN_DROPIN);
    match configured(paths) {
        Some((_, file)) if file != ours && file.starts_with(paths.k3s_dropins()) && file > ours => {
            Some(file)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(paths: &HostPaths, rel: &str, text: &str) {
        let p = paths.at(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn the_server_is_the_last_config_files_then_install_sh_s_k3s_url() {
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths::new(dir.path());
        assert!(configured(&paths).is_none());
        write(
            &paths,
            SERVER_ENV_FILE,
            "K3S_TOKEN=x\nK3S_URL='https://10.0.0.1:6443'\n",
        );
        let (url, file) = configured(&paths).unwrap();
        assert_eq!(url.unwrap().as_str(), "https://10.0.0.1:6443");
        assert_eq!(file, paths.at(SERVER_ENV_FILE));
        write(
            &paths,
            "etc/rancher/k3s/config.yaml",
            "server: https://10.0.0.2:6443\n",
        );
        write(
            &paths,
            "etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml",
            "server: \"https://10.0.0.3:6443\"\n",
        );
        write(
            &paths,
            "etc/rancher/k3s/config.yaml.d/95-other.yaml",
            "node-label: [a=b]\n",
        );
        let (url, file) = configured(&paths).unwrap();
        assert_eq!(url.unwrap().as_str(), "https://10.0.0.3:6443");
        assert_eq!(file, paths.k3s_dropins().join(JOIN_DROPIN));
        assert_eq!(overridden_by(&paths), None);
    }

    #[test]
    fn a_later_drop_in_that_sets_server_overrides_fleet_roles_and_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths::new(dir.path());
        write(
            &paths,
            "etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml",
            "server: \"https://10.0.0.3:6443\"\n",
        );
        write(
            &paths,
            "etc/rancher/k3s/config.yaml.d/99-site.yaml",
            "server: not-a-url\n",
        );
        let (url, file) = configured(&paths).unwrap();
        assert!(url.is_err());
        assert_eq!(overridden_by(&paths), Some(file));
    }
}
