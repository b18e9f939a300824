//! The controller's decisions: what `fleet-role` should do next, given what
//! the cluster shows.
//!
//! More in docs/internals.md, "fleetdecide".

mod abort;
mod action;
mod effects;
mod eligibility;
mod etcd_gates;
mod evidence;
mod gate;
mod gates;
mod grace;
mod health;
mod next_wake;
mod ownership;
mod pacing;
mod plan;
mod quorum;
mod record;
mod resize;
mod run;
mod settings;
mod swap;
mod tidy;

mod view;
pub mod voterset;

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
pub use eligibility::{eligibility_shortfall, run_view};
pub use etcd_gates::{gate_etcd_views_agree, gate_no_etcd_alarm, gate_no_ghost_member};
pub use evidence::{Sightings, weigh_evidence};
pub use fleetfacts::reasons::{Awaiting, Reached, Reason, VoterFor, Write};
pub use fleetfacts::window::{DAYS, Window, WindowError, fixed_zone, show_time};
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
pub use next_wake::next_edge;
pub use ownership::{Claim, Standing, standing};
pub use pacing::{
    ENDINGS_KEPT, Pace, SwapEnding, endings_of, pace, record_ending, standby_ready_at,
};
pub use plan::{Plan, PlanStep, plan, plan_grow, plan_shrink};
pub use protocol::text::one_line;
pub use protocol::view::{FleetMarks, K3sEtcd, LeaseFacts, MaintenanceMarks, NodeFacts};
pub use quorum::{Removing, VoterCount, count_voters, keeps_quorum, quorum, removing};
pub use record::{LastSwap, Outcome, StopKind, StopNote, SwapStep};
pub use resize::{gate_odd_voter_count, grow_gates, shrink_gates, voting_now};
pub use run::{RunDecision, run_decision};
pub use settings::{DEFAULT_SPREAD_LABEL, Settings, Timeouts};
pub use swap::{finished, join_voter, next_action, snapshot_voter, start_gates};
pub use tidy::{Tidy, tidy};
pub use view::{FleetView, Recorded, SwapRecord, VoterChange, apply_heartbeats, half_name, halves};
pub use voterset::{free_standby, standbys};
