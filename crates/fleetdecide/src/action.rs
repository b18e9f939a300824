//! The vocabulary of a swap: its steps as recorded on the Lease, how it
//! ends, and the single next thing the controller does ([`Action`]).

use serde::Serialize;

use crate::gate::{Gate, failures};
use crate::record::{Outcome, StopKind, StopNote, SwapStep};
use fleetfacts::reasons::{Awaiting, Reason};
use protocol::{
    names::K3S_ETCD_REMOVE,
    validate::{NodeName, SwapId},
};

// === The swap ===

/// What this controller process is asked to do, and which swap it took the
/// Lease for. That is all the state the shell keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapState {
    /// The voter to replace, or to remove (none in a grow).
    pub out: Option<NodeName>,
    /// The standby to promote (none in a shrink).
    pub incoming: Option<NodeName>,
    /// The hosts a grow or shrink goes on with once this one is done
    /// (`--in A --in B`: 1 → 3). Only the gates before it starts read them,
    /// so that the count it is heading for is odd; each is its own change.
    pub queued: Vec<NodeName>,
    /// The id for a new swap (made by the shell; a resumed swap keeps its own
    /// unless it stopped, when a new one is needed: a host never takes a
    /// settled step of a swap again).
    pub candidate: SwapId,
    /// This process's instance id (written to the Lease).
    pub instance: String,
    /// The swap id this process took the Lease for, once it has. From then
    /// on, any observation of the Lease not being its own for this swap means
    /// another holder: it stops writing.
    pub taken: Option<SwapId>,
}

/// How a resumed swap is taken up again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Start {
    /// A new swap.
    Fresh,
    /// A swap whose controller went away (its Lease lapsed): same id, same step.
    Abandoned,
    /// A swap that stopped: a new id, so the hosts take its steps again.
    Stopped,
}

/// The next single thing to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// Take the Lease for `swap` (create it, or update it with a
    /// resourceVersion precondition).
    TakeLease {
        /// The swap id.
        swap: SwapId,
        /// The outgoing Node (none in a grow).
        out: Option<NodeName>,
        /// The incoming Node (none in a shrink).
        incoming: Option<NodeName>,
        /// New, or resumed.
        start: Start,
    },
    /// Renew the Lease.
    RenewLease,
    /// Record on the Lease that the swap entered `step` now (renews it too).
    MarkStep {
        /// The step.
        step: SwapStep,
    },
    /// Record on the Lease that the swap winds down, and why.
    BeginStop {
        /// Why.
        note: StopNote,
    },
    /// Ask a voter for a snapshot named for the swap.
    RequestSnapshot {
        /// The voter.
        node: NodeName,
        /// The swap.
        swap: SwapId,
    },
    /// Ask the incoming host to promote, joining `join`.
    Promote {
        /// The incoming host.
        node: NodeName,
        /// The voter it joins.
        join: NodeName,
        /// That voter's address as etcd's own view lists its member,
        /// recorded on the Lease with the ask (the host refuses to join
        /// any other); `None` where no view shows it.
        join_address: Option<String>,
        /// The swap.
        swap: SwapId,
    },
    /// Ask the incoming host to roll back to an agent.
    Rollback {
        /// The incoming host.
        node: NodeName,
        /// The swap.
        swap: SwapId,
    },
    /// Cordon the outgoing host.
    Cordon {
        /// The outgoing host.
        node: NodeName,
    },
    /// Evict these pods of the outgoing host through the Eviction API (a
    /// round: each is asked once; a PodDisruptionBudget's refusal is not an
    /// error, the next round asks again).
    Evict {
        /// The outgoing host.
        node: NodeName,
        /// The pods.
        pods: Vec<fleetfacts::PodRef>,
        /// The termination grace each gets, in seconds (`None`: its own).
        grace: Option<i64>,
    },
    /// Ask the outgoing host to step down.
    StepDown {
        /// The outgoing host.
        node: NodeName,
        /// The swap.
        swap: SwapId,
    },
    /// Ask k3s to remove the host's member (`etcd.k3s.cattle.io/remove=true`).
    RemoveMember {
        /// The host.
        node: NodeName,
    },
    /// Remove k3s's server role labels and etcd annotations, and set the
    /// stale `EtcdIsVoter` condition to `False`.
    CleanUpServer {
        /// The host, now an agent.
        node: NodeName,
    },
    /// Remove the swap's annotations (`role-swap`, `role-step`,
    /// `role-join-node`, `snapshot-request`).
    ClearSwapMarks {
        /// The host.
        node: NodeName,
    },
    /// Uncordon the host.
    Uncordon {
        /// The host.
        node: NodeName,
    },
    /// Release the Lease, recording the outcome.
    ReleaseLease {
        /// How the swap ended.
        outcome: Outcome,
    },
    /// Stop part-way: release the Lease with the reason recorded, leave every
    /// annotation in place. Running the same swap again resumes it.
    Stop {
        /// Where it stopped.
        step: SwapStep,
        /// Why.
        reason: Reason,
        /// The state the cluster is left in.
        left: String,
        /// What to do next.
        next: String,
    },
    /// Nothing to write now: a host or k3s is working.
    Wait {
        /// The step.
        step: SwapStep,
        /// What is awaited.
        reason: Awaiting,
        /// When the step times out (unix seconds).
        deadline: Option<i64>,
    },
    /// Another controller process holds the Lease for this same swap; wait
    /// for it to lapse (a restarted controller takes over from its former self).
    WaitForLease {
        /// When it lapses.
        until: i64,
        /// Who holds it.
        reason: String,
    },
    /// Halted at a safe point: the controller is paused.
    Paused {
        /// The step about to be taken.
        step: SwapStep,
    },
    /// The preflight refused; nothing was written.
    Refuse {
        /// Every gate's verdict.
        gates: Vec<Gate>,
    },
    /// The Lease is no longer this process's: write nothing more.
    Lost {
        /// What the Lease shows.
        reason: String,
    },
}

