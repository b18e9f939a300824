//! `k3s agent`: registers its Node with its node password (refused on a
//! mismatch, as k3s refuses), keeps the Ready condition and the node Lease
//! fresh, and runs the pods bound to its Node ([`super::pods`]). It
//! bootstraps only from the server it was given (`server:`, `--server` or
//! `K3S_URL`), then reaches the others too (k3s's agent load balancer).
//! Like k3s's, it fails at once on a key of `config.yaml` or a drop-in it
//! does not define (any outside [`super::config::AGENT_FLAGS`]: a server's,
//! a typo), and retries for ever while its server does
//! not answer (the unit stays activating).

use std::time::Duration;

use anyhow::Context;
use testcp::TokenAuthFile;
use tracing::warn;

use super::{Ctx, node, pods};
use crate::api::Apis;

/// Runs `k3s agent` until it fails.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    let clock = clock::Clock::system();
    // k3s (pkg/configfilearg/parser.go) turns every config key into a flag
    // of the subcommand; urfave/cli refuses one `agent` does not define
    // (`Incorrect Usage: …` on stdout), k3s exits with `Error: …` and the
    // unit restart-loops. Like k3s, the stand-in names no file.
    if let Some((key, _file)) = ctx.config.key_the_agent_does_not_define() {
        println!("Incorrect Usage: flag provided but not defined: -{key}");
        anyhow::bail!("flag provided but not defined: -{key}");
    }
    let name = ctx.node()?;
    let ip = ctx.ip()?;
    let server = ctx
        .config
        .get("server")
        .context("--server is required (server: in config.yaml, or K3S_URL)")?;
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
    let kubelet_through = |urls: Vec<String>| -> anyhow::Result<node::Kubelet> {
        Ok(node::Kubelet {
            name: name.clone(),
            ip: ip.to_string(),
            apis: Apis::new(&spec.pki_dir(), &spec.ips(), tokens.admin_token(), urls)?,
        })
    };
    // The first bootstrap goes to `server:` alone: k3s's agent learns the
    // other servers only from the one it was given (pkg/agent/config/config.go
    // retries "Waiting to retrieve agent configuration" for ever); once it
    // has, its load balancer keeps them in `agent/etc/k3s-agent-load-balancer.json`
    // (pkg/agent/loadbalancer) and a restart may use any of them.
    let lb_state = ctx.at("var/lib/rancher/k3s/agent/etc/k3s-agent-load-balancer.json");
    let bootstrap = if lb_state.exists() {
        kubelet_through(urls.clone())?
    } else {
        kubelet_through(vec![server.to_string()])?
    };
    let kubelet = kubelet_through(urls.clone())?;
    let password = node::ensure_password(&ctx.root)?;
    loop {
        let attempt = async {
            bootstrap.register().await?;
            bootstrap.check_password(&password).await
        };
        match attempt.await {
            Ok(()) => {
                if let Some(dir) = lb_state.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let servers: Vec<String> = urls.iter().map(|u| format!("{u:?}")).collect();
                std::fs::write(
                    &lb_state,
                    format!(
                        "{{\"ServerURL\":{:?},\"ServerAddresses\":[{}]}}\n",
                        server.as_str(),
                        servers.join(",")
                    ),
                )?;
                break;
            }
            Err(e) if e.to_string().contains("Node password rejected") => return Err(e),
            Err(e) => {
                warn!(
                    "Waiting to retrieve agent configuration; server {server} is not ready: {e:#}"
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    // k3s's agent sends READY=1 once it has reached a supervisor with a valid
    // token; here, once its Node is registered through one.
    super::notify_ready("agent");
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let heartbeat = spec.heartbeat();
    let mut last_beat = clock.now() - heartbeat;
    let mut last_sync = clock.now() - pods::SYNC_EVERY;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = term.recv() => return Ok(()),
        }
        if clock.since(last_beat) >= heartbeat {
            last_beat = clock.now();
            if let Err(e) = kubelet.heartbeat(&[]).await {
                warn!("heartbeat: {e:#}");
            }
        }
        // Cordoned or not: a cordon is the scheduler's, never the kubelet's.
        if clock.since(last_sync) >= pods::SYNC_EVERY {
            last_sync = clock.now();
            if let Err(e) = pods::sync(&kubelet, &ctx.root).await {
                warn!("pods: {e:#}");
            }
        }
    }
}
