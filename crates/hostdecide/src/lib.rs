//! A host's decision: what `fleet-role-actuator` does next, given its Node,
//! the regrade Lease and what it knows of its own k3s and etcd.
//!
//! Nothing here does IO: "why did the host refuse?" is answered by reading
//! [`decide::decide`]. The values it reads are the contract's
//! ([`protocol`]); the actuator gathers them and carries the answer out.
#![forbid(unsafe_code)]

pub mod decide;
pub mod ghost_removal;
pub mod join;
pub mod learner_removal;
pub mod milestones;
pub mod rollback_stop;

pub use decide::{Decision, HostState, Observation, Step, decide};
