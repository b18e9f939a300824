//! The controller's decisions: what `fleet-role` should do next, given what
//! the cluster shows.
//!
//! Everything here is a function over plain values. The shell (the
//! `controller` crate) reads Nodes, node Leases, the report ConfigMap and the
//! regrade Lease into a [`FleetView`], asks [`next_action`] for the next single
//! write or wait, carries it out, and reads again. It keeps no state of its
//! own beyond "this process took the Lease for this swap" ([`SwapState::taken`]): a swap's
//! progress is read back from the cluster every time (the Lease's annotations
//! name the swap, its outgoing and incoming Nodes and the step it is in; the
//! Nodes' annotations and the hosts' reports say how far each host got), so a
//! controller that is killed and started again resumes where the cluster
//! stands, or cleans up.
//!
//! The answers to "why did the controller refuse?" are the [`Gate`]s: each
//! returns a name, a verdict and a reason, for `swap --dry-run` and for the
//! re-check before each irreversible write. The quorum arithmetic is
//! [`quorum`] and [`keeps_quorum`].
//!
//! # The swap, as [`next_action`] drives it
//!
//! 1. Preflight gates; take the Lease for a new swap id.
//! 2. Ask a healthy voter (not the outgoing one where possible) for a snapshot
//!    named for the swap; wait for its report.
//! 3. Promote the incoming host, joining a healthy voter that is not the
//!    outgoing one; wait for its report of `voter` and k3s's `EtcdIsVoter`.
//!    On failure or timeout: wind down (roll the host back, have its member
//!    removed if it has one, clear what the swap wrote) and stop with the
//!    cluster as it was.
//! 4. Cordon the outgoing voter and ask it to step down; wait for `etcd-only`.
//!    An outgoing voter that is down (NotReady) is not asked: its member is
//!    removed directly, which cannot cost quorum since it counts as down.
//! 5. Set k3s's `etcd.k3s.cattle.io/remove=true`; wait for
//!    `removed-node-name`.
//! 6. Wait for the host's finish report and its agent Ready (the Ready
//!    condition and a node Lease renewed since the finish began); only then
//!    remove the server role labels and k3s's etcd annotations; clear the
//!    swap's annotations; uncordon.
//! 7. Release the Lease.
//!
//! Every wait is bounded by its step's timeout. A failure after the promotion
//! cannot be undone safely by the controller, so the swap *stops*: the Lease
//! is released with the reason recorded on it, every annotation is left in
//! place, and the [`Action::Stop`] says what state the cluster is in and what
//! to do next. Running the same swap again resumes it under a new swap id.

use serde::{Deserialize, Serialize};

use crate::{
    names::{
        K3S_CONTROL_PLANE_LABEL, K3S_ETCD_NODE_ADDRESS, K3S_ETCD_NODE_NAME, K3S_ETCD_REMOVE,
        K3S_ETCD_REMOVED_NODE_NAME, K3S_ETCD_ROLE_LABEL, K3S_MASTER_LABEL, Names,
    },
    report::{Detail, Phase, Report, ReportStep},
    validate::{NodeName, SwapId},
};

// === Names of the controller's own Lease annotations ===

impl Names {
    fn controller_key(&self, name: &str) -> String {
        format!("{}/{}", self.prefix, name)
    }
    /// Lease annotation: the outgoing Node of the swap the Lease is held for.
    pub fn lease_swap_out(&self) -> String {
        self.controller_key("swap-out")
    }
    /// Lease annotation: the incoming Node of the swap.
    pub fn lease_swap_in(&self) -> String {
        self.controller_key("swap-in")
    }
    /// Lease annotation: the controller process holding the Lease (the holder
    /// identity is shared, since the actuators check it; this tells two
    /// controller processes apart).
    pub fn lease_instance(&self) -> String {
        self.controller_key("swap-instance")
    }
    /// Lease annotation: the step the swap is in ([`SwapStep`]).
    pub fn lease_step(&self) -> String {
        self.controller_key("swap-step")
    }
    /// Lease annotation: when the step began (unix seconds); its timeout
    /// runs from here, across controller restarts.
    pub fn lease_step_since(&self) -> String {
        self.controller_key("swap-step-since")
    }
    /// Lease annotation: the swap is winding down to the cluster as it was
    /// ([`StopNote`] as JSON).
    pub fn lease_stopping(&self) -> String {
        self.controller_key("swap-stopping")
    }
    /// Lease annotation: the swap stopped part-way, and why; running it again
    /// resumes it.
    pub fn lease_stopped(&self) -> String {
        self.controller_key("swap-stopped")
    }
    /// Lease annotation: `"true"` while the controller is paused.
    pub fn lease_paused(&self) -> String {
        self.controller_key("paused")
    }
    /// Lease annotation: the last swap's outcome ([`LastSwap`] as JSON).
    pub fn lease_last_swap(&self) -> String {
        self.controller_key("last-swap")
    }
}

/// The k3s labels a server carries and an agent should not: removed once
/// the host runs as an agent.
pub const SERVER_LABELS: [&str; 3] = [
    K3S_CONTROL_PLANE_LABEL,
    K3S_MASTER_LABEL,
    K3S_ETCD_ROLE_LABEL,
];

/// k3s's etcd annotations, removed with the server labels.
pub const K3S_ETCD_ANNOTATIONS: [&str; 4] = [
    K3S_ETCD_NODE_NAME,
    K3S_ETCD_NODE_ADDRESS,
    K3S_ETCD_REMOVE,
    K3S_ETCD_REMOVED_NODE_NAME,
];

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
    /// From the promotion's end to the outgoing host's report of `etcd-only`
    /// (including any wait for the gates before the step-down).
    pub step_down: i64,
    /// From the step-down's end to k3s's `removed-node-name`.
    pub removal: i64,
    /// From the member's removal to the outgoing host's agent Ready.
    pub finish: i64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            snapshot: 300,
            promote: 900,
            rollback: 300,
            remove_incoming: 300,
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
            SwapStep::StepDown => Some(self.step_down),
            SwapStep::Removal => Some(self.removal),
            SwapStep::Finish => Some(self.finish),
            SwapStep::CleanUp | SwapStep::Paused => None,
        }
    }
}

/// The controller's settings, validated by the shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The protocol's names (prefix, Lease, report namespace, identity).
    pub names: Names,
    /// How many etcd voters the fleet should have (odd).
    pub voters: usize,
    /// The regrade Lease's duration, in seconds.
    pub lease_duration: i64,
    /// Seconds taken off the Lease's validity before an irreversible write,
    /// for clock skew and the time the write takes.
    pub skew_margin: i64,
    /// `run`: how long a voter may be NotReady before it is replaced.
    pub grace_period: i64,
    /// `run`: how long to wait after a swap before the next one.
    pub settle: i64,
    /// A Node whose kubelet has not renewed its node Lease for this long
    /// counts as NotReady, whatever its Ready condition says (see
    /// [`apply_heartbeats`]).
    pub heartbeat_grace: i64,
    /// Each step's timeout.
    pub timeouts: Timeouts,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            names: Names::default(),
            voters: 3,
            lease_duration: 60,
            skew_margin: 5,
            grace_period: 300,
            settle: 60,
            heartbeat_grace: 40,
            timeouts: Timeouts::default(),
        }
    }
}

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

/// How the controller counts a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// An etcd voter: k3s's etcd label and `EtcdIsVoter`.
    Voter,
    /// An etcd member that is not (yet) a voter: the etcd label without
    /// `EtcdIsVoter`.
    Learner,
    /// A voter whose host stepped down: etcd only, waiting for its removal.
    EtcdOnly,
    /// A host that rolled back to an agent while its Node still shows a
    /// member: the member is removed next.
    RolledBack,
    /// k3s removed the member; the host finishes as an agent and its server
    /// labels are still to be removed.
    Removed,
    /// No etcd member.
    Agent,
}

impl Class {
    /// The class as shown by `status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Voter => "voter",
            Class::Learner => "learner",
            Class::EtcdOnly => "etcd-only",
            Class::RolledBack => "rolled-back",
            Class::Removed => "removed",
            Class::Agent => "agent",
        }
    }
}

/// Classifies a host from its Node and report.
pub fn classify(n: &NodeFacts) -> Class {
    if n.member_gone() {
        return if n.has_server_labels() || n.k3s.any() {
            Class::Removed
        } else {
            Class::Agent
        };
    }
    if !n.etcd_label {
        return Class::Agent;
    }
    if n.reports_etcd_only() {
        Class::EtcdOnly
    } else if n.reports_agent() {
        Class::RolledBack
    } else if n.etcd_is_voter {
        Class::Voter
    } else {
        Class::Learner
    }
}

/// Whether the host's member votes (a voter, or a stepped-down voter, or a
/// rolled-back host whose member was a voter).
pub fn is_voting(n: &NodeFacts) -> bool {
    match classify(n) {
        Class::Voter | Class::EtcdOnly => true,
        Class::RolledBack => n.etcd_is_voter,
        Class::Learner | Class::Removed | Class::Agent => false,
    }
}

/// Whether the host's member votes and is healthy: the Node Ready, k3s's
/// `EtcdIsVoter` true, and its host not known to have left (a rolled-back
/// host's member is down).
pub fn is_healthy_voter(n: &NodeFacts) -> bool {
    matches!(classify(n), Class::Voter | Class::EtcdOnly) && n.ready && n.etcd_is_voter
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
    fn sorted(&self) -> Vec<&NodeFacts> {
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

// === The quorum arithmetic ===

/// The majority of `members` voting members: how many must be healthy for
/// etcd to make progress.
pub fn quorum(members: usize) -> usize {
    members / 2 + 1
}

/// Whether a cluster of `members_left` voting members with `healthy_left`
/// of them healthy keeps quorum. A cluster with no member left never does.
pub fn keeps_quorum(members_left: usize, healthy_left: usize) -> bool {
    members_left > 0 && healthy_left >= quorum(members_left)
}

/// What a removal takes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Removing {
    /// A healthy voting member.
    HealthyVoter,
    /// A voting member that is down (NotReady, or its host left).
    DownVoter,
    /// A member that does not vote (a learner).
    NonVoter,
}

/// The voting members as the controller counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct VoterCount {
    /// Voting members whose Nodes are seen.
    pub seen: usize,
    /// Voting members with no Node seen: the configured count minus the
    /// voting members seen (not counting the swap's incoming host); each
    /// counts as down.
    pub missing: usize,
    /// Healthy voting members.
    pub healthy: usize,
}

impl VoterCount {
    /// All voting members, seen or not.
    pub fn members(&self) -> usize {
        self.seen + self.missing
    }

    /// Members and healthy members left after `removing` one.
    pub fn after_removal(&self, removing: Removing) -> (usize, usize) {
        match removing {
            Removing::HealthyVoter => (
                self.members().saturating_sub(1),
                self.healthy.saturating_sub(1),
            ),
            Removing::DownVoter => (self.members().saturating_sub(1), self.healthy),
            Removing::NonVoter => (self.members(), self.healthy),
        }
    }

    /// Whether removing one member keeps quorum.
    pub fn removal_keeps_quorum(&self, removing: Removing) -> bool {
        let (m, h) = self.after_removal(removing);
        keeps_quorum(m, h)
    }
}

/// Counts the voting members. `incoming` (the swap's incoming host) is not
/// counted against the configured number when working out missing voters,
/// since it is there in addition to them while the swap runs.
pub fn count_voters(v: &FleetView, incoming: Option<&str>) -> VoterCount {
    let seen = v.nodes.iter().filter(|n| is_voting(n)).count();
    let healthy = v.nodes.iter().filter(|n| is_healthy_voter(n)).count();
    let seen_not_incoming = v
        .nodes
        .iter()
        .filter(|n| is_voting(n) && Some(n.name.as_str()) != incoming)
        .count();
    VoterCount {
        seen,
        missing: v.settings.voters.saturating_sub(seen_not_incoming),
        healthy,
    }
}

/// What removing `n`'s member takes away.
pub fn removing(n: &NodeFacts) -> Removing {
    if is_healthy_voter(n) {
        Removing::HealthyVoter
    } else if is_voting(n) {
        Removing::DownVoter
    } else {
        Removing::NonVoter
    }
}

// === Gates ===

/// The gates, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateName {
    /// The controller is not paused.
    NotPaused,
    /// No other swap holds the Lease or is left unfinished.
    NoOtherSwap,
    /// The outgoing host is a voter.
    OutgoingVoter,
    /// The incoming host carries `<prefix>/voter-eligible=true`.
    IncomingEligible,
    /// The incoming host's Node is Ready.
    IncomingReady,
    /// The incoming host is an agent (no etcd member).
    IncomingAgent,
    /// The incoming host is a healthy voter (before the outgoing one's removal).
    IncomingVoter,
    /// Every voter other than the outgoing one is Ready and `EtcdIsVoter`.
    VotersHealthy,
    /// No etcd learner is pending.
    NoLearner,
    /// The healthy voters left after the removal are a quorum of the members left.
    QuorumAfterRemoval,
}

impl GateName {
    /// The gate's name as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            GateName::NotPaused => "not-paused",
            GateName::NoOtherSwap => "no-other-swap",
            GateName::OutgoingVoter => "outgoing-voter",
            GateName::IncomingEligible => "incoming-eligible",
            GateName::IncomingReady => "incoming-ready",
            GateName::IncomingAgent => "incoming-agent",
            GateName::IncomingVoter => "incoming-voter",
            GateName::VotersHealthy => "voters-healthy",
            GateName::NoLearner => "no-learner",
            GateName::QuorumAfterRemoval => "quorum-after-removal",
        }
    }
}

/// One gate's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gate {
    /// Which gate.
    pub name: GateName,
    /// Whether it passed.
    pub passed: bool,
    /// Why, in one line.
    pub reason: String,
}

impl Gate {
    fn pass(name: GateName, reason: impl Into<String>) -> Self {
        Self {
            name,
            passed: true,
            reason: reason.into(),
        }
    }
    fn fail(name: GateName, reason: impl Into<String>) -> Self {
        Self {
            name,
            passed: false,
            reason: reason.into(),
        }
    }
    fn check(name: GateName, passed: bool, reason: impl Into<String>) -> Self {
        Self {
            name,
            passed,
            reason: reason.into(),
        }
    }
}

/// Whether every gate passed.
pub fn all_pass(gates: &[Gate]) -> bool {
    gates.iter().all(|g| g.passed)
}

