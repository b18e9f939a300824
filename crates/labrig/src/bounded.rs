//! Running a program with a deadline.
//!
//! Everything the real-systemd lab calls out to (`ip`, `nsenter`, `systemctl`,
//! `journalctl`) runs through [`run`]: a `systemctl start` of a `Type=notify`
//! unit whose process never sends `READY=1` does not return at all, so no call
//! may wait without a bound. The child is put in its own process group and the
//! whole group is killed past the deadline, because `nsenter` forks: killing
//! only `nsenter` would leave the command it started running (and holding our
//! pipes open).

use std::{
    fmt,
    io::{self, Read},
    os::unix::process::CommandExt,
    process::{Child, Command, ExitStatus, Stdio},
    sync::mpsc,
    thread,
    time::Duration,
};

/// How often a running child is polled for its exit.
const POLL: Duration = Duration::from_millis(20);

/// How long the output of a killed child is waited for once it is dead (its
/// pipes close when the last process of its group ends).
const DRAIN: Duration = Duration::from_secs(5);

/// Errors of a bounded run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The program could not be started.
    #[error("could not start `{command}`: {source}")]
    Spawn {
        /// What was run.
        command: String,
        /// Why it did not start.
        #[source]
        source: io::Error,
    },
    /// The program did not end within its deadline; its process group was
    /// killed. Whatever it asked for may still be under way (a `systemctl
    /// start` leaves its job queued in systemd).
    #[error(
        "`{command}` did not finish within {}s and was killed (its process group); \
         anything it asked for may still be in progress{}",
        after.as_secs_f32(),
        tail("stderr", stderr)
    )]
    Timeout {
        /// What was run.
        command: String,
        /// The deadline it had.
        after: Duration,
        /// What it printed before it was killed.
        stdout: String,
        /// What it printed to stderr before it was killed.
        stderr: String,
    },
    /// The program ended with a failure status (only from [`run_ok`]).
    #[error(
        "`{command}` failed ({status}){}{}",
        tail("stderr", stderr),
        tail("stdout", stdout)
    )]
    Failed {
        /// What was run.
        command: String,
        /// How it ended.
        status: ExitStatus,
        /// Its standard output.
        stdout: String,
        /// Its standard error.
        stderr: String,
    },
    /// Waiting for the program failed (the OS refused `waitpid`).
    #[error("waiting for `{command}`: {source}")]
    Wait {
        /// What was run.
        command: String,
        /// Why waiting failed.
        #[source]
        source: io::Error,
    },
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a program that ended printed, and how it ended.
#[derive(Debug, Clone)]
pub struct Output {
    /// How it ended.
    pub status: ExitStatus,
    /// Its standard output (lossy UTF-8).
    pub stdout: String,
    /// Its standard error (lossy UTF-8).
    pub stderr: String,
}

impl Output {
    /// Standard output without surrounding white space.
    pub fn text(&self) -> &str {
        self.stdout.trim()
    }
}

fn tail(what: &str, text: &str) -> String {
    let t = text.trim();
    if t.is_empty() {
        return String::new();
    }
    // Errors stay readable: the end of the output says what went wrong.
    let start = t
        .char_indices()
        .rev()
        .nth(1999)
        .map(|(i, _)| i)
        .unwrap_or(0);
    format!("; {what}: {}", &t[start..])
}

/// A command line as it would be typed, for error messages.
pub struct Shown<'a>(pub &'a Command);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.get_program().to_string_lossy())?;
        for a in self.0.get_args() {
            write!(f, " {}", a.to_string_lossy())?;
        }
        Ok(())
    }
}

fn reader(mut from: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = from.read_to_end(&mut buf);
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    rx
}

fn kill_group(child: &mut Child) {
    // The group id is the child's pid (`process_group(0)`); SIGKILL because a
    // program past its deadline is not trusted to handle SIGTERM.
    let pid = rustix::process::Pid::from_child(child);
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    let _ = child.kill();
}

/// Runs `cmd` (stdin closed, output captured) and returns how it ended, or
/// kills its process group once `deadline` has passed.
pub fn run(cmd: &mut Command, deadline: Duration) -> Result<Output> {
    let clock = clock::Clock::system();
    let command = Shown(cmd).to_string();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| Error::Spawn {
            command: command.clone(),
            source,
        })?;
    let out = reader(child.stdout.take().expect("stdout is piped"));
    let err = reader(child.stderr.take().expect("stderr is piped"));
    let start = clock.now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if clock.since(start) >= deadline => break None,
            Ok(None) => thread::sleep(POLL),
            Err(source) => {
                kill_group(&mut child);
                let _ = child.wait();
                return Err(Error::Wait { command, source });
            }
        }
    };
    if status.is_none() {
        kill_group(&mut child);
        let _ = child.wait();
    }
    let stdout = out.recv_timeout(DRAIN).unwrap_or_default();
    let stderr = err.recv_timeout(DRAIN).unwrap_or_default();
    match status {
        Some(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        None => Err(Error::Timeout {
            command,
            after: deadline,
            stdout,
            stderr,
        }),
    }
}

/// Like [`run`], and a failure status is an error.
pub fn run_ok(cmd: &mut Command, deadline: Duration) -> Result<Output> {
    let command = Shown(cmd).to_string();
    let o = run(cmd, deadline)?;
    if o.status.success() {
        Ok(o)
    } else {
        Err(Error::Failed {
            command,
            status: o.status,
            stdout: o.stdout,
            stderr: o.stderr,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_that_ends_in_time_returns_its_output_and_status() {
        let o = run(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(30),
        )
        .unwrap();
        assert_eq!(o.text(), "out");
        assert_eq!(o.stderr.trim(), "err");
        assert_eq!(o.status.code(), Some(3));
    }

    #[test]
    fn a_program_past_its_deadline_is_killed_with_its_children() {
        let clock = clock::Clock::system();
        // The shell's child `sleep` keeps stdout open: unless the whole group
        // is killed, reading the output would wait for it.
        let start = clock.now();
        let e = run(
            Command::new("sh").args(["-c", "echo started; sleep 600 & wait"]),
            Duration::from_millis(500),
        )
        .unwrap_err();
        assert!(matches!(&e, Error::Timeout { stdout, .. } if stdout.trim() == "started"));
        assert!(clock.since(start) < Duration::from_secs(60), "{e}");
    }

    #[test]
    fn a_failure_status_is_an_error_naming_the_command_and_its_stderr() {
        let e = run_ok(
            Command::new("sh").args(["-c", "echo nope >&2; exit 1"]),
            Duration::from_secs(30),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("sh -c echo nope"), "{e}");
        assert!(e.contains("stderr: nope"), "{e}");
    }
}
