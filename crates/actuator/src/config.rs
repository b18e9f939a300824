//! Settings: the TOML config file, overridden by environment variables, then
//! by flags, turned into one validated [`Settings`] in one place. Reading
//! the file and the precedence are the `settings` crate's, shared with the
//! controller.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use protocol::{HolderIdentity, JoinUrl, Names, NodeName};
use serde::Deserialize;
use settings::layer;

use crate::cli::{ApiArgs, Cli};

/// The default config file.
pub const DEFAULT_CONFIG: &str = "/etc/fleet-role/actuator.toml";

/// The bound of one request to the local etcd member (and of connecting).
pub const ETCD_TIMEOUT: Duration = Duration::from_secs(10);

/// The config file as written. Every key is optional; see
/// `deploy/actuator.toml` for each key's meaning and default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// The host's Node name.
    pub node: Option<String>,
    /// The root every host path is under.
    pub root: Option<PathBuf>,
    /// API server URLs, tried in order.
    pub api: Option<Vec<String>>,
    /// The CA bundle that verifies the API servers.
    pub ca_file: Option<PathBuf>,
    /// The ServiceAccount token file (re-read when it changes).
    pub token_file: Option<PathBuf>,
    /// The label and annotation prefix.
    pub prefix: Option<String>,
    /// The regrade Lease's name in kube-system.
    pub lease_name: Option<String>,
    /// The shared report ConfigMap's namespace of earlier releases (read by
    /// the controller for one release; this actuator never writes it, and
    /// takes the key so an earlier settings file still reads).
    pub report_namespace: Option<String>,
    /// The namespace of this host's heartbeat Lease and report ConfigMap,
    /// and of its ServiceAccount (default `fleet-role-hosts`).
    pub hosts_namespace: Option<String>,
    /// The Lease holder the controller uses.
    pub controller_identity: Option<String>,
    /// Seconds taken off a Lease's validity for clock skew.
    pub skew_margin_secs: Option<u64>,
    /// The supervisor port a promotion joins.
    pub join_port: Option<u16>,
    /// The local etcd's health URL.
    pub etcd_health_url: Option<String>,
    /// The local etcd member's client URL (default k3s's
    /// `https://127.0.0.1:2379`, read with k3s's client certificate under
    /// `server/tls/etcd/`; an `http://` URL is read without TLS).
    pub etcd_url: Option<String>,
    /// How long a step-down waits for etcd.
    pub etcd_wait_secs: Option<u64>,
    /// How long a switch waits for the host lock.
    pub lock_timeout_secs: Option<u64>,
    /// How long one `systemctl` call may take before it is killed.
    pub systemctl_timeout_secs: Option<u64>,
    /// How long `k3s etcd-snapshot save` may take before it is killed.
    pub snapshot_timeout_secs: Option<u64>,
    /// How many swap snapshots the host keeps (0: every one).
    pub snapshot_retention: Option<u32>,
    /// How long a queued start waits for its unit to be active.
    pub start_wait_secs: Option<u64>,
    /// How long a queued stop waits for its unit to be stopped.
    pub stop_wait_secs: Option<u64>,
    /// How often the watcher decides again without a change.
    pub resync_secs: Option<u64>,
    /// How often the watcher writes its heartbeat (the report's host part).
    pub heartbeat_secs: Option<u64>,
    /// Where `watch` serves `/metrics` and `/healthz` (off when unset).
    pub metrics_address: Option<String>,
    /// A Docker host's containers (`[docker]`); absent on a native host.
    pub docker: Option<crate::docker_host::DockerFile>,
}

/// A settings error: one line that names the key or file.
pub use settings::Error as ConfigError;

impl FileConfig {
    /// Reads `path`; a missing default file is an empty config, a missing
    /// named one is an error.
    pub fn load(path: Option<&Path>) -> Result<FileConfig, ConfigError> {
        settings::load(path, Some(Path::new(DEFAULT_CONFIG)))
    }
}