/// The failed gates as one line.
pub fn failures(gates: &[Gate]) -> String {
    gates
        .iter()
        .filter(|g| !g.passed)
        .map(|g| format!("{}: {}", g.name.as_str(), g.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Gate: the controller is not paused.
pub fn gate_not_paused(v: &FleetView) -> Gate {
    Gate::check(
        GateName::NotPaused,
        !v.paused(),
        if v.paused() {
            "the controller is paused (`fleet-role resume` lifts it)"
        } else {
            "not paused"
        },
    )
}

/// Gate: no other swap. The Lease is free (no holder, or lapsed) or held by
/// this process (`instance`); no unfinished swap with another pair is
/// recorded on it; no Node other than `out` and `incoming` carries a step.
pub fn gate_no_other_swap(
    v: &FleetView,
    out: &str,
    incoming: &str,
    instance: Option<&str>,
) -> Gate {
    let name = GateName::NoOtherSwap;
    if let Some(l) = &v.lease {
        let ours = instance.is_some() && l.instance.as_deref() == instance;
        if l.is_held(v.now) && !ours {
            let what = match l.recorded_swap() {
                Some(r) => format!(" for swap {} (out {}, in {})", r.id, r.out, r.incoming),
                None => String::new(),
            };
            return Gate::fail(
                name,
                format!(
                    "the regrade Lease is held by {}{what} for {} s more",
                    one_line(l.holder.as_deref().unwrap_or_default()),
                    l.expiry().unwrap_or(v.now) - v.now
                ),
            );
        }
        if let Some(r) = l.recorded_swap()
            && (r.out.as_str() != out || r.incoming.as_str() != incoming)
        {
            let why = l
                .stopped
                .as_deref()
                .map(|s| format!(" (stopped: {})", one_line(s)))
                .unwrap_or_default();
            return Gate::fail(
                name,
                format!(
                    "swap {} (out {}, in {}) is unfinished{why}; resume it with `fleet-role swap --out {} --in {}`",
                    r.id, r.out, r.incoming, r.out, r.incoming
                ),
            );
        }
        if l.recorded_swap().is_none() && l.swap.is_some() {
            return Gate::fail(
                name,
                "the regrade Lease names a swap that does not parse; see docs/controller.md (recovery)",
            );
        }
    }
    let others: Vec<String> = v
        .sorted()
        .into_iter()
        .filter(|n| n.name != out && n.name != incoming && n.marks.step.is_some())
        .map(|n| {
            format!(
                "{} carries step {} of swap {}",
                n.name,
                one_line(n.marks.step.as_deref().unwrap_or_default()),
                one_line(n.marks.swap.as_deref().unwrap_or("(none)"))
            )
        })
        .collect();
    if !others.is_empty() {
        return Gate::fail(
            name,
            format!("a step of another swap is left: {}", others.join(", ")),
        );
    }
    Gate::pass(name, "the regrade Lease is free or ours")
}

/// Gate: the outgoing host is a voter (or, when `stepped_down_ok`, a voter
/// this swap already stepped down).
pub fn gate_outgoing_voter(v: &FleetView, out: &str, stepped_down_ok: bool) -> Gate {
    let name = GateName::OutgoingVoter;
    match v.node(out) {
        None => Gate::fail(name, format!("no Node {out}")),
        Some(n) => match classify(n) {
            Class::Voter => Gate::pass(name, format!("{out} is a voter")),
            Class::EtcdOnly if stepped_down_ok => {
                Gate::pass(name, format!("{out} is a voter at the etcd-only level"))
            }
            c => Gate::fail(name, format!("{out} is {}, not a voter", c.as_str())),
        },
    }
}

/// Gate: the incoming host may vote.
pub fn gate_incoming_eligible(v: &FleetView, incoming: &str) -> Gate {
    let name = GateName::IncomingEligible;
    let label = v.settings.names.eligible();
    match v.node(incoming) {
        None => Gate::fail(name, format!("no Node {incoming}")),
        Some(n) if n.eligible => Gate::pass(name, format!("{incoming} carries {label}=true")),
        Some(_) => Gate::fail(name, format!("{incoming} does not carry {label}=true")),
    }
}

/// Gate: the incoming host's Node is Ready.
pub fn gate_incoming_ready(v: &FleetView, incoming: &str) -> Gate {
    let name = GateName::IncomingReady;
    match v.node(incoming) {
        None => Gate::fail(name, format!("no Node {incoming}")),
        Some(n) if n.ready => Gate::pass(name, format!("{incoming} is Ready")),
        Some(_) => Gate::fail(name, format!("{incoming} is not Ready")),
    }
}

/// Gate: the incoming host is an agent (and not the outgoing host).
pub fn gate_incoming_agent(v: &FleetView, out: &str, incoming: &str) -> Gate {
    let name = GateName::IncomingAgent;
    if out == incoming {
        return Gate::fail(name, "the incoming and outgoing hosts are the same Node");
    }
    match v.node(incoming) {
        None => Gate::fail(name, format!("no Node {incoming}")),
        Some(n) => match classify(n) {
            Class::Agent if !n.has_server_labels() => {
                Gate::pass(name, format!("{incoming} is an agent"))
            }
            Class::Agent => Gate::fail(
                name,
                format!("{incoming} still carries k3s's server labels"),
            ),
            c => Gate::fail(name, format!("{incoming} is {}, not an agent", c.as_str())),
        },
    }
}

/// Gate: the incoming host is a healthy voter.
pub fn gate_incoming_voter(v: &FleetView, incoming: &str) -> Gate {
    let name = GateName::IncomingVoter;
    match v.node(incoming) {
        None => Gate::fail(name, format!("no Node {incoming}")),
        Some(n) if is_healthy_voter(n) => {
            Gate::pass(name, format!("{incoming} is a healthy voter"))
        }
        Some(n) => Gate::fail(
            name,
            format!(
                "{incoming} is {}{}, not a healthy voter",
                classify(n).as_str(),
                if n.ready { "" } else { " and NotReady" }
            ),
        ),
    }
}

/// Gate: every voting member other than `out` is healthy (Node Ready,
/// `EtcdIsVoter` true, its host not known to have left).
pub fn gate_voters_healthy(v: &FleetView, out: &str) -> Gate {
    let name = GateName::VotersHealthy;
    let sick: Vec<String> = v
        .sorted()
        .into_iter()
        .filter(|n| n.name != out && is_voting(n) && !is_healthy_voter(n))
        .map(|n| {
            let mut why = Vec::new();
            if !n.ready {
                why.push("NotReady");
            }
            if !n.etcd_is_voter {
                why.push("not EtcdIsVoter");
            }
            if classify(n) == Class::RolledBack {
                why.push("its host left");
            }
            format!("{} ({})", n.name, why.join(", "))
        })
        .collect();
    if sick.is_empty() {
        Gate::pass(name, "every voter is Ready and EtcdIsVoter")
    } else {
        Gate::fail(name, format!("unhealthy voter: {}", sick.join(", ")))
    }
}

/// Gate: no learner is pending (other than `except`, the swap's own
/// incoming host while it joins).
pub fn gate_no_learner(v: &FleetView, except: Option<&str>) -> Gate {
    let name = GateName::NoLearner;
    let learners: Vec<&str> = v
        .sorted()
        .into_iter()
        .filter(|n| classify(n) == Class::Learner && Some(n.name.as_str()) != except)
        .map(|n| n.name.as_str())
        .collect();
    if learners.is_empty() {
        Gate::pass(name, "no learner")
    } else {
        Gate::fail(
            name,
            format!("a learner is pending: {}", learners.join(", ")),
        )
    }
}

/// Gate: removing `out`'s member keeps quorum. With `project_promotion`, the
/// count is made as if the incoming host were already a healthy voter (the
/// preflight's look ahead); otherwise it is the cluster as it is.
pub fn gate_quorum_after_removal(
    v: &FleetView,
    out: &str,
    incoming: &str,
    project_promotion: bool,
) -> Gate {
    let name = GateName::QuorumAfterRemoval;
    let Some(o) = v.node(out) else {
        return Gate::fail(name, format!("no Node {out}"));
    };
    let mut count = count_voters(v, Some(incoming));
    if project_promotion && v.node(incoming).is_none_or(|n| !is_healthy_voter(n)) {
        count.seen += 1;
        count.healthy += 1;
    }
    check_removal(name, count, removing(o), out)
}

/// Gate: removing `node`'s member (a rolled-back incoming host) keeps quorum.
pub fn gate_quorum_for(v: &FleetView, node: &str, incoming: Option<&str>) -> Gate {
    let name = GateName::QuorumAfterRemoval;
    let Some(n) = v.node(node) else {
        return Gate::fail(name, format!("no Node {node}"));
    };
    check_removal(name, count_voters(v, incoming), removing(n), node)
}

fn check_removal(name: GateName, count: VoterCount, what: Removing, node: &str) -> Gate {
    let (m, h) = count.after_removal(what);
    let missing = if count.missing > 0 {
        format!(
            " ({} voter Node(s) missing, counted as down)",
            count.missing
        )
    } else {
        String::new()
    };
    let how = match what {
        Removing::HealthyVoter => "a healthy voter",
        Removing::DownVoter => "a down voter",
        Removing::NonVoter => "a non-voting member",
    };
    let text = format!(
        "removing {node} ({how}) leaves {h} healthy of {m} voting members, quorum {}{missing}",
        quorum(m)
    );
    Gate::check(name, keeps_quorum(m, h), text)
}

/// The preflight gates of a new swap, in the order they are printed.
pub fn preflight(v: &FleetView, out: &str, incoming: &str, instance: Option<&str>) -> Vec<Gate> {
    vec![
        gate_not_paused(v),
        gate_no_other_swap(v, out, incoming, instance),
        gate_outgoing_voter(v, out, false),
        gate_incoming_eligible(v, incoming),
        gate_incoming_ready(v, incoming),
        gate_incoming_agent(v, out, incoming),
        gate_voters_healthy(v, out),
        gate_no_learner(v, None),
        gate_quorum_after_removal(v, out, incoming, true),
    ]
}

/// The gates re-checked right before the snapshot request and the promotion.
fn promote_gates(v: &FleetView, out: &str, incoming: &str) -> Vec<Gate> {
    vec![
        gate_outgoing_voter(v, out, false),
        gate_incoming_eligible(v, incoming),
        gate_incoming_ready(v, incoming),
        gate_incoming_agent(v, out, incoming),
        gate_voters_healthy(v, out),
        gate_no_learner(v, None),
        gate_quorum_after_removal(v, out, incoming, true),
    ]
}

/// The gates re-checked right before the cordon, the step-down and the
/// removal of the outgoing host's member.
fn removal_gates(v: &FleetView, out: &str, incoming: &str) -> Vec<Gate> {
    vec![
        gate_outgoing_voter(v, out, true),
        gate_incoming_voter(v, incoming),
        gate_voters_healthy(v, out),
        gate_no_learner(v, None),
        gate_quorum_after_removal(v, out, incoming, false),
    ]
}

// === The swap ===

/// What this controller process is asked to do, and which swap it took the
/// Lease for. That is all the state the shell keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapState {
    /// The voter to replace.
    pub out: NodeName,
    /// The standby to promote.
    pub incoming: NodeName,
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
            SwapStep::StepDown => "step-down",
            SwapStep::Removal => "removal",
            SwapStep::Finish => "finish",
            SwapStep::CleanUp => "clean-up",
            SwapStep::Paused => "paused",
        }
    }

    /// Reads a step name.
    pub fn parse(raw: &str) -> Option<Self> {
        [
            SwapStep::Snapshot,
            SwapStep::Promote,
            SwapStep::Rollback,
            SwapStep::RemoveIncoming,
            SwapStep::StepDown,
            SwapStep::Removal,
            SwapStep::Finish,
            SwapStep::CleanUp,
            SwapStep::Paused,
        ]
        .into_iter()
        .find(|s| s.as_str() == raw)
    }
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
    /// Why, in one line.
    pub reason: String,
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
        reason: String,
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

/// The next single thing to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// Take the Lease for `swap` (create it, or update it with a
    /// resourceVersion precondition).
    TakeLease {
        /// The swap id.
        swap: SwapId,
        /// The outgoing Node.
        out: NodeName,
        /// The incoming Node.
        incoming: NodeName,
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
        reason: String,
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
        reason: String,
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
            } => match start {
                Start::Fresh => {
                    format!("take the Lease for swap {swap} (out {out}, in {incoming})")
                }
                Start::Abandoned => format!(
                    "take over the Lease of swap {swap} (out {out}, in {incoming}) from a controller that went away"
                ),
                Start::Stopped => {
                    format!("resume the stopped swap of {out} for {incoming} as swap {swap}")
                }
            },
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

/// The one next thing to do for the swap `s`, given the cluster `v`. Pure.
pub fn next_action(v: &FleetView, s: &SwapState) -> Action {
    let ours = v
        .lease
        .as_ref()
        .filter(|l| l.instance.as_deref() == Some(s.instance.as_str()));
    let Some(l) = ours else {
        if s.taken.is_some() {
            return Action::Lost {
                reason: describe_lease(v),
            };
        }
        return start(v, s);
    };
    let Some(rec) = l.recorded_swap() else {
        return Action::Lost {
            reason: "the Lease names this controller but no valid swap".into(),
        };
    };
    if l.holder.as_deref() != Some(v.settings.names.controller_identity.as_str())
        || rec.out != s.out
        || rec.incoming != s.incoming
        || s.taken.as_ref().is_some_and(|t| *t != rec.id)
    {
        return Action::Lost {
            reason: describe_lease(v),
        };
    }
    if renew_due(v, l) {
        return Action::RenewLease;
    }
    drive(v, l, &rec)
}

fn describe_lease(v: &FleetView) -> String {
    match &v.lease {
        None => "the regrade Lease is gone".into(),
        Some(l) => format!(
            "the regrade Lease is held by {} (instance {}) for swap {}",
            one_line(l.holder.as_deref().unwrap_or("nobody")),
            one_line(l.instance.as_deref().unwrap_or("none")),
            one_line(l.swap.as_deref().unwrap_or("none"))
        ),
    }
}

/// A third of the duration has passed since the last renewal (or the
/// Lease has no renew time).
fn renew_due(v: &FleetView, l: &LeaseFacts) -> bool {
    match l.renew_time {
        None => true,
        Some(r) => v.now >= r + (v.settings.lease_duration / 3).max(1),
    }
}

/// The Lease is valid for an irreversible write: not lapsing within the margin.
pub fn lease_valid_for_write(v: &FleetView, l: &LeaseFacts) -> bool {
    l.expiry()
        .is_some_and(|e| v.now + v.settings.skew_margin < e)
}

fn start(v: &FleetView, s: &SwapState) -> Action {
    let (out, inc) = (s.out.as_str(), s.incoming.as_str());
    if let Some(l) = &v.lease
        && let Some(rec) = l.recorded_swap()
        && rec.out == s.out
        && rec.incoming == s.incoming
    {
        if l.is_held(v.now) {
            return Action::WaitForLease {
                until: l.expiry().unwrap_or(v.now),
                reason: format!(
                    "swap {} of the same Nodes is held by controller instance {} until it lapses",
                    rec.id,
                    one_line(l.instance.as_deref().unwrap_or("unknown"))
                ),
            };
        }
        let gates = vec![gate_not_paused(v), gate_no_other_swap(v, out, inc, None)];
        if !all_pass(&gates) {
            return Action::Refuse { gates };
        }
        return if l.stopped.is_some() {
            Action::TakeLease {
                swap: s.candidate.clone(),
                out: s.out.clone(),
                incoming: s.incoming.clone(),
                start: Start::Stopped,
            }
        } else {
            Action::TakeLease {
                swap: rec.id,
                out: s.out.clone(),
                incoming: s.incoming.clone(),
                start: Start::Abandoned,
            }
        };
    }
    let gates = preflight(v, out, inc, None);
    if all_pass(&gates) {
        Action::TakeLease {
            swap: s.candidate.clone(),
            out: s.out.clone(),
            incoming: s.incoming.clone(),
            start: Start::Fresh,
        }
    } else {
        Action::Refuse { gates }
    }
}

/// Entering a step: mark it on the Lease when it changes (its timeout runs
/// from the mark), unless the swap is halted at a safe point while paused.
enum Entry {
    Continue,
    Act(Action),
}

fn enter(v: &FleetView, l: &LeaseFacts, step: SwapStep) -> Entry {
    let halted = v.paused() && l.current_step() == Some(SwapStep::Paused);
    if !halted && (l.current_step() != Some(step) || l.step_since.is_none()) {
        return Entry::Act(Action::MarkStep { step });
    }
    Entry::Continue
}

fn deadline(v: &FleetView, l: &LeaseFacts, step: SwapStep) -> Option<i64> {
    if l.current_step() != Some(step) {
        // Halted while paused: the timeout does not run.
        return None;
    }
    let since = l.step_since?;
    Some(since + v.settings.timeouts.of(step)?)
}

fn overdue(v: &FleetView, l: &LeaseFacts, step: SwapStep) -> bool {
    deadline(v, l, step).is_some_and(|d| v.now >= d)
}

fn wait(v: &FleetView, l: &LeaseFacts, step: SwapStep, reason: impl Into<String>) -> Action {
    Action::Wait {
        step,
        reason: reason.into(),
        deadline: deadline(v, l, step),
    }
}

macro_rules! enter {
    ($v:expr, $l:expr, $step:expr) => {
        if let Entry::Act(a) = enter($v, $l, $step) {
            return a;
        }
    };
}

/// The report's state of `step` of `swap` on a host.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Progress {
    /// Nothing reported for this step of this swap.
    None,
    /// Started, with the last milestone.
    Running(Option<Detail>),
    /// Done, with the last milestone and the report.
    Done(Box<Report>),
    /// Refused or failed, with the reason.
    Failed(Phase, String),
}

fn progress(n: &NodeFacts, swap: &SwapId, step: ReportStep) -> Progress {
    let Some(r) = &n.report else {
        return Progress::None;
    };
    if r.swap.as_ref() == Some(swap) && r.step == step {
        return match r.phase {
            Phase::Started | Phase::Progress => Progress::Running(r.detail),
            Phase::Done => Progress::Done(Box::new(r.clone())),
            p @ (Phase::Refused | Phase::Failed) => Progress::Failed(
                p,
                r.reason
                    .as_deref()
                    .map_or_else(|| "no reason given".into(), one_line),
            ),
        };
    }
    match r
        .settled
        .iter()
        .rev()
        .find(|s| s.swap.as_ref() == Some(swap) && s.step == step)
    {
        Some(s) if s.phase == Phase::Done => {
            // Done earlier; the report has moved on to another step since.
            let mut done = r.clone();
            done.step = step;
            done.phase = Phase::Done;
            Progress::Done(Box::new(done))
        }
        Some(s) => Progress::Failed(s.phase, "reported earlier in this swap".into()),
        None => Progress::None,
    }
}

fn phase_word(p: Phase) -> &'static str {
    if p == Phase::Refused {
        "refused"
    } else {
        "failed"
    }
}

fn drive(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    if let Some(note) = l.stop_note() {
        return wind_down(v, l, rec, note);
    }
    // The clean-up erases the evidence the other steps are read from, so
    // once it has begun the Lease's step alone says where the swap is.
    if l.current_step() == Some(SwapStep::CleanUp) {
        return clean_up(v, l, rec);
    }
    let o = v.node(rec.out.as_str());
    let i = v.node(rec.incoming.as_str());
    let incoming_promoted = i.is_some_and(promoted);
    let in_removal = matches!(l.current_step(), Some(SwapStep::Removal | SwapStep::Finish));
    let removal_begun = match o {
        Some(o) => o.k3s.remove_requested() || o.member_gone() || in_removal,
        // A deleted Node's member is removed by k3s itself (its `onRemove`).
        None => incoming_promoted || in_removal || l.current_step() == Some(SwapStep::StepDown),
    };
    if removal_begun {
        // A down outgoing voter is removed before the promotion (see
        // `replace_down`); once it is gone the promotion follows.
        if !incoming_promoted && o.is_some_and(|o| !stepped_down(o)) {
            return replace_down(v, l, rec);
        }
        return removal(v, l, rec);
    }
    if o.is_some_and(|o| o.marks.step.as_deref() == Some("step-down")) {
        return step_down_wait(v, l, rec);
    }
    if incoming_promoted {
        return before_step_down(v, l, rec);
    }
    let outgoing_down = o.is_some_and(|o| !o.ready);
    if let Some(i) = i
        && i.marks.step.as_deref() == Some("promote")
    {
        // etcd adds no member while a voter is unreachable: a promotion
        // that has not joined yet waits for the down voter's removal.
        if outgoing_down && !i.has_member() {
            return replace_down(v, l, rec);
        }
        return promote_wait(v, l, rec, i, false);
    }
    snapshot(v, l, rec)
}

