//! The short chaos campaign CI runs (`fleet-role-lab chaos` with a fixed
//! seed): swaps back and forth on a lab of three servers and two agents
//! under faults drawn from the seed, two `fleet-role run` instances, and
//! clients whose history is checked for linearizability; no violation
//! (liveness included: each swap ends done, under its faults or tried
//! again once they healed), and the campaign really swapped and really
//! fired its faults. The long campaign is a command, not a test
//! (docs/testing.md).
//! Fails (never skips) when containers cannot run here.

use std::path::Path;

use lab::{
    chaos::{
        campaign::{self, Options},
        schedule::{FaultKind, Schedule},
        summary::Ending,
    },
    lab_setup::Bins,
};

mod common;
use common::{fleet_role, lab_dir};

/// The lab's programs, beside this test's `fleet-role-lab`.
fn bins() -> Bins {
    Bins::beside(
        Path::new(env!("CARGO_BIN_EXE_fleet-role-lab"))
            .parent()
            .unwrap(),
    )
    .expect("the workspace's binaries are built")
}

/// The seed CI runs: its first swap carries the controller's API server
/// cut from it, then the controllers' clocks 45 s ahead; its second the
/// outgoing voter's actuator's clock 21 s ahead, then one direction of
/// its link to another voter dropped (`schedule.json` in the campaign's
/// directory).
const SEED: u64 = 392;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_chaos_campaign_swaps_under_its_seeded_faults_with_no_violation() {
    let dir = lab_dir();
    let bins = bins();
    let schedule = Schedule::draw(SEED, 2, 4);
    let summary = campaign::run(
        Options {
            dir: dir.path().join("chaos"),
            schedule,
            bins,
            fleet_role: fleet_role(),
            plant: None,
        },
        |l| eprintln!("{l}"),
    )
    .await
    .expect("the campaign's lab comes up and is checked");
    for l in summary.lines() {
        eprintln!("{l}");
    }
    assert_eq!(summary.violations, Vec::<String>::new());
    // It happened: swaps were driven, faults fired, the clients worked.
    assert_eq!(summary.ended(Ending::Unfinished), 0, "{:?}", summary.swaps);
    assert!(
        summary.swaps.iter().all(|s| s.done_at_last()),
        "{:?}",
        summary.swaps
    );
    assert!(summary.fired() >= 3, "{:?}", summary.faults);
    let fired_of = |kind: fn(FaultKind) -> bool| -> u32 {
        summary
            .faults
            .iter()
            .filter(|(k, _)| kind(**k))
            .map(|(_, t)| t.fired)
            .sum()
    };
    assert!(fired_of(FaultKind::on_network) >= 2, "{:?}", summary.faults);
    assert!(fired_of(FaultKind::on_clock) >= 2, "{:?}", summary.faults);
    assert!(summary.ops.ok > 100, "{:?}", summary.ops);
}

/// A defect planted in every host's actuator (the test build's, never the
/// packaged one): the step-down applies the finish's plan, so the
/// outgoing server's datastore moves aside while its member still votes.
/// One swap with no fault; the campaign must end with that violation named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_over_an_actuator_that_moves_the_datastore_at_the_step_down_names_the_violation()
{
    let dir = lab_dir();
    let bins = bins();
    let summary = campaign::run(
        Options {
            dir: dir.path().join("chaos"),
            schedule: Schedule::draw(SEED, 1, 0),
            bins,
            fleet_role: fleet_role(),
            plant: Some(plants::Plant::FinishAtStepDown),
        },
        |l| eprintln!("{l}"),
    )
    .await
    .expect("the campaign's lab comes up and is checked");
    for l in summary.lines() {
        eprintln!("{l}");
    }
    assert_eq!(summary.swaps.len(), 1);
    assert!(
        summary
            .violations
            .iter()
            .any(|v| v.contains("datastore moved while its member")),
        "{:?}",
        summary.violations
    );
}
