//! `demote-local`: this host switched from server to agent.

use std::process::ExitCode;

use actuator::{
    cli::Cli,
    local::{self, Switch},
};
use clock::Clock;

use super::settings;

/// Runs `demote-local`.
pub(crate) fn demote_local(
    cli: &Cli,
    check: bool,
    force: bool,
    lock_timeout: Option<u64>,
    rt: &tokio::runtime::Runtime,
    clock: &Clock,
) -> anyhow::Result<ExitCode> {
    let s = settings(cli, None, lock_timeout)?;
    local::switch(
        &s.host(clock, rt.handle()),
        &Switch::Demote { force },
        check,
        s.lock_timeout,
        cli.output,
    )?;
    Ok(ExitCode::SUCCESS)
}
