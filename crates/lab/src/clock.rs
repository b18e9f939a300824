//! The wall clock in the forms the API wants.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in unix seconds.
pub fn unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Now as a `Time` (RFC 3339, seconds), for Node conditions.
pub fn rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::from_second(unix())
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// Now as a `MicroTime` (RFC 3339, microseconds), for Lease renewals.
pub fn micro() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    k8s_openapi::jiff::Timestamp::from_second(d.as_secs() as i64)
        .map(|t| {
            format!(
                "{}.{:06}Z",
                t.strftime("%Y-%m-%dT%H:%M:%S"),
                d.subsec_micros()
            )
        })
        .unwrap_or_default()
}

/// Now, in unix milliseconds.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
