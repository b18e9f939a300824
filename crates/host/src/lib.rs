//! A k3s host seen from inside.
//!
//! Every path lives under a root (`/` in production, a temporary directory in
//! tests), every move is idempotent and checked after, and the units are
//! driven through the `systemctl` and `k3s` found on `PATH`, so tests put
//! stand-ins first. Nothing here talks to the Kubernetes API.
#![forbid(unsafe_code)]

pub mod addresses;
pub mod agent_flags;
pub mod budget;
pub mod datastore;
pub mod docker;
pub mod eligibility;
pub mod error;
pub mod etcd;
pub mod etcd_only;
pub mod fsutil;
pub mod identity;
pub mod join;
pub mod k3s;
pub mod k3s_cli;
pub mod k3s_config;
pub mod k3s_version;
pub mod lock;
pub mod paths;
pub mod preflight;
pub mod process;
pub mod role;
pub mod secrets;
pub mod shims;
pub mod switch;
pub mod systemd;
mod unit_state;
mod unit_wait;
pub mod units;

pub use budget::Budget;
pub use error::{Error, Result};
pub use paths::HostPaths;
pub use switch::{Change, Host};
