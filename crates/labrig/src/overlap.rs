//! Were `k3s.service` and `k3s-agent.service` ever running at the same time?
//! Answered from systemd itself: its journal.
//!
//! More in docs/internals.md, "labrig: overlap".

use serde_json::Value;

/// Errors of reading the units' history.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A change did not start from the state the last one ended in: records
    /// are missing (journald dropped some, or the log level was not debug
    /// when the unit changed), so the history cannot be trusted.
    #[error(
        "the journal's record of {} is incomplete: it was {was} when a change \
         {} -> {} was logged (boot {}, at {} µs)",
        change.unit, change.from, change.to, change.boot, change.at_us
    )]
    Gap {
        /// The unit's state as replayed so far.
        was: String,
        /// The change that does not follow from it.
        change: Box<Change>,
    },
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One state change of a unit, as systemd logged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The unit (`k3s.service`).
    pub unit: String,
    /// The boot it happened in (`_BOOT_ID`).
    pub boot: String,
    /// When, in µs of the boot's monotonic clock (`__MONOTONIC_TIMESTAMP`).
    pub at_us: u64,
    /// The state before (`dead`, `start`, `running`, …).
    pub from: String,
    /// The state after.
    pub to: String,
}

/// A stretch in which both units were running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The boot.
    pub boot: String,
    /// The change that made both running.
    pub began: Change,
    /// The change that ended it, if it ended before the records do.
    pub ended: Option<Change>,
}

/// Whether a service state counts as running (anything but `dead` and
/// `failed`; the `*-before-auto-restart` and `dead-resources-pinned` states
/// of newer systemd are inactive too). Unknown states count as running, so
/// a state systemd adds later errs towards reporting an overlap.
pub fn is_running(state: &str) -> bool {
    !matches!(
        state,
        "dead"
            | "failed"
            | "dead-before-auto-restart"
            | "failed-before-auto-restart"
            | "dead-resources-pinned"
    )
}

fn field<'a>(r: &'a Value, name: &str) -> Option<&'a str> {
    r.get(name).and_then(Value::as_str)
}

/// The state changes of `units` in journal records (`journalctl -o json`
/// lines, in the journal's order), oldest first.
pub fn changes(records: &[Value], units: &[&str]) -> Vec<Change> {
    records
        .iter()
        .filter_map(|r| {
            // Only systemd itself, about the unit: a process of the unit
            // could print the same words.
            if field(r, "_PID") != Some("1") {
                return None;
            }
            let unit = field(r, "UNIT")?;
            if !units.contains(&unit) {
                return None;
            }
            let msg = field(r, "MESSAGE")?;
            let rest = msg.strip_prefix(unit)?.strip_prefix(": Changed ")?;
            let (from, to) = rest.split_once(" -> ")?;
            Some(Change {
                unit: unit.to_string(),
                boot: field(r, "_BOOT_ID").unwrap_or_default().to_string(),
                at_us: field(r, "__MONOTONIC_TIMESTAMP")
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0),
                from: from.to_string(),
                to: to.trim().to_string(),
            })
        })
        .collect()
}

/// The stretches in which units `a` and `b` were both running, replayed
/// from `changes` (in the journal's order). Each boot starts with both dead.
///
/// A change from `dead` while the unit was in another state is systemd
/// re-reading its state after `daemon-reload` (it logs the restored state as
/// a change from a fresh unit's `dead`), not a gap.
pub fn overlaps(changes: &[Change], a: &str, b: &str) -> Result<Vec<Overlap>> {
    let mut out = Vec::new();
    let mut boot = None::<&str>;
    let (mut sa, mut sb) = ("dead".to_string(), "dead".to_string());
    let mut open: Option<Overlap> = None;
    for c in changes {
        if boot != Some(c.boot.as_str()) {
            // A new boot: whatever ran before ended with the last one.
            if let Some(o) = open.take() {
                out.push(o);
            }
            boot = Some(c.boot.as_str());
            sa = "dead".into();
            sb = "dead".into();
        }
        let state = if c.unit == a {
            &mut sa
        } else if c.unit == b {
            &mut sb
        } else {
            continue;
        };
        if *state != c.from && c.from != "dead" {
            return Err(Error::Gap {
                was: state.clone(),
                change: Box::new(c.clone()),
            });
        }
        *state = c.to.clone();
        let both = is_running(&sa) && is_running(&sb);
        match (&mut open, both) {
            (None, true) => {
                open = Some(Overlap {
                    boot: c.boot.clone(),
                    began: c.clone(),
                    ended: None,
                })
            }
            (Some(o), false) => {
                o.ended = Some(c.clone());
                out.extend(open.take());
            }
            _ => {}
        }
    }
    out.extend(open);
    Ok(out)
}

