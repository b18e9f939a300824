//! One session against one API server: the report read (once per run),
//! both watches opened, and a decision on each change and on each resync
//! tick, until the API server fails, the watcher must refuse, or it is
//! stopped.

use futures::{StreamExt, pin_mut};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{Api, Client};
use protocol::names::LEASE_NAMESPACE;
use tracing::warn;

use super::{Copy, SessionEnd, Watcher, chain, step::step_end, streams::watched_by_name};
use crate::report;

impl Watcher {
    /// One session against one API server: watch the Node and the Lease,
    /// decide on each change and on each resync tick.
    pub async fn session(&mut self, client: Client) -> SessionEnd {
        self.seen.new_session();
        self.heartbeat.warn_expiry(&self.ctx);
        if self.memory.copy == Copy::NotRead {
            match self.memory.load(&self.ctx, &client).await {
                Ok(()) => {}
                Err(report::LoadError::Api(e)) => {
                    warn!(error = %chain(&e), "cannot read the report");
                    return SessionEnd::ApiTrouble;
                }
                Err(e) => return SessionEnd::Refused(e.to_string()),
            }
        }
        let nodes = watched_by_name(
            Api::<Node>::all(client.clone()),
            self.ctx.settings.node.as_str(),
        );
        let leases = watched_by_name(
            Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE),
            &self.ctx.settings.names.lease_name,
        );
        pin_mut!(nodes, leases);
        let mut tick = tokio::time::interval(self.ctx.settings.resync);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Errors in a row, by watch.
        let (mut node_errors, mut lease_errors) = (0u32, 0u32);
        loop {
            let changed = tokio::select! {
                event = nodes.next() => match event {
                    Some(Ok(node)) => {
                        node_errors = 0;
                        let (name, addresses) = (self.ctx.settings.node.as_str(), &self.ctx.addresses);
                        if let Err(why) = self.seen.check_address(node.as_ref(), name, addresses) {
                            return SessionEnd::Refused(why);
                        }
                        self.seen.node_seen(&self.ctx.settings.names, node)
                    }
                    Some(Err(e)) => {
                        if self.watch_failed("node", &e, &mut node_errors) {
                            return SessionEnd::ApiTrouble;
                        }
                        false
                    }
                    None => return SessionEnd::ApiTrouble,
                },
                event = leases.next() => match event {
                    Some(Ok(lease)) => {
                        lease_errors = 0;
                        self.seen.lease_seen(&self.ctx.settings.names, lease)
                    }
                    Some(Err(e)) => {
                        if self.watch_failed("lease", &e, &mut lease_errors) {
                            return SessionEnd::ApiTrouble;
                        }
                        false
                    }
                    None => return SessionEnd::ApiTrouble,
                },
                _ = tick.tick() => {
                    self.heartbeat.warn_expiry(&self.ctx);
                    true
                }
                outcome = step_end(&mut self.running), if self.running.is_some() => {
                    let Some(running) = self.running.take() else { continue };
                    if let Err(e) = self.conclude(&client, running, outcome).await
                        && self.trouble(&e)
                    {
                        return SessionEnd::ApiTrouble;
                    }
                    false
                }
            };
            if changed && self.seen.decidable() {
                self.decided = None;
                let outcome = self.evaluate(&client).await;
                let last = self.decided;
                self.decisions.send_modify(|d| {
                    d.made += 1;
                    d.last = last;
                });
                if let Err(e) = outcome
                    && self.trouble(&e)
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
    fn trouble(&self, e: &kube::Error) -> bool {
        let Some(refusal) = report::refusal(e) else {
            return true;
        };
        if self.memory.is_new(&refusal) {
            warn!("the API refused a request of this host's: {refusal}");
        }
        false
    }
}
