//! `fleet-role-actuator`'s entry point: flags into settings, one command,
//! errors printed once at the edge, an explicit exit code.
//!
//! Exit codes: [`protocol::exit::Exit`], shared with the controller and
//! listed in the help; `is` answers 0 or 1 only.
#![forbid(unsafe_code)]

use std::{process::ExitCode, sync::Arc};

use actuator::{
    cli::{ApiArgs, Cli, Command},
    cluster::{self, Candidates},
    config::{FileConfig, Overrides, Settings},
    local::{self, Switch},
    metrics::Metrics,
    output::{Format, print, print_error},
    report, watch,
};
use anyhow::Context;
use clap::Parser;
use protocol::{
    JoinUrl, Role, SwapId,
    controller::one_line,
    exit::{Exit, Marked},
};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = cli.output;
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let exit = exit_of(&e);
            print_error(format, &e, exit);
            ExitCode::from(exit.code())
        }
    }
}

/// The outcome an error stands for: its mark; a damaged role file is a
/// refusal (nothing is changed while it names no role); anything else a
/// failure that left the host safe (every call out is bounded, and a
/// switch that stops part-way is marked).
fn exit_of(e: &anyhow::Error) -> Exit {
    if let Some(m) = e.downcast_ref::<Marked>() {
        return m.0;
    }
    match e.downcast_ref::<host::Error>() {
        Some(host::Error::BadRoleFile { .. }) => Exit::Refused,
        _ => Exit::FailedSafe,
    }
}

/// Marks an error as the caller's: a flag, a value or a file it names.
fn usage(e: impl Into<anyhow::Error>) -> anyhow::Error {
    e.into().context(Marked(Exit::Usage))
}

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

