//! The etcd leader's loop, as k3s runs it (`pkg/etcd/etcd.go`,
//! `manageLearners`, every 15 s, [`crate::spec::MANAGE_EVERY`]; the lab's
//! `promote_every_ms`): on the
//! leader only, each learner is promoted if etcd lets it, or its raft
//! progress tracked and a learner stalled for [`crate::spec::LEARNER_MAX_STALL`] removed
//! (`trackLearnerProgress`); and every Node with the etcd label whose
//! `node-name` annotation names a member gets `EtcdIsVoter` as the member is
//! (`setEtcdStatusCondition`), every other such Node `NotAMember`.
//!
//! This loop is the only writer of `EtcdIsVoter`: a host's own kubelet never
//! writes it, so a Node whose k3s is stopped keeps what the leader last
//! wrote until the leader's next look says `Unhealthy`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams},
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tracing::{info, warn};

use crate::{api::Apis, etcd_gw};
use protocol::names::{K3S_ETCD_IS_VOTER, K3S_ETCD_NODE_NAME, K3S_ETCD_ROLE_LABEL};

/// Where k3s keeps the one learner's progress, in etcd itself
/// (`learnerProgressKey`, `version.Program + "/etcd/learnerProgress"`): a new
/// leader carries on the old one's stall clock.
const PROGRESS_KEY: &str = "k3s/etcd/learnerProgress";

/// The tracked learner (k3s's `learnerProgress`). Times are unix
/// milliseconds (k3s stores a `metav1.Time`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LearnerProgress {
    /// The learner's member id.
    pub id: u64,
    /// Its member name (empty before it has started).
    pub name: String,
    /// The highest applied raft index seen.
    pub raft_applied_index: u64,
    /// When that index last moved (or tracking began).
    pub last_progress_ms: u64,
}

/// What the leader does with a learner it could not promote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LearnerVerdict {
    /// Keep tracking: store this progress.
    Track(LearnerProgress),
    /// No raft progress for longer than the stall limit: remove it.
    Remove,
}

/// k3s's `trackLearnerProgress` after a refused promotion: tracking starts
/// afresh for a learner other than the one recorded; `applied` (the
/// learner's own status, `None` when it does not answer) moves the clock
/// only when it has grown; past `max_stall` without progress, the learner
/// goes.
pub fn track_learner(
    recorded: &LearnerProgress,
    member: &etcd_gw::Member,
    applied: Option<u64>,
    now_ms: u64,
    max_stall: Duration,
) -> LearnerVerdict {
    let mut p = recorded.clone();
    if p.name != member.name || p.id != member.id {
        p = LearnerProgress {
            id: member.id,
            name: member.name.clone(),
            raft_applied_index: 0,
            last_progress_ms: now_ms,
        };
    }
    if let Some(index) = applied
        && index > p.raft_applied_index
    {
        p.raft_applied_index = index;
        p.last_progress_ms = now_ms;
    }
    let stalled = now_ms.saturating_sub(p.last_progress_ms);
    if u128::from(stalled) > max_stall.as_millis() {
        LearnerVerdict::Remove
    } else {
        LearnerVerdict::Track(p)
    }
}

/// A member as `EtcdIsVoter` says it (k3s's `MemberStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberStatus {
    /// A voting member: `True`, `MemberNotLearner`.
    Voter,
    /// A learner: `False`, `MemberIsLearner`.
    Learner,
    /// Its client URL did not answer a status: `False`, `Unhealthy`.
    Unhealthy,
    /// No member carries the Node's `node-name`: `False`, `NotAMember`.
    NotAMember,
}

impl MemberStatus {
    /// The condition's status, reason and message, as k3s writes them.
    pub fn condition(self) -> (bool, &'static str, &'static str) {
        match self {
            MemberStatus::Voter => (
                true,
                "MemberNotLearner",
                "Node is a voting member of the etcd cluster",
            ),
            MemberStatus::Learner => (
                false,
                "MemberIsLearner",
                "Node has not been promoted to voting member of the etcd cluster",
            ),
            MemberStatus::Unhealthy => (false, "Unhealthy", "Node is unhealthy"),
            MemberStatus::NotAMember => (
                false,
                "NotAMember",
                "Node is not a member of the etcd cluster",
            ),
        }
    }
}

