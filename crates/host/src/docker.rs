//! k3s's two units as two containers on a Docker host (Colima, a NAS box,
//! any host where k3s runs as `rancher/k3s server …` and `… agent …`):
//! what the switch asks of systemd, asked of the Docker Engine API.
//!
//! More in docs/internals.md, "host: docker".

use std::{future::Future, time::Duration};

use dockerengine::{Container, ContainerSpec, Engine, RestartPolicy, Status};

use crate::{
    budget::Budget,
    error::{Error, Result},
    systemd::{ActiveState, UnitState},
    unit_wait::{Wait, started},
};

/// The containers of one Docker host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Containers {
    /// The server's container (`k3s server …`).
    pub server: String,
    /// The agent's container (`k3s agent …`).
    pub agent: String,
}

impl Default for Containers {
    fn default() -> Self {
        Self {
            server: "k3s-server".into(),
            agent: "k3s-agent".into(),
        }
    }
}

/// k3s's units as containers, through the Docker daemon at one socket.
#[derive(Debug, Clone)]
pub struct DockerUnits {
    engine: Engine,
    /// The runtime the engine's calls are driven on: the host's work is
    /// sync and runs on blocking threads, which block on this handle.
    runtime: tokio::runtime::Handle,
    containers: Containers,
    grace: Duration,
    server_ready: Option<String>,
    budget: Budget,
}

impl DockerUnits {
    /// The containers `containers` of the daemon behind `engine`, each stop
    /// given `grace` before Docker kills (k3s's units: systemd's 90 s).
    ///
    /// Every call blocks on `runtime`, so it is made from a thread that is
    /// no runtime's task (a blocking task, the main thread): blocking on a
    /// handle inside a task panics. `runtime` must drive its own I/O and
    /// timers (a multi-thread runtime, as the actuator's process has): a
    /// current-thread runtime's handle drives nothing unless some thread is
    /// inside its `Runtime::block_on`.
    pub fn new(
        engine: Engine,
        containers: Containers,
        grace: Duration,
        runtime: tokio::runtime::Handle,
        clock: &clock::Clock,
    ) -> Self {
        Self {
            engine,
            runtime,
            containers,
            grace,
            server_ready: None,
            budget: Budget::unbounded(clock),
        }
    }

    /// A server container counts as started only once `url` (its etcd's
    /// health endpoint) answers healthy, as a native server's unit is
    /// active only once k3s sent READY=1.
    pub fn with_server_ready(mut self, url: impl Into<String>) -> Self {
        self.server_ready = Some(url.into());
        self
    }

    /// Runs every call and wait under `budget`.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// The containers.
    pub fn containers(&self) -> &Containers {
        &self.containers
    }

    /// The container standing for `unit` (`k3s`, `k3s-agent`); `None` for
    /// any other unit (the regrade watcher has no container: it never runs
    /// on a Docker host).
    pub fn container(&self, unit: &str) -> Option<&str> {
        match unit {
            "k3s" => Some(&self.containers.server),
            "k3s-agent" => Some(&self.containers.agent),
            _ => None,
        }
    }

    /// Runs one call of the engine to its end, blocking this thread on the
    /// runtime's handle; the engine bounds the call itself.
    fn block<T>(
        &self,
        what: &str,
        fut: impl Future<Output = std::result::Result<T, dockerengine::Error>>,
    ) -> Result<T> {
        self.budget.check(what)?;
        self.runtime.block_on(fut).map_err(|e| Error::Command {
            command: what.to_string(),
            detail: e.to_string(),
        })
    }

    fn inspect(&self, name: &str) -> Result<Option<Container>> {
        self.block(&format!("docker inspect {name}"), self.engine.inspect(name))
    }

    fn named(&self, unit: &str) -> Result<&str> {
        self.container(unit).ok_or_else(|| Error::Command {
            command: format!("start {unit}"),
            detail: "a Docker host runs no such unit".into(),
        })
    }

    /// Refuses a switch on a host missing either container, before any
    /// change: a plan that stopped one and then found no other to start
    /// would leave the host with no k3s.
    pub fn refuse_missing(&self) -> Result<()> {
        for name in [&self.containers.server, &self.containers.agent] {
            self.present(name)?;
        }
        Ok(())
    }

