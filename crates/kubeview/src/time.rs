//! Times as fleet-role shows them to machines: the views keep unix seconds
//! (as the Lease and the report do); every JSON output gives RFC 3339.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// A time for JSON: RFC 3339 in UTC (`2026-12-01T11:32:11Z`); `null` for
/// none, or for seconds no calendar holds (a value anyone could write).
pub fn rfc3339(secs: Option<i64>) -> Value {
    secs.and_then(|s| Timestamp::from_second(s).ok())
        .map_or(Value::Null, |t| json!(t.to_string()))
}

/// A JSON object with its unix-seconds fields `keys` rewritten as RFC 3339.
pub fn with_times(mut v: Value, keys: &[&str]) -> Value {
    if let Some(m) = v.as_object_mut() {
        for k in keys {
            if let Some(x) = m.get_mut(*k) {
                *x = rfc3339(x.as_i64());
            }
        }
    }
    v
}

/// The unix second `secs`, RFC 3339 in UTC (the caller reads its clock;
/// a second no calendar holds reads as the epoch).
pub fn at_second(secs: i64) -> String {
    Timestamp::from_second(secs)
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_in_json_is_rfc_3339_in_utc_or_null() {
        assert_eq!(rfc3339(Some(0)), json!("1970-01-01T00:00:00Z"));
        assert_eq!(rfc3339(Some(1_796_124_731)), json!("2026-12-01T11:32:11Z"));
        assert_eq!(rfc3339(None), Value::Null);
        assert_eq!(rfc3339(Some(i64::MAX)), Value::Null);
        assert_eq!(
            with_times(json!({"at": 0, "other": 1}), &["at", "missing"]),
            json!({"at": "1970-01-01T00:00:00Z", "other": 1})
        );
        assert_eq!(at_second(1_796_124_731), "2026-12-01T11:32:11Z");
        assert_eq!(at_second(i64::MAX), "1970-01-01T00:00:00Z");
    }
}
