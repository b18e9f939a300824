//! Carrying out one [`Action`]: a write to the regrade Lease (with its
//! resourceVersion as the precondition, so a write over someone else's
//! change is refused with 409), a merge patch of a Node under the field
//! manager `fleet-role`, and an Event on the Nodes concerned, so that
//! `kubectl describe node` tells the story.
//!
//! Read-your-writes is the writer's: every object a write returns (and the
//! Lease read again before one) goes into the watches' store, when the
//! actor has one ([`Actor::with_watch`]), so the next decision reads what
//! this process just wrote rather than what the watch has not brought yet.

use fleetdecide::SwapRecord;
use fleetdecide::{Action, Outcome, StopKind, SwapState};
use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{Node, ObjectReference},
        events::v1::Event,
    },
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use kubeaccess::server_clock::ServerClock;
use protocol::{
    Names,
    clock_offset::{allowed_offset_ms, off_reason},
    names::LEASE_NAMESPACE,
};
use serde_json::Value;
use std::sync::Arc;
use tracing::warn;

use fleetdecide::{Claim, Standing};

use crate::{config::Settings, events::EventReason, observe::Observed, watch::FleetWatch};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "fleet-role";

/// Why a write was not made.
#[derive(Debug, thiserror::Error)]
pub enum ActError {
    /// The Lease is not this process's any more: nothing more is written.
    #[error("lost the regrade Lease: {0}")]
    Lost(String),
    /// The Lease changed since it was read (409): read again and decide again.
    #[error("the regrade Lease changed since it was read")]
    Conflict,
    /// This process's clock is off the API server's by more than the Lease
    /// allows (`protocol::clock_offset`): nothing is written.
    #[error("{0}")]
    ClockOff(String),
    /// The API refused or failed.
    #[error("{context}: {source}")]
    Api {
        /// What was being written.
        context: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

/// Carries out actions for one controller process.
#[derive(Clone)]
pub struct Actor {
    client: Client,
    settings: Settings,
    /// The store each write's answer goes into (`swap`, `abort`, `run`);
    /// none for the commands that decide on one list (`pause`, a dry run).
    fleet: Option<Arc<FleetWatch>>,
    /// The API server's clock as this process's clients see it; none for
    /// the commands that do not drive a change.
    server_clock: Option<ServerClock>,
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

impl Actor {
    /// An actor writing with `client`.
    pub fn new(client: Client, settings: Settings) -> Self {
        Self {
            client,
            settings,
            fleet: None,
            server_clock: None,
        }
    }

    /// Checks this process's clock against the API server's before every
    /// write of a change (`server_clock`, from its clients' answers).
    pub fn with_server_clock(mut self, seen: ServerClock) -> Self {
        self.server_clock = Some(seen);
        self
    }

    /// Refuses a write while this process's clock is surely off the API
    /// server's by more than half of `skew_margin_secs`: the Lease it
    /// writes and judges would be off by as much for the hosts (a clock
    /// behind would hold a Lease that has lapsed for everyone else).
    pub fn check_clock(&self) -> Result<(), ActError> {
        let margin = self.settings.core.skew_margin;
        let off = self
            .server_clock
            .as_ref()
            .and_then(ServerClock::offset)
            .and_then(|o| o.beyond(allowed_offset_ms(margin)));
        match off {
            Some(ms) => Err(ActError::ClockOff(off_reason(
                "the controller's",
                ms,
                margin,
            ))),
            None => Ok(()),
        }
    }

    /// Puts what each write returns into `fleet`'s store.
    pub fn with_watch(mut self, fleet: Arc<FleetWatch>) -> Self {
        self.fleet = Some(fleet);
        self
    }

    /// The Lease as this process last wrote or read it, into the store:
    /// the watch brings it too, but later than the next decision.
    fn remember_lease(&self, lease: &Lease) {
        if let Some(f) = &self.fleet {
            f.apply_lease(&self.settings, lease);
        }
    }

    /// A Node as this process last wrote it, into the store.
    fn remember_node(&self, node: &Node) {
        if let Some(f) = &self.fleet {
            f.apply_node(&self.settings, node);
        }
    }

    fn names(&self) -> &Names {
        self.settings.names()
    }

    /// Now, precisely, for the stamps the API keeps (a renewal, a
    /// condition's transition, an Event).
    fn stamp(&self) -> Timestamp {
        Timestamp::try_from(self.settings.clock.wall()).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn leases(&self) -> Api<Lease> {
        Api::namespaced(self.client.clone(), LEASE_NAMESPACE)
    }

    /// Reads the Lease again and checks it is still this process's for its
    /// swap and valid for an irreversible write. Called right before every
    /// write to a Node: the Lease is not a fence, so it is checked as late
    /// as possible. The Lease read goes into the store when it passes.
    pub async fn recheck_lease(&self, state: &SwapState) -> Result<(), ActError> {
        let lease = crate::observe::read_lease(&self.client, self.names())
            .await
            .map_err(|source| ActError::Api {
                context: "reading the regrade Lease".into(),
                source,
            })?;
        let Some(lease) = lease else {
            return Err(ActError::Lost("the regrade Lease is gone".into()));
        };
        let facts = kubeview::lease_facts(self.names(), &lease);
        let claim = Claim {
            identity: &self.names().controller_identity,
            instance: &state.instance,
            swap: state.taken.as_ref().map(|s| s.as_str()),
        };
        let now = self.settings.clock.unix_secs();
        match fleetdecide::standing(&facts, claim, now, self.settings.core.skew_margin) {
            Standing::Ours => {
                self.remember_lease(&lease);
                Ok(())
            }
            Standing::NotOurs => Err(ActError::Lost(format!(
                "the regrade Lease is now held by {} (instance {}) for swap {}",
                fleetdecide::one_line(facts.holder.as_deref().unwrap_or("nobody")),
                fleetdecide::one_line(facts.instance.as_deref().unwrap_or("none")),
                fleetdecide::one_line(facts.swap.as_deref().unwrap_or("none")),
            ))),
            // Ours, but about to lapse: renew before writing (the next
            // decision asks for it).
            Standing::Lapsing => Err(ActError::Conflict),
        }
    }

    /// Reads the regrade Lease (after a 409: the watch may not have brought
    /// the other writer's change yet, and deciding again on the old one
    /// would only meet the same 409). Not put into the store: see
    /// [`Actor::reread_lease`].
    pub async fn read_lease(&self) -> Result<Option<Lease>, ActError> {
        crate::observe::read_lease(&self.client, self.names())
            .await
            .map_err(|source| ActError::Api {
                context: "reading the regrade Lease".into(),
                source,
            })
    }

    /// Reads the regrade Lease after a 409 and puts it into the store: the
    /// watch may not have brought the other writer's change yet, and
    /// deciding again on the old one would only meet the same 409.
    pub async fn reread_lease(&self) -> Result<(), ActError> {
        if let Some(l) = self.read_lease().await? {
            self.remember_lease(&l);
        }
        Ok(())
    }

    /// Carries out a write to the Lease; the Lease written goes into the
    /// store.
    pub async fn lease_write(
        &self,
        obs: &Observed,
        action: &Action,
        state: &mut SwapState,
    ) -> Result<(), ActError> {
        let names = self.names();
        let before = obs.view.lease.clone().unwrap_or_default();
        let writer = fleetdecide::Writer {
            identity: &names.controller_identity,
            instance: &state.instance,
            lease_duration: self.settings.core.lease_duration,
            now: obs.view.now,
        };
        let after = fleetdecide::lease_after(obs.view.lease.as_ref(), action, writer)
            .unwrap_or_else(|| unreachable!("not a Lease write: {action:?}"));
        let lease = kubeview::lease_object(
            names,
            obs.lease.as_ref(),
            &before,
            &after,
            MicroTime(self.stamp()),
        );
        let creating = obs.lease.is_none();
        let api = self.leases();
        let result = if creating {
            api.create(&PostParams::default(), &lease).await
        } else {
            // `replace` sends the resourceVersion read: a 409 means someone
            // wrote since, and the decision is taken again on what they wrote.
            api.replace(&names.lease_name, &PostParams::default(), &lease)
                .await
        };
        match result {
            Ok(written) => {
                if let Action::TakeLease { swap, .. } = action {
                    state.taken = Some(swap.clone());
                }
                self.remember_lease(&written);
                Ok(())
            }
            Err(e) if is_conflict(&e) => Err(ActError::Conflict),
            Err(kube::Error::Api(s)) if creating && s.code == 403 => Err(ActError::Api {
                context: format!(
                    "the regrade Lease {} does not exist and may not be created with this credential (apply deploy/rbac/controller.yaml)",
                    self.settings.lease_ref()
                ),
                source: kube::Error::Api(s),
            }),
            Err(source) => Err(ActError::Api {
                context: format!("writing the regrade Lease {}", self.settings.lease_ref()),
                source,
            }),
        }
    }

    /// Carries out a write to a Node (nothing when the Node is as the
    /// action leaves it); the Node as last written goes into the store.
    pub async fn node_write(&self, obs: &Observed, action: &Action) -> Result<(), ActError> {
        let node = action.node().expect("a Node write names its Node").as_str();
        let nodes: Api<Node> = Api::all(self.client.clone());
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let api_err = |source| ActError::Api {
            context: format!("patching Node {node}"),
            source,
        };
        let before = obs
            .view
            .node(node)
            .cloned()
            .unwrap_or_else(|| protocol::NodeFacts {
                name: node.to_string(),
                ..protocol::NodeFacts::default()
            });
        let after = fleetdecide::node_after(&before, action)
            .unwrap_or_else(|| unreachable!("not a Node write: {action:?}"));
        let mut written = None;
        if let Some(patch) = kubeview::node_patch(self.names(), &before, &after) {
            written = Some(
                nodes
                    .patch(node, &params, &Patch::Merge(&patch))
                    .await
                    .map_err(api_err)?,
            );
        }
        if let Some(status) = kubeview::node_status_patch(&before, &after, Time(self.stamp())) {
            written = Some(
                nodes
                    .patch_status(node, &params, &Patch::Strategic(&status))
                    .await
                    .map_err(api_err)?,
            );
        }
        if let Some(node) = &written {
            self.remember_node(node);
        }
        Ok(())
    }

    /// Makes `run`'s write to a returned host's Node
    /// ([`fleetdecide::tidy`]), outside any swap: only while the regrade
    /// Lease, read again right before, records no swap and is not held, so
    /// that it never meets a swap's own writes. Whether it was made.
    pub async fn tidy_write(&self, obs: &Observed, action: &Action) -> Result<bool, ActError> {
        if let Some(lease) = self.read_lease().await? {
            let facts = kubeview::lease_facts(self.names(), &lease);
            if facts.recorded_swap().is_some() || facts.is_held(self.settings.clock.unix_secs()) {
                self.remember_lease(&lease);
                return Ok(false);
            }
        }
        self.node_write(obs, action).await?;
        self.events(obs, action, None).await;
        Ok(true)
    }

    /// Records an Event on each Node named, best effort (a failed Event is
    /// logged, never fatal: the swap's truth is on the Lease and the Nodes).
    pub async fn events(&self, obs: &Observed, action: &Action, swap: Option<&str>) {
        let Some((reason, warning, nodes)) = event_of(action, obs) else {
            return;
        };
        let note = match swap {
            Some(s) => format!("swap {s}: {}", action.describe()),
            None => action.describe(),
        };
        let api: Api<Event> =
            Api::namespaced(self.client.clone(), protocol::names::EVENT_NAMESPACE);
        for node in nodes {
            let now = self.stamp();
            let event = Event {
                metadata: ObjectMeta {
                    name: Some(format!("{node}.fleet-role.{:x}", now.as_nanosecond())),
                    namespace: Some(protocol::names::EVENT_NAMESPACE.into()),
                    ..ObjectMeta::default()
                },
                action: Some(reason.as_str().into()),
                reason: Some(reason.as_str().into()),
                note: Some(truncate(&note, 1000)),
                type_: Some(if warning { "Warning" } else { "Normal" }.into()),
                event_time: Some(MicroTime(now)),
                reporting_controller: Some(FIELD_MANAGER.into()),
                reporting_instance: Some(truncate(&self.names().controller_identity, 128)),
                regarding: Some(ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Node".into()),
                    name: Some(node.clone()),
                    uid: obs.uids.get(&node).cloned(),
                    ..ObjectReference::default()
                }),
                ..Event::default()
            };
            if let Err(e) = api.create(&PostParams::default(), &event).await {
                warn!("could not record an Event on Node {node}: {e}");
            }
        }
    }

    /// Writes an abort's wind-down note on the Lease `read` (a merge patch
    /// with `read`'s resourceVersion as its precondition: if the swap moved
    /// on since it was judged, the patch meets a 409 and nothing is
    /// written). The controller holding the swap meets a 409 on its next
    /// Lease write, reads again and winds the swap down.
    pub async fn set_stopping(
        &self,
        read: &Lease,
        note: &fleetdecide::StopNote,
    ) -> Result<(), ActError> {
        let names = self.names();
        let before = kubeview::lease_facts(names, read);
        let after = fleetdecide::lease_asked_to_stop(&before, note);
        let Some(patch) = kubeview::lease_patch(
            names,
            &before,
            &after,
            read.metadata.resource_version.as_deref(),
        ) else {
            // The note is there already.
            return Ok(());
        };
        match self.merge_patch_lease(&patch).await {
            Ok(_) => Ok(()),
            Err(e) if is_conflict(&e) => Err(ActError::Conflict),
            Err(source) => Err(ActError::Api {
                context: format!("patching the regrade Lease {}", self.settings.lease_ref()),
                source,
            }),
        }
    }

    /// A merge patch of the regrade Lease under the controller's field manager.
    async fn merge_patch_lease(&self, patch: &Value) -> Result<Lease, kube::Error> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        self.leases()
            .patch(&self.names().lease_name, &params, &Patch::Merge(patch))
            .await
    }

    /// Sets or lifts the pause flag on the Lease (a merge patch of one
    /// annotation, without a precondition: the pause lands whoever writes
    /// the Lease meanwhile; a running controller's next Lease write meets a
    /// 409, reads again and sees the flag). A missing Lease is created
    /// holding the flag alone.
    pub async fn set_paused(&self, paused: bool) -> Result<(), ActError> {
        let names = self.names();
        let read = self.read_lease().await?;
        let before = read
            .as_ref()
            .map(|l| kubeview::lease_facts(names, l))
            .unwrap_or_default();
        let after = fleetdecide::lease_paused(&before, paused);
        if read.is_some() {
            let Some(patch) = kubeview::lease_patch(names, &before, &after, None) else {
                return Ok(());
            };
            return match self.merge_patch_lease(&patch).await {
                Ok(_) => Ok(()),
                Err(source) => Err(ActError::Api {
                    context: format!("patching the regrade Lease {}", self.settings.lease_ref()),
                    source,
                }),
            };
        }
        let lease = kubeview::lease_object(names, None, &before, &after, MicroTime(self.stamp()));
        self.leases()
            .create(&PostParams::default(), &lease)
            .await
            .map(drop)
            .map_err(|source| ActError::Api {
                context: format!(
                    "creating the regrade Lease {} (apply deploy/rbac/controller.yaml)",
                    self.settings.lease_ref()
                ),
                source,
            })
    }
}

/// The Event of an action: its reason, whether it is a warning, and the
/// Nodes it is about.
fn event_of(action: &Action, obs: &Observed) -> Option<(EventReason, bool, Vec<String>)> {
    let pair = || {
        let l = obs.view.lease.as_ref();
        [
            l.and_then(|l| l.swap_out.clone()),
            l.and_then(|l| l.swap_in.clone()),
        ]
        .into_iter()
        .flatten()
        .filter(|n| obs.uids.contains_key(n))
        .collect::<Vec<_>>()
    };
    let one = |n: &protocol::NodeName| vec![n.to_string()];
    Some(match action {
        Action::TakeLease { out, incoming, .. } => (
            EventReason::SwapStarted,
            false,
            [out, incoming]
                .into_iter()
                .flatten()
                .map(ToString::to_string)
                .collect(),
        ),
        Action::BeginStop { note } => (
            EventReason::SwapWindingDown,
            note.kind == StopKind::Failed,
            pair(),
        ),
        Action::RequestSnapshot { node, .. } => (EventReason::SnapshotRequested, false, one(node)),
        Action::Promote { node, .. } => (EventReason::PromoteRequested, false, one(node)),
        Action::Rollback { node, .. } => (EventReason::RollbackRequested, true, one(node)),
        Action::Cordon { node } => (EventReason::Cordoned, false, one(node)),
        Action::Evict { node, .. } => (EventReason::PodsEvicted, false, one(node)),
        Action::StepDown { node, .. } => (EventReason::StepDownRequested, false, one(node)),
        Action::RemoveMember { node } => (EventReason::MemberRemovalRequested, false, one(node)),
        Action::CleanUpServer { node } => (EventReason::ServerLabelsRemoved, false, one(node)),
        Action::ClearSwapMarks { node } => (EventReason::SwapAnnotationsCleared, false, one(node)),
        Action::Uncordon { node } => (EventReason::Uncordoned, false, one(node)),
        Action::ReleaseLease { outcome } => match outcome {
            Outcome::Done { warning } => (EventReason::SwapDone, warning.is_some(), pair()),
            Outcome::WoundDown { .. } => (EventReason::SwapWoundDown, true, pair()),
        },
        Action::Stop { .. } => (EventReason::SwapStopped, true, pair()),
        _ => return None,
    })
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}
