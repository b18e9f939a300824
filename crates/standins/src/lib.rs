//! Stand-ins for the two host programs that cannot run here: systemd's
//! `systemctl` and the `k3s` CLI. Tests put their directory first on `PATH`.
//!
//! They keep all state under `$FLEET_ROLE_ROOT/run/fleet-role-standin/`, and
//! refuse to run without `FLEET_ROLE_ROOT`, so they can never touch a real host.
//! What they imitate, and how faithfully, is written in `docs/testing.md`.
#![forbid(unsafe_code)]

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
};

/// The host root the stand-in acts on, from `FLEET_ROLE_ROOT`.
pub fn root() -> Result<PathBuf, String> {
    match std::env::var_os("FLEET_ROLE_ROOT") {
        Some(r) if !r.is_empty() && Path::new(&r) != Path::new("/") => Ok(PathBuf::from(r)),
        _ => Err("stand-in refuses to run without FLEET_ROLE_ROOT set to a test root".into()),
    }
}

/// The stand-in's state directory for `what` (`systemd`, `k3s`).
pub fn state_dir(root: &Path, what: &str) -> PathBuf {
    root.join("run/fleet-role-standin").join(what)
}

/// Appends one line to the stand-in's log (`<state>/log`).
pub fn log(root: &Path, what: &str, line: &str) {
    let dir = state_dir(root, what);
    let _ = fs::create_dir_all(&dir);
    if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(dir.join("log")) {
        let _ = writeln!(f, "{line}");
    }
}

/// The systemd stand-in's view of a unit, readable by tests.
pub mod units {
    use super::*;

    /// The units whose simultaneous activity is recorded.
    pub const K3S_UNITS: [&str; 2] = ["k3s", "k3s-agent"];

    fn unit_name(unit: &str) -> &str {
        unit.strip_suffix(".service").unwrap_or(unit)
    }

    /// Whether `unit` is active on the host under `root`.
    pub fn is_active(root: &Path, unit: &str) -> bool {
        state_dir(root, "systemd").join(format!("{}.active", unit_name(unit))).exists()
    }

    /// Whether `unit` is enabled on the host under `root`.
    pub fn is_enabled(root: &Path, unit: &str) -> bool {
        state_dir(root, "systemd").join(format!("{}.enabled", unit_name(unit))).exists()
    }

    /// The most k3s units ever active at once on the host (0 if never).
    pub fn max_active_k3s(root: &Path) -> usize {
        fs::read_to_string(state_dir(root, "systemd").join("max-active-k3s"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Sets a unit's state directly (test set-up: a host as installed).
    pub fn set(root: &Path, unit: &str, enabled: bool, active: bool) {
        let dir = state_dir(root, "systemd");
        fs::create_dir_all(&dir).expect("stand-in state dir");
        for (flag, on) in [("enabled", enabled), ("active", active)] {
            let p = dir.join(format!("{}.{flag}", unit_name(unit)));
            if on {
                fs::write(&p, "").expect("stand-in state");
            } else {
                let _ = fs::remove_file(&p);
            }
        }
        record_active(root);
    }

    /// Updates the record of the most k3s units active at once.
    pub fn record_active(root: &Path) {
        let now = K3S_UNITS.iter().filter(|u| is_active(root, u)).count();
        if now > max_active_k3s(root) {
            let _ = fs::write(state_dir(root, "systemd").join("max-active-k3s"), now.to_string());
        }
    }
}
