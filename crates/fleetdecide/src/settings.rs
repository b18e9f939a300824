//! The controller's settings: the voter count, the Lease's timing, `run`'s
//! graces, window and pacing, and each step's timeout. Validated by the shell; plain values here.

use serde::{Deserialize, Serialize};

use crate::record::SwapStep;
use fleetfacts::window::Window;
use protocol::names::Names;

// === Settings ===

/// How long each step of a swap may take, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// From the snapshot request to the voter's report of its file.
    pub snapshot: i64,
    /// From the promotion request to the incoming host's report of `voter`.
    pub promote: i64,
    /// From the rollback request to the host's report of `done`.
    pub rollback: i64,
    /// From asking k3s to remove a rolled-back host's member to its removal.
    pub remove_incoming: i64,
    /// From the first eviction to no pod left on the outgoing host (the
    /// Eviction API's PodDisruptionBudgets and the pods' own termination
    /// grace decide how long that takes; a CI job may need long).
    #[serde(default = "default_drain")]
    pub drain: i64,
    /// From the promotion's end to the outgoing host's report of `etcd-only`
    /// (including any wait for the gates before the step-down).
    pub step_down: i64,
    /// From the step-down's end to k3s's `removed-node-name`.
    pub removal: i64,
    /// From the member's removal to the outgoing host's agent Ready.
    pub finish: i64,
}

fn default_drain() -> i64 {
    Timeouts::default().drain
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            snapshot: 300,
            promote: 900,
            rollback: 300,
            remove_incoming: 300,
            drain: 900,
            step_down: 600,
            removal: 300,
            finish: 600,
        }
    }
}

impl Timeouts {
    /// Every step bounded by the same number of seconds.
    pub fn all(secs: i64) -> Self {
        Self {
            snapshot: secs,
            promote: secs,
            rollback: secs,
            remove_incoming: secs,
            drain: secs,
            step_down: secs,
            removal: secs,
            finish: secs,
        }
    }

    /// The timeout of a step that waits; `None` for a step that only writes.
    pub fn of(&self, step: SwapStep) -> Option<i64> {
        match step {
            SwapStep::Snapshot => Some(self.snapshot),
            SwapStep::Promote => Some(self.promote),
            SwapStep::Rollback => Some(self.rollback),
            SwapStep::RemoveIncoming => Some(self.remove_incoming),
            SwapStep::Drain => Some(self.drain),
            SwapStep::StepDown => Some(self.step_down),
            SwapStep::Removal => Some(self.removal),
            SwapStep::Finish => Some(self.finish),
            SwapStep::CleanUp | SwapStep::Paused => None,
        }
    }
}

/// The spread label by default: the well-known zone label (cloud
/// providers set it; on bare metal the operator does).
pub const DEFAULT_SPREAD_LABEL: &str = "topology.kubernetes.io/zone";

/// The controller's settings, validated by the shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The protocol's names (prefix, Lease, report namespace, identity).
    pub names: Names,
    /// How many etcd voters the fleet should have (odd).
    pub voters: usize,
    /// The label whose value is a host's zone, over which voters are
    /// spread ([`crate::voterset`]); `None`: voters are not spread.
    pub spread_label: Option<protocol::validate::LabelKey>,
    /// The regrade Lease's duration, in seconds.
    pub lease_duration: i64,
    /// Seconds taken off the Lease's validity before an irreversible write,
    /// for clock skew and the time the write takes.
    pub skew_margin: i64,
    /// `run`: how long a voter may be NotReady before it is replaced.
    pub grace_period: i64,
    /// `run`: how long to wait after a swap ends (done, wound down or
    /// stopped) before the next one starts: the minimum delay between swaps.
    pub settle: i64,
    /// `run`: how long a voter that shows planned maintenance (cordoned,
    /// kured's reboot mark, `<prefix>/maintenance`) may be NotReady before
    /// it is replaced (see [`crate::grace::grace_for`]). Never shorter than
    /// `grace_period`.
    pub maintenance_grace: i64,
    /// `run`: when it may start a swap by itself; `None`: at any time.
    pub window: Option<Window>,
    /// `run`: how many failed swaps of one voter within `retry_period` it
    /// makes before it leaves that voter alone until the period has passed.
    pub retry_max: u32,
    /// `run`: the period, in seconds, over which failed swaps are counted.
    pub retry_period: i64,
    /// `run`: the wait after a voter's first failed swap before the next
    /// try; doubled after each further failure (never past `retry_period`).
    pub retry_backoff: i64,
    /// `run`: how long a host it replaced must have been Ready again before
    /// it may be chosen as a standby.
    pub standby_min_healthy: i64,
    /// A Node whose kubelet has not renewed its node Lease for this long
    /// counts as NotReady, whatever its Ready condition says (see
    /// [`apply_heartbeats`]).
    pub heartbeat_grace: i64,
    /// How old (seconds) an actuator's heartbeat (its report's host part)
    /// may be for a swap involving its host to start or go on: three of the
    /// actuator's default heartbeat periods.
    pub actuator_heartbeat_max_age: i64,
    /// Each step's timeout.
    pub timeouts: Timeouts,
    /// The termination grace an eviction gives each pod, in seconds; `None`
    /// (the default): the pod's own `terminationGracePeriodSeconds`, so a
    /// CI job is given the time its owner asked for.
    pub drain_grace: Option<i64>,
    /// Whether the drain evicts pods no controller owns (`swap --force`,
    /// `drain_force`); off (the default), such a pod stops the swap, named,
    /// as `kubectl drain` refuses it without `--force`: nothing would start
    /// it again once evicted.
    pub drain_force: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            names: Names::default(),
            voters: 3,
            spread_label: protocol::validate::LabelKey::parse(DEFAULT_SPREAD_LABEL).ok(),
            lease_duration: 60,
            skew_margin: 5,
            grace_period: 300,
            settle: 60,
            maintenance_grace: 1800,
            window: None,
            retry_max: 2,
            retry_period: 86_400,
            retry_backoff: 600,
            standby_min_healthy: 3600,
            heartbeat_grace: 40,
            actuator_heartbeat_max_age: 180,
            timeouts: Timeouts::default(),
            drain_grace: None,
            drain_force: false,
        }
    }
}