/// The gates before a down outgoing voter's member is removed ahead of the
/// promotion: those of the promotion that still apply once it is gone, and
/// the quorum after its removal as the cluster is now.
fn down_removal_gates(v: &FleetView, out: &str, incoming: &str) -> Vec<Gate> {
    let mut gates = vec![
        gate_outgoing_voter(v, out, false),
        gate_incoming_eligible(v, incoming),
        gate_voters_healthy(v, out),
        gate_no_learner(v, Some(incoming)),
        gate_quorum_after_removal(v, out, incoming, false),
    ];
    gates.extend(incoming_ready_until_asked(v, incoming));
    gates
}

/// The gates of a promotion after the outgoing voter's member is gone.
fn late_promote_gates(v: &FleetView, out: &str, incoming: &str) -> Vec<Gate> {
    let mut gates = vec![
        gate_incoming_eligible(v, incoming),
        gate_voters_healthy(v, out),
        gate_no_learner(v, Some(incoming)),
    ];
    gates.extend(incoming_ready_until_asked(v, incoming));
    gates
}

/// `incoming-ready`, until the host is asked to promote: from then on its
/// agent is stopped and its server's kubelet starts only once etcd took the
/// member, so its Node is NotReady while it joins (the promotion's own
/// timeout bounds that).
fn incoming_ready_until_asked(v: &FleetView, incoming: &str) -> Option<Gate> {
    let asked = v
        .node(incoming)
        .is_some_and(|i| i.marks.step.as_deref() == Some("promote"));
    (!asked).then(|| gate_incoming_ready(v, incoming))
}

/// Replacing a down voter. etcd (with k3s's strict reconfiguration check)
/// adds no member, not even a learner, while a voter is unreachable, so the
/// usual order (promote, then remove) cannot work: the down voter's member
/// is removed first, which cannot cost quorum (it counts as down already,
/// and the gate checks the rest), then the standby is promoted. Once the
/// member is gone the cluster cannot be put back as it was, so a failure
/// from there stops the swap (resumable) rather than winding it down.
fn replace_down(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    let (out, inc) = (rec.out.as_str(), rec.incoming.as_str());
    let i = v.node(inc);
    if let Some(o) = v.node(out)
        && !o.member_gone()
    {
        enter!(v, l, SwapStep::Removal);
        let left = format!(
            "{out} is down{}; k3s was {}asked to remove its member; {inc} {}",
            if o.cordoned { " and cordoned" } else { "" },
            if o.k3s.remove_requested() {
                ""
            } else {
                "not yet "
            },
            if i.is_some_and(|i| i.marks.step.is_some()) {
                "was asked to promote and waits for the removal"
            } else {
                "is not promoted yet"
            }
        );
        if overdue(v, l, SwapStep::Removal) {
            return stop(
                SwapStep::Removal,
                format!(
                    "{out}'s member was not removed within {} s",
                    v.settings.timeouts.removal
                ),
                left,
                format!(
                    "check the voters' health and k3s's managed-etcd-controller; then {}",
                    resume_hint(rec)
                ),
            );
        }
        if o.k3s.remove_requested() {
            return wait(
                v,
                l,
                SwapStep::Removal,
                format!("k3s removes the down voter {out}'s etcd member"),
            );
        }
        let gates = down_removal_gates(v, out, inc);
        if !all_pass(&gates) {
            let touched = o.cordoned || i.is_some_and(|i| i.marks.step.is_some());
            if !touched {
                return Action::BeginStop {
                    note: StopNote {
                        kind: StopKind::Refused,
                        reason: failures(&gates),
                    },
                };
            }
            return wait(
                v,
                l,
                SwapStep::Removal,
                format!("the gates before the removal: {}", failures(&gates)),
            );
        }
        if v.paused() {
            return paused(l, SwapStep::Removal);
        }
        if !o.cordoned {
            return Action::Cordon {
                node: rec.out.clone(),
            };
        }
        return Action::RemoveMember {
            node: rec.out.clone(),
        };
    }
    // The down voter's member is gone: promote the standby.
    match i {
        Some(i) if i.marks.step.as_deref() == Some("promote") => promote_wait(v, l, rec, i, true),
        _ => promote_request(v, l, rec, true),
    }
}

/// The incoming host is a healthy voter and reported `voter`.
fn promoted(i: &NodeFacts) -> bool {
    let reported = i.report.as_ref().is_some_and(|r| {
        r.step == ReportStep::Promote
            && r.detail == Some(Detail::Voter)
            && matches!(r.phase, Phase::Progress | Phase::Done)
    });
    i.marks.step.as_deref() == Some("promote") && is_healthy_voter(i) && reported
}

fn snapshot(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    let requested: Vec<&NodeFacts> = v
        .sorted()
        .into_iter()
        .filter(|n| n.marks.snapshot_request.as_deref() == Some(rec.id.as_str()))
        .collect();
    // A done snapshot on any voter asked: on to the promotion.
    for n in &requested {
        if let Progress::Done(_) = progress(n, &rec.id, ReportStep::Snapshot) {
            if v.node(rec.out.as_str()).is_some_and(|o| !o.ready) {
                return replace_down(v, l, rec);
            }
            return before_promote(v, l, rec);
        }
    }
    enter!(v, l, SwapStep::Snapshot);
    if let Some(n) = requested.first() {
        return match progress(n, &rec.id, ReportStep::Snapshot) {
            Progress::Failed(p, why) => Action::BeginStop {
                note: StopNote {
                    kind: StopKind::Failed,
                    reason: format!("the snapshot on {} {}: {why}", n.name, phase_word(p)),
                },
            },
            _ if overdue(v, l, SwapStep::Snapshot) => Action::BeginStop {
                note: StopNote {
                    kind: StopKind::Failed,
                    reason: format!(
                        "the snapshot on {} was not reported within {} s",
                        n.name, v.settings.timeouts.snapshot
                    ),
                },
            },
            _ => wait(
                v,
                l,
                SwapStep::Snapshot,
                format!("{} takes a snapshot named {}", n.name, rec.id),
            ),
        };
    }
    let gates = promote_gates(v, rec.out.as_str(), rec.incoming.as_str());
    if !all_pass(&gates) {
        return Action::BeginStop {
            note: StopNote {
                kind: StopKind::Refused,
                reason: failures(&gates),
            },
        };
    }
    if v.paused() {
        return paused(l, SwapStep::Snapshot);
    }
    match snapshot_voter(v, rec.out.as_str()) {
        Some(node) => Action::RequestSnapshot {
            node,
            swap: rec.id.clone(),
        },
        None => Action::BeginStop {
            note: StopNote {
                kind: StopKind::Refused,
                reason: "no healthy voter to take the snapshot".into(),
            },
        },
    }
}

fn paused(l: &LeaseFacts, step: SwapStep) -> Action {
    if l.current_step() != Some(SwapStep::Paused) {
        Action::MarkStep {
            step: SwapStep::Paused,
        }
    } else {
        Action::Paused { step }
    }
}

/// The voter that takes the snapshot: a healthy voter other than the
/// outgoing one, else the outgoing one if it is healthy.
pub fn snapshot_voter(v: &FleetView, out: &str) -> Option<NodeName> {
    let sorted = v.sorted();
    sorted
        .iter()
        .find(|n| n.name != out && classify(n) == Class::Voter && is_healthy_voter(n))
        .or_else(|| sorted.iter().find(|n| n.name == out && is_healthy_voter(n)))
        .and_then(|n| NodeName::parse(&n.name).ok())
}

/// The voter a promotion joins: a healthy voter other than the outgoing one,
/// preferring one whose address k3s has published.
pub fn join_voter(v: &FleetView, out: &str) -> Option<NodeName> {
    let candidates: Vec<&NodeFacts> = v
        .sorted()
        .into_iter()
        .filter(|n| n.name != out && classify(n) == Class::Voter && is_healthy_voter(n))
        .collect();
    candidates
        .iter()
        .find(|n| n.k3s.node_address.is_some())
        .or(candidates.first())
        .and_then(|n| NodeName::parse(&n.name).ok())
}

fn before_promote(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    enter!(v, l, SwapStep::Promote);
    let gates = promote_gates(v, rec.out.as_str(), rec.incoming.as_str());
    if !all_pass(&gates) {
        return Action::BeginStop {
            note: StopNote {
                kind: StopKind::Refused,
                reason: failures(&gates),
            },
        };
    }
    if v.paused() {
        return paused(l, SwapStep::Promote);
    }
    match join_voter(v, rec.out.as_str()) {
        Some(join) => Action::Promote {
            node: rec.incoming.clone(),
            join,
            swap: rec.id.clone(),
        },
        None => Action::BeginStop {
            note: StopNote {
                kind: StopKind::Refused,
                reason: format!("no healthy voter other than {} to join", rec.out),
            },
        },
    }
}

/// Waits for the promotion. `late`: the outgoing voter's member is already
/// gone (it was down), so a failure stops the swap instead of winding it down.
fn promote_wait(
    v: &FleetView,
    l: &LeaseFacts,
    rec: &Recorded,
    i: &NodeFacts,
    late: bool,
) -> Action {
    enter!(v, l, SwapStep::Promote);
    if i.marks.swap.as_deref() != Some(rec.id.as_str()) {
        // A promotion asked under an earlier id of this swap (it stopped
        // since): ask again under this id, the host's steps are idempotent.
        return promote_request(v, l, rec, late);
    }
    let (out, inc) = (rec.out.as_str(), rec.incoming.as_str());
    let fail = |why: String| {
        if late {
            stop(
                SwapStep::Promote,
                why,
                format!(
                    "{out} was down and its member is removed; {inc} was asked to promote: the fleet has one voter fewer than configured"
                ),
                format!(
                    "see {inc}'s report (`fleet-role status`) and docs/recovery.md; once it can join, {} (it asks {inc} to promote again)",
                    resume_hint(rec)
                ),
            )
        } else {
            Action::BeginStop {
                note: StopNote {
                    kind: StopKind::Failed,
                    reason: why,
                },
            }
        }
    };
    match progress(i, &rec.id, ReportStep::Promote) {
        Progress::Failed(p, why) => fail(format!(
            "the promotion of {} {}: {why}",
            i.name,
            phase_word(p)
        )),
        state if overdue(v, l, SwapStep::Promote) => {
            let reached = match state {
                Progress::Running(Some(Detail::Learner)) => "it is a learner",
                Progress::Running(Some(Detail::Voter)) | Progress::Done(_) => {
                    "it reported voter but the Node is not a healthy voter"
                }
                Progress::Running(_) => "it started",
                _ => "it did not report",
            };
            fail(format!(
                "{} did not become a voter within {} s ({reached})",
                i.name, v.settings.timeouts.promote
            ))
        }
        Progress::Running(Some(d)) => wait(
            v,
            l,
            SwapStep::Promote,
            format!("{} is promoting ({})", i.name, detail_word(d)),
        ),
        _ => wait(v, l, SwapStep::Promote, format!("{} is promoting", i.name)),
    }
}

/// Asks (again) for the promotion under this swap's id: after a resume, or
/// once a down outgoing voter's member is gone (`late`).
fn promote_request(v: &FleetView, l: &LeaseFacts, rec: &Recorded, late: bool) -> Action {
    enter!(v, l, SwapStep::Promote);
    let (out, inc) = (rec.out.as_str(), rec.incoming.as_str());
    let gates = if late {
        late_promote_gates(v, out, inc)
    } else {
        let mut gates = vec![
            gate_incoming_eligible(v, inc),
            gate_voters_healthy(v, out),
            gate_no_learner(v, Some(inc)),
            gate_quorum_after_removal(v, out, inc, true),
        ];
        gates.extend(incoming_ready_until_asked(v, inc));
        gates
    };
    let join = join_voter(v, out);
    let blocked = if !all_pass(&gates) {
        Some(failures(&gates))
    } else if join.is_none() {
        Some(format!("no healthy voter other than {out} to join"))
    } else {
        None
    };
    if let Some(why) = blocked {
        if !late {
            return Action::BeginStop {
                note: StopNote {
                    kind: StopKind::Failed,
                    reason: why,
                },
            };
        }
        if overdue(v, l, SwapStep::Promote) {
            return stop(
                SwapStep::Promote,
                format!("the gates before the promotion stayed shut: {why}"),
                format!(
                    "{out} was down and its member is removed; {inc} is not promoted: the fleet has one voter fewer than configured"
                ),
                format!("restore the voters' health, then {}", resume_hint(rec)),
            );
        }
        return wait(
            v,
            l,
            SwapStep::Promote,
            format!("the gates before the promotion: {why}"),
        );
    }
    if v.paused() {
        return paused(l, SwapStep::Promote);
    }
    Action::Promote {
        node: rec.incoming.clone(),
        join: join.expect("checked above"),
        swap: rec.id.clone(),
    }
}

fn detail_word(d: Detail) -> &'static str {
    match d {
        Detail::Learner => "learner",
        Detail::Voter => "voter",
        Detail::EtcdOnly => "etcd-only",
        Detail::MemberGone => "member gone",
        Detail::AgentReady => "agent ready",
        Detail::Snapshot => "snapshot",
    }
}

fn stop(step: SwapStep, reason: String, left: String, next: String) -> Action {
    Action::Stop {
        step,
        reason,
        left,
        next,
    }
}

fn resume_hint(rec: &Recorded) -> String {
    format!(
        "`fleet-role swap --out {} --in {}` resumes the swap",
        rec.out, rec.incoming
    )
}

fn before_step_down(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    enter!(v, l, SwapStep::StepDown);
    let (out, inc) = (rec.out.as_str(), rec.incoming.as_str());
    let gates = removal_gates(v, out, inc);
    if !all_pass(&gates) {
        if overdue(v, l, SwapStep::StepDown) {
            return stop(
                SwapStep::StepDown,
                format!(
                    "the gates before the step-down stayed shut: {}",
                    failures(&gates)
                ),
                format!(
                    "{inc} is a voter (promoted by this swap) and {out} is still a voter: the cluster has one voter more than configured"
                ),
                format!(
                    "restore the voters' health (`fleet-role status`), then {}",
                    resume_hint(rec)
                ),
            );
        }
        return wait(
            v,
            l,
            SwapStep::StepDown,
            format!("the gates before the step-down: {}", failures(&gates)),
        );
    }
    if v.paused() {
        return paused(l, SwapStep::StepDown);
    }
    let Some(o) = v.node(out) else {
        return wait(v, l, SwapStep::StepDown, format!("no Node {out}"));
    };
    if !o.cordoned {
        return Action::Cordon {
            node: rec.out.clone(),
        };
    }
    if !o.ready {
        // A down voter cannot step down; removing its member cannot cost
        // quorum (it counts as down already) and the gates just said so.
        return Action::RemoveMember {
            node: rec.out.clone(),
        };
    }
    Action::StepDown {
        node: rec.out.clone(),
        swap: rec.id.clone(),
    }
}

fn step_down_wait(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    let (out, inc) = (rec.out.as_str(), rec.incoming.as_str());
    let Some(o) = v.node(out) else {
        return removal(v, l, rec);
    };
    let state = progress(o, &rec.id, ReportStep::StepDown);
    if matches!(
        state,
        Progress::Running(Some(Detail::EtcdOnly)) | Progress::Done(_)
    ) {
        return removal(v, l, rec);
    }
    enter!(v, l, SwapStep::StepDown);
    if o.marks.swap.as_deref() != Some(rec.id.as_str()) {
        // Asked under an earlier id of this swap: ask again under this one.
        let gates = removal_gates(v, out, inc);
        if !all_pass(&gates) {
            return wait(
                v,
                l,
                SwapStep::StepDown,
                format!("the gates before the step-down: {}", failures(&gates)),
            );
        }
        if v.paused() {
            return paused(l, SwapStep::StepDown);
        }
        return Action::StepDown {
            node: rec.out.clone(),
            swap: rec.id.clone(),
        };
    }
    let left = format!(
        "{inc} is a voter (promoted by this swap); {out} is cordoned and was asked to step down; its role file names the server unless its report says otherwise"
    );
    match state {
        Progress::Failed(p, why) => stop(
            SwapStep::StepDown,
            format!("the step-down of {out} {}: {why}", phase_word(p)),
            left,
            format!(
                "see {out}'s report and docs/recovery.md; once its k3s is healthy, {}",
                resume_hint(rec)
            ),
        ),
        _ if overdue(v, l, SwapStep::StepDown) => stop(
            SwapStep::StepDown,
            format!(
                "{out} did not report etcd-only within {} s",
                v.settings.timeouts.step_down
            ),
            left,
            format!(
                "check fleet-role-actuator on {out} (`journalctl -u fleet-role-actuator`); then {}",
                resume_hint(rec)
            ),
        ),
        _ => wait(
            v,
            l,
            SwapStep::StepDown,
            format!("{out} steps down to etcd-only"),
        ),
    }
}

