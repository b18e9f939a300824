//! `fleet-role-actuator`'s entry point: flags into settings, one function
//! per command, errors printed once at the edge, an explicit exit code.
//!
//! Exit codes: [`protocol::exit::Exit`], shared with the controller and
//! listed in the help; `is` answers 0 or 1 only.
//!
//! The program's edge: the one place that takes the machine's clock
//! ([`Clock::system`]) and hands it to what reads time.
#![forbid(unsafe_code)]

use std::{process::ExitCode, sync::Arc};

use actuator::{
    cli::{ApiArgs, Cli, Command},
    cluster::{self, Candidates},
    config::{self, Settings},
    local::{self, Switch},
    metrics::Metrics,
    output::{Format, print, print_error},
    report, watch,
};
use anyhow::Context;
use clap::Parser;
use clock::Clock;
use protocol::{
    JoinUrl, Role, SwapId,
    exit::{Exit, Marked},
    text::one_line,
};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = cli.output;
    let clock = Clock::system();
    let outcome = match &cli.command {
        // systemd's `ExecCondition=`: answered from the disk alone, with no
        // runtime (nothing there that could fail to start, or be slow to).
        Command::Is { role, no_tombstone } => Ok(is(&cli, role, *no_tombstone, &clock)),
        command => runtime().and_then(|rt| run(&cli, command, &rt, clock)),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            let exit = exit_of(&e);
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
        Command::Is { role, no_tombstone } => Ok(is(cli, role, *no_tombstone, clock)),
        Command::PromoteLocal {
            join,
            check,
            lock_timeout,
        } => promote_local(cli, join, *check, *lock_timeout, rt, clock),
        Command::DemoteLocal {
            check,
            force,
            lock_timeout,
        } => demote_local(cli, *check, *force, *lock_timeout, rt, clock),
        Command::Snapshot { name } => snapshot(cli, name, rt, clock),
        Command::HandOver { before } => hand_over(cli, before, rt, clock),
        Command::WaitJoin { url, timeout } => wait_join(cli, url.as_deref(), *timeout, rt, clock),
        Command::Status(api) => status(cli, api, rt, clock),
        Command::Watch(api) => watch(cli, api, rt, clock.clone()),
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

/// The settings of a command, any error in them the caller's.
fn settings(
    cli: &Cli,
    api: Option<&ApiArgs>,
    lock_timeout: Option<u64>,
) -> anyhow::Result<Settings> {
    Settings::from_flags(cli, api, lock_timeout).map_err(usage)
}

/// `is ROLE`: systemd's `ExecCondition=`. Any doubt, including a bad
/// setting, is "no" (exit 1), so systemd skips the unit rather than
/// failing it.
fn is(cli: &Cli, role: &str, no_tombstone: bool, clock: &Clock) -> ExitCode {
    let Ok(role) = Role::parse(role) else {
        return ExitCode::from(1);
    };
    let yes = local::is(&config::condition_host(cli, clock), role, no_tombstone);
    if cli.output == Format::Json {
        print(
            cli.output,
            &[],
            &serde_json::json!({ "ok": true, "role": role, "matches": yes }),
        );
    }
    ExitCode::from(if yes { 0 } else { 1 })
}

/// `promote-local --join URL`.
fn promote_local(
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

/// `demote-local`.
fn demote_local(
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

/// `snapshot --name NAME`.
fn snapshot(
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

/// `wait-join [--url URL] [--timeout SECS]`: a bounded wait for the server
/// k3s joins through, for a network wrapper started before k3s.
fn wait_join(
    cli: &Cli,
    url: Option<&str>,
    timeout: u64,
    rt: &tokio::runtime::Runtime,
    clock: &Clock,
) -> anyhow::Result<ExitCode> {
    let url = match url.filter(|u| !u.trim().is_empty()) {
        Some(u) => Some(JoinUrl::parse(u.trim()).map_err(usage)?),
        None => {
            let s = settings(cli, None, None)?;
            let paths = &s.host(clock, rt.handle()).paths;
            match host::join::server_unit(paths).or_else(|| host::join::agent_unit(paths)) {
                None => None,
                Some(c) => Some(
                    c.url()
                        .map_err(|why| usage(anyhow::anyhow!("{}: {why}", c.source())))?,
                ),
            }
        }
    };
    let Some(url) = url else {
        print(
            cli.output,
            &[
                "no join server is configured (the cluster's first server): nothing to wait for"
                    .into(),
            ],
            &serde_json::json!({ "ok": true, "url": null }),
        );
        return Ok(ExitCode::SUCCESS);
    };
    let bound = std::time::Duration::from_secs(timeout);
    let took = rt
        .block_on(actuator::join::wait_join(&url, bound, clock))
        .map_err(|why| anyhow::anyhow!("{why}; nothing was changed"))?;
    print(
        cli.output,
        &[format!(
            "{url} is reachable (after {} ms)",
            took.as_millis()
        )],
        &serde_json::json!({ "ok": true, "url": url.as_str(), "tookMs": took.as_millis() as u64 }),
    );
    Ok(ExitCode::SUCCESS)
}

/// `hand-over --before sleep|shutdown`: etcd's leadership moved off this
/// host's member, if it leads, before the host sleeps or k3s stops. A
/// suspend is no graceful stop: a leader that sleeps leaves the cluster
/// with no leader, and writes stalled, until the others' election timeout.
/// Nothing to do on a host that is no voter. A failure is said and the
/// host goes on (the units that run this never hold the sleep or the
/// shutdown back past their own bound).
fn hand_over(
    cli: &Cli,
    before: &str,
    rt: &tokio::runtime::Runtime,
    clock: &Clock,
) -> anyhow::Result<ExitCode> {
    let s = settings(cli, None, None)?;
    let host = s.host(clock, rt.handle());
    let voter = host.role()? == Some(Role::Server) && host.member_may_vote();
    let (line, moved) = if voter {
        match rt.block_on(actuator::leadership::hand_over(&s.etcd, clock))
            .map_err(|why| anyhow::anyhow!("before {before}: {why}; the host goes on, and etcd elects a new leader after its election timeout"))?
        {
            actuator::leadership::HandOver::NotLeader => {
                (format!("before {before}: this member does not lead etcd; nothing to hand over"), None)
            }
            actuator::leadership::HandOver::Moved { to, took } => (
                format!(
                    "before {before}: etcd leadership moved to {to} in {} ms",
                    took.as_millis()
                ),
                Some(to.to_string()),
            ),
        }
    } else {
        (
            format!("before {before}: this host holds no etcd voter; nothing to hand over"),
            None,
        )
    };
    print(
        cli.output,
        &[line],
        &serde_json::json!({ "ok": true, "before": before, "movedTo": moved }),
    );
    Ok(ExitCode::SUCCESS)
}

/// `status`: the host as read here, with an API its report, and the
/// credential's lapse; exit 5 when something is degraded.
fn status(
    cli: &Cli,
    api: &ApiArgs,
    rt: &tokio::runtime::Runtime,
    clock: &Clock,
) -> anyhow::Result<ExitCode> {
    let format = cli.output;
    let s = settings(cli, Some(api), None)?;
    let local = local::local_status(&s.host(clock, rt.handle()));
    let mut lines = local.lines();
    let mut remote = serde_json::Value::Null;
    if !s.api.is_empty() {
        let r = api_report(&s, rt)?;
        // The report came from the API: whatever it holds is shown
        // escaped on one line, so a reason carrying a newline or a
        // terminal escape can neither forge a line nor drive the
        // terminal.
        lines.push(format!("report:       {}", report_line(r.as_ref())));
        remote = kubeview::time::with_times(serde_json::to_value(&r)?, &["startedAt", "updatedAt"]);
    }
    // The copy kept on the host, shown whatever it holds: a copy that
    // does not parse is what makes `watch` refuse to start.
    let (kept, kept_error) = match report::read_local(&s.host(clock, rt.handle()).paths) {
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
    let k3s = s.host(clock, rt.handle()).k3s_version();
    lines.push(match &k3s {
        Ok(v) => format!(
            "k3s release:  {}{}",
            v.text,
            v.warning()
                .map(|w| format!("; WARNING: {w}"))
                .unwrap_or_default()
        ),
        Err(e) => format!("k3s release:  unknown ({})", one_line(&e.to_string())),
    });
    let k3s = match k3s {
        Ok(v) => serde_json::json!({"version": v.text, "supported": v.supported()}),
        Err(e) => serde_json::json!({"error": e.to_string()}),
    };
    let expiry = s.token_file.as_deref().and_then(cluster::token_expiry);
    if let Some(exp) = expiry {
        let at = kubeview::time::rfc3339(Some(exp));
        lines.push(format!(
            "credential:   lapses at {}{}",
            at.as_str().map_or_else(|| exp.to_string(), String::from),
            cluster::expiry_warning(exp, clock.unix_secs())
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
            "k3s": k3s,
        }),
    );
    Ok(ExitCode::from(exit.code()))
}

/// The host's report as the API holds it, read through each candidate in
/// turn, as the watcher moves on: an etcd-only server's 503 as much as a
/// refused connection.
fn api_report(
    s: &Settings,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<Option<protocol::Report>> {
    let candidates =
        Candidates::new(s.api.clone(), s.ca_file.clone(), s.token_file.clone()).map_err(usage)?;
    let r = rt
        .block_on(candidates.first_answer(
            |client| {
                let (names, node) = (&s.names, s.node.as_str());
                async move {
                    report::Published::default()
                        .read(&client, names, node)
                        .await
                }
            },
            |e| matches!(e, report::LoadError::Api(k) if cluster::moves_on(k)),
        ))
        .context("reading the report")?;
    Ok(r)
}

/// `watch`: the host checked to be the configured Node, then the watcher
/// run until SIGTERM.
fn watch(
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
    init_logging();
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
        let mut w = watch::Watcher::with_host(s, host, clock)
            .with_metrics(metrics)
            .with_addresses(addresses);
        w.run(candidates, shutdown()).await
    })?;
    Ok(ExitCode::SUCCESS)
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
