//! Test support: a real Kubernetes control plane on loopback.
//!
//! [`ControlPlane::start`] runs a real etcd and a real kube-apiserver on
//! `127.0.0.1` with free ports, a fresh PKI and a random admin token, all in a
//! temp dir, and hands out `kube::Client`s. The building blocks it is made of,
//! [`Pki`], [`TokenAuthFile`], [`Etcd`] and [`ApiServer`], are public so a lab
//! can run one etcd member and one kube-apiserver per simulated server host,
//! each on its own loopback address (`127.0.1.N`), with one CA for all.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::Namespace;
//! let mut plane = testcp::ControlPlane::start().await?;
//! let namespaces = kube::Api::<Namespace>::all(plane.admin_client()?);
//! assert!(namespaces.get_opt("default").await?.is_some());
//! plane.add_apiserver().await?; // a second API server over the same etcd
//! # Ok(()) }
//! ```
//!
//! # Binaries
//! etcd comes from the `etcd-bin-vendored` crate. kube-apiserver is built from
//! source by `scripts/build-kube-apiserver.sh` into
//! `.cache/kube-apiserver/<version>-<hash>/`, or named by
//! `FLEET_ROLE_KUBE_APISERVER`. Without it, starting fails with an error that
//! says to run the script: a missing binary never turns into a skipped test.
//!
//! # Certificates
//! [`Pki`] uses rcgen with ring (ECDSA P-256 CA and serving certificate) and the
//! RustCrypto `rsa` crate for the RSA service-account key, which ring cannot
//! generate. The `openssl` CLI was the alternative, but `dpkg -S` puts it in
//! Debian's `openssl` package, priority *optional*: a fresh Debian (the
//! `debian:bookworm` image, a minimal install) does not have it. Neither
//! crate pulls in openssl-sys or aws-lc.
//!
//! # Teardown
//! Dropping a [`ControlPlane`] (or an [`Etcd`] or [`ApiServer`]) SIGKILLs its
//! servers and waits for them, then deletes the temp dir. That covers a
//! panicking test. For a test process that is killed outright, every server
//! runs under a small bash guard holding a pipe from the test process; when
//! that process dies the kernel closes the pipe and the guard SIGTERMs the
//! server (SIGKILL after 10 s). `tests/teardown.rs` SIGKILLs a test process
//! with a running plane and checks that no etcd or kube-apiserver survives.
//!
//! # One plane per test
//! Measured on the project's 2-core machine, debug build, with kube-apiserver
//! v1.36.3 and etcd 3.7.2:
//!
//! | step | time |
//! |---|---|
//! | `ControlPlane::start()`, cold (first run after dropping the page cache) | 5.4 s |
//! | `ControlPlane::start()`, warm | 4.1-5.7 s |
//! | `add_apiserver()` | 2.6-4.1 s |
//! | `stop_apiserver(i)` (SIGTERM, graceful) | 0.2-1.3 s |
//! | `start_apiserver(i)` on its old port | 2.8-4.7 s |
//! | drop | 0.1-0.2 s |
//!
//! Almost all of `start()` is kube-apiserver reaching `/readyz` (about 3.5 s);
//! etcd is healthy in about 0.5 s, and the RSA key (0.2-3 s unoptimized) is
//! generated while etcd starts. The page cache barely matters.
//!
//! At about 5 s a plane, tests take one each: they stay independent (objects,
//! RBAC grants, stopped API servers and killed etcd members never leak into
//! another test), and they run in parallel, since planes share nothing but the
//! loopback interface. A suite of many short read-only tests can share one
//! plane per test binary in a `static OnceLock` with a namespace per test; the
//! guards still stop it when the binary exits, as statics are never dropped.
//!
//! # Kubelets
//! Every kube-apiserver runs with `--authorization-mode=Node,RBAC` and the
//! `NodeRestriction` admission plugin, as a k3s server does, so a test can
//! act as a host's kubelet and see what a compromised host could write:
//! [`ControlPlane::kubelet_client`] (or [`kubelet::impersonate`] on any
//! admin configuration) gives a client that is `system:node:<name>` in
//! `system:nodes`. It may patch its own Node and set any label outside the
//! `kubernetes.io`/`k8s.io` domains there; it is refused another Node and
//! any label under `node-restriction.kubernetes.io/`.
//!
//! ```no_run
//! # async fn demo(plane: &testcp::ControlPlane) -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::Node;
//! use kube::api::{Patch, PatchParams};
//! let nodes = kube::Api::<Node>::all(plane.kubelet_client("n1")?);
//! let label = serde_json::json!({"metadata": {"labels": {"example.com/x": "y"}}});
//! nodes.patch("n1", &PatchParams::default(), &Patch::Merge(label)).await?;
//! # Ok(()) }
//! ```
//!
//! # Secrets
//! The admin token is random per plane and kept in a `SecretString`; it is
//! written only to the mode-0600 token file, never to argv or logs.

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
