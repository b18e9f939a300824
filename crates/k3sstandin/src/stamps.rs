//! A clock's reading in the forms the API wants.

use clock::Clock;

/// Now as a `Time` (RFC 3339, seconds), for Node conditions.
pub fn rfc3339(clock: &Clock) -> String {
    k8s_openapi::jiff::Timestamp::from_second(clock.unix_secs())
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// Now as a `MicroTime` (RFC 3339, microseconds), for Lease renewals.
pub fn micro(clock: &Clock) -> String {
    let millis = clock.unix_millis();
    let secs = i64::try_from(millis / 1000).unwrap_or(i64::MAX);
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .map(|t| {
            format!(
                "{}.{:06}Z",
                t.strftime("%Y-%m-%dT%H:%M:%S"),
                (millis % 1000) * 1000
            )
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_reading_is_shown_as_the_api_wants_it() {
        let c = Clock::manual(1_796_124_731);
        assert_eq!(rfc3339(&c), "2026-12-01T11:32:11Z");
        c.advance(std::time::Duration::from_millis(250));
        assert_eq!(micro(&c), "2026-12-01T11:32:11.250000Z");
    }
}
