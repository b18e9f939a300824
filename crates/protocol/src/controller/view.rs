//! What the controller sees: a Node, the regrade Lease and the whole fleet
//! as plain, untrusted values, and the heartbeat rule that overrides a stale
//! Ready.

use serde::Serialize;

use super::{LastSwap, Reason, Settings, StopKind, StopNote, SwapStep, one_line};
use crate::{
    validate::{NodeName, SwapId},
    view::{LeaseFacts, NodeFacts},
};

/// What the controller reads of the swap it records on the Lease.
impl LeaseFacts {
    /// The swap recorded on the Lease, if its id and Nodes are valid.
    pub fn recorded_swap(&self) -> Option<Recorded> {
        Some(Recorded {
            id: SwapId::parse(self.swap.as_deref()?).ok()?,
            out: NodeName::parse(self.swap_out.as_deref()?).ok()?,
            incoming: NodeName::parse(self.swap_in.as_deref()?).ok()?,
        })
    }

    /// The wind-down note, if any (an unreadable one still winds down).
    pub fn stop_note(&self) -> Option<StopNote> {
        let raw = self.stopping.as_deref()?;
        Some(serde_json::from_str(raw).unwrap_or_else(|_| StopNote {
            kind: StopKind::Failed,
            reason: Reason::Unreadable { raw: one_line(raw) },
        }))
    }

    /// The last swap's outcome, if readable.
    pub fn last(&self) -> Option<LastSwap> {
        serde_json::from_str(self.last_swap.as_deref()?).ok()
    }

    /// The current step, if it names one.
    pub fn current_step(&self) -> Option<SwapStep> {
        SwapStep::parse(self.step.as_deref()?)
    }
}

/// A swap as the Lease records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recorded {
    /// The swap id.
    pub id: SwapId,
    /// The outgoing Node.
    pub out: NodeName,
    /// The incoming Node.
    pub incoming: NodeName,
}

/// Everything one decision looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetView {
    /// Now, unix seconds, by the controller's clock.
    pub now: i64,
    /// The settings.
    pub settings: Settings,
    /// Every Node.
    pub nodes: Vec<NodeFacts>,
    /// The regrade Lease, if it exists.
    pub lease: Option<LeaseFacts>,
    /// The pods on the outgoing Node of the swap the Lease records, read
    /// while it drains or steps down (empty otherwise).
    pub pods: Vec<super::PodFacts>,
}

impl FleetView {
    /// The Node called `name`.
    pub fn node(&self, name: &str) -> Option<&NodeFacts> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Nodes sorted by name, for deterministic choices.
    pub(crate) fn sorted(&self) -> Vec<&NodeFacts> {
        let mut v: Vec<&NodeFacts> = self.nodes.iter().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Whether the controller is paused.
    pub fn paused(&self) -> bool {
        self.lease.as_ref().is_some_and(|l| l.paused)
    }
}

/// Marks NotReady every Node whose kubelet has not renewed its node Lease
/// for longer than [`Settings::heartbeat_grace`], as if since the grace ran
/// out. The Ready condition of a dead host stays `True` until the node
/// lifecycle controller notices (40 to 50 s by default, never where none
/// runs); a gate that trusted it then could count a dead voter as healthy.
/// A Node without a node Lease is judged by its condition alone.
pub fn apply_heartbeats(v: &mut FleetView) {
    let grace = v.settings.heartbeat_grace;
    for n in &mut v.nodes {
        if let Some(renewed) = n.lease_renewed_at
            && n.ready
            && v.now.saturating_sub(renewed) > grace
        {
            n.ready = false;
            n.ready_since = Some(renewed.saturating_add(grace));
        }
    }
}
