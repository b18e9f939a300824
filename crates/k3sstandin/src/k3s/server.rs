//! `k3s server`: k3s's supervisor on 6443 (`supervisor.rs`), a real etcd
//! member (a new cluster, a learner joining the named server, or the existing
//! member restarted), a real kube-apiserver on `127.0.0.1:6444` behind the
//! supervisor, over the local member once it votes (none at the etcd-only
//! level), the leader's
//! learner promotion (`learners.rs`), k3s's member-removal controller, the
//! tombstone, and the embedded kubelet with k3s's labels and annotations,
//! which starts only once the local API server is up (a learner's Node shows
//! nothing of etcd).

use std::{net::Ipv4Addr, time::Duration};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;
use testcp::{ApiServer, ApiServerOptions, ClusterState, Etcd, Pki, Probe, TokenAuthFile};
use tracing::{info, warn};

use super::{
    Ctx,
    bootstrap::server_token,
    deploy, election, learners, member, node, pods,
    removal::{SLOW_ROUND, peers, removal_seen, removed},
    reset,
    retry::retried,
    supervisor::{self, Supervisor},
    token, tombstone,
};
use crate::{
    api::Apis,
    etcd_gw, lab_pki,
    spec::{APISERVER_PORT, ETCD_CLIENT_PORT, LabSpec},
};
use protocol::names::{
    K3S_ETCD_NODE_ADDRESS, K3S_ETCD_NODE_NAME, K3S_ETCD_REMOVE, K3S_ETCD_REMOVED_NODE_NAME,
    K3S_ETCD_ROLE_LABEL,
};

/// How often the `k3s-etcd` leader's member-removal controller looks at
/// the Nodes (k3s's reacts to each change through a watch).
const REMOVAL_EVERY: Duration = Duration::from_secs(1);

