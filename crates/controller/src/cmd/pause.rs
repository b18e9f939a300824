//! `fleet-role pause` and `fleet-role resume`: the pause flag on the Lease.

use controller::{cluster, config::Settings, drive::Driver};
use protocol::exit::Exit;
use tokio::sync::watch;

use super::Outcome;

/// Runs `fleet-role pause` (`paused`) or `fleet-role resume`.
pub(super) async fn command(
    kubeconfig: cluster::Source<'_>,
    settings: Settings,
    paused: bool,
) -> Outcome {
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
