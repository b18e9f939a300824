//! A fleet's ordinary life, as `run` sees it: planned maintenance is not a
//! failure (the graces), and when `run` may start a swap by itself (its
//! window, the delay between swaps, the cap on failed swaps of one voter,
//! and the healthy period a host it replaced needs before it stands by).
//!
//! Everything takes the clock as an input (unix seconds); nothing here reads
//! a clock, a file or the network. A named time zone is resolved by the
//! shell when it reads its settings and handed in as a [`TimeZone`].

use crate::view::SwapRecord;
use jiff::{Timestamp, civil::Date, tz::TimeZone};
use serde::{Deserialize, Serialize};

use crate::settings::Settings;
use crate::view::FleetView;
use protocol::view::{LeaseFacts, NodeFacts};

// === Graces ===

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

/// A time for people: RFC 3339, in `zone` where given (with its name), else
/// in UTC; unix seconds where the time is out of range.
pub(crate) fn show_time(t: i64, zone: Option<&TimeZone>) -> String {
    match (Timestamp::from_second(t), zone) {
        (Ok(ts), Some(z)) => ts.to_zoned(z.clone()).to_string(),
        (Ok(ts), None) => ts.to_string(),
        (Err(_), _) => format!("{t} (unix seconds)"),
    }
}

// === Windows ===

/// The days of the week as [`Window`] names them, Sunday first (kured's
/// numbers: 0 is Sunday).
pub const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// When `run` may start a swap by itself, in kured's form: days of the week,
/// a start and an end time of day, and a time zone. An end before the start
/// spans midnight: the window opens on one of its days and closes the next
/// morning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Which days it opens on, Sunday first.
    days: [bool; 7],
    /// Opens at (seconds into the day).
    start: u32,
    /// Closes at (seconds into the day, up to 86 400).
    end: u32,
    /// The zone its times are in.
    zone: TimeZone,
    /// The zone's name as given.
    zone_name: String,
}

/// A window that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// A day that is none of `DAYS` (nor a full or two-letter name, nor 0 to 6).
    #[error(
        "{0:?} is not a day of the week (sun..sat, sunday..saturday, su..sa or 0..6, 0 is Sunday)"
    )]
    Day(String),
    /// A time of day that is not `HH:MM` or `HH:MM:SS`.
    #[error("{0:?} is not a time of day (HH:MM or HH:MM:SS, 24-hour; 24:00 only as an end)")]
    Time(String),
    /// Start and end are the same time.
    #[error("the window opens and closes at the same time ({0}); for all day use 00:00 to 24:00")]
    Empty(String),
}

impl Window {
    /// A window on `days` (every day when empty) from `start` to `end` in
    /// `zone`, whose name as given is `zone_name` (for messages).
    pub fn new(
        days: &[String],
        start: &str,
        end: &str,
        zone: TimeZone,
        zone_name: &str,
    ) -> Result<Self, WindowError> {
        let mut set = [days.is_empty(); 7];
        for d in days {
            set[parse_day(d).ok_or_else(|| WindowError::Day(d.clone()))?] = true;
        }
        let start_s = parse_time_of_day(start)
            .filter(|s| *s < 86_400)
            .ok_or_else(|| WindowError::Time(start.into()))?;
        let end_s = parse_time_of_day(end).ok_or_else(|| WindowError::Time(end.into()))?;
        if start_s == end_s {
            return Err(WindowError::Empty(start.into()));
        }
        Ok(Self {
            days: set,
            start: start_s,
            end: end_s,
            zone,
            zone_name: zone_name.into(),
        })
    }

    /// The zone the window's times are in.
    pub fn zone(&self) -> &TimeZone {
        &self.zone
    }

    /// The day of the week (Sunday = 0), the seconds into the day and the
    /// date of `t` in the window's zone; `None` for a time out of range.
    fn local(&self, t: i64) -> Option<(usize, u32, Date)> {
        let z = Timestamp::from_second(t).ok()?.to_zoned(self.zone.clone());
        let day = usize::from(z.weekday().to_sunday_zero_offset().unsigned_abs());
        let tm = z.time();
        let secs = u32::from(tm.hour().unsigned_abs()) * 3600
            + u32::from(tm.minute().unsigned_abs()) * 60
            + u32::from(tm.second().unsigned_abs());
        Some((day, secs, z.date()))
    }

    /// Whether `t` (unix seconds) is inside the window.
    pub fn contains(&self, t: i64) -> bool {
        let Some((day, secs, _)) = self.local(t) else {
            return false;
        };
        if self.start < self.end {
            self.days[day] && self.start <= secs && secs < self.end
        } else {
            (self.days[day] && secs >= self.start) || (self.days[(day + 6) % 7] && secs < self.end)
        }
    }

    /// The first time at or after `t` inside the window; `None` if it never
    /// opens in the next eight days (a zone whose clocks skip the start on
    /// every allowed day) or the time is out of range.
    pub fn next_open(&self, t: i64) -> Option<i64> {
        if self.contains(t) {
            return Some(t);
        }
        let (_, _, mut date) = self.local(t)?;
        let (h, m, s) = (self.start / 3600, self.start / 60 % 60, self.start % 60);
        for _ in 0..=8 {
            let day = usize::from(date.weekday().to_sunday_zero_offset().unsigned_abs());
            if self.days[day] {
                let at = date
                    .at(
                        i8::try_from(h).ok()?,
                        i8::try_from(m).ok()?,
                        i8::try_from(s).ok()?,
                        0,
                    )
                    .to_zoned(self.zone.clone())
                    .ok()?
                    .timestamp()
                    .as_second();
                if at >= t && self.contains(at) {
                    return Some(at);
                }
            }
            date = date.tomorrow().ok()?;
        }
        None
    }

