//! Settings: the TOML config file, then flags, turned into one validated
//! [`Settings`] in one place. Reading the file and the precedence are the
//! `settings` crate's, shared with the actuator.
//!
//! Every key of the file is optional; each one's meaning and default is
//! documented on [`FileConfig`] and in `docs/controller.md`.

use std::{path::Path, time::Duration};

use clock::Clock;
use fleetdecide::Timeouts;
use protocol::{HolderIdentity, Names, NodeName, names};
use serde::Deserialize;

/// The config file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// The prefix of fleet-role's labels and annotations
    /// (default `github-runner.exadev.com`; the actuators must use the same).
    pub prefix: Option<String>,
    /// The regrade Lease's name in `kube-system` (default `fleet-regrade`).
    pub lease_name: Option<String>,
    /// The shared report ConfigMap's namespace of earlier releases
    /// (default `platform`), read for one release beside the per-host
    /// reports.
    pub report_namespace: Option<String>,
    /// The namespace of the per-host objects (default `fleet-role-hosts`):
    /// each host's ServiceAccount, heartbeat Lease and report ConfigMap.
    pub hosts_namespace: Option<String>,
    /// The Lease holder identity (default `fleet-role`); the actuators'
    /// `controller_identity` must name the same.
    pub identity: Option<String>,
    /// How many etcd voters the fleet has (odd; default 3). A voter Node
    /// missing from the API counts as a down voter in the quorum gate.
    pub voters: Option<usize>,
    /// The Node label whose value is a host's zone: `run` keeps at most
    /// ⌈voters / zones⌉ voters in a zone where the zones' hosts allow it
    /// (default `topology.kubernetes.io/zone`; `""`: voters are not spread).
    pub spread_label: Option<String>,
    /// The regrade Lease's duration in seconds (default 60); it is renewed
    /// every third of it.
    pub lease_duration_secs: Option<i64>,
    /// Seconds before the Lease lapses within which no irreversible write is
    /// made (default 5; less than half the duration).
    pub skew_margin_secs: Option<i64>,
    /// How long to wait before trying again after an API error, in
    /// milliseconds (default 1000). (It was the poll interval; the
    /// controller now watches, and the key is kept for existing files.)
    pub poll_millis: Option<u64>,
    /// `run`: seconds a voter may be NotReady before it is replaced
    /// (default 300).
    pub grace_period_secs: Option<i64>,
    /// `run`: seconds to wait after a swap ends (done, wound down or
    /// stopped) before the next starts (default 60).
    pub settle_secs: Option<i64>,
    /// `run`: seconds a voter that shows planned maintenance (cordoned,
    /// kured's reboot mark, `<prefix>/maintenance`) may be NotReady before
    /// it is replaced (default 1800; never shorter than the grace period).
    pub maintenance_grace_secs: Option<i64>,
    /// `run`: at most this many failed swaps of one voter within
    /// `retry_period_secs` (default 2, at least 1).
    pub retry_max: Option<u32>,
    /// `run`: the period failed swaps are counted over (default 86400).
    pub retry_period_secs: Option<i64>,
    /// `run`: the wait after a voter's first failed swap, doubled after
    /// each further one (default 600).
    pub retry_backoff_secs: Option<i64>,
    /// `run`: how long a host it replaced must have been Ready again before
    /// it stands by (default 3600).
    pub standby_min_healthy_secs: Option<i64>,
    /// `run`: when it may start a swap by itself (default: at any time).
    pub window: Option<FileWindow>,
    /// Seconds without a renewal of a Node's node Lease after which it
    /// counts as NotReady whatever its Ready condition says (default 40,
    /// the node lifecycle controller's default grace).
    pub heartbeat_grace_secs: Option<i64>,
    /// The oldest actuator heartbeat a swap's host may show.
    pub actuator_heartbeat_max_age_secs: Option<i64>,
    /// `run`: the Lease its instances elect a leader with (default
    /// `fleet-role-leader`; not the regrade Lease).
    pub leader_lease_name: Option<String>,
    /// `run`: the leader Lease's namespace (default `platform`).
    pub leader_lease_namespace: Option<String>,
    /// `run`: the leader Lease's duration in seconds (default 15): a
    /// standby takes over within about this long after the leader died.
    pub leader_lease_duration_secs: Option<u64>,
    /// `run`: replace a voter for the only reason that its Node does not
    /// carry the eligibility label (default false: such a voter is
    /// reported, not replaced).
    pub replace_ineligible: Option<bool>,
    /// The group whose members may write what only the controller and the
    /// hosts write (the regrade Lease, the marks on Nodes, the hosts'
    /// reports), for recovery by hand; rendered into the admission
    /// policies by `fleet-role manifests` (default `system:masters`, the
    /// group of k3s's admin kubeconfig).
    pub admin_group: Option<String>,
    /// `run`: where to serve `/metrics`, `/healthz` and `/readyz`
    /// (`HOST:PORT`; default: not served).
    pub metrics_address: Option<String>,
    /// `run`: the API servers to fail over between (`https://HOST:PORT`),
    /// in order, with the kubeconfig's credential and CA; default: the
    /// kubeconfig's server alone.
    pub api_servers: Option<Vec<String>>,
    /// The termination grace, in seconds, that the drain's evictions give
    /// each pod of the outgoing host (default: none set, so each pod gets
    /// its own `terminationGracePeriodSeconds`). A bound set here cuts a
    /// long-running job's grace short: set it only when that is acceptable.
    pub drain_grace_secs: Option<i64>,
    /// Whether the drain evicts the outgoing voter's pods that no
    /// controller owns, which nothing starts again (default false: such a
    /// pod stops the swap, named, as `kubectl drain` refuses it without
    /// `--force`). `swap --force` sets it for one swap; this sets it for
    /// every swap, `run`'s included.
    pub drain_force: Option<bool>,
    /// Each step's timeout in seconds.
    #[serde(default)]
    pub timeouts: FileTimeouts,
}

