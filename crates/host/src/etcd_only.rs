//! The etcd-only level a step-down puts a server at, and what could undo it.
//!
//! The step-down writes `config.yaml.d/90-fleet-role-etcd-only.yaml`
//! ([`crate::switch::ETCD_ONLY_CONFIG`]). k3s reads `config.yaml.d` in name
//! order, a later file winning (`pkg/configfilearg/parser.go`): a file
//! sorting after it that sets one of its keys (a regrade level of the
//! operator's own, `99-level.yaml`, say) would bring the API server or the
//! kubelet back at the etcd-only level, the kubelet restarting the pods the
//! step-down killed. So such a file refuses the step-down, named, before
//! any change.

use std::path::PathBuf;

use crate::{HostPaths, k3s_config, paths::ETCD_ONLY_DROPIN};

/// The keys the etcd-only drop-in sets.
pub const KEYS: [&str; 4] = [
    "disable-apiserver",
    "disable-controller-manager",
    "disable-scheduler",
    "disable-agent",
];

/// The first config file sorting after the etcd-only drop-in that sets one
/// of [`KEYS`], with the key. An unusable file is not read here (the
/// eligibility check counts it against the host).
pub fn overridden_by(paths: &HostPaths) -> Option<(PathBuf, String)> {
    let ours = paths.k3s_dropins().join(ETCD_ONLY_DROPIN);
    k3s_config::read(paths)
        .into_iter()
        .filter(|f| f.path.starts_with(paths.k3s_dropins()) && f.path > ours)
        .find_map(|f| {
            let map = f.content.ok()?;
            let key = map.keys().iter().find(|k| KEYS.contains(&k.as_str()))?;
            Some((f.path.clone(), key.clone()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_file_setting_an_etcd_only_key_is_named_and_an_earlier_one_or_another_key_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths::new(dir.path());
        let d = paths.k3s_dropins();
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("50-level.yaml"), "disable-agent: false\n").unwrap();
        std::fs::write(d.join("95-labels.yaml"), "node-label: [a=b]\n").unwrap();
        // fleet-role's own drop-in (left by a crashed step-down) is no other.
        std::fs::write(d.join(ETCD_ONLY_DROPIN), crate::switch::ETCD_ONLY_CONFIG).unwrap();
        assert_eq!(overridden_by(&paths), None);
        std::fs::write(d.join("99-level.yaml"), "disable-apiserver: false\n").unwrap();
        assert_eq!(
            overridden_by(&paths),
            Some((d.join("99-level.yaml"), "disable-apiserver".to_string()))
        );
    }
}
