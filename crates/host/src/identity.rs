//! Whether the configured Node is this host.
//!
//! A templated `actuator.toml` naming one Node on every host would make every
//! host carry out that Node's steps: its promotion, its step-down, its
//! datastore moved aside. So before it watches anything the actuator checks
//! its `node` against what the host itself says it is, and refuses to start
//! when any of them disagrees:
//!
//! - k3s's node name: `node-name:` in `/etc/rancher/k3s/config.yaml` or
//!   `config.yaml.d/*.yaml` (a later file winning), else the hostname, as
//!   k3s itself chooses it;
//! - the etcd member's name (`server/db/etcd/name`), which k3s makes as the
//!   node name, a dash and a random suffix.

use std::fs;

use crate::HostPaths;

/// What the host says it is, and where each says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// Each source and the name it gives.
    pub sources: Vec<(String, String)>,
}

/// The configured Node is not this host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the configured node {node:?} is not this host: {}; fix `node` in actuator.toml (or --node, FLEET_ROLE_NODE)",
    disagree.iter().map(|(what, name)| format!("{what} says {name:?}")).collect::<Vec<_>>().join(", ")
)]
pub struct NotThisHost {
    /// The configured Node.
    pub node: String,
    /// The sources that disagree, and what each says.
    pub disagree: Vec<(String, String)>,
}

/// k3s's configuration files, in the order k3s reads them (a later file
/// wins): `config.yaml`, then `config.yaml.d/*.yaml|*.yml` in name order.
pub(crate) fn k3s_config_files(paths: &HostPaths) -> Vec<std::path::PathBuf> {
    let mut files = vec![paths.k3s_config()];
    if let Ok(entries) = fs::read_dir(paths.k3s_dropins()) {
        let mut more: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        more.sort();
        files.extend(more);
    }
    files
}

#[derive(Debug, Default, serde::Deserialize)]
struct NodeNameKey {
    #[serde(rename = "node-name")]
    node_name: Option<String>,
}

/// k3s's node name as its configuration gives it, with the file.
fn configured_node_name(paths: &HostPaths) -> Option<(String, String)> {
    let mut found = None;
    for file in k3s_config_files(paths) {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        // A file that does not parse is reported by the steps that need it;
        // here it says nothing about the name.
        if let Ok(NodeNameKey { node_name: Some(n) }) = serde_saphyr::from_str(&text) {
            found = Some((
                format!("k3s's node-name in {}", file.display()),
                n.trim().to_string(),
            ));
        }
    }
    found
}

/// Checks `node` against the host: k3s's node name (its configuration, else
/// `hostname`) and the etcd member's name, when there is one.
pub fn check(
    paths: &HostPaths,
    node: &str,
    hostname: Option<&str>,
) -> Result<Evidence, NotThisHost> {
    let mut sources = Vec::new();
    let mut disagree = Vec::new();
    match configured_node_name(paths) {
        Some((what, name)) => sources.push((what, name)),
        None => {
            if let Some(h) = hostname.map(str::trim).filter(|h| !h.is_empty()) {
                // k3s takes the hostname, lowercased, when no node-name is set.
                sources.push((
                    "the hostname (k3s's node name, no node-name being set)".to_string(),
                    h.to_ascii_lowercase(),
                ));
            }
        }
    }
    for (what, name) in &sources {
        if name != node {
            disagree.push((what.clone(), name.clone()));
        }
    }
    if let Ok(member) = fs::read_to_string(paths.etcd_dir().join("name")) {
        let member = member.trim().to_string();
        if !member.is_empty() {
            let what = format!(
                "the etcd member's name in {}",
                paths.etcd_dir().join("name").display()
            );
            if !member.starts_with(&format!("{node}-")) {
                disagree.push((what.clone(), member.clone()));
            }
            sources.push((what, member));
        }
    }
    if disagree.is_empty() {
        Ok(Evidence { sources })
    } else {
        Err(NotThisHost {
            node: node.to_string(),
            disagree,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> (tempfile::TempDir, HostPaths) {
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths::new(dir.path());
        fs::create_dir_all(paths.k3s_dropins()).unwrap();
        (dir, paths)
    }

    #[test]
    fn the_configured_node_is_this_host_when_k3s_and_the_member_agree() {
        let (_d, p) = host();
        fs::write(p.k3s_config(), "node-name: runner-3\ntoken: x\n").unwrap();
        fs::create_dir_all(p.etcd_dir()).unwrap();
        fs::write(p.etcd_dir().join("name"), "runner-3-0a1b2c3d\n").unwrap();
        let e = check(&p, "runner-3", Some("whatever")).unwrap();
        assert_eq!(e.sources.len(), 2);
    }

    #[test]
    fn a_mistyped_node_is_refused_naming_each_source_that_disagrees() {
        let (_d, p) = host();
        fs::write(p.k3s_config(), "node-name: runner-3\n").unwrap();
        fs::create_dir_all(p.etcd_dir()).unwrap();
        fs::write(p.etcd_dir().join("name"), "runner-3-0a1b2c3d\n").unwrap();
        let e = check(&p, "runner-4", None).unwrap_err();
        let shown = e.to_string();
        assert!(shown.contains("\"runner-4\" is not this host"), "{shown}");
        assert!(
            shown.contains("node-name in") && shown.contains("\"runner-3\""),
            "{shown}"
        );
        assert!(
            shown.contains("etcd member") && shown.contains("runner-3-0a1b2c3d"),
            "{shown}"
        );
        // A prefix of the real name is no match for the member either.
        assert!(check(&p, "runner", None).is_err());
    }

    #[test]
    fn a_later_config_file_wins_and_without_one_the_hostname_counts() {
        let (_d, p) = host();
        fs::write(p.k3s_config(), "node-name: old\n").unwrap();
        fs::write(
            p.k3s_dropins().join("50-name.yaml"),
            "node-name: runner-3\n",
        )
        .unwrap();
        assert!(check(&p, "runner-3", None).is_ok());
        assert!(check(&p, "old", None).is_err());
        let (_d, p) = host();
        assert!(check(&p, "runner-3", Some("Runner-3\n")).is_ok());
        assert!(check(&p, "runner-4", Some("runner-3")).is_err());
    }
}
