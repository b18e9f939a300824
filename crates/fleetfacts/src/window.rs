//! `run`'s window, in kured's form (days of the week, a start and an end
//! time of day, a time zone), and times shown for people. Nothing here
//! reads a clock: a named zone is resolved by the shell and handed in.

use jiff::{Timestamp, civil::Date, tz::TimeZone};

/// A time for people: RFC 3339, in `zone` where given (with its name), else
/// in UTC; unix seconds where the time is out of range.
pub fn show_time(t: i64, zone: Option<&TimeZone>) -> String {
    match (Timestamp::from_second(t), zone) {
        (Ok(ts), Some(z)) => ts.to_zoned(z.clone()).to_string(),
        (Ok(ts), None) => ts.to_string(),
        (Err(_), _) => format!("{t} (unix seconds)"),
    }
}

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

#[cfg(test)]
mod tests;
