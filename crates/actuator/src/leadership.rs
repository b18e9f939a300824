//! Before a voter steps down it hands etcd's leadership to a voter that
//! stays, so the step-down's restart does not cost the cluster its leader
//! (an election, writes stalled meanwhile). etcd moves leadership only from
//! the leader itself, so this host does it, through its own member, at the
//! start of its step-down, before any change. A member that does not lead
//! has nothing to hand over.

use std::time::Duration;

use clock::Clock;
use etcdaccess::Endpoint;
use protocol::etcd::MemberId;
use tracing::{info, warn};

/// How long the new leader may take to show as leader in the member's view.
const SETTLE: Duration = Duration::from_secs(10);

/// What the hand-over did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandOver {
    /// The local member did not lead.
    NotLeader,
    /// Leadership moved to this member, in this long.
    Moved {
        /// The new leader.
        to: MemberId,
        /// From the request to its showing in the view.
        took: Duration,
    },
}

/// Hands leadership over if the local member leads, trying the other
/// voters (started ones, in id order) until one takes it. Each call is
/// bounded by the endpoint's timeout, each wait for a new leader by
/// [`SETTLE`]. An error changes nothing: the step-down does not begin.
/// `clock` times the wait for the new leader.
pub async fn hand_over(ep: &Endpoint, clock: &Clock) -> Result<HandOver, String> {
    let now = || clock.unix_secs();
    let view = etcdaccess::read(ep, now())
        .await
        .map_err(|e| format!("could not tell whether this member leads etcd: {e}"))?;
    if view.leader != Some(view.member) {
        return Ok(HandOver::NotLeader);
    }
    let mut candidates: Vec<MemberId> = view
        .voters()
        .filter(|m| m.id != view.member && !m.client_urls.is_empty())
        .map(|m| m.id)
        .collect();
    candidates.sort();
    let mut tried = Vec::new();
    for to in candidates {
        let started = clock.now();
        match etcdaccess::move_leader(ep, to).await {
            Ok(()) => {}
            Err(e) => {
                warn!("etcd leadership not moved to {to}: {e}");
                tried.push(format!("{to}: {e}"));
                continue;
            }
        }
        while clock.since(started) < SETTLE {
            if let Ok(v) = etcdaccess::read(ep, now()).await
                && v.leader == Some(to)
            {
                let took = clock.since(started);
                info!(
                    "etcd leadership moved from {} to {to} in {} ms",
                    view.member,
                    took.as_millis()
                );
                return Ok(HandOver::Moved { to, took });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tried.push(format!(
            "{to}: not leader {} s after the move",
            SETTLE.as_secs()
        ));
    }
    Err(if tried.is_empty() {
        "this member leads etcd and no other started voter could take over".into()
    } else {
        format!(
            "this member leads etcd and no other voter took over ({})",
            tried.join("; ")
        )
    })
}
