//! What the controller sees: a Node, the regrade Lease and the whole fleet
//! as plain, untrusted values, and the heartbeat rule that overrides a stale
//! Ready.

use serde::Serialize;

use fleetfacts::members::{Picture, Trust, picture};
use protocol::etcd::EtcdView;

use crate::record::{LastSwap, StopKind, StopNote, SwapStep};
use crate::settings::{Settings, Timeouts};
use fleetfacts::reasons::Reason;
use protocol::text::one_line;
use protocol::{
    validate::{NodeName, SwapId},
    view::{LeaseFacts, NodeFacts},
};

/// What the controller reads of the swap it records on the Lease: the
/// Lease's raw annotations ([`LeaseFacts`], the contract's) read as the
/// controller's own types.
pub trait SwapRecord {
    /// The swap recorded on the Lease, if its id and Nodes are valid.
    fn recorded_swap(&self) -> Option<Recorded>;
    /// The wind-down note, if any.
    fn stop_note(&self) -> Option<StopNote>;
    /// The last swap's outcome, if readable.
    fn last(&self) -> Option<LastSwap>;
    /// The current step, if it names one.
    fn current_step(&self) -> Option<SwapStep>;

    /// When the step recorded times out (unix seconds): its start plus its
    /// timeout in `timeouts`; `None` with no step, no start, or a step that
    /// does not wait. The one reading of a step's deadline: the swap's own
    /// timeouts, `status` and the metric share it.
    fn step_deadline(&self, timeouts: &Timeouts) -> Option<i64>;
}

impl SwapRecord for LeaseFacts {
    /// The swap recorded on the Lease, if its id and Nodes are valid: a
    /// swap names both halves, a grow only its incoming host, a shrink only
    /// its outgoing one. A half that is written but not a valid name makes
    /// the whole record invalid, as does a record with neither half.
    fn recorded_swap(&self) -> Option<Recorded> {
        let half = |raw: &Option<String>| match raw.as_deref() {
            None => Some(None),
            Some(r) => NodeName::parse(r).ok().map(Some),
        };
        let (out, incoming) = (half(&self.swap_out)?, half(&self.swap_in)?);
        if out.is_none() && incoming.is_none() {
            return None;
        }
        Some(Recorded {
            id: SwapId::parse(self.swap.as_deref()?).ok()?,
            out,
            incoming,
        })
    }

    /// The wind-down note, if any (an unreadable one still winds down).
    fn stop_note(&self) -> Option<StopNote> {
        let raw = self.stopping.as_deref()?;
        Some(serde_json::from_str(raw).unwrap_or_else(|_| StopNote {
            kind: StopKind::Failed,
            reason: Reason::Unreadable { raw: one_line(raw) },
        }))
    }

    /// The last swap's outcome, if readable.
    fn last(&self) -> Option<LastSwap> {
        serde_json::from_str(self.last_swap.as_deref()?).ok()
    }

    /// The current step, if it names one.
    fn current_step(&self) -> Option<SwapStep> {
        SwapStep::parse(self.step.as_deref()?)
    }

    fn step_deadline(&self, timeouts: &Timeouts) -> Option<i64> {
        let step = self.current_step()?;
        Some(self.step_since?.saturating_add(timeouts.of(step)?))
    }
}

/// A swap as the Lease records it: both halves, or one of them alone (a
/// grow promotes without a step-down, a shrink steps down without a
/// promotion). [`LeaseFacts::recorded_swap`] never makes one with neither.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recorded {
    /// The swap id.
    pub id: SwapId,
    /// The outgoing Node (none in a grow).
    pub out: Option<NodeName>,
    /// The incoming Node (none in a shrink).
    pub incoming: Option<NodeName>,
}

impl Recorded {
    /// The outgoing Node's name, empty in a grow (no Node has that name,
    /// which is how the gates take a half that is absent).
    pub fn out_name(&self) -> &str {
        half_name(self.out.as_ref())
    }

    /// The incoming Node's name, empty in a shrink.
    pub fn in_name(&self) -> &str {
        half_name(self.incoming.as_ref())
    }

    /// The command that resumes it.
    pub fn resume_command(&self) -> String {
        VoterChange::resume_command(self.out.as_ref(), self.incoming.as_ref())
    }

    /// Which kind of change it records.
    pub fn change(&self) -> VoterChange {
        VoterChange::of(self.out.is_some(), self.incoming.is_some())
    }
}

/// A half's name, empty when the change has none (no Node has that name,
/// which is how the gates take a half that is absent).
pub fn half_name(n: Option<&NodeName>) -> &str {
    n.map_or("", NodeName::as_str)
}

/// The halves of a change in a line: "out n1, in n4", "in n4" (a grow),
/// "out n1" (a shrink).
pub fn halves(out: Option<&NodeName>, incoming: Option<&NodeName>) -> String {
    let parts: Vec<String> = [("out", out), ("in", incoming)]
        .into_iter()
        .filter_map(|(w, n)| n.map(|n| format!("{w} {n}")))
        .collect();
    parts.join(", ")
}

