//! The heartbeat and the host's own checks: the report's host part (the
//! demotion verdict, etcd's view), the credential's lapse warned about, and
//! what the decisions read of etcd's member list.

use std::time::{Duration, Instant};

use clock::Clock;
use k8s_openapi::{api::core::v1::Node, apimachinery::pkg::apis::meta::v1::MicroTime};
use kube::{Api, Client};
use protocol::{
    Report, Role,
    clock_offset::{ClockOffset, allowed_offset_ms, off_reason},
    etcd::EtcdView,
    report::{Eligibility, HostPart},
};
use tracing::{info, warn};

use super::{
    context::{Context, secs_i64},
    memory::Memory,
};
use crate::{etcdreport::ViewReader, membership::RemoteReader};

/// The credential's lapse is warned about at most this often.
const EXPIRY_WARNING_EVERY: Duration = Duration::from_secs(3600);

/// What the heartbeat reads, and when it last wrote.
pub(super) struct Heartbeat {
    /// When the host part was last written (`None`: not yet this run).
    last: Option<Instant>,
    /// The server Nodes as last listed, for the two verdicts between two
    /// heartbeats.
    servers: Option<Vec<host::eligibility::ServerNode>>,
    /// The local etcd member's view, read for the heartbeat.
    etcd_view: ViewReader,
    /// The member list read through another server, when the local member
    /// does not answer.
    remote: RemoteReader,
    /// When the credential's lapse was last warned about.
    expiry_warned: Option<Instant>,
    /// Whether a Ready server Node was reachable, as last asked, for the
    /// promotion verdict (`None`: not asked yet, or no server Node known).
    join_answer: Option<Result<(), String>>,
    /// The ask under way: the heartbeat never waits for it.
    join_asking: Option<tokio::task::JoinHandle<Option<Result<(), String>>>>,
    /// The API's refusal of the last renewal, while it stands (said once).
    renew_refused: Option<crate::report::Refusal>,
    /// How far this host's clock is off the API server's, as the answers
    /// before the last decision showed (`protocol::clock_offset`).
    offset: Option<ClockOffset>,
    /// Whether the last offset was beyond what the Lease allows (said once
    /// on each change).
    off_said: bool,
}

impl Heartbeat {
    /// Nothing read yet; the local member at `etcd`.
    pub(super) fn new(etcd: &etcdaccess::Endpoint, clock: &Clock) -> Self {
        Self {
            last: None,
            servers: None,
            etcd_view: ViewReader::new(etcd, clock.clone()),
            remote: RemoteReader::new(clock.clone()),
            join_answer: None,
            join_asking: None,
            expiry_warned: None,
            renew_refused: None,
            offset: None,
            off_said: false,
        }
    }

    /// How far this host's clock is off the API server's, as the answers
    /// before the last decision showed (`None`: none yet). Every
    /// step that needs the regrade Lease is refused while it is surely off
    /// by more than half of `skew_margin_secs`
    /// ([`hostdecide::decide::lease_holds`]).
    pub(super) fn clock_offset(&self) -> Option<ClockOffset> {
        self.offset
    }

    /// Takes the offset the API server's last answer showed
    /// ([`kubeaccess::server_clock`]) and says when it goes beyond what
    /// the Lease allows, or comes back.
    fn judge_clock(&mut self, ctx: &Context) {
        let Some(offset) = ctx.server_clock.offset() else {
            return;
        };
        self.offset = Some(offset);
        let margin = secs_i64(ctx.settings.skew_margin);
        let off = offset.beyond(allowed_offset_ms(margin));
        ctx.metrics.clock_offset(offset);
        match off {
            Some(ms) if !self.off_said => {
                warn!("{}", off_reason("this host's", ms, margin));
                self.off_said = true;
            }
            None if self.off_said => {
                info!("this host's clock agrees with the API server's again");
                self.off_said = false;
            }
            _ => {}
        }
    }

    /// Warns (at most once an hour) while the credential is within
    /// [`crate::cluster::EXPIRY_WARNING_SECS`] of lapsing: a lapsed token
    /// fails every request, and the host would stop taking steps.
    pub(super) fn warn_expiry(&mut self, ctx: &Context) {
        if self
            .expiry_warned
            .is_some_and(|t| ctx.clock.since(t) < EXPIRY_WARNING_EVERY)
        {
            return;
        }
        let Some(exp) = ctx
            .settings
            .token_file
            .as_deref()
            .and_then(crate::cluster::token_expiry)
        else {
            return;
        };
        if let Some(w) = crate::cluster::expiry_warning(exp, ctx.clock.unix_secs()) {
            warn!(expires = exp, "{w}");
            self.expiry_warned = Some(ctx.clock.now());
        }
    }

