//! A lab on real systemd kept up between commands: `fleet-role-lab up`
//! brings it up and holds it in the foreground (its hosts are its
//! containers: they live as long as it does), and `status`, `down` and the
//! host actions (`poweroff`, `boot`, `reboot`, `cut`, `restore` HOST), run
//! from another shell or a test, ask it over a Unix socket in the lab's
//! directory.
//!
//! One holder owns the machines, so nothing else has to find a host's
//! systemd by its pid or could kill one it does not own. The holder powers
//! the hosts off on `down`, on SIGINT (Ctrl-C) or SIGTERM; a holder killed
//! outright leaves them to the next lab's sweep (`machine::sweep_stale`).

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context;
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{UnixListener, UnixStream},
};

use crate::{status, systemd_lab::SystemdLab};

/// The socket in a held lab's directory.
pub fn socket(dir: &Path) -> PathBuf {
    dir.join("control.sock")
}

/// How long a question to the holder may take (a `status` asks every host).
const ASK: Duration = Duration::from_secs(120);

/// Holds `lab` (whose directory is `dir`) until `down`, SIGINT or SIGTERM,
/// answering `status` meanwhile; then powers its hosts off.
pub async fn hold(
    mut lab: SystemdLab,
    dir: &Path,
    say: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<()> {
    let path = socket(dir);
    let _ = std::fs::remove_file(&path);
    let listener =
        UnixListener::bind(&path).with_context(|| format!("listening on {}", path.display()))?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    say(&format!(
        "the lab is up; `fleet-role-lab --dir {} status` or `down` from another shell (or Ctrl-C here)",
        dir.parent().unwrap_or(dir).display()
    ));
    let mut down_asked: Option<UnixStream> = None;
    loop {
        tokio::select! {
            _ = int.recv() => break,
            _ = term.recv() => break,
            conn = listener.accept() => {
                let Ok((mut stream, _)) = conn else { continue };
                let mut line = String::new();
                let read = tokio::time::timeout(
                    Duration::from_secs(10),
                    BufReader::new(&mut stream).read_line(&mut line),
                )
                .await;
                match (read, line.trim()) {
                    (Ok(Ok(_)), "status") => {
                        let text = status::status_lines(&lab).await.join("\n");
                        let _ = stream.write_all(format!("{text}\n").as_bytes()).await;
                    }
                    (Ok(Ok(_)), "down") => {
                        let _ = stream.write_all(b"powering the hosts off\n").await;
                        down_asked = Some(stream);
                        break;
                    }
                    (Ok(Ok(_)), request) => {
                        let answer = match HostAction::parse(request) {
                            Some((action, host)) => match act(&mut lab, action, host) {
                                Ok(done) => format!("{done}\n"),
                                Err(e) => format!("error: {e:#}\n"),
                            },
                            None => format!("unknown request (status, down, {} HOST)\n", HostAction::NAMES),
                        };
                        let _ = stream.write_all(answer.as_bytes()).await;
                    }
                    _ => {}
                }
            }
        }
    }
    say("powering the hosts off");
    drop(listener);
    let _ = std::fs::remove_file(&path);
    tokio::task::block_in_place(|| drop(lab));
    if let Some(mut s) = down_asked {
        let _ = s.write_all(b"the lab is down\n").await;
    }
    Ok(())
}

/// What can be done to one host of a held lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostAction {
    /// Power it off cleanly (its units stop as at any shutdown).
    Poweroff,
    /// Boot it again after a poweroff.
    Boot,
    /// Reboot it.
    Reboot,
    /// Cut it off the lab's network.
    Cut,
    /// Put it back on the network.
    Restore,
}

impl HostAction {
    /// The actions' names, as the requests and the CLI spell them.
    pub const NAMES: &'static str = "poweroff, boot, reboot, cut, restore";

    /// The action's name.
    pub fn as_str(self) -> &'static str {
        match self {
            HostAction::Poweroff => "poweroff",
            HostAction::Boot => "boot",
            HostAction::Reboot => "reboot",
            HostAction::Cut => "cut",
            HostAction::Restore => "restore",
        }
    }

    /// Reads a request `ACTION HOST`.
    pub fn parse(request: &str) -> Option<(HostAction, &str)> {
        let (action, host) = request.split_once(' ')?;
        let action = match action {
            "poweroff" => HostAction::Poweroff,
            "boot" => HostAction::Boot,
            "reboot" => HostAction::Reboot,
            "cut" => HostAction::Cut,
            "restore" => HostAction::Restore,
            _ => return None,
        };
        let host = host.trim();
        (!host.is_empty() && !host.contains(char::is_whitespace)).then_some((action, host))
    }
}

/// Carries out `action` on `host` of `lab`; what was done, in a line. A
/// host the lab does not have is an error, and nothing is done.
fn act(lab: &mut SystemdLab, action: HostAction, host: &str) -> anyhow::Result<String> {
    // Checked first, so that no action reaches the network for a name the
    // lab does not have (or a Docker host: the host actions are a machine's).
    if lab.docker_host(host).is_some() {
        anyhow::bail!("{host} is a Docker host: the host actions are for the real-systemd hosts");
    }
    lab.machine(host)?;
    Ok(match action {
        HostAction::Poweroff => {
            lab.poweroff(host)?;
            format!("{host} is powered off")
        }
        HostAction::Boot => {
            if lab.boot(host)? {
                format!("{host} booted")
            } else {
                format!("{host} was running already")
            }
        }
        HostAction::Reboot => {
            lab.reboot(host)?;
            format!("{host} rebooted")
        }
        HostAction::Cut => {
            lab.net().cut_off(host)?;
            format!("{host} is cut off the network")
        }
        HostAction::Restore => {
            lab.net().restore(host)?;
            format!("{host} is back on the network")
        }
    })
}

/// Asks the holder of the lab in `dir` (`status` or `down`) and returns its
/// answer; waits for the whole answer (a `down` answers once the hosts are
/// off), within a bound.
pub async fn ask(dir: &Path, what: &str) -> anyhow::Result<String> {
    let path = socket(dir);
    let mut stream = UnixStream::connect(&path).await.with_context(|| {
        format!(
            "no lab is held at {} (start one with `fleet-role-lab up`)",
            dir.display()
        )
    })?;
    stream.write_all(format!("{what}\n").as_bytes()).await?;
    let mut answer = String::new();
    let bound = if what == "status" { ASK } else { ASK * 2 };
    tokio::time::timeout(bound, stream.read_to_string(&mut answer))
        .await
        .with_context(|| {
            format!(
                "the lab's holder did not answer within {} s",
                bound.as_secs()
            )
        })??;
    Ok(answer)
}