impl Action {
    /// Whether the action writes to the API.
    pub fn writes(&self) -> bool {
        !matches!(
            self,
            Action::Wait { .. }
                | Action::WaitForLease { .. }
                | Action::Paused { .. }
                | Action::Refuse { .. }
                | Action::Lost { .. }
        )
    }

    /// Whether the action writes the regrade Lease before its Node: an ask
    /// of a host (a snapshot, a promotion, a step-down, a rollback) is named
    /// on the Lease first, since the Node's marks alone, which any
    /// `patch nodes` holder could write, ask nothing.
    pub fn writes_lease_first(&self) -> bool {
        matches!(
            self,
            Action::RequestSnapshot { .. }
                | Action::Promote { .. }
                | Action::StepDown { .. }
                | Action::Rollback { .. }
        )
    }

    /// Whether the action writes to a Node (every such write is re-gated on
    /// a fresh read of the Lease).
    pub fn node(&self) -> Option<&NodeName> {
        match self {
            Action::RequestSnapshot { node, .. }
            | Action::Promote { node, .. }
            | Action::Rollback { node, .. }
            | Action::Cordon { node }
            | Action::StepDown { node, .. }
            | Action::RemoveMember { node }
            | Action::CleanUpServer { node }
            | Action::ClearSwapMarks { node }
            | Action::Uncordon { node } => Some(node),
            _ => None,
        }
    }

