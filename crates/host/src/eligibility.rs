//! Whether this server's agent could start, were it demoted: the check made
//! before a demotion changes anything.
//!
//! `k3s agent` reads the same `config.yaml` and `config.yaml.d/*.yaml` as
//! `k3s server`, turns every key into a flag, and fails on one it does not
//! define (`flag provided but not defined: -cluster-init`); and it
//! bootstraps only from its `server:` (or `K3S_URL`). A server whose config
//! holds a server-only key, or whose agent would name no live server but
//! itself, would be demoted into an agent that restart-loops. So such a
//! host is *ineligible*: the actuator refuses `demote-local`, a step-down
//! and a finish on it, and reports it so that the controller refuses a swap
//! of it before anything is written.
//!
//! fleet-role's own drop-ins ([`crate::paths::JOIN_DROPIN`],
//! [`crate::paths::ETCD_ONLY_DROPIN`]) are not counted: the demotion removes
//! both before the agent starts.
//!
//! [`read`] reads what the host holds; [`assess`] is the pure judgement.

use std::{fs, path::PathBuf};

use crate::{
    HostPaths,
    paths::{ETCD_ONLY_DROPIN, JOIN_DROPIN},
};

/// The keys of `k3s server` that `k3s agent` does not define
/// (`pkg/cli/cmds/server.go` against `agent.go`): one of them in a config
/// file the agent reads makes it fail at once.
pub const SERVER_ONLY_KEYS: &[&str] = &[
    "advertise-address",
    "advertise-port",
    "agent-token",
    "agent-token-file",
    "api-server-port",
    "bind-address",
    "cluster-cidr",
    "cluster-dns",
    "cluster-domain",
    "cluster-init",
    "cluster-reset",
    "cluster-reset-restore-path",
    "cluster-secret",
    "datastore-cafile",
    "datastore-certfile",
    "datastore-endpoint",
    "datastore-keyfile",
    "default-local-storage-path",
    "disable",
    "disable-agent",
    "disable-apiserver",
    "disable-cloud-controller",
    "disable-controller-manager",
    "disable-etcd",
    "disable-helm-controller",
    "disable-kube-proxy",
    "disable-network-policy",
    "disable-scheduler",
    "egress-selector-mode",
    "embedded-registry",
    "encrypt-secrets",
    "etcd-arg",
    "etcd-disable-snapshots",
    "etcd-expose-metrics",
    "etcd-s3",
    "etcd-s3-access-key",
    "etcd-s3-bucket",
    "etcd-s3-endpoint",
    "etcd-s3-endpoint-ca",
    "etcd-s3-folder",
    "etcd-s3-region",
    "etcd-s3-secret-key",
    "etcd-s3-skip-ssl-verify",
    "etcd-snapshot-compress",
    "etcd-snapshot-dir",
    "etcd-snapshot-name",
    "etcd-snapshot-retention",
    "etcd-snapshot-schedule-cron",
    "flannel-backend",
    "flannel-external-ip",
    "flannel-ipv6-masq",
    "helm-job-image",
    "https-listen-port",
    "kine-tls",
    "kube-apiserver-arg",
    "kube-cloud-controller-manager-arg",
    "kube-controller-manager-arg",
    "kube-scheduler-arg",
    "no-deploy",
    "secrets-encryption",
    "service-cidr",
    "service-node-port-range",
    "supervisor-port",
    "system-default-registry",
    "tls-san",
    "tls-san-security",
    "write-kubeconfig",
    "write-kubeconfig-group",
    "write-kubeconfig-mode",
];

/// The agent unit's environment files, in the order systemd reads them (a
/// later one wins): install.sh's unit names all three.
const AGENT_ENV_FILES: &[&str] = &[
    "etc/default/k3s-agent",
    "etc/sysconfig/k3s-agent",
    "etc/systemd/system/k3s-agent.service.env",
];

/// What the host holds that decides whether its agent could start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentConfig {
    /// Server-only keys in a config file the agent would read, with the file.
    pub server_only: Vec<(String, PathBuf)>,
    /// Config files the agent would read that are no valid YAML mapping.
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

