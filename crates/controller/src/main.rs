//! `fleet-role`'s entry point: flags into settings, one command, errors
//! printed once at the edge, an explicit exit code.
//!
//! Exit codes: [`protocol::exit::Exit`], shared with the actuator and listed
//! in the help.
#![forbid(unsafe_code)]

use fleetdecide::SwapRecord;
use std::{process::ExitCode, sync::Arc, time::Duration};

use anyhow::Context;
use clap::Parser;
use controller::{
    cli::{Cli, Command, Format},
    cluster,
    config::{FileConfig, Settings, parse_duration_of},
    drive::Driver,
    enroll, failover, manifests,
    metrics::Metrics,
    output::{Printer, print_error},
    service, status, uninstall,
    watch::FleetWatch,
};
use fleetdecide::{AbortPlan, abort_plan};
use protocol::exit::{Exit, Marked};

/// How long the watches may take to list everything once at start.
const SYNC_BOUND: Duration = Duration::from_secs(60);
/// How long one refresh of `status --watch` may take.
const REFRESH_BOUND: Duration = Duration::from_secs(30);

/// Prints the fleet's status; its exit says whether anything is degraded.
fn show_status(output: Format, view: &fleetdecide::FleetView, settings: &Settings) -> Exit {
    match output {
        Format::Text => println!("{}", status::text(view, settings)),
        Format::Json => println!("{}", status::json(view, settings)),
    }
    if fleetdecide::degraded(view).is_empty() {
        Exit::Done
    } else {
        Exit::Degraded
    }
}
use fleetdecide::plan;
use protocol::NodeName;
use tokio::sync::watch;

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
    match runtime.block_on(run(cli)) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(e) => {
            let exit = exit_of(&e);
            print_error(format, &e, exit);
            ExitCode::from(exit.code())
        }
    }
}

/// The outcome an error stands for: its mark, else a failure that left
/// the cluster safe (every call out is bounded, and an unmarked error
/// happens between two safe points).
fn exit_of(e: &anyhow::Error) -> Exit {
    if let Some(m) = e.downcast_ref::<Marked>() {
        return m.0;
    }
    // The kubeconfig named or inferred is the caller's.
    match e.downcast_ref::<cluster::ClusterError>() {
        Some(
            cluster::ClusterError::Kubeconfig { .. }
            | cluster::ClusterError::Context { .. }
            | cluster::ClusterError::Infer(_),
        ) => Exit::Usage,
        _ => Exit::FailedSafe,
    }
}

/// Marks an error as the caller's: a flag, a value or a config file.
fn usage(e: impl Into<anyhow::Error>) -> anyhow::Error {
    e.into().context(Marked(Exit::Usage))
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
    NodeName::parse(raw)
        .with_context(|| flag.to_string())
        .map_err(usage)
}

/// The settings of this run: the file, then the flags. The machine's clock
/// is read from here on through [`Settings::clock`], set here at the edge.
fn settings(cli: &Cli) -> anyhow::Result<Settings> {
    let file = FileConfig::load(cli.config.as_deref()).map_err(usage)?;
    let settings = Settings::resolve(file, cli.identity.clone()).map_err(usage)?;
    Ok(settings.with_clock(clock::Clock::system()))
}

