//! A rolled-back promotion removes its own learner from etcd.
//!
//! A promotion joins etcd as a learner; rolled back before its promotion
//! to voter, the learner stays in the member list, and k3s removes a
//! stalled learner only after 5 minutes (its removal annotation never
//! reaches it: a learner's Node carries no etcd label). Until then the same
//! host cannot join again ("duplicate node name found"). So the rollback,
//! under the host lock and the Lease, asks the voter it joined (its etcd
//! client port, with k3s's client certificate, which every server of a
//! cluster shares) to remove exactly this host's learner: the member whose
//! name is this Node's (`<node>-<8 hex>`), or, for a learner never started
//! (no name yet), whose peer address is one of this host's. A member seen
//! voting is never removed here.
//!
//! # Why the server is stopped first
//!
//! etcd has no conditional member removal: the check that the member is a
//! learner and its removal are two requests, and k3s's etcd leader asks to
//! promote the first learner every 15 s (`manageLearners`,
//! `trackLearnerProgress`: it calls `MemberPromote` first, and reads the
//! learner's own status only afterwards, to time out a stalled one). etcd
//! grants the promotion when the leader's record of the learner's log
//! (its raft `Match`) is within 90 % of its own; that record does not fall
//! when the learner stops. So stopping the learner's etcd does not make
//! the check and the removal one: a learner that caught up just before its
//! etcd stopped can still be promoted between them, and a removal of it
//! then removes a voter. Nothing on this side can close that window (at
//! most one round trip, against k3s's 15 s tick).
//!
//! What the stop does decide is which voter that can be: one whose etcd is
//! down. Such a voter is outside the active quorum (etcd itself removes a
//! member it is not connected to without a quorum check), and removing it
//! gives back exactly the voters there were before the promotion, which is
//! what the rollback is for. Without the stop it could be a voter that
//! serves and that k3s already reports as one (`EtcdIsVoter`). So the
//! server is stopped and confirmed stopped first, and when that cannot be
//! confirmed nothing is removed (k3s's own stall timeout, 5 minutes, then
//! removes a learner that does not progress). A promotion seen before the
//! removal leaves the member to k3s's removal, gated by the controller.

use etcdview::Endpoint;
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
    let view = match etcdview::read(ep, 0).await {
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
    match etcdview::remove_learner(ep, m.id).await {
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
