//! `fleet-role abort`: the recorded swap wound down, or finished when it is
//! past the point of no return; a swap another process holds is told.

use anyhow::Context;
use controller::{cli::Format, cluster, config::Settings, drive::Ending, output::Printer};
use fleetdecide::SwapRecord;
use fleetdecide::{AbortPlan, abort_plan};
use protocol::exit::Exit;

use super::{Outcome, hand_driver, watched};

/// Runs `fleet-role abort`.
pub(super) async fn command(
    kubeconfig: cluster::Source<'_>,
    settings: Settings,
    output: Format,
) -> Outcome {
    let (driver, watching) = hand_driver(kubeconfig, &settings).await?;
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
        Ending::WoundDown { .. } | Ending::Done { .. } => Exit::Done,
        _ => ending.exit(),
    };
    printer.result(word, exit.code(), &message);
    Ok(exit)
}
