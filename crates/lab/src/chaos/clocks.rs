//! Clocks set off for the campaign's clock faults: libfaketime (Debian's,
//! installed by scripts/prereqs.sh) preloaded into every host's actuator and
//! into the controllers the campaign starts (`fleet-role swap`, `run`),
//! reading its offset from a file of its own, re-read at most once a second
//! (`FAKETIME_CACHE_DURATION`). Writing the file moves the wall clock of the
//! running process (`CLOCK_REALTIME`, `time()`, `gettimeofday`): the
//! `Date` it compares with the API server's and the Lease times it judges
//! and writes. Its monotonic clock is left true
//! (`FAKETIME_DONT_FAKE_MONOTONIC`), so its timeouts and sleeps run as
//! before, as on a host whose NTP stepped the wall clock. k3s, etcd and
//! the API servers keep the true time: the fault is the product's clock
//! against the cluster's.
//!
//! The campaign's observer (`fleet-role status`, `abort`) runs with no
//! preload: what it reads must not depend on the fault.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use crate::{lab_setup, systemd_lab::SystemdLab};

/// Debian's libfaketime.
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// A host's offset file, under its root (`/etc/fleet-role` is bound from
/// the host's directory, so the campaign writes it from outside).
const HOST_FILE: &str = "etc/fleet-role/chaos-clock";

/// The drop-in that preloads libfaketime into a host's actuator.
const HOST_DROP_IN: &str = "etc/systemd/system/fleet-role-actuator.service.d/80-chaos-clock.conf";

/// What the product logs when it finds its clock off the API server's
/// (`protocol::clock_offset::off_reason`).
pub const NOTICED: &str = "clock is at least";

/// The bound of `systemctl` and `journalctl` inside a host.
const SYSTEMCTL: Duration = Duration::from_secs(60);

/// The environment that preloads libfaketime reading its offset from
/// `file` (as the process sees it).
pub fn environment(file: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("LD_PRELOAD", LIBFAKETIME.to_string()),
        ("FAKETIME_TIMESTAMP_FILE", file.display().to_string()),
        ("FAKETIME_CACHE_DURATION", "1".to_string()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_string()),
    ]
}

/// libfaketime's relative offset: `+30`, `-12`, `+0`.
pub fn offset_text(secs: i64) -> String {
    format!("{secs:+}")
}

/// Sets the clock that reads `file` off by `secs` (0: true again). The
/// file is replaced whole, so libfaketime never reads it half-written.
pub fn set(file: &Path, secs: i64) -> anyhow::Result<()> {
    let tmp = file.with_extension("new");
    lab_setup::write(&tmp, &format!("{}\n", offset_text(secs)), 0o644)?;
    std::fs::rename(&tmp, file).with_context(|| format!("replacing {}", file.display()))
}

/// A host's offset file, as the campaign writes it.
pub fn host_file(lab: &SystemdLab, host: &str) -> PathBuf {
    lab.spec.root(host).join(HOST_FILE)
}

/// Preloads libfaketime into every host's actuator with its clock true,
/// and restarts each actuator to take it.
pub async fn prepare_hosts(lab: &SystemdLab) -> anyhow::Result<()> {
    anyhow::ensure!(
        Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: scripts/prereqs.sh installs libfaketime"
    );
    let inside = Path::new("/").join(HOST_FILE);
    let env: Vec<String> = environment(&inside)
        .into_iter()
        .map(|(k, v)| format!("Environment={k}={v}"))
        .collect();
    for h in &lab.spec.hosts {
        set(&host_file(lab, &h.name), 0)?;
        lab_setup::write(
            &lab.spec.root(&h.name).join(HOST_DROP_IN),
            &format!("[Service]\n{}\n", env.join("\n")),
            0o644,
        )?;
        let m = lab.machine(&h.name)?;
        tokio::task::block_in_place(|| {
            m.exec_ok(&["systemctl", "daemon-reload"], SYSTEMCTL)?;
            m.exec_ok(&["systemctl", "restart", "fleet-role-actuator"], SYSTEMCTL)
        })
        .with_context(|| format!("restarting {}'s actuator under libfaketime", h.name))?;
        lab.wait_active(&h.name, "fleet-role-actuator", SYSTEMCTL)
            .await?;
    }
    Ok(())
}

/// Whether `host`'s actuator logged its clock off since `since` (unix
/// seconds, by this machine's true clock: the journal's times are
/// journald's, which keeps the true time).
pub fn noticed_on_host(lab: &SystemdLab, host: &str, since: i64) -> anyhow::Result<bool> {
    let m = lab.machine(host)?;
    let since = format!("@{since}");
    let args = [
        "journalctl",
        "-u",
        "fleet-role-actuator.service",
        "--since",
        &since,
        "-o",
        "cat",
        "--no-pager",
    ];
    let out = tokio::task::block_in_place(|| m.exec_ok(&args, SYSTEMCTL))
        .with_context(|| format!("{}'s actuator's journal", host))?;
    Ok(out.stdout.contains(NOTICED))
}

/// The sizes of the logs (`*.log`) in `dir` now, to read what is written
/// after ([`noticed_in_logs`]).
pub fn log_sizes(dir: &Path) -> Vec<(PathBuf, u64)> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| {
            let len = std::fs::metadata(&p).map_or(0, |m| m.len());
            (p, len)
        })
        .collect()
}

/// Whether a controller logged its clock off in `dir`'s logs since they
/// had `sizes` (a log begun since is read whole).
pub fn noticed_in_logs(dir: &Path, sizes: &[(PathBuf, u64)]) -> bool {
    log_sizes(dir).into_iter().any(|(p, _)| {
        let from = sizes.iter().find(|(q, _)| *q == p).map_or(0, |(_, n)| *n);
        std::fs::read(&p).is_ok_and(|bytes| {
            let from = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
            String::from_utf8_lossy(&bytes[from..]).contains(NOTICED)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_is_written_signed_as_libfaketime_reads_it() {
        assert_eq!(offset_text(30), "+30");
        assert_eq!(offset_text(-12), "-12");
        assert_eq!(offset_text(0), "+0");
    }

    #[test]
    fn the_clock_file_is_replaced_whole_with_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("clock");
        set(&file, -40).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "-40\n");
        set(&file, 0).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "+0\n");
        assert!(!file.with_extension("new").exists());
    }

    #[test]
    fn a_controller_noticed_its_clock_only_from_what_its_logs_said_since() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("run-1.log");
        std::fs::write(&old, format!("this controller's {NOTICED} 30s ahead\n")).unwrap();
        let sizes = log_sizes(dir.path());
        assert!(!noticed_in_logs(dir.path(), &sizes));
        std::fs::write(dir.path().join("swap-2.log"), "took the Lease\n").unwrap();
        assert!(!noticed_in_logs(dir.path(), &sizes));
        let mut text = std::fs::read_to_string(&old).unwrap();
        text.push_str(&format!("again: {NOTICED} 12s behind\n"));
        std::fs::write(&old, text).unwrap();
        assert!(noticed_in_logs(dir.path(), &sizes));
    }
}
