//! systemd, driven through the `systemctl` found on `PATH`.

use std::{ffi::OsString, path::PathBuf, process::Command, time::Duration};

use crate::{
    budget::Budget,
    error::{Error, Result},
    process::Bounded,
    unit_wait::{Wait, started},
};

pub use crate::unit_state::{ActiveState, UnitState};

/// How long one `systemctl` call may take by default. Every call that
/// changes a unit only queues a job (or edits a link), so it returns at once
/// on a healthy systemd; this bound is for a systemd that does not answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `systemctl` (or a stand-in named so, first on `PATH` in tests;
/// with the `test-hooks` feature, `FLEET_ROLE_ROOT` is passed to it so a
/// stand-in keeps its state per host).
#[derive(Debug, Clone)]
pub struct Systemctl {
    /// The host root, which only a stand-in is told (`test-hooks`).
    #[cfg_attr(
        not(feature = "test-hooks"),
        allow(dead_code, reason = "read only by the test hooks")
    )]
    root: PathBuf,
    search_path: Option<OsString>,
    timeout: Duration,
    budget: Budget,
}

impl Systemctl {
    /// A `systemctl` for the host under `root`, waiting on `clock`.
    pub fn new(root: impl Into<PathBuf>, clock: &clock::Clock) -> Self {
        Self {
            root: root.into(),
            search_path: None,
            timeout: DEFAULT_TIMEOUT,
            budget: Budget::unbounded(clock),
        }
    }

    /// Runs every call and wait under `budget` (a step's bound and cancel).
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Bounds every call to `timeout`; past it the call is killed.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The bound of one call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Looks programs up on `path` instead of this process's `PATH`.
    pub fn with_search_path(mut self, path: Option<OsString>) -> Self {
        self.search_path = path;
        self
    }

    fn run(&self, args: &[&str]) -> Result<std::process::Output> {
        let line = format!("systemctl {}", args.join(" "));
        let mut c = command("systemctl", self.search_path.as_ref());
        c.args(args);
        // The stand-ins keep their state per host under FLEET_ROLE_ROOT; a
        // real systemctl has no use for it (docs/testing.md, `test-hooks`).
        #[cfg(feature = "test-hooks")]
        c.env("FLEET_ROLE_ROOT", &self.root);
        let query = args
            .first()
            .is_some_and(|v| v.starts_with("is-") || *v == "show");
        let left = if query {
            "it was a query: nothing was changed"
        } else {
            "systemd may still carry out the job: the unit's state is whatever `systemctl status` shows now"
        };
        Bounded {
            command: c,
            line: &line,
            timeout: self.timeout,
            left,
            budget: &self.budget,
        }
        .run()
    }

    fn ok(&self, args: &[&str]) -> Result<()> {
        let out = self.run(args)?;
        if out.status.success() {
            Ok(())
        } else {
            Err(Error::Command {
                command: format!("systemctl {}", args.join(" ")),
                detail: describe(&out),
            })
        }
    }

    /// The unit's state as systemd reports it (`systemctl show -p
    /// ActiveState,SubState,Result,InactiveExitTimestampMonotonic`).
    pub fn state(&self, unit: &str) -> Result<UnitState> {
        let args = [
            "show",
            "-p",
            "ActiveState,SubState,Result,InactiveExitTimestampMonotonic",
            unit,
        ];
        let out = self.run(&args)?;
        let line = format!("systemctl {}", args.join(" "));
        if !out.status.success() {
            return Err(Error::Command {
                command: line,
                detail: describe(&out),
            });
        }
        UnitState::parse(&String::from_utf8_lossy(&out.stdout)).map_err(|why| Error::Command {
            command: line,
            detail: why,
        })
    }

    /// Whether `unit` is enabled (`systemctl is-enabled --quiet`).
    pub fn is_enabled(&self, unit: &str) -> Result<bool> {
        Ok(self.run(&["is-enabled", "--quiet", unit])?.status.success())
    }

    /// Queues a stop of `unit` (`systemctl stop --no-block`); see
    /// [`Systemctl::wait`] to confirm it.
    pub fn queue_stop(&self, unit: &str) -> Result<()> {
        self.ok(&["stop", "--no-block", unit])
    }

    /// Disables `unit`.
    pub fn disable(&self, unit: &str) -> Result<()> {
        self.ok(&["disable", unit])
    }

    /// Enables `unit` and queues its start in one call, as the installer does
    /// (`systemctl enable --now --no-block`). A blocking start of k3s's
    /// `Type=notify` units with `TimeoutStartSec=0` would not return until
    /// k3s sends `READY=1`, and never if it does not.
    pub fn queue_enable_now(&self, unit: &str) -> Result<()> {
        self.ok(&["enable", "--now", "--no-block", unit])
    }

    /// Queues a restart of `unit` (`systemctl restart --no-block`).
    pub fn queue_restart(&self, unit: &str) -> Result<()> {
        self.ok(&["restart", "--no-block", unit])
    }

    /// Waits up to `bound` for a queued stop: `Ok` once `unit` is `inactive`
    /// or `failed`. Anything else (`deactivating`, `activating` of an
    /// auto-restart) is still running.
    pub fn wait_stopped(&self, unit: &str, bound: Duration) -> Result<UnitState> {
        Wait {
            unit,
            bound,
            waited_for: "after its stop was queued",
            left: "systemd may still stop it; nothing that needs it stopped was done",
            budget: &self.budget,
        }
        .until(|| self.state(unit), |s| Ok(s.is_stopped()))
    }

