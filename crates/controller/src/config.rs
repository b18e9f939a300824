//! Settings: the TOML config file, then flags, turned into one validated
//! [`Settings`] in one place. Reading the file and the precedence are the
//! `settings` crate's, shared with the actuator.
//!
//! Every key of the file is optional; each one's meaning and default is
//! documented on [`FileConfig`] and in `docs/controller.md`.

use std::{path::Path, time::Duration};

use clock::Clock;
use protocol::{
    HolderIdentity, Names, NodeName,
    controller::{self, Timeouts},
    names,
};
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
    /// The report ConfigMap's namespace (default `platform`).
    pub report_namespace: Option<String>,
    /// The Lease holder identity (default `fleet-role`); the actuators'
    /// `controller_identity` must name the same.
    pub identity: Option<String>,
    /// How many etcd voters the fleet has (odd; default 3). A voter Node
    /// missing from the API counts as a down voter in the quorum gate.
    pub voters: Option<usize>,
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
    pub core: controller::Settings,
    /// How long to wait before trying again after an API error (the
    /// cluster is watched, not polled: see `crate::watch`).
    pub poll: Duration,
    /// `run`'s leader election.
    pub leader: LeaderSettings,
    /// `run`: replace voters only because they are not eligible.
    pub replace_ineligible: bool,
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
        if let Some(i) = settings::layer(identity, file.identity) {
            names.controller_identity = HolderIdentity::parse(&i)
                .map_err(|e| ConfigError::invalid("identity", e))?
                .into_string();
        }
        let d = controller::Settings::default();
        let voters = file.voters.unwrap_or(d.voters);
        if voters == 0 || voters.is_multiple_of(2) {
            return Err(invalid("voters", "must be odd (1, 3, 5, ...)"));
        }
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
        Ok(Self {
            leader,
            api_servers,
            replace_ineligible: file.replace_ineligible.unwrap_or(false),
            metrics_address,
            core: controller::Settings {
                names,
                voters,
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
fn window(w: FileWindow) -> Result<controller::Window, ConfigError> {
    let name = w.time_zone.unwrap_or_else(|| "UTC".into());
    let zone = match controller::fixed_zone(&name) {
        Some(z) => z,
        None => jiff::tz::TimeZone::get(&name).map_err(|e| {
            ConfigError::invalid(
                "window.time_zone",
                format!(
                    "{} is not UTC, a fixed offset (+02:00) or a zone of this system's database: {e}",
                    controller::one_line(&name)
                ),
            )
        })?,
    };
    controller::Window::new(
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
            controller::one_line(raw)
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
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, ConfigError> {
        Settings::resolve(toml::from_str(text).unwrap(), None)
    }

    #[test]
    fn no_file_means_every_default() {
        let s = Settings::resolve(FileConfig::default(), None).unwrap();
        assert_eq!(s.core, controller::Settings::default());
        assert_eq!(s.poll, Duration::from_secs(1));
        assert_eq!(s.lease_ref(), "kube-system/fleet-regrade");
        assert_eq!(s.leader, LeaderSettings::default());
        assert!(
            !s.replace_ineligible,
            "replacing ineligible voters is asked for, never a default"
        );
        assert_eq!(s.metrics_address, None);
    }

    #[test]
    fn every_key_of_the_file_is_read() {
        let s = parse(
            r#"
prefix = "example.org"
lease_name = "regrade"
report_namespace = "ops"
identity = "ctl"
voters = 5
lease_duration_secs = 30
skew_margin_secs = 2
poll_millis = 200
grace_period_secs = 10
settle_secs = 20
heartbeat_grace_secs = 15
leader_lease_name = "lead"
leader_lease_namespace = "ops"
leader_lease_duration_secs = 9
replace_ineligible = true
metrics_address = "127.0.0.1:9464"
drain_grace_secs = 45
drain_force = true
maintenance_grace_secs = 900
retry_max = 3
retry_period_secs = 7200
retry_backoff_secs = 60
standby_min_healthy_secs = 120
[window]
days = ["sat", "sun"]
start = "22:00"
end = "06:00"
time_zone = "+01:00"
[timeouts]
snapshot = 1
promote = 2
rollback = 3
remove_incoming = 4
drain = 8
step_down = 5
removal = 6
finish = 7
"#,
        )
        .unwrap();
        let c = &s.core;
        assert_eq!(c.names.prefix, "example.org");
        assert_eq!(c.names.lease_name, "regrade");
        assert_eq!(c.names.report_namespace, "ops");
        assert_eq!(c.names.controller_identity, "ctl");
        assert_eq!(
            (
                c.voters,
                c.lease_duration,
                c.skew_margin,
                c.grace_period,
                c.settle
            ),
            (5, 30, 2, 10, 20)
        );
        assert_eq!(s.poll, Duration::from_millis(200));
        assert_eq!(
            s.leader,
            LeaderSettings {
                name: "lead".into(),
                namespace: "ops".into(),
                duration: 9
            }
        );
        assert!(s.replace_ineligible);
        assert_eq!(s.metrics_address, Some("127.0.0.1:9464".parse().unwrap()));
        assert_eq!(
            c.timeouts,
            Timeouts {
                snapshot: 1,
                promote: 2,
                rollback: 3,
                remove_incoming: 4,
                drain: 8,
                step_down: 5,
                removal: 6,
                finish: 7
            }
        );
        assert_eq!(c.drain_grace, Some(45));
        assert!(c.drain_force);
        assert_eq!(
            (
                c.maintenance_grace,
                c.retry_max,
                c.retry_period,
                c.retry_backoff,
                c.standby_min_healthy
            ),
            (900, 3, 7200, 60, 120)
        );
        assert_eq!(
            c.window.as_ref().map(|w| w.describe()).as_deref(),
            Some("sun,sat 22:00:00-06:00:00 +01:00")
        );
    }

    /// The settings file the controller's package ships.
    const SHIPPED: &str = include_str!("../../../deploy/controller.toml");

    /// `SHIPPED` with every `# key = value` line and `# [table]` header
    /// uncommented (an indented example, `#   key = value`, stays a comment).
    fn shipped_uncommented() -> String {
        let setting = |rest: &str| {
            let key = rest.split_once(" = ").map_or("", |(k, _)| k);
            let header = rest.starts_with('[') && rest.ends_with(']') && !rest.contains(' ');
            header || (!key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        };
        SHIPPED
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest) if setting(rest) => rest,
                _ => l,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_shipped_settings_file_sets_nothing_and_every_key_it_shows_is_real_and_its_default() {
        let defaults = Settings::resolve(FileConfig::default(), None).unwrap();
        let shipped = parse(SHIPPED).unwrap();
        assert_eq!(shipped.core, defaults.core);
        let text = shipped_uncommented();
        let file: FileConfig = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        // Every key with a default is shown, at it.
        let shown = [
            file.prefix.is_some(),
            file.lease_name.is_some(),
            file.report_namespace.is_some(),
            file.identity.is_some(),
            file.voters.is_some(),
            file.lease_duration_secs.is_some(),
            file.skew_margin_secs.is_some(),
            file.poll_millis.is_some(),
            file.grace_period_secs.is_some(),
            file.settle_secs.is_some(),
            file.maintenance_grace_secs.is_some(),
            file.retry_max.is_some(),
            file.retry_period_secs.is_some(),
            file.retry_backoff_secs.is_some(),
            file.standby_min_healthy_secs.is_some(),
            file.heartbeat_grace_secs.is_some(),
            file.actuator_heartbeat_max_age_secs.is_some(),
            file.leader_lease_name.is_some(),
            file.leader_lease_namespace.is_some(),
            file.leader_lease_duration_secs.is_some(),
            file.replace_ineligible.is_some(),
            file.drain_force.is_some(),
            file.timeouts.finish.is_some(),
        ];
        assert!(shown.iter().all(|&s| s), "{shown:?}");
        let uncommented = Settings::resolve(file, None).unwrap();
        assert_eq!(uncommented.core, defaults.core);
        assert_eq!(uncommented.poll, defaults.poll);
        assert_eq!(uncommented.leader, defaults.leader);
        assert_eq!(uncommented.replace_ineligible, defaults.replace_ineligible);
        assert_eq!(uncommented.metrics_address, None);
    }

    #[test]
    fn the_force_flag_forces_and_its_absence_leaves_the_files_setting() {
        let off = Settings::resolve(FileConfig::default(), None).unwrap();
        assert!(!off.core.drain_force);
        assert!(off.clone().with_force_flag(true).core.drain_force);
        assert!(!off.with_force_flag(false).core.drain_force);
        let on = parse("drain_force = true").unwrap();
        assert!(on.with_force_flag(false).core.drain_force);
    }

    #[test]
    fn a_named_time_zone_is_read_from_the_systems_zone_database_and_follows_summer_time() {
        let s =
            parse("[window]\nstart = \"22:00\"\nend = \"23:00\"\ntime_zone = \"Europe/Berlin\"")
                .unwrap();
        let w = s.core.window.unwrap();
        let at = |t: &str| t.parse::<jiff::Timestamp>().unwrap().as_second();
        // 22:00 in Berlin is 21:00 UTC in winter and 20:00 UTC in summer.
        assert!(w.contains(at("2026-12-07T21:00:00Z")));
        assert!(!w.contains(at("2026-12-07T20:30:00Z")));
        assert!(w.contains(at("2026-07-07T20:00:00Z")));
        assert_eq!(
            w.describe(),
            "sun,mon,tue,wed,thu,fri,sat 22:00:00-23:00:00 Europe/Berlin"
        );
    }

    #[test]
    fn the_identity_flag_wins_over_the_file() {
        let file: FileConfig = toml::from_str("identity = \"a\"").unwrap();
        let s = Settings::resolve(file, Some("b".into())).unwrap();
        assert_eq!(s.core.names.controller_identity, "b");
    }

    #[test]
    fn bad_values_are_refused_naming_the_key() {
        for (text, key) in [
            ("voters = 2", "voters"),
            ("voters = 0", "voters"),
            ("lease_duration_secs = 1", "lease_duration_secs"),
            ("skew_margin_secs = 30", "skew_margin_secs"),
            ("poll_millis = 30000", "poll_millis"),
            ("heartbeat_grace_secs = 1", "heartbeat_grace_secs"),
            ("drain_grace_secs = -1", "drain_grace_secs"),
            ("drain_grace_secs = 86401", "drain_grace_secs"),
            (
                "actuator_heartbeat_max_age_secs = 4",
                "actuator_heartbeat_max_age_secs",
            ),
            ("prefix = \"a b\"", "prefix"),
            ("identity = \"a\\nb\"", "identity"),
            ("[timeouts]\nfinish = 0", "timeouts"),
            (
                "leader_lease_duration_secs = 1",
                "leader_lease_duration_secs",
            ),
            ("leader_lease_namespace = \"A_B\"", "leader_lease_namespace"),
            ("metrics_address = \"nowhere\"", "metrics_address"),
            ("maintenance_grace_secs = -1", "maintenance_grace_secs"),
            ("retry_max = 0", "retry_max"),
            ("retry_period_secs = 0", "retry_period_secs"),
            ("retry_backoff_secs = -1", "retry_backoff_secs"),
            ("[window]\ndays = [\"funday\"]", "window"),
            ("[window]\nstart = \"25:00\"", "window"),
            ("[window]\ntime_zone = \"Mars/Olympus\"", "window.time_zone"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
        assert!(toml::from_str::<FileConfig>("nope = 1").is_err());
    }

    #[test]
    fn an_extreme_skew_margin_is_refused_rather_than_overflowing() {
        for text in [
            "skew_margin_secs = 9223372036854775807",
            "skew_margin_secs = 4611686018427387904",
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains("skew_margin_secs"), "{text}: {err}");
        }
        let err = parse("poll_millis = 18446744073709551615").unwrap_err();
        assert!(err.to_string().contains("poll_millis"), "{err}");
    }

    #[test]
    fn a_timeout_flag_too_long_to_count_is_the_longest_timeout_not_a_negative_one() {
        let huge = parse_duration("18446744073709551615s").unwrap();
        let s = Settings::resolve(FileConfig::default(), None)
            .unwrap()
            .with_step_timeout(huge);
        assert_eq!(s.core.timeouts, Timeouts::all(i64::MAX));
        let s = Settings::resolve(FileConfig::default(), None)
            .unwrap()
            .with_step_timeout(Duration::from_millis(10));
        assert_eq!(s.core.timeouts, Timeouts::all(1));
    }

    #[test]
    fn durations_take_seconds_minutes_and_hours() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        for bad in ["", "0", "m", "1d", "-1s", "1.5m", "1 h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn api_servers_are_https_urls_with_no_path_each_once() {
        let ok = parse("api_servers = [\"https://10.0.0.1:6443\", \"https://s2.example:6443/\"]")
            .unwrap();
        assert_eq!(ok.api_servers.len(), 2);
        assert_eq!(ok.api_servers[0].to_string(), "https://10.0.0.1:6443/");
        assert!(parse("").unwrap().api_servers.is_empty());
        for bad in [
            "api_servers = [\"http://10.0.0.1:6443\"]",
            "api_servers = [\"https://10.0.0.1:6443/api\"]",
            "api_servers = [\"10.0.0.1:6443\"]",
            "api_servers = [\"https://a:1\", \"https://a:1\"]",
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains("api_servers"), "{bad}: {e}");
        }
        let many: Vec<String> = (0..17)
            .map(|i| format!("\"https://10.0.0.{i}:6443\""))
            .collect();
        let e = parse(&format!("api_servers = [{}]", many.join(", ")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 16"), "{e}");
    }
}