fn settings(
    cli: &Cli,
    api: Option<&ApiArgs>,
    lock_timeout: Option<u64>,
) -> anyhow::Result<Settings> {
    let file = FileConfig::load(cli.config.as_deref()).map_err(usage)?;
    let o = Overrides {
        node: cli.node.clone(),
        root: cli.root.clone(),
        api: api.map(|a| a.api.clone()).unwrap_or_default(),
        ca_file: api.and_then(|a| a.ca_file.clone()),
        token_file: api.and_then(|a| a.token_file.clone()),
        lock_timeout_secs: lock_timeout,
    };
    Settings::resolve(file, o).map_err(usage)
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let format = cli.output;
    match &cli.command {
        Command::Is { role, no_tombstone } => {
            // An ExecCondition: any doubt, including a bad setting, is "no" (exit 1),
            // so systemd skips the unit rather than failing it.
            let Ok(role) = Role::parse(role) else {
                return Ok(ExitCode::from(1));
            };
            let root = cli.root.clone().unwrap_or_else(|| "/".into());
            let host = host::Host::new(root, cli.node.clone().unwrap_or_default());
            let yes = local::is(&host, role, *no_tombstone);
            if format == Format::Json {
                print(
                    format,
                    &[],
                    &serde_json::json!({ "ok": true, "role": role, "matches": yes }),
                );
            }
            Ok(ExitCode::from(if yes { 0 } else { 1 }))
        }
        Command::PromoteLocal {
            join,
            check,
            lock_timeout,
        } => {
            let join = JoinUrl::parse(join).map_err(usage)?;
            let s = settings(&cli, None, *lock_timeout)?;
            local::switch(
                &s.host(),
                &Switch::Promote(join),
                *check,
                s.lock_timeout,
                format,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::DemoteLocal {
            check,
            force,
            lock_timeout,
        } => {
            let s = settings(&cli, None, *lock_timeout)?;
            local::switch(
                &s.host(),
                &Switch::Demote { force: *force },
                *check,
                s.lock_timeout,
                format,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Snapshot { name } => {
            let name = SwapId::parse(name).map_err(usage)?;
            let s = settings(&cli, None, None)?;
            local::snapshot(&s.host(), &name, s.lock_timeout, format)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Status(api) => {
            let s = settings(&cli, Some(api), None)?;
            let local = local::local_status(&s.host());
            let mut lines = local.lines();
            let mut remote = serde_json::Value::Null;
            if !s.api.is_empty() {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let candidates =
                    Candidates::new(s.api.clone(), s.ca_file.clone(), s.token_file.clone())
                        .map_err(usage)?;
                // Each candidate in turn, as the watcher moves on: an
                // etcd-only server's 503 as much as a refused connection.
                let r = rt
                    .block_on(candidates.first_answer(
                        |client| {
                            let (names, node) = (&s.names, s.node.as_str());
                            async move { report::read(&client, names, node).await }
                        },
                        |e| matches!(e, report::LoadError::Api(k) if cluster::moves_on(k)),
                    ))
                    .context("reading the report")?;
                // The report came from the API: whatever it holds is shown
                // escaped on one line, so a reason carrying a newline or a
                // terminal escape can neither forge a line nor drive the
                // terminal.
                lines.push(format!("report:       {}", report_line(r.as_ref())));
                remote = kubeview::time::with_times(
                    serde_json::to_value(&r)?,
                    &["startedAt", "updatedAt"],
                );
            }
            // The copy kept on the host, shown whatever it holds: a copy that
            // does not parse is what makes `watch` refuse to start.
            let (kept, kept_error) = match report::read_local(&s.host().paths) {
                Ok(r) => {
                    lines.push(format!("kept report:  {}", report_line(r.as_ref())));
                    (serde_json::to_value(&r)?, None)
                }
                Err(e) => {
                    // (`local` counts it as degraded.)
                    lines.push(format!("kept report:  {}", one_line(&e.to_string())));
                    (serde_json::Value::Null, Some(e.to_string()))
                }
            };
            let expiry = s.token_file.as_deref().and_then(cluster::token_expiry);
            if let Some(exp) = expiry {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
                let at = kubeview::time::rfc3339(Some(exp));
                lines.push(format!(
                    "credential:   lapses at {}{}",
                    at.as_str().map_or_else(|| exp.to_string(), String::from),
                    cluster::expiry_warning(exp, now)
                        .map(|w| format!("; WARNING: {w}"))
                        .unwrap_or_default()
                ));
            }
            let exit = if local.degraded.is_empty() {
                Exit::Done
            } else {
                Exit::Degraded
            };
            print(
                format,
                &lines,
                &serde_json::json!({
                    "ok": exit == Exit::Done,
                    "exit": exit.code(),
                    "host": local,
                    "report": remote,
                    "report_kept": kept,
                    "report_kept_error": kept_error,
                    "credential_expires": kubeview::time::rfc3339(expiry),
                }),
            );
            Ok(ExitCode::from(exit.code()))
        }
        Command::Watch(api) => {
            let s = settings(&cli, Some(api), None)?;
            // A templated actuator.toml naming one Node on every host would
            // make each host carry out that Node's steps: refuse to start
            // unless the host itself says it is the configured Node.
            let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
            let addresses =
                host::addresses::LocalAddresses::read(std::path::Path::new("/proc/net"))
                    .context("reading this host's addresses")?;
            // The configured node is at fault, not the host: a usage error.
            host::identity::check(
                &s.host().paths,
                s.node.as_str(),
                hostname.as_deref(),
                &addresses,
            )
            .map_err(usage)?;
            init_logging();
            let candidates =
                Candidates::new(s.api.clone(), s.ca_file.clone(), s.token_file.clone())
                    .map_err(usage)?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()?;
            rt.block_on(async {
                let metrics = Arc::new(Metrics::new());
                // Off unless configured: most hosts need the report alone.
                if let Some(addr) = s.metrics_address {
                    let bound = metrics.clone().serve(addr).await?;
                    tracing::info!("serving /metrics and /healthz on {bound}");
                }
                let mut w = watch::Watcher::new(s)
                    .with_metrics(metrics)
                    .with_addresses(addresses);
                w.run(candidates, shutdown()).await
            })?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A report on one line, escaped (it may have come from the API, where a
/// reason carrying a newline or a terminal escape could forge a line or
/// drive the terminal), with its `seq`.
fn report_line(r: Option<&protocol::Report>) -> String {
    r.map_or("none".into(), |r| {
        one_line(&format!(
            "swap {} step {} {:?}{} (seq {})",
            r.swap.as_ref().map_or("-", |s| s.as_str()),
            r.step.as_str(),
            r.phase,
            r.reason
                .as_deref()
                .map(|x| format!(": {x}"))
                .unwrap_or_default(),
            r.seq
        ))
    })
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
