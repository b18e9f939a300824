//! The short chaos campaign CI runs (`fleet-role-lab chaos` with a fixed
//! seed): swaps back and forth on a lab of three servers and two agents
//! under faults drawn from the seed, two `fleet-role run` instances, and
//! clients whose history is checked for linearizability; no violation, and
//! the campaign really swapped and really fired its faults. The long
//! campaign is a command, not a test (docs/testing.md).
//! Fails (never skips) when containers cannot run here.

use std::path::Path;

use lab::{
    chaos::{
        campaign::{self, Options},
        schedule::Schedule,
        summary::Ending,
    },
    lab_setup::Bins,
};

mod common;
use common::{fleet_role, lab_dir};

/// The seed CI runs: its two swaps carry a kill of the swap's controller
/// and a reboot of the outgoing voter mid-swap, a hard reset of a standby
/// and a kill of an actuator (`schedule.json` in the campaign's directory).
const SEED: u64 = 1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_chaos_campaign_swaps_under_its_seeded_faults_with_no_violation() {
    let dir = lab_dir();
    let bins = Bins::beside(
        Path::new(env!("CARGO_BIN_EXE_fleet-role-lab"))
            .parent()
            .unwrap(),
    )
    .expect("the workspace's binaries are built");
    let schedule = Schedule::draw(SEED, 2, 4);
    let summary = campaign::run(
        Options {
            dir: dir.path().join("chaos"),
            schedule,
            bins,
            fleet_role: fleet_role(),
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
    assert_eq!(summary.ended(Ending::Skipped), 0, "{:?}", summary.swaps);
    assert_eq!(summary.ended(Ending::Unfinished), 0, "{:?}", summary.swaps);
    assert!(summary.ended(Ending::Done) >= 1, "{:?}", summary.swaps);
    assert!(summary.fired() >= 3, "{:?}", summary.faults);
    assert!(summary.ops.ok > 100, "{:?}", summary.ops);
}
