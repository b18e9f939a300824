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
    /// `<prefix>/protocol`: the version the marks are written in.
    pub protocol: Option<String>,
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
            || self.protocol.is_some()
    }
}

/// What a Node shows of planned maintenance, raw. Any `patch nodes` holder
/// can write these, so they only ever lengthen the grace before `run`
/// replaces a voter, up to [`crate::controller::Settings::maintenance_grace`]
/// (see [`crate::controller::grace_for`]); they never cause a replacement.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceMarks {
    /// kured's [`crate::names::KURED_REBOOT_IN_PROGRESS`] annotation.
    pub kured_reboot: Option<String>,
    /// The operator's `<prefix>/maintenance` annotation: until when.
    pub until: Option<String>,
}

/// One Node as fleet-role sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFacts {
    /// The Node's name.
    pub name: String,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// Since when the Node reads as it does (unix seconds): the
    /// condition's `lastTransitionTime` as read, which the controller
    /// replaces by its own first sighting
    /// ([`crate::controller::Sightings`]) before it decides on it.
    pub ready_since: Option<i64>,
    /// The Node reads NotReady, yet its host's own fresh view of etcd says
    /// its member is healthy, so it is counted Ready
    /// ([`crate::controller::weigh_evidence`]): why, for `status`.
    pub ready_disputed: Option<String>,
    /// When the kubelet last renewed the node's Lease in `kube-node-lease`.
    pub lease_renewed_at: Option<i64>,
    /// k3s's `EtcdIsVoter` condition is `True`.
    pub etcd_is_voter: bool,
    /// k3s's `EtcdIsVoter` is `False` with reason `Unhealthy`: the etcd
    /// leader's loop could not reach the member, and writes this over a
    /// voter's `True` (k3s `setEtcdStatusCondition`), so the member may still
    /// vote.
    pub etcd_unhealthy: bool,
    /// k3s's `node-role.kubernetes.io/etcd` label is `true`.
    pub etcd_label: bool,
    /// k3s's control-plane label is present.
    pub control_plane_label: bool,
    /// k3s's master label is present.
    pub master_label: bool,
    /// k3s's etcd annotations.
    pub k3s: K3sEtcd,
    /// [`crate::names::ELIGIBLE_LABEL`] is `"true"`: the host may vote.
    pub eligible: bool,
    /// The old `<prefix>/voter-eligible` is `"true"`. It makes nothing
    /// eligible (the host's own kubelet can set it); `status` names the
    /// Nodes that carry it without [`NodeFacts::eligible`], to relabel.
    pub legacy_eligible: bool,
    /// `spec.unschedulable`.
    pub cordoned: bool,
    /// The value of the settings' spread label: the host's zone. The
    /// host's own kubelet may set it (`topology.kubernetes.io/*` is among
    /// the labels NodeRestriction lets a kubelet set), so it only ever
    /// chooses among moves the gates allow, never passes one.
    pub zone: Option<String>,
    /// The marks of planned maintenance on the Node.
    pub maintenance: MaintenanceMarks,
    /// fleet-role's label and annotations.
    pub marks: FleetMarks,
    /// The host's report (its report ConfigMap, or its key of the shared
    /// one of earlier releases, whichever is newer), if it parses
    /// and is of a protocol version this build knows.
    pub report: Option<Report>,
    /// The protocol version the host's report claims, raw
    /// ([`crate::version::of_report`]; `None`: no report, or one written
    /// before versions were marked).
    pub report_protocol: Option<String>,
    /// The host part of its report (heartbeat, demotion verdict), kept apart
    /// from [`NodeFacts::report`] for the gates that read it. Its heartbeat
    /// is the later of the report's and the host's heartbeat Lease's.
    pub host: Option<crate::report::HostPart>,
    /// Why the API refused the host's last report, as the host's heartbeat
    /// says while that stands: its report in the API is behind it.
    pub report_refused: Option<String>,
}

/// A mark k3s leaves when it removes an etcd member, by how far it can be
/// trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalMark {
    /// No mark.
    None,
    /// A mark only k3s writes: the tombstone in the host's own datastore.
    Proof,
    /// A mark others can write too: the Node's `removed-node-name`
    /// (any `patch nodes` holder's to write, and written by k3s even when
    /// its `RemovePeer` matched no member).
    Claimed,
}

