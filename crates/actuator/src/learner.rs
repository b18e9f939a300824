//! A rolled-back promotion removes its own learner from etcd.
//!
//! More in docs/internals.md, "actuator: learner".

use etcdaccess::Endpoint;
use host::addresses::LocalAddresses;
use protocol::{JoinUrl, etcd::MemberId};
use tracing::{info, warn};

/// etcd's client port on a k3s server.
const ETCD_CLIENT_PORT: u16 = 2379;

/// The etcd endpoint of the server `join` names, reached as `template` is
/// (its scheme and certificate).
pub fn endpoint_of(template: &Endpoint, join: &JoinUrl) -> Endpoint {
    let scheme = template.url.split_once("://").map_or("https", |(s, _)| s);
    Endpoint {
        url: format!("{scheme}://{}:{ETCD_CLIENT_PORT}", join.host()),
        ..template.clone()
    }
}

/// Whether this host's server may stop for a rollback
/// ([`hostdecide::rollback_stop`]): etcd's list read through the local
/// member, and each voter's health from the voter itself, just before the
/// stop, under the host lock. `Err` says why not; nothing was changed.
///
/// A local member that serves no read (down, never started, or a learner
/// refusing linearizable requests) is no healthy voter: its stop takes
/// nothing from quorum, and the rollback goes on. Between this reading and
/// the stop, k3s may still promote the learner (a window of the reading's
/// few requests, against the controller's whole watch lag before): what
/// [`remove_own`] then finds voting is left to k3s's removal.
pub async fn may_stop(local: &Endpoint, now: i64) -> Result<(), String> {
    let view = match etcdaccess::read(local, now).await {
        Ok(v) => v,
        Err(e) => {
            info!("this host's member serves no read ({e}): its stop takes no vote away");
            return Ok(());
        }
    };
    let health = crate::membership::voter_health(local, &view, now).await;
    hostdecide::rollback_stop::may_stop(&view.members, Some(view.member), &health)
        .map_err(|r| r.to_string())
}

/// Stops `host`'s server, then removes its learner through `ep`, if there
/// is one (see the module's notes for why in that order). Best effort: the
/// rollback goes on whatever happens here (an agent again is what matters);
/// what was done or why not is logged and returned.
///
/// The stop is the host's sync work (a unit's stop and its confirmation,
/// under the host's budget), so it runs in a blocking task of its own; the
/// etcd requests, each bounded by the endpoint's timeout, run here.
pub async fn remove_own(
    ep: &Endpoint,
    host: &host::Host,
    addresses: &LocalAddresses,
) -> Option<MemberId> {
    let stopping = host.clone();
    let stopped = tokio::task::spawn_blocking(move || stopping.stop_server())
        .await
        .unwrap_or_else(|e| {
            Err(host::Error::Command {
                command: "stop k3s".into(),
                detail: format!("the stop's task failed: {e}"),
            })
        });
    if let Err(e) = stopped {
        warn!(
            "this host's learner is not removed: its server (the learner's etcd) \
             could not be confirmed stopped: {e}"
        );
        return None;
    }
    let node = host.node.as_str();
    let view = match etcdaccess::read(ep, 0).await {
        Ok(v) => v,
        Err(e) => {
            warn!("the rolled-back learner could not be looked for: {e}");
            return None;
        }
    };
    let ours = |m: &protocol::etcd::Member| {
        m.node_name() == Some(node) || crate::membership::is_own(m, None, addresses)
    };
    let m = view.members.iter().find(|m| ours(m))?;
    if !m.learner {
        warn!(
            "this host's member {} votes: it is left to k3s's removal",
            m.id
        );
        return None;
    }
    match etcdaccess::remove_learner(ep, m.id).await {
        Ok(()) => {
            info!(
                "removed this host's learner {} ({}) from etcd",
                m.id, m.name
            );
            Some(m.id)
        }
        Err(e) => {
            warn!("this host's learner {} was not removed: {e}", m.id);
            None
        }
    }
}