/// `[window]`: when `run` may start a swap by itself, in kured's form.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileWindow {
    /// The days it opens on (`mon`, `monday`, `mo` or `1`; 0 is Sunday);
    /// none: every day.
    #[serde(default)]
    pub days: Vec<String>,
    /// When it opens, `HH:MM` or `HH:MM:SS` (default `00:00`).
    pub start: Option<String>,
    /// When it closes (default `24:00`); before the start, the next day.
    pub end: Option<String>,
    /// `UTC` (the default), a fixed offset such as `+02:00`, or a name
    /// from the system's zone database (`Europe/Berlin`).
    pub time_zone: Option<String>,
}

/// `[timeouts]`: each step's timeout, in seconds.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileTimeouts {
    /// The snapshot (default 300).
    pub snapshot: Option<i64>,
    /// The promotion to voter (default 900).
    pub promote: Option<i64>,
    /// A rollback of a failed promotion (default 300).
    pub rollback: Option<i64>,
    /// The removal of a rolled-back host's member (default 300).
    pub remove_incoming: Option<i64>,
    /// The drain of the outgoing host's pods (default 900).
    pub drain: Option<i64>,
    /// The step-down to etcd-only, with any wait for the gates (default 600).
    pub step_down: Option<i64>,
    /// k3s's removal of the outgoing member (default 300).
    pub removal: Option<i64>,
    /// The outgoing host's agent Ready (default 600).
    pub finish: Option<i64>,
}

/// A settings error: one line naming the key or file.
pub use settings::Error as ConfigError;

impl FileConfig {
    /// Reads `path`, which must exist; no path means every default (the
    /// controller has no default file).
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        settings::load(path, None)
    }
}

/// The validated settings of one run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// What the pure core needs.
    pub core: fleetdecide::Settings,
    /// How long to wait before trying again after an API error (the
    /// cluster is watched, not polled: see `crate::watch`).
    pub poll: Duration,
    /// `run`'s leader election.
    pub leader: LeaderSettings,
    /// `run`: replace voters only because they are not eligible.
    pub replace_ineligible: bool,
    /// The group allowed past the admission policies for recovery by hand.
    pub admin_group: String,
    /// `run`: the address of the metrics and health endpoints, if any.
    pub metrics_address: Option<std::net::SocketAddr>,
    /// `run`: the API servers it fails over between, in order (empty: the
    /// kubeconfig's server alone).
    pub api_servers: Vec<http::Uri>,
    /// The clock every reading of time goes through: the machine's, set at
    /// the program's edge ([`Settings::resolve`]); a test gives its own
    /// ([`Settings::with_clock`]).
    pub clock: Clock,
}

/// `run`'s leader election: its own Lease, not the regrade Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderSettings {
    /// The Lease's name.
    pub name: String,
    /// The Lease's namespace.
    pub namespace: String,
    /// Its duration in seconds (at least 3); renewed a third before it ends.
    pub duration: u64,
}

impl Default for LeaderSettings {
    fn default() -> Self {
        Self {
            name: "fleet-role-leader".into(),
            namespace: "platform".into(),
            duration: 15,
        }
    }
}

