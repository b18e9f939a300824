//! The host's report and heartbeat: its own ConfigMap and Lease in the
//! hosts' namespace, both named for its Node and made by `fleet-role
//! enroll` (the actuator may get and update them, never create them). The
//! report is written when it changes, the heartbeat renewed every
//! heartbeat period: what etcd stores per host does not grow with the
//! fleet (docs/controller.md has the figures).
//!
//! More in docs/internals.md, "actuator: report".

use std::path::PathBuf;

use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::ConfigMap},
    apimachinery::pkg::apis::meta::v1::MicroTime,
};
use kube::{Api, Client, Resource, api::PostParams};
use protocol::{Names, Report, names::HOST_REPORT_KEY, report::MAX_REPORT_BYTES};

/// The field manager of the host's updates: one name for every host, as
/// each host's objects are its own (a manager per host would only grow
/// each object's managedFields).
pub const FIELD_MANAGER: &str = "fleet-role-actuator";

/// Why the report could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The API failed (try another API server).
    #[error("the report could not be read from the API: {0}")]
    Api(#[from] kube::Error),
    /// The API's copy does not parse.
    #[error(
        "this host's report in the API (ConfigMap {namespace}/{node}, key {HOST_REPORT_KEY:?}) does not parse ({reason}): refusing to act rather than take it as no history, which could run a settled step again; check the steps this host took, then remove the key (an admin; the copy kept on the host is then used) or put a valid report there"
    )]
    CorruptApi {
        /// The report's namespace.
        namespace: String,
        /// The Node (the ConfigMap's name).
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

/// A write the API refused, as it said it: every API server would refuse
/// it alike, so it is said, counted and retried later rather than taken
/// as a failed server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status code.
    pub code: u16,
    /// The API's reason (`Forbidden`, `NotFound`, `Invalid`, ...).
    pub reason: String,
    /// The API's message.
    pub message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let line = protocol::text::one_line(&self.message);
        write!(f, "{} {}: {line}", self.code, self.reason)
    }
}

/// The refusal `e` is, if it is one: an answer of the API in 4xx but a
/// timeout (408), a conflict (409, retried at once) or a throttle (429),
/// which another try or another server may pass.
pub fn refusal(e: &kube::Error) -> Option<Refusal> {
    match e {
        kube::Error::Api(s)
            if (400..500).contains(&s.code) && ![408, 409, 429].contains(&s.code) =>
        {
            Some(Refusal {
                code: s.code,
                reason: if s.reason.is_empty() {
                    s.code.to_string()
                } else {
                    s.reason.clone()
                },
                message: s.message.clone(),
            })
        }
        _ => None,
    }
}

/// The host's own objects as last read or written: every update carries
/// the resourceVersion and metadata read, so the hosts' policy (which
/// keeps labels and owner references as enroll made them) passes it, and
/// the first update after a start reads the object once.
#[derive(Debug, Default)]
pub struct Published {
    report: Option<ConfigMap>,
    heartbeat: Option<Lease>,
}

/// Updates `name` through `api` as `change` makes it from the object held
/// (read first when none is): one retry after a conflict, from a fresh
/// read. The object the API answered is held; after an error none is.
async fn update_own<K>(
    api: &Api<K>,
    held: &mut Option<K>,
    name: &str,
    change: impl Fn(&mut K),
) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    for attempt in 0..2 {
        let mut object = match held.take() {
            Some(o) => o,
            None => api.get(name).await?,
        };
        change(&mut object);
        // Left out, the API keeps the managed fields as they are.
        object.meta_mut().managed_fields = None;
        match api.replace(name, &params, &object).await {
            Ok(mut written) => {
                written.meta_mut().managed_fields = None;
                *held = Some(written);
                return Ok(());
            }
            Err(kube::Error::Api(s)) if s.code == 409 && attempt == 0 => {}
            Err(e) => return Err(e),
        }
    }
    Err(kube::Error::Api(
        kube::core::Status::failure(
            &format!("{name} changed under two updates in a row"),
            "Conflict",
        )
        .with_code(409)
        .boxed(),
    ))
}

