//! The contract between `fleet-role` (the controller) and `fleet-role-actuator`
//! (one per host): the names both sides use, the validation of every value read
//! from the Kubernetes API, the report a host writes, and the pure decisions.
//!
//! Nothing here does IO: the decisions are functions over plain values, so
//! "why did the host refuse?" is answered by reading [`decide::decide`].
#![forbid(unsafe_code)]

pub mod controller;
pub mod decide;
pub mod etcd;
pub mod exit;
pub mod join;
pub mod milestones;
pub mod names;
pub mod report;
pub mod text;
pub mod validate;
pub mod version;
pub mod view;

pub use decide::{Decision, HostState, Observation, Step, decide};
pub use names::Names;
pub use report::{Phase, Report, Settled};
pub use validate::{HolderIdentity, InvalidValue, JoinUrl, NodeName, Role, StepKind, SwapId};
pub use version::PROTOCOL_VERSION;
pub use view::{
    FleetMarks, K3sEtcd, LeaseFacts, MaintenanceMarks, NodeFacts, RemovalMark, member_gone,
};
