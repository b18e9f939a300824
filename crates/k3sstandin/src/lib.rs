//! The lab's k3s stand-in: what a lab host's `k3s server` and `k3s agent`
//! do, with **real** etcd members (joined as learners, promoted by the
//! leader's loop, removed through k3s's annotation), a **real**
//! kube-apiserver per server host over its local member, and a kubelet's
//! heartbeats. k3s itself cannot run here; each behaviour imitated names
//! the k3s source file it follows in docs/lab.md.
//!
//! Beside it, what every stand-in reads: the lab's description ([`spec`]),
//! its certificates ([`lab_pki`]), the API servers' clients ([`api`]) and
//! etcd's client port ([`etcd_gw`], [`etcd_tls`]).
#![forbid(unsafe_code)]

pub mod api;
pub mod bare;
pub mod etcd_gw;
pub mod etcd_tls;
pub mod k3s;
pub mod lab_pki;
pub mod snapshots;
pub mod spec;
pub mod stamps;
pub mod zip;
