//! A step's bound and its cancellation, shared by every wait in it.
//!
//! A step holds the host lock for as long as it runs, so it must end by its
//! bound even when the world does not cooperate (a server that never becomes
//! ready), and end sooner when asked: a rollback must not wait for the
//! promotion it undoes to give up by itself.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use clock::Clock;

use crate::error::{Error, Result};

/// The bound of a step and a flag that cancels it, on the clock every wait
/// under it reads. Cheap to clone: clones share the flag.
#[derive(Debug, Clone)]
pub struct Budget {
    deadline: Option<Instant>,
    cancelled: Arc<AtomicBool>,
    clock: Clock,
}

impl Budget {
    /// No bound beyond each wait's own; never cancelled unless asked.
    pub fn unbounded(clock: &Clock) -> Budget {
        Budget {
            deadline: None,
            cancelled: Arc::default(),
            clock: clock.clone(),
        }
    }

    /// A budget that ends `bound` from now on `clock`.
    pub fn within(clock: &Clock, bound: Duration) -> Budget {
        Budget {
            deadline: clock.now().checked_add(bound),
            cancelled: Arc::default(),
            clock: clock.clone(),
        }
    }

    /// The clock every wait under this budget reads.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Asks every wait under this budget to stop at its next check.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// Whether [`Budget::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// `wanted`, cut to what is left of the budget.
    pub fn cap(&self, wanted: Duration) -> Duration {
        match self.deadline {
            Some(d) => wanted.min(d.saturating_duration_since(self.clock.now())),
            None => wanted,
        }
    }

    /// `Err` once cancelled or past the deadline; `doing` says what was
    /// under way, for the error.
    pub fn check(&self, doing: &str) -> Result<()> {
        if self.is_cancelled() {
            return Err(Error::Cancelled {
                doing: doing.to_string(),
            });
        }
        if self.deadline.is_some_and(|d| self.clock.now() >= d) {
            return Err(Error::StepDeadline {
                doing: doing.to_string(),
            });
        }
        Ok(())
    }

    /// Sleeps `d` (cut to the budget), waking early when cancelled. On a
    /// manual clock it returns once the clock was moved past `d`.
    pub fn sleep(&self, d: Duration) {
        let until = self.clock.now() + self.cap(d);
        while !self.is_cancelled() {
            let now = self.clock.now();
            if now >= until {
                return;
            }
            thread::sleep((until - now).min(Duration::from_millis(50)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_budget_stops_its_waits_and_says_what_was_under_way() {
        let b = Budget::within(&Clock::system(), Duration::from_secs(3600));
        assert!(b.check("waiting").is_ok());
        let clone = b.clone();
        let t = thread::spawn(move || {
            clone.sleep(Duration::from_secs(3600));
            clone.check("waiting for k3s")
        });
        b.cancel();
        let err = t.join().unwrap().unwrap_err().to_string();
        assert!(
            err.contains("cancelled") && err.contains("waiting for k3s"),
            "{err}"
        );
    }

    #[test]
    fn a_spent_budget_caps_every_wait_to_nothing() {
        let b = Budget::within(&Clock::system(), Duration::ZERO);
        assert_eq!(b.cap(Duration::from_secs(60)), Duration::ZERO);
        assert!(matches!(b.check("x"), Err(Error::StepDeadline { .. })));
        assert_eq!(
            Budget::unbounded(&Clock::system()).cap(Duration::from_secs(60)),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn a_budget_ends_when_its_clock_passes_the_bound_and_not_before() {
        let clock = Clock::manual(1_000);
        let b = Budget::within(&clock, Duration::from_secs(60));
        assert!(b.check("x").is_ok());
        assert_eq!(b.cap(Duration::from_secs(90)), Duration::from_secs(60));
        clock.advance(Duration::from_secs(59));
        assert!(b.check("x").is_ok());
        clock.advance(Duration::from_secs(1));
        assert!(matches!(b.check("x"), Err(Error::StepDeadline { .. })));
    }
}