    /// Runs `k3s ARGS` in a one-off container of the server container's
    /// image, entry point, binds, network and privilege, waits up to
    /// `timeout` for it to end, reads its output and removes it (a run past
    /// `timeout` is killed with it). Returns its exit code and output as a
    /// process's; an error is one line saying what is left.
    pub fn run_k3s(
        &self,
        args: &[&str],
        timeout: Duration,
    ) -> std::result::Result<std::process::Output, String> {
        use std::os::unix::process::ExitStatusExt;
        let server = &self.containers.server;
        let clock = self.budget.clock().clone();
        self.runtime.block_on(async {
            let Some(c) = self
                .engine
                .inspect(server)
                .await
                .map_err(|e| e.to_string())?
            else {
                return Err(format!(
                    "there is no container {server} to run k3s beside; nothing was run"
                ));
            };
            // Unique among this host's one-off runs: the process and the
            // clock's milliseconds.
            let name = format!(
                "{server}-k3s-{}-{}",
                std::process::id(),
                clock.unix_millis()
            );
            let spec = ContainerSpec {
                image: c.image.clone(),
                entrypoint: c.run.entrypoint.clone(),
                cmd: args.iter().map(|a| a.to_string()).collect(),
                binds: c.run.binds.clone(),
                network_mode: c.run.network_mode.clone(),
                privileged: c.run.privileged,
                restart: RestartPolicy::No,
                labels: [("fleet-role.k3s-command".to_string(), args.join(" "))].into(),
                ..Default::default()
            };
            self.engine
                .create(&name, &spec)
                .await
                .map_err(|e| e.to_string())?;
            let ran = async {
                self.engine.start(&name).await?;
                let code = self.engine.wait(&name, timeout).await?;
                let out = self.engine.logs(&name).await?;
                Ok::<_, dockerengine::Error>((code, out))
            }
            .await;
            // Removed whatever happened: forced, so one still running past
            // its bound is killed, not left behind.
            let removed = self.engine.remove(&name, true).await;
            let (code, out) = ran.map_err(|e| {
                format!(
                    "{e}; the one-off container {name} was removed ({})",
                    match &removed {
                        Ok(()) => "and with it anything it ran".to_string(),
                        Err(r) => format!("or not: {r}"),
                    }
                )
            })?;
            Ok(std::process::Output {
                // A wait's code is the process's exit status (0-255).
                status: std::process::ExitStatus::from_raw(((code & 0xff) as i32) << 8),
                stdout: out.stdout,
                stderr: out.stderr,
            })
        })
    }

    /// The unit's state, from its container's.
    pub fn state(&self, unit: &str) -> Result<UnitState> {
        let Some(name) = self.container(unit) else {
            return Ok(absent("no container"));
        };
        Ok(match self.inspect(name)? {
            Some(c) => state_of(&c),
            None => absent("no such container"),
        })
    }

    /// Whether Docker would start the unit's container on its own.
    pub fn is_enabled(&self, unit: &str) -> Result<bool> {
        let Some(name) = self.container(unit) else {
            return Ok(false);
        };
        Ok(self
            .inspect(name)?
            .is_some_and(|c| c.restart.starts_on_its_own()))
    }

    /// Stops the unit's container (one that is not there is stopped).
    pub fn queue_stop(&self, unit: &str) -> Result<()> {
        let Some(name) = self.container(unit) else {
            return Ok(());
        };
        if self.inspect(name)?.is_none() {
            return Ok(());
        }
        self.stop(name)
    }

    fn stop(&self, name: &str) -> Result<()> {
        self.block(
            &format!("docker stop {name}"),
            self.engine.stop(name, self.grace),
        )
        .map(drop)
    }

    /// Sets the unit's container's restart policy to `no`.
    pub fn disable(&self, unit: &str) -> Result<()> {
        let Some(name) = self.container(unit) else {
            return Ok(());
        };
        if self.inspect(name)?.is_none() {
            return Ok(());
        }
        self.set_policy(name, RestartPolicy::No)
    }

    fn set_policy(&self, name: &str, policy: RestartPolicy) -> Result<()> {
        self.block(
            &format!("docker update --restart {name}"),
            self.engine.set_restart_policy(name, policy),
        )
    }

