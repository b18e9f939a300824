//! Planted defects, a testing aid built only with the `plant` feature
//! (the simulation's crate turns it on; the packages never do): while a
//! test holds one, the decisions carry that known defect on the test's
//! thread, so the simulation can show its invariants catch it
//! (docs/testing.md, "Planted defects").

use std::cell::Cell;

/// A defect the decisions can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// The gate before a voting host is stopped ahead of its member's
    /// removal (`quorum-at-host-stop`) passes whatever the quorum.
    SkipQuorumAtHostStop,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plant_is_active_only_inside_its_scope() {
        assert!(!active(Plant::SkipQuorumAtHostStop));
        assert!(with(Plant::SkipQuorumAtHostStop, || active(
            Plant::SkipQuorumAtHostStop
        )));
        assert!(!active(Plant::SkipQuorumAtHostStop));
    }
}
