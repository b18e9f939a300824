//! `fleet-role run`: the service, swapping by policy under leader election
//! (or only saying what it would do, `--dry-run`), moving to the next API
//! server when the one it uses stops serving.

use std::{sync::Arc, time::Duration};

use controller::{
    cli::Format, cluster, config::Settings, drive::Driver, failover, metrics::Metrics,
    output::Printer, service, watch::FleetWatch,
};
use protocol::exit::Exit;
use tokio::sync::watch;

use super::{Outcome, SYNC_BOUND, shutdown_signal};

/// Runs `fleet-role run` until a signal, one session per API server in turn.
pub(super) async fn command(
    kubeconfig: cluster::Source<'_>,
    settings: Settings,
    dry_run: bool,
) -> Outcome {
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
        let ended = session_through(
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
            tracing::warn!("{}", e.said());
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
async fn session_through(
    settings: &Settings,
    clients: cluster::Clients,
    metrics: Arc<Metrics>,
    stop: watch::Receiver<bool>,
    start: Start,
    dry_run: bool,
    printer: &mut Printer,
) -> Outcome {
    let cluster::Clients {
        requests: client,
        watches: watching,
        server_clock,
        ..
    } = clients;
    let fleet = Arc::new(FleetWatch::start(&watching, settings));
    fleet.wait_synced(SYNC_BOUND).await?;
    metrics.set_ready(true);
    let shutdown = stop;
    let mut driver = Driver::new(client.clone(), settings.clone(), shutdown.clone())
        .with_server_clock(server_clock)
        .with_watch(fleet)
        .with_metrics(metrics);
    if dry_run {
        if let Err(e) = driver.check_eligibility().await {
            printer.line(&format!("dry run: {}", e.said()), serde_json::json!({}));
        }
        driver.run(printer, true).await?;
        return Ok(Exit::Done);
    }
    match start {
        Start::First => driver.check_eligibility().await?,
        Start::Failover => {
            if let Err(e) = driver.check_eligibility().await {
                tracing::warn!(
                    "{}; going on after the failover (no ineligible voter is replaced unless replace_ineligible)",
                    e.said()
                );
            }
        }
    }
    service::lead(&mut driver, client, settings, shutdown, printer).await?;
    Ok(Exit::Done)
}
