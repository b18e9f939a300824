//! `remove-ghost MEMBER`: removes a member etcd lists and no Node stands
//! for (a host gone, its Node deleted), by hand, through this server's etcd
//! member, with the gates of [`hostdecide::ghost_removal`] (no Node
//! matches it, it does not answer as healthy, no change holds the regrade
//! Lease, the voters left are a healthy quorum).

use std::process::ExitCode;

use actuator::{
    cli::{ApiArgs, Cli},
    cluster::{self, Candidates},
    output::print,
};
use anyhow::Context;
use clock::Clock;
use hostdecide::ghost_removal::{self, NodeAddress};
use k8s_openapi::api::core::v1::Node;
use kube::{Api, api::ListParams};
use protocol::{
    exit::{Exit, Marked},
    names::K3S_ETCD_NODE_ADDRESS,
};

use super::{
    remove_learner::{Membership, membership},
    usage,
};

/// Runs `remove-ghost`: reads etcd's members through this host's member,
/// each voter's health from the voter itself, the Nodes' names and etcd
/// addresses, and the regrade Lease; then removes the ghost, or refuses
/// with nothing changed (exit 1).
pub(crate) fn remove_ghost(
    cli: &Cli,
    member: &str,
    api: &ApiArgs,
    rt: &tokio::runtime::Runtime,
    clock: &Clock,
) -> anyhow::Result<ExitCode> {
    let Membership {
        s,
        now,
        view,
        health,
        lease,
        margin,
    } = membership(cli, api, rt, clock, "the Nodes and the regrade Lease")?;
    let candidates =
        Candidates::new(s.api.clone(), s.ca_file.clone(), s.token_file.clone()).map_err(usage)?;
    // Names and annotations only: a metadata list, not the Nodes' status.
    let nodes = rt
        .block_on(candidates.first_answer(
            |client| async move {
                Api::<Node>::all(client)
                    .list_metadata(&ListParams::default())
                    .await
            },
            cluster::moves_on,
        ))
        .context("listing the Nodes; nothing was changed")?;
    let nodes: Vec<NodeAddress> = nodes
        .items
        .into_iter()
        .filter_map(|n| {
            Some(NodeAddress {
                address: n
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(K3S_ETCD_NODE_ADDRESS).cloned()),
                name: n.metadata.name?,
            })
        })
        .collect();
    let id = ghost_removal::verdict(
        &view.members,
        member,
        &nodes,
        &health,
        lease.as_ref(),
        now,
        margin,
    )
    .map_err(|r| anyhow::anyhow!("{r}; nothing was changed").context(Marked(Exit::Refused)))?;
    rt.block_on(etcdaccess::remove_member(&s.etcd, id))
        .with_context(|| {
            format!(
                "removing the member {id}: it may or may not be gone, `fleet-role status` lists etcd's members; run this again (a member already gone is refused as no member)"
            )
        })?;
    print(
        cli.output,
        &[format!("removed the ghost member {id} from etcd")],
        &serde_json::json!({ "ok": true, "removed": id.to_string() }),
    );
    Ok(ExitCode::SUCCESS)
}
