//! `fleet-role-lab`: a k3s fleet on one machine, and the experiments run on
//! it.
//!
//! The hosts are the rig's (`labrig`: a container booting this machine's
//! systemd per host, their networks, Docker hosts) and their k3s the
//! stand-in's (`k3sstandin`: real etcd members, a real kube-apiserver per
//! server host). This crate holds what is done with them: bringing a lab up
//! and holding it ([`systemd_lab`], [`lab_setup`], [`held_lab`]), driving a swap by
//! hand ([`hand_controller`]), the demo and its scenarios ([`scenario`]), the bench
//! ([`bench`]) and the chaos campaign ([`chaos`]).
#![forbid(unsafe_code)]

pub mod bench;
pub mod chaos;
pub mod hand_controller;
pub mod held_lab;
pub mod history;
pub mod lab_setup;
pub mod previous_release;
pub mod resize;
pub mod scenario;
pub mod spawn;
pub mod status;
pub mod systemd_lab;

// The stand-in and the rig, under the names the lab's tests and experiments
// have always used.
pub use k3sstandin::{api, etcd_gw, etcd_tls, k3s, lab_pki, spec, stamps, zip};
pub use labrig::{bounded, docker_host, machine, machine_spec, net, overlap, units};
