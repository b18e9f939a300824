//! k3s's configuration as the stand-in takes it, with k3s's precedence
//! (`pkg/configfilearg/parser.go`): `config.yaml`, then
//! `config.yaml.d/*.yaml|*.yml` in name order, a later file winning; the
//! result becomes flags placed before the command line's, so a command-line
//! flag (the unit's `ExecStart`) wins over the files; an environment variable
//! (`K3S_URL`, `K3S_CLUSTER_INIT`, … from the unit's `EnvironmentFile=`) counts
//! only when neither sets the flag (urfave/cli's `EnvVar`). Only top-level
//! `key: value` lines are read (a list's items, indented or `- `, are no
//! keys): the keys the lab uses are scalars.
//!
//! This is k3s's reading, not the product's (`host::k3s_config`): the lab
//! tests the product against k3s's behaviour (a key the agent does not
//! define fails it, a later file wins), which a stand-in sharing the
//! product's reader would agree with whatever the reader's mistakes.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
};

/// The flags `k3s agent` defines, the only keys it takes in `config.yaml`
/// and its drop-ins: `NewAgentCommand`'s `Flags` in k3s's
/// `pkg/cli/cmds/agent.go`, in that order, each `Name` with its `Aliases`
/// (urfave/cli takes either), the shared ones resolved in `config.go`,
/// `root.go` and `log.go`. Read at k3s-io/k3s master f4c53e663b72
/// (2026-08-14, Kubernetes v1.36.3) and release-1.34 at v1.34.3+k3s1
/// (151ca514ec7c): the same list. urfave/cli's own `help` is left out (the
/// agent prints its usage and exits instead of running).
/// The stand-in keeps its own list, taken from k3s's source apart from the
/// product's (`host::agent_flags`): an imitation sharing the product's list
/// would share its mistakes. A test holds the two equal, so a drift in
/// either is caught.
pub const AGENT_FLAGS: &[&str] = &[
    // config.go, root.go, log.go
    "config",
    "c",
    "debug",
    "v",
    "vmodule",
    "log",
    "l",
    "alsologtostderr",
    // agent.go
    "token",
    "t",
    "token-file",
    "server",
    "s",
    "data-dir",
    "d",
    "node-name",
    "with-node-id",
    "node-label",
    "node-taint",
    "image-credential-provider-bin-dir",
    "image-credential-provider-config",
    "selinux",
    "lb-server-port",
    "protect-kernel-defaults",
    "container-runtime-endpoint",
    "default-runtime",
    "image-service-endpoint",
    "pause-image",
    "snapshotter",
    "private-registry",
    "disable-default-registry-endpoint",
    "nonroot-devices",
    "airgap-extra-registry",
    "node-ip",
    "i",
    "bind-address",
    "node-external-ip",
    "node-internal-dns",
    "node-external-dns",
    "resolv-conf",
    "flannel-iface",
    "flannel-conf",
    "flannel-cni-conf",
    "kubelet-arg",
    "kube-proxy-arg",
    "enable-pprof",
    "rootless",
    "prefer-bundled-bin",
    "docker",
    "vpn-auth",
    "vpn-auth-file",
    "disable-apiserver-lb",
];

/// The environment variables k3s reads for the flags the lab uses, and the
/// flag each stands for (`EnvVar:` in `pkg/cli/cmds/server.go`, `agent.go`).
const ENV_FLAGS: &[(&str, &str)] = &[
    ("K3S_URL", "server"),
    ("K3S_TOKEN", "token"),
    ("K3S_CLUSTER_INIT", "cluster-init"),
    ("K3S_NODE_NAME", "node-name"),
];

/// The merged configuration.
#[derive(Debug, Clone, Default)]
pub struct K3sConfig {
    values: BTreeMap<String, String>,
    /// Every key written in a config file, with the file (k3s turns each into
    /// a flag, so a key the subcommand does not define fails it), an
    /// append's `+` taken off.
    file_keys: Vec<(String, PathBuf)>,
}

