//! `fleet-role-lab`: a k3s fleet on one machine.
//!
//! Each host is a root directory and a loopback address (`127.77.K.N`). Its
//! units run under the `systemctl` stand-in, and its `k3s` is a stand-in
//! ([`k3s`]) that does what k3s does with **real** etcd members (joined as
//! learners, promoted by the leader's loop, removed through k3s's annotation)
//! and a **real** kube-apiserver per server host over its local member. The
//! actuator runs on each host as a unit, as it would in production.
#![forbid(unsafe_code)]

pub mod api;
pub mod bench;
pub mod clock;
pub mod etcd_gw;
pub mod k3s;
pub mod scenario;
pub mod spec;
pub mod world;