impl Settings {
    /// The names.
    pub fn names(&self) -> &Names {
        &self.core.names
    }

    /// Validates the file's values, with `identity` (the flag) winning.
    pub fn resolve(file: FileConfig, identity: Option<String>) -> Result<Self, ConfigError> {
        let invalid = |key, why: &str| ConfigError::invalid(key, why);
        let mut names = Names::default();
        if let Some(p) = file.prefix {
            NodeName::parse(&p).map_err(|_| invalid("prefix", "must be a DNS subdomain"))?;
            names.prefix = p;
        }
        if let Some(l) = file.lease_name {
            NodeName::parse(&l).map_err(|_| invalid("lease_name", "must be a DNS subdomain"))?;
            names.lease_name = l;
        }
        if let Some(n) = file.report_namespace {
            protocol::SwapId::parse(&n)
                .map_err(|_| invalid("report_namespace", "must be a DNS label"))?;
            names.report_namespace = n;
        }
        if let Some(n) = file.hosts_namespace {
            protocol::SwapId::parse(&n)
                .map_err(|_| invalid("hosts_namespace", "must be a DNS label"))?;
            names.hosts_namespace = n;
        }
        if let Some(i) = settings::layer(identity, file.identity) {
            names.controller_identity = HolderIdentity::parse(&i)
                .map_err(|e| ConfigError::invalid("identity", e))?
                .into_string();
        }
        let d = fleetdecide::Settings::default();
        let voters = file.voters.unwrap_or(d.voters);
        if voters == 0 || voters.is_multiple_of(2) {
            return Err(invalid("voters", "must be odd (1, 3, 5, ...)"));
        }
        let spread_label = match file.spread_label.as_deref() {
            None => d.spread_label.clone(),
            Some("") => None,
            Some(k) => Some(
                protocol::validate::LabelKey::parse(k)
                    .map_err(|e| ConfigError::invalid("spread_label", e))?,
            ),
        };
        let lease_duration = file.lease_duration_secs.unwrap_or(d.lease_duration);
        if !(3..=3600).contains(&lease_duration) {
            return Err(invalid("lease_duration_secs", "must be 3 to 3600"));
        }
        let skew_margin = file.skew_margin_secs.unwrap_or(d.skew_margin);
        if skew_margin < 0 || skew_margin.saturating_mul(2) >= lease_duration {
            return Err(invalid(
                "skew_margin_secs",
                "must be at least 0 and less than half of lease_duration_secs",
            ));
        }
        let poll = Duration::from_millis(file.poll_millis.unwrap_or(1000));
        if poll < Duration::from_millis(50)
            || poll.as_secs().saturating_mul(3) > lease_duration.unsigned_abs()
        {
            return Err(invalid(
                "poll_millis",
                "must be at least 50 and at most a third of the Lease's duration",
            ));
        }
        let grace_period = file.grace_period_secs.unwrap_or(d.grace_period);
        let settle = file.settle_secs.unwrap_or(d.settle);
        if grace_period < 0 || settle < 0 {
            return Err(invalid(
                "grace_period_secs/settle_secs",
                "must not be negative",
            ));
        }
        let maintenance_grace = file.maintenance_grace_secs.unwrap_or(d.maintenance_grace);
        if maintenance_grace < 0 {
            return Err(invalid("maintenance_grace_secs", "must not be negative"));
        }
        let retry_max = file.retry_max.unwrap_or(d.retry_max);
        if retry_max == 0 {
            return Err(invalid("retry_max", "must be at least 1"));
        }
        let retry_period = file.retry_period_secs.unwrap_or(d.retry_period);
        if retry_period <= 0 {
            return Err(invalid("retry_period_secs", "must be positive"));
        }
        let retry_backoff = file.retry_backoff_secs.unwrap_or(d.retry_backoff);
        let standby_min_healthy = file
            .standby_min_healthy_secs
            .unwrap_or(d.standby_min_healthy);
        if retry_backoff < 0 || standby_min_healthy < 0 {
            return Err(invalid(
                "retry_backoff_secs/standby_min_healthy_secs",
                "must not be negative",
            ));
        }
        let window = file.window.map(window).transpose()?;
        let heartbeat_grace = file.heartbeat_grace_secs.unwrap_or(d.heartbeat_grace);
        if heartbeat_grace < 5 {
            return Err(invalid("heartbeat_grace_secs", "must be at least 5"));
        }
        let actuator_heartbeat_max_age = file
            .actuator_heartbeat_max_age_secs
            .unwrap_or(d.actuator_heartbeat_max_age);
        if actuator_heartbeat_max_age < 5 {
            return Err(invalid(
                "actuator_heartbeat_max_age_secs",
                "must be at least 5",
            ));
        }
        let t = Timeouts::default();
        let f = file.timeouts;
        let timeouts = Timeouts {
            snapshot: f.snapshot.unwrap_or(t.snapshot),
            promote: f.promote.unwrap_or(t.promote),
            rollback: f.rollback.unwrap_or(t.rollback),
            remove_incoming: f.remove_incoming.unwrap_or(t.remove_incoming),
            drain: f.drain.unwrap_or(t.drain),
            step_down: f.step_down.unwrap_or(t.step_down),
            removal: f.removal.unwrap_or(t.removal),
            finish: f.finish.unwrap_or(t.finish),
        };
        let all = [
            timeouts.snapshot,
            timeouts.promote,
            timeouts.rollback,
            timeouts.remove_incoming,
            timeouts.drain,
            timeouts.step_down,
            timeouts.removal,
            timeouts.finish,
        ];
        if all.iter().any(|&s| s <= 0) {
            return Err(invalid("timeouts", "every step's timeout must be positive"));
        }
        let drain_grace = file.drain_grace_secs;
        if drain_grace.is_some_and(|g| !(0..=86_400).contains(&g)) {
            return Err(invalid("drain_grace_secs", "must be 0 to 86400"));
        }
        let mut leader = LeaderSettings::default();
        if let Some(n) = file.leader_lease_name {
            NodeName::parse(&n)
                .map_err(|_| invalid("leader_lease_name", "must be a DNS subdomain"))?;
            leader.name = n;
        }
        if let Some(n) = file.leader_lease_namespace {
            protocol::SwapId::parse(&n)
                .map_err(|_| invalid("leader_lease_namespace", "must be a DNS label"))?;
            leader.namespace = n;
        }
        if let Some(d) = file.leader_lease_duration_secs {
            if !(3..=3600).contains(&d) {
                return Err(invalid("leader_lease_duration_secs", "must be 3 to 3600"));
            }
            leader.duration = d;
        }
        let metrics_address =
            settings::listen_address("metrics_address", file.metrics_address.as_deref())?;
        let api_servers = api_servers(file.api_servers.as_deref().unwrap_or_default())?;
        let admin_group = match file.admin_group {
            None => protocol::names::ADMIN_GROUP.to_string(),
            // Rendered inside a CEL string of the admission policies: only
            // the characters a group name needs, none that could end it.
            Some(g)
                if !g.is_empty()
                    && g.len() <= 253
                    && g.chars()
                        .all(|c| c.is_ascii_alphanumeric() || ":._@-".contains(c)) =>
            {
                g
            }
            Some(_) => {
                return Err(invalid(
                    "admin_group",
                    "must be 1 to 253 characters of letters, digits and : . _ @ -",
                ));
            }
        };
        Ok(Self {
            admin_group,
            leader,
            api_servers,
            replace_ineligible: file.replace_ineligible.unwrap_or(false),
            metrics_address,
            core: fleetdecide::Settings {
                names,
                voters,
                spread_label,
                lease_duration,
                skew_margin,
                grace_period,
                settle,
                maintenance_grace,
                window,
                retry_max,
                retry_period,
                retry_backoff,
                standby_min_healthy,
                heartbeat_grace,
                actuator_heartbeat_max_age,
                timeouts,
                drain_grace,
                drain_force: file.drain_force.unwrap_or(d.drain_force),
            },
            poll,
            clock: Clock::system(),
        })
    }