/// Runs `k3s server` until it fails or is removed.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    let clock = clock::Clock::system();
    let ip = ctx.ip()?;
    let name = ctx.node()?;
    let with_api = !ctx.config.flag("disable-apiserver");
    // k3s starts its supervisor first (`pkg/daemons/control/server.go`
    // `prepare`, before etcd): from here on 6443 answers, a learner's and
    // an etcd-only server's included, with a 503 until an API server is
    // behind it.
    let supervisor = Supervisor::start(
        &ctx.spec.pki_dir(),
        &ctx.spec.ips(),
        if with_api {
            supervisor::Api::NotReady
        } else {
            supervisor::Api::Disabled
        },
        token::Passwd::new(server_token(&ctx).as_deref(), ctx.config.get("agent-token")),
        &ctx.at(lab_pki::HOST_ETCD_TLS),
    )
    .await?;
    let db = ctx.at("var/lib/rancher/k3s/server/db");
    let etcd_dir = db.join("etcd");
    let tombstone = etcd_dir.join("tombstone");
    // k3s's start over a tombstone (`tombstone.rs`): refused without
    // `server:`, else the datastore backed up and a new learner joins. A
    // fleet-role host must never get here: its drop-in's condition keeps k3s
    // from starting over a tombstone.
    tombstone::on_start(&etcd_dir, ctx.config.get("server"), clock.unix_secs())?;
    let own_client = LabSpec::etcd_url(ip);
    // k3s's clients of etcd (itself, kube-apiserver) use the host's
    // server/tls/etcd/ certificates; etcd refuses a client without one. A
    // server without them (a host that finished as an agent, its
    // server/tls removed) makes them from the CAs in the join server's
    // bootstrap data, as k3s does (`deps.go`, `genETCDCerts`).
    super::bootstrap::member_certs(&ctx, ip).await?;
    let own = ctx.etcd(&own_client)?;
    let peer_url = LabSpec::etcd_peer_url(ip);
    let name_file = etcd_dir.join("name");
    // k3s (`pkg/cluster/managed.go`, `start`): `--cluster-reset` resets the
    // member (from a snapshot, if one is named) and exits; a normal start
    // removes the flag file a reset leaves.
    if ctx.config.flag("cluster-reset") {
        return reset::run(&ctx, ip, &db, &own).await;
    }
    let _ = std::fs::remove_file(reset::flag_file(&db));
    let (member_name, initial_cluster, state) = if etcd_dir.join("member/wal").exists() {
        let n = std::fs::read_to_string(&name_file)
            .context("the member name file")?
            .trim()
            .to_string();
        info!("restarting existing etcd member {n}");
        (n.clone(), format!("{n}={peer_url}"), ClusterState::Existing)
    } else if let Some(server) = ctx.config.get("server") {
        let join = protocol::JoinUrl::parse(server)?;
        let host = join
            .as_str()
            .trim_start_matches("https://")
            .rsplit_once(':')
            .map(|(h, _)| h)
            .unwrap_or_default()
            .to_string();
        super::bootstrap::bootstrap(&ctx, &join).await?;
        let join_etcd = own.at(format!("https://{host}:{ETCD_CLIENT_PORT}"));
        // k3s (pkg/etcd/etcd.go, `join`) refuses to join while any member
        // carries this node's name, a learner left by a rolled-back
        // promotion included: the unit fails and restarts until the member is
        // gone.
        if let Ok((_, members)) = etcd_gw::member_list(&join_etcd).await
            && let Some(dup) = duplicate_member(&members, &name)
        {
            bail!(
                "duplicate node name found, please use a unique name for this node (member {dup})"
            );
        }
        let n = member::new_name(&name);
        info!("joining {join} as etcd learner {n}");
        let (id, members) = add_learner(&join_etcd, &peer_url).await?;
        std::fs::create_dir_all(&etcd_dir)?;
        std::fs::write(&name_file, &n)?;
        let cluster: Vec<String> = members
            .iter()
            .filter_map(|m| {
                let url = m.peer_urls.first()?;
                if m.id == id {
                    Some(format!("{n}={url}"))
                } else if m.name.is_empty() {
                    None
                } else {
                    Some(format!("{}={url}", m.name))
                }
            })
            .collect();
        (n, cluster.join(","), ClusterState::Existing)
    } else {
        let n = member::new_name(&name);
        info!("initialising a new etcd cluster as {n}");
        std::fs::create_dir_all(&etcd_dir)?;
        std::fs::write(&name_file, &n)?;
        (n.clone(), format!("{n}={peer_url}"), ClusterState::New)
    };
    let opts = member::etcd_options(&ctx, ip, &etcd_dir, &member_name, initial_cluster, state)?;
    let logs = ctx.at("var/log/k3s");
    let tls = ctx.at(lab_pki::HOST_ETCD_TLS);
    // A fault the lab's tests inject: this host's etcd does not start.
    // (Under var/lib/rancher: a real-systemd host has that directory bound in.)
    let fails = ctx.at("var/lib/rancher/fleet-role-lab-etcd-fails");
    if fails.exists() {
        // Written `once`, the fault fails this start only: the next start
        // runs, with no test racing the unit's restarts to lift it.
        if std::fs::read_to_string(&fails).is_ok_and(|s| s.trim() == "once") {
            std::fs::remove_file(&fails).context("lifting the one-start etcd fault")?;
        }
        bail!(
            "etcd failed to start (injected by the lab: var/lib/rancher/fleet-role-lab-etcd-fails)"
        );
    }
    let mut etcd = Etcd::spawn(opts).context("starting etcd")?;
    if let Err(e) = etcd
        .wait_healthy(Probe::Serializable, Duration::from_secs(60))
        .await
    {
        // k3s's etcd reports `ErrMemberRemoved` at a start too (a learner
        // removed before it caught up, a member removed while k3s was
        // down): the tombstone is written, and the next start over it
        // backs the datastore up and joins anew.
        etcd.kill();
        if removed(&ctx, &own, ip, |m| m.peer_urls.contains(&peer_url)).await {
            tombstone::write(&tombstone)?;
            bail!(
                "This node has been removed from the cluster - please restart k3s to rejoin the cluster"
            );
        }
        return Err(e).context("etcd did not become healthy");
    }
    info!("etcd member {member_name} is serving");
    // A learner just started may leave the first asks unanswered (each
    // bounded at 5 s) while it catches up; k3s does not restart for that.
    let me = retried(
        "this etcd member's status",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || etcd_gw::status(&own),
    )
    .await?
    .member;

    let spec = &ctx.spec;
    let tokens = TokenAuthFile::load(&spec.tokens_file())?;
    let pki = Pki::load(&spec.pki_dir(), &spec.ips());
    let own_api = LabSpec::api_url(ip);
    // k3s (pkg/cli/server/server.go) with `disable-agent` runs
    // `agent.RunStandalone`: no containerd and no kubelet, so no Node
    // heartbeat, no node Lease and no pods; READY=1 does not wait on it.
    let agent = !ctx.config.flag("disable-agent");
    if !agent {
        info!("disable-agent: no kubelet or containerd runs on this server");
    }
    // The kubelet reaches its own API server first, then the others (k3s's
    // agent load balancer does the same with the addresses it knows).
    let mut urls = vec![];
    if with_api {
        urls.push(own_api.clone());
    }
    urls.extend(spec.all_api_urls().into_iter().filter(|u| *u != own_api));
    let apis = Apis::new(&spec.pki_dir(), &spec.ips(), tokens.admin_token(), urls)?;
    let kubelet = node::Kubelet {
        name: name.clone(),
        ip: ip.to_string(),
        apis: apis.clone(),
    };
    let mut apiserver: Option<ApiServer> = None;
    // k3s's `k3s-etcd` leader election (`election.rs`), once this server's
    // API server is up: only its holder runs the member-removal controller.
    let mut election: Option<election::Handle> = None;
    let mut last_removal = clock.now();
    let mut registered = false;
    let mut ready = false;
    // k3s's auto-deploy folder, applied through this server's own API
    // server once it serves, on a task of its own as k3s's goroutine
    // (`deploy.rs`); it ends with the process.
    let manifests = ctx.at("var/lib/rancher/k3s/server/manifests");
    // k3s (`pkg/cli/server/server.go`, `pkg/agent/run.go`): with
    // `disable-apiserver` the embedded agent bootstraps from `server:` when
    // one is set, and only from it; the less convenient reading is taken:
    // until that server's supervisor answers, the host is not up (no READY=1,
    // no kubelet). A `server:` naming a host that left blocks the start.
    let etcd_only_join = if with_api {
        None
    } else {
        ctx.config
            .get("server")
            .map(protocol::JoinUrl::parse)
            .transpose()?
    };
    let mut bootstrapped = etcd_only_join.is_none();
    let heartbeat = spec.heartbeat();
    // k3s's loop is a ticker: its first round comes one period after start.
    let mut last_promote = clock.now();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut last_beat = clock.now() - heartbeat;
    let mut last_sync = clock.now() - pods::SYNC_EVERY;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = term.recv() => {
                // k3s embeds etcd and the API server: when k3s has exited they
                // are gone too. The stand-in runs them as children, so it stops
                // them before it exits (a restart must not find their ports taken).
                info!("SIGTERM: stopping kube-apiserver and etcd");
                if let Some(e) = election.take() {
                    e.release().await;
                }
                supervisor.set(supervisor::Api::NotReady);
                if let Some(mut a) = apiserver.take() {
                    a.kill();
                }
                etcd.kill();
                return Ok(());
            }
        }
        if election
            .as_ref()
            .is_some_and(|e| e.state() == election::State::Lost)
        {
            // wrangler's `OnStoppedLeading`: "leaderelection lost", and k3s
            // exits, its etcd and API server with it; the unit restarts.
            if let Some(mut a) = apiserver.take() {
                a.kill();
            }
            etcd.kill();
            bail!("leaderelection lost for {}", election::LEASE);
        }
        // The member list while this host is a member; `None` once removed.
        let listed = if !etcd.is_running() {
            if !removed(&ctx, &own, ip, |m| m.id == me).await {
                bail!("etcd exited");
            }
            None
        } else {
            let list = match etcd_gw::member_list(&own).await {
                Ok((_, m)) => m,
                // A learner serves no member list ("rpc not supported for
                // learner"), and a member cut off or removed answers nothing
                // useful: ask the others, as k3s's client would.
                Err(e) => match others_list(&ctx, &own, ip).await {
                    Some(m) => m,
                    None => {
                        warn!("member list: {e:#}");
                        continue;
                    }
                },
            };
            Some(list).filter(|m| m.iter().any(|m| m.id == me))
        };
        let Some(members) = listed else {
            // k3s closes etcd only: its in-process kube-apiserver stays, over
            // a closed etcd, and the supervisor still hands it every request
            // (what a client then gets is that API server's own: a request
            // held until its timeout, a 500).
            etcd.kill();
            tombstone::write(&tombstone)?;
            let others = spec
                .all_api_urls()
                .into_iter()
                .filter(|u| *u != own_api)
                .collect();
            let kubelet = node::Kubelet {
                apis: Apis::new(&spec.pki_dir(), &spec.ips(), tokens.admin_token(), others)?,
                ..kubelet
            };
            let removed = Removed {
                kubelet,
                member: member_name,
                apiserver,
                supervisor,
                election,
            };
            return removed.run(&ctx, ip, with_api, term).await;
        };
        let voter = members.iter().any(|m| m.id == me && !m.is_learner);
        // The API server runs over the local member once it votes: a learner
        // serves no requests (k3s's ETCD.Test fails until it is promoted).
        if with_api && voter && apiserver.is_none() {
            // k3s (`pkg/daemons/control/server.go` `apiServer`,
            // `defaults`): `--bind-address` loopback, `--secure-port` the
            // supervisor's port + 1, `--advertise-address` the node's.
            let mut o = ApiServerOptions::new(
                std::net::Ipv4Addr::LOCALHOST.into(),
                vec![own_client.clone()],
                &pki,
                &tokens,
                logs.join("kube-apiserver.log"),
            );
            o.port = Some(APISERVER_PORT);
            o.extra_args.extend([
                format!("--advertise-address={ip}"),
                format!("--etcd-cafile={}", tls.join("server-ca.crt").display()),
                format!("--etcd-certfile={}", tls.join("client.crt").display()),
                format!("--etcd-keyfile={}", tls.join("client.key").display()),
            ]);
            // An audit log of the actuators' requests, for the lab's benchmark.
            let policy = spec.pki_dir().join("audit-policy.yaml");
            if policy.exists() {
                o.extra_args
                    .push(format!("--audit-policy-file={}", policy.display()));
                o.extra_args.push(format!(
                    "--audit-log-path={}",
                    logs.join("audit.log").display()
                ));
            }
            match ApiServer::start(o).await {
                Ok(a) => {
                    info!("kube-apiserver serving at {}", a.url());
                    apiserver = Some(a);
                    let mut cfg = pki.client_config(&own_api, Some(tokens.admin_token()));
                    cfg.read_timeout = Some(Duration::from_secs(15));
                    tokio::spawn(deploy::watch(
                        kube::Client::try_from(cfg)?,
                        manifests.clone(),
                        clock.clone(),
                    ));
                    supervisor.set(supervisor::Api::Up);
                    let own_only = Apis::new(
                        &spec.pki_dir(),
                        &spec.ips(),
                        tokens.admin_token(),
                        vec![own_api.clone()],
                    )?;
                    election = Some(
                        election::Election::new(name.clone(), own_only, clock.clone()).spawn(),
                    );
                }
                Err(e) => warn!("kube-apiserver: {e:#}"),
            }
        }
        // k3s (pkg/cli/server/server.go) sends READY=1 once its API server is
        // ready (unless disabled; etcd-only, once its agent has bootstrapped)
        // and its etcd passes ETCD.Test, which a learner does not. Until then `systemctl start k3s` does not return.
        if let Some(join) = etcd_only_join.as_ref().filter(|_| !bootstrapped) {
            bootstrapped = supervisor::answers_ping(&spec.pki_dir(), &spec.ips(), join).await;
            if !bootstrapped {
                warn!("Waiting to retrieve agent configuration; server {join} is not ready");
            }
        }
        if !ready
            && bootstrapped
            && voter
            && (apiserver.is_some() || !with_api)
            && etcd
                .wait_healthy(Probe::Linearizable, Duration::from_secs(2))
                .await
                .is_ok()
        {
            ready = true;
            super::notify_ready("server");
        }
        // The round's calls through the API may each wait out a read
        // timeout once this member is removed (its own API server then holds
        // every request); k3s learns of the removal from its etcd whatever
        // its loops are doing, so the round is cut short by it.
        let round = async {
            if clock.since(last_promote) >= spec.promote_every() {
                last_promote = clock.now();
                learners::Loop {
                    own: &own,
                    me,
                    apis: &apis,
                    max_stall: spec.learner_max_stall(),
                    hold_promotions: &spec.hold_promotions_file(),
                    hold_etcd_is_voter: &spec.hold_etcd_is_voter_file(),
                }
                .run(&members)
                .await;
            }
            // k3s's member-removal controller reacts to Node changes (a watch);
            // here it looks every second, and only on the `k3s-etcd` leader.
            if clock.since(last_removal) >= REMOVAL_EVERY
                && election
                    .as_ref()
                    .is_some_and(|e| e.state() == election::State::Leading)
            {
                last_removal = clock.now();
                if let Err(e) = removal_controller(&apis, &own, &members).await {
                    warn!("member removal: {e:#}");
                }
            }
            // k3s's embedded agent waits for its local supervisor, which
            // answers 503 until the local API server is ready (or, etcd-only,
            // until its etcd is): a learner's kubelet does not run, and its Node
            // (an agent's before) shows nothing of etcd until the promotion.
            if ready && clock.since(last_beat) >= heartbeat {
                last_beat = clock.now();
                if let Err(e) =
                    kubelet_beat(&ctx, &kubelet, &mut registered, with_api, &member_name, ip).await
                {
                    warn!("kubelet: {e:#}");
                }
            }
        };
        tokio::select! {
            () = round => {}
            // Asked only of a slow round: a quick one adds no load on etcd.
            () = async {
                tokio::time::sleep(SLOW_ROUND).await;
                removal_seen(&ctx, &own, ip, |m| m.id == me).await;
            } => continue,
        }
        // The embedded kubelet runs at every level, etcd-only included,
        // unless the agent is disabled.
        if agent && clock.since(last_sync) >= pods::SYNC_EVERY {
            last_sync = clock.now();
            if let Err(e) = pods::sync(&kubelet, &ctx.root).await {
                warn!("pods: {e:#}");
            }
        }
    }
}

