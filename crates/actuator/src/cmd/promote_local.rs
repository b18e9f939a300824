//! `promote-local --join URL`: this host switched from agent to server.

use std::process::ExitCode;

use actuator::{
    cli::Cli,
    local::{self, Switch},
};
use clock::Clock;
use protocol::JoinUrl;

use super::{settings, usage};

/// Runs `promote-local`.
pub(crate) fn promote_local(
    cli: &Cli,
    join: &str,
    check: bool,
    lock_timeout: Option<u64>,
    rt: &tokio::runtime::Runtime,
    clock: &Clock,
) -> anyhow::Result<ExitCode> {
    let join = JoinUrl::parse(join).map_err(usage)?;
    let s = settings(cli, None, lock_timeout)?;
    local::switch(
        &s.host(clock, rt.handle()),
        &Switch::Promote(join),
        check,
        s.lock_timeout,
        cli.output,
    )?;
    Ok(ExitCode::SUCCESS)
}
