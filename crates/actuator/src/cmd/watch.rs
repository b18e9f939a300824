//! `watch`: the host checked to be the configured Node, then the watcher
//! run until SIGTERM.

use std::{process::ExitCode, sync::Arc};

use actuator::{
    cli::{ApiArgs, Cli},
    cluster::Candidates,
    metrics::Metrics,
};
use anyhow::Context;
use clock::Clock;

use super::{settings, usage};

/// Runs `watch`.
pub(crate) fn watch(
    cli: &Cli,
    api: &ApiArgs,
    rt: &tokio::runtime::Runtime,
    clock: Clock,
) -> anyhow::Result<ExitCode> {
    let s = settings(cli, Some(api), None)?;
    // A templated actuator.toml naming one Node on every host would
    // make each host carry out that Node's steps: refuse to start
    // unless the host itself says it is the configured Node.
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let addresses = host::addresses::LocalAddresses::read(std::path::Path::new("/proc/net"))
        .context("reading this host's addresses")?;
    // The configured node is at fault, not the host: a usage error.
    host::identity::check(
        &s.host(&clock, rt.handle()).paths,
        s.node.as_str(),
        hostname.as_deref(),
        &addresses,
    )
    .map_err(usage)?;
    crate::init_logging();
    // Said, never refused: a fleet upgrading k3s host by host passes
    // through releases newer than this build knows.
    match s.host(&clock, rt.handle()).k3s_version() {
        Ok(v) => match v.warning() {
            Some(w) => tracing::warn!("{w}"),
            None => tracing::info!("k3s {}", v.text),
        },
        Err(e) => tracing::warn!("cannot tell this host's k3s release: {e}"),
    }
    let candidates =
        Candidates::new(s.api.clone(), s.ca_file.clone(), s.token_file.clone()).map_err(usage)?;
    rt.block_on(async {
        let metrics = Arc::new(Metrics::new());
        // Off unless configured: most hosts need the report alone.
        if let Some(addr) = s.metrics_address {
            let bound = metrics.clone().serve(addr).await?;
            tracing::info!("serving /metrics and /healthz on {bound}");
        }
        let host = s.host(&clock, rt.handle());
        // The crash test's failpoint, in a build that has it (never the
        // packaged one): see `failpoint`.
        #[cfg(feature = "failpoint")]
        let host = actuator::failpoint::armed(host);
        let mut w = actuator::watch::Watcher::with_host(s, host, clock)
            .with_metrics(metrics)
            .with_addresses(addresses);
        w.run(candidates, shutdown()).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM (systemd's stop) or SIGINT end the watcher between steps.
async fn shutdown() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
