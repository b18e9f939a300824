//! Planned maintenance is not a failure: the grace a NotReady voter is
//! given before `run` replaces it, longer while its Node shows maintenance
//! (kured's or system-upgrade-controller's marks, or fleet-role's own
//! annotation with an until-time), and never more than the cap.
//!
//! Everything takes the clock as an input (unix seconds); nothing here reads
//! a clock, a file or the network.

use jiff::Timestamp;
use serde::Serialize;

use crate::settings::Settings;
use fleetfacts::window::show_time;
use protocol::view::NodeFacts;

/// Which grace a NotReady voter is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GraceKind {
    /// No mark of planned maintenance: [`Settings::grace_period`].
    Failure,
    /// A mark of planned maintenance: up to [`Settings::maintenance_grace`].
    Maintenance,
}

/// The grace a NotReady voter is given, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grace {
    /// Which grace.
    pub kind: GraceKind,
    /// From when (unix seconds) `run` may replace the voter.
    pub deadline: i64,
    /// Why this grace, in words for `status` and `run --dry-run`.
    pub why: String,
}

/// The grace a voter NotReady since `since` is given before `run` replaces
/// it.
///
/// A voter that shows planned maintenance is given up to
/// [`Settings::maintenance_grace`] instead of [`Settings::grace_period`]:
/// cordoned (`spec.unschedulable`: `kubectl drain`, kured and
/// system-upgrade-controller's Plans with `cordon` or `drain` all cordon
/// first), kured's [`protocol::names::KURED_REBOOT_IN_PROGRESS`], or the
/// operator's `<prefix>/maintenance` annotation, whose value is the time the
/// maintenance should be over (RFC 3339 with an offset, such as
/// `2026-12-02T05:00:00Z`, or unix seconds): that mark lasts until then,
/// never past the maintenance grace. An until-time that cannot be read is
/// ignored and said so.
///
/// Any `patch nodes` holder can write these marks, so a mark can only delay
/// a replacement, by at most the maintenance grace; it never causes one, and
/// never shortens the ordinary grace.
pub fn grace_for(n: &NodeFacts, s: &Settings, since: i64) -> Grace {
    let ordinary = since.saturating_add(s.grace_period);
    let longest = since.saturating_add(s.maintenance_grace.max(s.grace_period));
    let mut marks: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut deadline = ordinary;
    if n.cordoned {
        marks.push("it is cordoned".into());
        deadline = longest;
    }
    if n.maintenance.kured_reboot.is_some() {
        marks.push(format!(
            "kured is rebooting it ({})",
            protocol::names::KURED_REBOOT_IN_PROGRESS
        ));
        deadline = longest;
    }
    if let Some(raw) = n.maintenance.until.as_deref() {
        let key = s.names.maintenance();
        match parse_until(raw) {
            Some(until) if until > ordinary => {
                marks.push(format!("{key} until {}", show_time(until, None)));
                deadline = deadline.max(until.min(longest));
            }
            Some(until) => notes.push(format!(
                "its {key} ended at {}, within the ordinary grace",
                show_time(until, None)
            )),
            None => notes.push(format!(
                "its {key} {:?} is not a time (RFC 3339 or unix seconds) and is ignored",
                protocol::text::one_line(raw)
            )),
        }
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!("; {}", notes.join("; "))
    };
    if marks.is_empty() {
        Grace {
            kind: GraceKind::Failure,
            deadline,
            why: format!("the ordinary grace of {} s{notes}", s.grace_period),
        }
    } else {
        Grace {
            kind: GraceKind::Maintenance,
            deadline,
            why: format!(
                "a maintenance grace (at most {} s): {}{notes}",
                s.maintenance_grace.max(s.grace_period),
                marks.join(", ")
            ),
        }
    }
}

/// An until-time: unix seconds, or RFC 3339 with an offset.
fn parse_until(raw: &str) -> Option<i64> {
    let raw = raw.trim();
    if let Ok(secs) = raw.parse::<i64>() {
        return Some(secs);
    }
    raw.parse::<Timestamp>().ok().map(|t| t.as_second())
}

#[cfg(test)]
mod tests;