    /// The heartbeat and the report's host part. The heartbeat Lease is
    /// renewed once per [`crate::config::Settings::heartbeat`]; the host
    /// part is written when the demotion verdict or the promotion verdict
    /// changed or etcd's view changed shape ([`EtcdView::same_shape`]), and
    /// at each heartbeat while it carries an etcd view (the controller
    /// trusts a view for a bounded time after its reading, and only a
    /// server holds one: the fleet's few voters, not its every host). The
    /// config files are read each time (no request), the server Nodes
    /// are listed once a period. Only a server host has a demotion verdict:
    /// one the role file names, or one that still holds its datastore (a
    /// stepped-down server names the agent already, and its removal and
    /// finish are still ahead).
    ///
    /// Only a host that holds its datastore reads etcd's view (paced and
    /// bounded, [`crate::etcdreport`]): without one there is no member to
    /// read. A server whose unit is stopped still holds its datastore; its
    /// reading fails and it reports no view, which is what it is.
    ///
    /// A refused report does not stop the heartbeat: the Lease is renewed
    /// with the refusal on it, so the controller tells a host whose report
    /// the API refuses from one whose actuator is dead.
    pub(super) async fn beat(
        &mut self,
        ctx: &Context,
        memory: &mut Memory,
        client: &Client,
    ) -> Result<(), kube::Error> {
        self.judge_clock(ctx);
        // A refusal of the report said or lifted makes it due at once.
        let due = memory.refusal_changed
            || self
                .last
                .is_none_or(|t| ctx.clock.since(t) >= ctx.settings.heartbeat);
        let server = matches!(host::role::read(&ctx.host.paths), Ok(Some(Role::Server)))
            || ctx.host.has_datastore();
        // The server Nodes: where a server's agent could bootstrap, and what
        // a standby could join.
        if due || self.servers.is_none() {
            self.servers = Some(server_nodes(ctx, client).await?);
        }
        let demotion = if server {
            let config = host::eligibility::read(&ctx.host.paths);
            Some(Eligibility::of(&host::eligibility::assess(
                &config,
                ctx.settings.node.as_str(),
                self.servers.as_deref(),
                ctx.host.eligibility_judged(),
            )))
        } else {
            None
        };
        let promotion = if server {
            self.join_answer = None;
            None
        } else {
            self.ask_join_server(ctx, due);
            let config = host::preflight::read(&ctx.host.paths);
            Some(Eligibility::of(&host::preflight::assess(
                &config,
                self.join_answer.as_ref(),
            )))
        };
        let etcd = if ctx.host.has_datastore() {
            self.etcd_view.current().await
        } else {
            self.etcd_view.forget();
            self.remote.forget();
            None
        };
        let release = Some(protocol::version::RELEASE.to_string());
        // When this host's own credential lapses, for the fleet's view of
        // its hosts' credentials (enrolled together, they lapse together).
        let credential_expires_at = ctx
            .settings
            .token_file
            .as_deref()
            .and_then(crate::cluster::token_expiry);
        let reported = memory.report.as_ref().and_then(|r| r.host.as_ref());
        // A new release (an upgrade) or a renewed credential is written at
        // once, as a changed verdict is.
        let changed = reported.is_none_or(|h| {
            h.demotion != demotion
                || h.promotion != promotion
                || !EtcdView::same_shape(h.etcd.as_ref(), etcd.as_ref())
                || h.release != release
                || h.credential_expires_at != credential_expires_at
        });
        if !due && !changed {
            return Ok(());
        }
        if changed && let Some(Eligibility::Ineligible { reasons }) = &demotion {
            // Said once, on the change; the verdict is in the report and in
            // `fleet-role status`, where the operator looks.
            info!("this host may not be demoted: {}", reasons.join("; "));
        }
        if changed && let Some(Eligibility::Ineligible { reasons }) = &promotion {
            info!(
                "this host could not join as a server: {}",
                reasons.join("; ")
            );
        }
        if changed || etcd.is_some() {
            let t = ctx.clock.unix_secs();
            let part = HostPart {
                heartbeat_at: t,
                demotion,
                promotion,
                etcd,
                release,
                credential_expires_at,
            };
            let r = Report::with_host_part(memory.report.as_ref(), part, t);
            if let Err(e) = memory.record(ctx, client, r).await
                && crate::report::refusal(&e).is_none()
            {
                return Err(e);
            }
        }
        if due {
            self.renew(ctx, memory, client).await?;
        }
        Ok(())
    }

