//! What the controller sees: a Node, the regrade Lease and the whole fleet
//! as plain, untrusted values, and the heartbeat rule that overrides a stale
//! Ready.

use serde::Serialize;

use super::{LastSwap, Settings, StopKind, StopNote, SwapStep, one_line};
use crate::{
    report::{Detail, Phase, Report, ReportStep},
    validate::{NodeName, SwapId},
};

// === What the controller sees ===

/// k3s's etcd annotations on a Node, raw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct K3sEtcd {
    /// `etcd.k3s.cattle.io/node-name`: the member's name.
    pub node_name: Option<String>,
    /// `etcd.k3s.cattle.io/node-address`: the member's advertise address.
    pub node_address: Option<String>,
    /// `etcd.k3s.cattle.io/remove`: a removal is asked for (`"true"`, any case).
    pub remove: Option<String>,
    /// `etcd.k3s.cattle.io/removed-node-name`: k3s removed this member.
    pub removed_node_name: Option<String>,
}

impl K3sEtcd {
    /// Whether a removal is asked for (k3s reads `true` in any case).
    pub fn remove_requested(&self) -> bool {
        self.remove
            .as_deref()
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }
    /// Whether any of k3s's etcd annotations is present.
    pub fn any(&self) -> bool {
        self.node_name.is_some()
            || self.node_address.is_some()
            || self.remove.is_some()
            || self.removed_node_name.is_some()
    }
}

/// fleet-role's own marks on a Node, raw (see [`Names`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetMarks {
    /// `<prefix>/desired-role` (label).
    pub desired_role: Option<String>,
    /// `<prefix>/role-swap`.
    pub swap: Option<String>,
    /// `<prefix>/role-step`.
    pub step: Option<String>,
    /// `<prefix>/role-join-node`.
    pub join_node: Option<String>,
    /// `<prefix>/snapshot-request`.
    pub snapshot_request: Option<String>,
}

impl FleetMarks {
    /// Whether the swap annotations (not the `desired-role` label) are present.
    pub fn any_annotation(&self) -> bool {
        self.swap.is_some()
            || self.step.is_some()
            || self.join_node.is_some()
            || self.snapshot_request.is_some()
    }
}

/// One Node as the controller sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFacts {
    /// The Node's name.
    pub name: String,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// When the `Ready` condition last changed (unix seconds).
    pub ready_since: Option<i64>,
    /// When the kubelet last renewed the node's Lease in `kube-node-lease`.
    pub lease_renewed_at: Option<i64>,
    /// k3s's `EtcdIsVoter` condition is `True`.
    pub etcd_is_voter: bool,
    /// k3s's `node-role.kubernetes.io/etcd` label is `true`.
    pub etcd_label: bool,
    /// k3s's control-plane label is present.
    pub control_plane_label: bool,
    /// k3s's master label is present.
    pub master_label: bool,
    /// k3s's etcd annotations.
    pub k3s: K3sEtcd,
    /// `<prefix>/voter-eligible` is `"true"`.
    pub eligible: bool,
    /// `spec.unschedulable`.
    pub cordoned: bool,
    /// fleet-role's label and annotations.
    pub marks: FleetMarks,
    /// The host's report (its key of the report ConfigMap), if it parses.
    pub report: Option<Report>,
}

impl NodeFacts {
    /// Whether the Node carries any of k3s's server labels.
    pub fn has_server_labels(&self) -> bool {
        self.etcd_label || self.control_plane_label || self.master_label
    }

    /// k3s removed this host's member: `removed-node-name` is set and no
    /// newer member name replaced it (k3s clears both when a host rejoins).
    pub fn member_gone(&self) -> bool {
        match (&self.k3s.removed_node_name, &self.k3s.node_name) {
            (Some(removed), Some(current)) => removed == current,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// The Node shows an etcd member: k3s's etcd label, and no removal.
    pub fn has_member(&self) -> bool {
        self.etcd_label && !self.member_gone()
    }

    /// The report says the host runs etcd only (a finished step-down).
    pub fn reports_etcd_only(&self) -> bool {
        self.report.as_ref().is_some_and(|r| {
            r.step == ReportStep::StepDown
                && r.detail == Some(Detail::EtcdOnly)
                && matches!(r.phase, Phase::Progress | Phase::Done)
        })
    }

    /// The report says the host ended as an agent (a rollback or finish done)
    /// while its Node may still show a member.
    pub fn reports_agent(&self) -> bool {
        self.report.as_ref().is_some_and(|r| {
            matches!(r.step, ReportStep::Rollback | ReportStep::Finish) && r.phase == Phase::Done
        })
    }
}

/// The regrade Lease as the controller reads it (raw, untrusted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseFacts {
    /// `spec.holderIdentity`.
    pub holder: Option<String>,
    /// Which controller process holds it ([`Names::lease_instance`]).
    pub instance: Option<String>,
    /// `spec.renewTime` (unix seconds).
    pub renew_time: Option<i64>,
    /// `spec.leaseDurationSeconds`.
    pub duration_secs: Option<i64>,
    /// The swap id ([`Names::lease_swap`]).
    pub swap: Option<String>,
    /// The swap's outgoing Node.
    pub swap_out: Option<String>,
    /// The swap's incoming Node.
    pub swap_in: Option<String>,
    /// The step the swap is in, raw.
    pub step: Option<String>,
    /// When that step began.
    pub step_since: Option<i64>,
    /// The swap is winding down, raw JSON of a [`StopNote`].
    pub stopping: Option<String>,
    /// The swap stopped part-way, and why.
    pub stopped: Option<String>,
    /// The controller is paused.
    pub paused: bool,
    /// The last swap's outcome, raw JSON of a [`LastSwap`].
    pub last_swap: Option<String>,
}

impl LeaseFacts {
    /// When the Lease lapses (renew time + duration), if it has both.
    pub fn expiry(&self) -> Option<i64> {
        Some(self.renew_time?.saturating_add(self.duration_secs?))
    }

    /// Held by someone and not lapsed at `now`.
    pub fn is_held(&self, now: i64) -> bool {
        self.holder.as_deref().is_some_and(|h| !h.is_empty())
            && self.expiry().is_some_and(|e| now < e)
    }

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
            reason: one_line(raw),
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
            && v.now - renewed > grace
        {
            n.ready = false;
            n.ready_since = Some(renewed + grace);
        }
    }
}
