//! The host's report: its own key of the `fleet-role-actuators` ConfigMap,
//! written with server-side apply under a field manager of its own, so hosts
//! reporting at once never overwrite each other's keys. The ConfigMap itself
//! is made by the installer (`deploy/rbac/`): the actuator may patch it, never
//! create it.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use protocol::{Names, Report, names::REPORT_CONFIGMAP};

/// Reads this host's last report; a missing ConfigMap, key or an unreadable
/// value is no report.
pub async fn read(
    client: &Client,
    names: &Names,
    node: &str,
) -> Result<Option<Report>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &names.report_namespace);
    let cm = api.get_opt(REPORT_CONFIGMAP).await?;
    Ok(cm
        .and_then(|cm| cm.data)
        .and_then(|d| d.get(node).and_then(|v| Report::from_json(v))))
}

/// Writes this host's report under its own key.
pub async fn write(
    client: &Client,
    names: &Names,
    node: &str,
    report: &Report,
) -> Result<(), kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &names.report_namespace);
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": REPORT_CONFIGMAP, "namespace": names.report_namespace },
        "data": { node: report.to_json() },
    });
    // No force: another manager owning this key would be a bug to surface,
    // not a conflict to win.
    let params = PatchParams::apply(&names.report_field_manager(node));
    api.patch(REPORT_CONFIGMAP, &params, &Patch::Apply(&body))
        .await
        .map(drop)
}