fn removal(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    let (out, inc) = (rec.out.as_str(), rec.incoming.as_str());
    let o = v.node(out);
    if o.is_some_and(|o| !o.member_gone()) {
        enter!(v, l, SwapStep::Removal);
        let Some(o) = o else {
            return wait(v, l, SwapStep::Removal, format!("no Node {out}"));
        };
        let left = format!(
            "{inc} is a voter; {out} is cordoned, {}; k3s was {}asked to remove its member",
            if o.reports_etcd_only() {
                "at the etcd-only level"
            } else {
                "down"
            },
            if o.k3s.remove_requested() {
                ""
            } else {
                "not yet "
            }
        );
        if overdue(v, l, SwapStep::Removal) {
            return stop(
                SwapStep::Removal,
                format!(
                    "k3s did not remove {out}'s member within {} s",
                    v.settings.timeouts.removal
                ),
                left,
                format!(
                    "check k3s's managed-etcd-controller on the voters (it drops {K3S_ETCD_REMOVE} when etcd refuses for quorum); then {}",
                    resume_hint(rec)
                ),
            );
        }
        if o.k3s.remove_requested() {
            return wait(
                v,
                l,
                SwapStep::Removal,
                format!("k3s removes {out}'s etcd member"),
            );
        }
        let gates = removal_gates(v, out, inc);
        if !all_pass(&gates) {
            return wait(
                v,
                l,
                SwapStep::Removal,
                format!("the gates before the removal: {}", failures(&gates)),
            );
        }
        if v.paused() {
            return paused(l, SwapStep::Removal);
        }
        return Action::RemoveMember {
            node: rec.out.clone(),
        };
    }
    // The member is gone. A host that stepped down finishes by itself; one
    // that was down (never stepped down) cannot, and is left to the operator.
    if let Some(o) = o
        && stepped_down(o)
        && !finished(o)
    {
        enter!(v, l, SwapStep::Finish);
        let left = format!(
            "{inc} is a voter; {out}'s member is removed; {out} is cordoned and has not finished as an agent"
        );
        if let Some(r) = &o.report
            && r.step == ReportStep::Finish
            && r.phase == Phase::Failed
        {
            return stop(
                SwapStep::Finish,
                format!(
                    "{out}'s finish failed: {}",
                    r.reason
                        .as_deref()
                        .map_or_else(|| "no reason given".into(), one_line)
                ),
                left,
                format!(
                    "run `fleet-role-actuator demote-local` on {out} (idempotent; see docs/recovery.md); then {}",
                    resume_hint(rec)
                ),
            );
        }
        if overdue(v, l, SwapStep::Finish) {
            return stop(
                SwapStep::Finish,
                format!(
                    "{out}'s agent was not Ready within {} s",
                    v.settings.timeouts.finish
                ),
                left,
                format!(
                    "check {out} (`fleet-role-actuator status`, `journalctl -u k3s-agent`); `fleet-role-actuator demote-local` finishes it; then {}",
                    resume_hint(rec)
                ),
            );
        }
        return wait(
            v,
            l,
            SwapStep::Finish,
            format!("{out} finishes as an agent (Ready, node Lease renewed)"),
        );
    }
    clean_up(v, l, rec)
}

/// The host stepped down (so it finishes by itself once its member is gone).
fn stepped_down(o: &NodeFacts) -> bool {
    o.reports_etcd_only()
        || o.report
            .as_ref()
            .is_some_and(|r| r.step == ReportStep::Finish)
}

/// The host reported its finish done, its Node is Ready, and the kubelet
/// renewed its node Lease after the finish began.
pub fn finished(o: &NodeFacts) -> bool {
    let Some(r) = &o.report else {
        return false;
    };
    r.step == ReportStep::Finish
        && r.phase == Phase::Done
        && o.ready
        && o.lease_renewed_at.is_some_and(|t| t > r.started_at)
}

fn clean_up(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    enter!(v, l, SwapStep::CleanUp);
    let (out, inc) = (rec.out.as_str(), rec.incoming.as_str());
    // Only a host that finished as an agent loses its server labels and cordon.
    let finished = v.node(out).is_some_and(finished);
    if let Some(o) = v.node(out) {
        if finished && (o.has_server_labels() || o.k3s.any()) {
            return Action::CleanUpServer {
                node: rec.out.clone(),
            };
        }
        if o.marks.any_annotation() {
            return Action::ClearSwapMarks {
                node: rec.out.clone(),
            };
        }
        if finished && o.cordoned {
            return Action::Uncordon {
                node: rec.out.clone(),
            };
        }
    }
    if let Some(i) = v.node(inc)
        && i.marks.any_annotation()
    {
        return Action::ClearSwapMarks {
            node: rec.incoming.clone(),
        };
    }
    if let Some(n) = snapshot_marked(v) {
        return Action::ClearSwapMarks { node: n };
    }
    let warning = match v.node(out) {
        None => Some(format!(
            "{out}'s Node is gone (k3s removes a deleted Node's member itself)"
        )),
        Some(_) if !finished => Some(format!(
            "{out} was down, so it did not step down or finish: its member is removed; when it returns, run `fleet-role-actuator demote-local` on it, then remove its server labels and uncordon it (docs/controller.md)"
        )),
        Some(_) => None,
    };
    Action::ReleaseLease {
        outcome: Outcome::Done { warning },
    }
}

/// A Node still asked for a snapshot. At the end of a swap every such
/// request is stale (one swap runs at a time, and a resumed swap may have
/// asked under an earlier id), so all are cleared.
fn snapshot_marked(v: &FleetView) -> Option<NodeName> {
    v.sorted()
        .into_iter()
        .find(|n| n.marks.snapshot_request.is_some())
        .and_then(|n| NodeName::parse(&n.name).ok())
}

/// Back to the cluster as it was: roll the incoming host back and have its
/// member removed if it has one, clear what the swap wrote, release.
fn wind_down(v: &FleetView, l: &LeaseFacts, rec: &Recorded, note: StopNote) -> Action {
    let inc = rec.incoming.as_str();
    if let Some(i) = v.node(inc) {
        let asked = i.marks.step.as_deref();
        if asked == Some("promote") || asked == Some("rollback") {
            if asked == Some("promote") || i.marks.swap.as_deref() != Some(rec.id.as_str()) {
                return Action::Rollback {
                    node: rec.incoming.clone(),
                    swap: rec.id.clone(),
                };
            }
            match progress(i, &rec.id, ReportStep::Rollback) {
                Progress::Done(_) => {}
                Progress::Failed(p, why) => {
                    return stop(
                        SwapStep::Rollback,
                        format!(
                            "{}; then the rollback of {inc} {}: {why}",
                            note.reason,
                            phase_word(p)
                        ),
                        format!(
                            "{inc} may run its server or its agent; {} is still a voter",
                            rec.out
                        ),
                        format!(
                            "run `fleet-role-actuator demote-local` on {inc} (idempotent); then {}",
                            resume_hint(rec)
                        ),
                    );
                }
                _ => {
                    enter!(v, l, SwapStep::Rollback);
                    if overdue(v, l, SwapStep::Rollback) {
                        return stop(
                            SwapStep::Rollback,
                            format!(
                                "{}; then {inc} did not report its rollback within {} s",
                                note.reason, v.settings.timeouts.rollback
                            ),
                            format!(
                                "{inc} was asked to roll back to an agent; {} is still a voter",
                                rec.out
                            ),
                            format!(
                                "check fleet-role-actuator on {inc}; `fleet-role-actuator demote-local` there finishes the rollback; then {}",
                                resume_hint(rec)
                            ),
                        );
                    }
                    return wait(
                        v,
                        l,
                        SwapStep::Rollback,
                        format!("{inc} rolls back to an agent"),
                    );
                }
            }
            // Rolled back. Its member, if it has one, goes next.
            if i.has_member() {
                enter!(v, l, SwapStep::RemoveIncoming);
                if overdue(v, l, SwapStep::RemoveIncoming) {
                    return stop(
                        SwapStep::RemoveIncoming,
                        format!(
                            "{}; {inc} rolled back but k3s did not remove its member within {} s",
                            note.reason, v.settings.timeouts.remove_incoming
                        ),
                        format!("{inc} runs as an agent; its etcd member is still listed"),
                        format!(
                            "check k3s's managed-etcd-controller; then {}",
                            resume_hint(rec)
                        ),
                    );
                }
                if i.k3s.node_name.is_none() {
                    // k3s removes a member by the name in this annotation; a
                    // learner that never published one is removed by k3s's
                    // own learner clean-up.
                } else if i.k3s.remove_requested() {
                    return wait(
                        v,
                        l,
                        SwapStep::RemoveIncoming,
                        format!("k3s removes {inc}'s etcd member"),
                    );
                } else {
                    let gate = gate_quorum_for(v, inc, Some(inc));
                    if !gate.passed {
                        return wait(
                            v,
                            l,
                            SwapStep::RemoveIncoming,
                            format!("{}: {}", gate.name.as_str(), gate.reason),
                        );
                    }
                    return Action::RemoveMember {
                        node: rec.incoming.clone(),
                    };
                }
            }
            if i.has_server_labels() || i.k3s.any() || i.etcd_is_voter {
                return Action::CleanUpServer {
                    node: rec.incoming.clone(),
                };
            }
        }
        if i.marks.any_annotation() {
            return Action::ClearSwapMarks {
                node: rec.incoming.clone(),
            };
        }
    }
    if let Some(n) = snapshot_marked(v) {
        return Action::ClearSwapMarks { node: n };
    }
    Action::ReleaseLease {
        outcome: Outcome::WoundDown {
            kind: note.kind,
            reason: note.reason,
        },
    }
}

// === Dry run ===

/// What `swap --dry-run` prints: every gate's verdict and the steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The preflight gates.
    pub gates: Vec<Gate>,
    /// The steps, in order, one line each.
    pub steps: Vec<String>,
}

/// The plan of a swap of `out` for `incoming`, as it would run now.
pub fn plan(v: &FleetView, out: &str, incoming: &str) -> Plan {
    let t = &v.settings.timeouts;
    let snap = snapshot_voter(v, out).map_or_else(|| "(no healthy voter)".into(), String::from);
    let join = join_voter(v, out).map_or_else(|| "(no healthy voter)".into(), String::from);
    let lease = format!(
        "{}/{}",
        crate::names::LEASE_NAMESPACE,
        v.settings.names.lease_name
    );
    let out_down = v.node(out).is_some_and(|o| !o.ready);
    let mut steps = vec![
        format!(
            "take the Lease {lease} for a new swap (held as {}, {} s, renewed every {} s)",
            v.settings.names.controller_identity,
            v.settings.lease_duration,
            (v.settings.lease_duration / 3).max(1)
        ),
        format!(
            "ask {snap} for an etcd snapshot named for the swap; wait for its file (timeout {} s)",
            t.snapshot
        ),
        format!(
            "promote {incoming} joining {join}; wait for it to report voter with EtcdIsVoter (timeout {} s); on failure roll it back and remove its member",
            t.promote
        ),
    ];
    if out_down {
        steps.push(format!(
            "cordon {out}; it is NotReady, so it is not asked to step down (timeout {} s)",
            t.step_down
        ));
        steps.push(format!(
            "ask k3s to remove {out}'s member; wait for removed-node-name (timeout {} s)",
            t.removal
        ));
        steps.push(format!(
            "{out} cannot finish while down: its server labels and cordon stay; run `fleet-role-actuator demote-local` on it when it returns"
        ));
    } else {
        steps.push(format!(
            "cordon {out}; ask it to step down; wait for etcd-only (timeout {} s)",
            t.step_down
        ));
        steps.push(format!(
            "ask k3s to remove {out}'s member ({K3S_ETCD_REMOVE}=true); wait for removed-node-name (timeout {} s)",
            t.removal
        ));
        steps.push(format!(
            "wait for {out} to finish as an agent: Ready, node Lease renewed since the finish began (timeout {} s)",
            t.finish
        ));
        steps.push(format!(
            "remove {out}'s server role labels and k3s etcd annotations; clear the swap's annotations; uncordon {out}"
        ));
    }
    steps.push("release the Lease".into());
    Plan {
        gates: preflight(v, out, incoming, None),
        steps,
    }
}

// === `run` ===

/// What `run` decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum RunDecision {
    /// Start (or resume) this swap.
    Swap {
        /// The voter to replace.
        out: NodeName,
        /// The standby to promote.
        incoming: NodeName,
        /// Why.
        why: String,
    },
    /// Nothing to do now.
    Idle {
        /// Why.
        why: String,
    },
}

/// The `run` policy: replace a voter that has been NotReady past the grace
/// period, or sits on a host not eligible to vote, with a healthy eligible
/// standby. One swap at a time, with `settle` seconds between swaps; an
/// unfinished swap on the Lease is resumed first. The voter count is left as
/// it is: a swap never changes it.
pub fn run_decision(v: &FleetView) -> RunDecision {
    let idle = |why: String| RunDecision::Idle { why };
    if v.paused() {
        return idle("paused".into());
    }
    if let Some(l) = &v.lease {
        if let Some(rec) = l.recorded_swap() {
            if l.is_held(v.now) {
                return idle(format!("swap {} is running", rec.id));
            }
            return RunDecision::Swap {
                out: rec.out,
                incoming: rec.incoming,
                why: format!(
                    "swap {} is unfinished{}",
                    rec.id,
                    l.stopped
                        .as_deref()
                        .map(|s| format!(" (stopped: {})", one_line(s)))
                        .unwrap_or_default()
                ),
            };
        }
        if l.is_held(v.now) {
            return idle(format!(
                "the Lease is held by {}",
                one_line(l.holder.as_deref().unwrap_or_default())
            ));
        }
        if let Some(last) = l.last()
            && v.now < last.at + v.settings.settle
        {
            return idle(format!(
                "settling for {} s after swap {}",
                v.settings.settle,
                one_line(&last.swap)
            ));
        }
    }
    let sorted = v.sorted();
    let grace = v.settings.grace_period;
    let mut wanted: Vec<(&NodeFacts, String)> = Vec::new();
    for n in sorted.iter().filter(|n| classify(n) == Class::Voter) {
        if !n.ready {
            let since = n.ready_since.unwrap_or(i64::MIN / 2);
            if v.now - since >= grace {
                wanted.push((
                    n,
                    format!("{} has been NotReady for over {grace} s", n.name),
                ));
            }
        }
    }
    for n in sorted.iter().filter(|n| classify(n) == Class::Voter) {
        if !n.eligible && n.ready {
            wanted.push((
                n,
                format!(
                    "{} is not eligible to vote (no {}=true)",
                    n.name,
                    v.settings.names.eligible()
                ),
            ));
        }
    }
    let Some((out, why)) = wanted.into_iter().next() else {
        let voters = sorted
            .iter()
            .filter(|n| classify(n) == Class::Voter)
            .count();
        let note = if voters == v.settings.voters {
            String::new()
        } else {
            format!(
                "; {voters} voters seen, {} configured (run swaps voters, it never adds or removes one)",
                v.settings.voters
            )
        };
        return idle(format!("every voter is healthy and eligible{note}"));
    };
    let standby = sorted.iter().find(|n| {
        classify(n) == Class::Agent
            && !n.has_server_labels()
            && n.eligible
            && n.ready
            && !n.cordoned
            && !n.marks.any_annotation()
    });
    match standby.and_then(|n| NodeName::parse(&n.name).ok()) {
        Some(incoming) => match NodeName::parse(&out.name) {
            Ok(out) => RunDecision::Swap { out, incoming, why },
            Err(e) => idle(format!("{why}, but its name is not valid: {e}")),
        },
        None => idle(format!("{why}, but no healthy eligible standby is free")),
    }
}

// === Helpers ===

