//! When `run` may start a swap by itself: the endings the Lease keeps, the
//! settle time after any of them, the delay and back-off after a voter's
//! failed swaps and their cap, the window, and the healthy period a host it
//! replaced needs before it stands by again.
//!
//! Everything takes the clock as an input (unix seconds); nothing here reads
//! a clock, a file or the network.

use serde::{Deserialize, Serialize};

use crate::view::{FleetView, SwapRecord};
use fleetfacts::window::{Window, show_time};
use protocol::view::{LeaseFacts, NodeFacts};

/// How many swap endings the Lease keeps for `run`'s pacing.
pub const ENDINGS_KEPT: usize = 16;

/// How a swap ended, kept on the Lease (the last [`ENDINGS_KEPT`]) so that
/// `run` can pace itself across controller restarts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwapEnding {
    /// The swap id.
    pub swap: String,
    /// The outgoing Node.
    pub out: String,
    /// When it ended (unix seconds).
    pub at: i64,
    /// It wound down or stopped part-way instead of finishing.
    pub failed: bool,
}

/// `raw` (the Lease's endings, as JSON) with `e` added, keeping the last
/// [`ENDINGS_KEPT`]. An unreadable list is started afresh.
pub fn record_ending(raw: Option<&str>, e: SwapEnding) -> String {
    let mut list: Vec<SwapEnding> = raw
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or_default();
    list.push(e);
    let drop = list.len().saturating_sub(ENDINGS_KEPT);
    list.drain(..drop);
    serde_json::to_string(&list).expect("endings serialize")
}

/// The swap endings the Lease keeps (none if unreadable), with the last
/// swap's outcome where the list lacks it (a Lease written before the
/// list was kept).
pub fn endings_of(lease: &LeaseFacts) -> Vec<SwapEnding> {
    {
        let mut list: Vec<SwapEnding> = lease
            .endings
            .as_deref()
            .and_then(|r| serde_json::from_str(r).ok())
            .unwrap_or_default();
        if let Some(last) = lease.last()
            && !list.iter().any(|e| e.swap == last.swap && e.at == last.at)
        {
            list.push(SwapEnding {
                swap: last.swap,
                out: last.out,
                at: last.at,
                failed: !matches!(last.outcome, crate::record::Outcome::Done { .. }),
            });
        }
        list
    }
}

/// Whether `run` may start (or retry) a swap of a voter by itself now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pace {
    /// It may.
    Go,
    /// Not now.
    Wait {
        /// When it next may (unix seconds); `None`: not foreseeably (the
        /// window never opens).
        until: Option<i64>,
        /// Why not, with that time, in words.
        why: String,
    },
}

/// Whether `run` may start a swap of the voter `out` by itself at `v.now`:
///
/// - inside [`Settings::window`] (if one is set);
/// - [`Settings::settle`] after the last swap ended, whatever its outcome;
/// - after `k` failed swaps of `out` within [`Settings::retry_period`] (and
///   since its last successful one), not before
///   `retry_backoff * 2^(k-1)` after the last of them; after
///   [`Settings::retry_max`] of them, not until the oldest leaves the
///   period.
///
/// A swap run by hand does not ask.
pub fn pace(v: &FleetView, out: &str) -> Pace {
    let s = &v.settings;
    let now = v.now;
    let zone = s.window.as_ref().map(Window::zone);
    let mut reasons: Vec<String> = Vec::new();
    let mut ready = now;
    let endings = v.lease.as_ref().map(endings_of).unwrap_or_default();
    if let Some(last) = endings.iter().max_by_key(|e| e.at) {
        let t = last.at.saturating_add(s.settle);
        if now < t {
            reasons.push(format!(
                "settling for {} s after swap {}",
                s.settle,
                protocol::text::one_line(&last.swap)
            ));
            ready = ready.max(t);
        }
    }
    let succeeded = endings
        .iter()
        .filter(|e| e.out == out && !e.failed)
        .map(|e| e.at)
        .max();
    let mut failures: Vec<i64> = endings
        .iter()
        .filter(|e| {
            e.out == out
                && e.failed
                && e.at > now.saturating_sub(s.retry_period)
                && succeeded.is_none_or(|ok| e.at > ok)
        })
        .map(|e| e.at)
        .collect();
    failures.sort_unstable();
    let cap = usize::try_from(s.retry_max.max(1)).unwrap_or(usize::MAX);
    // A grow's endings name no outgoing voter: its failures count together.
    let who = if out.is_empty() {
        "the grows".to_string()
    } else {
        out.to_string()
    };
    if failures.len() >= cap {
        let t = failures[failures.len() - cap].saturating_add(s.retry_period);
        reasons.push(format!(
            "{who} failed {} times within {} s (the cap is {cap}); it is left alone until {}",
            failures.len(),
            s.retry_period,
            show_time(t, zone)
        ));
        ready = ready.max(t);
    } else if let Some(last) = failures.last() {
        let k = u32::try_from(failures.len() - 1)
            .unwrap_or(u32::MAX)
            .min(62);
        let wait = s
            .retry_backoff
            .saturating_mul(1_i64 << k)
            .min(s.retry_period);
        let t = last.saturating_add(wait);
        if now < t {
            reasons.push(format!(
                "{who} failed {} time(s) lately; backing off {wait} s after the last",
                failures.len()
            ));
            ready = ready.max(t);
        }
    }
    let mut until = Some(ready);
    if let Some(w) = &s.window {
        until = w.next_open(ready);
        if !w.contains(now) {
            reasons.push(format!("outside its window ({})", w.describe()));
        } else if until != Some(ready) {
            reasons.push(format!(
                "its window ({}) will have closed by then",
                w.describe()
            ));
        }
    }
    if until == Some(now) {
        return Pace::Go;
    }
    let when = match until {
        Some(t) => format!("it next may at {}", show_time(t, zone)),
        None => "its window never opens".to_string(),
    };
    Pace::Wait {
        until,
        why: format!("{}: {when}", reasons.join("; ")),
    }
}

/// From when a host `run` replaced may be chosen as a standby again:
/// [`Settings::standby_min_healthy`] after it was last Ready since, counted
/// from no earlier than its replacement's end. `None` for a host no kept
/// ending shows replaced.
pub fn standby_ready_at(v: &FleetView, n: &NodeFacts) -> Option<i64> {
    let replaced = v
        .lease
        .as_ref()
        .map(endings_of)?
        .into_iter()
        .filter(|e| e.out == n.name && !e.failed)
        .map(|e| e.at)
        .max()?;
    // No known Ready time: counted from now (the kubelet always writes one).
    let since = n.ready_since.unwrap_or(v.now).max(replaced);
    Some(since.saturating_add(v.settings.standby_min_healthy))
}

/// Until when a host `run` replaced still rests before it may stand by
/// ([`standby_ready_at`], while that is still to come): the one rule both
/// the choice of a standby and the note of who rests read.
pub fn resting_until(v: &FleetView, n: &NodeFacts) -> Option<i64> {
    standby_ready_at(v, n).filter(|t| v.now < *t)
}

#[cfg(test)]
mod tests;
