//! The release artifacts the tests install: the Debian packages
//! (`scripts/package.sh`) and the controller's image (`scripts/image.sh`).
//!
//! `scripts/test.sh` builds them beside the tests rather than before: their
//! release build is about seven minutes of both cores, and the tests, most
//! of whose time is a lab waiting on k3s's pace, leave a core idle for far
//! longer than that. It names a status file in
//! [`PACKAGES_STATUS_ENV`] and writes the packaging's exit status there
//! once it ends; a test that needs the artifacts waits for it
//! ([`packages_built`]). Run by hand without the variable, the artifacts
//! are taken as already built.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

/// The environment variable naming the packaging's status file.
pub const PACKAGES_STATUS_ENV: &str = "FLEET_ROLE_PACKAGES_STATUS";

/// How long a test waits for the packaging: the release build alone takes
/// about seven minutes on 2 cores, twice that beside the tests, and the
/// suite kills a test silent for 20 minutes; this ends the wait first, with
/// its own message.
pub const PACKAGES_BOUND: Duration = Duration::from_secs(18 * 60);

/// Why the artifacts are not there.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The packaging ended with a failure.
    #[error(
        "scripts/package.sh or scripts/image.sh failed (exit status {status}); their output, ending:\n{tail}"
    )]
    Failed {
        /// The exit status as the status file holds it.
        status: String,
        /// The last lines of the packaging's log.
        tail: String,
    },
    /// The packaging did not end within the bound.
    #[error(
        "the packaging had not ended after {secs} s (no {path}); its output so far is in {log}"
    )]
    NotEnded {
        /// The bound, in seconds.
        secs: u64,
        /// The status file waited for.
        path: String,
        /// The packaging's log.
        log: String,
    },
}

/// Waits until the packaging `scripts/test.sh` runs beside the tests has
/// ended, within [`PACKAGES_BOUND`], blocking the thread (a test calls it
/// first, before anything else runs); returns at once when
/// [`PACKAGES_STATUS_ENV`] is unset (the artifacts were built by hand).
///
/// # Errors
/// [`Error::Failed`] when it failed, [`Error::NotEnded`] when it did not
/// end in time.
pub fn packages_built() -> Result<(), Error> {
    match std::env::var_os(PACKAGES_STATUS_ENV) {
        None => Ok(()),
        Some(path) => wait_for_status(Path::new(&path), PACKAGES_BOUND),
    }
}

/// The packaging's log: beside its status file, as `scripts/test.sh`
/// writes both.
fn log_of(status: &Path) -> PathBuf {
    status.with_extension("log")
}

/// Waits for `status` to exist, within `bound`, and reads it: `0` is done.
fn wait_for_status(status: &Path, bound: Duration) -> Result<(), Error> {
    let clock = clock::Clock::system();
    let start = clock.now();
    loop {
        // test.sh writes the status under another name and renames it, so
        // a file that exists is whole.
        if let Ok(text) = std::fs::read_to_string(status) {
            let code = text.trim();
            if code == "0" {
                return Ok(());
            }
            let log = std::fs::read_to_string(log_of(status)).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            return Err(Error::Failed {
                status: code.chars().take(16).collect(),
                tail: lines[lines.len().saturating_sub(40)..].join("\n"),
            });
        }
        if clock.since(start) >= bound {
            return Err(Error::NotEnded {
                secs: bound.as_secs(),
                path: status.display().to_string(),
                log: log_of(status).display().to_string(),
            });
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packaging_that_ended_well_is_waited_for_no_longer() {
        let dir = tempfile::tempdir().unwrap();
        let status = dir.path().join("package.status");
        std::fs::write(&status, "0\n").unwrap();
        wait_for_status(&status, Duration::ZERO).unwrap();
    }

    #[test]
    fn a_failed_packaging_is_an_error_that_quotes_the_end_of_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let status = dir.path().join("package.status");
        std::fs::write(&status, "2\n").unwrap();
        let log: String = (0..100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("package.log"), log).unwrap();
        let e = wait_for_status(&status, Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(e.contains("exit status 2"), "{e}");
        assert!(e.contains("line 99") && e.contains("line 60"), "{e}");
        assert!(!e.contains("line 59\n"), "{e}");
    }

    #[test]
    fn a_packaging_that_never_ends_is_waited_for_only_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let status = dir.path().join("package.status");
        let e = wait_for_status(&status, Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("had not ended") && e.contains("package.log"),
            "{e}"
        );
    }
}
