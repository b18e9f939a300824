//! How k3s's stand-in learns its etcd member was removed. k3s hears it from
//! its own etcd (`ErrMemberRemoved`, `pkg/etcd/etcd.go`), whatever else it
//! is doing; the stand-in's etcd is a process of its own, so it asks the
//! other members for the lists they have applied.

use std::{net::Ipv4Addr, time::Duration};

use super::Ctx;
use crate::{etcd_gw, spec::LabSpec};

/// Whether the other members no longer list this one, looked for a while
/// (`REMOVAL_CHECK`).
pub(super) async fn removed(
    ctx: &Ctx,
    own: &etcd_gw::Endpoint,
    ip: Ipv4Addr,
    is_me: impl Fn(&etcd_gw::Member) -> bool,
) -> bool {
    tokio::time::timeout(REMOVAL_CHECK, removal_seen(ctx, own, ip, is_me))
        .await
        .is_ok()
}

/// Returns once a peer no longer lists this member (never, while each does).
pub(super) async fn removal_seen(
    ctx: &Ctx,
    own: &etcd_gw::Endpoint,
    ip: Ipv4Addr,
    is_me: impl Fn(&etcd_gw::Member) -> bool,
) {
    // k3s learns it from its own etcd (`ErrMemberRemoved`), whatever else
    // k3s is doing; the stand-in's etcd is a process of its own, so the
    // stand-in asks the others. A removal is committed before the removed
    // member learns it: a peer that has applied it lists this member no
    // more. Every peer is asked for its applied list (a removed member was
    // often the leader: linearizable reads fail while the others elect
    // one), and a peer cut off or behind, which still lists it, proves
    // nothing. The peers are asked together, so that one cut off (each ask
    // waits 5 s) does not hold the answer of the others.
    loop {
        let peers = peers(ctx, own, ip);
        let lists = futures::future::join_all(peers.iter().map(etcd_gw::member_list_local)).await;
        if lists
            .into_iter()
            .flatten()
            .any(|members| !members.is_empty() && !members.iter().any(&is_me))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A round slower than this is watched for this member's removal.
pub(super) const SLOW_ROUND: Duration = Duration::from_secs(2);

/// How long an exited etcd's removal is looked for at the other members
/// (an etcd that exited for another reason restarts this much later).
pub(super) const REMOVAL_CHECK: Duration = Duration::from_secs(30);

/// The other servers' etcd members (reached with `own`'s identity), for
/// asking about membership when the local member is gone.
pub(super) fn peers(ctx: &Ctx, own: &etcd_gw::Endpoint, me: Ipv4Addr) -> Vec<etcd_gw::Endpoint> {
    ctx.spec
        .hosts
        .iter()
        .filter(|h| h.ip != me)
        .map(|h| own.at(LabSpec::etcd_url(h.ip)))
        .collect()
}