async fn run(cli: Cli) -> anyhow::Result<Exit> {
    let settings = settings(&cli)?;
    let kubeconfig = cluster::Source {
        kubeconfig: cli.kubeconfig.as_deref(),
        context: cli.context.as_deref(),
    };
    match &cli.command {
        Command::Swap {
            out,
            incoming,
            dry_run,
            in_window,
            timeout,
            force,
            output,
        } => {
            let settings = settings
                .with_timeout_flag(timeout.as_deref())
                .map_err(usage)?
                .with_force_flag(*force);
            let swap = SwapArgs {
                out: node(out, "--out")?,
                incoming: node(incoming, "--in")?,
                dry_run: *dry_run,
                in_window: *in_window,
                output: *output,
            };
            swap_command(kubeconfig, settings, swap).await
        }
        Command::Grow {
            incoming,
            dry_run,
            output,
        } => {
            let hosts = resize_hosts(incoming, "--in")?;
            resize_command(
                kubeconfig,
                settings,
                Resize::Grow,
                &hosts,
                *dry_run,
                *output,
            )
            .await
        }
        Command::Shrink {
            out,
            dry_run,
            force,
            output,
        } => {
            let hosts = resize_hosts(out, "--out")?;
            resize_command(
                kubeconfig,
                settings.with_force_flag(*force),
                Resize::Shrink,
                &hosts,
                *dry_run,
                *output,
            )
            .await
        }
        Command::Status {
            output,
            watch: keep_watching,
            interval,
        } => {
            let interval = parse_duration_of("--interval", interval).map_err(usage)?;
            status_command(
                kubeconfig,
                settings,
                *output,
                keep_watching.then_some(interval),
            )
            .await
        }
        Command::Run {
            dry_run,
            metrics_address,
        } => {
            let settings = settings
                .with_metrics_address_flag(metrics_address.as_deref())
                .map_err(usage)?;
            run_command(kubeconfig, settings, *dry_run).await
        }
        Command::Abort { output } => abort_command(kubeconfig, settings, *output).await,
        Command::Enroll(args) => {
            let client = || async { Ok(cluster::client(kubeconfig).await?) };
            enroll::command::enroll(settings.names(), args, client).await
        }
        Command::Manifests { which } => {
            print!("{}", manifests::render(*which, &settings));
            Ok(Exit::Done)
        }
        Command::Uninstall { dry_run } => {
            let client = cluster::client(kubeconfig).await?;
            uninstall::command(&client, &settings, *dry_run).await
        }
        Command::Unenroll(args) => {
            let client = || async { Ok(cluster::client(kubeconfig).await?) };
            enroll::command::unenroll(settings.names(), args, client).await
        }
        Command::Pause => pause_command(kubeconfig, settings, true).await,
        Command::Resume => pause_command(kubeconfig, settings, false).await,
    }
}

/// `swap`'s flags, checked.
struct SwapArgs {
    out: NodeName,
    incoming: NodeName,
    dry_run: bool,
    in_window: bool,
    output: Format,
}

/// `fleet-role swap`: one swap driven to its end, or its plan (`--dry-run`).
async fn swap_command(
    kubeconfig: cluster::Source<'_>,
    settings: Settings,
    args: SwapArgs,
) -> anyhow::Result<Exit> {
    let SwapArgs {
        out,
        incoming,
        dry_run,
        in_window,
        output,
    } = args;
    if out == incoming {
        return Err(usage(anyhow::anyhow!(
            "--out and --in name the same Node {out}"
        )));
    }
    if in_window && let Some(why) = settings.window_closed_now().map_err(usage)? {
        return Err(anyhow::anyhow!("swap refused: {why}").context(Marked(Exit::Refused)));
    }
    let (client, watching) = cluster::clients(kubeconfig).await?;
    let driver = Driver::new(client, settings.clone(), shutdown_signal());
    let mut printer = Printer::new(output, settings.clock.clone());
    if dry_run {
        // Reads only: nothing below writes.
        let obs = driver.observe().await?;
        let p = plan(&obs.view, out.as_str(), incoming.as_str());
        printer.plan(out.as_str(), incoming.as_str(), &p);
        return Ok(plan_exit(&p));
    }
    let mut driver = watched(driver, &watching, &settings).await?;
    let ending = driver.swap(out, incoming, &mut printer).await?;
    let (word, message) = ending.summary();
    printer.result(word, ending.exit_code(), &message);
    Ok(ending.exit())
}

/// A dry run's exit: 0 when every gate of the plan passes, 1 when one is
/// shut.
fn plan_exit(p: &fleetdecide::Plan) -> Exit {
    if fleetdecide::all_pass(&p.gates) {
        Exit::Done
    } else {
        Exit::Refused
    }
}

/// `driver` with the fleet's watches started and listed once, as every
/// command that writes drives from them.
async fn watched(
    driver: Driver,
    watching: &kube::Client,
    settings: &Settings,
) -> anyhow::Result<Driver> {
    let fleet = Arc::new(FleetWatch::start(watching, settings));
    fleet.wait_synced(SYNC_BOUND).await?;
    Ok(driver.with_watch(fleet))
}

/// How long the next host of a grow or shrink waits for the fleet to
/// settle after the change before it (the servers' reports of etcd's
/// members, a voter's readiness) before its gates are asked anyway.
const SETTLE_BOUND: Duration = Duration::from_secs(180);

/// Which way `resize_command` changes the voter count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resize {
    Grow,
    Shrink,
}

