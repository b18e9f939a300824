//! Whether this server's agent could start, were it demoted: the check made
//! before a demotion changes anything.
//!
//! More in docs/internals.md, "host: eligibility".

use std::path::PathBuf;

use crate::{HostPaths, k3s_config, paths::ETCD_ONLY_DROPIN};

/// What the host holds that decides whether its agent could start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentConfig {
    /// Every key of a config file the agent would read, as written (an
    /// append's `+` kept), with the file: file by file in k3s's order.
    pub keys: Vec<(String, PathBuf)>,
    /// Config files the agent would read that cannot be used: unreadable,
    /// no valid YAML mapping, or a `server:` k3s would not take.
    pub unreadable: Vec<PathBuf>,
    /// The agent's server URL and where it is set (`server:` in a config
    /// file, a later one winning, else `K3S_URL` in the agent unit's
    /// environment files: k3s's config-file flags beat the environment).
    pub server: Option<(String, String)>,
}

/// A server Node as the API shows it, for the liveness of `server:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerNode {
    /// Its name.
    pub name: String,
    /// Whether its `Ready` condition is `True`.
    pub ready: bool,
    /// Its addresses (InternalIP, ExternalIP, Hostname), as written.
    pub addresses: Vec<String>,
}

/// What [`assess`] judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// The keys and the server the agent would bootstrap from.
    All,
    /// The keys only: a step-down comes first and names the server.
    KeysOnly,
}

/// Reads k3s's config files and the agent unit's environment under the host
/// root, leaving fleet-role's etcd-only drop-in out (a demotion removes it).
pub fn read(paths: &HostPaths) -> AgentConfig {
    let mut out = AgentConfig::default();
    let etcd_only = paths.k3s_dropins().join(ETCD_ONLY_DROPIN);
    for file in k3s_config::read(paths) {
        if file.path == etcd_only {
            continue;
        }
        // A file that cannot be used counts against the host (the module
        // policy of `crate::k3s_config`): k3s agent would not start with it.
        let map = match file.content {
            Ok(m) => m,
            Err(_) => {
                out.unreadable.push(file.path);
                continue;
            }
        };
        for key in map.keys() {
            out.keys.push((key.clone(), file.path.clone()));
        }
        #[derive(Default, serde::Deserialize)]
        struct ServerKey {
            server: Option<String>,
        }
        match map.get::<ServerKey>() {
            Ok(ServerKey { server: Some(s) }) => {
                out.server = Some((s, format!("server: in {}", file.path.display())));
            }
            Ok(ServerKey { server: None }) => {}
            // A `server:` k3s would not take: the agent would not start.
            Err(_) => out.unreadable.push(file.path),
        }
    }
    if out.server.is_none() {
        out.server = crate::join::agent_env(paths).map(|c| (c.value.clone(), c.source()));
    }
    out
}

/// The host part of a URL (`https://10.0.0.1:6443` → `10.0.0.1`), brackets
/// of an IPv6 address removed.
fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.0,
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    (!host.is_empty()).then_some(host)
}