/// A member already named for `node` (k3s's member names are
/// `<node>-<8 hex>`; a learner that has not started yet has no name).
fn duplicate_member(members: &[etcd_gw::Member], node: &str) -> Option<String> {
    members
        .iter()
        .filter(|m| !m.name.is_empty())
        .find(|m| {
            let prefix = match m.name.rfind('-') {
                Some(i) if i > 1 => &m.name[..i],
                _ => m.name.as_str(),
            };
            prefix == node
        })
        .map(|m| m.name.clone())
}

async fn add_learner(
    join_etcd: &etcd_gw::Endpoint,
    peer_url: &str,
) -> anyhow::Result<(u64, Vec<etcd_gw::Member>)> {
    // etcd refuses a new member until every voter has been connected a while,
    // and allows one learner at a time: retry as k3s does.
    retried(
        &format!("adding the learner at {}", join_etcd.url()),
        Duration::from_secs(120),
        Duration::from_secs(1),
        || etcd_gw::member_add_learner(join_etcd, peer_url),
    )
    .await
}

async fn kubelet_beat(
    ctx: &Ctx,
    kubelet: &node::Kubelet,
    registered: &mut bool,
    with_api: bool,
    member: &str,
    ip: Ipv4Addr,
) -> anyhow::Result<()> {
    let agent = !ctx.config.flag("disable-agent");
    if agent && !*registered {
        let pw = node::ensure_password(&ctx.root)?;
        kubelet.register().await?;
        kubelet.check_password(&pw).await?;
        *registered = true;
    }
    let current = kubelet.get().await?;
    if !agent && current.is_none() {
        // No kubelet registers the Node; k3s's metadata controller has none to patch.
        return Ok(());
    }
    // handleSelf: k3s's labels and the etcd annotations; a rejoined host (a
    // new member name) has its old removal annotations cleared.
    let (labels, mut annotations) = node::server_meta(with_api, member, &ip.to_string());
    if let Some(a) = current
        .as_ref()
        .and_then(|n| n.metadata.annotations.as_ref())
        && a.get(K3S_ETCD_REMOVED_NODE_NAME)
            .is_some_and(|r| r != member)
    {
        annotations[K3S_ETCD_REMOVED_NODE_NAME] = serde_json::Value::Null;
        annotations[K3S_ETCD_REMOVE] = serde_json::Value::Null;
    }
    kubelet.patch_meta(labels, annotations).await?;
    if !agent {
        // No kubelet: Ready and the node Lease go stale (the node lifecycle
        // controller, where one runs, marks the Node NotReady).
        return Ok(());
    }
    // `EtcdIsVoter` is the etcd leader's to write (`learners.rs`), never the
    // host's own kubelet's.
    kubelet.heartbeat(&[]).await
}