/// `grow`'s or `shrink`'s hosts, checked: each a Node name, none twice.
fn resize_hosts(names: &[String], flag: &str) -> anyhow::Result<Vec<NodeName>> {
    let mut hosts: Vec<NodeName> = vec![];
    for n in names {
        let n = node(n, flag)?;
        if hosts.contains(&n) {
            return Err(usage(anyhow::anyhow!("{flag} names {n} twice")));
        }
        hosts.push(n);
    }
    Ok(hosts)
}

/// `fleet-role grow` and `fleet-role shrink`: the voter count changed one
/// host at a time, each its own change with its own Lease and gates (those
/// of the first counting every host queued after it), or the plan of all
/// of them (`--dry-run`, read only).
async fn resize_command(
    kubeconfig: cluster::Source<'_>,
    settings: Settings,
    way: Resize,
    hosts: &[NodeName],
    dry_run: bool,
    output: Format,
) -> anyhow::Result<Exit> {
    let (client, watching) = cluster::clients(kubeconfig).await?;
    let driver = Driver::new(client, settings.clone(), shutdown_signal());
    let mut printer = Printer::new(output, settings.clock.clone());
    let names: Vec<&str> = hosts.iter().map(NodeName::as_str).collect();
    let what = match way {
        Resize::Grow => "grow",
        Resize::Shrink => "shrink",
    };
    if dry_run {
        // Reads only: nothing below writes.
        let obs = driver.observe().await?;
        let p = match way {
            Resize::Grow => fleetdecide::plan_grow(&obs.view, &names),
            Resize::Shrink => fleetdecide::plan_shrink(&obs.view, &names),
        };
        printer.resize_plan(what, &names, &p);
        return Ok(plan_exit(&p));
    }
    let mut driver = watched(driver, &watching, &settings).await?;
    for (k, host) in hosts.iter().enumerate() {
        let (out, incoming, verb) = match way {
            Resize::Grow => (None, Some(host.clone()), "promote"),
            Resize::Shrink => (Some(host.clone()), None, "step down"),
        };
        printer.line(
            &format!("{what} {} of {}: {verb} {host}", k + 1, hosts.len()),
            serde_json::json!({"move": what, "host": host, "of": hosts.len()}),
        );
        let queued = hosts[k + 1..].to_vec();
        if k > 0 {
            driver
                .settle(
                    out.clone(),
                    incoming.clone(),
                    queued.clone(),
                    SETTLE_BOUND,
                    &mut printer,
                )
                .await?;
        }
        let ending = driver.change(out, incoming, queued, &mut printer).await?;
        if !matches!(ending, controller::drive::Ending::Done { .. }) {
            let (word, mut message) = ending.summary();
            if hosts.len() > 1 {
                // Resuming this host alone could leave an even count: the
                // command names the ones left with it.
                let flag = match way {
                    Resize::Grow => "--in",
                    Resize::Shrink => "--out",
                };
                let rest: Vec<String> = names[k..].iter().map(|n| format!("{flag} {n}")).collect();
                message.push_str(&format!(
                    "; {k} of the {} hosts were done before it, so the voter count may be even: once this one is resolved, `fleet-role {what} {}` goes on with the hosts left (not this one alone)",
                    hosts.len(),
                    rest.join(" ")
                ));
            }
            printer.result(word, ending.exit_code(), &message);
            return Ok(ending.exit());
        }
        if let controller::drive::Ending::Done {
            warning: Some(w), ..
        } = &ending
        {
            printer.line(&format!("{host}: {w}"), serde_json::json!({"warning": w}));
        }
    }
    let obs = driver.observe().await?;
    printer.result(
        "done",
        Exit::Done.code(),
        &format!(
            "the {what} is complete: {}",
            fleetdecide::voting_now(&obs.view).describe()
        ),
    );
    Ok(Exit::Done)
}

