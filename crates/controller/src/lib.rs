//! `fleet-role`, the controller: it plans and drives a whole etcd voter swap
//! (the outgoing voter's host down to an agent, a standby up to a voter)
//! through the Kubernetes API only.
//!
//! Functional core, imperative shell: every decision is
//! [`fleetdecide::next_action`] over a [`fleetdecide::FleetView`];
//! this crate reads the API into that view ([`observe`]), carries out the
//! one action it returns ([`act`]), and prints what happened ([`output`]).
//! [`drive`] is that loop; [`status`] shows the fleet; [`config`] turns the
//! file and flags into settings in one place.
#![forbid(unsafe_code)]

pub mod act;
pub mod bundle;
pub mod cli;
pub mod cluster_ca;
pub mod config;
pub mod drain;
pub mod drive;
pub mod ending;
pub mod enroll;
pub mod events;
#[cfg(test)]
mod fixtures;
pub mod kubeconfig;
pub mod leader;
pub mod manifests;
pub mod metrics;
pub mod observe;
pub mod output;
pub mod service;
pub mod status;
pub mod uninstall;
pub mod watch;

/// The controller's API clients and `run`'s failover (the access layer's,
/// under the names the controller's modules use).
pub use kubeaccess::{failover, kubeconfig as cluster};
