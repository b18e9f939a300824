//! How a step's host part ended short of its end, and the state it left the
//! host in: what the report's `failed` reason says, so an operator reading
//! it knows whether anything changed and what to fix or roll back.

use std::fmt;

use protocol::Role;

/// The host as a failed step left it: its role file and k3s's two units
/// (or containers), read once the step let go of the host lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLeft {
    /// The role file's role (`None`: missing or invalid).
    pub role: Option<Role>,
    /// The server unit's state, as `status` shows it.
    pub server: String,
    /// The agent unit's state, as `status` shows it.
    pub agent: String,
}

impl HostLeft {
    /// Reads what `host` was left as. Read without the step's budget: a
    /// cancelled step still says where it stopped. Sync (it asks systemd or
    /// Docker): called on a blocking thread.
    pub fn read(host: &host::Host) -> HostLeft {
        let host = host
            .clone()
            .with_budget(host::Budget::unbounded(host.clock()));
        let s = crate::local::local_status(&host);
        HostLeft {
            role: s.role,
            server: s.server,
            agent: s.agent,
        }
    }
}

impl fmt::Display for HostLeft {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "host left with role file {}, k3s {}, k3s-agent {}",
            self.role.map_or("missing or invalid", |r| r.as_str()),
            self.server,
            self.agent,
        )
    }
}

/// Why the host's plan for a step could not be made or applied.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A snapshot step came without a swap to name its file after.
    #[error("a snapshot needs a swap to name it")]
    NoSwap,
    /// The host refused the plan, or failed part-way through it (boxed:
    /// the host's errors are large, and a step's result is moved about).
    #[error(transparent)]
    Host(Box<host::Error>),
}

impl From<host::Error> for PlanError {
    fn from(e: host::Error) -> Self {
        PlanError::Host(Box::new(e))
    }
}

/// How a step's host part ended short of its end. Its text is the report's
/// reason (one line, no secrets: it is made of paths, unit names and
/// validated values).
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The host lock was not taken (another switch held it past the lock
    /// timeout, or the step was cancelled while it waited): nothing was
    /// changed.
    #[error(transparent)]
    Lock(Box<host::Error>),
    /// The regrade Lease no longer holds the step (it lapsed while the step
    /// waited for the host lock): nothing was changed, and nothing is
    /// reported. The report still says `started`, so the step resumes when
    /// the Lease is back for its swap, or the controller asks for another.
    #[error("{0} (checked again once the host lock was taken)")]
    LeaseLapsed(String),
    /// The etcd work a step-down begins with (leadership handed over, the
    /// server k3s bootstraps from checked) failed: nothing was changed.
    #[error("{why}; nothing was changed: {left}")]
    BeforeChange {
        /// What failed.
        why: String,
        /// The host as it stands (as before the step).
        left: HostLeft,
    },
    /// The host's plan failed, possibly part-way.
    #[error("{source}; {left}")]
    Plan {
        /// What failed.
        source: Box<PlanError>,
        /// The host as the failure left it.
        left: HostLeft,
    },
    /// The step's task ended without an answer (it panicked).
    #[error("the step's task failed: {0}")]
    Task(String),
}

impl StepError {
    /// Whether the step stopped before changing anything and is not
    /// reported as failed ([`StepError::LeaseLapsed`]).
    pub fn is_stopped(&self) -> bool {
        matches!(self, StepError::LeaseLapsed(_))
    }

    /// The step's outcome as the metrics count it.
    pub fn outcome(&self) -> &'static str {
        if self.is_stopped() {
            "stopped"
        } else {
            "failed"
        }
    }

    /// The host state the step left, when it was read.
    pub fn left(&self) -> Option<&HostLeft> {
        match self {
            StepError::BeforeChange { left, .. } | StepError::Plan { left, .. } => Some(left),
            StepError::Lock(_) | StepError::LeaseLapsed(_) | StepError::Task(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn left() -> HostLeft {
        HostLeft {
            role: Some(Role::Agent),
            server: "inactive".into(),
            agent: "active".into(),
        }
    }

    #[test]
    fn a_failed_plan_names_what_failed_then_the_state_it_left_the_host_in() {
        let e = StepError::Plan {
            source: Box::new(PlanError::NoSwap),
            left: left(),
        };
        assert_eq!(
            e.to_string(),
            "a snapshot needs a swap to name it; host left with role file agent, k3s inactive, k3s-agent active"
        );
        assert_eq!(e.left(), Some(&left()));
        assert_eq!(e.outcome(), "failed");
    }

    #[test]
    fn a_lapsed_lease_stops_the_step_without_a_failure_and_says_when_it_was_checked() {
        let e = StepError::LeaseLapsed("the regrade Lease is held for another swap".into());
        assert!(e.is_stopped());
        assert_eq!(e.outcome(), "stopped");
        assert_eq!(e.left(), None);
        assert!(
            e.to_string()
                .ends_with("(checked again once the host lock was taken)"),
            "{e}"
        );
    }

    #[test]
    fn a_step_down_whose_etcd_work_failed_says_nothing_was_changed() {
        let mut l = left();
        l.role = None;
        let e = StepError::BeforeChange {
            why: "could not tell whether this member leads etcd".into(),
            left: l,
        };
        assert_eq!(
            e.to_string(),
            "could not tell whether this member leads etcd; nothing was changed: host left with role file missing or invalid, k3s inactive, k3s-agent active"
        );
    }
}
