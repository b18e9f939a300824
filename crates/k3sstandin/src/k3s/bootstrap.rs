//! A joining server's bootstrap (`pkg/cluster/bootstrap.go`): the data it
//! reads from its join server's supervisor with its token, and the etcd
//! certificates it makes from the CAs in it when it has none.

use std::time::Duration;

use anyhow::{Context, bail};
use tracing::info;

use super::{Ctx, retry::retried, supervisor, token};
use crate::lab_pki;

/// k3s's first step of a join (`pkg/cluster/bootstrap.go`
/// `httpBootstrap`): the bootstrap data from the join server's supervisor,
/// with this host's token as the `server` user. Without a token, k3s stops
/// ("token is required to join a cluster"); an answer other than 200 (a
/// wrong token's 401, an agent token's 403) stops it too, before any
/// member is added, and the unit restarts. While the supervisor does not
/// answer it is asked again (`retry::retried`, as `add_learner` is).
pub(super) async fn bootstrap(
    ctx: &Ctx,
    join: &protocol::JoinUrl,
) -> anyhow::Result<Option<lab_pki::EtcdCas>> {
    let creds = server_token(ctx)
        .and_then(|t| token::parse(&t, "server"))
        .context("token is required to join a cluster")?;
    // Retried only while the supervisor does not answer; a refusal stops.
    let (pki, ips) = (ctx.spec.pki_dir(), ctx.spec.ips());
    let (status, body) = retried(
        &format!("bootstrap data from {join}"),
        Duration::from_secs(120),
        Duration::from_secs(1),
        || supervisor::server_bootstrap(&pki, &ips, join, &creds),
    )
    .await?;
    if !status.starts_with("200") {
        bail!(
            "failed to get bootstrap data from {join}{}: {status}",
            supervisor::BOOTSTRAP_PATH
        );
    }
    Ok(supervisor::etcd_cas(&body))
}

/// Makes this server's etcd certificates from the join server's bootstrap
/// data when it has none (`server-client.crt` missing): the CAs with their
/// keys, and its member's own certificates for `ip`. Nothing when they are
/// there; without `server:` to bootstrap from, k3s would make new CAs and
/// a new cluster, which a lab host never should: it stops instead.
pub(super) async fn member_certs(ctx: &Ctx, ip: std::net::Ipv4Addr) -> anyhow::Result<()> {
    let dir = ctx.at(lab_pki::HOST_ETCD_TLS);
    if dir.join("server-client.crt").exists() {
        return Ok(());
    }
    let server = ctx.config.get("server").with_context(|| {
        format!(
            "no etcd certificates in {} and no server: to bootstrap them from",
            dir.display()
        )
    })?;
    let join = protocol::JoinUrl::parse(server)?;
    let cas = bootstrap(ctx, &join)
        .await?
        .with_context(|| format!("the bootstrap data from {join} carries no etcd CAs"))?;
    // A half-made directory (a crash while writing) is made again whole.
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| dir.display().to_string())?;
    }
    lab_pki::write_member(&dir, &cas, ip.into())?;
    info!("made this member's etcd certificates from the bootstrap data of {join}");
    Ok(())
}

/// The host's token: `token`, else the contents of `token-file`.
pub(super) fn server_token(ctx: &Ctx) -> Option<String> {
    ctx.config.get("token").map(str::to_string).or_else(|| {
        let file = ctx.config.get("token-file")?;
        std::fs::read_to_string(ctx.at(file.trim_start_matches('/'))).ok()
    })
}
