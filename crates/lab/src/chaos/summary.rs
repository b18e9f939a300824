//! What a campaign did, at a glance: the swaps and how each ended, the
//! faults by kind, the clients' operations, the longest stalls, and the
//! violations (which must be none), with the seed to replay.

use std::collections::BTreeMap;

use super::{linear::Counts, schedule::FaultKind};

/// How one attempt of a planned swap ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The voter was replaced.
    Done,
    /// A gate shut before anything changed (or it wound down from one).
    Refused,
    /// It wound down to the fleet as it was: after a failure, or aborted
    /// once it had stopped part-way more often than it was resumed.
    WoundDown,
    /// It was not over within the campaign's bound, or there was no pair
    /// to swap: a violation.
    Unfinished,
}

impl Ending {
    /// Its name in the summary.
    pub fn name(self) -> &'static str {
        match self {
            Ending::Done => "done",
            Ending::Refused => "refused",
            Ending::WoundDown => "wound down",
            Ending::Unfinished => "unfinished",
        }
    }
}

/// One swap of the campaign.
#[derive(Debug, Clone)]
pub struct SwapLine {
    /// The outgoing voter.
    pub out: String,
    /// The incoming standby.
    pub incoming: String,
    /// How it ended under its faults.
    pub ending: Ending,
    /// How often a stopped swap was resumed.
    pub resumes: u32,
    /// Seconds from its start to its end.
    pub secs: u64,
    /// When it did not end done: how many attempts with no fault active
    /// followed, and how the last ended (a violation unless done).
    pub retried: Option<(u32, Ending)>,
}

impl SwapLine {
    /// Whether it ended done, under its faults or once they healed.
    pub fn done_at_last(&self) -> bool {
        self.ending == Ending::Done || matches!(self.retried, Some((_, Ending::Done)))
    }
}

/// What happened to the faults of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultTally {
    /// Fired.
    pub fired: u32,
    /// Of those, fired late: another member was down by the schedule, or
    /// the host was in another fault.
    pub deferred: u32,
    /// Not fired: no host in that role, no controller to kill, nothing on
    /// the host to act on (a freeze of etcd on a standby), or the fault
    /// could not be done (said in the log).
    pub skipped: u32,
    /// Of a clock fault's, those the product noticed while it lasted (its
    /// log says the clock is off the API server's).
    pub noticed: u32,
}

/// The whole campaign.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The seed.
    pub seed: u64,
    /// Where its schedule is (for `--replay`).
    pub schedule: String,
    /// The swaps, in order.
    pub swaps: Vec<SwapLine>,
    /// The faults by kind.
    pub faults: BTreeMap<FaultKind, FaultTally>,
    /// The clients' operations.
    pub ops: Counts,
    /// The longest time no quorum read answered, in milliseconds.
    pub longest_quorum_stall_ms: u64,
    /// Everything that broke; must be empty.
    pub violations: Vec<String>,
    /// How long it took, in seconds.
    pub secs: u64,
}

impl Summary {
    /// How many swaps ended `e` under their faults.
    pub fn ended(&self, e: Ending) -> usize {
        self.swaps.iter().filter(|s| s.ending == e).count()
    }

    /// How many swaps were tried again with no fault active.
    pub fn retried(&self) -> usize {
        self.swaps.iter().filter(|s| s.retried.is_some()).count()
    }

    /// Faults fired, in all.
    pub fn fired(&self) -> u32 {
        self.faults.values().map(|t| t.fired).sum()
    }

