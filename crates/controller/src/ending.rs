//! How one change driven by this process ended ([`Ending`]), what its exit
//! code and last line say.

use fleetdecide::StopKind;
use protocol::{NodeName, exit::Exit};

/// How a swap ended for this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Done.
    Done {
        /// A swap, a grow or a shrink.
        change: fleetdecide::VoterChange,
        /// Something left for the operator.
        warning: Option<String>,
    },
    /// Refused by a gate before anything was written.
    Refused(String),
    /// Wound down to the cluster as it was.
    WoundDown {
        /// A swap, a grow or a shrink.
        change: fleetdecide::VoterChange,
        /// Refused or failed.
        kind: StopKind,
        /// Why.
        reason: String,
    },
    /// Stopped part-way.
    Stopped {
        /// The full message: why, the state left, what next.
        message: String,
    },
    /// The Lease was taken by someone else; nothing more was written.
    Lost(String),
    /// Interrupted by a signal (or `run` losing its leadership) between two
    /// actions, which is a safe point; the Lease lapses and a new run resumes.
    Interrupted {
        /// The swap's outgoing Node (none in a grow).
        out: Option<NodeName>,
        /// Its incoming Node (none in a shrink).
        incoming: Option<NodeName>,
        /// Whether this process held the regrade Lease for it.
        taken: bool,
    },
}

impl Ending {
    /// The outcome, as the exit code tells it: a swap wound down after a
    /// refusal changed nothing in the end; one wound down after a failure,
    /// lost to another controller or interrupted left the cluster safe
    /// (as it was, or at a safe point the same command resumes from); one
    /// stopped part-way needs a human.
    pub fn exit(&self) -> Exit {
        match self {
            Ending::Done { .. } => Exit::Done,
            Ending::Refused(_)
            | Ending::WoundDown {
                kind: StopKind::Refused,
                ..
            } => Exit::Refused,
            Ending::WoundDown {
                kind: StopKind::Failed,
                ..
            }
            | Ending::Lost(_)
            | Ending::Interrupted { .. } => Exit::FailedSafe,
            Ending::Stopped { .. } => Exit::NeedsHuman,
        }
    }

    /// The exit code of [`Ending::exit`].
    pub fn exit_code(&self) -> u8 {
        self.exit().code()
    }

    /// The result word and message printed last.
    pub fn summary(&self) -> (&'static str, String) {
        match self {
            Ending::Done {
                change,
                warning: None,
            } => ("done", format!("the {} is complete", change.as_str())),
            Ending::Done {
                change,
                warning: Some(w),
            } => ("done", format!("the {} is complete; {w}", change.as_str())),
            Ending::Refused(why) => ("refused", format!("nothing was changed: {why}")),
            Ending::WoundDown {
                change,
                kind,
                reason,
            } => (
                match kind {
                    StopKind::Refused => "refused",
                    StopKind::Failed => "failed",
                },
                format!(
                    "the {} was wound down and the cluster is as it was: {reason}",
                    change.as_str()
                ),
            ),
            Ending::Stopped { message } => ("stopped", message.clone()),
            Ending::Lost(why) => (
                "lost",
                format!("{why}; this controller wrote nothing more (see `fleet-role status`)"),
            ),
            Ending::Interrupted {
                out,
                incoming,
                taken: true,
            } => (
                "interrupted",
                format!(
                    "the swap is left at a safe point (between two steps); its Lease lapses within its duration. To resume it: `{}`{}; to wind it down instead: `fleet-role abort`",
                    fleetdecide::VoterChange::resume_command(out.as_ref(), incoming.as_ref()),
                    if out.is_some() && incoming.is_some() {
                        " (or `fleet-role run`)"
                    } else {
                        ""
                    }
                ),
            ),
            Ending::Interrupted { taken: false, .. } => (
                "interrupted",
                "nothing was written: the swap had not started".into(),
            ),
        }
    }
}