/// k3s's member-removal controller: a Node with the etcd label and
/// `etcd.k3s.cattle.io/remove=true` has its member removed (`RemovePeer`: the
/// member whose name and peer host match the Node's `node-name` and
/// `node-address`; none matching is no error); then `removed-node-name` is
/// set and the node-name/address annotations deleted, whether a member went
/// or not. A Node already marked removed is left alone.
async fn removal_controller(
    apis: &Apis,
    own: &etcd_gw::Endpoint,
    members: &[etcd_gw::Member],
) -> anyhow::Result<()> {
    let nodes = apis
        .any(|c| async move {
            Api::<Node>::all(c)
                .list(&ListParams::default().labels(&format!("{K3S_ETCD_ROLE_LABEL}=true")))
                .await
        })
        .await?;
    for n in nodes.items {
        let a = n.metadata.annotations.clone().unwrap_or_default();
        if !a
            .get(K3S_ETCD_REMOVE)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            continue;
        }
        if a.contains_key(K3S_ETCD_REMOVED_NODE_NAME) {
            // Already removed (a rejoined host's stale mark is cleared by its
            // own metadata writes).
            continue;
        }
        let node = n.metadata.name.clone().unwrap_or_default();
        // k3s-io/k3s#12920: with no node-name (or node-address) annotation
        // the stored controller errors and requeues; here it is skipped.
        let (Some(member), Some(address)) = (
            a.get(K3S_ETCD_NODE_NAME).cloned(),
            a.get(K3S_ETCD_NODE_ADDRESS).cloned(),
        ) else {
            warn!("node {node}: remove requested without node-name/node-address annotations");
            continue;
        };
        if let Some(m) = remove_peer_target(members, &member, &address) {
            if let Err(e) = etcd_gw::member_remove(own, m.id).await {
                let msg = format!("{e:#}");
                warn!("removing member {member} of {node}: {msg}");
                if msg.contains("not enough started")
                    || msg.contains("re-configuration failed due to not enough started members")
                {
                    patch_annotations(apis, &node, json!({ K3S_ETCD_REMOVE: null })).await?;
                }
                continue;
            }
            info!(
                "Removing name={member} id={} address={address} from etcd",
                m.id
            );
        }
        patch_annotations(
            apis,
            &node,
            json!({ K3S_ETCD_REMOVED_NODE_NAME: member, K3S_ETCD_NODE_NAME: null, K3S_ETCD_NODE_ADDRESS: null }),
        )
        .await?;
    }
    Ok(())
}

