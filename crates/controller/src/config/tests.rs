//! Unit tests of `config.rs`, kept apart so the module reads as the settings alone.

use super::*;
use crate::config::Settings;

fn parse(text: &str) -> Result<Settings, ConfigError> {
    Settings::resolve(toml::from_str(text).unwrap(), None)
}

#[test]
fn no_file_means_every_default() {
    let s = Settings::resolve(FileConfig::default(), None).unwrap();
    assert_eq!(s.core, fleetdecide::Settings::default());
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
const SHIPPED: &str = include_str!("../../../../deploy/controller.toml");

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
        file.spread_label.is_some(),
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
    let s = parse("[window]\nstart = \"22:00\"\nend = \"23:00\"\ntime_zone = \"Europe/Berlin\"")
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
    let ok =
        parse("api_servers = [\"https://10.0.0.1:6443\", \"https://s2.example:6443/\"]").unwrap();
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

#[test]
fn the_spread_label_is_a_checked_label_key_and_empty_turns_spreading_off() {
    let d = Settings::resolve(FileConfig::default(), None).unwrap();
    assert_eq!(
        d.core.spread_label.as_ref().map(|k| k.as_str()),
        Some("topology.kubernetes.io/zone")
    );
    let own = parse("spread_label = \"node-restriction.kubernetes.io/site\"").unwrap();
    assert_eq!(
        own.core.spread_label.as_ref().map(|k| k.as_str()),
        Some("node-restriction.kubernetes.io/site")
    );
    assert_eq!(
        parse("spread_label = \"\"").unwrap().core.spread_label,
        None
    );
    for bad in ["a b", "-zone", "Example.org/zone", "x/", "zone\\n"] {
        let err = parse(&format!("spread_label = \"{bad}\""))
            .unwrap_err()
            .to_string();
        assert!(err.contains("spread_label"), "{bad}: {err}");
    }
}