/// `fleet-role status`: the fleet once, or every `interval` until Ctrl-C
/// (`--watch`).
async fn status_command(
    kubeconfig: cluster::Source<'_>,
    settings: Settings,
    output: Format,
    interval: Option<Duration>,
) -> anyhow::Result<Exit> {
    let client = cluster::client(kubeconfig).await?;
    let driver = Driver::new(client, settings.clone(), watch::channel(false).1);
    let Some(interval) = interval else {
        let obs = driver.observe().await?;
        return Ok(show_status(output, &obs.view, &settings));
    };
    let mut stop = shutdown_signal();
    // What the last refresh said, for the exit at Ctrl-C.
    let mut last = Exit::Done;
    loop {
        // Bounded: a refresh that hangs on the API is said, and the next
        // one tried; Ctrl-C ends it at once.
        let refresh = tokio::select! {
            _ = stop.changed() => return Ok(last),
            r = tokio::time::timeout(REFRESH_BOUND, driver.observe()) => r,
        };
        last = match refresh {
            Ok(Ok(obs)) => {
                if output == Format::Text {
                    println!(
                        "── {}",
                        kubeview::time::at_second(settings.clock.unix_secs())
                    );
                }
                show_status(output, &obs.view, &settings)
            }
            Ok(Err(e)) => {
                print_error(output, &e, exit_of(&e));
                exit_of(&e)
            }
            Err(_) => {
                let e = anyhow::anyhow!(
                    "reading the cluster took over {} s; trying again",
                    REFRESH_BOUND.as_secs()
                );
                print_error(output, &e, Exit::FailedSafe);
                Exit::FailedSafe
            }
        };
        tokio::select! {
            _ = stop.changed() => return Ok(last),
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

/// `fleet-role run`: the service, swapping by policy under leader election
/// (or only saying what it would do, `--dry-run`).
async fn run_command(
    kubeconfig: cluster::Source<'_>,
    settings: Settings,
    dry_run: bool,
) -> anyhow::Result<Exit> {
    let shutdown = shutdown_signal();
    let mut servers = failover::Servers::new(&settings.api_servers);
    let mut printer = Printer::new(Format::Text, settings.clock.clone());
    let mut served: Option<Arc<Metrics>> = None;
    let mut served_sessions = 0u32;
    let mut failures = 0u32;
    loop {
        let clients = cluster::connect_at(kubeconfig, servers.current()).await?;
        let metrics = match &served {
            Some(m) => m.clone(),
            None => {
                if let Some(w) = clients.credential.warning(settings.clock.unix_secs()) {
                    tracing::warn!("{w}");
                }
                let m = Arc::new(Metrics::new().with_credential(clients.credential.clone()));
                if let Some(addr) = settings.metrics_address {
                    let bound = m.clone().serve(addr).await?;
                    printer.line(
                        &format!("serving /metrics, /healthz and /readyz on {bound}"),
                        serde_json::json!({"metrics": bound.to_string()}),
                    );
                }
                served = Some(m.clone());
                m
            }
        };
        let session = failover::Session::start(
            clients.requests.clone(),
            shutdown.clone(),
            servers.len() > 1,
        );
        // The labels are judged when the operator starts `run`, not again
        // at each move to another API server: any `patch nodes` holder can
        // edit them, and a failover must not become an exit. (`run_view`
        // keeps an unlabelled voter from being replaced meanwhile.)
        let first = served_sessions == 0;
        served_sessions += 1;
        let ended = run_session(
            &settings,
            clients,
            metrics,
            session.stop(),
            if first { Start::First } else { Start::Failover },
            dry_run,
            &mut printer,
        )
        .await;
        let moved = session.end().await;
        if *shutdown.borrow() || servers.len() == 1 || (ended.is_ok() && !moved) {
            return ended;
        }
        // Another server to go to: whatever ended this session (its
        // server stopped serving, or an error through it) moves on.
        if let Err(e) = &ended {
            tracing::warn!("{e:#}");
        }
        // A server that served until its probe failed starts the count
        // again: only sessions that end in errors one after another back off.
        if moved {
            failures = 0;
        }
        failures += 1;
        let from = servers.shown();
        let next = servers.rotate();
        printer.line(
            &format!("the API server {from} stopped serving; moving to {next}"),
            serde_json::json!({"api_server": next}),
        );
        // A whole round of failed servers backs off, up to 10 s.
        if (failures as usize).is_multiple_of(servers.len()) {
            let wait = Duration::from_millis(500 * u64::from(failures.min(20)));
            let mut stop = shutdown.clone();
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

/// Which session of a `run` process this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// The first: the operator (or the service manager) started `run`.
    First,
    /// A later one, through another API server after a failover.
    Failover,
}

/// One session of `run` through one API server, until `stop`.
async fn run_session(
    settings: &Settings,
    clients: cluster::Clients,
    metrics: Arc<Metrics>,
    stop: watch::Receiver<bool>,
    start: Start,
    dry_run: bool,
    printer: &mut Printer,
) -> anyhow::Result<Exit> {
    let cluster::Clients {
        requests: client,
        watches: watching,
        ..
    } = clients;
    let fleet = Arc::new(FleetWatch::start(&watching, settings));
    fleet.wait_synced(SYNC_BOUND).await?;
    metrics.set_ready(true);
    let shutdown = stop;
    let mut driver = Driver::new(client.clone(), settings.clone(), shutdown.clone())
        .with_watch(fleet)
        .with_metrics(metrics);
    if dry_run {
        if let Err(e) = driver.check_eligibility().await {
            printer.line(&format!("dry run: {e:#}"), serde_json::json!({}));
        }
        driver.run(printer, true).await?;
        return Ok(Exit::Done);
    }
    match start {
        Start::First => driver.check_eligibility().await?,
        Start::Failover => {
            if let Err(e) = driver.check_eligibility().await {
                tracing::warn!(
                    "{e:#}; going on after the failover (no ineligible voter is replaced unless replace_ineligible)"
                );
            }
        }
    }
    service::lead(&mut driver, client, settings, shutdown, printer).await?;
    Ok(Exit::Done)
}

/// `fleet-role abort`: the recorded swap wound down, or finished when it is
/// past the point of no return; a swap another process holds is told.
async fn abort_command(
    kubeconfig: cluster::Source<'_>,
    settings: Settings,
    output: Format,
) -> anyhow::Result<Exit> {
    let (client, watching) = cluster::clients(kubeconfig).await?;
    let driver = Driver::new(client.clone(), settings.clone(), shutdown_signal());
    let mut printer = Printer::new(output, settings.clock.clone());
    let obs = driver.observe().await?;
    let plan = abort_plan(&obs.view);
    let Some(rec) = obs.view.lease.as_ref().and_then(|l| l.recorded_swap()) else {
        printer.result(
            "nothing",
            Exit::Done.code(),
            "no unfinished swap is recorded on the regrade Lease: nothing to abort",
        );
        return Ok(Exit::Done);
    };
    let l = obs
        .view
        .lease
        .as_ref()
        .expect("a recorded swap is on a Lease");
    let said = match &plan {
        AbortPlan::Nothing => unreachable!("a swap is recorded"),
        AbortPlan::WindDown => format!(
            "swap {} ({}): winding it down to the cluster as it was",
            rec.id,
            fleetdecide::halves(rec.out.as_ref(), rec.incoming.as_ref())
        ),
        AbortPlan::WindingDown => format!(
            "swap {} is already winding down to the cluster as it was",
            rec.id
        ),
        AbortPlan::Finish { why } => format!(
            "swap {} is past the point of no return ({why}): the nearest safe point is its end, so it is finished, not undone",
            rec.id
        ),
    };
    printer.line(&said, serde_json::json!({"plan": plan}));
    if l.is_held(obs.view.now) {
        // Another process drives it: it is told, not raced.
        let holder = l.instance.clone().unwrap_or_default();
        if plan == AbortPlan::WindDown {
            let read = obs.lease.as_ref().expect("a held Lease was read");
            driver
                .actor()
                .set_stopping(read, &fleetdecide::abort_note())
                .await
                .context("the swap moved on while it was judged; run `fleet-role abort` again")?;
        }
        printer.result(
            "asked",
            Exit::Done.code(),
            &format!(
                "the controller holding it (instance {}) {}; `fleet-role status` shows it",
                fleetdecide::one_line(&holder),
                match plan {
                    AbortPlan::Finish { .. } => "goes on to its end",
                    _ => "winds it down at its next decision",
                }
            ),
        );
        return Ok(Exit::Done);
    }
    let mut driver = watched(driver, &watching, &settings).await?;
    let ending = driver.abort(rec.out, rec.incoming, &mut printer).await?;
    let (word, message) = ending.summary();
    // Wound down is what an abort asks for.
    let exit = match ending {
        controller::drive::Ending::WoundDown { .. } | controller::drive::Ending::Done { .. } => {
            Exit::Done
        }
        _ => ending.exit(),
    };
    printer.result(word, exit.code(), &message);
    Ok(exit)
}

/// `fleet-role pause` (`paused`) and `resume`: the flag on the Lease.
async fn pause_command(
    kubeconfig: cluster::Source<'_>,
    settings: Settings,
    paused: bool,
) -> anyhow::Result<Exit> {
    let client = cluster::client(kubeconfig).await?;
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
    Ok(Exit::Done)
}