/// What the leader's loop needs besides the member list.
pub struct Loop<'a> {
    /// The local member.
    pub own: &'a etcd_gw::Endpoint,
    /// The local member's id.
    pub me: u64,
    /// API access (k3s uses its supervisor's kubeconfig).
    pub apis: &'a Apis,
    /// The stall limit ([`crate::spec::LEARNER_MAX_STALL`] unless the lab shortens it).
    pub max_stall: Duration,
    /// A file that, while it exists, makes etcd's promotion be skipped: the
    /// lab's way to hold a join back as a learner (a learner that has not
    /// caught up is refused the same way by etcd).
    pub hold_promotions: &'a std::path::Path,
    /// A file naming Nodes, one a line, whose `EtcdIsVoter` is not written
    /// while it exists: the lab's way to let the condition lag behind etcd
    /// (k3s's write can fail; it logs "Unable to set etcd status condition"
    /// and tries again next round).
    pub hold_etcd_is_voter: &'a std::path::Path,
}

impl Loop<'_> {
    /// One round of the loop; nothing is done unless the local member leads.
    pub async fn run(&self, members: &[etcd_gw::Member]) {
        match etcd_gw::status(self.own).await {
            Ok(s) if s.leader == self.me => {}
            Ok(_) => return,
            Err(e) => {
                warn!("Failed to check local etcd status for learner management: {e:#}");
                return;
            }
        }
        let mut progress = match etcd_gw::get(self.own, PROGRESS_KEY).await {
            Ok(Some(text)) => serde_json::from_str(&text).unwrap_or_default(),
            Ok(None) => LearnerProgress::default(),
            Err(e) => {
                warn!("Failed to get recorded learner progress from etcd: {e:#}");
                return;
            }
        };
        let nodes = match self.etcd_nodes().await {
            Ok(n) => n,
            Err(e) => {
                warn!("Failed to list nodes with etcd role: {e:#}");
                vec![]
            }
        };
        let mut matched = vec![false; nodes.len()];
        for m in members {
            // The status is taken before a promotion is tried, as k3s does:
            // a learner promoted in this round shows as a voter next round.
            let mut status = if m.is_learner {
                if let Err(e) = self.track(&mut progress, m).await {
                    warn!("Failed to track learner progress towards promotion: {e:#}");
                }
                MemberStatus::Learner
            } else {
                MemberStatus::Voter
            };
            let Some(i) = nodes
                .iter()
                .position(|n| annotation(n, K3S_ETCD_NODE_NAME) == Some(m.name.as_str()))
            else {
                continue;
            };
            matched[i] = true;
            let healthy = match m.client_urls.first() {
                Some(url) => etcd_gw::status(&self.own.at(url.as_str())).await.is_ok(),
                None => false,
            };
            if !healthy {
                status = MemberStatus::Unhealthy;
            }
            if let Err(e) = self.set_condition(&nodes[i], status).await {
                warn!("Unable to set etcd status condition {}: {e:#}", m.name);
            }
        }
        for (n, _) in nodes.iter().zip(&matched).filter(|(_, m)| !**m) {
            if let Err(e) = self.set_condition(n, MemberStatus::NotAMember).await {
                warn!(
                    "Unable to set etcd status condition for a node that is not a cluster member: {e:#}"
                );
            }
        }
    }

    /// k3s's `trackLearnerProgress`: promote, or track and maybe remove.
    async fn track(
        &self,
        progress: &mut LearnerProgress,
        m: &etcd_gw::Member,
    ) -> anyhow::Result<()> {
        let clock = clock::Clock::system();
        if self.hold_promotions.exists() {
            info!(
                "learner {} not promoted: promotions held by the lab ({})",
                m.name,
                self.hold_promotions.display()
            );
        } else {
            match etcd_gw::member_promote(self.own, m.id).await {
                Ok(()) => {
                    info!("Promoted learner {}", m.name);
                    return Ok(());
                }
                Err(e) => info!("Unable to promote learner {}: {e:#}", m.name),
            }
        }
        let mut applied = None;
        for url in &m.client_urls {
            if let Ok(s) = etcd_gw::status(&self.own.at(url.as_str())).await {
                applied = Some(s.raft_applied_index);
                break;
            }
        }
        let now = clock.unix_millis();
        match track_learner(progress, m, applied, now, self.max_stall) {
            LearnerVerdict::Remove => {
                etcd_gw::member_remove(self.own, m.id).await?;
                warn!("Removed learner {} from etcd cluster", m.name);
                Ok(())
            }
            LearnerVerdict::Track(p) => {
                if p.last_progress_ms != now {
                    warn!(
                        "Learner {} stalled at RaftAppliedIndex={} for {} ms",
                        p.name,
                        p.raft_applied_index,
                        now - p.last_progress_ms
                    );
                }
                *progress = p;
                etcd_gw::put(self.own, PROGRESS_KEY, &serde_json::to_string(progress)?).await
            }
        }
    }

    async fn etcd_nodes(&self) -> anyhow::Result<Vec<Node>> {
        let list = self
            .apis
            .any(|c| async move {
                Api::<Node>::all(c)
                    .list(&ListParams::default().labels(&format!("{K3S_ETCD_ROLE_LABEL}=true")))
                    .await
            })
            .await?;
        Ok(list.items)
    }

    /// Writes the condition when its status, reason or message changes
    /// (k3s refreshes an unchanged one's heartbeat only every few minutes).
    async fn set_condition(&self, node: &Node, status: MemberStatus) -> anyhow::Result<()> {
        let clock = clock::Clock::system();
        let (on, reason, message) = status.condition();
        let want = if on { "True" } else { "False" };
        let current = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == K3S_ETCD_IS_VOTER));
        if current.is_some_and(|c| {
            c.status == want
                && c.reason.as_deref() == Some(reason)
                && c.message.as_deref() == Some(message)
        }) {
            return Ok(());
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        if let Ok(held) = std::fs::read_to_string(self.hold_etcd_is_voter)
            && held.lines().any(|l| l.trim() == name)
        {
            warn!(
                "Unable to set etcd status condition {name}: held by the lab ({})",
                self.hold_etcd_is_voter.display()
            );
            return Ok(());
        }
        info!("Node {name}: {K3S_ETCD_IS_VOTER}={want} ({reason})");
        let now = crate::stamps::rfc3339(&clock);
        let patch = json!({"status": {"conditions": [{
            "type": K3S_ETCD_IS_VOTER, "status": want, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        }]}});
        self.apis
            .any(|c| {
                let (n, p) = (name.clone(), patch.clone());
                async move {
                    Api::<Node>::all(c)
                        .patch_status(&n, &PatchParams::default(), &Patch::Strategic(&p))
                        .await
                }
            })
            .await
            .map(drop)
    }
}

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::LEARNER_MAX_STALL;

    fn learner(id: u64, name: &str) -> etcd_gw::Member {
        etcd_gw::Member {
            id,
            name: name.into(),
            peer_urls: vec![],
            client_urls: vec![],
            is_learner: true,
        }
    }

    const MIN: u64 = 60_000;

    #[test]
    fn a_learner_without_raft_progress_for_five_minutes_is_removed_and_not_before() {
        let m = learner(7, "agent-1-0a1b2c3d");
        let start = 1_000 * MIN;
        let LearnerVerdict::Track(p) =
            track_learner(&Default::default(), &m, Some(40), start, LEARNER_MAX_STALL)
        else {
            panic!("a new learner is tracked");
        };
        assert_eq!(p.raft_applied_index, 40);
        // Stuck at 40: still tracked at exactly five minutes, removed past them.
        assert!(matches!(
            track_learner(&p, &m, Some(40), start + 5 * MIN, LEARNER_MAX_STALL),
            LearnerVerdict::Track(_)
        ));
        assert_eq!(
            track_learner(&p, &m, Some(40), start + 5 * MIN + 1, LEARNER_MAX_STALL),
            LearnerVerdict::Remove
        );
        // One that does not answer at all stalls the same way.
        assert_eq!(
            track_learner(&p, &m, None, start + 6 * MIN, LEARNER_MAX_STALL),
            LearnerVerdict::Remove
        );
    }

    #[test]
    fn raft_progress_restarts_the_stall_clock_and_a_new_learner_starts_afresh() {
        let m = learner(7, "agent-1-0a1b2c3d");
        let start = 1_000 * MIN;
        let p = LearnerProgress {
            id: 7,
            name: m.name.clone(),
            raft_applied_index: 40,
            last_progress_ms: start,
        };
        let LearnerVerdict::Track(moved) =
            track_learner(&p, &m, Some(41), start + 4 * MIN, LEARNER_MAX_STALL)
        else {
            panic!("a learner that progresses is kept");
        };
        assert_eq!(moved.last_progress_ms, start + 4 * MIN);
        assert!(matches!(
            track_learner(&moved, &m, Some(41), start + 8 * MIN, LEARNER_MAX_STALL),
            LearnerVerdict::Track(_)
        ));
        // A learner other than the recorded one: its clock starts now.
        let other = learner(8, "agent-2-deadbeef");
        assert!(matches!(
            track_learner(&p, &other, None, start + 60 * MIN, LEARNER_MAX_STALL),
            LearnerVerdict::Track(LearnerProgress { id: 8, .. })
        ));
    }

    #[test]
    fn the_condition_says_what_k3s_says() {
        assert!(MemberStatus::Voter.condition().0);
        assert_eq!(MemberStatus::Voter.condition().1, "MemberNotLearner");
        for (s, reason) in [
            (MemberStatus::Learner, "MemberIsLearner"),
            (MemberStatus::Unhealthy, "Unhealthy"),
            (MemberStatus::NotAMember, "NotAMember"),
        ] {
            assert!(!s.condition().0);
            assert_eq!(s.condition().1, reason);
        }
    }
}