    /// A Node as the controller sees it: [`kubeview::node_facts`] with the
    /// zone of the spread label.
    pub fn node_facts(&self, node: &k8s_openapi::api::core::v1::Node) -> protocol::NodeFacts {
        kubeview::node_facts_zoned(
            self.names(),
            self.core.spread_label.as_ref().map(|k| k.as_str()),
            node,
        )
    }

    /// The same settings reading time from `clock`.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// `swap --timeout`: every step's timeout, when the flag is given.
    pub fn with_timeout_flag(self, raw: Option<&str>) -> Result<Self, ConfigError> {
        Ok(match raw {
            Some(t) => self.with_step_timeout(parse_duration_of("--timeout", t)?),
            None => self,
        })
    }

    /// `swap --force`: the drain evicts pods no controller owns. The flag
    /// can only force; without it the file's `drain_force` stands.
    pub fn with_force_flag(mut self, force: bool) -> Self {
        self.core.drain_force |= force;
        self
    }

    /// `run --metrics-address`, winning over the file's `metrics_address`.
    pub fn with_metrics_address_flag(mut self, raw: Option<&str>) -> Result<Self, ConfigError> {
        if let Some(a) = settings::listen_address("--metrics-address", raw)? {
            self.metrics_address = Some(a);
        }
        Ok(self)
    }

