//! What every part of the watcher reads and none changes, and the small
//! helpers the parts share.

use std::{sync::Arc, time::Duration};

use clock::Clock;

use crate::{config::Settings, metrics::Metrics};

/// What every part of the watcher reads and none changes.
pub(super) struct Context {
    pub(super) settings: Settings,
    pub(super) host: host::Host,
    /// The one clock every reading of time goes through.
    pub(super) clock: Clock,
    pub(super) metrics: Arc<Metrics>,
    /// This host's addresses, read at start.
    pub(super) addresses: host::addresses::LocalAddresses,
    /// The API server's clock, as its answers to this watcher's clients
    /// show it.
    pub(super) server_clock: kubeaccess::server_clock::ServerClock,
}

/// Whole seconds of `d` as i64, saturating (an `as` cast would wrap a huge
/// one negative: a skew margin that lengthens a Lease rather than
/// shortening it).
pub(super) fn secs_i64(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// An error with its causes, on one line (a TLS failure's reason is only in
/// the causes: "client error (Connect)" alone says nothing).
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_seconds_saturate_rather_than_wrapping_negative() {
        assert_eq!(secs_i64(Duration::MAX), i64::MAX);
        assert_eq!(secs_i64(Duration::from_secs(5)), 5);
    }
}