    /// Why a swap asked to keep to the window (`swap --in-window`) may not
    /// start at `now`, with when it next may; `None` inside the window.
    pub fn closed_at(&self, now: i64) -> Option<String> {
        if self.contains(now) {
            return None;
        }
        Some(match self.next_open(now) {
            Some(t) => format!(
                "outside the window ({}): it next opens at {}",
                self.describe(),
                show_time(t, Some(&self.zone))
            ),
            None => format!(
                "outside the window ({}), which never opens",
                self.describe()
            ),
        })
    }

    /// The window in words: `mon,tue 22:00:00-06:00:00 Europe/Berlin`.
    pub fn describe(&self) -> String {
        let days: Vec<&str> = (0..7).filter(|d| self.days[*d]).map(|d| DAYS[d]).collect();
        let hms = |s: u32| format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
        format!(
            "{} {}-{} {}",
            days.join(","),
            hms(self.start),
            hms(self.end),
            self.zone_name
        )
    }
}

fn parse_day(raw: &str) -> Option<usize> {
    let d = raw.trim().to_ascii_lowercase();
    if let Ok(n) = d.parse::<usize>() {
        return (n < 7).then_some(n);
    }
    const FULL: [&str; 7] = [
        "sunday",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
    ];
    (0..7).find(|i| d == FULL[*i] || d == DAYS[*i] || d == FULL[*i][..2])
}

fn parse_time_of_day(raw: &str) -> Option<u32> {
    let parts: Vec<&str> = raw.trim().split(':').collect();
    if !(2..=3).contains(&parts.len()) || parts.iter().any(|p| p.len() != 2) {
        return None;
    }
    let num = |p: &str| {
        p.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| p.parse::<u32>().ok())
            .flatten()
    };
    let (h, m) = (num(parts[0])?, num(parts[1])?);
    let s = match parts.get(2) {
        Some(p) => num(p)?,
        None => 0,
    };
    if m > 59 || s > 59 || h > 24 || (h == 24 && (m, s) != (0, 0)) {
        return None;
    }
    Some(h * 3600 + m * 60 + s)
}

/// A zone that needs no zone database: `UTC` (or `Z`) and fixed offsets
/// such as `+02:00`, `-05:30` or `+0200`. `None` for anything else (a named
/// zone: the shell resolves it from the system's zone database).
pub fn fixed_zone(name: &str) -> Option<TimeZone> {
    let n = name.trim();
    if n.eq_ignore_ascii_case("utc") || n == "Z" {
        return Some(TimeZone::UTC);
    }
    let (sign, rest) = match n.as_bytes().first()? {
        b'+' => (1, &n[1..]),
        b'-' => (-1, &n[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    let ok_shape = matches!(rest.len(), 4 | 5)
        && digits.len() == 4
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (rest.len() == 4 || rest.as_bytes()[2] == b':');
    if !ok_shape {
        return None;
    }
    let h: i32 = digits[..2].parse().ok()?;
    let m: i32 = digits[2..].parse().ok()?;
    if h > 23 || m > 59 {
        return None;
    }
    let offset = jiff::tz::Offset::from_seconds(sign * (h * 3600 + m * 60)).ok()?;
    Some(TimeZone::fixed(offset))
}

// === Pacing ===

/// How many swap endings the Lease keeps for `run`'s pacing.
pub const ENDINGS_KEPT: usize = 16;

/// How a swap ended, kept on the Lease (the last [`ENDINGS_KEPT`]) so that
/// `run` can pace itself across controller restarts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ending {
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
pub fn record_ending(raw: Option<&str>, e: Ending) -> String {
    let mut list: Vec<Ending> = raw
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
pub fn endings_of(lease: &LeaseFacts) -> Vec<Ending> {
    {
        let mut list: Vec<Ending> = lease
            .endings
            .as_deref()
            .and_then(|r| serde_json::from_str(r).ok())
            .unwrap_or_default();
        if let Some(last) = lease.last()
            && !list.iter().any(|e| e.swap == last.swap && e.at == last.at)
        {
            list.push(Ending {
                swap: last.swap,
                out: last.out,
                at: last.at,
                failed: !matches!(last.outcome, crate::action::Outcome::Done { .. }),
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
    let endings = v
        .lease
        .as_ref()
        .map(LeaseFacts::endings)
        .unwrap_or_default();
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
        .as_ref()?
        .endings()
        .into_iter()
        .filter(|e| e.out == n.name && !e.failed)
        .map(|e| e.at)
        .max()?;
    // No known Ready time: counted from now (the kubelet always writes one).
    let since = n.ready_since.unwrap_or(v.now).max(replaced);
    Some(since.saturating_add(v.settings.standby_min_healthy))
}

#[cfg(test)]
mod tests;
