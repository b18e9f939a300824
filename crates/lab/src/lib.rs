//! `fleet-role-lab`: a k3s fleet on one machine.
//!
//! Each host is a root directory and a loopback address (`127.77.K.N`). Its
//! units run under the `systemctl` stand-in, and its `k3s` is a stand-in
//! ([`k3s`]) that does what k3s does with **real** etcd members (joined as
//! learners, promoted by the leader's loop, removed through k3s's annotation)
//! and a **real** kube-apiserver per server host over its local member. The
//! actuator runs on each host as a unit, as it would in production.
//!
//! The move to real systemd: [`net`] (a network namespace per host, joined by
//! a bridge), [`machine`] (a host as a container booting this machine's
//! systemd), [`units`] (k3s's units as its install.sh writes them, and
//! fleet-role's drop-ins) and [`overlap`] (whether the two k3s units were ever
//! active together, read from systemd's journal).
#![forbid(unsafe_code)]

pub mod api;
pub mod bench;
pub mod bounded;
pub mod chaos;
pub mod docker_host;
pub mod etcd_gw;
pub mod etcd_tls;
pub mod hand;
pub mod held;
pub mod history;
pub mod hosts;
pub mod k3s;
pub mod lab_pki;
pub mod machine;
pub mod machine_spec;
pub mod net;
pub mod overlap;
pub mod previous_release;
pub mod resize;
pub mod scenario;
pub mod spawn;
pub mod spec;
pub mod stamps;
pub mod status;
pub mod systemd_lab;
pub mod units;
pub mod world;
pub mod zip;
