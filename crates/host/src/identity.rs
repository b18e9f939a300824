//! Whether the configured Node is this host.
//!
//! More in docs/internals.md, "host: identity".

use std::{fs, net::IpAddr};

use crate::{HostPaths, addresses::LocalAddresses, k3s_config};

/// What is said of an address that is not this host's.
const NOT_LOCAL: &str = "(not an address of this host)";

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

#[derive(Debug, Default, serde::Deserialize)]
struct NodeNameKey {
    #[serde(rename = "node-name")]
    node_name: Option<String>,
}

/// `node-ip:` as k3s takes it: one string (commas between addresses) or a
/// list.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Default, serde::Deserialize)]
struct NodeIpKey {
    #[serde(rename = "node-ip")]
    node_ip: Option<OneOrMany>,
}

/// k3s's `node-ip` as its configuration gives it (a later file winning),
/// with the file, one entry per address.
fn configured_node_ips(paths: &HostPaths) -> Vec<(String, String)> {
    let mut found = Vec::new();
    // A file that cannot be used names no address (k3s would not start
    // with it): the module's policy, see `crate::k3s_config`.
    for file in k3s_config::read(paths) {
        if let Ok(NodeIpKey { node_ip: Some(ips) }) = file.content.and_then(|m| m.get()) {
            let ips = match ips {
                OneOrMany::One(s) => vec![s],
                OneOrMany::Many(v) => v,
            };
            let what = format!("k3s's node-ip in {}", file.path.display());
            found = ips
                .iter()
                .flat_map(|s| s.split(','))
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|ip| (what.clone(), ip.to_string()))
                .collect();
        }
    }
    found
}

/// Whether `ip` (as written) is an address of this host.
fn is_local(ip: &str, addresses: &LocalAddresses) -> bool {
    ip.parse::<IpAddr>().is_ok_and(|ip| addresses.contains(ip))
}

/// Checks the Node's `InternalIP` (as the API has it) against this host's
/// addresses: a Node whose address is another machine's is not this host,
/// whatever its name.
pub fn check_internal_ip(
    node: &str,
    internal_ip: &str,
    addresses: &LocalAddresses,
) -> Result<(), NotThisHost> {
    if is_local(internal_ip, addresses) {
        return Ok(());
    }
    Err(NotThisHost {
        node: node.to_string(),
        disagree: vec![(
            format!("the Node's InternalIP in the API {NOT_LOCAL}"),
            internal_ip.to_string(),
        )],
    })
}

/// k3s's node name as its configuration gives it, with the file.
fn configured_node_name(paths: &HostPaths) -> Option<(String, String)> {
    let mut found = None;
    for file in k3s_config::read(paths) {
        // A file that cannot be used is reported by the steps that need it
        // (`crate::k3s_config`'s policy); here it gives no name, k3s itself
        // running under none from it.
        if let Ok(NodeNameKey { node_name: Some(n) }) = file.content.and_then(|m| m.get()) {
            found = Some((
                format!("k3s's node-name in {}", file.path.display()),
                n.trim().to_string(),
            ));
        }
    }
    found
}

/// Checks `node` against the host: k3s's node name (its configuration, else
/// `hostname`), the etcd member's name, when there is one, and k3s's
/// `node-ip`, when set, against this host's `addresses`.
pub fn check(
    paths: &HostPaths,
    node: &str,
    hostname: Option<&str>,
    addresses: &LocalAddresses,
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
    for (what, ip) in configured_node_ips(paths) {
        if !is_local(&ip, addresses) {
            disagree.push((format!("{what} {NOT_LOCAL}"), ip.clone()));
        }
        sources.push((what, ip));
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

    fn here() -> LocalAddresses {
        LocalAddresses::parse(
            "|-- 192.0.2.2\n   /32 host LOCAL\n|-- 127.0.0.0\n   /8 host LOCAL\n",
            "fd000000000000000000000000000002 04 40 00 82 eth0\n",
        )
    }

    fn check(p: &HostPaths, node: &str, hostname: Option<&str>) -> Result<Evidence, NotThisHost> {
        super::check(p, node, hostname, &here())
    }

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

    #[test]
    fn a_node_ip_that_is_not_an_address_of_this_host_is_refused_saying_which() {
        let (_d, p) = host();
        fs::write(p.k3s_config(), "node-name: runner-3\nnode-ip: 192.0.2.2\n").unwrap();
        assert!(check(&p, "runner-3", None).is_ok());
        fs::write(
            p.k3s_dropins().join("50-ip.yaml"),
            "node-ip: [192.0.2.2, \"fd00::9\"]\n",
        )
        .unwrap();
        let e = check(&p, "runner-3", None).unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains("node-ip in") && shown.contains("50-ip.yaml"),
            "{shown}"
        );
        assert!(
            shown.contains("not an address of this host) says \"fd00::9\""),
            "{shown}"
        );
        assert!(
            !shown.contains("192.0.2.2"),
            "only the one that disagrees: {shown}"
        );
        // One string with commas, as k3s also takes it; and a value that is
        // no address at all.
        fs::write(
            p.k3s_dropins().join("50-ip.yaml"),
            "node-ip: \"192.0.2.2,fd00::2\"\n",
        )
        .unwrap();
        assert!(check(&p, "runner-3", None).is_ok());
        fs::write(
            p.k3s_dropins().join("50-ip.yaml"),
            "node-ip: runner-3.lan\n",
        )
        .unwrap();
        assert!(check(&p, "runner-3", None).is_err());
    }

    #[test]
    fn a_nodes_internal_ip_that_is_another_machines_is_refused() {
        assert!(check_internal_ip("runner-3", "192.0.2.2", &here()).is_ok());
        assert!(check_internal_ip("runner-3", "127.77.0.5", &here()).is_ok());
        let e = check_internal_ip("runner-3", "192.0.2.9", &here()).unwrap_err();
        let shown = e.to_string();
        assert!(shown.contains("\"runner-3\" is not this host"), "{shown}");
        assert!(
            shown
                .contains("InternalIP in the API (not an address of this host) says \"192.0.2.9\""),
            "{shown}"
        );
    }
}
