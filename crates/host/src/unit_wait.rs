//! The waits after a stop or a start, one model for systemd's units and a
//! Docker host's containers: poll the unit's state until it is what the
//! move asked, within a bound and the step's budget.

use std::time::Duration;

use crate::{
    budget::Budget,
    error::{Error, Result},
    unit_state::{ActiveState, UnitState},
};

/// How often a stop or a start is checked.
pub(crate) const POLL: Duration = Duration::from_millis(250);

/// One wait: for `unit`, up to `bound`, `waited_for` and `left` as its
/// error says them.
pub(crate) struct Wait<'a> {
    pub unit: &'a str,
    pub bound: Duration,
    pub waited_for: &'static str,
    pub left: &'static str,
    pub budget: &'a Budget,
}

impl Wait<'_> {
    /// Reads `state` until `done` holds of it (or errs), past `bound` an
    /// error with the state last read.
    pub(crate) fn until(
        &self,
        state: impl Fn() -> Result<UnitState>,
        done: impl Fn(&UnitState) -> Result<bool>,
    ) -> Result<UnitState> {
        let clock = self.budget.clock();
        let start = clock.now();
        loop {
            let s = state()?;
            if done(&s)? {
                return Ok(s);
            }
            if clock.since(start) >= self.bound {
                return Err(Error::UnitWait {
                    unit: self.unit.to_string(),
                    waited_for: self.waited_for,
                    state: s.to_string(),
                    waited: self.bound,
                    left: self.left,
                });
            }
            self.budget
                .check(&format!("waiting for {} (it is {s})", self.unit))?;
            self.budget.sleep(POLL);
        }
    }
}

/// Whether a start of `unit` has made it active: `active`, and (when
/// `restarted`) started since `before`, so the old run still active before
/// the restart is not taken for the new one. A start that ran and ended
/// (stopped, with a newer start stamp) is an error at once.
pub(crate) fn started(
    unit: &str,
    s: &UnitState,
    before: &UnitState,
    restarted: bool,
) -> Result<bool> {
    let ran = s.inactive_exit != before.inactive_exit;
    if s.is_stopped() && ran {
        return Err(Error::UnitState {
            unit: unit.to_string(),
            action: "its start ran",
            state: format!("{s}, result {}", s.result),
        });
    }
    Ok(s.active == ActiveState::Active && (ran || !restarted))
}