/// Reads a lab host's journal and returns when `k3s.service` and
/// `k3s-agent.service` were running together (empty: never).
pub fn of_k3s_units(
    m: &crate::machine::Machine,
    deadline: std::time::Duration,
) -> anyhow::Result<Vec<Overlap>> {
    let (a, b) = ("k3s.service", "k3s-agent.service");
    let records = m.journal(&[a, b], deadline)?;
    Ok(overlaps(&changes(&records, &[a, b]), a, b)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(unit: &str, at: u64, from: &str, to: &str) -> Value {
        json!({
            "_PID": "1", "UNIT": unit, "_BOOT_ID": "b1",
            "__MONOTONIC_TIMESTAMP": at.to_string(),
            "MESSAGE": format!("{unit}: Changed {from} -> {to}"),
        })
    }

    const A: &str = "k3s.service";
    const B: &str = "k3s-agent.service";

    fn check(records: &[Value]) -> Result<Vec<Overlap>> {
        overlaps(&changes(records, &[A, B]), A, B)
    }

    #[test]
    fn one_unit_stopped_before_the_other_starts_is_no_overlap() {
        let r = [
            rec(A, 1, "dead", "start"),
            rec(A, 2, "start", "running"),
            rec(A, 3, "running", "stop-sigterm"),
            rec(A, 4, "stop-sigterm", "dead"),
            rec(B, 5, "dead", "condition"),
            rec(B, 6, "condition", "start"),
            rec(B, 7, "start", "running"),
        ];
        assert_eq!(check(&r).unwrap(), vec![]);
    }

    #[test]
    fn a_start_while_the_other_is_still_stopping_is_an_overlap() {
        let r = [
            rec(A, 1, "dead", "running"),
            rec(A, 2, "running", "stop-sigterm"),
            rec(B, 3, "dead", "condition"),
            rec(A, 4, "stop-sigterm", "dead"),
        ];
        let o = check(&r).unwrap();
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].began.at_us, 3);
        assert_eq!(o[0].ended.as_ref().unwrap().at_us, 4);
    }

    #[test]
    fn a_crash_looping_unit_counts_as_running_between_its_restarts() {
        let r = [
            rec(A, 1, "dead", "running"),
            rec(A, 2, "running", "failed"),
            rec(A, 3, "failed", "auto-restart"),
            rec(B, 4, "dead", "start"),
        ];
        assert_eq!(check(&r).unwrap().len(), 1);
    }

    #[test]
    fn a_missing_record_is_an_error_not_a_pass() {
        let r = [
            rec(A, 1, "dead", "start"),
            // `start -> running` is missing.
            rec(A, 3, "running", "stop-sigterm"),
        ];
        assert!(matches!(check(&r), Err(Error::Gap { .. })));
    }

    #[test]
    fn a_new_boot_starts_with_both_units_dead() {
        let mut later = rec(B, 1, "dead", "running");
        later["_BOOT_ID"] = json!("b2");
        let r = [rec(A, 5, "dead", "running"), later];
        assert_eq!(check(&r).unwrap(), vec![]);
    }

    #[test]
    fn records_from_other_processes_or_units_are_ignored() {
        let mut fake = rec(B, 2, "dead", "running");
        fake["_PID"] = json!("4242");
        let r = [
            rec(A, 1, "dead", "running"),
            fake,
            rec("other.service", 3, "dead", "running"),
        ];
        assert_eq!(check(&r).unwrap(), vec![]);
    }
}