/// The validated settings of one actuator.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The host's Node name.
    pub node: NodeName,
    /// The host root.
    pub root: PathBuf,
    /// The protocol's names.
    pub names: Names,
    /// API server URLs, in order.
    pub api: Vec<String>,
    /// The CA bundle file.
    pub ca_file: Option<PathBuf>,
    /// The token file.
    pub token_file: Option<PathBuf>,
    /// Clock-skew margin.
    pub skew_margin: Duration,
    /// The join port.
    pub join_port: u16,
    /// etcd's health URL.
    pub etcd_health_url: String,
    /// The local etcd member, as its client API reads it.
    pub etcd: etcdaccess::Endpoint,
    /// How long a step-down waits for etcd.
    pub etcd_wait: Duration,
    /// How long a switch waits for the lock.
    pub lock_timeout: Duration,
    /// The bound of one `systemctl` call.
    pub systemctl_timeout: Duration,
    /// The bound of one `k3s etcd-snapshot save`.
    pub snapshot_timeout: Duration,
    /// How many swap snapshots the host keeps (0: every one).
    pub snapshot_retention: u32,
    /// How long a queued start waits for its unit to be active.
    pub start_wait: Duration,
    /// How long a queued stop waits for its unit to be stopped.
    pub stop_wait: Duration,
    /// The watcher's resync period.
    pub resync: Duration,
    /// The heartbeat period: the report's host part is written at most once
    /// a period, and at once on a change of the demotion verdict.
    pub heartbeat: Duration,
    /// Where `watch` serves its metrics; `None`: not served.
    pub metrics_address: Option<std::net::SocketAddr>,
    /// A Docker host's containers; `None` on a native host (systemd).
    pub docker: Option<crate::docker_host::DockerSettings>,
}

/// Values given by flags or the environment, which win over the file.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--node` / `FLEET_ROLE_NODE`.
    pub node: Option<String>,
    /// `--root` / `FLEET_ROLE_ROOT`.
    pub root: Option<PathBuf>,
    /// `--api` (repeatable) / `FLEET_ROLE_API` (comma-separated).
    pub api: Vec<String>,
    /// `--ca-file` / `FLEET_ROLE_CA_FILE`.
    pub ca_file: Option<PathBuf>,
    /// `--token-file` / `FLEET_ROLE_TOKEN_FILE`.
    pub token_file: Option<PathBuf>,
    /// `--lock-timeout`.
    pub lock_timeout_secs: Option<u64>,
}

impl Overrides {
    /// The global flags of `cli` (and their environment variables), with
    /// `api` for a command that reaches the API and `lock_timeout_secs` for
    /// one that waits for the host lock.
    pub fn from_flags(cli: &Cli, api: Option<&ApiArgs>, lock_timeout_secs: Option<u64>) -> Self {
        Overrides {
            node: cli.node.clone(),
            root: cli.root.clone(),
            api: api.map(|a| a.api.clone()).unwrap_or_default(),
            ca_file: api.and_then(|a| a.ca_file.clone()),
            token_file: api.and_then(|a| a.token_file.clone()),
            lock_timeout_secs,
        }
    }
}

/// The host `is` asks about, from the flags alone: systemd runs it as an
/// `ExecCondition=` before every start of a k3s unit, so it reads no config
/// file (one that does not parse must not stop k3s from starting) and needs
/// no Node name (the role file is all it reads).
pub fn condition_host(cli: &Cli, clock: &clock::Clock) -> host::Host {
    let root = cli.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    host::Host::new(root, cli.node.clone().unwrap_or_default(), clock.clone())
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
}

fn invalid(key: &'static str, why: impl std::fmt::Display) -> ConfigError {
    ConfigError::invalid(key, why)
}

