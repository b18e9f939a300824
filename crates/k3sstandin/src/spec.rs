//! The lab's description, written by `up` into `<lab>/lab.json` and read by
//! every k3s stand-in, `status`, `down` and the tests.

use std::{
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
    time::Duration,
};

use protocol::Role;
use serde::{Deserialize, Serialize};

/// One host.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostSpec {
    /// Its Node name.
    pub name: String,
    /// Its address.
    pub ip: Ipv4Addr,
    /// The role it was installed with.
    pub role: Role,
}

/// Timings of the lab's k3s. The etcd leader's learner loop runs at k3s's
/// pace by default (15 s); the kubelet's heartbeat is shorter than a
/// kubelet's so a Node's readiness is seen within seconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Timings {
    /// How often the etcd leader's loop runs (k3s's `manageTickerTime`,
    /// 15 s, the default): it promotes learners, removes a stalled one and
    /// writes `EtcdIsVoter`. A test sets a faster pace only where it says why.
    pub promote_every_ms: u64,
    /// How often a kubelet heartbeats its Node and renews its node Lease
    /// (kubelet: 10 s).
    pub heartbeat_ms: u64,
    /// How long the etcd leader lets a learner go without raft progress
    /// before removing it (k3s's `learnerMaxStallTime`, 5 min, the default).
    #[serde(default = "default_learner_max_stall_ms")]
    pub learner_max_stall_ms: u64,
}

fn default_learner_max_stall_ms() -> u64 {
    LEARNER_MAX_STALL.as_millis() as u64
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            promote_every_ms: MANAGE_EVERY.as_millis() as u64,
            heartbeat_ms: 2000,
            learner_max_stall_ms: default_learner_max_stall_ms(),
        }
    }
}

/// k3s's `manageTickerTime`: how often the leader's loop runs.
pub const MANAGE_EVERY: Duration = Duration::from_secs(15);

/// k3s's `learnerMaxStallTime`: a learner whose applied raft index has not
/// moved for this long is removed by the leader.
pub const LEARNER_MAX_STALL: Duration = Duration::from_secs(5 * 60);

/// The etcd leader loop's period while the lab brings its servers up.
pub const BRING_UP_PACE: Duration = Duration::from_secs(2);

/// The longest [`LabSpec::hold_snapshots_file`] holds a snapshot: a test
/// that forgot its hold must not leave a swap waiting for ever.
pub const SNAPSHOT_HOLD_BOUND: Duration = Duration::from_secs(5 * 60);

/// The whole lab.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabSpec {
    /// The lab's directory.
    pub dir: PathBuf,
    /// The hosts, servers first.
    pub hosts: Vec<HostSpec>,
    /// The kube-apiserver binary.
    pub kube_apiserver: PathBuf,
    /// The etcd binary.
    pub etcd: PathBuf,
    /// etcdutl, for a cluster reset from a snapshot (`k3s/reset.rs`); none
    /// when it was not built.
    #[serde(default)]
    pub etcdutl: Option<PathBuf>,
    /// The fleet-role-actuator binary.
    pub actuator: PathBuf,
    /// The directory holding `systemctl` (the stand-in).
    pub standin_dir: PathBuf,
    /// This program.
    pub lab_bin: PathBuf,
    /// Timings.
    pub timings: Timings,
}

/// The supervisor's port (k3s's `https-listen-port`, 6443), on every
/// address: what every client of a host's API reaches (`k3s/supervisor.rs`).
pub const API_PORT: u16 = 6443;
/// kube-apiserver's own port, on `127.0.0.1` only, behind the supervisor
/// (k3s: `APIServerPort = HTTPSPort + 1`, `bind-address` loopback).
pub const APISERVER_PORT: u16 = API_PORT + 1;
/// etcd's client port.
pub const ETCD_CLIENT_PORT: u16 = 2379;
/// etcd's peer port.
pub const ETCD_PEER_PORT: u16 = 2380;
/// etcd's metrics port (where `/health` is served, in plain HTTP).
pub const ETCD_METRICS_PORT: u16 = 2381;

impl LabSpec {
    /// The spec file of the lab in `dir`.
    pub fn file(dir: &Path) -> PathBuf {
        dir.join("lab.json")
    }