/// Reads k3s's config files and the agent unit's environment under the host
/// root, leaving fleet-role's own drop-ins out (a demotion removes them).
pub fn read(paths: &HostPaths) -> AgentConfig {
    let mut out = AgentConfig::default();
    let own = [
        paths.k3s_dropins().join(JOIN_DROPIN),
        paths.k3s_dropins().join(ETCD_ONLY_DROPIN),
    ];
    for file in crate::identity::k3s_config_files(paths) {
        if own.contains(&file) {
            continue;
        }
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        let Ok(map) = serde_saphyr::from_str::<
            std::collections::BTreeMap<String, serde::de::IgnoredAny>,
        >(&text) else {
            out.unreadable.push(file);
            continue;
        };
        for key in map.keys() {
            // `key+:` appends to an earlier value; it is the same flag.
            let key = key.trim_end_matches('+');
            if SERVER_ONLY_KEYS.contains(&key) {
                out.server_only.push((key.to_string(), file.clone()));
            }
        }
        #[derive(serde::Deserialize)]
        struct ServerKey {
            server: Option<String>,
        }
        if let Ok(ServerKey { server: Some(s) }) = serde_saphyr::from_str::<ServerKey>(&text) {
            out.server = Some((s, format!("server: in {}", file.display())));
        }
    }
    if out.server.is_none() {
        for rel in AGENT_ENV_FILES {
            let file = paths.at(rel);
            let Ok(text) = fs::read_to_string(&file) else {
                continue;
            };
            for line in text.lines().map(str::trim) {
                if let Some(v) = line.strip_prefix("K3S_URL=") {
                    let v = v.trim().trim_matches(['"', '\'']);
                    if !v.is_empty() {
                        out.server =
                            Some((v.to_string(), format!("K3S_URL in {}", file.display())));
                    }
                }
            }
        }
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
/// then only what the host holds is judged.
pub fn assess(config: &AgentConfig, node: &str, servers: Option<&[ServerNode]>) -> Vec<String> {
    let mut reasons = Vec::new();
    for (key, file) in &config.server_only {
        reasons.push(format!(
            "{} sets {key}, a server-only key: k3s agent would fail (flag provided but not defined: -{key}); move it to the server unit (ExecStart flags or k3s.service.env)",
            file.display()
        ));
    }
    for file in &config.unreadable {
        reasons.push(format!(
            "{} is no valid k3s config (YAML mapping): k3s agent would not start",
            file.display()
        ));
    }
    match &config.server {
        None => reasons.push(
            "the agent has no server to bootstrap from (no server: outside fleet-role's drop-ins, no K3S_URL in k3s-agent.service.env)".to_string(),
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
        let keys: Vec<&str> = c.server_only.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["cluster-init", "tls-san"]);
        let r = assess(&c, "a", Some(&[server("b", "10.0.0.2", true)]));
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(r[0].contains("flag provided but not defined: -cluster-init"));
    }

    #[test]
    fn fleet_roles_own_drop_ins_are_not_counted_as_they_go_before_the_agent_starts() {
        let (_d, paths) = host_with(&[
            ("etc/rancher/k3s/config.yaml", "node-name: a\n"),
            (
                "etc/rancher/k3s/config.yaml.d/90-fleet-role-etcd-only.yaml",
                crate::switch::ETCD_ONLY_CONFIG,
            ),
            (
                "etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml",
                "server: \"https://10.0.0.2:6443\"\n",
            ),
            (
                "etc/systemd/system/k3s-agent.service.env",
                "K3S_URL=https://10.0.0.3:6443\n",
            ),
        ]);
        let c = read(&paths);
        assert!(c.server_only.is_empty(), "{c:?}");
        assert_eq!(c.server.as_ref().unwrap().0, "https://10.0.0.3:6443");
        assert!(assess(&c, "a", Some(&[server("c", "10.0.0.3", true)])).is_empty());
    }

    #[test]
    fn an_agent_with_no_server_or_only_itself_or_a_dead_one_is_ineligible() {
        let none = AgentConfig::default();
        assert_eq!(assess(&none, "a", None).len(), 1);
        let to = |url: &str| AgentConfig {
            server: Some((url.to_string(), "server: in x".to_string())),
            ..AgentConfig::default()
        };
        let nodes = [
            server("a", "10.0.0.1", true),
            server("b", "10.0.0.2", false),
            server("c", "10.0.0.3", true),
        ];
        assert!(assess(&to("https://10.0.0.1:6443"), "a", Some(&nodes))[0].contains("itself"));
        assert!(assess(&to("https://10.0.0.2:6443"), "a", Some(&nodes))[0].contains("no Ready"));
        assert!(assess(&to("https://10.0.0.9:6443"), "a", Some(&nodes))[0].contains("no Ready"));
        assert!(assess(&to("https://10.0.0.3:6443"), "a", Some(&nodes)).is_empty());
        assert!(assess(&to("https://c:6443"), "a", Some(&nodes)).is_empty());
        // Without the API, what the host holds is all that is judged.
        assert!(assess(&to("https://10.0.0.2:6443"), "a", None).is_empty());
    }

    #[test]
    fn a_config_file_that_is_no_yaml_mapping_makes_the_host_ineligible() {
        let (_d, paths) = host_with(&[("etc/rancher/k3s/config.yaml", "- just\n- a list\n")]);
        let c = read(&paths);
        assert_eq!(c.unreadable.len(), 1);
        assert!(!assess(&c, "a", None).is_empty());
    }

    #[test]
    fn the_host_of_a_url_is_read_with_or_without_port_and_brackets() {
        assert_eq!(url_host("https://10.0.0.1:6443"), Some("10.0.0.1"));
        assert_eq!(url_host("https://[fd00::1]:6443/x"), Some("fd00::1"));
        assert_eq!(url_host("https://lb.example"), Some("lb.example"));
        assert_eq!(url_host("https://"), None);
    }
}
