//! Why a swap waits, winds down or stops: each case a variant, so the
//! output's words are written once (their `Display`) and tests match on
//! the case, not on prose.

use std::fmt;

use serde::{Deserialize, Serialize};

use protocol::report::{Phase, ReportStep};
use protocol::text::one_line;

/// A write the controller guards with gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Write {
    /// The snapshot request and the promotion.
    Promotion,
    /// The cordon and the step-down of the outgoing voter.
    StepDown,
    /// The removal of the outgoing voter's member.
    Removal,
    /// The removal of a rolled-back incoming host's member.
    RemoveIncoming,
}

impl fmt::Display for Write {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Write::Promotion => "the promotion",
            Write::StepDown => "the step-down",
            Write::Removal => "the removal",
            Write::RemoveIncoming => "the removal of the rolled-back member",
        })
    }
}

/// What a healthy voter was needed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VoterFor {
    /// To take the swap's snapshot.
    Snapshot,
    /// For the incoming host to join.
    Join,
}

/// How far a promotion got before its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reached {
    /// The host reported nothing for it.
    NoReport,
    /// The host started it.
    Started,
    /// The host's member is a learner.
    Learner,
    /// The host reported `voter` but its Node is not a healthy voter.
    VoterNotHealthy,
    /// etcd lists its member as a voter, but k3s never marked its Node
    /// `EtcdIsVoter` (the etcd leader's k3s writes it).
    VoterInEtcdOnly,
}

impl fmt::Display for Reached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reached::NoReport => "it did not report",
            Reached::Started => "it started",
            Reached::Learner => "it is a learner",
            Reached::VoterNotHealthy => "it reported voter but the Node is not a healthy voter",
            Reached::VoterInEtcdOnly => {
                "etcd lists it as a voter, but k3s has not marked its Node EtcdIsVoter"
            }
        })
    }
}

/// Why a swap winds down (kept on the Lease in its `StopNote`, `fleetdecide::record`) or
/// stops (`fleetdecide`'s `Action::Stop`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "kebab-case")]
pub enum Reason {
    /// Gates shut right before a write: their failures.
    GatesShut {
        /// The failed gates, one line.
        failures: String,
    },
    /// Gates stayed shut before a write until its step timed out.
    GatesStayedShut {
        /// The write they guard.
        before: Write,
        /// The failed gates, one line.
        failures: String,
    },
    /// No healthy voter was there for a job.
    NoHealthyVoter {
        /// The job.
        to: VoterFor,
        /// The voter that did not count (the outgoing one).
        other_than: Option<String>,
    },
    /// A host reported its step refused or failed.
    HostReported {
        /// The host.
        node: String,
        /// The step.
        step: ReportStep,
        /// Refused or failed.
        phase: Phase,
        /// The host's reason, one line.
        reason: String,
    },
    /// A host did not report its step within the step's timeout.
    NotReported {
        /// The host.
        node: String,
        /// The step.
        step: ReportStep,
        /// The timeout, in seconds.
        secs: i64,
    },
    /// A promotion did not make a healthy voter within its timeout.
    NotVoter {
        /// The incoming host.
        node: String,
        /// The timeout, in seconds.
        secs: i64,
        /// How far it got.
        reached: Reached,
    },
    /// k3s did not remove a member within the step's timeout.
    MemberNotRemoved {
        /// The host whose member stays.
        node: String,
        /// The timeout, in seconds.
        secs: i64,
    },
    /// Pods stayed on the outgoing host past the drain's timeout.
    NotDrained {
        /// The outgoing host.
        node: String,
        /// The timeout, in seconds.
        secs: i64,
        /// The pods left, one line.
        pods: String,
    },
    /// Pods no controller owns are on the outgoing host, and the swap was
    /// not run with `--force`: evicted, they would be gone for good.
    Unmanaged {
        /// The outgoing host.
        node: String,
        /// The pods, one line.
        pods: String,
    },
    /// The host that finished was not Ready as an agent within the timeout.
    AgentNotReady {
        /// The host.
        node: String,
        /// The timeout, in seconds.
        secs: i64,
    },
    /// One reason, and then another on the way back (a rollback that failed
    /// after a failed promotion).
    Then {
        /// What made the swap wind down.
        first: Box<Reason>,
        /// What went wrong while it did.
        then: Box<Reason>,
    },
    /// A note on the Lease that does not parse (written by hand, or by
    /// another version): shown as it is, on one line.
    Unreadable {
        /// The raw note.
        raw: String,
    },
}

