//! `snapshot --name NAME`: an etcd snapshot taken on this host.

use std::process::ExitCode;

use actuator::{cli::Cli, local};
use clock::Clock;
use protocol::SwapId;

use super::{settings, usage};

/// Runs `snapshot`.
pub(crate) fn snapshot(
    cli: &Cli,
    name: &str,
    rt: &tokio::runtime::Runtime,
    clock: &Clock,
) -> anyhow::Result<ExitCode> {
    let name = SwapId::parse(name).map_err(usage)?;
    let s = settings(cli, None, None)?;
    local::snapshot(
        &s.host(clock, rt.handle()),
        &name,
        s.lock_timeout,
        cli.output,
    )?;
    Ok(ExitCode::SUCCESS)
}
