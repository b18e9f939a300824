//! `remove-learner MEMBER`: removes a learner etcd lists, by hand, through
//! this server's etcd member, with the gates of
//! [`hostdecide::learner_removal`] (a learner, no change promoting it, the
//! other voters a healthy quorum). For a learner no Node shows and no swap
//! moves on: a promotion rolled back while its host was down, a host
//! promoted outside fleet-role.

use std::process::ExitCode;

use actuator::{
    cli::{ApiArgs, Cli},
    cluster::{self, Candidates},
    config::Settings,
    output::print,
};
use anyhow::Context;
use clock::Clock;
use hostdecide::learner_removal::{self, Refusal};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use protocol::{
    LeaseFacts,
    etcd::{EtcdView, MemberId},
    exit::{Exit, Marked},
    names::LEASE_NAMESPACE,
    text::one_line,
};

use super::{settings, usage};

/// Runs `remove-learner`: reads etcd's members through this host's member,
/// each voter's health from the voter itself, and the regrade Lease; then
/// removes the learner, or refuses with nothing changed (exit 1).
pub(crate) fn remove_learner(
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
    } = membership(cli, api, rt, clock, "the regrade Lease")?;
    let id =
        match learner_removal::verdict(&view.members, member, &health, lease.as_ref(), now, margin)
        {
            Ok(id) => id,
            Err(refusal) => return Err(refused(&refusal)),
        };
    rt.block_on(etcdaccess::remove_learner(&s.etcd, id))
        .with_context(|| {
            format!(
                "removing the learner {id}: it may or may not be gone, `etcd member list` says; run this again (a learner already gone is refused as no member)"
            )
        })?;
    print(
        cli.output,
        &[format!(
            "removed the learner {id} ({}) from etcd; its host, if it runs k3s as a server, should be ended as an agent (`fleet-role-actuator demote-local --force` there)",
            name_of(&view, id)
        )],
        &serde_json::json!({ "ok": true, "removed": id.to_string() }),
    );
    Ok(ExitCode::SUCCESS)
}

/// What a removal by hand decides on, read before anything changes.
pub(super) struct Membership {
    /// The command's settings.
    pub s: Settings,
    /// This host's clock, in unix seconds.
    pub now: i64,
    /// etcd's members, through this host's member.
    pub view: EtcdView,
    /// Each voter's health, asked of the voter itself.
    pub health: Vec<(MemberId, bool)>,
    /// The regrade Lease (`None`: there is none).
    pub lease: Option<LeaseFacts>,
    /// The clock skew allowed, in seconds.
    pub margin: i64,
}

/// Reads what a removal by hand decides on: the settings (an API server
/// is needed, to read `what`), etcd's members through this host's member,
/// each voter's health from the voter itself, and the regrade Lease.
pub(super) fn membership(
    cli: &Cli,
    api: &ApiArgs,
    rt: &tokio::runtime::Runtime,
    clock: &Clock,
    what: &str,
) -> anyhow::Result<Membership> {
    let s = settings(cli, Some(api), None)?;
    if s.api.is_empty() {
        return Err(usage(anyhow::anyhow!(
            "no API server to read {what} from: give --api (or `api` in actuator.toml)"
        )));
    }
    let now = clock.unix_secs();
    let view = rt
        .block_on(etcdaccess::read(&s.etcd, now))
        .context("reading etcd's members through this host's member (it must be a server whose etcd serves); nothing was changed")?;
    let health = rt.block_on(actuator::membership::voter_health(&s.etcd, &view, now));
    let lease = lease(&s, rt).context("reading the regrade Lease; nothing was changed")?;
    let margin = i64::try_from(s.skew_margin.as_secs()).unwrap_or(i64::MAX);
    Ok(Membership {
        s,
        now,
        view,
        health,
        lease,
        margin,
    })
}

/// A refusal, marked as one (exit 1: nothing was changed).
fn refused(r: &Refusal) -> anyhow::Error {
    anyhow::anyhow!("{r}; nothing was changed").context(Marked(Exit::Refused))
}

/// The member's name as etcd lists it, escaped, or that it has none.
fn name_of(view: &EtcdView, id: MemberId) -> String {
    view.members
        .iter()
        .find(|m| m.id == id)
        .filter(|m| !m.name.is_empty())
        .map_or("no name: never started".into(), |m| one_line(&m.name))
}

/// The regrade Lease as the API holds it, through each candidate in turn.
pub(super) fn lease(
    s: &Settings,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<Option<LeaseFacts>> {
    let candidates =
        Candidates::new(s.api.clone(), s.ca_file.clone(), s.token_file.clone()).map_err(usage)?;
    let lease = rt.block_on(candidates.first_answer(
        |client| {
            let name = s.names.lease_name.clone();
            async move {
                let leases: Api<Lease> = Api::namespaced(client, LEASE_NAMESPACE);
                leases.get_opt(&name).await
            }
        },
        cluster::moves_on,
    ))?;
    Ok(lease.map(|l| kubeview::lease_facts(&s.names, &l)))
}
