//! `k3s agent`: registers its Node with its node password (refused on a
//! mismatch, as k3s refuses), keeps the Ready condition and the node Lease
//! fresh, and runs the pods bound to its Node ([`super::pods`]). It reaches the API through the server it was
//! given, then the others (k3s's agent load balancer).

use std::time::Duration;

use anyhow::Context;
use testcp::TokenAuthFile;
use tracing::warn;

use super::{Ctx, node, pods};
use crate::api::Apis;

/// Runs `k3s agent` until it fails.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    let name = ctx.node()?;
    let ip = ctx.ip()?;
    let server = ctx
        .config
        .get("server")
        .context("k3s agent needs --server (server: in config.yaml)")?;
    let server = protocol::JoinUrl::parse(server)?;
    if ctx.config.get("token").is_none_or(str::is_empty) {
        anyhow::bail!("--token is required");
    }
    let spec = &ctx.spec;
    let mut urls = vec![server.to_string()];
    urls.extend(
        spec.all_api_urls()
            .into_iter()
            .filter(|u| u != server.as_str()),
    );
    let tokens = TokenAuthFile::load(&spec.tokens_file())?;
    let apis = Apis::new(&spec.pki_dir(), &spec.ips(), tokens.admin_token(), urls)?;
    let kubelet = node::Kubelet {
        name: name.clone(),
        ip: ip.to_string(),
        apis,
    };
    let password = node::ensure_password(&ctx.root)?;
    // Registration retries while no API answers, as the agent does at boot.
    let start = std::time::Instant::now();
    loop {
        let attempt = async {
            kubelet.register().await?;
            kubelet.check_password(&password).await
        };
        match attempt.await {
            Ok(()) => break,
            Err(e) if e.to_string().contains("Node password rejected") => return Err(e),
            Err(e) if start.elapsed() < Duration::from_secs(120) => {
                warn!("registering: {e:#}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(e),
        }
    }
    // k3s's agent sends READY=1 once it has reached a supervisor with a valid
    // token; here, once its Node is registered through one.
    super::notify_ready("agent");
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let heartbeat = spec.heartbeat();
    let mut last_beat = std::time::Instant::now() - heartbeat;
    let mut last_sync = std::time::Instant::now() - pods::SYNC_EVERY;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = term.recv() => return Ok(()),
        }
        if last_beat.elapsed() >= heartbeat {
            last_beat = std::time::Instant::now();
            if let Err(e) = kubelet.heartbeat(&[]).await {
                warn!("heartbeat: {e:#}");
            }
        }
        // Cordoned or not: a cordon is the scheduler's, never the kubelet's.
        if last_sync.elapsed() >= pods::SYNC_EVERY {
            last_sync = std::time::Instant::now();
            if let Err(e) = kubelet.sync_pods(&ctx.root).await {
                warn!("pods: {e:#}");
            }
        }
    }
}
