//! Running `systemctl` and `k3s` with a deadline.
//!
//! Nothing the actuator runs may wait forever: a `systemctl start` of a
//! `Type=notify` unit with `TimeoutStartSec=0` never returns when k3s never
//! sends `READY=1`, and a `k3s etcd-snapshot save` against a server that
//! stopped answering hangs on its connection. Every program is run here: past
//! its deadline it is killed, and the error says what was run, after how long,
//! and what state that leaves.

use std::{
    io::Read,
    process::{Command, Output, Stdio},
    sync::mpsc,
    thread,
    time::Duration,
};

use crate::{
    budget::Budget,
    error::{Error, Result},
};

/// How often a running program is checked for its end.
const POLL: Duration = Duration::from_millis(20);

/// The most output kept from one stream: enough for an error line, bounded
/// so that a chatty program cannot fill the actuator's memory.
const KEEP: usize = 64 * 1024;

/// A program to run with a deadline.
#[derive(Debug)]
pub struct Bounded<'a> {
    /// The command, with its arguments and environment set.
    pub command: Command,
    /// The command line as shown in errors (never carries a secret).
    pub line: &'a str,
    /// How long it may run before it is killed.
    pub timeout: Duration,
    /// What a kill past the deadline leaves, for the error ("systemd may
    /// still carry out the job", "no snapshot was recorded").
    pub left: &'a str,
    /// The step's budget: its deadline cuts `timeout`, and a cancellation
    /// kills the program at once.
    pub budget: &'a Budget,
}

impl Bounded<'_> {
    /// Runs the program to its end or its deadline, whichever comes first;
    /// its standard input is empty and its output is collected.
    pub fn run(self) -> Result<Output> {
        let Bounded {
            mut command,
            line,
            timeout,
            left,
            budget,
        } = self;
        budget.check(&format!("about to run {line}"))?;
        let capped = budget.cap(timeout);
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Command {
                command: line.to_string(),
                detail: e.to_string(),
            })?;
        // Each stream is read on its own thread, so a program that fills one
        // pipe cannot block on it while we wait for its exit.
        let stdout = collect(child.stdout.take());
        let stderr = collect(child.stderr.take());
        let clock = budget.clock();
        let start = clock.now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if budget.is_cancelled() => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(Error::Cancelled {
                        doing: format!("running {line} (killed; {left})"),
                    });
                }
                Ok(None) if clock.since(start) < capped => thread::sleep(POLL),
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    if capped < timeout {
                        return Err(Error::StepDeadline {
                            doing: format!("running {line} (killed; {left})"),
                        });
                    }
                    return Err(Error::Timeout {
                        command: line.to_string(),
                        after: timeout,
                        left: left.to_string(),
                    });
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(Error::Command {
                        command: line.to_string(),
                        detail: e.to_string(),
                    });
                }
            }
        };
        // A grandchild that inherited a pipe may keep it open after the
        // program itself exited: its output is then taken as it stands.
        let grace = Duration::from_secs(2);
        Ok(Output {
            status,
            stdout: stdout.recv_timeout(grace).unwrap_or_default(),
            stderr: stderr.recv_timeout(grace).unwrap_or_default(),
        })
    }
}

fn collect(stream: Option<impl Read + Send + 'static>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    if let Some(mut s) = stream {
        thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let room = KEEP.saturating_sub(kept.len());
                        kept.extend_from_slice(&buf[..n.min(room)]);
                    }
                }
            }
            let _ = tx.send(kept);
        });
    } else {
        let _ = tx.send(Vec::new());
    }
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{fs, os::unix::fs::PermissionsExt};

    fn script(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
        let p = dir.join("prog");
        fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn alive(pid: u32) -> bool {
        fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| !r.trim_start().starts_with('Z'))
            })
            .unwrap_or(false)
    }

    #[test]
    fn a_program_past_its_deadline_is_killed_and_the_error_says_what_it_left() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        // The shell writes its own pid, then becomes sleep under that pid.
        let prog = script(
            dir.path(),
            &format!("echo $$ > {}\nexec sleep 1000", pid_file.display()),
        );
        let err = Bounded {
            command: Command::new(&prog),
            line: "systemctl start k3s",
            timeout: Duration::from_secs(1),
            left: "systemd may still carry out the job",
            budget: &Budget::unbounded(&clock::Clock::system()),
        }
        .run()
        .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Timeout { .. }), "{text}");
        assert!(
            text.contains("systemctl start k3s")
                && text.contains("timed out after 1s")
                && text.contains("systemd may still carry out the job"),
            "{text}"
        );
        // The pid file was written before the exec, so it names the process
        // that was killed (or the deadline came before the shell wrote it).
        if let Some(pid) = fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            let clock = clock::Clock::system();
            let start = clock.now();
            while alive(pid) && clock.since(start) < Duration::from_secs(30) {
                thread::sleep(Duration::from_millis(50));
            }
            assert!(!alive(pid), "the timed-out program still runs");
        }
    }

    #[test]
    fn a_program_that_ends_in_time_gives_its_status_and_output() {
        let dir = tempfile::tempdir().unwrap();
        let prog = script(dir.path(), "echo out; echo err >&2; exit 3");
        let out = Bounded {
            command: Command::new(&prog),
            line: "prog",
            timeout: Duration::from_secs(60),
            left: "",
            budget: &Budget::unbounded(&clock::Clock::system()),
        }
        .run()
        .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[test]
    fn a_cancelled_step_kills_the_program_it_waits_on() {
        let dir = tempfile::tempdir().unwrap();
        let prog = script(dir.path(), "exec sleep 1000");
        let budget = Budget::unbounded(&clock::Clock::system());
        let canceller = budget.clone();
        let t = thread::spawn(move || {
            Bounded {
                command: Command::new(&prog),
                line: "systemctl start k3s",
                timeout: Duration::from_secs(3600),
                left: "systemd may still carry out the job",
                budget: &budget,
            }
            .run()
        });
        canceller.cancel();
        let err = t.join().unwrap().unwrap_err();
        assert!(matches!(err, Error::Cancelled { .. }), "{err}");
    }
}
