//! The host's errors. Each says what was being done and to which path or unit,
//! so the one line an operator sees is enough to act on.

use std::{io, path::PathBuf, time::Duration};

/// An error from a host-local operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory operation failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Another switch holds the host's lock.
    #[error("another switch holds the host lock {} (waited {}s)", path.display(), waited.as_secs())]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long this one waited.
        waited: Duration,
    },
    /// `systemctl` or `k3s` could not run, or failed.
    #[error("{command} failed: {detail}")]
    Command {
        /// The command line (never carries a secret: arguments are validated names).
        command: String,
        /// Exit status and the last line it printed.
        detail: String,
    },
    /// `systemctl` or `k3s` did not finish within its deadline and was killed.
    #[error("{command} timed out after {}s and was killed; {left}", after.as_secs())]
    Timeout {
        /// The command line.
        command: String,
        /// Its deadline.
        after: Duration,
        /// What the kill leaves on the host.
        left: String,
    },
    /// The role file holds something other than `server` or `agent`.
    #[error("the role file {} holds no valid role (it must say server or agent); no switch is made while it does not", path.display())]
    BadRoleFile {
        /// The role file.
        path: PathBuf,
    },
    /// etcd did not serve again after a step-down's restart.
    #[error("etcd did not serve again within {}s at {url}; the role file still names the server", waited.as_secs())]
    EtcdNotBack {
        /// The health URL probed.
        url: String,
        /// How long it waited.
        waited: Duration,
    },
    /// Pod shims ran again after a step-down killed them all: something
    /// (a kubelet k3s still runs) restarts them, so the host is not left
    /// without pods.
    #[error("pod shims run again after every shim was killed (pids {}, within {}s of the kill): something restarts them, such as a kubelet k3s still runs (is disable-agent set at the etcd-only level?); the role file still names the server", pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", "), settle.as_secs())]
    ShimsRunAgain {
        /// The shims found, by process id.
        pids: Vec<u32>,
        /// How long the shims were watched after the kill.
        settle: Duration,
    },
    /// A unit did not end up in the state asked for.
    #[error("{unit} is {state} after {action}")]
    UnitState {
        /// The unit.
        unit: String,
        /// What was asked.
        action: &'static str,
        /// What systemctl says now.
        state: String,
    },
    /// A unit did not reach the state waited for within its bound.
    #[error("{unit} is {state} {waited_for} (waited {}s); {left}", waited.as_secs())]
    UnitWait {
        /// The unit.
        unit: String,
        /// What was waited for ("after its start was queued").
        waited_for: &'static str,
        /// Its state when the wait ended.
        state: String,
        /// How long it waited.
        waited: Duration,
        /// What that leaves on the host.
        left: &'static str,
    },
    /// The step was cancelled: a newer step (a rollback) takes over.
    #[error("cancelled while {doing}; the step that replaced it takes over from this state")]
    Cancelled {
        /// What was under way.
        doing: String,
    },
    /// The step ran out of its bound.
    #[error("the step's bound ran out while {doing}")]
    StepDeadline {
        /// What was under way.
        doing: String,
    },
    /// A k3s config file k3s would read is not valid for a key fleet-role reads.
    #[error("k3s's config {}: {why}", path.display())]
    K3sConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong (never a value of another key: the token is there).
        why: String,
    },
    /// The snapshot command succeeded but left no file.
    #[error("k3s etcd-snapshot save reported success but no snapshot named {name}-* is in {}", dir.display())]
    SnapshotMissing {
        /// The snapshot name asked for.
        name: String,
        /// The snapshot directory.
        dir: PathBuf,
    },
}

/// The host's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches what was being done and the path to an IO error.
pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { what, path, source }
}
