//! A testing aid, off unless the host asks for it: while the file
//! `/var/lib/rancher/k3s/fleet-role.failpoint` exists, the watcher kills
//! itself (SIGKILL) after each change of a plan it applied, once per
//! change. systemd starts it again (`Restart=always`), it resumes the step
//! from its report, and dies again after the next change: one run of a plan
//! crashes after every change in turn (docs/testing.md, "Crash at every
//! change").
//!
//! More in docs/internals.md, "actuator: failpoint".

use std::{
    fs,
    io::{self, Write as _},
    path::{Path, PathBuf},
};

use host::{Change, Host, HostPaths};
use tracing::{info, warn};

/// Logged when `watch` starts in a build with the failpoint; the text is
/// in no build without it (`crates/lab/tests/package_install.rs` checks the
/// packaged binary lacks it).
pub const MARKER: &str = "this build carries the fleet-role crash-test failpoint";

/// `host` with the failpoint's observer ([`after_change`]) set, said once
/// in the log.
pub fn armed(host: Host) -> Host {
    // Info, not a warning: the tests that run this build (`cargo test
    // --workspace` unifies the feature in) count the warnings of a run.
    info!(
        file = %file(&host.paths).display(),
        "{MARKER} (a testing aid: it kills this process after each change while its file exists)"
    );
    host.with_after_change(after_change)
}

/// The failpoint's file on this host.
pub fn file(paths: &HostPaths) -> PathBuf {
    paths.at("var/lib/rancher/k3s/fleet-role.failpoint")
}

/// Whether to crash after the change shown as `line`: the failpoint's file
/// exists and does not list it yet. When it does not, `line` is appended
/// (and synced, so the next run lets it go by). A file that cannot be read
/// or written is a failpoint off: dying without recording the change would
/// die after it again on every run.
pub fn record(file: &Path, line: &str) -> io::Result<bool> {
    let listed = match fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if listed.lines().any(|l| l == line) {
        return Ok(false);
    }
    let mut f = fs::OpenOptions::new().append(true).open(file)?;
    f.write_all(format!("{line}\n").as_bytes())?;
    f.sync_all()?;
    Ok(true)
}

/// The observer the watcher sets on its host ([`Host::with_after_change`]):
/// when the failpoint says so, this process is killed after `change`.
pub fn after_change(host: &Host, change: &Change) {
    let file = file(&host.paths);
    let line = host.show(change).to_string();
    match record(&file, &line) {
        Ok(false) => {}
        Ok(true) => {
            warn!(
                file = %file.display(),
                "failpoint: killing this process (SIGKILL) after: {line}"
            );
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
            // Not reached: SIGKILL cannot be caught. Should the kill fail,
            // the process still dies at once.
            std::process::abort();
        }
        Err(e) => warn!(
            file = %file.display(),
            error = %e,
            "failpoint: its file cannot be read or written; not crashing"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failpoint_crashes_once_per_change_and_only_while_its_file_exists() {
        let dir = tempfile::tempdir().unwrap();
        let f = file(&HostPaths::new(dir.path()));
        assert!(!record(&f, "systemctl daemon-reload").unwrap());
        assert!(!f.exists(), "an absent failpoint writes nothing");
        fs::create_dir_all(f.parent().unwrap()).unwrap();
        fs::write(&f, "").unwrap();
        assert!(record(&f, "systemctl daemon-reload").unwrap());
        assert!(record(&f, "systemctl restart k3s (queued, then waited for)").unwrap());
        // Done again by a resumed plan: let go by.
        assert!(!record(&f, "systemctl daemon-reload").unwrap());
        assert_eq!(
            fs::read_to_string(&f).unwrap(),
            "systemctl daemon-reload\nsystemctl restart k3s (queued, then waited for)\n"
        );
    }
}