    /// Sets the unit's container's restart policy to `unless-stopped` and
    /// starts it. A container that is not there is an error: the install
    /// creates both, and a switch never makes one up.
    pub fn queue_enable_now(&self, unit: &str) -> Result<()> {
        let name = self.named(unit)?;
        self.present(name)?;
        self.set_policy(name, RestartPolicy::UnlessStopped)?;
        self.start(name)
    }

    /// Stops the unit's container and starts it again.
    pub fn queue_restart(&self, unit: &str) -> Result<()> {
        let name = self.named(unit)?;
        self.present(name)?;
        self.stop(name)?;
        self.start(name)
    }

    fn present(&self, name: &str) -> Result<()> {
        if self.inspect(name)?.is_none() {
            return Err(Error::Command {
                command: format!("docker inspect {name}"),
                detail: "there is no such container: the install creates the server's and the agent's (docs/install.md); the switch changed nothing".into(),
            });
        }
        Ok(())
    }

    fn start(&self, name: &str) -> Result<()> {
        self.block(&format!("docker start {name}"), self.engine.start(name))
            .map(drop)
    }

    /// Waits up to `bound` for the unit's container to be stopped.
    pub fn wait_stopped(&self, unit: &str, bound: Duration) -> Result<UnitState> {
        self.wait(unit, bound, "after its stop")
            .until(|| self.state(unit), |s| Ok(s.is_stopped()))
    }

    /// Waits up to `bound` for the unit's container to run (and, for the
    /// server, for its etcd to serve): as [`crate::systemd::Systemctl::wait_active`],
    /// a start that ran and ended is an error at once.
    pub fn wait_active(
        &self,
        unit: &str,
        before: &UnitState,
        restarted: bool,
        bound: Duration,
    ) -> Result<()> {
        let ready = if unit == "k3s" {
            self.server_ready.as_deref()
        } else {
            None
        };
        self.wait(unit, bound, "after its start")
            .until(
                || self.state(unit),
                |s| {
                    Ok(started(unit, s, before, restarted)?
                        && ready.is_none_or(|url| {
                            crate::etcd::is_healthy(url, Duration::from_millis(500))
                        }))
                },
            )
            .map(drop)
    }

    fn wait<'a>(&'a self, unit: &'a str, bound: Duration, waited_for: &'static str) -> Wait<'a> {
        Wait {
            unit,
            bound,
            waited_for,
            left: "its container is left as Docker shows it; a rollback or demote-local stops it",
            budget: &self.budget,
        }
    }
}

/// A unit with no container: stopped, and never started.
fn absent(why: &str) -> UnitState {
    UnitState {
        active: ActiveState::Inactive,
        sub: why.to_string(),
        result: "success".into(),
        inactive_exit: 0,
    }
}

/// A container's state as a unit's. `paused` counts as active (its process
/// is there, frozen): a never-both switch must treat it as running.
pub fn state_of(c: &Container) -> UnitState {
    let (active, result) = match &c.status {
        Status::Running | Status::Paused => (ActiveState::Active, "success"),
        Status::Restarting => (ActiveState::Activating, "success"),
        Status::Removing => (ActiveState::Deactivating, "success"),
        Status::Created => (ActiveState::Inactive, "success"),
        Status::Exited if c.exit_code == 0 => (ActiveState::Inactive, "success"),
        Status::Exited => (ActiveState::Failed, "exit-code"),
        Status::Dead => (ActiveState::Failed, "resources"),
        // A word this client does not know may be a running container:
        // never taken for a stopped one.
        Status::Other(_) => (ActiveState::Activating, "unknown"),
    };
    UnitState {
        active,
        sub: status_word(&c.status).to_string(),
        result: result.into(),
        inactive_exit: started_stamp(&c.started_at),
    }
}

fn status_word(s: &Status) -> &str {
    match s {
        Status::Created => "created",
        Status::Running => "running",
        Status::Paused => "paused",
        Status::Restarting => "restarting",
        Status::Removing => "removing",
        Status::Exited => "exited",
        Status::Dead => "dead",
        Status::Other(w) => w,
    }
}

/// A container's last start as nanoseconds since the epoch (0 for Docker's
/// zero time or a time that does not parse): what a unit's
/// `InactiveExitTimestampMonotonic` is to a start's wait, a stamp that
/// changes when a start has run.
pub fn started_stamp(started_at: &str) -> u64 {
    started_at
        .parse::<jiff::Timestamp>()
        .ok()
        .and_then(|t| u64::try_from(t.as_nanosecond()).ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