/// k3s's `RemovePeer` match: the member named `name` with a peer URL whose
/// host is `address`. With none, k3s returns no error and removes nothing.
fn remove_peer_target<'a>(
    members: &'a [etcd_gw::Member],
    name: &str,
    address: &str,
) -> Option<&'a etcd_gw::Member> {
    members
        .iter()
        .find(|m| m.name == name && m.peer_urls.iter().any(|u| url_host(u) == Some(address)))
}

/// The host of `scheme://host[:port][/path]` (brackets of an IPv6 host dropped).
fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.0,
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    Some(host)
}

async fn patch_annotations(
    apis: &Apis,
    node: &str,
    annotations: serde_json::Value,
) -> anyhow::Result<()> {
    let p = json!({"metadata": {"annotations": annotations}});
    apis.any(|c| {
        let (n, p) = (node.to_string(), p.clone());
        async move {
            Api::<Node>::all(c)
                .patch(&n, &PatchParams::default(), &Patch::Merge(&p))
                .await
        }
    })
    .await
    .map(drop)
}

/// The member list as the first other server that answers has it.
async fn others_list(
    ctx: &Ctx,
    own: &etcd_gw::Endpoint,
    ip: Ipv4Addr,
) -> Option<Vec<etcd_gw::Member>> {
    for url in peers(ctx, own, ip) {
        if let Ok((_, members)) = etcd_gw::member_list(&url).await {
            return Some(members);
        }
    }
    None
}

