//! `fleet-role grow` and `fleet-role shrink`: the voter count changed one
//! host at a time, each its own change with its own Lease and gates (those
//! of the first counting every host queued after it), or the plan of all
//! of them (`--dry-run`, read only). One body for both: they differ only
//! in which half of a change each host is.

use std::time::Duration;

use controller::{cli::Format, cluster, config::Settings, drive::Ending, output::Printer};
use protocol::{NodeName, exit::Exit};

use super::{Failure, Outcome, hand_driver, node, plan_exit, usage, watched};

/// How long the next host of a grow or shrink waits for the fleet to
/// settle after the change before it (the servers' reports of etcd's
/// members, a voter's readiness) before its gates are asked anyway.
const SETTLE_BOUND: Duration = Duration::from_secs(180);

/// Which way [`command`] changes the voter count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resize {
    /// `grow`: each host promoted.
    Grow,
    /// `shrink`: each host stepped down.
    Shrink,
}

/// `grow`'s or `shrink`'s hosts, checked: each a Node name, none twice.
pub(super) fn hosts(names: &[String], flag: &str) -> Result<Vec<NodeName>, Failure> {
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

/// Runs `fleet-role grow` or `fleet-role shrink` over `hosts`, in turn.
pub(super) async fn command(
    kubeconfig: cluster::Source<'_>,
    settings: Settings,
    way: Resize,
    hosts: &[NodeName],
    dry_run: bool,
    output: Format,
) -> Outcome {
    let (driver, watching) = hand_driver(kubeconfig, &settings).await?;
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
        if !matches!(ending, Ending::Done { .. }) {
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
        if let Ending::Done {
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
