//! The flags `k3s agent` defines: the only keys it takes in k3s's config
//! files.
//!
//! More in docs/internals.md, "host: agent_flags".

/// The names `k3s agent` v1.32 to v1.36 defines (see the module's sources).
const V1_32_TO_V1_36: &[&str] = &[
    "airgap-extra-registry",
    "alsologtostderr",
    "bind-address",
    "c",
    "config",
    "container-runtime-endpoint",
    "d",
    "data-dir",
    "debug",
    "default-runtime",
    "disable-apiserver-lb",
    "disable-default-registry-endpoint",
    "docker",
    "enable-pprof",
    "flannel-cni-conf",
    "flannel-conf",
    "flannel-iface",
    "i",
    "image-credential-provider-bin-dir",
    "image-credential-provider-config",
    "image-service-endpoint",
    "kube-proxy-arg",
    "kubelet-arg",
    "l",
    "lb-server-port",
    "log",
    "node-external-dns",
    "node-external-ip",
    "node-internal-dns",
    "node-ip",
    "node-label",
    "node-name",
    "node-taint",
    "nonroot-devices",
    "pause-image",
    "prefer-bundled-bin",
    "private-registry",
    "protect-kernel-defaults",
    "resolv-conf",
    "rootless",
    "s",
    "selinux",
    "server",
    "snapshotter",
    "t",
    "token",
    "token-file",
    "v",
    "vmodule",
    "vpn-auth",
    "vpn-auth-file",
    "with-node-id",
];

/// A k3s minor release and the flag names its agent defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// The minor release (`v1.34`).
    pub minor: &'static str,
    /// The flag names, aliases included, without `--`.
    pub flags: &'static [&'static str],
}

/// The k3s minor releases whose agent flags were read, oldest first.
pub const RELEASES: &[Release] = &[
    Release {
        minor: "v1.32",
        flags: V1_32_TO_V1_36,
    },
    Release {
        minor: "v1.33",
        flags: V1_32_TO_V1_36,
    },
    Release {
        minor: "v1.34",
        flags: V1_32_TO_V1_36,
    },
    Release {
        minor: "v1.35",
        flags: V1_32_TO_V1_36,
    },
    Release {
        minor: "v1.36",
        flags: V1_32_TO_V1_36,
    },
];

/// Whether `key` of a k3s config file is a flag `k3s agent` defines, in
/// every release of [`RELEASES`]: which release the host runs is not known
/// here, so a key one of them lacks counts as undefined. A trailing `+`
/// (append) is the same flag.
pub fn is_agent_flag(key: &str) -> bool {
    let key = key.strip_suffix('+').unwrap_or(key);
    RELEASES.iter().all(|r| r.flags.contains(&key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_releases_list_is_sorted_without_repeats_and_names_no_dashes() {
        for r in RELEASES {
            assert!(r.flags.windows(2).all(|w| w[0] < w[1]), "{}", r.minor);
            assert!(r.flags.iter().all(|f| !f.starts_with('-')), "{}", r.minor);
        }
    }

    #[test]
    fn names_aliases_and_appends_are_agent_flags_and_server_keys_typos_and_help_are_not() {
        for key in ["node-label", "kubelet-arg+", "t", "server", "bind-address"] {
            assert!(is_agent_flag(key), "{key}");
        }
        for key in [
            "cluster-init",
            "supervisor-metrics",
            "servicelb-namespace",
            "kubelet-args",
            "help",
            "h",
            "--node-label",
            "",
        ] {
            assert!(!is_agent_flag(key), "{key}");
        }
    }
}