/// An untrusted value made safe for one line of output: control characters
/// escaped, at most 240 characters.
pub fn one_line(raw: &str) -> String {
    let mut out = String::new();
    for (i, c) in raw.chars().enumerate() {
        if i >= 240 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::{
        decide::{Decision, HostState, JoinTarget, LeaseView, NodeView, Observation, Step, decide},
        validate::Role,
    };

    const NOW: i64 = 1_000_000;
    const ME: &str = "ctl-a";

    // === Fixtures ===

    fn voter(name: &str, ip: u8) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            ready: true,
            ready_since: Some(0),
            lease_renewed_at: Some(NOW),
            etcd_is_voter: true,
            etcd_label: true,
            control_plane_label: true,
            master_label: true,
            k3s: K3sEtcd {
                node_name: Some(format!("{name}-0123abcd")),
                node_address: Some(format!("10.0.0.{ip}")),
                ..K3sEtcd::default()
            },
            eligible: true,
            marks: FleetMarks {
                desired_role: Some("server".into()),
                ..FleetMarks::default()
            },
            ..NodeFacts::default()
        }
    }

    fn agent(name: &str, eligible: bool) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            ready: true,
            ready_since: Some(0),
            lease_renewed_at: Some(NOW),
            eligible,
            ..NodeFacts::default()
        }
    }

    fn settings() -> Settings {
        Settings {
            timeouts: Timeouts::all(120),
            ..Settings::default()
        }
    }

    /// n1, n2, n3 healthy voters; n4 an eligible standby; n5 an agent that
    /// may not vote.
    fn fleet() -> FleetView {
        FleetView {
            now: NOW,
            settings: settings(),
            nodes: vec![
                voter("n1", 1),
                voter("n2", 2),
                voter("n3", 3),
                agent("n4", true),
                agent("n5", false),
            ],
            lease: None,
        }
    }

    fn node_mut<'a>(v: &'a mut FleetView, name: &str) -> &'a mut NodeFacts {
        v.nodes.iter_mut().find(|n| n.name == name).unwrap()
    }

    fn name(s: &str) -> NodeName {
        NodeName::parse(s).unwrap()
    }

    fn id(s: &str) -> SwapId {
        SwapId::parse(s).unwrap()
    }

    fn request(out: &str, incoming: &str) -> SwapState {
        SwapState {
            out: name(out),
            incoming: name(incoming),
            candidate: id("swap-1"),
            instance: ME.into(),
            taken: None,
        }
    }

    fn gate(gates: &[Gate], which: GateName) -> &Gate {
        gates.iter().find(|g| g.name == which).unwrap()
    }

    fn refused_by(a: &Action) -> Vec<GateName> {
        match a {
            Action::Refuse { gates } => {
                gates.iter().filter(|g| !g.passed).map(|g| g.name).collect()
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn lease_held_by(holder: &str, instance: &str, swap: &str, out: &str, inc: &str) -> LeaseFacts {
        LeaseFacts {
            holder: Some(holder.into()),
            instance: Some(instance.into()),
            renew_time: Some(NOW - 1),
            duration_secs: Some(60),
            swap: Some(swap.into()),
            swap_out: Some(out.into()),
            swap_in: Some(inc.into()),
            ..LeaseFacts::default()
        }
    }

    fn report(swap: &str, step: ReportStep, phase: Phase, detail: Option<Detail>) -> Report {
        let mut r = Report::next(None, Some(id(swap)), step, phase, NOW - 5);
        r.detail = detail;
        r
    }

    // === The quorum arithmetic ===

    #[test]
    fn quorum_is_a_strict_majority() {
        for (members, q) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)] {
            assert_eq!(quorum(members), q, "{members} members");
        }
    }

    #[test]
    fn a_removal_keeps_quorum_only_when_the_healthy_voters_left_are_a_majority() {
        // (voting members, healthy, removing, keeps quorum)
        let table = [
            (4, 4, Removing::HealthyVoter, true), // the swap's removal: 3 of 3
            (4, 3, Removing::HealthyVoter, true), // 2 of 3
            (4, 2, Removing::HealthyVoter, false), // 1 of 3
            (4, 3, Removing::DownVoter, true),    // 3 of 3
            (3, 2, Removing::DownVoter, true),    // 2 of 2
            (3, 1, Removing::DownVoter, false),   // 1 of 2
            (3, 2, Removing::HealthyVoter, false), // 1 of 2
            (3, 3, Removing::HealthyVoter, true), // 2 of 2
            (2, 2, Removing::HealthyVoter, true), // 1 of 1
            (1, 1, Removing::HealthyVoter, false), // nothing left
            (3, 1, Removing::NonVoter, false),    // 1 of 3 already lost
            (3, 2, Removing::NonVoter, true),     // a learner: 2 of 3
            (5, 3, Removing::HealthyVoter, false), // 2 of 4
            (5, 4, Removing::HealthyVoter, true), // 3 of 4
        ];
        for (members, healthy, what, expected) in table {
            let count = VoterCount {
                seen: members,
                missing: 0,
                healthy,
            };
            assert_eq!(
                count.removal_keeps_quorum(what),
                expected,
                "{members} members, {healthy} healthy, removing {what:?}"
            );
        }
    }

    #[test]
    fn a_missing_voter_counts_as_down() {
        let mut v = fleet();
        v.nodes.retain(|n| n.name != "n3");
        let count = count_voters(&v, None);
        assert_eq!((count.seen, count.missing, count.healthy), (2, 1, 2));
        assert_eq!(count.members(), 3);
    }

    proptest! {
        #[test]
        fn keeps_quorum_means_the_healthy_left_outnumber_the_rest(members in 0usize..50, healthy in 0usize..50) {
            let healthy = healthy.min(members);
            let ok = keeps_quorum(members, healthy);
            prop_assert_eq!(ok, members > 0 && 2 * healthy > members);
        }

        #[test]
        fn removing_a_healthy_voter_never_keeps_quorum_where_removing_a_down_one_would_not(
            members in 1usize..30, healthy in 0usize..30,
        ) {
            let healthy = healthy.min(members);
            let count = VoterCount { seen: members, missing: 0, healthy };
            if count.removal_keeps_quorum(Removing::HealthyVoter) {
                prop_assert!(count.removal_keeps_quorum(Removing::DownVoter));
            }
            if count.removal_keeps_quorum(Removing::DownVoter) {
                prop_assert!(count.removal_keeps_quorum(Removing::NonVoter) || healthy * 2 <= members);
            }
        }
    }

    // === Classification ===

    #[test]
    fn hosts_are_classified_from_their_node_and_report() {
        let v = voter("a", 1);
        assert_eq!(classify(&v), Class::Voter);

        let mut learner = voter("a", 1);
        learner.etcd_is_voter = false;
        assert_eq!(classify(&learner), Class::Learner);

        let mut etcd_only = voter("a", 1);
        etcd_only.report = Some(report(
            "s1",
            ReportStep::StepDown,
            Phase::Done,
            Some(Detail::EtcdOnly),
        ));
        assert_eq!(classify(&etcd_only), Class::EtcdOnly);

        let mut rolled = voter("a", 1);
        rolled.report = Some(report(
            "s1",
            ReportStep::Rollback,
            Phase::Done,
            Some(Detail::AgentReady),
        ));
        assert_eq!(classify(&rolled), Class::RolledBack);
        assert!(is_voting(&rolled) && !is_healthy_voter(&rolled));

        let mut removed = voter("a", 1);
        removed.k3s.removed_node_name = removed.k3s.node_name.take();
        assert_eq!(classify(&removed), Class::Removed);

        assert_eq!(classify(&agent("b", true)), Class::Agent);
    }

    #[test]
    fn a_rejoined_member_is_not_taken_for_a_removed_one() {
        let mut n = voter("a", 1);
        n.k3s.removed_node_name = Some("a-deadbeef".into());
        assert!(!n.member_gone());
        assert_eq!(classify(&n), Class::Voter);
    }

    #[test]
    fn a_node_whose_kubelet_stopped_renewing_its_lease_counts_as_not_ready() {
        let mut v = fleet();
        node_mut(&mut v, "n2").lease_renewed_at = Some(NOW - 41);
        node_mut(&mut v, "n3").lease_renewed_at = Some(NOW - 40);
        node_mut(&mut v, "n4").lease_renewed_at = None;
        apply_heartbeats(&mut v);
        let n2 = v.node("n2").unwrap();
        assert!(!n2.ready);
        assert_eq!(n2.ready_since, Some(NOW - 1));
        assert!(v.node("n3").unwrap().ready);
        assert!(
            v.node("n4").unwrap().ready,
            "no node Lease: the condition decides"
        );
        assert_eq!(
            refused_by(&next_action(&v, &request("n1", "n4"))),
            vec![GateName::VotersHealthy]
        );
    }

    #[test]
    fn a_not_ready_voter_votes_but_is_not_healthy() {
        let mut n = voter("a", 1);
        n.ready = false;
        assert!(is_voting(&n));
        assert!(!is_healthy_voter(&n));
        assert_eq!(removing(&n), Removing::DownVoter);
    }

    // === Gates, one table per gate ===

    #[test]
    fn every_preflight_gate_passes_on_a_healthy_fleet() {
        let gates = preflight(&fleet(), "n1", "n4", None);
        assert!(all_pass(&gates), "{}", failures(&gates));
        assert_eq!(gates.len(), 9);
    }

    #[test]
    fn a_swap_is_refused_while_a_voter_is_not_ready() {
        let mut v = fleet();
        node_mut(&mut v, "n2").ready = false;
        let a = next_action(&v, &request("n1", "n4"));
        assert_eq!(refused_by(&a), vec![GateName::VotersHealthy]);
        let g = gate(&preflight(&v, "n1", "n4", None), GateName::VotersHealthy).clone();
        assert!(g.reason.contains("n2 (NotReady)"), "{}", g.reason);
    }

    #[test]
    fn a_swap_is_refused_while_a_voter_is_not_etcd_is_voter_but_labelled_a_member() {
        // A member with the etcd label and no EtcdIsVoter is a learner.
        let mut v = fleet();
        node_mut(&mut v, "n2").etcd_is_voter = false;
        let a = next_action(&v, &request("n1", "n4"));
        assert_eq!(refused_by(&a), vec![GateName::NoLearner]);
    }

    #[test]
    fn the_outgoing_voter_being_down_does_not_shut_the_voters_healthy_gate() {
        let mut v = fleet();
        node_mut(&mut v, "n1").ready = false;
        let gates = preflight(&v, "n1", "n4", None);
        assert!(all_pass(&gates), "{}", failures(&gates));
    }

    #[test]
    fn a_swap_is_refused_while_a_learner_is_pending() {
        let mut v = fleet();
        let n5 = node_mut(&mut v, "n5");
        n5.etcd_label = true;
        n5.k3s.node_name = Some("n5-00aa11bb".into());
        let a = next_action(&v, &request("n1", "n4"));
        assert_eq!(refused_by(&a), vec![GateName::NoLearner]);
    }

    #[test]
    fn a_second_swap_is_refused_while_another_holds_the_lease() {
        let mut v = fleet();
        v.lease = Some(lease_held_by("fleet-role", "ctl-b", "swap-0", "n2", "n5"));
        let a = next_action(&v, &request("n1", "n4"));
        assert_eq!(refused_by(&a), vec![GateName::NoOtherSwap]);
    }

    #[test]
    fn a_swap_is_refused_while_someone_else_holds_the_lease_without_a_swap() {
        let mut v = fleet();
        let mut l = lease_held_by("intruder", "x", "s", "a", "b");
        l.swap = None;
        v.lease = Some(l);
        let a = next_action(&v, &request("n1", "n4"));
        assert_eq!(refused_by(&a), vec![GateName::NoOtherSwap]);
    }

    #[test]
    fn a_swap_is_refused_while_another_swap_is_left_unfinished() {
        let mut v = fleet();
        let mut l = lease_held_by("fleet-role", "ctl-b", "swap-0", "n2", "n5");
        l.holder = None;
        l.stopped = Some("the step-down of n2 failed".into());
        v.lease = Some(l);
        let a = next_action(&v, &request("n1", "n4"));
        assert_eq!(refused_by(&a), vec![GateName::NoOtherSwap]);
        let Action::Refuse { gates } = a else {
            unreachable!()
        };
        assert!(
            gate(&gates, GateName::NoOtherSwap)
                .reason
                .contains("--out n2 --in n5")
        );
    }

    #[test]
    fn a_swap_is_refused_while_a_node_carries_a_step_of_another_swap() {
        let mut v = fleet();
        let n3 = node_mut(&mut v, "n3");
        n3.marks.step = Some("step-down".into());
        n3.marks.swap = Some("swap-0".into());
        let a = next_action(&v, &request("n1", "n4"));
        assert_eq!(refused_by(&a), vec![GateName::NoOtherSwap]);
    }

    #[test]
    fn a_swap_is_refused_for_an_ineligible_host() {
        let a = next_action(&fleet(), &request("n1", "n5"));
        assert_eq!(refused_by(&a), vec![GateName::IncomingEligible]);
    }

    #[test]
    fn a_swap_is_refused_for_an_incoming_host_that_is_not_ready() {
        let mut v = fleet();
        node_mut(&mut v, "n4").ready = false;
        assert_eq!(
            refused_by(&next_action(&v, &request("n1", "n4"))),
            vec![GateName::IncomingReady]
        );
    }

    #[test]
    fn a_swap_is_refused_for_an_incoming_host_that_is_a_voter_already() {
        let a = next_action(&fleet(), &request("n1", "n2"));
        assert_eq!(refused_by(&a), vec![GateName::IncomingAgent]);
        let a = next_action(&fleet(), &request("n1", "n1"));
        assert!(refused_by(&a).contains(&GateName::IncomingAgent));
    }

    #[test]
    fn a_swap_is_refused_for_an_incoming_agent_still_labelled_a_server() {
        let mut v = fleet();
        node_mut(&mut v, "n4").control_plane_label = true;
        assert_eq!(
            refused_by(&next_action(&v, &request("n1", "n4"))),
            vec![GateName::IncomingAgent]
        );
    }

    #[test]
    fn a_swap_is_refused_when_the_outgoing_host_is_not_a_voter() {
        let a = next_action(&fleet(), &request("n5", "n4"));
        assert!(refused_by(&a).contains(&GateName::OutgoingVoter));
        let a = next_action(&fleet(), &request("nx", "n4"));
        assert!(refused_by(&a).contains(&GateName::OutgoingVoter));
    }

    #[test]
    fn a_swap_is_refused_while_paused() {
        let mut v = fleet();
        v.lease = Some(LeaseFacts {
            paused: true,
            ..LeaseFacts::default()
        });
        assert_eq!(
            refused_by(&next_action(&v, &request("n1", "n4"))),
            vec![GateName::NotPaused]
        );
    }

    #[test]
    fn a_swap_is_refused_when_too_few_healthy_voters_would_be_left_after_the_removal() {
        // Three voters configured, one seen: the two missing count as down.
        // After the promotion: 4 members, 2 healthy; after the removal of the
        // healthy outgoing voter: 1 healthy of 3, below quorum.
        let mut v = fleet();
        v.nodes.retain(|n| n.name != "n2" && n.name != "n3");
        let a = next_action(&v, &request("n1", "n4"));
        assert_eq!(refused_by(&a), vec![GateName::QuorumAfterRemoval]);
        let g = gate(
            &preflight(&v, "n1", "n4", None),
            GateName::QuorumAfterRemoval,
        )
        .clone();
        assert!(g.reason.contains("1 healthy of 3"), "{}", g.reason);
        assert!(g.reason.contains("2 voter Node(s) missing"), "{}", g.reason);
    }

    #[test]
    fn a_one_voter_fleet_configured_for_one_may_swap_its_voter() {
        let mut v = fleet();
        v.settings.voters = 1;
        v.nodes.retain(|n| n.name != "n2" && n.name != "n3");
        assert!(matches!(
            next_action(&v, &request("n1", "n4")),
            Action::TakeLease {
                start: Start::Fresh,
                ..
            }
        ));
    }

    #[test]
    fn the_removal_gate_refuses_when_voters_went_down_after_the_promotion() {
        let mut v = after_promotion();
        node_mut(&mut v, "n2").ready = false;
        node_mut(&mut v, "n3").ready = false;
        let g = gate_quorum_after_removal(&v, "n1", "n4", false);
        assert!(!g.passed, "{}", g.reason);
        // 4 members (n1 n2 n3 n4), n2 and n3 down: removing n1 leaves 1 of 3.
        assert!(g.reason.contains("1 healthy of 3"), "{}", g.reason);
    }

    // === The swap, state by state ===

    /// The fleet with the Lease ours for swap-1 (n1 out, n4 in).
    fn ours(mut v: FleetView, step: Option<SwapStep>) -> FleetView {
        let mut l = lease_held_by("fleet-role", ME, "swap-1", "n1", "n4");
        l.renew_time = Some(v.now);
        l.step = step.map(|s| s.as_str().into());
        l.step_since = step.map(|_| v.now);
        v.lease = Some(l);
        v
    }

    fn taken() -> SwapState {
        SwapState {
            taken: Some(id("swap-1")),
            ..request("n1", "n4")
        }
    }

    fn after_promotion() -> FleetView {
        let mut v = fleet();
        let n4 = node_mut(&mut v, "n4");
        *n4 = voter("n4", 4);
        n4.marks = FleetMarks {
            desired_role: Some("server".into()),
            swap: Some("swap-1".into()),
            step: Some("promote".into()),
            join_node: Some("n2".into()),
            snapshot_request: None,
        };
        n4.report = Some(report(
            "swap-1",
            ReportStep::Promote,
            Phase::Done,
            Some(Detail::Voter),
        ));
        node_mut(&mut v, "n2").marks.snapshot_request = Some("swap-1".into());
        node_mut(&mut v, "n2").report = Some(report(
            "swap-1",
            ReportStep::Snapshot,
            Phase::Done,
            Some(Detail::Snapshot),
        ));
        v
    }

    #[test]
    fn a_healthy_fleet_takes_the_lease_for_a_fresh_swap() {
        assert_eq!(
            next_action(&fleet(), &request("n1", "n4")),
            Action::TakeLease {
                swap: id("swap-1"),
                out: name("n1"),
                incoming: name("n4"),
                start: Start::Fresh
            }
        );
    }

    #[test]
    fn the_snapshot_is_asked_of_a_healthy_voter_that_is_not_the_outgoing_one() {
        let v = ours(fleet(), Some(SwapStep::Snapshot));
        assert_eq!(
            next_action(&v, &taken()),
            Action::RequestSnapshot {
                node: name("n2"),
                swap: id("swap-1")
            }
        );
        let v2 = ours(fleet(), Some(SwapStep::Snapshot));
        assert_eq!(snapshot_voter(&v2, "n2").unwrap().as_str(), "n1");
    }

    #[test]
    fn a_new_step_is_marked_on_the_lease_before_anything_else() {
        let v = ours(fleet(), None);
        assert_eq!(
            next_action(&v, &taken()),
            Action::MarkStep {
                step: SwapStep::Snapshot
            }
        );
    }

    #[test]
    fn the_lease_is_renewed_when_a_third_of_its_duration_has_passed() {
        let mut v = ours(fleet(), Some(SwapStep::Snapshot));
        v.now += 20;
        assert_eq!(next_action(&v, &taken()), Action::RenewLease);
    }

    #[test]
    fn the_promotion_waits_for_the_snapshot_report() {
        let mut v = ours(fleet(), Some(SwapStep::Snapshot));
        node_mut(&mut v, "n2").marks.snapshot_request = Some("swap-1".into());
        assert!(matches!(
            next_action(&v, &taken()),
            Action::Wait {
                step: SwapStep::Snapshot,
                ..
            }
        ));
        node_mut(&mut v, "n2").report = Some(report(
            "swap-1",
            ReportStep::Snapshot,
            Phase::Done,
            Some(Detail::Snapshot),
        ));
        assert_eq!(
            next_action(&v, &taken()),
            Action::MarkStep {
                step: SwapStep::Promote
            }
        );
        let v = {
            let mut v = v;
            v.lease.as_mut().unwrap().step = Some("promote".into());
            v
        };
        assert_eq!(
            next_action(&v, &taken()),
            Action::Promote {
                node: name("n4"),
                join: name("n2"),
                swap: id("swap-1")
            }
        );
    }

    #[test]
    fn a_failed_snapshot_winds_the_swap_down_before_anything_changes() {
        let mut v = ours(fleet(), Some(SwapStep::Snapshot));
        node_mut(&mut v, "n2").marks.snapshot_request = Some("swap-1".into());
        let mut r = report("swap-1", ReportStep::Snapshot, Phase::Failed, None);
        r.reason = Some("etcd said no".into());
        node_mut(&mut v, "n2").report = Some(r);
        let Action::BeginStop { note } = next_action(&v, &taken()) else {
            panic!()
        };
        assert_eq!(note.kind, StopKind::Failed);
        assert!(note.reason.contains("etcd said no"));
    }

    #[test]
    fn a_snapshot_that_is_never_reported_times_out() {
        let mut v = ours(fleet(), Some(SwapStep::Snapshot));
        node_mut(&mut v, "n2").marks.snapshot_request = Some("swap-1".into());
        v.lease.as_mut().unwrap().step_since = Some(NOW - 121);
        assert!(matches!(
            next_action(&v, &taken()),
            Action::BeginStop { .. }
        ));
    }

    #[test]
    fn the_promotion_joins_a_healthy_voter_that_is_not_the_outgoing_one() {
        let mut v = fleet();
        node_mut(&mut v, "n2").ready = false;
        // n2 down: preflight would refuse; join_voter alone still skips it.
        assert_eq!(join_voter(&v, "n1").unwrap().as_str(), "n3");
        assert_eq!(join_voter(&fleet(), "n2").unwrap().as_str(), "n1");
    }

    #[test]
    fn a_gate_shut_right_before_the_promotion_winds_the_swap_down_as_refused() {
        let mut v = ours(after_promotion(), Some(SwapStep::Promote));
        *node_mut(&mut v, "n4") = agent("n4", true);
        node_mut(&mut v, "n3").ready = false;
        let Action::BeginStop { note } = next_action(&v, &taken()) else {
            panic!()
        };
        assert_eq!(note.kind, StopKind::Refused);
        assert!(note.reason.contains("voters-healthy"), "{}", note.reason);
    }

    #[test]
    fn a_failed_promotion_is_wound_down_with_a_rollback() {
        let mut v = ours(after_promotion(), Some(SwapStep::Promote));
        let n4 = node_mut(&mut v, "n4");
        n4.etcd_is_voter = false;
        let mut r = report(
            "swap-1",
            ReportStep::Promote,
            Phase::Failed,
            Some(Detail::Learner),
        );
        r.reason = Some("k3s did not start".into());
        n4.report = Some(r);
        let Action::BeginStop { note } = next_action(&v, &taken()) else {
            panic!()
        };
        assert!(note.reason.contains("k3s did not start"));
        v.lease.as_mut().unwrap().stopping = Some(serde_json::to_string(&note).unwrap());
        assert_eq!(
            next_action(&v, &taken()),
            Action::Rollback {
                node: name("n4"),
                swap: id("swap-1")
            }
        );
    }

    #[test]
    fn a_promotion_that_never_reaches_voter_times_out_into_a_rollback() {
        let mut v = ours(after_promotion(), Some(SwapStep::Promote));
        let n4 = node_mut(&mut v, "n4");
        n4.etcd_is_voter = false;
        n4.report = Some(report(
            "swap-1",
            ReportStep::Promote,
            Phase::Progress,
            Some(Detail::Learner),
        ));
        assert!(matches!(
            next_action(&v, &taken()),
            Action::Wait {
                step: SwapStep::Promote,
                ..
            }
        ));
        v.lease.as_mut().unwrap().step_since = Some(NOW - 121);
        let Action::BeginStop { note } = next_action(&v, &taken()) else {
            panic!()
        };
        assert!(note.reason.contains("learner"), "{}", note.reason);
    }

    #[test]
    fn the_outgoing_voter_is_cordoned_then_asked_to_step_down() {
        let v = ours(after_promotion(), Some(SwapStep::StepDown));
        assert_eq!(
            next_action(&v, &taken()),
            Action::Cordon { node: name("n1") }
        );
        let mut v = v;
        node_mut(&mut v, "n1").cordoned = true;
        assert_eq!(
            next_action(&v, &taken()),
            Action::StepDown {
                node: name("n1"),
                swap: id("swap-1")
            }
        );
    }

    #[test]
    fn a_down_outgoing_voter_is_removed_without_a_step_down() {
        let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
        let n1 = node_mut(&mut v, "n1");
        n1.ready = false;
        n1.cordoned = true;
        assert_eq!(
            next_action(&v, &taken()),
            Action::RemoveMember { node: name("n1") }
        );
    }

    /// The snapshot is done and n1, the outgoing voter, is down.
    fn snapshot_done_with_the_outgoing_voter_down(step: SwapStep) -> FleetView {
        let mut v = ours(fleet(), Some(step));
        let n2 = node_mut(&mut v, "n2");
        n2.marks.snapshot_request = Some("swap-1".into());
        n2.report = Some(report(
            "swap-1",
            ReportStep::Snapshot,
            Phase::Done,
            Some(Detail::Snapshot),
        ));
        node_mut(&mut v, "n1").ready = false;
        v
    }

    #[test]
    fn a_down_outgoing_voter_is_removed_before_the_promotion_since_etcd_adds_no_member_meanwhile() {
        let mut v = snapshot_done_with_the_outgoing_voter_down(SwapStep::Removal);
        assert_eq!(
            next_action(&v, &taken()),
            Action::Cordon { node: name("n1") }
        );
        node_mut(&mut v, "n1").cordoned = true;
        assert_eq!(
            next_action(&v, &taken()),
            Action::RemoveMember { node: name("n1") }
        );
        node_mut(&mut v, "n1").k3s.remove = Some("true".into());
        assert!(matches!(
            next_action(&v, &taken()),
            Action::Wait {
                step: SwapStep::Removal,
                ..
            }
        ));
        removed(&mut v);
        v.lease.as_mut().unwrap().step = Some("promote".into());
        assert_eq!(
            next_action(&v, &taken()),
            Action::Promote {
                node: name("n4"),
                join: name("n2"),
                swap: id("swap-1")
            }
        );
    }

    #[test]
    fn a_promotion_asked_before_the_outgoing_voter_went_down_waits_for_its_removal() {
        let mut v = snapshot_done_with_the_outgoing_voter_down(SwapStep::Promote);
        let n4 = node_mut(&mut v, "n4");
        n4.marks = FleetMarks {
            desired_role: Some("server".into()),
            swap: Some("swap-1".into()),
            step: Some("promote".into()),
            join_node: Some("n2".into()),
            snapshot_request: None,
        };
        n4.report = Some(report("swap-1", ReportStep::Promote, Phase::Started, None));
        assert_eq!(
            next_action(&v, &taken()),
            Action::MarkStep {
                step: SwapStep::Removal
            }
        );
        v.lease.as_mut().unwrap().step = Some("removal".into());
        assert_eq!(
            next_action(&v, &taken()),
            Action::Cordon { node: name("n1") }
        );
    }

    #[test]
    fn a_standby_asked_to_promote_is_not_required_ready_while_it_joins() {
        let mut v = snapshot_done_with_the_outgoing_voter_down(SwapStep::Removal);
        let n4 = node_mut(&mut v, "n4");
        n4.marks.swap = Some("swap-1".into());
        n4.marks.step = Some("promote".into());
        // Its agent is stopped and its server has not joined: no heartbeat.
        n4.ready = false;
        assert_eq!(
            next_action(&v, &taken()),
            Action::Cordon { node: name("n1") }
        );
        // Before it is asked, a NotReady standby shuts the gate.
        node_mut(&mut v, "n4").marks = FleetMarks::default();
        assert!(matches!(
            next_action(&v, &taken()),
            Action::BeginStop { .. }
        ));
    }

    #[test]
    fn a_promotion_failing_after_the_down_voter_was_removed_stops_rather_than_winds_down() {
        let mut v = snapshot_done_with_the_outgoing_voter_down(SwapStep::Promote);
        removed(&mut v);
        node_mut(&mut v, "n1").cordoned = true;
        let n4 = node_mut(&mut v, "n4");
        n4.marks.swap = Some("swap-1".into());
        n4.marks.step = Some("promote".into());
        let mut r = report("swap-1", ReportStep::Promote, Phase::Failed, None);
        r.reason = Some("k3s did not start".into());
        n4.report = Some(r);
        let Action::Stop { step, left, .. } = next_action(&v, &taken()) else {
            panic!("{:?}", next_action(&v, &taken()))
        };
        assert_eq!(step, SwapStep::Promote);
        assert!(left.contains("one voter fewer"), "{left}");
    }

    #[test]
    fn a_down_outgoing_voter_is_not_removed_when_that_would_cost_quorum() {
        let mut v = snapshot_done_with_the_outgoing_voter_down(SwapStep::Removal);
        // n2 is down too: 3 members, 1 healthy; removing n1 leaves 1 of 2.
        node_mut(&mut v, "n2").ready = false;
        let Action::BeginStop { note } = next_action(&v, &taken()) else {
            panic!()
        };
        assert_eq!(note.kind, StopKind::Refused);
        assert!(
            note.reason.contains("quorum-after-removal"),
            "{}",
            note.reason
        );
    }

    #[test]
    fn the_step_down_waits_for_the_gates_and_stops_when_they_stay_shut() {
        let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
        node_mut(&mut v, "n2").ready = false;
        assert!(matches!(
            next_action(&v, &taken()),
            Action::Wait {
                step: SwapStep::StepDown,
                ..
            }
        ));
        v.lease.as_mut().unwrap().step_since = Some(NOW - 121);
        let Action::Stop {
            step, left, next, ..
        } = next_action(&v, &taken())
        else {
            panic!()
        };
        assert_eq!(step, SwapStep::StepDown);
        assert!(left.contains("n4 is a voter"), "{left}");
        assert!(next.contains("fleet-role swap --out n1 --in n4"), "{next}");
    }

    fn stepping_down(detail: Option<Detail>, phase: Phase) -> FleetView {
        let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
        let n1 = node_mut(&mut v, "n1");
        n1.cordoned = true;
        n1.marks = FleetMarks {
            desired_role: Some("agent".into()),
            swap: Some("swap-1".into()),
            step: Some("step-down".into()),
            ..FleetMarks::default()
        };
        n1.report = Some(report("swap-1", ReportStep::StepDown, phase, detail));
        v
    }

    #[test]
    fn the_member_is_removed_once_the_outgoing_host_reports_etcd_only() {
        let v = stepping_down(None, Phase::Started);
        assert!(matches!(
            next_action(&v, &taken()),
            Action::Wait {
                step: SwapStep::StepDown,
                ..
            }
        ));
        let v = stepping_down(Some(Detail::EtcdOnly), Phase::Done);
        assert_eq!(
            next_action(&v, &taken()),
            Action::MarkStep {
                step: SwapStep::Removal
            }
        );
        let mut v = v;
        v.lease.as_mut().unwrap().step = Some("removal".into());
        assert_eq!(
            next_action(&v, &taken()),
            Action::RemoveMember { node: name("n1") }
        );
    }

    #[test]
    fn a_failed_step_down_stops_the_swap_and_says_how_to_resume() {
        let mut v = stepping_down(None, Phase::Failed);
        if let Some(r) = node_mut(&mut v, "n1").report.as_mut() {
            r.reason = Some("etcd did not serve again".into());
        }
        let Action::Stop { reason, next, .. } = next_action(&v, &taken()) else {
            panic!()
        };
        assert!(reason.contains("etcd did not serve again"), "{reason}");
        assert!(next.contains("fleet-role swap --out n1 --in n4"));
    }

    #[test]
    fn the_removal_is_not_asked_while_it_would_cost_quorum() {
        let mut v = stepping_down(Some(Detail::EtcdOnly), Phase::Done);
        v.lease.as_mut().unwrap().step = Some("removal".into());
        node_mut(&mut v, "n2").ready = false;
        node_mut(&mut v, "n3").ready = false;
        let a = next_action(&v, &taken());
        assert!(
            matches!(
                a,
                Action::Wait {
                    step: SwapStep::Removal,
                    ..
                }
            ),
            "{a:?}"
        );
    }

    fn removed(v: &mut FleetView) {
        let n1 = node_mut(v, "n1");
        n1.k3s.removed_node_name = n1.k3s.node_name.take();
        n1.k3s.node_address = None;
        n1.k3s.remove = Some("true".into());
    }

    #[test]
    fn the_server_labels_stay_until_the_agent_is_ready_with_a_fresh_node_lease() {
        let mut v = stepping_down(Some(Detail::EtcdOnly), Phase::Done);
        v.lease.as_mut().unwrap().step = Some("finish".into());
        removed(&mut v);
        assert!(matches!(
            next_action(&v, &taken()),
            Action::Wait {
                step: SwapStep::Finish,
                ..
            }
        ));
        // The finish is done, but the node Lease was renewed before it began.
        let n1 = node_mut(&mut v, "n1");
        let mut r = report(
            "swap-1",
            ReportStep::Finish,
            Phase::Done,
            Some(Detail::AgentReady),
        );
        r.started_at = NOW - 3;
        n1.report = Some(r);
        n1.lease_renewed_at = Some(NOW - 10);
        assert!(matches!(
            next_action(&v, &taken()),
            Action::Wait {
                step: SwapStep::Finish,
                ..
            }
        ));
        node_mut(&mut v, "n1").lease_renewed_at = Some(NOW);
        assert_eq!(
            next_action(&v, &taken()),
            Action::MarkStep {
                step: SwapStep::CleanUp
            }
        );
        v.lease.as_mut().unwrap().step = Some("clean-up".into());
        assert_eq!(
            next_action(&v, &taken()),
            Action::CleanUpServer { node: name("n1") }
        );
    }

    #[test]
    fn a_not_ready_agent_is_not_finished() {
        let mut n = voter("n1", 1);
        let mut r = report(
            "swap-1",
            ReportStep::Finish,
            Phase::Done,
            Some(Detail::AgentReady),
        );
        r.started_at = NOW - 3;
        n.report = Some(r);
        assert!(finished(&n));
        n.ready = false;
        assert!(!finished(&n));
    }

    #[test]
    fn losing_the_lease_to_another_holder_stops_every_write() {
        let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
        v.lease.as_mut().unwrap().holder = Some("intruder".into());
        assert!(matches!(next_action(&v, &taken()), Action::Lost { .. }));
        v.lease.as_mut().unwrap().instance = Some("other".into());
        assert!(matches!(next_action(&v, &taken()), Action::Lost { .. }));
        v.lease = None;
        assert!(matches!(next_action(&v, &taken()), Action::Lost { .. }));
    }

    #[test]
    fn a_restarted_controller_waits_for_its_former_self_then_takes_the_same_swap_over() {
        let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
        let restarted = SwapState {
            instance: "ctl-b".into(),
            candidate: id("swap-2"),
            ..request("n1", "n4")
        };
        assert!(matches!(
            next_action(&v, &restarted),
            Action::WaitForLease { .. }
        ));
        v.now += 61;
        assert_eq!(
            next_action(&v, &restarted),
            Action::TakeLease {
                swap: id("swap-1"),
                out: name("n1"),
                incoming: name("n4"),
                start: Start::Abandoned
            }
        );
    }

    #[test]
    fn a_stopped_swap_is_resumed_under_a_new_id() {
        let mut v = stepping_down(None, Phase::Failed);
        let l = v.lease.as_mut().unwrap();
        l.holder = None;
        l.instance = None;
        l.stopped = Some("the step-down failed".into());
        let again = SwapState {
            instance: "ctl-b".into(),
            candidate: id("swap-2"),
            ..request("n1", "n4")
        };
        assert_eq!(
            next_action(&v, &again),
            Action::TakeLease {
                swap: id("swap-2"),
                out: name("n1"),
                incoming: name("n4"),
                start: Start::Stopped
            }
        );
        // Under the new id, the step-down is asked again.
        let l = v.lease.as_mut().unwrap();
        l.holder = Some("fleet-role".into());
        l.instance = Some("ctl-b".into());
        l.swap = Some("swap-2".into());
        l.stopped = None;
        l.step = Some("step-down".into());
        let again = SwapState {
            taken: Some(id("swap-2")),
            ..again
        };
        assert_eq!(
            next_action(&v, &again),
            Action::StepDown {
                node: name("n1"),
                swap: id("swap-2")
            }
        );
    }

    #[test]
    fn a_paused_swap_halts_at_its_next_safe_point_and_its_timer_stops() {
        let mut v = ours(after_promotion(), Some(SwapStep::StepDown));
        v.lease.as_mut().unwrap().paused = true;
        assert_eq!(
            next_action(&v, &taken()),
            Action::MarkStep {
                step: SwapStep::Paused
            }
        );
        v.lease.as_mut().unwrap().step = Some("paused".into());
        v.now += 10; // within the renewal period
        assert_eq!(
            next_action(&v, &taken()),
            Action::Paused {
                step: SwapStep::StepDown
            }
        );
        // Long after the step-down's timeout, still halted, not stopped.
        let mut later = v.clone();
        later.lease.as_mut().unwrap().renew_time = Some(NOW + 1000);
        later.now = NOW + 1000;
        assert_eq!(
            next_action(&later, &taken()),
            Action::Paused {
                step: SwapStep::StepDown
            }
        );
        // Resumed: the step is marked afresh, so its timeout starts again.
        later.lease.as_mut().unwrap().paused = false;
        assert_eq!(
            next_action(&later, &taken()),
            Action::MarkStep {
                step: SwapStep::StepDown
            }
        );
    }

    #[test]
    fn a_wait_for_a_host_goes_on_while_paused() {
        let mut v = stepping_down(None, Phase::Started);
        v.lease.as_mut().unwrap().paused = true;
        assert!(matches!(
            next_action(&v, &taken()),
            Action::Wait {
                step: SwapStep::StepDown,
                ..
            }
        ));
    }

    // === The whole swap in a simulated world ===

    /// A host as the simulation keeps it.
    #[derive(Debug, Clone, Default)]
    struct Host {
        role: Option<Role>,
        datastore: bool,
        tombstone: bool,
        /// k3s up (the host is not down).
        up: bool,
    }

    /// What can go wrong.
    #[derive(Debug, Clone, Copy, Default)]
    struct Faults {
        promotion_stalls: bool,
        promotion_fails: bool,
        step_down_fails: bool,
        snapshot_fails: bool,
        /// At these ticks, these Nodes go NotReady (their hosts down).
        down_at: [Option<(usize, usize)>; 3],
        /// At this tick the controller is killed and a new one started.
        restart_at: Option<usize>,
        /// At this tick someone else takes the Lease.
        steal_at: Option<usize>,
        /// Seconds each tick advances the clock.
        tick_secs: i64,
    }

    struct World {
        v: FleetView,
        hosts: BTreeMap<String, Host>,
        faults: Faults,
        /// Every write the controller made, in order.
        writes: Vec<Action>,
        /// Quorum violations seen at the moment a removal was asked.
        violations: Vec<String>,
    }

    impl World {
        fn new(v: FleetView, faults: Faults) -> Self {
            let hosts = v
                .nodes
                .iter()
                .map(|n| {
                    let server = n.etcd_label;
                    (
                        n.name.clone(),
                        Host {
                            role: Some(if server { Role::Server } else { Role::Agent }),
                            datastore: server,
                            tombstone: false,
                            up: n.ready,
                        },
                    )
                })
                .collect();
            Self {
                v,
                hosts,
                faults,
                writes: Vec::new(),
                violations: Vec::new(),
            }
        }

        fn node(&mut self, name: &str) -> &mut NodeFacts {
            node_mut(&mut self.v, name)
        }

        /// Carries out a controller's write, as the shell would.
        fn write(&mut self, a: &Action, s: &mut SwapState) {
            let now = self.v.now;
            self.writes.push(a.clone());
            match a {
                Action::TakeLease {
                    swap,
                    out,
                    incoming,
                    start,
                } => {
                    let l = self.v.lease.get_or_insert_with(LeaseFacts::default);
                    l.holder = Some(self.v.settings.names.controller_identity.clone());
                    l.instance = Some(s.instance.clone());
                    l.renew_time = Some(now);
                    l.duration_secs = Some(self.v.settings.lease_duration);
                    l.swap = Some(swap.to_string());
                    l.swap_out = Some(out.to_string());
                    l.swap_in = Some(incoming.to_string());
                    l.stopped = None;
                    if *start != Start::Abandoned {
                        l.step = None;
                        l.step_since = None;
                    }
                    s.taken = Some(swap.clone());
                }
                Action::RenewLease => self.v.lease.as_mut().unwrap().renew_time = Some(now),
                Action::MarkStep { step } => {
                    let l = self.v.lease.as_mut().unwrap();
                    l.step = Some(step.as_str().into());
                    l.step_since = Some(now);
                    l.renew_time = Some(now);
                }
                Action::BeginStop { note } => {
                    self.v.lease.as_mut().unwrap().stopping =
                        Some(serde_json::to_string(note).unwrap());
                }
                Action::RequestSnapshot { node, swap } => {
                    self.node(node.as_str()).marks.snapshot_request = Some(swap.to_string());
                }
                Action::Promote { node, join, swap } => {
                    let m = &mut self.node(node.as_str()).marks;
                    m.desired_role = Some("server".into());
                    m.swap = Some(swap.to_string());
                    m.step = Some("promote".into());
                    m.join_node = Some(join.to_string());
                }
                Action::Rollback { node, swap } | Action::StepDown { node, swap } => {
                    let step = if matches!(a, Action::Rollback { .. }) {
                        "rollback"
                    } else {
                        "step-down"
                    };
                    let m = &mut self.node(node.as_str()).marks;
                    m.desired_role = Some("agent".into());
                    m.swap = Some(swap.to_string());
                    m.step = Some(step.into());
                    m.join_node = None;
                }
                Action::Cordon { node } => self.node(node.as_str()).cordoned = true,
                Action::Uncordon { node } => self.node(node.as_str()).cordoned = false,
                Action::RemoveMember { node } => {
                    self.check_quorum(node.as_str());
                    self.node(node.as_str()).k3s.remove = Some("true".into());
                }
                Action::CleanUpServer { node } => {
                    let n = self.node(node.as_str());
                    n.etcd_label = false;
                    n.control_plane_label = false;
                    n.master_label = false;
                    n.k3s = K3sEtcd::default();
                    n.etcd_is_voter = false;
                }
                Action::ClearSwapMarks { node } => {
                    let m = &mut self.node(node.as_str()).marks;
                    m.swap = None;
                    m.step = None;
                    m.join_node = None;
                    m.snapshot_request = None;
                }
                Action::ReleaseLease { outcome } => {
                    let l = self.v.lease.as_mut().unwrap();
                    let last = LastSwap {
                        swap: l.swap.clone().unwrap_or_default(),
                        out: l.swap_out.clone().unwrap_or_default(),
                        incoming: l.swap_in.clone().unwrap_or_default(),
                        at: now,
                        outcome: outcome.clone(),
                    };
                    *l = LeaseFacts {
                        paused: l.paused,
                        last_swap: Some(serde_json::to_string(&last).unwrap()),
                        ..LeaseFacts::default()
                    };
                }
                Action::Stop { reason, .. } => {
                    let l = self.v.lease.as_mut().unwrap();
                    l.holder = None;
                    l.instance = None;
                    l.stopped = Some(reason.clone());
                }
                _ => unreachable!("not a write: {a:?}"),
            }
        }

        /// The truth about etcd at the moment a removal is asked: the
        /// members that vote and whether each one's host is up.
        fn check_quorum(&mut self, removing: &str) {
            let mut members = 0;
            let mut healthy = 0;
            let mut removed_healthy = false;
            for n in &self.v.nodes {
                let h = &self.hosts[&n.name];
                if !n.has_member() || !n.etcd_is_voter {
                    continue;
                }
                members += 1;
                let up = h.up && n.ready && h.role.is_some() && !h.tombstone && h.datastore;
                if up {
                    healthy += 1;
                }
                if n.name == removing {
                    removed_healthy = up;
                }
            }
            let is_member = self
                .v
                .node(removing)
                .is_some_and(|n| n.has_member() && n.etcd_is_voter);
            let (m, h) = if is_member {
                (members - 1, healthy - usize::from(removed_healthy))
            } else {
                (members, healthy)
            };
            if !keeps_quorum(m, h) {
                self.violations.push(format!(
                    "removing {removing} left {h} healthy of {m} at {}",
                    self.v.now
                ));
            }
        }

        /// etcd adds a member only while every voter is reachable.
        fn etcd_accepts_a_member(&self) -> bool {
            self.v.nodes.iter().all(|n| {
                let h = &self.hosts[&n.name];
                !(n.has_member() && n.etcd_is_voter) || (h.up && h.datastore && !h.tombstone)
            })
        }

        /// One round of the hosts (through the real `decide`) and k3s.
        fn react(&mut self) {
            let now = self.v.now;
            let names: Vec<String> = self.v.nodes.iter().map(|n| n.name.clone()).collect();
            for name in &names {
                self.react_host(name, now);
            }
            // k3s: the member-removal controller, and promotion of learners.
            for name in &names {
                let n = self.node(name);
                if n.k3s.remove_requested()
                    && n.etcd_label
                    && n.k3s.node_name.is_some()
                    && !n.member_gone()
                {
                    n.k3s.removed_node_name = n.k3s.node_name.take();
                    n.k3s.node_address = None;
                    self.hosts.get_mut(name).unwrap().tombstone = true;
                }
            }
            // Kubelets renew their node Leases. A host whose server waits to
            // join etcd runs no kubelet (its agent is stopped, and k3s starts
            // the server's once etcd is ready).
            for name in &names {
                let h = &self.hosts[name];
                let joining =
                    h.role == Some(Role::Server) && !self.v.node(name).unwrap().etcd_label;
                let up = h.up && !joining;
                let n = self.node(name);
                n.ready = up;
                if up {
                    n.lease_renewed_at = Some(now);
                }
            }
        }

        fn react_host(&mut self, name: &str, now: i64) {
            let host = self.hosts[name].clone();
            if !host.up {
                return;
            }
            let n = self.v.node(name).unwrap().clone();
            let view = NodeView {
                name: name.into(),
                desired_role: n.marks.desired_role.clone(),
                swap: n.marks.swap.clone(),
                step: n.marks.step.clone(),
                join_node: n.marks.join_node.clone(),
                snapshot_request: n.marks.snapshot_request.clone(),
                etcd_label: n.etcd_label,
                etcd_is_voter: n.etcd_is_voter,
                removed_member: n.k3s.removed_node_name.clone(),
            };
            let lease = self.v.lease.as_ref().map(|l| LeaseView {
                holder: l.holder.clone(),
                swap: l.swap.clone(),
                renew_time: l.renew_time,
                duration_secs: l.duration_secs,
            });
            let join = match n.marks.join_node.as_deref().and_then(|j| self.v.node(j)) {
                Some(j) => JoinTarget::Found {
                    address: j.k3s.node_address.clone(),
                },
                None if n.marks.join_node.is_some() => JoinTarget::Missing,
                None => JoinTarget::NotLooked,
            };
            let decision = decide(&Observation {
                now,
                node: &view,
                lease: lease.as_ref(),
                report: n.report.as_ref(),
                host: HostState {
                    role: host.role,
                    datastore: host.datastore,
                    tombstone: host.tombstone,
                    member: host.datastore.then(|| format!("{name}-00aa11bb")),
                },
                join: &join,
                identity: &self.v.settings.names.controller_identity,
                skew_margin: 1,
                join_port: 6443,
            });
            let prev = n.report.clone();
            let next =
                |swap: Option<SwapId>, step: ReportStep, phase: Phase, detail: Option<Detail>| {
                    let mut r = Report::next(prev.as_ref(), swap, step, phase, now);
                    if detail.is_some() {
                        r.detail = detail;
                    }
                    r
                };
            let faults = self.faults;
            match decision {
                Decision::Refuse { swap, step, reason } => {
                    let r = next(swap, step, Phase::Refused, None).with_reason(reason);
                    self.node(name).report = Some(r);
                }
                Decision::Take { swap, step, resume } => match step {
                    Step::Snapshot => {
                        let r = if faults.snapshot_fails {
                            next(swap, ReportStep::Snapshot, Phase::Failed, None)
                                .with_reason("disk full")
                        } else {
                            let mut r = next(
                                swap.clone(),
                                ReportStep::Snapshot,
                                Phase::Done,
                                Some(Detail::Snapshot),
                            );
                            r.snapshot_file = Some(format!("snap-{}", swap.unwrap()));
                            r
                        };
                        self.node(name).report = Some(r);
                    }
                    Step::Promote { .. } if !n.etcd_label => {
                        if !resume {
                            let h = self.hosts.get_mut(name).unwrap();
                            h.role = Some(Role::Server);
                            h.datastore = true;
                            h.tombstone = false;
                            if faults.promotion_fails {
                                let r = next(swap, ReportStep::Promote, Phase::Failed, None)
                                    .with_reason("k3s did not start");
                                self.node(name).report = Some(r);
                                return;
                            }
                            self.node(name).report = Some(next(
                                swap.clone(),
                                ReportStep::Promote,
                                Phase::Started,
                                None,
                            ));
                        }
                        // etcd's strict reconfiguration check: no member is
                        // added while a voter is unreachable (k3s retries).
                        if !self.etcd_accepts_a_member() {
                            return;
                        }
                        let prev = self.v.node(name).unwrap().report.clone();
                        let mut r = Report::next(
                            prev.as_ref(),
                            swap,
                            ReportStep::Promote,
                            Phase::Progress,
                            now,
                        );
                        r.detail = Some(Detail::Learner);
                        let n = self.node(name);
                        n.etcd_label = true;
                        n.control_plane_label = true;
                        n.master_label = true;
                        n.k3s.node_name = Some(format!("{name}-00aa11bb"));
                        n.k3s.node_address = Some("10.0.0.99".into());
                        n.k3s.removed_node_name = None;
                        n.k3s.remove = None;
                        n.etcd_is_voter = false;
                        n.report = Some(r);
                    }
                    Step::Promote { .. } => {
                        if faults.promotion_stalls {
                            return;
                        }
                        let n = self.node(name);
                        n.etcd_is_voter = true;
                        n.report = Some(next(
                            swap,
                            ReportStep::Promote,
                            Phase::Done,
                            Some(Detail::Voter),
                        ));
                    }
                    Step::StepDown => {
                        let r = if faults.step_down_fails {
                            next(swap, ReportStep::StepDown, Phase::Failed, None)
                                .with_reason("etcd did not serve again")
                        } else {
                            self.hosts.get_mut(name).unwrap().role = Some(Role::Agent);
                            next(
                                swap,
                                ReportStep::StepDown,
                                Phase::Done,
                                Some(Detail::EtcdOnly),
                            )
                        };
                        self.node(name).report = Some(r);
                    }
                    Step::Rollback | Step::Finish => {
                        let h = self.hosts.get_mut(name).unwrap();
                        h.role = Some(Role::Agent);
                        h.datastore = false;
                        let step = step.report_step();
                        self.node(name).report =
                            Some(next(swap, step, Phase::Done, Some(Detail::AgentReady)));
                    }
                },
                Decision::Wait { .. } | Decision::Nothing => {}
            }
        }

        /// Runs the controller (restarting it or stealing its Lease when the
        /// faults say so) until it ends; returns its last action.
        fn run(&mut self, s: &mut SwapState, max_ticks: usize) -> Action {
            for tick in 0..max_ticks {
                for (at, which) in self.faults.down_at.into_iter().flatten() {
                    if at != tick {
                        continue;
                    }
                    let name = self.v.nodes[which % self.v.nodes.len()].name.clone();
                    self.hosts.get_mut(&name).unwrap().up = false;
                    self.node(&name).ready = false;
                    self.node(&name).ready_since = Some(self.v.now);
                }
                if self.faults.restart_at == Some(tick) {
                    *s = SwapState {
                        instance: format!("ctl-{tick}"),
                        candidate: SwapId::parse(&format!("swap-r{tick}")).unwrap(),
                        taken: None,
                        ..s.clone()
                    };
                }
                if self.faults.steal_at == Some(tick)
                    && let Some(l) = self.v.lease.as_mut()
                {
                    l.holder = Some("intruder".into());
                    l.instance = Some("intruder-1".into());
                    l.renew_time = Some(self.v.now);
                }
                // Several controller actions per tick (writes are quick);
                // the hosts react between ticks.
                for _ in 0..8 {
                    let a = next_action(&self.v, s);
                    if a.writes() {
                        self.write(&a, s);
                    }
                    if a.is_terminal() {
                        return a;
                    }
                    if !a.writes() {
                        break;
                    }
                }
                self.v.now += self.faults.tick_secs.max(1);
                self.react();
            }
            panic!(
                "the swap did not end within {max_ticks} ticks: {:#?}",
                self.writes.last()
            );
        }
    }

    fn write_kinds(writes: &[Action]) -> Vec<String> {
        writes
            .iter()
            .filter(|a| !matches!(a, Action::RenewLease | Action::MarkStep { .. }))
            .map(|a| {
                let s = serde_json::to_value(a).unwrap();
                let kind = s["action"].as_str().unwrap().to_string();
                match a.node() {
                    Some(n) => format!("{kind} {n}"),
                    None => kind,
                }
            })
            .collect()
    }

    fn settled_clean(w: &World) {
        let n1 = w.v.node("n1").unwrap();
        assert_eq!(classify(n1), Class::Agent, "{n1:?}");
        assert!(
            !n1.has_server_labels() && !n1.k3s.any() && !n1.cordoned,
            "{n1:?}"
        );
        assert!(!n1.marks.any_annotation(), "{n1:?}");
        assert_eq!(n1.marks.desired_role.as_deref(), Some("agent"));
        let n4 = w.v.node("n4").unwrap();
        assert!(is_healthy_voter(n4), "{n4:?}");
        assert!(!n4.marks.any_annotation(), "{n4:?}");
        assert!(w.v.nodes.iter().all(|n| !n.marks.any_annotation()));
        let l = w.v.lease.as_ref().unwrap();
        assert!(l.holder.is_none() && l.swap.is_none() && l.stopping.is_none());
        assert_eq!(w.v.nodes.iter().filter(|n| is_healthy_voter(n)).count(), 3);
    }

    #[test]
    fn a_full_swap_takes_every_step_in_order_and_leaves_the_fleet_clean() {
        let mut w = World::new(
            fleet(),
            Faults {
                tick_secs: 2,
                ..Faults::default()
            },
        );
        let mut s = request("n1", "n4");
        let end = w.run(&mut s, 200);
        assert_eq!(
            end,
            Action::ReleaseLease {
                outcome: Outcome::Done { warning: None }
            }
        );
        assert_eq!(
            write_kinds(&w.writes),
            [
                "take-lease",
                "request-snapshot n2",
                "promote n4",
                "cordon n1",
                "step-down n1",
                "remove-member n1",
                "clean-up-server n1",
                "clear-swap-marks n1",
                "uncordon n1",
                "clear-swap-marks n4",
                "clear-swap-marks n2",
                "release-lease",
            ]
        );
        settled_clean(&w);
        assert!(w.violations.is_empty(), "{:?}", w.violations);
    }

    #[test]
    fn a_promotion_that_never_reaches_voter_is_rolled_back_and_its_member_removed() {
        let mut w = World::new(
            fleet(),
            Faults {
                promotion_stalls: true,
                tick_secs: 5,
                ..Faults::default()
            },
        );
        let end = w.run(&mut request("n1", "n4"), 400);
        let Action::ReleaseLease {
            outcome: Outcome::WoundDown { kind, reason },
        } = end
        else {
            panic!("{end:?}")
        };
        assert_eq!(kind, StopKind::Failed);
        assert!(reason.contains("did not become a voter"), "{reason}");
        let kinds = write_kinds(&w.writes);
        assert!(kinds.contains(&"rollback n4".to_string()), "{kinds:?}");
        assert!(kinds.contains(&"remove-member n4".to_string()), "{kinds:?}");
        assert!(
            !kinds
                .iter()
                .any(|k| k.ends_with(" n1") && !k.starts_with("clear")),
            "{kinds:?}"
        );
        // The cluster as it was.
        let n4 = w.v.node("n4").unwrap();
        assert_eq!(classify(n4), Class::Agent);
        assert!(!n4.has_server_labels() && !n4.marks.any_annotation());
        assert!(
            ["n1", "n2", "n3"]
                .iter()
                .all(|n| is_healthy_voter(w.v.node(n).unwrap()))
        );
        assert!(w.v.lease.as_ref().unwrap().swap.is_none());
    }

    #[test]
    fn a_failed_step_down_stops_with_the_lease_released_and_a_resume_finishes_it() {
        let mut w = World::new(
            fleet(),
            Faults {
                step_down_fails: true,
                tick_secs: 2,
                ..Faults::default()
            },
        );
        let end = w.run(&mut request("n1", "n4"), 200);
        assert!(
            matches!(
                end,
                Action::Stop {
                    step: SwapStep::StepDown,
                    ..
                }
            ),
            "{end:?}"
        );
        let l = w.v.lease.as_ref().unwrap();
        assert!(l.holder.is_none() && l.stopped.is_some() && l.swap.is_some());
        // The host is fixed; the same swap is asked again.
        w.faults.step_down_fails = false;
        let mut again = SwapState {
            candidate: id("swap-2"),
            instance: "ctl-b".into(),
            ..request("n1", "n4")
        };
        let end = w.run(&mut again, 200);
        assert_eq!(
            end,
            Action::ReleaseLease {
                outcome: Outcome::Done { warning: None }
            }
        );
        settled_clean(&w);
    }

    #[test]
    fn a_down_voter_is_replaced_without_a_step_down_and_left_for_the_operator() {
        let mut v = fleet();
        node_mut(&mut v, "n1").ready = false;
        let mut w = World::new(
            v,
            Faults {
                tick_secs: 2,
                ..Faults::default()
            },
        );
        let end = w.run(&mut request("n1", "n4"), 200);
        let Action::ReleaseLease {
            outcome: Outcome::Done { warning: Some(w_) },
        } = end
        else {
            panic!("{end:?}")
        };
        assert!(w_.contains("demote-local"));
        let kinds = write_kinds(&w.writes);
        assert_eq!(
            kinds[..5],
            [
                "take-lease",
                "request-snapshot n2",
                "cordon n1",
                "remove-member n1",
                "promote n4"
            ],
            "{kinds:?}"
        );
        assert!(!kinds.contains(&"step-down n1".to_string()), "{kinds:?}");
        assert_eq!(classify(w.v.node("n1").unwrap()), Class::Removed);
        assert!(w.violations.is_empty(), "{:?}", w.violations);
    }

    #[test]
    fn a_controller_killed_at_every_step_resumes_and_finishes_cleanly() {
        for kill in 0..30 {
            let mut w = World::new(
                fleet(),
                Faults {
                    restart_at: Some(kill),
                    tick_secs: 2,
                    ..Faults::default()
                },
            );
            let end = w.run(&mut request("n1", "n4"), 400);
            assert_eq!(
                end,
                Action::ReleaseLease {
                    outcome: Outcome::Done { warning: None }
                },
                "killed at tick {kill}"
            );
            settled_clean(&w);
            // Never a step asked twice under different ids, never a write
            // while another process held the Lease.
            let promotes = w
                .writes
                .iter()
                .filter(|a| matches!(a, Action::Promote { .. }))
                .count();
            assert_eq!(promotes, 1, "killed at tick {kill}");
        }
    }

    #[test]
    fn a_controller_whose_lease_is_stolen_writes_nothing_more() {
        for steal in 1..12 {
            let mut w = World::new(
                fleet(),
                Faults {
                    steal_at: Some(steal),
                    tick_secs: 2,
                    ..Faults::default()
                },
            );
            let end = w.run(&mut request("n1", "n4"), 200);
            if matches!(end, Action::ReleaseLease { .. }) {
                continue; // the swap ended before the theft
            }
            assert!(
                matches!(end, Action::Lost { .. }),
                "stolen at {steal}: {end:?}"
            );
            assert_eq!(
                w.v.lease.as_ref().unwrap().holder.as_deref(),
                Some("intruder")
            );
        }
    }

    #[test]
    fn the_dry_run_plan_names_the_snapshot_voter_and_the_join_node() {
        let p = plan(&fleet(), "n1", "n4");
        assert!(all_pass(&p.gates));
        assert!(p.steps[1].contains("ask n2"), "{:?}", p.steps);
        assert!(
            p.steps[2].contains("promote n4 joining n2"),
            "{:?}",
            p.steps
        );
        assert_eq!(p.steps.len(), 8);
    }

    // === `run` ===

    #[test]
    fn run_replaces_a_voter_not_ready_past_the_grace_period() {
        let mut v = fleet();
        let n2 = node_mut(&mut v, "n2");
        n2.ready = false;
        n2.ready_since = Some(NOW - 100);
        assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
        node_mut(&mut v, "n2").ready_since = Some(NOW - 301);
        assert_eq!(
            run_decision(&v),
            RunDecision::Swap {
                out: name("n2"),
                incoming: name("n4"),
                why: "n2 has been NotReady for over 300 s".into()
            }
        );
    }

    #[test]
    fn run_replaces_a_voter_on_a_host_not_eligible() {
        let mut v = fleet();
        node_mut(&mut v, "n3").eligible = false;
        let RunDecision::Swap { out, incoming, .. } = run_decision(&v) else {
            panic!()
        };
        assert_eq!((out.as_str(), incoming.as_str()), ("n3", "n4"));
    }

    #[test]
    fn run_does_nothing_without_a_free_eligible_standby() {
        let mut v = fleet();
        node_mut(&mut v, "n3").eligible = false;
        node_mut(&mut v, "n4").cordoned = true;
        let RunDecision::Idle { why } = run_decision(&v) else {
            panic!()
        };
        assert!(why.contains("no healthy eligible standby"), "{why}");
    }

    #[test]
    fn run_waits_between_swaps_and_resumes_an_unfinished_one_first() {
        let mut v = fleet();
        node_mut(&mut v, "n3").eligible = false;
        let last = LastSwap {
            swap: "swap-0".into(),
            out: "n9".into(),
            incoming: "n3".into(),
            at: NOW - 10,
            outcome: Outcome::Done { warning: None },
        };
        v.lease = Some(LeaseFacts {
            last_swap: Some(serde_json::to_string(&last).unwrap()),
            ..LeaseFacts::default()
        });
        assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
        v.now += 60;
        assert!(matches!(run_decision(&v), RunDecision::Swap { .. }));
        let mut l = lease_held_by("fleet-role", "ctl-b", "swap-0", "n2", "n5");
        l.holder = None;
        l.stopped = Some("x".into());
        v.lease = Some(l);
        let RunDecision::Swap { out, incoming, .. } = run_decision(&v) else {
            panic!()
        };
        assert_eq!((out.as_str(), incoming.as_str()), ("n2", "n5"));
    }

    #[test]
    fn run_is_idle_while_paused_or_while_a_swap_runs() {
        let mut v = fleet();
        node_mut(&mut v, "n3").eligible = false;
        v.lease = Some(LeaseFacts {
            paused: true,
            ..LeaseFacts::default()
        });
        assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
        v.lease = Some(lease_held_by("fleet-role", "ctl-b", "swap-0", "n2", "n5"));
        assert!(matches!(run_decision(&v), RunDecision::Idle { .. }));
    }

    #[test]
    fn an_untrusted_value_is_shown_on_one_line() {
        assert_eq!(one_line("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        assert!(one_line(&"x".repeat(1000)).chars().count() <= 241);
    }

    // === Property tests ===

    fn arb_fleet() -> impl Strategy<Value = (FleetView, usize, usize)> {
        // 1 to 5 voters (now and then one NotReady), 1 to 3 agents (now and
        // then ineligible or NotReady), configured as many as there are
        // voters or, now and then, 1, 3 or 5.
        (
            prop::collection::vec(prop::bool::weighted(0.93), 1..=5),
            prop::collection::vec(
                (prop::bool::weighted(0.9), prop::bool::weighted(0.93)),
                1..=3,
            ),
            prop::option::weighted(0.15, prop::sample::select(vec![1usize, 3, 5])),
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>(),
        )
            .prop_map(|(voters, agents, configured, o, i)| {
                let mut nodes = Vec::new();
                for (k, ready) in voters.iter().enumerate() {
                    let mut n = voter(&format!("v{k}"), k as u8 + 1);
                    n.ready = *ready;
                    nodes.push(n);
                }
                for (k, (eligible, ready)) in agents.iter().enumerate() {
                    let mut n = agent(&format!("a{k}"), *eligible);
                    n.ready = *ready;
                    nodes.push(n);
                }
                let out = o.index(voters.len());
                let inc = voters.len() + i.index(agents.len());
                let mut s = settings();
                s.voters = configured.unwrap_or(voters.len());
                (
                    FleetView {
                        now: NOW,
                        settings: s,
                        nodes,
                        lease: None,
                    },
                    out,
                    inc,
                )
            })
    }

    fn arb_faults() -> impl Strategy<Value = Faults> {
        let down = || prop::option::weighted(0.3, (0usize..60, 0usize..8));
        (
            prop::bool::weighted(0.15),
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.1),
            [down(), down(), down()],
            prop::option::weighted(0.3, 0usize..60),
            1i64..20,
        )
            .prop_map(|(stalls, fails, sd, snap, down, restart, tick)| Faults {
                promotion_stalls: stalls,
                promotion_fails: fails && !stalls,
                step_down_fails: sd,
                snapshot_fails: snap && !sd,
                down_at: down,
                restart_at: restart,
                steal_at: None,
                tick_secs: tick,
            })
    }

    /// The property tests below are only as good as the worlds they draw:
    /// this checks that those worlds reach every ending, and removals.
    #[test]
    fn the_random_worlds_reach_every_ending_of_a_swap() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let mut endings: BTreeMap<&str, usize> = BTreeMap::new();
        for _ in 0..300 {
            let (v, out, inc) = arb_fleet().new_tree(&mut runner).unwrap().current();
            let faults = arb_faults().new_tree(&mut runner).unwrap().current();
            let (out, inc) = (v.nodes[out].name.clone(), v.nodes[inc].name.clone());
            let mut w = World::new(v, faults);
            let end = w.run(&mut request(&out, &inc), 2000);
            let key = match end {
                Action::Refuse { .. } => "refused",
                Action::ReleaseLease {
                    outcome: Outcome::Done { warning: None },
                } => "done",
                Action::ReleaseLease {
                    outcome: Outcome::Done { .. },
                } => "done-with-warning",
                Action::ReleaseLease {
                    outcome: Outcome::WoundDown { .. },
                } => "wound-down",
                Action::Stop { .. } => "stopped",
                _ => "other",
            };
            *endings.entry(key).or_default() += 1;
            if w.writes
                .iter()
                .any(|a| matches!(a, Action::RemoveMember { .. }))
            {
                *endings.entry("a removal asked").or_default() += 1;
            }
        }
        eprintln!("{endings:?}");
        for key in [
            "refused",
            "done",
            "done-with-warning",
            "wound-down",
            "stopped",
            "a removal asked",
        ] {
            assert!(endings.get(key).copied().unwrap_or(0) >= 3, "{endings:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The invariant: whatever the fleet, whatever goes wrong and
        /// whenever the controller restarts, no removal it asks for leaves
        /// fewer healthy voters than a quorum of the members left, and the
        /// swap always ends.
        #[test]
        fn no_sequence_of_actions_removes_a_member_below_quorum(
            (v, out, inc) in arb_fleet(),
            faults in arb_faults(),
        ) {
            let out = v.nodes[out].name.clone();
            let inc = v.nodes[inc].name.clone();
            let mut w = World::new(v, faults);
            let mut s = request(&out, &inc);
            let end = w.run(&mut s, 2000);
            prop_assert!(w.violations.is_empty(), "{:?}", w.violations);
            prop_assert!(end.is_terminal());
            // A refused swap wrote nothing.
            if matches!(end, Action::Refuse { .. }) {
                let wrote = w.writes.iter().any(|a| a.node().is_some());
                prop_assert!(!wrote || faults.restart_at.is_some());
            }
        }

        /// Every write to a Node is taken with the Lease valid for this
        /// swap, and the gates the decision depends on passed.
        #[test]
        fn every_removal_the_controller_asks_for_passes_the_quorum_gate(
            (v, out, inc) in arb_fleet(),
            faults in arb_faults(),
        ) {
            let out = v.nodes[out].name.clone();
            let inc = v.nodes[inc].name.clone();
            let mut w = World::new(v, faults);
            let mut s = request(&out, &inc);
            for _ in 0..2000 {
                let a = next_action(&w.v, &s);
                if let Action::RemoveMember { node } = &a {
                    let incoming = w.v.lease.as_ref().and_then(|l| l.swap_in.clone());
                    let g = gate_quorum_for(&w.v, node.as_str(), incoming.as_deref());
                    prop_assert!(g.passed, "{}", g.reason);
                }
                if a.node().is_some() {
                    let l = w.v.lease.as_ref().unwrap();
                    prop_assert_eq!(l.instance.as_deref(), Some(s.instance.as_str()));
                    prop_assert!(lease_valid_for_write(&w.v, l));
                }
                if a.writes() {
                    w.write(&a, &mut s);
                }
                if a.is_terminal() {
                    break;
                }
                if !a.writes() {
                    w.v.now += faults.tick_secs;
                    w.react();
                }
            }
        }
    }
}
