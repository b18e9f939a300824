//! `fleet-role`'s commands, one file each, and what they share: the
//! settings of a run, the checked Node names, the shutdown signal and the
//! watches every writing command drives from.
//!
//! `main` parses the flags, hands them to [`run`], and turns its outcome
//! into the exit code; nothing here prints an error (the edge does, once).

mod abort;
mod failure;
mod pause;
mod resize;
mod run;
mod status;
mod swap;

use std::{sync::Arc, time::Duration};

use controller::{
    bundle,
    cli::{Cli, Command},
    cluster, cluster_ca,
    config::{FileConfig, Settings, parse_duration_of},
    drive::Driver,
    enroll, manifests, uninstall,
    watch::FleetWatch,
};
use protocol::{NodeName, exit::Exit};
use tokio::sync::watch;

pub(crate) use self::failure::{Failure, Outcome};

/// How long the watches may take to list everything once at start.
const SYNC_BOUND: Duration = Duration::from_secs(60);

/// Runs the command `cli` names; its outcome, or the error that ended it.
pub(crate) async fn run(cli: Cli) -> Outcome {
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
            let swap = swap::SwapArgs {
                out: node(out, "--out")?,
                incoming: node(incoming, "--in")?,
                dry_run: *dry_run,
                in_window: *in_window,
                output: *output,
            };
            swap::command(kubeconfig, settings, swap).await
        }
        Command::Grow {
            incoming,
            dry_run,
            output,
        } => {
            let hosts = resize::hosts(incoming, "--in")?;
            resize::command(
                kubeconfig,
                settings,
                resize::Resize::Grow,
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
            let hosts = resize::hosts(out, "--out")?;
            resize::command(
                kubeconfig,
                settings.with_force_flag(*force),
                resize::Resize::Shrink,
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
            status::command(
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
            run::command(kubeconfig, settings, *dry_run).await
        }
        Command::Abort { output } => abort::command(kubeconfig, settings, *output).await,
        // The commands below live in the library, where their tests reach
        // them without a process.
        Command::Enroll(args) if args.bundle.is_some() => {
            let (config, client) = cluster_ca::admin(kubeconfig).await?;
            let dir = args.bundle.as_deref().expect("matched");
            let made = bundle::make(&config, &client, settings.names(), args, dir)
                .await
                .map_err(|e| {
                    if e.is_usage() {
                        usage(e)
                    } else {
                        Failure::Other(e.into())
                    }
                })?;
            println!("{}", bundle::summary(settings.names(), &made));
            Ok(Exit::Done)
        }
        Command::Kubeconfig(args) => {
            let (config, client) = cluster_ca::admin(kubeconfig).await?;
            let (shown, expires) = controller::kubeconfig::write(&config, &client, args)
                .await
                .map_err(|e| match e {
                    controller::kubeconfig::KubeconfigError::Server(_) => usage(e),
                    e => Failure::Other(e.into()),
                })?;
            let said = format!(
                "the controller's kubeconfig (ServiceAccount {}/{}), valid until {}; run `fleet-role kubeconfig` again before then to rotate it",
                manifests::CONTROLLER_NAMESPACE,
                manifests::CONTROLLER_SERVICE_ACCOUNT,
                fleetdecide::one_line(&expires)
            );
            match shown {
                // Asked for: the kubeconfig alone on stdout, the summary on stderr.
                Some(text) => {
                    print!("{text}");
                    eprintln!("{said}");
                }
                None => println!(
                    "{said}\nwritten to {} (mode 0600); for the service: chown fleet-role: it",
                    fleetdecide::one_line(&args.output.display().to_string())
                ),
            }
            Ok(Exit::Done)
        }
        Command::Enroll(args) => {
            let client = || async { Ok(cluster::client(kubeconfig).await?) };
            Ok(enroll::command::enroll(settings.names(), args, client).await?)
        }
        Command::Manifests { which } => {
            // The file's own text for the workload's ConfigMap: it was read
            // and validated just now, so a failure here is a race.
            let text =
                match cli.config.as_deref() {
                    Some(p) => Some(std::fs::read_to_string(p).map_err(|e| {
                        usage(anyhow::Error::new(e).context(p.display().to_string()))
                    })?),
                    None => None,
                };
            print!(
                "{}",
                manifests::render_with_config(*which, &settings, text.as_deref())
            );
            Ok(Exit::Done)
        }
        Command::Uninstall { dry_run } => {
            let client = cluster::client(kubeconfig).await?;
            Ok(uninstall::command(&client, &settings, *dry_run).await?)
        }
        Command::Unenroll(args) => {
            let client = || async { Ok(cluster::client(kubeconfig).await?) };
            Ok(enroll::command::unenroll(settings.names(), args, client).await?)
        }
        Command::Pause => pause::command(kubeconfig, settings, true).await,
        Command::Resume => pause::command(kubeconfig, settings, false).await,
    }
}

/// The caller's error: a flag, a value or a config file.
fn usage(e: impl Into<anyhow::Error>) -> Failure {
    Failure::Usage(e.into())
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

/// The Node name `raw`, given as `flag`; a bad one is the caller's.
fn node(raw: &str, flag: &str) -> Result<NodeName, Failure> {
    NodeName::parse(raw).map_err(|e| usage(anyhow::Error::new(e).context(flag.to_string())))
}

/// The settings of this run: the file, then the flags. The machine's clock
/// is read from here on through [`Settings::clock`], set here at the edge.
fn settings(cli: &Cli) -> Result<Settings, Failure> {
    let file = FileConfig::load(cli.config.as_deref()).map_err(usage)?;
    let settings = Settings::resolve(file, cli.identity.clone()).map_err(usage)?;
    Ok(settings.with_clock(clock::Clock::system()))
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

/// The driver of a change run by hand (`swap`, `grow`, `shrink`, `abort`):
/// its request client, its clock checked against the API server's as both
/// clients' answers show it, stopped by a signal; and the client its
/// watches run on ([`watched`]).
async fn hand_driver(
    kubeconfig: cluster::Source<'_>,
    settings: &Settings,
) -> Result<(Driver, kube::Client), Failure> {
    let cluster::Clients {
        requests,
        watches,
        server_clock,
        ..
    } = cluster::connect(kubeconfig).await?;
    let driver =
        Driver::new(requests, settings.clone(), shutdown_signal()).with_server_clock(server_clock);
    Ok((driver, watches))
}

/// `driver` with the fleet's watches started and listed once, as every
/// command that writes drives from them.
async fn watched(
    driver: Driver,
    watching: &kube::Client,
    settings: &Settings,
) -> Result<Driver, Failure> {
    let fleet = Arc::new(FleetWatch::start(watching, settings));
    fleet.wait_synced(SYNC_BOUND).await?;
    Ok(driver.with_watch(fleet))
}
