//! The local etcd member as k3s makes it: its name (`<node>-<8 hex>`, k3s's
//! `setName`, `pkg/etcd/etcd.go`) and its options (`cluster`), for a start
//! (`server.rs`) and a reset (`reset.rs`) alike.

use std::{net::Ipv4Addr, path::Path};

use testcp::{ClusterState, EtcdOptions, EtcdTls};

use super::Ctx;
use crate::{lab_pki, spec::LabSpec};

/// A new member name for `node`: the node's name and 8 random hex digits.
pub(super) fn new_name(node: &str) -> String {
    let mut b = [0u8; 4];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{node}-{hex}")
}

/// The local etcd member's options, as k3s starts it (`pkg/etcd/etcd.go`,
/// `cluster`): TLS with the host's `server/tls/etcd/` certificates, the
/// client port on the host's address and on loopback, metrics on loopback.
pub(super) fn etcd_options(
    ctx: &Ctx,
    ip: Ipv4Addr,
    etcd_dir: &Path,
    member_name: &str,
    initial_cluster: String,
    state: ClusterState,
) -> anyhow::Result<EtcdOptions> {
    let logs = ctx.at("var/log/k3s");
    std::fs::create_dir_all(&logs)?;
    let tls = ctx.at(lab_pki::HOST_ETCD_TLS);
    Ok(EtcdOptions {
        name: member_name.to_string(),
        data_dir: etcd_dir.to_path_buf(),
        client_url: LabSpec::etcd_url(ip),
        // k3s: `pkg/etcd/etcd.go` (`listenClientURLs`) listens on loopback
        // too, and advertises only the host's address.
        also_listen_client_urls: vec![format!(
            "https://{}:{}",
            Ipv4Addr::LOCALHOST,
            crate::spec::ETCD_CLIENT_PORT
        )],
        peer_url: LabSpec::etcd_peer_url(ip),
        // k3s: metrics and /health in plain HTTP on loopback:2381.
        metrics_url: LabSpec::etcd_metrics_url(),
        initial_cluster,
        initial_cluster_state: state,
        tls: Some(EtcdTls {
            client_ca: tls.join("server-ca.crt"),
            cert: tls.join("server-client.crt"),
            key: tls.join("server-client.key"),
            peer_ca: tls.join("peer-ca.crt"),
            peer_cert: tls.join("peer-server-client.crt"),
            peer_key: tls.join("peer-server-client.key"),
        }),
        log_file: logs.join("etcd.log"),
        extra_args: vec!["--unsafe-no-fsync".into()],
    })
}
