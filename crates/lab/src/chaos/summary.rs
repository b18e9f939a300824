//! What a campaign did, at a glance: the swaps and how each ended, the
//! faults by kind, the clients' operations, the longest stalls, and the
//! violations (which must be none), with the seed to replay.

use std::collections::BTreeMap;

use super::{linear::Counts, schedule::FaultKind};

/// How one planned swap ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The voter was replaced.
    Done,
    /// It wound down to the fleet as it was after a failure.
    RolledBack,
    /// A gate shut before anything changed (or it wound down from one).
    Refused,
    /// It stopped part-way and, resumed as often as allowed, was aborted.
    Aborted,
    /// No pair to swap (no standby or no voter at that moment).
    Skipped,
    /// It was still not over within the campaign's bound: a violation.
    Unfinished,
}

impl Ending {
    /// Its name in the summary.
    pub fn name(self) -> &'static str {
        match self {
            Ending::Done => "done",
            Ending::RolledBack => "rolled back",
            Ending::Refused => "refused",
            Ending::Aborted => "aborted",
            Ending::Skipped => "skipped",
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
    /// How it ended.
    pub ending: Ending,
    /// How often a stopped swap was resumed.
    pub resumes: u32,
    /// Seconds from its start to its end.
    pub secs: u64,
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
    /// How many swaps ended `e`.
    pub fn ended(&self, e: Ending) -> usize {
        self.swaps.iter().filter(|s| s.ending == e).count()
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
            "swaps: {} attempted, {} done, {} rolled back, {} refused, {} aborted, {} skipped, {} unfinished; {} resumes",
            self.swaps.len() - self.ended(Ending::Skipped),
            self.ended(Ending::Done),
            self.ended(Ending::RolledBack),
            self.ended(Ending::Refused),
            self.ended(Ending::Aborted),
            self.ended(Ending::Skipped),
            self.ended(Ending::Unfinished),
            self.swaps.iter().map(|s| s.resumes).sum::<u32>(),
        ));
        for (i, s) in self.swaps.iter().enumerate() {
            out.push(format!(
                "  swap {}: {} -> {}: {} in {} s{}",
                i + 1,
                s.out,
                s.incoming,
                s.ending.name(),
                s.secs,
                if s.resumes > 0 {
                    format!(" ({} resumes)", s.resumes)
                } else {
                    String::new()
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
                "  {:<21} {} fired, {} deferred, {} skipped",
                k.name(),
                t.fired,
                t.deferred,
                t.skipped
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
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} / {} | {} s | {} s | {} | {} s |",
            self.seed,
            self.swaps.len() - self.ended(Ending::Skipped),
            self.ended(Ending::Done),
            self.ended(Ending::RolledBack) + self.ended(Ending::Refused),
            self.ended(Ending::Aborted),
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
        for (ending, resumes) in [
            (Ending::Done, 0),
            (Ending::Done, 1),
            (Ending::RolledBack, 0),
            (Ending::Skipped, 0),
        ] {
            s.swaps.push(SwapLine {
                out: "server-1".into(),
                incoming: "agent-1".into(),
                ending,
                resumes,
                secs: 90,
            });
        }
        s.faults.insert(
            FaultKind::Cut,
            FaultTally {
                fired: 3,
                deferred: 1,
                skipped: 1,
            },
        );
        s.faults.insert(
            FaultKind::Reboot,
            FaultTally {
                fired: 2,
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
        assert!(
            lines[1].starts_with("swaps: 3 attempted, 2 done, 1 rolled back, 0 refused, 0 aborted, 1 skipped, 0 unfinished; 1 resumes"),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l == "faults: 5 fired (1 deferred), 1 skipped"),
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