/// k3s once its member is removed (`pkg/etcd/etcd.go` and
/// `pkg/daemons/executor/embed.go`, on `ErrMemberRemoved`): the tombstone is
/// written, etcd closed and k3s's message logged, and k3s stays up, its
/// in-process kube-apiserver with it, over the closed etcd (the stand-in
/// keeps its real kube-apiserver running over the stopped member, so a client
/// sent there gets what that API server answers without its etcd). Its
/// kubelet keeps the Node Ready through the other servers, and the metadata
/// controller puts `node-name`/`node-address` back beside `removed-node-name`
/// (the leader's loop then says `NotAMember`). Only a stop (SIGTERM) ends it.
struct Removed {
    /// The kubelet, reaching the other servers' API only.
    kubelet: node::Kubelet,
    /// The removed member's name.
    member: String,
    /// kube-apiserver, left running over the stopped etcd.
    apiserver: Option<ApiServer>,
    /// The supervisor, still handing requests to it.
    supervisor: Supervisor,
    /// The `k3s-etcd` candidacy, still running: a holder cannot renew
    /// through its own API server any more, loses the Lease after the renew
    /// deadline, and k3s exits (k3s-io/k3s#13498 describes removed servers
    /// exiting and being restarted by systemd).
    election: Option<election::Handle>,
}

