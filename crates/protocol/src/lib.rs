//! The contract between `fleet-role` (the controller) and `fleet-role-actuator`
//! (one per host): the names both sides use, the validation of every value read
//! from the Kubernetes API, the report a host writes, etcd's view as a host
//! reports it, the exit codes and the protocol's version.
//!
//! Nothing here does IO and nothing decides: a host's decision is the
//! `hostdecide` crate's, the controller's the `fleetdecide` crate's, both over
//! these values.
#![forbid(unsafe_code)]

pub mod clock_offset;
pub mod etcd;
pub mod exit;

pub mod names;
pub mod report;
pub mod text;
pub mod validate;
pub mod version;
pub mod view;

pub use names::Names;
pub use report::{Phase, Report, Settled};
pub use validate::{HolderIdentity, InvalidValue, JoinUrl, NodeName, Role, StepKind, SwapId};
pub use version::PROTOCOL_VERSION;
pub use view::{
    FleetMarks, K3sEtcd, LeaseFacts, MaintenanceMarks, NodeFacts, RemovalMark, member_gone,
};