/// What one regrade changes in the voter set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VoterChange {
    /// One voter replaced by another: the count stays.
    Swap,
    /// One voter more (`fleet-role grow`).
    Grow,
    /// One voter fewer (`fleet-role shrink`).
    Shrink,
}

impl VoterChange {
    /// The kind of change with these halves. Neither half is no change a
    /// Lease or a command can name; it reads as a swap, whose gates then
    /// find no Node.
    pub fn of(out: bool, incoming: bool) -> VoterChange {
        match (out, incoming) {
            (false, true) => VoterChange::Grow,
            (true, false) => VoterChange::Shrink,
            _ => VoterChange::Swap,
        }
    }

    /// The command that starts or resumes such a change of `out` for
    /// `incoming` (either may be empty).
    pub fn command(self, out: &str, incoming: &str) -> String {
        match self {
            VoterChange::Swap => format!("fleet-role swap --out {out} --in {incoming}"),
            VoterChange::Grow => format!("fleet-role grow --in {incoming}"),
            VoterChange::Shrink => format!("fleet-role shrink --out {out}"),
        }
    }

    /// The command that starts or resumes the change of `out` for
    /// `incoming`, of the kind their presence says.
    pub fn resume_command(out: Option<&NodeName>, incoming: Option<&NodeName>) -> String {
        VoterChange::of(out.is_some(), incoming.is_some())
            .command(half_name(out), half_name(incoming))
    }

    /// The word for it in output.
    pub fn as_str(self) -> &'static str {
        match self {
            VoterChange::Swap => "swap",
            VoterChange::Grow => "grow",
            VoterChange::Shrink => "shrink",
        }
    }
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
    pub pods: Vec<fleetfacts::PodFacts>,
}

impl FleetView {
    /// The Node called `name`.
    pub fn node(&self, name: &str) -> Option<&NodeFacts> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Nodes sorted by name, for deterministic choices.
    pub fn sorted(&self) -> Vec<&NodeFacts> {
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

/// etcd's membership as the servers report it, and a voter's member.
impl FleetView {
    /// etcd's membership as the servers report it (the host part of each
    /// report), joined with the Nodes. A view older than
    /// [`crate::settings::Settings::actuator_heartbeat_max_age`] does not count: it
    /// rides the heartbeat.
    pub fn etcd(&self) -> Picture {
        let views: Vec<(String, EtcdView)> = self
            .nodes
            .iter()
            .filter_map(|n| Some((n.name.clone(), n.host.as_ref()?.etcd.clone()?)))
            .collect();
        let trust = Trust {
            max_age: self.settings.actuator_heartbeat_max_age,
            future_slack: self.settings.skew_margin,
            incoming: self.lease.as_ref().and_then(|l| l.swap_in.as_deref()),
        };
        picture(self.now, trust, &self.nodes, &views)
    }

    /// Whether `node`'s member is gone, as the controller sees it: the
    /// Node's claim ([`NodeFacts::k3s_mark`](protocol::NodeFacts::k3s_mark))
    /// that no server's view of etcd contradicts ([`protocol::member_gone`]).
    /// k3s writes `removed-node-name` even when `RemovePeer` matched no
    /// member (its `node-address` not the member's peer host): the member
    /// then still votes, and etcd still lists it.
    pub fn member_gone(&self, node: &str) -> bool {
        let Some(n) = self.node(node) else {
            return false;
        };
        let listed = self.etcd().of_node(node).is_some().then_some(true);
        protocol::member_gone(n.k3s_mark(), listed)
    }
}

/// When a voter is down: only on evidence no add-on can forge (the rule
/// `evidence.rs` explains).
impl FleetView {
    /// Whether the voter `node` is down by evidence no add-on can forge
    /// (see the module's header): `Ok` with what shows it, or `Err` with
    /// why it is not taken for down.
    pub fn down_evidence(&self, node: &str) -> Result<String, String> {
        let Some(n) = self.node(node) else {
            return Err(format!("no Node {node}"));
        };
        if n.ready {
            return Err(format!("{node} is Ready"));
        }
        if let Some(r) = n.lease_renewed_at {
            let age = self.now.saturating_sub(r);
            if age <= self.settings.heartbeat_grace {
                return Err(format!(
                    "{node} reads NotReady, but its kubelet renewed its node Lease {age} s ago"
                ));
            }
        }
        let p = self.etcd();
        if !p.known() {
            return Err(format!(
                "{node} reads NotReady, but no server reported etcd's view to confirm its member is down"
            ));
        }
        match p.of_node(node) {
            None => Err(format!(
                "{node} reads NotReady, but etcd lists no member of it"
            )),
            Some(m) if m.vouched => Err(format!(
                "{node} reads NotReady, but its own view of etcd says its member is healthy"
            )),
            Some(_) => Ok(format!(
                "{node} is NotReady, its node Lease is stale and its member has not been vouched for in {} s",
                self.settings.actuator_heartbeat_max_age
            )),
        }
    }

    /// Whether the voter `node` is down by evidence ([`FleetView::down_evidence`]).
    pub fn down(&self, node: &str) -> bool {
        self.down_evidence(node).is_ok()
    }
}