    /// Whether the swap is over for this process after the action.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Action::ReleaseLease { .. }
                | Action::Stop { .. }
                | Action::Refuse { .. }
                | Action::Lost { .. }
        )
    }

    /// The action in one line, for output and Events.
    pub fn describe(&self) -> String {
        match self {
            Action::TakeLease {
                swap,
                out,
                incoming,
                start,
            } => {
                let halves = crate::view::halves(out.as_ref(), incoming.as_ref());
                match start {
                    Start::Fresh => format!("take the Lease for swap {swap} ({halves})"),
                    Start::Abandoned => format!(
                        "take over the Lease of swap {swap} ({halves}) from a controller that went away"
                    ),
                    Start::Stopped => {
                        format!("resume the stopped swap ({halves}) as swap {swap}")
                    }
                }
            }
            Action::RenewLease => "renew the Lease".into(),
            Action::MarkStep { step } => format!("step {}", step.as_str()),
            Action::BeginStop { note } => format!(
                "wind the swap down ({}): {}",
                match note.kind {
                    StopKind::Refused => "refused",
                    StopKind::Failed => "failed",
                },
                note.reason
            ),
            Action::RequestSnapshot { node, swap } => {
                format!("ask {node} for an etcd snapshot named for swap {swap}")
            }
            Action::Promote { node, join, .. } => {
                format!("promote {node}, joining {join}")
            }
            Action::Rollback { node, .. } => format!("roll {node} back to an agent"),
            Action::Cordon { node } => format!("cordon {node}"),
            Action::Evict { node, pods, grace } => format!(
                "evict {} pod{} from {node} ({}){}",
                pods.len(),
                if pods.len() == 1 { "" } else { "s" },
                protocol::text::one_line(
                    &pods
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                grace.map(|g| format!(", grace {g} s")).unwrap_or_default()
            ),
            Action::StepDown { node, .. } => format!("ask {node} to step down to etcd-only"),
            Action::RemoveMember { node } => {
                format!("ask k3s to remove {node}'s etcd member ({K3S_ETCD_REMOVE}=true)")
            }
            Action::CleanUpServer { node } => {
                format!("remove {node}'s server role labels and k3s etcd annotations")
            }
            Action::ClearSwapMarks { node } => format!("clear the swap's annotations on {node}"),
            Action::Uncordon { node } => format!("uncordon {node}"),
            Action::ReleaseLease { outcome } => match outcome {
                Outcome::Done { warning: None } => "release the Lease: the swap is done".into(),
                Outcome::Done { warning: Some(w) } => {
                    format!("release the Lease: the swap is done; {w}")
                }
                Outcome::WoundDown { reason, .. } => format!(
                    "release the Lease: the swap was wound down, the cluster is as it was ({reason})"
                ),
            },
            Action::Stop {
                step,
                reason,
                left,
                next,
            } => format!(
                "stopped at {}: {reason}. Left: {left}. Next: {next}",
                step.as_str()
            ),
            Action::Wait { reason, .. } => format!("waiting: {reason}"),
            Action::WaitForLease { reason, .. } => format!("waiting: {reason}"),
            Action::Paused { step } => format!(
                "paused before {}: waiting for `fleet-role resume`",
                step.as_str()
            ),
            Action::Refuse { gates } => format!("refused: {}", failures(gates)),
            Action::Lost { reason } => format!("lost the Lease: {reason}; writing nothing more"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Awaiting, Reason, fixtures::*};

    #[test]
    fn every_action_is_described_in_one_line_naming_what_it_touches() {
        let n1 = || name("n1");
        let s = || id("s1");
        for (a, want) in [
            (
                Action::TakeLease {
                    swap: s(),
                    out: Some(n1()),
                    incoming: Some(name("n4")),
                    start: Start::Fresh,
                },
                "take the Lease for swap s1 (out n1, in n4)",
            ),
            (Action::RenewLease, "renew the Lease"),
            (
                Action::MarkStep {
                    step: SwapStep::RemoveIncoming,
                },
                "step remove-incoming",
            ),
            (
                Action::Promote {
                    node: name("n4"),
                    join: name("n2"),
                    join_address: None,
                    swap: s(),
                },
                "promote n4, joining n2",
            ),
            (
                Action::RemoveMember { node: n1() },
                "ask k3s to remove n1's etcd member (etcd.k3s.cattle.io/remove=true)",
            ),
            (Action::Uncordon { node: n1() }, "uncordon n1"),
            (
                Action::Wait {
                    step: SwapStep::StepDown,
                    reason: Awaiting::StepDown { node: "n1".into() },
                    deadline: None,
                },
                "waiting: n1 steps down to etcd-only",
            ),
            (
                Action::Stop {
                    step: SwapStep::Finish,
                    reason: Reason::AgentNotReady {
                        node: "n1".into(),
                        secs: 9,
                    },
                    left: "L".into(),
                    next: "N".into(),
                },
                "stopped at finish: n1's agent was not Ready within 9 s. Left: L. Next: N",
            ),
            (
                Action::ReleaseLease {
                    outcome: Outcome::Done { warning: None },
                },
                "release the Lease: the swap is done",
            ),
        ] {
            assert_eq!(a.describe(), want);
        }
    }

    #[test]
    fn every_step_name_reads_back_as_the_same_step() {
        for step in SwapStep::ALL {
            assert_eq!(SwapStep::parse(step.as_str()), Some(step));
        }
        assert_eq!(SwapStep::parse("Promote"), None);
    }
}
