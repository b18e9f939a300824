//! `fleet-role uninstall`: removes what fleet-role made in the cluster, in
//! an order that stops the controller first and revokes every host's
//! credential before the roles those credentials were bound to go.
//!
//! Removed, each only if there (one already gone is no error):
//!
//! 1. the controller's Deployment and ConfigMap (`deploy/kubernetes/`), so
//!    nothing drives a swap while the rest goes;
//! 2. every enrolled host's identity and objects (`fleet-role unenroll`,
//!    for each ServiceAccount `fleet-role-actuator-<node>` in the hosts'
//!    namespace, or in the shared report's where earlier releases made
//!    it), which revokes each host's token;
//! 3. the objects `fleet-role manifests controller` and
//!    `fleet-role manifests actuators` render from the settings (their
//!    roles, bindings, Leases, the report ConfigMap, the admission policy),
//!    in the reverse of their order.
//!
//! Kept: the namespaces (`platform` may hold the operator's own objects;
//! the output says so), the Nodes' labels (the eligible label is the
//! operator's), and everything on the hosts (the packages' own removal).
//!
//! Refused, with nothing removed, while a swap holds the regrade Lease or
//! any Node carries a swap's marks: the controller's own objects are what
//! winds a swap down (`fleet-role abort` first).

use fleetdecide::one_line;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams},
};
use protocol::exit::Exit;
use serde_json::Value;

use crate::{
    config::Settings,
    manifests::{self, CONTROLLER_NAMESPACE, Which},
};

/// Why `uninstall` could not go on.
#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    /// A request to the API failed; what was removed before it is listed.
    #[error("{what}: {source} (removed before it: {removed})")]
    Api {
        /// What was being done.
        what: String,
        /// What had been removed already.
        removed: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The rendered manifests could not be read back (a bug).
    #[error("the rendered manifests: {0}")]
    Manifests(String),
}

/// One object to remove: its API, namespace and name, as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Its namespace (empty: cluster-scoped).
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// The objects of `yaml`, Namespaces left out, in the reverse of their
/// order (bindings before the roles they bind, the policy's binding
/// before the policy, a Deployment before its ConfigMap).
fn targets(yaml: &str) -> Result<Vec<Target>, UninstallError> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(yaml).map_err(|e| UninstallError::Manifests(e.to_string()))?;
    let mut these: Vec<Target> = docs
        .iter()
        .filter(|o| o["kind"] != "Namespace")
        .map(|o| Target {
            api_version: o["apiVersion"].as_str().unwrap_or_default().into(),
            kind: o["kind"].as_str().unwrap_or_default().into(),
            namespace: o["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .into(),
            name: o["metadata"]["name"].as_str().unwrap_or_default().into(),
        })
        .collect();
    these.reverse();
    Ok(these)
}

/// The controller's own workload, read from the file that ships it
/// (`deploy/kubernetes/fleet-role.yaml`, [`manifests::WORKLOAD`]).
fn workload() -> Result<Vec<Target>, UninstallError> {
    targets(manifests::WORKLOAD)
}

/// The objects the manifests render from `settings`, Namespaces left out,
/// in the order they are removed: the controller's first, each rendering
/// in reverse (bindings before the roles they bind, the policy's binding
/// before the policy).
pub fn rendered(settings: &Settings) -> Result<Vec<Target>, UninstallError> {
    let mut out = targets(&manifests::render(Which::Controller, settings))?;
    out.extend(targets(&manifests::render(Which::Actuators, settings))?);
    Ok(out)
}

/// Why the fleet is not in a state to uninstall from, if it is not: a
/// swap holding the regrade Lease, or a Node with a swap's marks.
pub fn refusal(v: &fleetdecide::FleetView) -> Option<String> {
    if let Some(l) = v
        .lease
        .as_ref()
        .filter(|l| l.is_held(v.now) && l.swap.is_some())
    {
        return Some(format!(
            "a swap holds the regrade Lease ({}): wind it down with `fleet-role abort`, or let it end, then uninstall",
            one_line(l.swap.as_deref().unwrap_or_default())
        ));
    }
    let marked: Vec<&str> = v
        .nodes
        .iter()
        .filter(|n| n.marks.any_annotation() || n.marks.desired_role.is_some())
        .map(|n| n.name.as_str())
        .collect();
    (!marked.is_empty()).then(|| {
        format!(
            "Node(s) {} carry a swap's marks: run `fleet-role abort` (or `fleet-role swap` again to finish it) first",
            one_line(&marked.join(", "))
        )
    })
}

