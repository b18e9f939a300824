//! The lab's rig: the machinery that makes a lab host a host.
//!
//! [`net`] gives each host a network namespace joined by a bridge, and
//! [`filter`] drops chosen packets in one;
//! [`machine`] boots a host as a container running this machine's systemd;
//! [`units`] writes k3s's units as its install.sh does, and fleet-role's
//! drop-ins; [`docker_host`] runs k3s in containers of a private dockerd;
//! [`overlap`] reads systemd's journal for whether the two k3s units were
//! ever active together; [`bounded`] runs every command with a bound.
#![forbid(unsafe_code)]

pub mod bounded;
pub mod docker_host;
pub mod filter;
pub mod machine;
pub mod machine_spec;
pub mod net;
pub mod overlap;
pub mod units;
