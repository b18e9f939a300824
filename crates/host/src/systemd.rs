//! systemd, driven through the `systemctl` found on `PATH`.

use std::{ffi::OsString, path::PathBuf, process::Command, time::Duration};

use crate::{
    error::{Error, Result},
    process::Bounded,
};

/// How long one `systemctl` call may take by default. Every call that
/// changes a unit only queues a job (or edits a link), so it returns at once
/// on a healthy systemd; this bound is for a systemd that does not answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `systemctl` (or a stand-in named so, first on `PATH` in tests) with
/// `FLEET_ROLE_ROOT` passed through, so a stand-in keeps its state per host.
#[derive(Debug, Clone)]
pub struct Systemctl {
    root: PathBuf,
    search_path: Option<OsString>,
    timeout: Duration,
}

impl Systemctl {
    /// A `systemctl` for the host under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            search_path: None,
            timeout: DEFAULT_TIMEOUT,
        }
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
        c.args(args).env("FLEET_ROLE_ROOT", &self.root);
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

    /// Whether `unit` is active (`systemctl is-active --quiet`).
    pub fn is_active(&self, unit: &str) -> Result<bool> {
        Ok(self.run(&["is-active", "--quiet", unit])?.status.success())
    }

    /// Whether `unit` is enabled (`systemctl is-enabled --quiet`).
    pub fn is_enabled(&self, unit: &str) -> Result<bool> {
        Ok(self.run(&["is-enabled", "--quiet", unit])?.status.success())
    }

    /// Stops `unit`.
    pub fn stop(&self, unit: &str) -> Result<()> {
        self.ok(&["stop", unit])
    }

    /// Disables `unit`.
    pub fn disable(&self, unit: &str) -> Result<()> {
        self.ok(&["disable", unit])
    }

    /// Enables and starts `unit` in one call, as the installer does.
    pub fn enable_now(&self, unit: &str) -> Result<()> {
        self.ok(&["enable", "--now", unit])
    }

    /// Restarts `unit`.
    pub fn restart(&self, unit: &str) -> Result<()> {
        self.ok(&["restart", unit])
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
            .map(|l| l.chars().take(200).collect::<String>())
    };
    let last = pick(&out.stderr)
        .or_else(|| pick(&out.stdout))
        .unwrap_or_default();
    format!("{}: {}", out.status, last.escape_debug())
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
        let sc = Systemctl::new(dir.path())
            .with_search_path(Some(format!("{}:/usr/bin:/bin", bin.display()).into()))
            .with_timeout(Duration::from_secs(1));
        let err = sc.stop("k3s").unwrap_err().to_string();
        assert!(
            err.contains("systemctl stop k3s timed out after 1s and was killed")
                && err.contains("systemd may still carry out the job"),
            "{err}"
        );
        let err = sc.is_active("k3s").unwrap_err().to_string();
        assert!(err.contains("nothing was changed"), "{err}");
    }
}