impl K3sConfig {
    /// Reads the host's config and drop-ins only (no flags, no environment).
    pub fn read(root: &Path) -> anyhow::Result<K3sConfig> {
        K3sConfig::load(root, &[], |_| None)
    }

    /// Reads the host's config and drop-ins, then the command line's flags
    /// after the subcommand (`--key value`, `--key=value`, `--flag`), then
    /// the environment for flags neither set.
    pub fn load(
        root: &Path,
        args: &[String],
        env: impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<K3sConfig> {
        let mut files = vec![root.join("etc/rancher/k3s/config.yaml")];
        if let Ok(entries) = fs::read_dir(root.join("etc/rancher/k3s/config.yaml.d")) {
            let mut more: Vec<_> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            more.sort();
            files.extend(more);
        }
        let mut values = BTreeMap::new();
        let mut file_keys = Vec::new();
        for f in files {
            let Ok(text) = fs::read_to_string(&f) else {
                continue;
            };
            for line in text.lines() {
                // A key of the file's mapping starts its line; an indented
                // line or a `- item` belongs to the key above.
                if line.starts_with([' ', '\t', '-', '#']) {
                    continue;
                }
                let line = line.trim();
                if let Some((k, v)) = line.split_once(':') {
                    let k = k.trim().trim_end_matches('+').to_string();
                    let v = v.trim().trim_matches('"').to_string();
                    file_keys.push((k.clone(), f.clone()));
                    values.insert(k, v);
                }
            }
        }
        let mut i = 0;
        while i < args.len() {
            let Some(flag) = args[i].strip_prefix("--") else {
                i += 1;
                continue;
            };
            if let Some((k, v)) = flag.split_once('=') {
                values.insert(k.to_string(), v.to_string());
            } else if args.get(i + 1).is_some_and(|n| !n.starts_with("--")) {
                values.insert(flag.to_string(), args[i + 1].clone());
                i += 1;
            } else {
                values.insert(flag.to_string(), "true".to_string());
            }
            i += 1;
        }
        for (var, key) in ENV_FLAGS {
            if !values.contains_key(*key)
                && let Some(v) = env(var).filter(|v| !v.is_empty())
            {
                values.insert((*key).to_string(), v);
            }
        }
        Ok(K3sConfig { values, file_keys })
    }

    /// A value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// A boolean flag (`true`).
    pub fn flag(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// The first key of a config file that `k3s agent` does not define
    /// ([`AGENT_FLAGS`]), and the file it is in.
    pub fn key_the_agent_does_not_define(&self) -> Option<(&str, &Path)> {
        self.file_keys
            .iter()
            .find(|(k, _)| !AGENT_FLAGS.contains(&k.as_str()))
            .map(|(k, f)| (k.as_str(), f.as_path()))
    }
}

/// The flags the server unit's `ExecStart` gives `k3s server`
/// (`etc/systemd/system/k3s.service`, then its drop-ins, a later
/// `ExecStart=` replacing it): what the server process itself runs with.
pub fn server_unit_args(root: &Path) -> Vec<String> {
    let sys = root.join("etc/systemd/system");
    let mut files = vec![sys.join("k3s.service")];
    if let Ok(entries) = fs::read_dir(sys.join("k3s.service.d")) {
        let mut more: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        more.sort();
        files.extend(more);
    }
    let mut exec = String::new();
    for f in files {
        let text = fs::read_to_string(&f)
            .unwrap_or_default()
            .replace("\\\n", " ");
        for line in text.lines() {
            if let Some(v) = line.trim().strip_prefix("ExecStart=") {
                exec = v.to_string();
            }
        }
    }
    let words: Vec<String> = exec
        .split_whitespace()
        .map(|w| w.trim_matches(['\'', '"']).to_string())
        .collect();
    words
        .iter()
        .position(|w| w == "server")
        .map(|i| words[i + 1..].to_vec())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_drop_in_wins() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("etc/rancher/k3s/config.yaml.d");
        fs::create_dir_all(&d).unwrap();
        fs::write(
            dir.path().join("etc/rancher/k3s/config.yaml"),
            "node-name: a\nserver: https://x:1\n",
        )
        .unwrap();
        fs::write(d.join("90-b.yaml"), "server: \"https://y:2\"\n").unwrap();
        fs::write(d.join("10-a.yaml"), "disable-apiserver: true\n").unwrap();
        fs::write(d.join("95-ignored.txt"), "node-name: z\n").unwrap();
        let c = K3sConfig::read(dir.path()).unwrap();
        assert_eq!(c.get("server"), Some("https://y:2"));
        assert_eq!(c.get("node-name"), Some("a"));
        assert!(c.flag("disable-apiserver"));
        assert!(!c.flag("cluster-init"));
        assert_eq!(
            c.key_the_agent_does_not_define(),
            Some(("disable-apiserver", d.join("10-a.yaml").as_path()))
        );
    }

    #[test]
    fn a_command_line_flag_beats_the_files_and_the_files_beat_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("etc/rancher/k3s")).unwrap();
        fs::write(
            dir.path().join("etc/rancher/k3s/config.yaml"),
            "node-name: a\nserver: https://file:1\n",
        )
        .unwrap();
        let env = |v: &str| match v {
            "K3S_URL" => Some("https://env:1".to_string()),
            "K3S_CLUSTER_INIT" => Some("true".to_string()),
            _ => None,
        };
        let c = K3sConfig::load(dir.path(), &[], env).unwrap();
        assert_eq!(c.get("server"), Some("https://file:1"));
        assert!(c.flag("cluster-init"));
        assert_eq!(c.key_the_agent_does_not_define(), None);
        let args = ["--node-name=b".to_string(), "--disable-etcd".to_string()];
        let c = K3sConfig::load(dir.path(), &args, env).unwrap();
        assert_eq!(c.get("node-name"), Some("b"));
        assert!(c.flag("disable-etcd"));
        assert_eq!(c.key_the_agent_does_not_define(), None);
    }

    #[test]
    fn the_stand_ins_agent_refuses_a_key_on_neither_old_list_and_a_typo_but_takes_its_own_flags() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("etc/rancher/k3s/config.yaml.d");
        fs::create_dir_all(&d).unwrap();
        let config = dir.path().join("etc/rancher/k3s/config.yaml");
        // Its own flags, an alias, an append and a list's items pass.
        fs::write(
            &config,
            "node-name: a\ns: https://x:1\nnode-label:\n- \"zone: x\"\n  # a comment: here\n",
        )
        .unwrap();
        fs::write(d.join("10-a.yaml"), "kubelet-arg+:\n  - max-pods=200\n").unwrap();
        let c = K3sConfig::read(dir.path()).unwrap();
        assert_eq!(c.key_the_agent_does_not_define(), None);
        // A server flag the old list of server-only keys missed.
        fs::write(d.join("20-b.yaml"), "supervisor-metrics: true\n").unwrap();
        let c = K3sConfig::read(dir.path()).unwrap();
        assert_eq!(
            c.key_the_agent_does_not_define(),
            Some(("supervisor-metrics", d.join("20-b.yaml").as_path()))
        );
        // A typo.
        fs::write(&config, "node-name: a\nnode-lable: zone=x\n").unwrap();
        let c = K3sConfig::read(dir.path()).unwrap();
        assert_eq!(
            c.key_the_agent_does_not_define(),
            Some(("node-lable", config.as_path()))
        );
    }

    #[test]
    fn the_stand_ins_list_of_agent_flags_is_the_products() {
        let mut lab: Vec<&str> = AGENT_FLAGS.to_vec();
        lab.sort_unstable();
        lab.dedup();
        assert_eq!(lab.len(), AGENT_FLAGS.len(), "a name twice in AGENT_FLAGS");
        for release in host::agent_flags::RELEASES {
            let mut product = release.flags.to_vec();
            product.sort_unstable();
            assert_eq!(lab, product, "k3s {}", release.minor);
        }
    }
}
