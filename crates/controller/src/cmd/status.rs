//! `fleet-role status`: the fleet once, or every `interval` until Ctrl-C
//! (`--watch`); its exit says whether anything is degraded.

use std::time::Duration;

use controller::{
    cli::Format, cluster, config::Settings, drive::Driver, output::print_error, status,
};
use protocol::exit::Exit;
use tokio::sync::watch;

use super::{Outcome, shutdown_signal};

/// How long one refresh of `status --watch` may take.
const REFRESH_BOUND: Duration = Duration::from_secs(30);

/// Prints the fleet's status; its exit says whether anything is degraded.
fn show(output: Format, view: &fleetdecide::FleetView, settings: &Settings) -> Exit {
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

/// Runs `fleet-role status`, once or (`interval`) until Ctrl-C.
pub(super) async fn command(
    kubeconfig: cluster::Source<'_>,
    settings: Settings,
    output: Format,
    interval: Option<Duration>,
) -> Outcome {
    let client = cluster::client(kubeconfig).await?;
    let driver = Driver::new(client, settings.clone(), watch::channel(false).1);
    let Some(interval) = interval else {
        let obs = driver.observe().await?;
        return Ok(show(output, &obs.view, &settings));
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
                show(output, &obs.view, &settings)
            }
            Ok(Err(e)) => {
                let exit = e.exit();
                print_error(output, &e.into(), exit);
                exit
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