impl Published {
    /// Reads this host's last report from the API; a missing key is no
    /// report, a value that does not parse is [`LoadError::CorruptApi`]. A
    /// missing ConfigMap (a host not enrolled with this release) is no
    /// report either: its writes are refused with the reason, which says so.
    pub async fn read(
        &mut self,
        client: &Client,
        names: &Names,
        node: &str,
    ) -> Result<Option<Report>, LoadError> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &names.hosts_namespace);
        let Some(mut cm) = api.get_opt(node).await? else {
            return Ok(None);
        };
        cm.metadata.managed_fields = None;
        let raw = kubeview::hostobjects::report_value(&cm).map(String::from);
        self.report = Some(cm);
        let Some(raw) = raw else {
            return Ok(None);
        };
        Report::parse(&raw)
            .map(Some)
            .map_err(|e| LoadError::CorruptApi {
                namespace: names.hosts_namespace.clone(),
                node: node.to_string(),
                reason: e.to_string(),
            })
    }

    /// The report at start: the host's own copy, numbered past the API's
    /// ([`Report::remembered`]: the API's copy never grants a resume), and
    /// whether the API's copy differs from it (it must then be sent). The
    /// host's copy is brought up to it here.
    pub async fn load(
        &mut self,
        client: &Client,
        names: &Names,
        node: &str,
        paths: &host::HostPaths,
    ) -> Result<(Option<Report>, bool), LoadError> {
        let local = read_local(paths)?;
        let remote = self.read(client, names, node).await?;
        let newer = Report::remembered(local.clone(), remote.clone());
        if let Some(r) = newer.as_ref().filter(|_| newer != local)
            && let Err(e) = write_local(paths, r)
        {
            tracing::warn!(error = %e, "cannot keep the report on the host");
        }
        let api_behind = newer != remote;
        Ok((newer, api_behind))
    }

    /// Writes this host's report into its ConfigMap.
    pub async fn write(
        &mut self,
        client: &Client,
        names: &Names,
        node: &str,
        report: &Report,
    ) -> Result<(), kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &names.hosts_namespace);
        let value = value(report);
        update_own(&api, &mut self.report, node, |cm| {
            kubeview::hostobjects::set_report(cm, value.clone());
        })
        .await
    }

    /// Renews this host's heartbeat Lease at `stamp`, valid `duration_secs`,
    /// with the refusal of its last report, if one stands.
    pub async fn renew(
        &mut self,
        client: &Client,
        names: &Names,
        node: &str,
        stamp: MicroTime,
        duration_secs: i32,
        refused: Option<&str>,
    ) -> Result<(), kube::Error> {
        let api: Api<Lease> = Api::namespaced(client.clone(), &names.hosts_namespace);
        update_own(&api, &mut self.heartbeat, node, |lease| {
            kubeview::hostobjects::renew(names, lease, node, stamp.clone(), duration_secs, refused);
        })
        .await
    }
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

/// Keeps `report` on the host: written beside, synced and renamed over, so
/// a crash leaves the old copy or the new one (mode 0600: it is root's).
pub fn write_local(paths: &host::HostPaths, report: &Report) -> host::Result<()> {
    host::fsutil::write_atomic(&paths.report(), report.to_json().as_bytes(), 0o600)
}

/// After a switch by hand to `role`, the report kept on the host moved on
/// to say what the host now is ([`Report::after_hand_switch`]); nothing is
/// written when it already does.
///
/// # Errors
/// The kept report cannot be read or written (said, never fatal: the
/// switch itself is done).
pub fn after_hand_switch(
    paths: &host::HostPaths,
    role: protocol::Role,
    now: i64,
) -> anyhow::Result<()> {
    let prev = read_local(paths)?;
    if let Some(next) = Report::after_hand_switch(prev.as_ref(), role, now) {
        write_local(paths, &next)?;
    }
    Ok(())
}

/// The value written as the report, within [`MAX_REPORT_BYTES`]: the
/// hosts' policy refuses a larger one, which would leave the controller
/// with this host's last report only. What had to be left out to fit (the
/// etcd view first) is said in the log; the copy kept on the host stays
/// whole.
fn value(report: &Report) -> String {
    let (value, dropped) = report.to_json_within(MAX_REPORT_BYTES);
    if !dropped.is_empty() {
        let parts: Vec<&str> = dropped.iter().map(|d| d.as_str()).collect();
        tracing::warn!(
            bytes = report.to_json().len(),
            max = MAX_REPORT_BYTES,
            "the report is over the {MAX_REPORT_BYTES} bytes a host's report may hold: sent without {}",
            parts.join(", ")
        );
    }
    value
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_an_answer_no_other_try_could_change_is_a_refusal() {
        let answer = |code: u16, reason: &str| {
            kube::Error::Api(
                kube::core::Status::failure("said\nthe API", reason)
                    .with_code(code)
                    .boxed(),
            )
        };
        let r = refusal(&answer(403, "Forbidden")).unwrap();
        // One line: the API's newline shown escaped.
        assert_eq!(r.to_string(), "403 Forbidden: said\\nthe API");
        assert_eq!(refusal(&answer(422, "")).unwrap().reason, "422");
        assert!(refusal(&answer(404, "NotFound")).is_some());
        for passing in [408, 409, 429, 500, 503] {
            assert_eq!(refusal(&answer(passing, "x")), None, "{passing}");
        }
    }

    use protocol::{
        etcd::{EtcdView, MAX_MEMBERS, MAX_URL, Member, MemberId},
        report::{Eligibility, HostPart},
    };

    use super::*;

    #[test]
    fn a_report_too_large_for_its_config_map_is_written_without_its_etcd_view() {
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
            release: None,
            credential_expires_at: None,
        };
        let report = Report::with_host_part(None, part, 5);
        assert!(report.to_json().len() > MAX_REPORT_BYTES);
        let value = value(&report);
        let value = value.as_str();
        assert!(value.len() <= MAX_REPORT_BYTES, "{}", value.len());
        let sent = Report::parse(value).unwrap();
        let host = sent.host.unwrap();
        assert_eq!((host.heartbeat_at, host.etcd), (5, None));
        assert_eq!(host.demotion, Some(Eligibility::Ok));
    }
}