/// A step's name as a noun in a sentence.
fn noun(step: ReportStep) -> &'static str {
    match step {
        ReportStep::Snapshot => "snapshot",
        ReportStep::Promote => "promotion",
        ReportStep::StepDown => "step-down",
        ReportStep::Rollback => "rollback",
        ReportStep::Finish => "finish",
        ReportStep::Unknown | ReportStep::None => "step",
    }
}

/// A refusal or a failure in a sentence.
pub(super) fn phase_word(p: Phase) -> &'static str {
    if p == Phase::Refused {
        "refused"
    } else {
        "failed"
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::GatesShut { failures } => f.write_str(failures),
            Reason::GatesStayedShut { before, failures } => {
                write!(f, "the gates before {before} stayed shut: {failures}")
            }
            Reason::NoHealthyVoter { to, other_than } => {
                let other = other_than
                    .as_deref()
                    .map(|o| format!(" other than {o}"))
                    .unwrap_or_default();
                match to {
                    VoterFor::Snapshot => write!(f, "no healthy voter{other} to take the snapshot"),
                    VoterFor::Join => write!(f, "no healthy voter{other} to join"),
                }
            }
            Reason::HostReported {
                node,
                step,
                phase,
                reason,
            } => write!(
                f,
                "the {} of {node} {}: {reason}",
                noun(*step),
                phase_word(*phase)
            ),
            Reason::NotReported { node, step, secs } => {
                write!(
                    f,
                    "{node} did not report its {} within {secs} s",
                    noun(*step)
                )
            }
            Reason::NotVoter {
                node,
                secs,
                reached,
            } => write!(
                f,
                "{node} did not become a voter within {secs} s ({reached})"
            ),
            Reason::MemberNotRemoved { node, secs } => {
                write!(f, "k3s did not remove {node}'s member within {secs} s")
            }
            Reason::NotDrained { node, secs, pods } => write!(
                f,
                "pods stayed on {node} past the drain's {secs} s (a PodDisruptionBudget allows no eviction, or they did not terminate): {pods}"
            ),
            Reason::Unmanaged { node, pods } => write!(
                f,
                "pods on {node} that no controller owns would be gone for good once evicted, and the swap was not forced (as `kubectl drain` refuses them without --force): {pods}"
            ),
            Reason::AgentNotReady { node, secs } => {
                write!(f, "{node}'s agent was not Ready within {secs} s")
            }
            Reason::Then { first, then } => write!(f, "{first}; then {then}"),
            Reason::Unreadable { raw } => f.write_str(&one_line(raw)),
        }
    }
}

/// What a swap waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "for", rename_all = "kebab-case")]
pub enum Awaiting {
    /// A voter takes the swap's snapshot.
    Snapshot {
        /// The voter.
        node: String,
        /// The snapshot's name (the swap id).
        swap: String,
    },
    /// The incoming host promotes, with its last milestone.
    Promotion {
        /// The incoming host.
        node: String,
        /// Its last milestone, as reported.
        milestone: Option<&'static str>,
    },
    /// Gates shut before a write (the write waits for them).
    Gates {
        /// The write they guard.
        before: Write,
        /// The failed gates, one line.
        failures: String,
    },
    /// A Node the swap needs is not there.
    NoNode {
        /// The Node.
        node: String,
    },
    /// k3s removes a member.
    MemberRemoval {
        /// The host whose member goes.
        node: String,
    },
    /// k3s removes the member of a voter that is down.
    DownVoterRemoval {
        /// The down voter.
        node: String,
    },
    /// The outgoing host's evicted pods terminate.
    Drain {
        /// The outgoing host.
        node: String,
        /// The pods left, one line.
        pods: String,
    },
    /// The outgoing host steps down to etcd-only.
    StepDown {
        /// The outgoing host.
        node: String,
    },
    /// The outgoing host finishes as an agent.
    Finish {
        /// The outgoing host.
        node: String,
    },
    /// The incoming host rolls back to an agent.
    Rollback {
        /// The incoming host.
        node: String,
    },
}

