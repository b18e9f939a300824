//! The one clock of fleet-role.
//!
//! Product code never reads `Instant::now` or `SystemTime::now` itself
//! (`clippy.toml` bans both outside this crate): it holds a [`Clock`] and
//! asks it. The programs use [`Clock::system`]; a test gives a
//! [`Clock::manual`] it moves by hand, or a
//! [`Clock::tokio`] that follows tokio's paused time, so nothing in a test
//! waits for real seconds to pass for a deadline or an age to be reached.
//!
//! A clock gives two readings that always move together: the monotonic one
//! for deadlines and pacing, and the wall one for what is written down
//! (unix seconds in the Lease and the reports).
#![allow(clippy::disallowed_methods)] // The one place that reads the machine's clocks.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where a clock's readings come from.
enum Source {
    /// The machine's clocks.
    System,
    /// Standing still until moved by [`Clock::advance`].
    Manual {
        start: Instant,
        wall: SystemTime,
        moved: Mutex<Duration>,
    },
    /// Following tokio's time, which a test can pause and advance
    /// (`#[tokio::test(start_paused = true)]`, `tokio::time::advance`).
    Tokio {
        start: tokio::time::Instant,
        wall: SystemTime,
    },
}

/// A clock: cheap to clone, every clone reading the same time.
#[derive(Clone)]
pub struct Clock(Arc<Source>);

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Clock({}s)", self.unix_secs())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl Clock {
    /// The machine's clocks: what the programs use.
    pub fn system() -> Self {
        Self(Arc::new(Source::System))
    }

    /// A clock standing still at `wall_secs` (unix seconds) until
    /// [`advance`](Self::advance) moves it.
    pub fn manual(wall_secs: u64) -> Self {
        Self(Arc::new(Source::Manual {
            start: Instant::now(),
            wall: UNIX_EPOCH + Duration::from_secs(wall_secs),
            moved: Mutex::new(Duration::ZERO),
        }))
    }

    /// A clock reading `wall_secs` now and moving with tokio's time from
    /// here on, paused or not.
    pub fn tokio(wall_secs: u64) -> Self {
        Self(Arc::new(Source::Tokio {
            start: tokio::time::Instant::now(),
            wall: UNIX_EPOCH + Duration::from_secs(wall_secs),
        }))
    }

    /// Moves a [`manual`](Self::manual) clock forward by `d` (every clone
    /// with it) and says `true`; any other clock follows its own source and
    /// is not moved (`false`).
    pub fn advance(&self, d: Duration) -> bool {
        match &*self.0 {
            Source::Manual { moved, .. } => {
                let mut m = moved.lock().unwrap_or_else(PoisonError::into_inner);
                *m = m.saturating_add(d);
                true
            }
            _ => false,
        }
    }

    /// The monotonic reading, for deadlines and pacing.
    pub fn now(&self) -> Instant {
        match &*self.0 {
            Source::System => Instant::now(),
            Source::Manual { start, moved, .. } => {
                *start + *moved.lock().unwrap_or_else(PoisonError::into_inner)
            }
            Source::Tokio { .. } => tokio::time::Instant::now().into_std(),
        }
    }

    /// The wall reading, for what is written down.
    pub fn wall(&self) -> SystemTime {
        match &*self.0 {
            Source::System => SystemTime::now(),
            Source::Manual { wall, moved, .. } => {
                *wall + *moved.lock().unwrap_or_else(PoisonError::into_inner)
            }
            Source::Tokio { start, wall } => {
                *wall + tokio::time::Instant::now().duration_since(*start)
            }
        }
    }

    /// The time since `earlier`, a monotonic reading of this clock (zero if
    /// `earlier` is later).
    pub fn since(&self, earlier: Instant) -> Duration {
        self.now().saturating_duration_since(earlier)
    }

    /// Now in unix seconds (0 for a clock set before 1970).
    pub fn unix_secs(&self) -> i64 {
        self.wall()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
    }

    /// Now in unix milliseconds (0 for a clock set before 1970).
    pub fn unix_millis(&self) -> u64 {
        self.wall()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_stands_still_until_moved_and_every_clone_moves_with_it() {
        let c = Clock::manual(1_000);
        let copy = c.clone();
        let t0 = c.now();
        assert_eq!(c.unix_secs(), 1_000);
        assert_eq!(c.now(), t0);
        assert!(copy.advance(Duration::from_secs(90)));
        assert_eq!(c.unix_secs(), 1_090);
        assert_eq!(c.since(t0), Duration::from_secs(90));
        assert_eq!(c.unix_millis(), 1_090_000);
    }

    #[test]
    fn the_system_clock_is_not_moved_by_advance() {
        let c = Clock::system();
        assert!(!c.advance(Duration::from_secs(3600)));
        assert!(c.unix_secs() > 1_700_000_000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_tokio_clock_follows_tokio_s_paused_time_in_both_readings() {
        let c = Clock::tokio(50);
        let t0 = c.now();
        tokio::time::advance(Duration::from_secs(7)).await;
        assert_eq!(c.since(t0), Duration::from_secs(7));
        assert_eq!(c.unix_secs(), 57);
    }
}
