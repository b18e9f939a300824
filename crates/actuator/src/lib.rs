//! `fleet-role-actuator`: the host-side half of a voter swap.
//!
//! It watches its own Node, decides with [`hostdecide::decide`], does the
//! host-local part of a step through the [`host`] crate, and reports each
//! step under its own key of the report ConfigMap. Its credential can read
//! Nodes and the regrade Lease and patch its own report, nothing more.
#![forbid(unsafe_code)]

pub mod cli;
pub mod config;
pub mod docker_host;
pub mod etcdreport;
#[cfg(feature = "failpoint")]
pub mod failpoint;
pub mod join;
pub mod leadership;
pub mod learner;
pub mod local;
pub mod membership;
pub mod metrics;
pub mod output;
#[cfg(feature = "failpoint")]
pub mod plant;
pub mod report;
pub mod watch;

/// The host's API clients (the access layer's, under the name the
/// actuator's modules use).
pub use kubeaccess::candidates as cluster;