    /// The summary, line by line.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "chaos: seed {} ({} s); replay: fleet-role-lab chaos --replay {}",
            self.seed, self.secs, self.schedule
        )];
        out.push(format!(
            "swaps: {} done, {} refused, {} wound down, {} unfinished; {} resumes",
            self.ended(Ending::Done),
            self.ended(Ending::Refused),
            self.ended(Ending::WoundDown),
            self.ended(Ending::Unfinished),
            self.swaps.iter().map(|s| s.resumes).sum::<u32>(),
        ));
        out.push(format!(
            "retried with no fault active: {}, {} of them done",
            self.retried(),
            self.swaps
                .iter()
                .filter(|s| matches!(s.retried, Some((_, Ending::Done))))
                .count()
        ));
        for (i, s) in self.swaps.iter().enumerate() {
            out.push(format!(
                "  swap {}: {} -> {}: {} in {} s{}{}",
                i + 1,
                s.out,
                s.incoming,
                s.ending.name(),
                s.secs,
                if s.resumes > 0 {
                    format!(" ({} resumes)", s.resumes)
                } else {
                    String::new()
                },
                match s.retried {
                    Some((n, e)) => format!("; then {} after {n} tries with no fault", e.name()),
                    None => String::new(),
                }
            ));
        }
        out.push(format!(
            "faults: {} fired ({} deferred), {} skipped",
            self.fired(),
            self.faults.values().map(|t| t.deferred).sum::<u32>(),
            self.faults.values().map(|t| t.skipped).sum::<u32>(),
        ));
        for (k, t) in &self.faults {
            out.push(format!(
                "  {:<21} {} fired, {} deferred, {} skipped{}",
                k.name(),
                t.fired,
                t.deferred,
                t.skipped,
                if k.on_clock() {
                    format!(", {} noticed", t.noticed)
                } else {
                    String::new()
                }
            ));
        }
        out.push(format!(
            "operations: {} ok, {} failed, {} unknown; longest write stall {} ms; longest quorum-read stall {} ms",
            self.ops.ok,
            self.ops.failed,
            self.ops.unknown,
            self.ops.longest_write_stall_ms,
            self.longest_quorum_stall_ms
        ));
        out.push(format!("violations: {}", self.violations.len()));
        out.extend(self.violations.iter().map(|v| format!("  VIOLATION: {v}")));
        out
    }

    /// One row of docs/testing.md's campaign table.
    pub fn row(&self) -> String {
        format!(
            "| {} | {} | {} / {} / {} / {} | {} | {} | {} | {} / {} / {} | {} s | {} s | {} | {} s |",
            self.seed,
            self.swaps.len(),
            self.ended(Ending::Done),
            self.ended(Ending::Refused),
            self.ended(Ending::WoundDown),
            self.ended(Ending::Unfinished),
            self.retried(),
            self.swaps.iter().map(|s| s.resumes).sum::<u32>(),
            self.fired(),
            self.ops.ok,
            self.ops.failed,
            self.ops.unknown,
            self.ops.longest_write_stall_ms / 1000,
            self.longest_quorum_stall_ms / 1000,
            self.violations.len(),
            self.secs,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a_summary() -> Summary {
        let mut s = Summary {
            seed: 42,
            schedule: "x.json".into(),
            ..Default::default()
        };
        for (ending, resumes, retried) in [
            (Ending::Done, 0, None),
            (Ending::Done, 1, None),
            (Ending::WoundDown, 0, Some((1, Ending::Done))),
            (Ending::Refused, 0, Some((3, Ending::Refused))),
        ] {
            s.swaps.push(SwapLine {
                out: "server-1".into(),
                incoming: "agent-1".into(),
                ending,
                resumes,
                secs: 90,
                retried,
            });
        }
        s.faults.insert(
            FaultKind::Cut,
            FaultTally {
                fired: 3,
                deferred: 1,
                skipped: 1,
                ..Default::default()
            },
        );
        s.faults.insert(
            FaultKind::Reboot,
            FaultTally {
                fired: 2,
                ..Default::default()
            },
        );
        s.faults.insert(
            FaultKind::HostClock,
            FaultTally {
                fired: 2,
                noticed: 1,
                ..Default::default()
            },
        );
        s
    }

    #[test]
    fn the_summary_counts_swaps_by_ending_and_faults_by_kind_and_names_the_replay() {
        let s = a_summary();
        let lines = s.lines();
        assert!(lines[0].contains("--replay x.json"), "{lines:?}");
        assert_eq!(
            lines[1],
            "swaps: 2 done, 1 refused, 1 wound down, 0 unfinished; 1 resumes"
        );
        assert_eq!(lines[2], "retried with no fault active: 2, 1 of them done");
        assert!(
            lines[6].ends_with("refused in 90 s; then refused after 3 tries with no fault"),
            "{lines:?}"
        );
        let done: Vec<bool> = s.swaps.iter().map(SwapLine::done_at_last).collect();
        assert_eq!(done, [true, true, true, false]);
        assert!(
            lines
                .iter()
                .any(|l| l == "faults: 7 fired (1 deferred), 1 skipped"),
            "{lines:?}"
        );
        // Only a clock fault says whether the product noticed it.
        assert!(
            lines
                .iter()
                .any(|l| l.trim_start().starts_with("host-clock")
                    && l.ends_with("2 fired, 0 deferred, 0 skipped, 1 noticed")),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.trim_start().starts_with("cut") && l.ends_with("1 skipped")),
            "{lines:?}"
        );
        assert!(lines.iter().any(|l| l == "violations: 0"), "{lines:?}");
    }

    #[test]
    fn every_violation_gets_a_line_of_its_own() {
        let mut s = a_summary();
        s.violations = vec!["a".into(), "b".into()];
        let lines = s.lines();
        assert!(lines.iter().any(|l| l == "violations: 2"));
        assert_eq!(lines.iter().filter(|l| l.contains("VIOLATION")).count(), 2);
        assert!(s.row().ends_with("| 2 | 0 s |"), "{}", s.row());
    }
}