/// Why this host's agent could not start, were it demoted; empty when it
/// could. `node` is this host's Node name; `servers` the server Nodes as
/// the API shows them, or `None` where the API is not read (`demote-local`):
/// then only what the host holds is judged. `judged` says whether the
/// server counts ([`Judged::KeysOnly`] for a host whose step-down names it).
pub fn assess(
    config: &AgentConfig,
    node: &str,
    servers: Option<&[ServerNode]>,
    judged: Judged,
) -> Vec<String> {
    let mut reasons = Vec::new();
    // One rule for keys: k3s agent's own flags (`crate::agent_flags`). A
    // server-only key and a misspelt one fail the agent alike.
    for (key, file) in &config.keys {
        if crate::agent_flags::is_agent_flag(key) {
            continue;
        }
        let flag = key.strip_suffix('+').unwrap_or(key);
        reasons.push(format!(
            "{} sets {key}, which k3s agent does not define: it would fail (flag provided but not defined: -{flag}); move a server-only key to the server unit (ExecStart flags or k3s.service.env), correct a misspelt one",
            file.display()
        ));
    }
    for file in &config.unreadable {
        reasons.push(format!(
            "{} is no valid k3s config (YAML mapping): k3s agent would not start",
            file.display()
        ));
    }
    if judged == Judged::KeysOnly {
        return reasons;
    }
    match &config.server {
        None => reasons.push(
            "the agent has no server to bootstrap from (no server: in k3s's config, no K3S_URL in k3s-agent.service.env)".to_string(),
        ),
        Some((url, source)) => match (url_host(url), servers) {
            (None, _) => reasons.push(format!("{source} ({url:?}) names no host")),
            (Some(_), None) => {}
            (Some(host), Some(servers)) => {
                let named: Vec<&ServerNode> = servers
                    .iter()
                    .filter(|s| s.addresses.iter().any(|a| a == host) || s.name == host)
                    .collect();
                if named.iter().any(|s| s.name == node) {
                    reasons.push(format!(
                        "{source} ({url}) names this host itself: once demoted, its agent would have no server to bootstrap from"
                    ));
                } else if !named.iter().any(|s| s.ready) {
                    reasons.push(format!(
                        "{source} ({url}) names no Ready server Node: the agent would wait for ever to bootstrap"
                    ));
                }
            }
        },
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn server(name: &str, ip: &str, ready: bool) -> ServerNode {
        ServerNode {
            name: name.into(),
            ready,
            addresses: vec![ip.into()],
        }
    }

    fn host_with(files: &[(&str, &str)]) -> (tempfile::TempDir, HostPaths) {
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths::new(dir.path());
        for (rel, text) in files {
            let p = paths.at(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        (dir, paths)
    }

    #[test]
    fn a_server_only_key_in_config_yaml_makes_the_host_ineligible() {
        let (_d, paths) = host_with(&[
            (
                "etc/rancher/k3s/config.yaml",
                "node-name: a\ncluster-init: true\nserver: https://10.0.0.2:6443\n",
            ),
            ("etc/rancher/k3s/config.yaml.d/20-x.yaml", "tls-san+: [x]\n"),
        ]);
        let c = read(&paths);
        let r = assess(&c, "a", Some(&[server("b", "10.0.0.2", true)]), Judged::All);
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(r[0].contains("flag provided but not defined: -cluster-init"));
        assert!(r[1].contains("20-x.yaml sets tls-san+,"), "{r:?}");
        assert!(r[1].contains("not defined: -tls-san)"), "{r:?}");
    }

    #[test]
    fn a_key_on_neither_old_list_makes_the_host_ineligible_naming_the_key_and_the_file() {
        // A server flag (since April 2024) that the old list of
        // server-only keys missed: k3s agent fails on it all the same.
        let (_d, paths) = host_with(&[(
            "etc/rancher/k3s/config.yaml",
            "node-name: a\nsupervisor-metrics: true\nserver: https://10.0.0.2:6443\n",
        )]);
        let r = assess(
            &read(&paths),
            "a",
            Some(&[server("b", "10.0.0.2", true)]),
            Judged::All,
        );
        assert_eq!(r.len(), 1, "{r:?}");
        let file = paths.k3s_config();
        assert!(
            r[0].starts_with(&format!("{} sets supervisor-metrics,", file.display())),
            "{r:?}"
        );
        assert!(
            r[0].contains("flag provided but not defined: -supervisor-metrics"),
            "{r:?}"
        );
    }

    #[test]
    fn a_misspelt_key_in_a_drop_in_makes_the_host_ineligible_naming_the_key_and_the_drop_in() {
        let (_d, paths) = host_with(&[
            (
                "etc/rancher/k3s/config.yaml",
                "node-name: a\nserver: https://10.0.0.2:6443\n",
            ),
            (
                "etc/rancher/k3s/config.yaml.d/50-kubelet.yaml",
                "kubelet-args:\n  - max-pods=200\n",
            ),
        ]);
        let r = assess(&read(&paths), "a", None, Judged::All);
        assert_eq!(r.len(), 1, "{r:?}");
        let file = paths.k3s_dropins().join("50-kubelet.yaml");
        assert!(
            r[0].starts_with(&format!("{} sets kubelet-args,", file.display())),
            "{r:?}"
        );
        assert!(r[0].contains("not defined: -kubelet-args"), "{r:?}");
    }

    #[test]
    fn the_agents_own_flags_aliases_and_appends_leave_the_host_eligible() {
        // `bind-address` was on the old list of server-only keys, but the
        // agent defines it too; `d` is `data-dir`'s alias.
        let (_d, paths) = host_with(&[
            (
                "etc/rancher/k3s/config.yaml",
                "node-name: a\nd: /srv/k3s\nbind-address: 10.0.0.1\nnode-label:\n  - zone=x\nserver: https://10.0.0.2:6443\n",
            ),
            (
                "etc/rancher/k3s/config.yaml.d/50-kubelet.yaml",
                "kubelet-arg+:\n  - max-pods=200\nnode-label+: [rack=7]\n",
            ),
        ]);
        let c = read(&paths);
        assert_eq!(c.keys.len(), 7, "{c:?}");
        assert!(assess(&c, "a", Some(&[server("b", "10.0.0.2", true)]), Judged::All).is_empty());
    }

    #[test]
    fn the_etcd_only_drop_in_is_not_counted_and_the_join_drop_in_names_the_agents_server() {
        let (_d, paths) = host_with(&[
            ("etc/rancher/k3s/config.yaml", "node-name: a\n"),
            (
                "etc/rancher/k3s/config.yaml.d/90-fleet-role-etcd-only.yaml",
                crate::switch::ETCD_ONLY_CONFIG,
            ),
            (
                "etc/systemd/system/k3s-agent.service.env",
                "K3S_URL=https://10.0.0.3:6443\n",
            ),
        ]);
        let c = read(&paths);
        assert_eq!(c.keys, [("node-name".to_string(), paths.k3s_config())]);
        assert_eq!(c.server.as_ref().unwrap().0, "https://10.0.0.3:6443");
        assert!(assess(&c, "a", Some(&[server("c", "10.0.0.3", true)]), Judged::All).is_empty());
        // A finish keeps the join drop-in: the agent bootstraps from it.
        let join = paths.k3s_dropins().join("90-fleet-role-join.yaml");
        fs::write(&join, "server: \"https://10.0.0.2:6443\"\n").unwrap();
        let c = read(&paths);
        assert_eq!(c.server.as_ref().unwrap().0, "https://10.0.0.2:6443");
        let nodes = [server("c", "10.0.0.3", true)];
        assert!(assess(&c, "a", Some(&nodes), Judged::All)[0].contains("no Ready"));
        // A host whose step-down names the server is judged on its keys.
        assert!(assess(&c, "a", Some(&nodes), Judged::KeysOnly).is_empty());
        fs::write(paths.k3s_config(), "node-name: a\ncluster-init: true\n").unwrap();
        assert_eq!(
            assess(&read(&paths), "a", Some(&nodes), Judged::KeysOnly).len(),
            1
        );
    }

    #[test]
    fn an_agent_with_no_server_or_only_itself_or_a_dead_one_is_ineligible() {
        let none = AgentConfig::default();
        assert_eq!(assess(&none, "a", None, Judged::All).len(), 1);
        let to = |url: &str| AgentConfig {
            server: Some((url.to_string(), "server: in x".to_string())),
            ..AgentConfig::default()
        };
        let nodes = [
            server("a", "10.0.0.1", true),
            server("b", "10.0.0.2", false),
            server("c", "10.0.0.3", true),
        ];
        assert!(
            assess(&to("https://10.0.0.1:6443"), "a", Some(&nodes), Judged::All)[0]
                .contains("itself")
        );
        assert!(
            assess(&to("https://10.0.0.2:6443"), "a", Some(&nodes), Judged::All)[0]
                .contains("no Ready")
        );
        assert!(
            assess(&to("https://10.0.0.9:6443"), "a", Some(&nodes), Judged::All)[0]
                .contains("no Ready")
        );
        assert!(assess(&to("https://10.0.0.3:6443"), "a", Some(&nodes), Judged::All).is_empty());
        assert!(assess(&to("https://c:6443"), "a", Some(&nodes), Judged::All).is_empty());
        // Without the API, what the host holds is all that is judged.
        assert!(assess(&to("https://10.0.0.2:6443"), "a", None, Judged::All).is_empty());
    }

    #[test]
    fn a_config_file_that_is_no_yaml_mapping_makes_the_host_ineligible() {
        let (_d, paths) = host_with(&[("etc/rancher/k3s/config.yaml", "- just\n- a list\n")]);
        let c = read(&paths);
        assert_eq!(c.unreadable.len(), 1);
        assert!(!assess(&c, "a", None, Judged::All).is_empty());
    }

    #[test]
    fn a_server_value_k3s_would_not_take_makes_the_host_ineligible() {
        let (_d, paths) = host_with(&[
            (
                "etc/rancher/k3s/config.yaml",
                "server: https://10.0.0.2:6443\n",
            ),
            (
                "etc/rancher/k3s/config.yaml.d/50-list.yaml",
                "server: [https://a:6443, https://b:6443]\n",
            ),
        ]);
        let c = read(&paths);
        assert_eq!(c.unreadable.len(), 1, "{c:?}");
        assert!(!assess(&c, "a", None, Judged::All).is_empty());
    }

    #[test]
    fn the_host_of_a_url_is_read_with_or_without_port_and_brackets() {
        assert_eq!(url_host("https://10.0.0.1:6443"), Some("10.0.0.1"));
        assert_eq!(url_host("https://[fd00::1]:6443/x"), Some("fd00::1"));
        assert_eq!(url_host("https://lb.example"), Some("lb.example"));
        assert_eq!(url_host("https://"), None);
    }
}
