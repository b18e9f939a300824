//! Where k3s's server and agent run: two systemd units on a native host,
//! two containers on a Docker host. A switch asks the same things of
//! either (a state, enabled or not, stop, disable, enable and start,
//! restart, the waits), so it is written once, over [`Units`].

use std::{ffi::OsString, time::Duration};

use crate::{
    budget::Budget,
    docker::DockerUnits,
    error::Result,
    systemd::{Systemctl, UnitState},
};

/// The host's k3s units, as systemd units or as Docker containers.
#[derive(Debug, Clone)]
pub enum Units {
    /// systemd's `k3s` and `k3s-agent`, through `systemctl`.
    Systemd(Systemctl),
    /// The server's and the agent's containers, through Docker's API.
    Docker(DockerUnits),
}

impl Units {
    /// The unit's state.
    pub fn state(&self, unit: &str) -> Result<UnitState> {
        match self {
            Units::Systemd(s) => s.state(unit),
            Units::Docker(d) => d.state(unit),
        }
    }

    /// Whether the unit starts on its own (enabled; a container's restart
    /// policy).
    pub fn is_enabled(&self, unit: &str) -> Result<bool> {
        match self {
            Units::Systemd(s) => s.is_enabled(unit),
            Units::Docker(d) => d.is_enabled(unit),
        }
    }

    /// Stops the unit (systemd: queued, [`Units::wait_stopped`] confirms).
    pub fn queue_stop(&self, unit: &str) -> Result<()> {
        match self {
            Units::Systemd(s) => s.queue_stop(unit),
            Units::Docker(d) => d.queue_stop(unit),
        }
    }

    /// Keeps the unit from starting on its own.
    pub fn disable(&self, unit: &str) -> Result<()> {
        match self {
            Units::Systemd(s) => s.disable(unit),
            Units::Docker(d) => d.disable(unit),
        }
    }

    /// Enables and starts the unit ([`Units::wait_active`] confirms).
    pub fn queue_enable_now(&self, unit: &str) -> Result<()> {
        match self {
            Units::Systemd(s) => s.queue_enable_now(unit),
            Units::Docker(d) => d.queue_enable_now(unit),
        }
    }

    /// Restarts the unit ([`Units::wait_active`] confirms).
    pub fn queue_restart(&self, unit: &str) -> Result<()> {
        match self {
            Units::Systemd(s) => s.queue_restart(unit),
            Units::Docker(d) => d.queue_restart(unit),
        }
    }

    /// Waits up to `bound` for the unit to be stopped.
    pub fn wait_stopped(&self, unit: &str, bound: Duration) -> Result<UnitState> {
        match self {
            Units::Systemd(s) => s.wait_stopped(unit, bound),
            Units::Docker(d) => d.wait_stopped(unit, bound),
        }
    }

    /// Waits up to `bound` for a start of the unit to have made it ready
    /// (see [`Systemctl::wait_active`]).
    pub fn wait_active(
        &self,
        unit: &str,
        before: &UnitState,
        restarted: bool,
        bound: Duration,
    ) -> Result<()> {
        match self {
            Units::Systemd(s) => s.wait_active(unit, before, restarted, bound),
            Units::Docker(d) => d.wait_active(unit, before, restarted, bound),
        }
    }

    /// Whether the unit's files changed since they were loaded: only
    /// systemd has unit drop-ins to load.
    pub fn needs_daemon_reload(&self, unit: &str) -> Result<bool> {
        match self {
            Units::Systemd(s) => s.needs_daemon_reload(unit),
            Units::Docker(_) => Ok(false),
        }
    }

    /// Loads changed unit files (nothing to do on Docker).
    pub fn daemon_reload(&self) -> Result<()> {
        match self {
            Units::Systemd(s) => s.daemon_reload(),
            Units::Docker(_) => Ok(()),
        }
    }

    /// Refuses a switch before any change when a unit it would start or
    /// stop is missing (a Docker host's container); systemd's units come
    /// with the k3s install, and a missing one fails its own call.
    pub fn refuse_missing(&self) -> Result<()> {
        match self {
            Units::Systemd(_) => Ok(()),
            Units::Docker(d) => d.refuse_missing(),
        }
    }

    /// Whether the server's unit reads fleet-role's unit drop-in (the join
    /// URL in its environment, for a network wrapper): systemd's only.
    pub fn has_unit_dropins(&self) -> bool {
        matches!(self, Units::Systemd(_))
    }

    pub(crate) fn with_budget(self, budget: Budget) -> Self {
        match self {
            Units::Systemd(s) => Units::Systemd(s.with_budget(budget)),
            Units::Docker(d) => Units::Docker(d.with_budget(budget)),
        }
    }

    pub(crate) fn with_search_path(self, path: Option<OsString>) -> Self {
        match self {
            Units::Systemd(s) => Units::Systemd(s.with_search_path(path)),
            docker => docker,
        }
    }

    pub(crate) fn with_timeout(self, timeout: Duration) -> Self {
        match self {
            Units::Systemd(s) => Units::Systemd(s.with_timeout(timeout)),
            docker => docker,
        }
    }
}
