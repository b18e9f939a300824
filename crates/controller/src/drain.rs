//! The drain's API side: the pods on the outgoing Node, read for the
//! decision, and a round of evictions through the Eviction API.
//!
//! An eviction, unlike a delete, is refused (HTTP 429) while a
//! PodDisruptionBudget allows no disruption: the API server checks the
//! budget, so a budget protecting a CI runner holds here as it holds for
//! `kubectl drain`. A refused pod stays; the next round, a few seconds
//! later, asks again, until the drain's timeout stops the swap (see
//! `fleetdecide::drain`).

use fleetdecide::{PodFacts, PodRef};
use k8s_openapi::{
    api::{core::v1::Pod, policy::v1::Eviction},
    apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta},
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use tracing::{info, warn};

use crate::act::ActError;

/// The pods bound to `node`, as the drain reads them (one list, by field
/// selector: the API server filters, so a large cluster costs one small
/// answer).
pub async fn pods_on(client: &Client, node: &str) -> Result<Vec<PodFacts>, ActError> {
    let pods: Api<Pod> = Api::all(client.clone());
    let list = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .map_err(|source| ActError::Api {
            context: format!("listing the pods on {node}"),
            source,
        })?;
    Ok(list.items.iter().map(kubeview::pod_facts).collect())
}

/// What became of one eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evicted {
    /// Accepted: the pod terminates within its grace.
    Accepted,
    /// Refused for now (429: a PodDisruptionBudget allows no disruption,
    /// with the API's message); asked again next round.
    Refused(String),
    /// The pod is gone already.
    Gone,
}

/// Asks the Eviction API once for each pod, with `grace` seconds of
/// termination grace (`None`: the pod's own). A refusal by a budget is an
/// answer, not an error; any other failure is.
pub async fn evict(
    client: &Client,
    pods: &[PodRef],
    grace: Option<i64>,
) -> Result<Vec<(PodRef, Evicted)>, ActError> {
    let mut out = Vec::with_capacity(pods.len());
    for p in pods {
        let api: Api<Pod> = Api::namespaced(client.clone(), &p.namespace);
        // The Eviction object is built here, not by kube's `evict`: kube
        // 5.0 sends its delete options under a snake-case key the API
        // server ignores, and the grace would be lost without a word.
        let eviction = Eviction {
            metadata: ObjectMeta {
                name: Some(p.name.clone()),
                namespace: Some(p.namespace.clone()),
                ..ObjectMeta::default()
            },
            delete_options: Some(DeleteOptions {
                grace_period_seconds: grace,
                ..DeleteOptions::default()
            }),
        };
        let sent: Result<serde_json::Value, _> = api
            .create_subresource("eviction", &p.name, &PostParams::default(), &eviction)
            .await;
        let result = match sent {
            Ok(_) => {
                info!("evicted {p}");
                Evicted::Accepted
            }
            Err(kube::Error::Api(s)) if s.code == 429 => {
                let why = fleetdecide::one_line(&s.message);
                warn!("the eviction of {p} was refused for now: {why}");
                Evicted::Refused(why)
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Evicted::Gone,
            Err(source) => {
                return Err(ActError::Api {
                    context: format!("evicting {p}"),
                    source,
                });
            }
        };
        out.push((p.clone(), result));
    }
    Ok(out)
}
