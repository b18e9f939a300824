//! What both sides see of the cluster: a Node (fleet-role's marks, k3s's
//! labels, annotations and conditions, the kubelet's heartbeat, the host's
//! report) and the regrade Lease, as plain, untrusted values. The host's
//! decision ([`crate::decide`]) and the controller's ([`crate::controller`])
//! read the same two types; the `kubeview` crate is the one place that maps
//! API objects onto them.

use serde::Serialize;

use crate::report::{Detail, Phase, Report, ReportStep};
use crate::validate::StepKind;

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
    /// The step asked for, parsed; `None` for no mark or one that names no
    /// step (the host refuses such a mark; the controller never writes one).
    pub fn step_kind(&self) -> Option<StepKind> {
        StepKind::parse(self.step.as_deref()?).ok()
    }

    /// Whether the swap annotations (not the `desired-role` label) are present.
    pub fn any_annotation(&self) -> bool {
        self.swap.is_some()
            || self.step.is_some()
            || self.join_node.is_some()
            || self.snapshot_request.is_some()
    }
}

/// One Node as fleet-role sees it.
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

/// The regrade Lease as read from the API (raw, untrusted).
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

    /// Whether the Lease is still valid at `now` with `margin` seconds taken
    /// off its validity (for clock skew and the time a write takes): renewed
    /// and not lapsing within the margin. The one definition of a valid
    /// Lease: the host's gate, the controller's "held" and its re-check
    /// before an irreversible write all use it, with their own margins.
    pub fn valid_at(&self, now: i64, margin: i64) -> bool {
        self.expiry()
            .is_some_and(|e| now < e.saturating_sub(margin.max(0)))
    }

    /// Held by someone and not lapsed at `now`.
    pub fn is_held(&self, now: i64) -> bool {
        self.holder.as_deref().is_some_and(|h| !h.is_empty()) && self.valid_at(now, 0)
    }
}
