//! `fleet-role`'s entry point: flags into settings, one command, errors
//! printed once at the edge, an explicit exit code.
//!
//! Exit codes: 0 done; 1 refused by a gate (nothing changed); 2 an error or a
//! failed swap (the message says what state it left and what to do next).
#![forbid(unsafe_code)]

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use controller::{
    cli::{Cli, Command, Format},
    cluster,
    config::{FileConfig, Settings, parse_duration},
    drive::Driver,
    enroll,
    output::{Printer, print_error},
    status,
};
use protocol::{NodeName, controller::plan};
use tokio::sync::watch;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = match &cli.command {
        Command::Swap { output, .. } | Command::Status { output } => *output,
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
            print_error(
                format,
                &anyhow::Error::new(e).context("starting the runtime"),
            );
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            print_error(format, &e);
            ExitCode::from(2)
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

/// SIGTERM (systemd, Kubernetes) and SIGINT (a terminal) end the process at
/// the next safe point between two actions; the Lease then lapses and a new
/// run resumes the swap where the cluster shows it.
fn shutdown_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler can be installed");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        let _ = tx.send(true);
    });
    rx
}

fn node(raw: &str, flag: &str) -> anyhow::Result<NodeName> {
    NodeName::parse(raw).with_context(|| flag.to_string())
}

async fn run(cli: Cli) -> anyhow::Result<u8> {
    let file = FileConfig::load(cli.config.as_deref())?;
    let mut settings = Settings::resolve(file, cli.identity.clone())?;
    match &cli.command {
        Command::Swap {
            out,
            incoming,
            dry_run,
            timeout,
            output,
        } => {
            let out = node(out, "--out")?;
            let incoming = node(incoming, "--in")?;
            if out == incoming {
                anyhow::bail!("--out and --in name the same Node {out}");
            }
            if let Some(t) = timeout {
                settings = settings.with_step_timeout(parse_duration(t)?);
            }
            let client = cluster::client(cli.kubeconfig.as_deref()).await?;
            let mut driver = Driver::new(client, settings, shutdown_signal());
            let mut printer = Printer::new(*output);
            if *dry_run {
                // Reads only: nothing below writes.
                let obs = driver.observe().await?;
                let p = plan(&obs.view, out.as_str(), incoming.as_str());
                printer.plan(out.as_str(), incoming.as_str(), &p);
                return Ok(if protocol::controller::all_pass(&p.gates) {
                    0
                } else {
                    1
                });
            }
            let ending = driver.swap(out, incoming, &mut printer).await?;
            let (word, message) = ending.summary();
            printer.result(word, ending.exit_code(), &message);
            Ok(ending.exit_code())
        }
        Command::Status { output } => {
            let client = cluster::client(cli.kubeconfig.as_deref()).await?;
            let driver = Driver::new(client, settings.clone(), watch::channel(false).1);
            let obs = driver.observe().await?;
            match output {
                Format::Text => println!("{}", status::text(&obs.view, &settings)),
                Format::Json => println!("{}", status::json(&obs.view, &settings)),
            }
            Ok(0)
        }
        Command::Run => {
            let client = cluster::client(cli.kubeconfig.as_deref()).await?;
            let mut driver = Driver::new(client, settings, shutdown_signal());
            let mut printer = Printer::new(Format::Text);
            driver.run(&mut printer).await?;
            Ok(0)
        }
        Command::Enroll(args) => {
            let client = || async { Ok(cluster::client(cli.kubeconfig.as_deref()).await?) };
            enroll::command::enroll(settings.names(), args, client).await
        }
        Command::Unenroll(args) => {
            let client = || async { Ok(cluster::client(cli.kubeconfig.as_deref()).await?) };
            enroll::command::unenroll(settings.names(), args, client).await
        }
        Command::Pause | Command::Resume => {
            let paused = matches!(cli.command, Command::Pause);
            let client = cluster::client(cli.kubeconfig.as_deref()).await?;
            let driver = Driver::new(client, settings.clone(), watch::channel(false).1);
            driver.actor().set_paused(paused).await?;
            println!(
                "{}",
                if paused {
                    format!(
                        "paused ({}): no new swap starts, and a running swap halts at its next safe point",
                        settings.lease_ref()
                    )
                } else {
                    "resumed: a halted swap goes on".to_string()
                }
            );
            Ok(0)
        }
    }
}
