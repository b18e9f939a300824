//! `fleet-role swap`: one swap driven to its end, or its plan (`--dry-run`).

use controller::{cli::Format, cluster, config::Settings, output::Printer};
use fleetdecide::plan;
use protocol::NodeName;

use super::{Failure, Outcome, hand_driver, plan_exit, usage, watched};

/// `swap`'s flags, checked.
pub(super) struct SwapArgs {
    /// `--out`: the voter that leaves.
    pub(super) out: NodeName,
    /// `--in`: the standby that becomes a voter.
    pub(super) incoming: NodeName,
    /// `--dry-run`: the plan only, read only.
    pub(super) dry_run: bool,
    /// `--in-window`: refused outside the configured window.
    pub(super) in_window: bool,
    /// `--output`.
    pub(super) output: Format,
}

/// Runs `fleet-role swap`.
pub(super) async fn command(
    kubeconfig: cluster::Source<'_>,
    settings: Settings,
    args: SwapArgs,
) -> Outcome {
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
        return Err(Failure::Refused(anyhow::anyhow!("swap refused: {why}")));
    }
    let (driver, watching) = hand_driver(kubeconfig, &settings).await?;
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
