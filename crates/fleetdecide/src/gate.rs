//! A gate: one question about the fleet, its verdict and its reason, by
//! name. The vocabulary every decision and the shells' output share; the
//! gates themselves are in `gates.rs` and `etcd_gates.rs`.

use serde::{Deserialize, Serialize};

/// The gates, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateName {
    /// The controller is not paused.
    NotPaused,
    /// No other swap holds the Lease or is left unfinished.
    NoOtherSwap,
    /// The swap's hosts and the regrade Lease speak a protocol version this
    /// build knows.
    KnownProtocol,
    /// The outgoing host is a voter.
    OutgoingVoter,
    /// The incoming host carries [`protocol::names::ELIGIBLE_LABEL`]`=true`.
    IncomingEligible,
    /// The incoming host's Node is Ready.
    IncomingReady,
    /// The incoming host is an agent (no etcd member).
    IncomingAgent,
    /// The incoming host is a healthy voter (before the outgoing one's removal).
    IncomingVoter,
    /// Every voter other than the outgoing one is Ready and `EtcdIsVoter`.
    VotersHealthy,
    /// No etcd learner is pending.
    NoLearner,
    /// The healthy voters left after the removal are a quorum of the members left.
    QuorumAfterRemoval,
    /// The outgoing host reports that its agent could start once demoted.
    OutgoingDemotable,
    /// The swap's hosts' actuators wrote their heartbeat recently.
    ActuatorsAlive,
    /// The swap's hosts' actuators are of a release this controller drives.
    SupportedRelease,
    /// Some server reported a fresh view of etcd, and the servers' views
    /// list the same members.
    EtcdViewsAgree,
    /// Every etcd member has its Node.
    NoGhostMember,
    /// Every voter Node has its voting member in etcd.
    VotersAreMembers,
    /// No etcd alarm is raised.
    NoEtcdAlarm,
    /// Stopping a voting host before its member is removed keeps quorum.
    QuorumAtHostStop,
    /// A grow or shrink ends with an odd number of voters, and not none.
    OddVoterCount,
}

impl GateName {
    /// The gate's name as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            GateName::NotPaused => "not-paused",
            GateName::NoOtherSwap => "no-other-swap",
            GateName::KnownProtocol => "known-protocol",
            GateName::OutgoingVoter => "outgoing-voter",
            GateName::IncomingEligible => "incoming-eligible",
            GateName::IncomingReady => "incoming-ready",
            GateName::IncomingAgent => "incoming-agent",
            GateName::IncomingVoter => "incoming-voter",
            GateName::VotersHealthy => "voters-healthy",
            GateName::NoLearner => "no-learner",
            GateName::QuorumAfterRemoval => "quorum-after-removal",
            GateName::OutgoingDemotable => "outgoing-demotable",
            GateName::ActuatorsAlive => "actuators-alive",
            GateName::SupportedRelease => "supported-release",
            GateName::EtcdViewsAgree => "etcd-views-agree",
            GateName::NoGhostMember => "no-ghost-member",
            GateName::VotersAreMembers => "voters-are-members",
            GateName::NoEtcdAlarm => "no-etcd-alarm",
            GateName::QuorumAtHostStop => "quorum-at-host-stop",
            GateName::OddVoterCount => "odd-voter-count",
        }
    }
}

/// One gate's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gate {
    /// Which gate.
    pub name: GateName,
    /// Whether it passed.
    pub passed: bool,
    /// Why, in one line.
    pub reason: String,
}

impl Gate {
    pub(super) fn pass(name: GateName, reason: impl Into<String>) -> Self {
        Self {
            name,
            passed: true,
            reason: reason.into(),
        }
    }
    pub(super) fn fail(name: GateName, reason: impl Into<String>) -> Self {
        Self {
            name,
            passed: false,
            reason: reason.into(),
        }
    }
    pub(super) fn check(name: GateName, passed: bool, reason: impl Into<String>) -> Self {
        Self {
            name,
            passed,
            reason: reason.into(),
        }
    }
}

/// Whether every gate passed.
pub fn all_pass(gates: &[Gate]) -> bool {
    gates.iter().all(|g| g.passed)
}

/// The failed gates as one line.
pub fn failures(gates: &[Gate]) -> String {
    gates
        .iter()
        .filter(|g| !g.passed)
        .map(|g| format!("{}: {}", g.name.as_str(), g.reason))
        .collect::<Vec<_>>()
        .join("; ")
}
