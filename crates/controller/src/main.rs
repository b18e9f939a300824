//! `fleet-role`'s entry point: flags into settings, one command, errors
//! printed once at the edge, an explicit exit code. The commands' bodies
//! are in [`cmd`], one file each.
//!
//! Exit codes: [`protocol::exit::Exit`], shared with the actuator and listed
//! in the help.
#![forbid(unsafe_code)]

mod cmd;

use std::process::ExitCode;

use clap::Parser;
use controller::{
    cli::{Cli, Command, Format},
    output::print_error,
};
use protocol::exit::Exit;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = match &cli.command {
        Command::Swap { output, .. }
        | Command::Status { output, .. }
        | Command::Abort { output } => *output,
        _ => Format::Text,
    };
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            let e = anyhow::Error::new(e).context("starting the runtime");
            print_error(format, &e, Exit::FailedSafe);
            return ExitCode::from(Exit::FailedSafe.code());
        }
    };
    match runtime.block_on(cmd::run(cli)) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(e) => {
            let exit = e.exit();
            print_error(format, &e.into_error(), exit);
            ExitCode::from(exit.code())
        }
    }
}

fn init_logging() {
    use tracing_subscriber::{EnvFilter, fmt};
    let filter =
        EnvFilter::try_from_env("FLEET_ROLE_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    // No ANSI: a value from the API must never reach a terminal as an escape.
    fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
}
