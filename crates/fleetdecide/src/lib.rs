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

mod abort;
mod action;
mod effects;
mod etcd_gates;
mod evidence;
mod gate;
mod gates;
mod grace;
mod health;
mod pacing;
mod plan;
mod quorum;
mod reasons;
mod record;
mod resize;
mod run;
mod settings;
mod swap;
mod tidy;

mod view;
pub mod voterset;
mod window;

#[cfg(test)]
mod class_tests;
#[cfg(any(test, feature = "fixtures"))]
#[doc(hidden)]
pub mod fixtures;

pub use abort::{AbortPlan, abort_action, abort_note, abort_plan};
pub use action::{Action, Start, SwapState};
pub use effects::{
    Writer, lease_after, lease_asked_to_stop, lease_paused, node_after, write_may_go,
};
pub use etcd_gates::{gate_etcd_views_agree, gate_no_etcd_alarm, gate_no_ghost_member};
pub use evidence::{Sightings, weigh_evidence};
pub use fleetfacts::{
    Class, PodFacts, PodRef, classify, drain, is_healthy_voter, is_voting, members,
};
pub use gate::{Gate, GateName, all_pass, failures};
pub use gates::{
    Count, Outgoing, gate_incoming_agent, gate_incoming_eligible, gate_incoming_ready,
    gate_incoming_voter, gate_known_protocol, gate_no_learner, gate_no_other_swap, gate_not_paused,
    gate_outgoing_voter, gate_quorum_after_removal, gate_quorum_at_host_stop, gate_quorum_for,
    gate_voters_healthy, pending_learners, preflight,
};
pub use grace::{Grace, GraceKind, grace_for};
pub use health::{Degradation, DegradedReason, degradations, degraded};
pub use pacing::{ENDINGS_KEPT, Ending, Pace, endings_of, pace, record_ending, standby_ready_at};
pub use plan::{Plan, PlanStep, plan, plan_grow, plan_shrink};
pub use protocol::text::one_line;
pub use protocol::view::{FleetMarks, K3sEtcd, LeaseFacts, MaintenanceMarks, NodeFacts};
pub use quorum::{Removing, VoterCount, count_voters, keeps_quorum, quorum, removing};
pub use reasons::{Awaiting, Reached, Reason, VoterFor, Write};
pub use record::{LastSwap, Outcome, StopKind, StopNote, SwapStep};
pub use resize::{gate_odd_voter_count, grow_gates, shrink_gates, voting_now};
pub use run::{RunDecision, run_decision};
pub use settings::{DEFAULT_SPREAD_LABEL, Settings, Timeouts};
pub use swap::{finished, join_voter, next_action, snapshot_voter, start_gates};
pub use tidy::{Tidy, tidy};
pub use view::{Change, FleetView, Recorded, SwapRecord, apply_heartbeats, half_name, halves};
pub use voterset::{free_standby, standbys};
pub use window::{DAYS, Window, WindowError, fixed_zone, show_time};