impl Removed {
    async fn run(
        mut self,
        ctx: &Ctx,
        ip: Ipv4Addr,
        with_api: bool,
        mut term: tokio::signal::unix::Signal,
    ) -> anyhow::Result<()> {
        warn!(
            "This node has been removed from the cluster - please restart k3s to rejoin the cluster"
        );
        let mut registered = false;
        let agent = !ctx.config.flag("disable-agent");
        let mut tick = tokio::time::interval(ctx.spec.heartbeat());
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = term.recv() => {
                    info!("SIGTERM: stopping kube-apiserver (this node's member was removed)");
                    if let Some(e) = self.election.take() {
                        e.release().await;
                    }
                    self.supervisor.set(supervisor::Api::NotReady);
                    if let Some(mut a) = self.apiserver.take() {
                        a.kill();
                    }
                    return Ok(());
                }
            }
            if self
                .election
                .as_ref()
                .is_some_and(|e| e.state() == election::State::Lost)
            {
                if let Some(mut a) = self.apiserver.take() {
                    a.kill();
                }
                bail!("leaderelection lost for {}", election::LEASE);
            }
            if let Err(e) = kubelet_beat(
                ctx,
                &self.kubelet,
                &mut registered,
                with_api,
                &self.member,
                ip,
            )
            .await
            {
                warn!("kubelet: {e:#}");
            }
            if agent && let Err(e) = pods::sync(&self.kubelet, &ctx.root).await {
                warn!("pods: {e:#}");
            }
        }
    }
}

#[cfg(test)]
mod tests;