    /// Renews the heartbeat Lease, with the report's refusal on it while
    /// one stands. A refused renewal is said and counted, and tried again
    /// at the next heartbeat; the session goes on.
    async fn renew(
        &mut self,
        ctx: &Context,
        memory: &mut Memory,
        client: &Client,
    ) -> Result<(), kube::Error> {
        self.last = Some(ctx.clock.now());
        memory.refusal_changed = false;
        let millis = i64::try_from(ctx.clock.unix_millis()).unwrap_or(i64::MAX);
        let stamp = k8s_openapi::jiff::Timestamp::from_millisecond(millis)
            .map(MicroTime)
            .unwrap_or_else(|_| MicroTime(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        // Valid two periods: a Lease's reader (an operator's kubectl) sees
        // one renewal missed as still held.
        let duration =
            i32::try_from(ctx.settings.heartbeat.as_secs().saturating_mul(2)).unwrap_or(i32::MAX);
        let refused = memory.refused.as_ref().map(|(_, r)| r.to_string());
        let node = ctx.settings.node.as_str();
        let renewed = memory
            .published
            .renew(
                client,
                &ctx.settings.names,
                node,
                stamp,
                duration,
                refused.as_deref(),
            )
            .await;
        match renewed {
            Ok(()) => {
                if self.renew_refused.take().is_some() {
                    info!("the API accepted this host's heartbeat again");
                }
                Ok(())
            }
            Err(e) => {
                let Some(refusal) = crate::report::refusal(&e) else {
                    return Err(e);
                };
                ctx.metrics.write_refused("heartbeat", &refusal.reason);
                if self.renew_refused.as_ref() != Some(&refusal) {
                    warn!(
                        object = format!("Lease {}/{node}", ctx.settings.names.hosts_namespace),
                        "the API refused this host's heartbeat: {refusal}"
                    );
                }
                self.renew_refused = Some(refusal);
                Ok(())
            }
        }
    }

    /// Why this host's agent could not start were it demoted
    /// ([`host::eligibility`]), with the server Nodes as the API shows them
    /// now. An `Err` means the API failed.
    pub(super) async fn ineligibility(
        &mut self,
        ctx: &Context,
        client: &Client,
    ) -> Result<Vec<String>, kube::Error> {
        let servers = server_nodes(ctx, client).await?;
        let config = host::eligibility::read(&ctx.host.paths);
        let reasons = host::eligibility::assess(
            &config,
            ctx.settings.node.as_str(),
            Some(&servers),
            ctx.host.eligibility_judged(),
        );
        self.servers = Some(servers);
        Ok(reasons)
    }

    /// Asks, in the background, whether a Ready server Node is reachable
    /// (bounded): the supervisor of the voter a promotion will join is one
    /// of them. Its address (InternalIP, ExternalIP) at the port of the
    /// server the host's agent names (6443 by default); no server Node known
    /// is no answer, not a failure. Takes the answer of an ask that has
    /// ended; the verdict uses the last answer.
    fn ask_join_server(&mut self, ctx: &Context, due: bool) {
        if self.join_asking.as_ref().is_some_and(|t| t.is_finished())
            && let Some(task) = self.join_asking.take()
        {
            self.join_answer = futures::FutureExt::now_or_never(task)
                .and_then(Result::ok)
                .flatten();
        }
        // Again at each heartbeat, and at each resync while the last ask
        // failed: a server back (or a route mended) is seen within a resync.
        let again = due || !matches!(self.join_answer, Some(Ok(())));
        if self.join_asking.is_some() || !again {
            return;
        }
        let port = host::join::agent_unit(&ctx.host.paths)
            .and_then(|c| c.url().ok())
            .map_or(6443, |u| u.port());
        let candidates: Vec<(String, std::net::IpAddr)> = self
            .servers
            .iter()
            .flatten()
            .filter(|s| s.ready && s.name != ctx.settings.node.as_str())
            .flat_map(|s| {
                s.addresses
                    .iter()
                    .filter_map(|a| a.parse().ok())
                    .map(|ip| (s.name.clone(), ip))
                    .collect::<Vec<_>>()
            })
            .collect();
        self.join_asking = Some(tokio::spawn(async move {
            if candidates.is_empty() {
                return None;
            }
            let mut tried = Vec::new();
            for (name, ip) in &candidates {
                let url = protocol::JoinUrl::for_address(*ip, port);
                match crate::join::reachable(&url, std::time::Duration::from_secs(5)).await {
                    Ok(()) => return Some(Ok(())),
                    Err(why) => tried.push(format!("{name} at {url}: {why}")),
                }
            }
            Some(Err(tried.join("; ")))
        }));
    }

    /// Whether the local member's last view lists this host's member
    /// ([`crate::membership::listed`]).
    fn listed_locally(
        &self,
        addresses: &host::addresses::LocalAddresses,
        member: Option<&str>,
    ) -> Option<bool> {
        self.etcd_view
            .cached()
            .and_then(|v| crate::membership::listed(v, member, addresses))
    }

    /// Whether etcd lists this host's member, as far as any reading says:
    /// the local member's, else the last one through another server.
    pub(super) fn etcd_lists_member(
        &self,
        addresses: &host::addresses::LocalAddresses,
        member: Option<&str>,
    ) -> Option<bool> {
        self.listed_locally(addresses, member)
            .or(self.remote.answer())
    }

    /// Reads etcd's member list through another server when a decision
    /// hangs on it and the local member cannot say: the host holds a
    /// datastore with no tombstone, and the local view is missing or
    /// inconclusive. Whatever the role file names: a stepped-down host
    /// waiting to finish, a promotion over a datastore, and a server whose
    /// member was removed while it was down (its etcd no longer answers,
    /// and k3s wrote no tombstone when it was not running at the removal)
    /// each decide on it. Paced and bounded
    /// ([`crate::membership::RemoteReader::read`]).
    pub(super) async fn read_membership(&mut self, ctx: &Context) {
        let member = ctx.host.member_name();
        if !ctx.host.has_datastore()
            || ctx.host.has_tombstone()
            || self
                .listed_locally(&ctx.addresses, member.as_deref())
                .is_some()
        {
            return;
        }
        let mut extra: Vec<String> = ctx
            .host
            .join_server()
            .map(|j| j.host().to_string())
            .into_iter()
            .collect();
        for s in self.servers.iter().flatten() {
            if s.name != ctx.settings.node.as_str() {
                // Only addresses: a Node's Hostname entry would need a
                // name lookup, and TLS checks the address k3s certified.
                let ips = s
                    .addresses
                    .iter()
                    .filter(|a| a.parse::<std::net::IpAddr>().is_ok());
                extra.extend(ips.cloned());
            }
        }
        let candidates =
            crate::membership::candidates(&ctx.settings.etcd, self.etcd_view.last_read(), &extra);
        self.remote
            .read(&candidates, member.as_deref(), &ctx.addresses)
            .await;
    }
}

/// The Nodes with k3s's control-plane label, as the API's cache shows
/// them.
async fn server_nodes(
    ctx: &Context,
    client: &Client,
) -> Result<Vec<host::eligibility::ServerNode>, kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let selector = format!("{}=true", protocol::names::K3S_CONTROL_PLANE_LABEL);
    // From the API server's watch cache (resourceVersion "0"): a quorum
    // read of every server Node per host per heartbeat would be a read
    // of etcd that grows with the fleet; a Node a few seconds old is
    // as good for these verdicts.
    let list = nodes
        .list(
            &kube::api::ListParams::default()
                .labels(&selector)
                .match_any(),
        )
        .await?;
    Ok(list
        .items
        .iter()
        .map(|n| server_node(&ctx.settings.names, n))
        .collect())
}

/// A server Node as the demotion verdict reads it, through kubeview's
/// mapping (its `Ready` condition) and its addresses.
fn server_node(names: &protocol::Names, n: &Node) -> host::eligibility::ServerNode {
    let facts = kubeview::node_facts(names, n);
    host::eligibility::ServerNode {
        ready: facts.ready,
        name: facts.name,
        addresses: kubeview::addresses(n),
    }
}
