//! The one place where Kubernetes objects meet fleet-role's plain views.
//!
//! The decisions (`hostdecide::decide` on a host, `fleetdecide` for
//! the controller) read a [`NodeFacts`] and a [`LeaseFacts`]; the actuator,
//! the controller, the lab and the test doubles all read them through
//! [`node_facts`] and [`lease_facts`], so one label or annotation can never
//! be read two ways. The writes go the other way: the controller computes a
//! view's after (`fleetdecide::{node_after, lease_after}`) and
//! [`node_patch`] and [`lease_object`] turn the difference into its one API
//! write. A host's own objects (its report ConfigMap and heartbeat Lease)
//! are mapped both ways in [`hostobjects`]: the actuator writes its report
//! and renews its heartbeat through it, the controller reads them through
//! it. The IO around these (the API calls, their retries, the lists and
//! watches) is the programs' and `kubeaccess`'s.
//!
//! No IO here: functions from objects to values and back.
#![forbid(unsafe_code)]

pub mod hostobjects;
pub mod identity;
mod lease;
mod node;
mod pod;
pub mod time;

pub use identity::Identity;
pub use lease::{lease_facts, lease_object, lease_patch};
pub use node::{
    addresses, condition, condition_true, internal_ip, join_target, node_facts, node_facts_zoned,
    node_patch, node_status_patch, voter_condition_cleared,
};
pub use pod::pod_facts;
pub use protocol::{LeaseFacts, NodeFacts};
