//! A joining server's bootstrap (`pkg/cluster/bootstrap.go`): the data it
//! reads from its join server's supervisor with its token, and the etcd
//! certificates it makes from the CAs in it when it has none.

use std::time::Duration;

use anyhow::{Context, bail};
use tracing::{info, warn};

use super::{Ctx, server::server_token, supervisor, token};
use crate::lab_pki;

/// k3s's first step of a join (`pkg/cluster/bootstrap.go`
/// `httpBootstrap`): the bootstrap data from the join server's supervisor,
/// with this host's token as the `server` user. Without a token, k3s stops
/// ("token is required to join a cluster"); an answer other than 200 (a
/// wrong token's 401, an agent token's 403) stops it too, before any
/// member is added, and the unit restarts. While the supervisor does not
/// answer it is asked again (the join's own retries, as `add_learner`'s).
pub(super) async fn bootstrap(
    ctx: &Ctx,
    join: &protocol::JoinUrl,
) -> anyhow::Result<Option<lab_pki::EtcdCas>> {
    let creds = server_token(ctx)
        .and_then(|t| token::parse(&t, "server"))
        .context("token is required to join a cluster")?;
    let clock = clock::Clock::system();
    let start = clock.now();
    loop {
        match supervisor::server_bootstrap(&ctx.spec.pki_dir(), &ctx.spec.ips(), join, &creds).await
        {
            Ok((status, body)) if status.starts_with("200") => {
                return Ok(supervisor::etcd_cas(&body));
            }
            Ok((status, _)) => bail!(
                "failed to get bootstrap data from {join}{}: {status}",
                supervisor::BOOTSTRAP_PATH
            ),
            Err(e) if clock.since(start) < Duration::from_secs(120) => {
                warn!("bootstrap data from {join}: {e:#}; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(e.context(format!("bootstrap data from {join}"))),
        }
    }
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
