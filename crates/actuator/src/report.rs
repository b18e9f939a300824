//! The host's report: its own key of the `fleet-role-actuators` ConfigMap,
//! written with server-side apply under a field manager of its own, so hosts
//! reporting at once never overwrite each other's keys. The ConfigMap itself
//! is made by the installer (`deploy/rbac/`): the actuator may patch it, never
//! create it.
//!
//! A copy is kept on the host ([`host::HostPaths::report`]), written
//! atomically before each write to the API. At start the newer of the two
//! (the higher [`Report::seq`]) is the watcher's memory, so a report lost on
//! its way to the API never makes a settled step run again; a copy that does
//! not parse stops the actuator rather than be taken as no history.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use protocol::{Names, Report, names::REPORT_CONFIGMAP, report::MAX_REPORT_BYTES};

/// Why the report could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The API failed (try another API server).
    #[error("the report could not be read from the API: {0}")]
    Api(#[from] kube::Error),
    /// The API's copy does not parse.
    #[error(
        "this host's report in the API (ConfigMap {namespace}/{REPORT_CONFIGMAP}, key {node:?}) does not parse ({reason}): refusing to act rather than take it as no history, which could run a settled step again; check the steps this host took, then delete the key (an admin; the copy kept on the host is then used) or put a valid report there"
    )]
    CorruptApi {
        /// The report's namespace.
        namespace: String,
        /// The key.
        node: String,
        /// The parser's reason.
        reason: String,
    },
    /// The copy kept on the host does not parse or cannot be read.
    #[error(
        "the report kept on this host ({}) {problem}: refusing to act rather than take it as no history, which could run a settled step again; check the steps this host took, then remove the file (the API's copy is then used) or put a valid report there",
        path.display()
    )]
    Local {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
}

/// Reads this host's last report from the API; a missing ConfigMap or key
/// is no report, a value that does not parse is [`LoadError::CorruptApi`].
pub async fn read(client: &Client, names: &Names, node: &str) -> Result<Option<Report>, LoadError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &names.report_namespace);
    let cm = api.get_opt(REPORT_CONFIGMAP).await?;
    let Some(raw) = cm.and_then(|cm| cm.data).and_then(|mut d| d.remove(node)) else {
        return Ok(None);
    };
    Report::parse(&raw)
        .map(Some)
        .map_err(|e| LoadError::CorruptApi {
            namespace: names.report_namespace.clone(),
            node: node.to_string(),
            reason: e.to_string(),
        })
}

/// Reads the copy kept on the host: a missing file is no report, one that
/// cannot be read or does not parse is [`LoadError::Local`].
pub fn read_local(paths: &host::HostPaths) -> Result<Option<Report>, LoadError> {
    let path = paths.report();
    let problem = |problem: String| LoadError::Local {
        path: path.clone(),
        problem,
    };
    let raw = match std::fs::read_to_string(&path) {
        Ok(raw) => raw,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(problem(format!("cannot be read: {e}"))),
    };
    Report::parse(&raw)
        .map(Some)
        .map_err(|e| problem(format!("does not parse ({e})")))
}

/// The report at start: the newer of the host's copy and the API's, and
/// whether the API's copy is behind it (it must then be sent). A host copy
/// behind the API's is brought up to it here.
pub async fn load(
    client: &Client,
    names: &Names,
    node: &str,
    paths: &host::HostPaths,
) -> Result<(Option<Report>, bool), LoadError> {
    let local = read_local(paths)?;
    let remote = read(client, names, node).await?;
    let newer = Report::newer(local.clone(), remote.clone());
    if let Some(r) = newer.as_ref().filter(|_| newer != local)
        && let Err(e) = write_local(paths, r)
    {
        tracing::warn!(error = %e, "cannot keep the report on the host");
    }
    let api_behind = newer != remote;
    Ok((newer, api_behind))
}

/// Keeps `report` on the host: written beside, synced and renamed over, so
/// a crash leaves the old copy or the new one (mode 0600: it is root's).
pub fn write_local(paths: &host::HostPaths, report: &Report) -> host::Result<()> {
    host::fsutil::write_atomic(&paths.report(), report.to_json().as_bytes(), 0o600)
}

/// The apply that writes `report` under `node`'s key, within
/// [`MAX_REPORT_BYTES`]: the report's admission policy refuses a larger key,
/// and a refused write would stop this host's heartbeat. What had to be left
/// out to fit (the etcd view first) is said in the log; the copy kept on
/// the host stays whole.
fn body(names: &Names, node: &str, report: &Report) -> serde_json::Value {
    let (value, dropped) = report.to_json_within(MAX_REPORT_BYTES);
    if !dropped.is_empty() {
        let parts: Vec<&str> = dropped.iter().map(|d| d.as_str()).collect();
        tracing::warn!(
            bytes = report.to_json().len(),
            max = MAX_REPORT_BYTES,
            "the report is over the {MAX_REPORT_BYTES} bytes a host's key may hold: sent without {}",
            parts.join(", ")
        );
    }
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": REPORT_CONFIGMAP, "namespace": names.report_namespace },
        "data": { node: value },
    })
}

/// Writes this host's report under its own key.
pub async fn write(
    client: &Client,
    names: &Names,
    node: &str,
    report: &Report,
) -> Result<(), kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &names.report_namespace);
    let body = body(names, node, report);
    // No force: another manager owning this key would be a bug to surface,
    // not a conflict to win.
    let params = PatchParams::apply(&names.report_field_manager(node));
    api.patch(REPORT_CONFIGMAP, &params, &Patch::Apply(&body))
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use protocol::{
        etcd::{EtcdView, MAX_MEMBERS, MAX_URL, Member, MemberId},
        report::{Eligibility, HostPart},
    };

    use super::*;

    #[test]
    fn a_report_too_large_for_its_key_is_written_without_its_etcd_view() {
        // Fifteen members with long URLs: a view etcd could give, and more
        // than the cap.
        let members = (1..=MAX_MEMBERS as u64)
            .map(|i| Member {
                id: MemberId(i),
                name: format!("n{i}"),
                peer_urls: vec![format!("https://{}.example:2380", "h".repeat(MAX_URL - 30)); 4],
                client_urls: vec![format!("https://{}.example:2379", "h".repeat(MAX_URL - 30)); 4],
                learner: false,
            })
            .collect();
        let etcd = EtcdView {
            read_at: 1,
            member: MemberId(1),
            members,
            leader: None,
            raft_term: 1,
            raft_index: 1,
            db_size: 1,
            alarms: vec![],
            healthy: true,
        };
        let part = HostPart {
            heartbeat_at: 5,
            promotion: None,
            demotion: Some(Eligibility::Ok),
            etcd: Some(etcd),
        };
        let report = Report::with_host_part(None, part, 5);
        assert!(report.to_json().len() > MAX_REPORT_BYTES);
        let body = body(&Names::default(), "n1", &report);
        let value = body["data"]["n1"].as_str().unwrap();
        assert!(value.len() <= MAX_REPORT_BYTES, "{}", value.len());
        let sent = Report::parse(value).unwrap();
        let host = sent.host.unwrap();
        assert_eq!((host.heartbeat_at, host.etcd), (5, None));
        assert_eq!(host.demotion, Some(Eligibility::Ok));
    }
}
