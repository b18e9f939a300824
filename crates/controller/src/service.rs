//! `fleet-role run` as a service: it joins the leader election
//! ([`crate::leader`]), drives swaps only while it leads, stands by
//! otherwise, and on SIGTERM stops at a safe point and steps down.

use anyhow::anyhow;
use kube::Client;
use serde_json::json;
use tokio::sync::watch;

use crate::{config::Settings, drive::Driver, leader::Election, output::Printer};

/// Runs `driver` while this instance leads, until `shutdown`.
pub async fn lead(
    driver: &mut Driver,
    client: Client,
    settings: &Settings,
    shutdown: watch::Receiver<bool>,
    printer: &mut Printer,
) -> anyhow::Result<()> {
    let l = &settings.leader;
    let election = Election::join(client, l, driver.instance()).await?;
    let mut leading = election.leading();
    let mut shutdown = shutdown;
    let metrics = driver.metrics().clone();
    printer.line(
        &format!(
            "instance {} joins the election for the leader Lease {}/{}",
            driver.instance(),
            l.namespace,
            l.name
        ),
        json!({"instance": driver.instance()}),
    );
    let result = 'service: loop {
        // Standing by: nothing is decided or written.
        while !*leading.borrow_and_update() {
            if *shutdown.borrow() {
                break 'service Ok(());
            }
            tokio::select! {
                r = leading.changed() => if r.is_err() {
                    break 'service Err(anyhow!("the leader election ended"));
                },
                _ = shutdown.changed() => {}
            }
        }
        if *shutdown.borrow() {
            break Ok(());
        }
        metrics.set_leader(true);
        printer.line(
            &format!(
                "leading: instance {} holds the leader Lease",
                driver.instance()
            ),
            json!({"leader": true}),
        );
        // The loop stops at its next safe point on a signal or when the
        // leadership is lost (a renewal failed, or another took it over).
        let (tx, rx) = watch::channel(false);
        let (mut lead_rx, mut stop_rx) = (leading.clone(), shutdown.clone());
        let guard = tokio::spawn(async move {
            loop {
                if !*lead_rx.borrow_and_update() || *stop_rx.borrow_and_update() {
                    break;
                }
                tokio::select! {
                    r = lead_rx.changed() => if r.is_err() { break },
                    r = stop_rx.changed() => if r.is_err() { break },
                }
            }
            let _ = tx.send(true);
            // Keep the sender until the loop has seen it.
            tx.closed().await;
        });
        driver.set_stop(rx);
        let ran = driver.run(printer, false).await;
        guard.abort();
        metrics.set_leader(false);
        if let Err(e) = ran {
            break Err(e.into());
        }
        if *shutdown.borrow() {
            break Ok(());
        }
        printer.line("lost the leadership: standing by", json!({"leader": false}));
    };
    // SIGTERM (systemd, Kubernetes): release the leader Lease so a standby
    // takes over at once rather than when it lapses. The manager releases
    // once every receiver of its channel is gone, this one included.
    drop(leading);
    election.step_down().await;
    printer.line("stepped down: the leader Lease is released", json!({}));
    result
}
