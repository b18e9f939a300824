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
//! (no name yet), whose peer address is one of this host's. A member that
//! votes is never removed here.

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

/// Removes this host's learner through `ep`, if there is one. Best effort:
/// the rollback goes on whatever happens here (an agent again is what
/// matters); what was done or why not is logged and returned.
pub fn remove_own(
    handle: &tokio::runtime::Handle,
    ep: &Endpoint,
    node: &str,
    addresses: &LocalAddresses,
) -> Option<MemberId> {
    let view = match handle.block_on(etcdview::read(ep, 0)) {
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
    match handle.block_on(etcdview::remove_learner(ep, m.id)) {
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
