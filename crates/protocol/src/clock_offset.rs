//! How far a party's clock is off the API server's, as one of its own
//! writes shows it.
//!
//! The regrade Lease is judged by clocks that never meet: the controller
//! writes its renew time by its clock, each host reads it by its own, and
//! `skew_margin_secs` is all the disagreement the protocol allows for. A
//! host whose clock runs behind beyond it would act on a Lease that has
//! lapsed. Neither party can see the other's clock, but both write to the
//! same API server, which stamps each write with its own clock (the
//! `time` of the writer's managed-fields entry, in whole seconds). So each
//! party measures itself against the server, at no request of its own,
//! and refuses what needs the Lease while it is surely off by more than
//! half the margin: two parties within half of it each are within the
//! margin of each other.

/// The bounds of a clock's offset from the API server's (positive: ahead),
/// in milliseconds, from one write: sent at `sent_ms` and answered at
/// `answered_ms` by this clock, stamped `server_secs` by the server's.
///
/// The server's stamp falls between the sending and the answer and is
/// truncated to the second, so the offset lies in
/// `(sent_ms - (server_secs + 1) * 1000, answered_ms - server_secs * 1000]`:
/// a slow answer or the truncation widens the bounds, never moves them past
/// the truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockOffset {
    /// The offset is more than this (milliseconds).
    pub above_ms: i64,
    /// The offset is at most this (milliseconds).
    pub at_most_ms: i64,
}

impl ClockOffset {
    /// The bounds one write shows; `None` when the answer came before the
    /// sending by this clock (it was set back meanwhile: nothing is known).
    pub fn of_write(sent_ms: i64, answered_ms: i64, server_secs: i64) -> Option<Self> {
        if answered_ms < sent_ms {
            return None;
        }
        let server_ms = server_secs.saturating_mul(1000);
        Some(Self {
            above_ms: sent_ms.saturating_sub(server_ms).saturating_sub(1000),
            at_most_ms: answered_ms.saturating_sub(server_ms),
        })
    }

    /// The milliseconds by which this clock is surely off beyond `limit_ms`
    /// either way (positive: ahead, negative: behind); `None` when it may
    /// be within.
    pub fn beyond(&self, limit_ms: i64) -> Option<i64> {
        // The offset is more than `above_ms` (strictly) and at most
        // `at_most_ms`: each comparison is the one that makes it sure.
        if self.above_ms >= limit_ms {
            Some(self.above_ms)
        } else if self.at_most_ms < limit_ms.saturating_neg() {
            Some(self.at_most_ms)
        } else {
            None
        }
    }
}

/// How far each party's clock may be off the API server's: half the skew
/// margin, in milliseconds, so that two parties within it are within the
/// margin of each other.
pub fn allowed_offset_ms(skew_margin_secs: i64) -> i64 {
    skew_margin_secs.max(0).saturating_mul(500)
}

/// Why a clock surely off the API server's by `off_ms` (from
/// [`ClockOffset::beyond`]) cannot judge the regrade Lease, safe for one
/// log line and a report.
pub fn off_reason(whose: &str, off_ms: i64, skew_margin_secs: i64) -> String {
    let secs = off_ms.unsigned_abs() / 1000;
    let way = if off_ms > 0 { "ahead of" } else { "behind" };
    format!(
        "{whose} clock is at least {secs}s {way} the API server's (half of skew_margin_secs = {skew_margin_secs} is allowed either way): the regrade Lease's validity cannot be judged; set the time right (NTP, timedatectl)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_on_time_is_within_whatever_the_truncation_and_a_slow_answer() {
        // Sent at 100.900 s, answered at 101.400 s, stamped 100 s (truncated).
        let o = ClockOffset::of_write(100_900, 101_400, 100).unwrap();
        assert_eq!(o.above_ms, -100);
        assert_eq!(o.at_most_ms, 1_400);
        assert_eq!(o.beyond(2_500), None);
    }

    #[test]
    fn a_clock_thirty_seconds_behind_or_ahead_is_surely_off_beyond_half_the_margin() {
        let behind = ClockOffset::of_write(70_000, 70_100, 100).unwrap();
        assert_eq!(behind.beyond(2_500), Some(-29_900));
        let ahead = ClockOffset::of_write(130_000, 130_100, 100).unwrap();
        assert_eq!(ahead.beyond(2_500), Some(29_000));
    }

    #[test]
    fn an_offset_the_bounds_leave_open_is_not_taken_for_off() {
        // Between 1.5 s and 3.6 s ahead: maybe within 2.5 s.
        let o = ClockOffset::of_write(102_500, 103_600, 100).unwrap();
        assert_eq!(o.beyond(2_500), None);
        // More than 2.5 s ahead is beyond; at most 2.5 s behind may be
        // exactly 2.5 s, which is not; anything further behind is.
        let o = ClockOffset::of_write(103_500, 103_600, 100).unwrap();
        assert_eq!(o.beyond(2_500), Some(2_500));
        let o = ClockOffset::of_write(97_000, 97_500, 100).unwrap();
        assert_eq!(o.beyond(2_500), None);
        let o = ClockOffset::of_write(97_000, 97_499, 100).unwrap();
        assert_eq!(o.beyond(2_500), Some(-2_501));
        // With no margin a clock on time is never taken for off.
        let o = ClockOffset::of_write(99_500, 100_000, 100).unwrap();
        assert_eq!(o.beyond(0), None);
    }

    #[test]
    fn a_clock_set_back_during_the_write_shows_nothing() {
        assert_eq!(ClockOffset::of_write(100_000, 99_000, 100), None);
    }

    #[test]
    fn the_allowed_offset_is_half_the_margin_and_never_negative() {
        assert_eq!(allowed_offset_ms(5), 2_500);
        assert_eq!(allowed_offset_ms(-3), 0);
        assert_eq!(allowed_offset_ms(i64::MAX), i64::MAX);
    }

    #[test]
    fn the_reason_names_the_way_and_the_whole_seconds() {
        let r = off_reason("this host's", -29_900, 5);
        assert!(
            r.starts_with("this host's clock is at least 29s behind the API server's"),
            "{r}"
        );
        assert!(off_reason("the controller's", 2_500, 5).contains("at least 2s ahead of"));
    }
}