/// The one rule for "the member is gone", on k3s's `mark` and on whether
/// etcd, read just now, lists the member (`None`: not read, or no reading
/// covers it).
///
/// Gone: a proof; or etcd read not listing it; or a claim that no reading
/// of etcd contradicts. A reading that failed is no answer either way: a
/// host that finished on it would stop a member that may still vote.
pub fn member_gone(mark: RemovalMark, etcd_lists: Option<bool>) -> bool {
    match mark {
        RemovalMark::Proof => true,
        RemovalMark::Claimed => etcd_lists != Some(true),
        RemovalMark::None => etcd_lists == Some(false),
    }
}

impl NodeFacts {
    /// Whether the Node carries any of k3s's server labels.
    pub fn has_server_labels(&self) -> bool {
        self.etcd_label || self.control_plane_label || self.master_label
    }

    /// k3s removed this host's member, by the Node's word alone
    /// ([`member_gone`] on [`NodeFacts::k3s_mark`], with no etcd reading).
    pub fn member_gone(&self) -> bool {
        member_gone(self.k3s_mark(), None)
    }

    /// k3s's mark of a removal on the Node: `removed-node-name` is set and
    /// no newer member name replaced it (k3s clears both when a host
    /// rejoins). Any `patch nodes` holder can write it, so it is
    /// [`RemovalMark::Claimed`], not proof.
    pub fn k3s_mark(&self) -> RemovalMark {
        let marked = match (&self.k3s.removed_node_name, &self.k3s.node_name) {
            (Some(removed), Some(current)) => removed == current,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if marked {
            RemovalMark::Claimed
        } else {
            RemovalMark::None
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
    /// The voter the swap asked for its snapshot.
    pub snapshot_from: Option<String>,
    /// The address of the voter the promotion joins, from etcd's view,
    /// written with the promote ask.
    pub join_address: Option<String>,
    /// The host step the controller asked for last (`snapshot`, `promote`,
    /// `step-down` or `rollback`), written with the Node's marks.
    pub asked: Option<String>,
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
    /// The latest endings of swaps, raw JSON of a list of
    /// `fleetdecide::SwapEnding` (for `run`'s pacing).
    pub endings: Option<String>,
    /// The protocol version the swap is recorded in, raw.
    pub protocol: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_of_k3s_etcd_annotations_counts_and_a_removal_is_asked_by_true_in_any_case() {
        assert!(!K3sEtcd::default().any());
        let one = |f: fn(&mut K3sEtcd)| {
            let mut k = K3sEtcd::default();
            f(&mut k);
            k
        };
        for k in [
            one(|k| k.node_name = Some("a".into())),
            one(|k| k.node_address = Some("a".into())),
            one(|k| k.remove = Some("a".into())),
            one(|k| k.removed_node_name = Some("a".into())),
        ] {
            assert!(k.any(), "{k:?}");
        }
        assert!(one(|k| k.remove = Some("TRUE".into())).remove_requested());
        assert!(!one(|k| k.remove = Some("yes".into())).remove_requested());
        assert!(!K3sEtcd::default().remove_requested());
    }

    #[test]
    fn any_swap_annotation_counts_but_the_desired_role_label_does_not() {
        let marks = |f: fn(&mut FleetMarks)| {
            let mut m = FleetMarks::default();
            f(&mut m);
            m
        };
        assert!(!marks(|m| m.desired_role = Some("agent".into())).any_annotation());
        for m in [
            marks(|m| m.swap = Some("s".into())),
            marks(|m| m.step = Some("s".into())),
            marks(|m| m.join_node = Some("s".into())),
            marks(|m| m.snapshot_request = Some("s".into())),
            marks(|m| m.protocol = Some("1".into())),
        ] {
            assert!(m.any_annotation(), "{m:?}");
        }
        assert_eq!(
            marks(|m| m.step = Some("step-down".into())).step_kind(),
            Some(StepKind::StepDown)
        );
        assert_eq!(marks(|m| m.step = Some("Promote".into())).step_kind(), None);
        assert_eq!(FleetMarks::default().step_kind(), None);
    }

    #[test]
    fn a_member_is_gone_on_proof_on_etcd_not_listing_it_or_on_a_claim_etcd_does_not_contradict() {
        use RemovalMark::{Claimed, None as Unmarked, Proof};
        for (mark, lists, gone) in [
            (Unmarked, None, false),
            (Unmarked, Some(true), false),
            (Unmarked, Some(false), true),
            (Proof, None, true),
            (Proof, Some(true), true),
            (Proof, Some(false), true),
            (Claimed, None, true),
            (Claimed, Some(true), false),
            (Claimed, Some(false), true),
        ] {
            assert_eq!(member_gone(mark, lists), gone, "{mark:?} {lists:?}");
        }
    }

    #[test]
    fn a_member_is_gone_when_k3s_removed_the_name_it_still_shows_or_shows_none() {
        let mut n = NodeFacts {
            etcd_label: true,
            ..NodeFacts::default()
        };
        assert!(!n.member_gone() && n.has_member());
        n.k3s.removed_node_name = Some("n-1".into());
        assert!(n.member_gone() && !n.has_member());
        n.k3s.node_name = Some("n-1".into());
        assert!(n.member_gone());
        n.k3s.node_name = Some("n-2".into());
        assert!(!n.member_gone() && n.has_member());
        n.etcd_label = false;
        assert!(!n.has_member());
        assert!(!n.has_server_labels());
        n.master_label = true;
        assert!(n.has_server_labels());
        n.master_label = false;
        n.control_plane_label = true;
        assert!(n.has_server_labels());
    }

    fn reporting(step: ReportStep, phase: Phase, detail: Option<Detail>) -> NodeFacts {
        let mut r = Report::next(None, None, step, phase, 0);
        r.detail = detail;
        NodeFacts {
            report: Some(r),
            ..NodeFacts::default()
        }
    }

    #[test]
    fn etcd_only_takes_the_step_down_milestone_and_agent_a_done_rollback_or_finish() {
        let etcd_only = Some(Detail::EtcdOnly);
        assert!(reporting(ReportStep::StepDown, Phase::Progress, etcd_only).reports_etcd_only());
        assert!(reporting(ReportStep::StepDown, Phase::Done, etcd_only).reports_etcd_only());
        assert!(!reporting(ReportStep::StepDown, Phase::Failed, etcd_only).reports_etcd_only());
        assert!(!reporting(ReportStep::StepDown, Phase::Done, None).reports_etcd_only());
        assert!(!reporting(ReportStep::Finish, Phase::Done, etcd_only).reports_etcd_only());
        assert!(!NodeFacts::default().reports_etcd_only());
        assert!(reporting(ReportStep::Rollback, Phase::Done, None).reports_agent());
        assert!(reporting(ReportStep::Finish, Phase::Done, None).reports_agent());
        assert!(!reporting(ReportStep::Finish, Phase::Progress, None).reports_agent());
        assert!(!reporting(ReportStep::Promote, Phase::Done, None).reports_agent());
        assert!(!NodeFacts::default().reports_agent());
    }

    #[test]
    fn a_lease_is_valid_until_its_renewal_plus_duration_less_the_margin() {
        let l = LeaseFacts {
            holder: Some("fleet-role".into()),
            renew_time: Some(100),
            duration_secs: Some(60),
            ..LeaseFacts::default()
        };
        assert_eq!(l.expiry(), Some(160));
        assert!(l.valid_at(159, 0) && !l.valid_at(160, 0));
        assert!(l.valid_at(154, 5) && !l.valid_at(155, 5));
        assert!(!l.valid_at(160, -5), "a negative margin adds nothing");
        assert!(l.is_held(159) && !l.is_held(160));
        let unheld = LeaseFacts {
            holder: Some(String::new()),
            ..l.clone()
        };
        assert!(!unheld.is_held(120));
        let lapsing = LeaseFacts {
            renew_time: Some(i64::MAX),
            ..l.clone()
        };
        assert_eq!(lapsing.expiry(), Some(i64::MAX));
        assert_eq!(LeaseFacts::default().expiry(), None);
        assert!(!LeaseFacts::default().valid_at(0, 0));
    }
}