/// Deletes `t`; `Ok(false)` when it was not there.
async fn delete(client: &Client, t: &Target) -> Result<bool, kube::Error> {
    let (group, version) = match t.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", t.api_version.as_str()),
    };
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &t.kind));
    let api: Api<DynamicObject> = if t.namespace.is_empty() {
        Api::all_with(client.clone(), &ar)
    } else {
        Api::namespaced_with(client.clone(), &t.namespace, &ar)
    };
    match api.delete(&t.name, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// The nodes enrolled now: each ServiceAccount named
/// `fleet-role-actuator-<node>` in the hosts' namespace, or in the shared
/// report's namespace where earlier releases made it.
async fn enrolled(client: &Client, settings: &Settings) -> Result<Vec<String>, kube::Error> {
    let names = settings.names();
    let mut nodes = std::collections::BTreeSet::new();
    for ns in [&names.hosts_namespace, &names.report_namespace] {
        let accounts = Api::<ServiceAccount>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await?;
        nodes.extend(accounts.items.iter().filter_map(|a| {
            a.metadata
                .name
                .as_deref()?
                .strip_prefix(kubeview::identity::SERVICE_ACCOUNT_PREFIX)
                .map(str::to_string)
        }));
    }
    Ok(nodes.into_iter().collect())
}

/// `fleet-role uninstall`: refuses (exit 1, nothing removed) while a swap
/// is under way; with `dry_run` prints what it would remove; else removes
/// it and prints each object removed.
pub async fn command(client: &Client, settings: &Settings, dry_run: bool) -> anyhow::Result<Exit> {
    let seen = crate::observe::observe(client, settings).await?;
    if let Some(why) = refusal(&seen.view) {
        eprintln!("refused: {why}; nothing was removed");
        return Ok(Exit::Refused);
    }
    let hosts = enrolled(client, settings).await?;
    let rendered = rendered(settings)?;
    let workload = workload()?;
    if dry_run {
        for t in &workload {
            println!("would remove {t}");
        }
        for h in &hosts {
            println!("would unenroll {}", one_line(h));
        }
        for t in &rendered {
            println!("would remove {t}");
        }
        return Ok(Exit::Done);
    }
    let mut removed: Vec<String> = Vec::new();
    let failed = |what: String, removed: &[String], source| UninstallError::Api {
        what,
        removed: if removed.is_empty() {
            "nothing".into()
        } else {
            removed.join(", ")
        },
        source,
    };
    for t in &workload {
        match delete(client, t).await {
            Ok(true) => removed.push(t.to_string()),
            Ok(false) => {}
            Err(e) => return Err(failed(format!("removing {t}"), &removed, e).into()),
        }
    }
    for h in &hosts {
        let names = settings.names();
        match crate::enroll::unenroll(client, names, h).await {
            Ok(gone) => removed.extend(gone),
            Err(e) => anyhow::bail!(
                "unenrolling {}: {e} (removed before it: {})",
                one_line(h),
                removed.join(", ")
            ),
        }
    }
    for t in &rendered {
        match delete(client, t).await {
            Ok(true) => removed.push(t.to_string()),
            Ok(false) => {}
            Err(e) => return Err(failed(format!("removing {t}"), &removed, e).into()),
        }
    }
    for r in &removed {
        println!("removed {r}");
    }
    println!(
        "fleet-role's objects are removed ({}); kept: the namespaces {}, {} and {} (remove them yourself if nothing else of yours is in them), the Nodes' labels, and everything on the hosts (apt purge fleet-role-actuator on each)",
        removed.len(),
        CONTROLLER_NAMESPACE,
        settings.names().report_namespace,
        settings.names().hosts_namespace
    );
    Ok(Exit::Done)
}