impl fmt::Display for Awaiting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Awaiting::Snapshot { node, swap } => write!(f, "{node} takes a snapshot named {swap}"),
            Awaiting::Promotion {
                node,
                milestone: Some(m),
            } => write!(f, "{node} is promoting ({m})"),
            Awaiting::Promotion {
                node,
                milestone: None,
            } => write!(f, "{node} is promoting"),
            Awaiting::Gates { before, failures } => {
                write!(f, "the gates before {before}: {failures}")
            }
            Awaiting::NoNode { node } => write!(f, "no Node {node}"),
            Awaiting::MemberRemoval { node } => write!(f, "k3s removes {node}'s etcd member"),
            Awaiting::DownVoterRemoval { node } => {
                write!(f, "k3s removes the down voter {node}'s etcd member")
            }
            Awaiting::Drain { node, pods } => {
                write!(f, "the pods evicted from {node} terminate: {pods}")
            }
            Awaiting::StepDown { node } => write!(f, "{node} steps down to etcd-only"),
            Awaiting::Finish { node } => {
                write!(f, "{node} finishes as an agent (Ready, node Lease renewed)")
            }
            Awaiting::Rollback { node } => write!(f, "{node} rolls back to an agent"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_reads_as_a_sentence_naming_the_host_and_the_step() {
        let r = Reason::HostReported {
            node: "n4".into(),
            step: ReportStep::Promote,
            phase: Phase::Refused,
            reason: "no lease".into(),
        };
        assert_eq!(r.to_string(), "the promotion of n4 refused: no lease");
        let then = Reason::Then {
            first: Box::new(Reason::NotVoter {
                node: "n4".into(),
                secs: 900,
                reached: Reached::Learner,
            }),
            then: Box::new(Reason::NotReported {
                node: "n4".into(),
                step: ReportStep::Rollback,
                secs: 300,
            }),
        };
        assert_eq!(
            then.to_string(),
            "n4 did not become a voter within 900 s (it is a learner); then n4 did not report its rollback within 300 s"
        );
        assert_eq!(
            Reason::NoHealthyVoter {
                to: VoterFor::Join,
                other_than: Some("n1".into())
            }
            .to_string(),
            "no healthy voter other than n1 to join"
        );
        assert_eq!(
            Reason::Unreadable { raw: "a\nb".into() }.to_string(),
            "a\\nb"
        );
    }

    #[test]
    fn a_reason_kept_on_the_lease_reads_back_as_the_same_case() {
        let r = Reason::GatesStayedShut {
            before: Write::StepDown,
            failures: "voters-healthy: n2".into(),
        };
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Reason>(&json).unwrap(), r);
        assert!(json.contains("\"why\":\"gates-stayed-shut\""), "{json}");
    }

    #[test]
    fn a_wait_says_what_it_waits_for() {
        assert_eq!(
            Awaiting::Gates {
                before: Write::Removal,
                failures: "no-learner: n5".into()
            }
            .to_string(),
            "the gates before the removal: no-learner: n5"
        );
        assert_eq!(
            Awaiting::Promotion {
                node: "n4".into(),
                milestone: Some("learner")
            }
            .to_string(),
            "n4 is promoting (learner)"
        );
    }
}