impl Settings {
    /// Merges the file and the overrides, and validates everything.
    pub fn resolve(file: FileConfig, o: Overrides) -> Result<Settings, ConfigError> {
        let node_raw = layer(o.node, file.node)
            .or_else(hostname)
            .ok_or_else(|| invalid("node", "no --node and no hostname"))?;
        let node = NodeName::parse(&node_raw).map_err(|e| invalid("node", e.to_string()))?;
        let api = if o.api.is_empty() {
            file.api.unwrap_or_default()
        } else {
            o.api
        };
        for url in &api {
            // An API candidate is an https URL of a host and port, as a join URL is.
            JoinUrl::parse(url).map_err(|e| invalid("api", e.to_string()))?;
        }
        let defaults = Names::default();
        let prefix = file.prefix.unwrap_or(defaults.prefix);
        if prefix.is_empty() || NodeName::parse(&prefix).is_err() {
            return Err(invalid("prefix", "must be a DNS subdomain"));
        }
        let lease_name = file.lease_name.unwrap_or(defaults.lease_name);
        NodeName::parse(&lease_name).map_err(|e| invalid("lease_name", e.to_string()))?;
        let report_namespace = file.report_namespace.unwrap_or(defaults.report_namespace);
        protocol::SwapId::parse(&report_namespace)
            .map_err(|e| invalid("report_namespace", e.to_string()))?;
        let hosts_namespace = file.hosts_namespace.unwrap_or(defaults.hosts_namespace);
        protocol::SwapId::parse(&hosts_namespace)
            .map_err(|e| invalid("hosts_namespace", e.to_string()))?;
        let controller_identity = HolderIdentity::parse(
            &file
                .controller_identity
                .unwrap_or(defaults.controller_identity),
        )
        .map_err(|e| invalid("controller_identity", e))?
        .into_string();
        let etcd_health_url = file
            .etcd_health_url
            .unwrap_or_else(|| host::etcd::DEFAULT_HEALTH_URL.to_string());
        if !etcd_health_url.starts_with("http://")
            || etcd_health_url.chars().any(|c| c.is_control() || c == ' ')
        {
            return Err(invalid(
                "etcd_health_url",
                "must be a plain http:// URL (etcd's metrics listener)",
            ));
        }
        let root = layer(o.root, file.root).unwrap_or_else(|| PathBuf::from("/"));
        let mut etcd = etcdaccess::Endpoint::k3s(&root.join("var/lib/rancher/k3s"), ETCD_TIMEOUT);
        if let Some(url) = file.etcd_url {
            let plain = url.starts_with("http://");
            if !(plain || url.starts_with("https://"))
                || url.chars().any(|c| c.is_control() || c == ' ')
            {
                return Err(invalid(
                    "etcd_url",
                    "must be an http:// or https:// URL (the local etcd member)",
                ));
            }
            if plain {
                etcd.tls = None;
            }
            etcd.url = url;
        }
        let join_port = file.join_port.unwrap_or(6443);
        if join_port == 0 {
            return Err(invalid("join_port", "must be 1-65535"));
        }
        // Every `*_secs` key is at most a week (`settings::MAX_SECS`): the
        // step's bound adds several of them, and the Lease check takes the
        // skew margin as i64.
        let secs = settings::seconds;
        let bound = |key: &'static str, v: Option<u64>, default: u64| match v {
            Some(0) => Err(invalid(key, "must be at least 1 second")),
            v => secs(key, v, default),
        };
        let systemctl_timeout = bound(
            "systemctl_timeout_secs",
            file.systemctl_timeout_secs,
            host::systemd::DEFAULT_TIMEOUT.as_secs(),
        )?;
        let snapshot_timeout = bound(
            "snapshot_timeout_secs",
            file.snapshot_timeout_secs,
            host::k3s::DEFAULT_SNAPSHOT_TIMEOUT.as_secs(),
        )?;
        let start_wait = bound(
            "start_wait_secs",
            file.start_wait_secs,
            host::switch::DEFAULT_START_WAIT.as_secs(),
        )?;
        let stop_wait = bound(
            "stop_wait_secs",
            file.stop_wait_secs,
            host::switch::DEFAULT_STOP_WAIT.as_secs(),
        )?;
        let metrics_address =
            settings::listen_address("metrics_address", file.metrics_address.as_deref())?;
        Ok(Settings {
            node,
            root,
            names: Names {
                prefix,
                lease_name,
                report_namespace,
                hosts_namespace,
                controller_identity,
            },
            api,
            ca_file: layer(o.ca_file, file.ca_file),
            token_file: layer(o.token_file, file.token_file),
            skew_margin: secs("skew_margin_secs", file.skew_margin_secs, 5)?,
            join_port,
            etcd_health_url,
            etcd,
            etcd_wait: secs("etcd_wait_secs", file.etcd_wait_secs, 120)?,
            lock_timeout: secs(
                "lock_timeout_secs",
                layer(o.lock_timeout_secs, file.lock_timeout_secs),
                60,
            )?,
            systemctl_timeout,
            snapshot_timeout,
            snapshot_retention: file
                .snapshot_retention
                .unwrap_or(host::k3s::DEFAULT_SNAPSHOT_RETENTION),
            start_wait,
            stop_wait,
            resync: secs("resync_secs", file.resync_secs, 10)?.max(Duration::from_secs(1)),
            heartbeat: secs("heartbeat_secs", file.heartbeat_secs, 60)?.max(Duration::from_secs(1)),
            metrics_address,
            docker: file.docker.map(|d| d.resolve()).transpose()?,
        })
    }

    /// Reads the config file `cli` names (or the default, if present) and
    /// resolves it with the flags ([`Overrides::from_flags`]).
    pub fn from_flags(
        cli: &Cli,
        api: Option<&ApiArgs>,
        lock_timeout_secs: Option<u64>,
    ) -> Result<Settings, ConfigError> {
        let file = FileConfig::load(cli.config.as_deref())?;
        Settings::resolve(file, Overrides::from_flags(cli, api, lock_timeout_secs))
    }

    /// The host these settings act on, reading time from `clock`. A Docker
    /// host's calls block on `runtime` (see [`host::docker::DockerUnits::new`]
    /// for what it must be); a native host's never use it.
    pub fn host(&self, clock: &clock::Clock, runtime: &tokio::runtime::Handle) -> host::Host {
        let mut h = host::Host::new(&self.root, self.node.as_str(), clock.clone())
            .with_systemctl_timeout(self.systemctl_timeout);
        h.etcd_health_url = self.etcd_health_url.clone();
        h.etcd_wait = self.etcd_wait;
        h.snapshot_timeout = self.snapshot_timeout;
        h.snapshot_retention = self.snapshot_retention;
        h.start_wait = self.start_wait;
        h.stop_wait = self.stop_wait;
        match &self.docker {
            // A Docker host's server is started once its etcd serves, as
            // a native one's unit is active once k3s sent READY=1.
            Some(d) => h.with_docker(
                host::docker::DockerUnits::new(
                    dockerengine::Engine::new(&d.socket).with_timeout(self.systemctl_timeout),
                    d.containers.clone(),
                    d.stop_grace,
                    runtime.clone(),
                    clock,
                )
                .with_server_ready(self.etcd_health_url.clone()),
            ),
            None => h,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(node: &str) -> Overrides {
        Overrides {
            node: Some(node.into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_command_lines_flags_become_the_overrides() {
        use clap::Parser;
        let cli = Cli::parse_from([
            "fleet-role-actuator",
            "--node",
            "n1",
            "--root",
            "/r",
            "status",
            "--api",
            "https://10.0.0.1:6443,https://10.0.0.2:6443",
            "--token-file",
            "/t",
        ]);
        let crate::cli::Command::Status(api) = &cli.command else {
            panic!("{cli:?}")
        };
        let o = Overrides::from_flags(&cli, Some(api), Some(7));
        assert_eq!(o.node.as_deref(), Some("n1"));
        assert_eq!(o.root, Some(PathBuf::from("/r")));
        assert_eq!(o.api, ["https://10.0.0.1:6443", "https://10.0.0.2:6443"]);
        assert_eq!(o.token_file, Some(PathBuf::from("/t")));
        assert_eq!(o.ca_file, None);
        assert_eq!(o.lock_timeout_secs, Some(7));
        assert_eq!(
            condition_host(&cli, &clock::Clock::manual(0)).paths.root(),
            Path::new("/r")
        );
    }

    #[test]
    fn flags_win_over_the_file_and_defaults_fill_the_rest() {
        let file: FileConfig = toml::from_str(
            "node = \"from-file\"\napi = [\"https://10.0.0.1:6443\"]\nlock_timeout_secs = 9",
        )
        .unwrap();
        let s = Settings::resolve(
            file,
            Overrides {
                api: vec!["https://10.0.0.2:6443".into()],
                ..o("from-flag")
            },
        )
        .unwrap();
        assert_eq!(s.node.as_str(), "from-flag");
        assert_eq!(s.api, vec!["https://10.0.0.2:6443"]);
        assert_eq!(s.lock_timeout, Duration::from_secs(9));
        assert_eq!(s.root, PathBuf::from("/"));
        assert_eq!(s.names, Names::default());
        assert_eq!(s.join_port, 6443);
        assert_eq!(s.metrics_address, None, "metrics are off by default");
    }

    #[test]
    fn the_shipped_config_leaves_metrics_off_and_its_example_address_turns_them_on() {
        let shipped = include_str!("../../../deploy/actuator.toml");
        let s = Settings::resolve(toml::from_str(shipped).unwrap(), o("n")).unwrap();
        assert_eq!(s.metrics_address, None);
        let example = shipped
            .lines()
            .find_map(|l| l.strip_prefix("# metrics_address = "))
            .expect("the shipped config shows metrics_address");
        let file: FileConfig = toml::from_str(&format!("metrics_address = {example}")).unwrap();
        let s = Settings::resolve(file, o("n")).unwrap();
        assert!(s.metrics_address.is_some_and(|a| a.ip().is_loopback()));
    }

    #[test]
    fn a_docker_table_makes_the_host_switch_containers_and_the_shipped_config_leaves_systemd() {
        let shipped = include_str!("../../../deploy/actuator.toml");
        let s = Settings::resolve(toml::from_str(shipped).unwrap(), o("n")).unwrap();
        assert_eq!(s.docker, None);
        let clock = clock::Clock::system();
        // (Never driven: the test makes no Docker call.)
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(matches!(
            s.host(&clock, rt.handle()).units(),
            host::units::Units::Systemd(_)
        ));
        // The shipped file's commented-out table, uncommented, is a Docker host.
        let table: String = shipped
            .lines()
            .skip_while(|l| *l != "# [docker]")
            .map_while(|l| l.strip_prefix("# "))
            .filter(|l| l.starts_with('[') || l.contains(" = "))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(table.contains("server_container"), "{table}");
        let s = Settings::resolve(toml::from_str(&table).unwrap(), o("n")).unwrap();
        let d = s.docker.clone().expect("a [docker] table");
        assert_eq!(d.containers, host::docker::Containers::default());
        match s.host(&clock, rt.handle()).units() {
            host::units::Units::Docker(u) => assert_eq!(u.containers(), &d.containers),
            other => panic!("a Docker host's units are containers: {other:?}"),
        }
        assert!(toml::from_str::<FileConfig>("[docker]\ncontainer = \"k3s\"").is_err());
    }

    #[test]
    fn a_metrics_address_turns_the_endpoints_on() {
        let file: FileConfig = toml::from_str("metrics_address = \"127.0.0.1:9465\"").unwrap();
        let s = Settings::resolve(file, o("n")).unwrap();
        assert_eq!(s.metrics_address, Some("127.0.0.1:9465".parse().unwrap()));
    }

    #[test]
    fn an_unknown_key_or_a_bad_value_is_a_clear_error() {
        assert!(toml::from_str::<FileConfig>("nodes = \"x\"").is_err());
        let bad = |file: &str, node: &str| {
            Settings::resolve(toml::from_str(file).unwrap(), o(node))
                .unwrap_err()
                .to_string()
        };
        assert!(bad("", "Bad Node").contains("invalid node"));
        assert!(bad("api = [\"http://x:1\"]", "n").contains("invalid api"));
        assert!(bad("etcd_health_url = \"https://x\"", "n").contains("etcd_health_url"));
        assert!(bad("report_namespace = \"a/b\"", "n").contains("report_namespace"));
        assert!(bad("prefix = \"\"", "n").contains("prefix"));
        assert!(bad("join_port = 0", "n").contains("join_port"));
        assert!(bad("controller_identity = \"a b\"", "n").contains("controller_identity"));
        assert!(bad("systemctl_timeout_secs = 0", "n").contains("systemctl_timeout_secs"));
        assert!(bad("snapshot_timeout_secs = 0", "n").contains("snapshot_timeout_secs"));
        assert!(bad("start_wait_secs = 0", "n").contains("start_wait_secs"));
        assert!(bad("stop_wait_secs = 0", "n").contains("stop_wait_secs"));
        assert!(bad("metrics_address = \"nowhere\"", "n").contains("metrics_address"));
    }

    #[test]
    fn a_seconds_setting_too_large_is_an_error_naming_its_key_never_a_panic() {
        let keys = [
            "skew_margin_secs",
            "etcd_wait_secs",
            "lock_timeout_secs",
            "systemctl_timeout_secs",
            "snapshot_timeout_secs",
            "start_wait_secs",
            "stop_wait_secs",
            "resync_secs",
            "heartbeat_secs",
        ];
        for key in keys {
            let file = format!("{key} = 18446744073709551615");
            let err = Settings::resolve(toml::from_str(&file).unwrap(), o("n"))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(&format!("invalid {key}: ")), "{err}");
        }
        // The flag too.
        let err = Settings::resolve(
            FileConfig::default(),
            Overrides {
                lock_timeout_secs: Some(u64::MAX),
                ..o("n")
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("lock_timeout_secs"), "{err}");
        // At the bound, every step's bound is still a sum that fits.
        let most = settings::MAX_SECS;
        let file = keys.map(|k| format!("{k} = {most}")).join("\n");
        let s = Settings::resolve(toml::from_str(&file).unwrap(), o("n")).unwrap();
        assert_eq!(s.start_wait, Duration::from_secs(most));
    }

    #[test]
    fn a_missing_named_config_file_is_an_error_and_a_missing_default_is_not() {
        let err = FileConfig::load(Some(Path::new("/nonexistent/fleet-role.toml"))).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/fleet-role.toml"));
    }
}
