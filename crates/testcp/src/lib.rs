//! Test support: a real Kubernetes control plane on loopback.
//!
//! More in docs/internals.md, "testcp".

#![forbid(unsafe_code)]

pub mod apiserver;
pub mod binaries;
pub mod etcd;
pub mod kubelet;
pub mod pki;
pub mod plain_http;
pub mod plane;
mod process;
pub mod promtool;
pub mod runbook;
pub mod tokens;

pub use apiserver::{ApiServer, ApiServerOptions};
pub use etcd::{ClusterState, Etcd, EtcdOptions, EtcdTls, Probe};
pub use pki::{AddressPolicy, Ca, Pki, Usage};
pub use plane::{ControlPlane, apply_manifest};
pub use process::free_port;
pub use tokens::TokenAuthFile;

/// `ip` as the host part of a URL: IPv6 in brackets.
pub(crate) fn host(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
    }
}