    /// Reads the spec of the lab in `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<LabSpec> {
        let text = std::fs::read_to_string(Self::file(dir)).map_err(|e| {
            anyhow::anyhow!("no lab in {}: {e} (run fleet-role-lab up)", dir.display())
        })?;
        Ok(serde_json::from_str(&text)?)
    }

    /// Writes the spec.
    pub fn save(&self) -> anyhow::Result<()> {
        std::fs::write(Self::file(&self.dir), serde_json::to_string_pretty(self)?)?;
        Ok(())
    }

    /// A host by name.
    pub fn host(&self, name: &str) -> Option<&HostSpec> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// A host's root directory.
    pub fn root(&self, name: &str) -> PathBuf {
        self.dir.join("hosts").join(name)
    }

    /// The PKI directory.
    pub fn pki_dir(&self) -> PathBuf {
        self.dir.join("pki")
    }

    /// The admin token file.
    pub fn tokens_file(&self) -> PathBuf {
        self.dir.join("pki/tokens.csv")
    }

    /// Every address, for the PKI.
    pub fn ips(&self) -> Vec<IpAddr> {
        self.hosts.iter().map(|h| IpAddr::V4(h.ip)).collect()
    }

    /// The API URL of a host.
    pub fn api_url(ip: Ipv4Addr) -> String {
        format!("https://{ip}:{API_PORT}")
    }

    /// etcd's client URL on a host (TLS, as k3s serves it).
    pub fn etcd_url(ip: Ipv4Addr) -> String {
        format!("https://{ip}:{ETCD_CLIENT_PORT}")
    }

    /// etcd's peer URL on a host (TLS).
    pub fn etcd_peer_url(ip: Ipv4Addr) -> String {
        format!("https://{ip}:{ETCD_PEER_PORT}")
    }

    /// etcd's metrics URL on a host, plain HTTP: `127.0.0.1:2381` as k3s
    /// binds it, inside each host's own network namespace (so the same
    /// for every host).
    pub fn etcd_metrics_url() -> String {
        format!("http://{}:{ETCD_METRICS_PORT}", Ipv4Addr::LOCALHOST)
    }

    /// A host's etcd as the lab's own tools reach it: TLS with the lab's
    /// etcd client certificate (`pki/etcd/`).
    pub fn etcd(&self, ip: Ipv4Addr) -> anyhow::Result<crate::etcd_gw::Endpoint> {
        let tls =
            crate::etcd_tls::client_config(&crate::lab_pki::etcd_client_dir(&self.pki_dir()))?;
        Ok(crate::etcd_gw::Endpoint::tls(Self::etcd_url(ip), tls))
    }

    /// Every host's API URL (any host may become a server), servers first.
    pub fn all_api_urls(&self) -> Vec<String> {
        self.hosts.iter().map(|h| Self::api_url(h.ip)).collect()
    }

    /// [`LabSpec::all_api_urls`] as a TOML array (the actuator's `api`, the
    /// controller's `api_servers`).
    pub fn all_api_urls_toml(&self) -> String {
        let quoted: Vec<String> = self
            .all_api_urls()
            .iter()
            .map(|u| format!("\"{u}\""))
            .collect();
        format!("[{}]", quoted.join(", "))
    }

    /// A file that, while it exists, holds every learner back: the etcd
    /// leader's loop skips the promotion (a fault the lab's tests inject).
    pub fn hold_promotions_file(&self) -> PathBuf {
        self.dir.join("inject/hold-promotions")
    }

    /// A file that, while it exists, holds every `k3s etcd-snapshot save`
    /// before it reads the member (at most [`SNAPSHOT_HOLD_BOUND`]): a
    /// test's moment between a swap's gates and its next step.
    pub fn hold_snapshots_file(&self) -> PathBuf {
        self.dir.join("inject/hold-snapshots")
    }

    /// A file holding a number of milliseconds: while it exists, the etcd
    /// leader's loop removes a learner stalled that long, in place of
    /// `learner_max_stall_ms` (a fault the lab's tests inject for one part of
    /// a test only: a learner that starts slowly on a loaded machine is
    /// then given k3s's own 5 minutes again).
    pub fn short_stall_file(&self) -> PathBuf {
        self.dir.join("inject/learner-max-stall-ms")
    }

    /// How long a learner may make no raft progress now
    /// ([`LabSpec::short_stall_file`], else `learner_max_stall_ms`).
    pub fn learner_max_stall(&self) -> Duration {
        let ms = std::fs::read_to_string(self.short_stall_file())
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(self.timings.learner_max_stall_ms);
        Duration::from_millis(ms)
    }

    /// A file naming Nodes, one a line: while it exists, the etcd leader's
    /// loop writes no `EtcdIsVoter` on them (a fault the lab's tests inject:
    /// k3s writes the condition through the API and only logs a failed
    /// write, so the condition can lag behind etcd's membership).
    pub fn hold_etcd_is_voter_file(&self) -> PathBuf {
        self.dir.join("inject/hold-etcd-is-voter")
    }

    /// A file that, while it exists, has the etcd leader's loop run every
    /// [`BRING_UP_PACE`] instead of `promote_every_ms`: the lab makes it
    /// while it brings its servers up one by one (making the world, not a
    /// test of it) and removes it before any actuator starts, so every test
    /// meets k3s's pace.
    pub fn bring_up_pace_file(&self) -> PathBuf {
        self.dir.join("pace/bring-up")
    }

    /// The etcd leader loop's period now ([`LabSpec::bring_up_pace_file`]).
    pub fn promote_every(&self) -> Duration {
        if self.bring_up_pace_file().exists() {
            BRING_UP_PACE
        } else {
            Duration::from_millis(self.timings.promote_every_ms)
        }
    }

    /// The heartbeat period.
    pub fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.timings.heartbeat_ms)
    }
}
