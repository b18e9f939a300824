//! `fleet-role-actuator`'s entry point: flags into settings, one function
//! per command (in [`cmd`], one file each), errors printed once at the
//! edge, an explicit exit code.
//!
//! Exit codes: [`protocol::exit::Exit`], shared with the controller and
//! listed in the help; `is` answers 0 or 1 only.
//!
//! The program's edge: the one place that takes the machine's clock
//! ([`Clock::system`]) and hands it to what reads time.
#![forbid(unsafe_code)]

mod cmd;

use std::process::ExitCode;

use actuator::{
    cli::{Cli, Command},
    output::print_error,
};
use clap::Parser;
use clock::Clock;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = cli.output;
    let clock = Clock::system();
    let outcome = match &cli.command {
        // systemd's `ExecCondition=`: answered from the disk alone, with no
        // runtime (nothing there that could fail to start, or be slow to).
        Command::Is { role, no_tombstone } => Ok(cmd::is(&cli, role, *no_tombstone, &clock)),
        command => runtime().and_then(|rt| run(&cli, command, &rt, clock)),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            let exit = cmd::exit_of(&e);
            print_error(format, &e, exit);
            ExitCode::from(exit.code())
        }
    }
}

/// The process's one runtime. A worker thread of its own drives every call
/// out, so a thread that is not the runtime's (the main thread, a step's
/// blocking thread) can block on its handle for a Docker host's calls: a
/// current-thread runtime's handle drives nothing unless someone is inside
/// its `block_on`, and such a call would never end.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context as _;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the runtime")
}

/// Every command but `is`, on the process's one runtime `rt`.
fn run(
    cli: &Cli,
    command: &Command,
    rt: &tokio::runtime::Runtime,
    clock: Clock,
) -> anyhow::Result<ExitCode> {
    let clock = &clock;
    match command {
        // (`main` answers it before any runtime starts.)
        Command::Is { role, no_tombstone } => Ok(cmd::is(cli, role, *no_tombstone, clock)),
        Command::PromoteLocal {
            join,
            check,
            lock_timeout,
        } => cmd::promote_local(cli, join, *check, *lock_timeout, rt, clock),
        Command::DemoteLocal {
            check,
            force,
            lock_timeout,
        } => cmd::demote_local(cli, *check, *force, *lock_timeout, rt, clock),
        Command::Snapshot { name } => cmd::snapshot(cli, name, rt, clock),
        Command::HandOver { before } => cmd::hand_over(cli, before, rt, clock),
        Command::WaitJoin { url, timeout } => {
            cmd::wait_join(cli, url.as_deref(), *timeout, rt, clock)
        }
        Command::RemoveLearner { member, api } => cmd::remove_learner(cli, member, api, rt, clock),
        Command::RemoveGhost { member, api } => cmd::remove_ghost(cli, member, api, rt, clock),
        Command::Status(api) => cmd::status(cli, api, rt, clock),
        Command::Watch(api) => cmd::watch(cli, api, rt, clock.clone()),
    }
}

/// Logging to stderr, filtered by `FLEET_ROLE_LOG` (`info` unless set);
/// only `watch` logs, and only once the host is known to be its Node.
fn init_logging() {
    use tracing_subscriber::{EnvFilter, fmt};
    let filter =
        EnvFilter::try_from_env("FLEET_ROLE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // No ANSI: under systemd stderr goes to the journal, where escapes are noise
    // (and an injected escape in a logged value must not reach a terminal).
    fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
}