    /// `swap --in-window`: why the maintenance window is closed now
    /// (`Ok(None)`: open), or an error when the settings have no window.
    pub fn window_closed_now(&self) -> Result<Option<String>, ConfigError> {
        let Some(w) = self.core.window.as_ref() else {
            return Err(ConfigError::invalid(
                "--in-window",
                "the settings have no [window]",
            ));
        };
        Ok(w.closed_at(self.clock.unix_secs()))
    }

    /// Every step's timeout set to `d` (`swap --timeout`), at least a
    /// second; one past what the core counts in (`i64` seconds) is the most
    /// it counts, never a negative timeout.
    pub fn with_step_timeout(mut self, d: Duration) -> Self {
        let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX).max(1);
        self.core.timeouts = Timeouts::all(secs);
        self
    }

    /// The regrade Lease, as `namespace/name`.
    pub fn lease_ref(&self) -> String {
        format!("{}/{}", names::LEASE_NAMESPACE, self.core.names.lease_name)
    }
}

/// The `[window]` table, its zone resolved: `UTC` and fixed offsets need no
/// zone database; a name is read from the system's (`/usr/share/zoneinfo`,
/// or `TZDIR`) once, here, so that the decisions stay pure.
fn window(w: FileWindow) -> Result<fleetdecide::Window, ConfigError> {
    let name = w.time_zone.unwrap_or_else(|| "UTC".into());
    let zone = match fleetdecide::fixed_zone(&name) {
        Some(z) => z,
        None => jiff::tz::TimeZone::get(&name).map_err(|e| {
            ConfigError::invalid(
                "window.time_zone",
                format!(
                    "{} is not UTC, a fixed offset (+02:00) or a zone of this system's database: {e}",
                    fleetdecide::one_line(&name)
                ),
            )
        })?,
    };
    fleetdecide::Window::new(
        &w.days,
        w.start.as_deref().unwrap_or("00:00"),
        w.end.as_deref().unwrap_or("24:00"),
        zone,
        &name,
    )
    .map_err(|e| ConfigError::invalid("window", e))
}

/// Parses a duration: a number with an optional unit `s`, `m` or `h`
/// (`90`, `90s`, `15m`, `1h`).
pub fn parse_duration(raw: &str) -> Result<Duration, ConfigError> {
    parse_duration_of("--timeout", raw)
}

/// [`parse_duration`] for the flag `key`, which its error names.
pub fn parse_duration_of(key: &'static str, raw: &str) -> Result<Duration, ConfigError> {
    let bad = || ConfigError::Invalid {
        key,
        why: format!(
            "{} is not a duration like 90s, 15m or 1h",
            fleetdecide::one_line(raw)
        ),
    };
    let raw = raw.trim();
    let (num, unit) = match raw.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => raw.split_at(i),
        None => (raw, "s"),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n.checked_mul(60).ok_or_else(bad)?,
        "h" => n.checked_mul(3600).ok_or_else(bad)?,
        _ => return Err(bad()),
    };
    if secs == 0 {
        return Err(bad());
    }
    Ok(Duration::from_secs(secs))
}

/// At most this many API servers to fail over between.
pub const MAX_API_SERVERS: usize = 16;

/// `api_servers`, checked: each an `https://HOST[:PORT]` URL with nothing
/// after the authority, none twice, at most [`MAX_API_SERVERS`].
fn api_servers(raw: &[String]) -> Result<Vec<http::Uri>, ConfigError> {
    if raw.len() > MAX_API_SERVERS {
        return Err(ConfigError::invalid("api_servers", "at most 16 servers"));
    }
    let mut out: Vec<http::Uri> = Vec::with_capacity(raw.len());
    for r in raw {
        let bad = || {
            ConfigError::invalid(
                "api_servers",
                "each must be an https://HOST[:PORT] URL with no path, given once",
            )
        };
        let uri: http::Uri = r.parse().map_err(|_| bad())?;
        let path_ok = matches!(uri.path(), "" | "/") && uri.query().is_none();
        if uri.scheme_str() != Some("https") || uri.authority().is_none() || !path_ok {
            return Err(bad());
        }
        if out.contains(&uri) {
            return Err(bad());
        }
        out.push(uri);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
