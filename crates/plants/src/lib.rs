//! Planted defects: the known defects a test build carries on request, so
//! a test can show the checks catch each (docs/testing.md, "Planted
//! defects"). A check that has never failed proves little.
//!
//! Every crate that can carry one depends on this crate only behind a
//! feature no package build turns on (the actuator's `failpoint`, the
//! decision crates' `plant`). The decisions' defects are switched on for
//! one thread's scope ([`with`]), as the simulation plays a seed; the
//! actuator's by a file on its host (`actuator::plant`), as a lab test
//! runs it.
#![forbid(unsafe_code)]

use std::cell::Cell;

/// A defect a test build can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// The actuator's step-down applies the finish's plan, so the server
    /// stops and its datastore moves aside while its member can still
    /// vote (the controller removes the member only after the step-down).
    FinishAtStepDown,
    /// `fleetdecide`: the gate before a voting host is stopped ahead of
    /// its member's removal (`quorum-at-host-stop`) passes whatever the
    /// quorum.
    SkipQuorumAtHostStop,
    /// `hostdecide`: a step is taken whichever host the regrade Lease
    /// names for it, so a `patch nodes` holder's marks alone move a host.
    SkipLeaseNamesHost,
    /// `hostdecide`: a rollback stops the host's server whatever etcd says
    /// of its member's vote and the other voters' health.
    SkipHostQuorumAtRollback,
}

impl Plant {
    /// Every defect.
    pub const ALL: [Plant; 4] = [
        Plant::FinishAtStepDown,
        Plant::SkipQuorumAtHostStop,
        Plant::SkipLeaseNamesHost,
        Plant::SkipHostQuorumAtRollback,
    ];

    /// Its name (the actuator's plant file holds it).
    pub fn name(self) -> &'static str {
        match self {
            Plant::FinishAtStepDown => "finish-at-step-down",
            Plant::SkipQuorumAtHostStop => "skip-quorum-at-host-stop",
            Plant::SkipLeaseNamesHost => "skip-lease-names-host",
            Plant::SkipHostQuorumAtRollback => "skip-host-quorum-at-rollback",
        }
    }

    /// Whether the actuator carries it (planted by a file on its host, in
    /// a lab); the others are the decisions', planted by a test's scope.
    pub fn in_the_actuator(self) -> bool {
        matches!(self, Plant::FinishAtStepDown)
    }

    /// The defect a name stands for (surrounding white space ignored).
    pub fn parse(name: &str) -> Option<Plant> {
        Plant::ALL.into_iter().find(|p| p.name() == name.trim())
    }
}

thread_local! {
    static ACTIVE: Cell<Option<Plant>> = const { Cell::new(None) };
}

/// Runs `f` with `plant` active on this thread, and none after (a panic
/// in `f` included).
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
    fn a_plant_is_active_only_inside_its_scope_and_only_on_its_thread() {
        let p = Plant::SkipQuorumAtHostStop;
        assert!(!active(p));
        assert!(with(p, || active(p)
            && !active(Plant::SkipLeaseNamesHost)
            && !std::thread::spawn(move || active(p)).join().unwrap()));
        assert!(!active(p));
    }

    #[test]
    fn every_plant_reads_back_from_its_name_and_nothing_else_does() {
        for p in Plant::ALL {
            assert_eq!(Plant::parse(&format!(" {}\n", p.name())), Some(p));
        }
        assert_eq!(Plant::parse("skip-every-gate"), None);
        assert_eq!(Plant::parse(""), None);
    }
}
