//! How the controller counts a host (voter, learner, etcd-only, rolled
//! back, removed, agent), from its Node and its report.

use serde::{Deserialize, Serialize};

use protocol::view::NodeFacts;

/// How the controller counts a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// An etcd voter: k3s's etcd label and `EtcdIsVoter`.
    Voter,
    /// An etcd member that is not (yet) a voter: the etcd label without
    /// `EtcdIsVoter`.
    Learner,
    /// A voter whose host stepped down: etcd only, waiting for its removal.
    EtcdOnly,
    /// A host that rolled back to an agent while its Node still shows a
    /// member: the member is removed next.
    RolledBack,
    /// k3s removed the member; the host finishes as an agent and its server
    /// labels are still to be removed.
    Removed,
    /// No etcd member.
    Agent,
}

impl Class {
    /// The class as shown by `status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Voter => "voter",
            Class::Learner => "learner",
            Class::EtcdOnly => "etcd-only",
            Class::RolledBack => "rolled-back",
            Class::Removed => "removed",
            Class::Agent => "agent",
        }
    }
}

/// Classifies a host from its Node and report.
pub fn classify(n: &NodeFacts) -> Class {
    if n.member_gone() {
        // `removed-node-name` is k3s's own annotation: until the clean-up
        // removes it, the host is a removed server, not a plain agent.
        return Class::Removed;
    }
    if !n.etcd_label {
        return Class::Agent;
    }
    if n.reports_etcd_only() {
        Class::EtcdOnly
    } else if n.reports_agent() {
        Class::RolledBack
    } else if n.etcd_is_voter || n.etcd_unhealthy {
        // k3s's leader writes `Unhealthy` over a voter's `EtcdIsVoter=True`
        // once its etcd stops answering: still counted as a voter (never a
        // healthy one), so a voter whose k3s stopped is replaced, not taken
        // for a learner.
        Class::Voter
    } else {
        Class::Learner
    }
}

/// Whether the host's member votes (a voter, or a stepped-down voter, or a
/// rolled-back host whose member was a voter).
pub fn is_voting(n: &NodeFacts) -> bool {
    match classify(n) {
        Class::Voter | Class::EtcdOnly => true,
        Class::RolledBack => n.etcd_is_voter,
        Class::Learner | Class::Removed | Class::Agent => false,
    }
}

/// Whether the host's member votes and is healthy: the Node Ready, k3s's
/// `EtcdIsVoter` true, and its host not known to have left (a rolled-back
/// host's member is down).
pub fn is_healthy_voter(n: &NodeFacts) -> bool {
    matches!(classify(n), Class::Voter | Class::EtcdOnly) && n.ready && n.etcd_is_voter
}