    /// Waits up to `bound` for a queued start (or restart) of `unit`: `Ok`
    /// once it is `active` and has left `inactive` since `before` (when
    /// `restarted`, so that the old run still active before the job ran is
    /// not taken for the new one). A start that ran and ended (`inactive` or
    /// `failed` with a newer start stamp) is an error at once; one not run
    /// yet, or `activating` (a notify unit not yet ready, an auto-restart's
    /// wait), is waited for.
    pub fn wait_active(
        &self,
        unit: &str,
        before: &UnitState,
        restarted: bool,
        bound: Duration,
    ) -> Result<()> {
        Wait {
            unit,
            bound,
            waited_for: "after its start was queued",
            left: "it is left starting (systemd keeps trying); a rollback or demote-local stops it",
            budget: &self.budget,
        }
        .until(|| self.state(unit), |s| started(unit, s, before, restarted))
        .map(drop)
    }

    /// Whether systemd's view of `unit` is older than its files on disk
    /// (`systemctl show -p NeedDaemonReload`): a drop-in written or removed
    /// without a `daemon-reload` since. An answer without the property (an
    /// older stand-in) is taken as no.
    pub fn needs_daemon_reload(&self, unit: &str) -> Result<bool> {
        let args = ["show", "-p", "NeedDaemonReload", "--value", unit];
        let out = self.run(&args)?;
        if !out.status.success() {
            return Err(Error::Command {
                command: format!("systemctl {}", args.join(" ")),
                detail: describe(&out),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim() == "yes")
    }

    /// Reloads unit files after a drop-in changed.
    pub fn daemon_reload(&self) -> Result<()> {
        self.ok(&["daemon-reload"])
    }
}

/// A command for `program`, looked up on `search_path` when given (std
/// searches the child's `PATH` when it is set on the command).
pub(crate) fn command(program: &str, search_path: Option<&OsString>) -> Command {
    let mut c = Command::new(program);
    if let Some(p) = search_path {
        c.env("PATH", p);
    }
    c
}

/// Exit status and the last non-empty line of stderr (or stdout), cut short:
/// enough for one log line, never a whole dump.
pub(crate) fn describe(out: &std::process::Output) -> String {
    let pick = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(str::to_string)
    };
    let last = pick(&out.stderr)
        .or_else(|| pick(&out.stdout))
        .unwrap_or_default();
    // What a program printed is untrusted text (a unit's own output): the
    // one rule for putting it on one line.
    format!("{}: {}", out.status, protocol::text::one_line(&last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{fs, os::unix::fs::PermissionsExt};

    #[test]
    fn a_systemctl_that_never_answers_is_killed_and_the_error_names_the_call_and_its_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir_all(&bin).unwrap();
        let prog = bin.join("systemctl");
        fs::write(&prog, "#!/bin/sh\nexec sleep 1000\n").unwrap();
        fs::set_permissions(&prog, fs::Permissions::from_mode(0o755)).unwrap();
        let sc = Systemctl::new(dir.path(), &clock::Clock::system())
            .with_search_path(Some(format!("{}:/usr/bin:/bin", bin.display()).into()))
            .with_timeout(Duration::from_secs(1));
        let err = sc.queue_stop("k3s").unwrap_err().to_string();
        assert!(
            err.contains("systemctl stop --no-block k3s timed out after 1s and was killed")
                && err.contains("systemd may still carry out the job"),
            "{err}"
        );
        let err = sc.state("k3s").unwrap_err().to_string();
        assert!(err.contains("nothing was changed"), "{err}");
    }
}

#[cfg(test)]
mod state_tests {
    use super::*;

    #[test]
    fn only_inactive_and_failed_count_as_stopped() {
        let st = |a: &str, sub: &str| {
            UnitState::parse(&format!(
                "ActiveState={a}\nSubState={sub}\nResult=success\nInactiveExitTimestampMonotonic=7\n"
            ))
            .unwrap()
        };
        assert!(st("inactive", "dead").is_stopped());
        assert!(st("failed", "failed").is_stopped());
        assert!(!st("activating", "auto-restart").is_stopped());
        assert!(!st("activating", "condition").is_stopped());
        assert!(!st("activating", "start").is_stopped());
        assert!(!st("deactivating", "stop-sigterm").is_stopped());
        assert!(!st("active", "running").is_stopped());
        assert_eq!(st("active", "running").inactive_exit, 7);
        assert_eq!(
            st("activating", "auto-restart").to_string(),
            "activating (auto-restart)"
        );
        assert!(UnitState::parse("ActiveState=sleeping\n").is_err());
        assert!(UnitState::parse("SubState=running\n").is_err());
    }

    #[test]
    fn an_unknown_active_state_is_quoted_escaped_and_cut_short() {
        let hostile = format!("ActiveState=x\u{1b}[31m{}\n", "y".repeat(100_000));
        let e = UnitState::parse(&hostile).unwrap_err();
        assert!(e.len() < 120, "{} bytes", e.len());
        assert!(e.contains("\\u{1b}"), "{e}");
        assert!(e.ends_with("…\""), "{e}");
    }
}
