//! Server processes that die with the test process.
//!
//! Each server runs under a small bash guard whose standard input is a pipe from
//! the test process. The guard waits for a line or for end-of-file on that pipe;
//! when the test process exits for any reason, panic or SIGKILL included, the
//! kernel closes the pipe, `read` returns, and the guard sends the server
//! SIGTERM (then SIGKILL after 10 s). No `unsafe`, no `prctl(PR_SET_PDEATHSIG)`.

use std::{
    ffi::OsStr,
    fs::File,
    io::{self, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, ExitStatus, Stdio},
    time::Duration,
};

/// The guard. `$@` is the server and its arguments. The pipe moves to fd 3 so
/// the server gets /dev/null as stdin and never sees it; the watcher subshell
/// turns "kill" into SIGKILL and anything else (EOF included) into SIGTERM.
const GUARD: &str = r#"
exec 3<&0 0</dev/null
"$@" 3<&- &
server=$!
{
  read -r order <&3
  if [ "$order" = kill ]; then kill -KILL "$server"; else kill -TERM "$server"; fi
  for _ in $(seq 100); do kill -0 "$server" || exit 0; sleep 0.1; done
  kill -KILL "$server"
} 2>/dev/null &
watcher=$!
exec 3<&-
wait "$server"
status=$?
kill "$watcher" 2>/dev/null
exit "$status"
"#;

/// How long a graceful stop may take before the server is killed.
pub(crate) const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// A server running under the guard, with stdout and stderr appended to a log file.
#[derive(Debug)]
pub(crate) struct Guarded {
    guard: Child,
    orders: Option<ChildStdin>,
    log: PathBuf,
}

impl Guarded {
    /// Starts `program args…` under the guard, appending its output to `log`.
    pub(crate) fn spawn<I, S>(program: &Path, args: I, log: &Path) -> io::Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let out = File::options().create(true).append(true).open(log)?;
        let mut guard = Command::new("bash")
            .arg("-c")
            .arg(GUARD)
            .arg("testcp-guard")
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        let orders = guard.stdin.take();
        Ok(Self {
            guard,
            orders,
            log: log.to_owned(),
        })
    }

    /// The guard's process id (the server is its child).
    pub(crate) fn guard_pid(&self) -> u32 {
        self.guard.id()
    }

    /// The server's exit status if it (and so its guard) has exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.guard.try_wait().ok().flatten()
    }

    /// The last `lines` lines of the log, for error messages.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// Asks for SIGTERM and waits for the exit; the guard escalates to SIGKILL
    /// after 10 s and this gives up waiting after [`STOP_TIMEOUT`].
    pub(crate) async fn stop(&mut self) -> Option<ExitStatus> {
        let clock = clock::Clock::system();
        self.orders.take();
        let deadline = clock.now() + STOP_TIMEOUT;
        while clock.now() < deadline {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.kill()
    }

    /// Sends the server SIGKILL and waits for the guard to exit.
    pub(crate) fn kill(&mut self) -> Option<ExitStatus> {
        if let Some(mut orders) = self.orders.take() {
            // A write error means the guard is gone already; wait() reaps it.
            let _ = orders.write_all(b"kill\n");
        }
        self.guard.wait().ok()
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of the file at `path`, or a note that it cannot be read.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

/// A port that was free on `ip` a moment ago: bind port 0, read it, release it.
/// Another process may take it before the server binds; callers retry once.
pub fn free_port(ip: std::net::IpAddr) -> io::Result<u16> {
    Ok(std::net::TcpListener::bind((ip, 0))?.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_delivers_sigterm_to_the_server_and_returns_its_status() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let mut child = Guarded::spawn(
            Path::new("bash"),
            [
                "-c",
                "trap 'echo got TERM; exit 7' TERM; echo up; while :; do sleep 0.1; done",
            ],
            &log,
        )
        .unwrap();
        wait_for_line(&log, "up").await;
        let status = child.stop().await.unwrap();
        assert_eq!(status.code(), Some(7));
        assert!(child.log_tail(5).contains("got TERM"));
    }

    #[tokio::test]
    async fn a_kill_ends_a_server_that_ignores_sigterm() {
        let clock = clock::Clock::system();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let mut child = Guarded::spawn(
            Path::new("bash"),
            ["-c", "trap '' TERM; echo up; while :; do sleep 0.1; done"],
            &log,
        )
        .unwrap();
        wait_for_line(&log, "up").await;
        let started = clock.now();
        let status = child.kill().unwrap();
        assert!(!status.success());
        assert!(
            clock.since(started) < Duration::from_secs(5),
            "SIGKILL, not the 10 s escalation"
        );
    }

    #[tokio::test]
    async fn a_server_that_exits_by_itself_ends_its_guard() {
        let clock = clock::Clock::system();
        let dir = tempfile::tempdir().unwrap();
        let mut child = Guarded::spawn(
            Path::new("bash"),
            ["-c", "echo bad flag; exit 3"],
            &dir.path().join("log"),
        )
        .unwrap();
        let deadline = clock.now() + Duration::from_secs(5);
        while child.exited().is_none() && clock.now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(child.exited().and_then(|s| s.code()), Some(3));
        assert_eq!(child.log_tail(1), "bad flag");
    }

    #[test]
    fn the_log_tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        std::fs::write(&log, "1\n2\n3\n").unwrap();
        assert_eq!(log_tail(&log, 2), "2\n3");
        assert!(log_tail(&dir.path().join("missing"), 2).contains("cannot read"));
    }

    async fn wait_for_line(log: &Path, line: &str) {
        for _ in 0..100 {
            if log_tail(log, 10).lines().any(|l| l == line) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{line:?} never appeared in {}", log.display());
    }
}
