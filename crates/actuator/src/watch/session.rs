//! One session against one API server: the report read (once per run),
//! both watches opened, and a decision on each change and on each resync
//! tick, until the API server fails, the watcher must refuse, or it is
//! stopped.

use futures::{StreamExt, pin_mut};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{Api, Client};
use protocol::names::LEASE_NAMESPACE;
use tracing::warn;

use super::{
    context::{Context, chain},
    decision::evaluate,
    heartbeat::Heartbeat,
    memory::{Copy, Memory},
    seen::Seen,
    step::StepRunner,
    streams::{watch_failed, watched_by_name},
};
use crate::report;

/// How a watch session ended.
#[derive(Debug, PartialEq, Eq)]
pub enum SessionEnd {
    /// Asked to stop.
    Shutdown,
    /// The API server in use failed; try the next candidate.
    ApiTrouble,
    /// The watcher must not act at all (a report that does not parse, a
    /// Node whose address is another machine's); the reason says what to fix.
    Refused(String),
}

/// One session against one API server: watch the Node and the Lease,
/// decide on each change and on each resync tick.
pub(super) async fn run(
    ctx: &Context,
    memory: &mut Memory,
    heartbeat: &mut Heartbeat,
    seen: &mut Seen,
    steps: &mut StepRunner,
    client: Client,
) -> SessionEnd {
    seen.new_session();
    heartbeat.warn_expiry(ctx);
    if memory.copy == Copy::NotRead {
        match memory.load(ctx, &client).await {
            Ok(()) => {}
            Err(report::LoadError::Api(e)) => {
                warn!(error = %chain(&e), "cannot read the report");
                return SessionEnd::ApiTrouble;
            }
            Err(e) => return SessionEnd::Refused(e.to_string()),
        }
    }
    let nodes = watched_by_name(Api::<Node>::all(client.clone()), ctx.settings.node.as_str());
    let leases = watched_by_name(
        Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE),
        &ctx.settings.names.lease_name,
    );
    pin_mut!(nodes, leases);
    let mut tick = tokio::time::interval(ctx.settings.resync);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Errors in a row, by watch.
    let (mut node_errors, mut lease_errors) = (0u32, 0u32);
    loop {
        let changed = tokio::select! {
            event = nodes.next() => match event {
                Some(Ok(node)) => {
                    node_errors = 0;
                    let (name, addresses) = (ctx.settings.node.as_str(), &ctx.addresses);
                    if let Err(why) = seen.check_address(node.as_ref(), name, addresses) {
                        return SessionEnd::Refused(why);
                    }
                    seen.node_seen(&ctx.settings.names, node)
                }
                Some(Err(e)) => {
                    if watch_failed(&ctx.metrics, "node", &e, &mut node_errors) {
                        return SessionEnd::ApiTrouble;
                    }
                    false
                }
                None => return SessionEnd::ApiTrouble,
            },
            event = leases.next() => match event {
                Some(Ok(lease)) => {
                    lease_errors = 0;
                    seen.lease_seen(&ctx.settings.names, lease)
                }
                Some(Err(e)) => {
                    if watch_failed(&ctx.metrics, "lease", &e, &mut lease_errors) {
                        return SessionEnd::ApiTrouble;
                    }
                    false
                }
                None => return SessionEnd::ApiTrouble,
            },
            _ = tick.tick() => {
                heartbeat.warn_expiry(ctx);
                true
            }
            outcome = steps.end(), if steps.is_running() => {
                if let Err(e) = steps.conclude(ctx, memory, seen.node.as_ref(), &client, outcome).await
                    && trouble(memory, &e)
                {
                    return SessionEnd::ApiTrouble;
                }
                false
            }
        };
        if changed && seen.decidable() {
            steps.deciding();
            let outcome = evaluate(ctx, memory, heartbeat, seen, steps, &client).await;
            steps.count_decision();
            if let Err(e) = outcome
                && trouble(memory, &e)
            {
                return SessionEnd::ApiTrouble;
            }
        }
    }
}

/// Whether `e` is trouble with the API server in use (another may
/// answer), rather than a refusal every server would give alike: a
/// refusal keeps the session (its watches and heartbeat) going, and the
/// request is made again at the next decision. A refusal of the report
/// was said where it was sent; any other is said here.
fn trouble(memory: &Memory, e: &kube::Error) -> bool {
    let Some(refusal) = report::refusal(e) else {
        return true;
    };
    if memory.is_new(&refusal) {
        warn!("the API refused a request of this host's: {refusal}");
    }
    false
}
