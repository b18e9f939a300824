//! Planted defects, a testing aid built only with the `plant` feature
//! (the simulation's crate turns it on; the packages never do): while a
//! test holds one, the host's decision carries that known defect on the
//! test's thread, so the simulation can show its invariants catch it
//! (docs/testing.md, "Planted defects").

use std::cell::Cell;

/// A defect the host's decision can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// A step is taken whichever host the regrade Lease names for it
    /// (`lease_names_host` passes): a `patch nodes` holder's marks alone
    /// move a host.
    SkipLeaseNamesHost,
}

thread_local! {
    static ACTIVE: Cell<Option<Plant>> = const { Cell::new(None) };
}

/// Runs `f` with `plant` active on this thread, and none after.
pub fn with<T>(plant: Plant, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.set(None));
        }
    }
    ACTIVE.with(|a| a.set(Some(plant)));
    let _reset = Reset;
    f()
}

/// Whether `plant` is active on this thread.
pub fn active(plant: Plant) -> bool {
    ACTIVE.with(|a| a.get() == Some(plant))
}
