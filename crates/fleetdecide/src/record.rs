//! What the Lease records of a swap: the step it is in, how a wound-down
//! swap stopped, and how the last one ended. The wire form of each is the
//! Lease's annotations' (kebab-case names, JSON notes).

use serde::{Deserialize, Serialize};

use fleetfacts::reasons::Reason;

/// The steps of a swap, as recorded on the Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SwapStep {
    /// Waiting for the snapshot.
    Snapshot,
    /// Promoting the incoming host.
    Promote,
    /// Rolling the incoming host back.
    Rollback,
    /// Removing a rolled-back host's member.
    RemoveIncoming,
    /// Evicting the outgoing host's pods (after its cordon).
    Drain,
    /// Stepping the outgoing host down.
    StepDown,
    /// Removing the outgoing host's member.
    Removal,
    /// Waiting for the outgoing host's agent.
    Finish,
    /// Removing labels and annotations; uncordoning.
    CleanUp,
    /// Halted at a safe point while paused.
    Paused,
}

impl SwapStep {
    /// The step's name on the Lease and in output.
    pub fn as_str(self) -> &'static str {
        match self {
            SwapStep::Snapshot => "snapshot",
            SwapStep::Promote => "promote",
            SwapStep::Rollback => "rollback",
            SwapStep::RemoveIncoming => "remove-incoming",
            SwapStep::Drain => "drain",
            SwapStep::StepDown => "step-down",
            SwapStep::Removal => "removal",
            SwapStep::Finish => "finish",
            SwapStep::CleanUp => "clean-up",
            SwapStep::Paused => "paused",
        }
    }

    /// Every step, in a swap's order.
    pub const ALL: [SwapStep; 10] = [
        SwapStep::Snapshot,
        SwapStep::Promote,
        SwapStep::Rollback,
        SwapStep::RemoveIncoming,
        SwapStep::Drain,
        SwapStep::StepDown,
        SwapStep::Removal,
        SwapStep::Finish,
        SwapStep::CleanUp,
        SwapStep::Paused,
    ];

    /// Reads a step name.
    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == raw)
    }
}

/// Why a swap winds down to the cluster as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopKind {
    /// A gate refused before anything irreversible was done.
    Refused,
    /// A step failed (the snapshot, or the promotion, which is rolled back).
    Failed,
}

/// The reason a swap winds down, kept on the Lease while it does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopNote {
    /// Refused or failed.
    pub kind: StopKind,
    /// Why.
    pub reason: Reason,
}

/// How a swap ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// The swap is done.
    Done {
        /// Something the operator must still do (an outgoing host that was
        /// down cannot finish as an agent by itself).
        warning: Option<String>,
    },
    /// The swap wound down to the cluster as it was.
    WoundDown {
        /// Refused or failed.
        kind: StopKind,
        /// Why.
        reason: Reason,
    },
}

/// The last swap's outcome, kept on the Lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastSwap {
    /// The swap id.
    pub swap: String,
    /// The outgoing Node.
    pub out: String,
    /// The incoming Node.
    pub incoming: String,
    /// When it ended (unix seconds).
    pub at: i64,
    /// How.
    pub outcome: Outcome,
}
