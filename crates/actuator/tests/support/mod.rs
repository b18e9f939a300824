//! Shared by the tests against the real API: a control
//! plane with the actuator's RBAC applied, the controller's writes made by hand
//! with the admin client, the actuator run as a child process on a test host,
//! every version of the report recorded, and a TCP relay to cut connections.
//!
//! Everything here waits by polling against generous deadlines and never
//! asserts on timing: the tests run on a loaded 2-core machine.
//!
//! Shared by `tests/real_api.rs` and `tests/attacks_real_api.rs`, each of
//! which uses part of it.

#![allow(dead_code)]

use std::{
    collections::BTreeMap,
    fs,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    process::{Child, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU16, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Node},
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
    runtime::watcher,
};
use protocol::{Phase, Report, report::Detail};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use standins::fixture::{K3S_TOKEN_MARKER, TestHost};
use testcp::ControlPlane;

/// The default label and annotation prefix.
pub const P: &str = "github-runner.exadev.com";

/// The default namespace of the hosts' own objects.
pub const HOSTS: &str = "fleet-role-hosts";

/// How long any wait for the actuator lasts before the test fails. Generous:
/// a loaded CI machine can be slow, and a pass never waits this long.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Where cargo put the actuator and the stand-ins.
pub fn bin_dir() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_fleet-role-actuator"))
        .parent()
        .expect("the binary has a directory")
}

/// The workspace's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A real control plane with `deploy/rbac/actuator.yaml` applied.
pub async fn plane() -> ControlPlane {
    let plane = ControlPlane::start().await.expect("a control plane starts");
    apply_rbac(&plane).await;
    plane
}

/// Applies `deploy/rbac/actuator.yaml` as the installer does (server-side
/// apply, forced).
pub async fn apply_rbac(plane: &ControlPlane) {
    plane
        .apply_yaml_file(&workspace().join("deploy/rbac/actuator.yaml"))
        .await
        .expect("the actuator's RBAC applies");
}

/// Gives `node` its own identity, as `fleet-role enroll` does (the same
/// objects, from `kubeview::Identity`), and returns a token of it.
pub async fn enroll(plane: &ControlPlane, node: &str) -> SecretString {
    let id = identity(node);
    for object in id.objects(&protocol::Names::default()) {
        plane
            .apply_yaml(&object.to_string())
            .await
            .unwrap_or_else(|e| panic!("the identity of {node} applies: {e}"));
    }
    plane
        .service_account_token(HOSTS, id.name())
        .await
        .unwrap_or_else(|e| panic!("a token of {node}'s identity: {e}"))
}

/// `node`'s identity.
pub fn identity(node: &str) -> kubeview::Identity {
    kubeview::Identity::of(&protocol::NodeName::parse(node).unwrap()).unwrap()
}

/// A token of `node`'s identity (which must be enrolled) bound to a Secret
/// `anchor` made for it: deleting the anchor ([`revoke_anchor`]) revokes
/// this token alone, as rotating a host's credential would.
pub async fn anchored_token(plane: &ControlPlane, node: &str, anchor: &str) -> SecretString {
    use k8s_openapi::api::{
        authentication::v1::TokenRequest,
        core::v1::{Secret, ServiceAccount},
    };
    let admin = plane.admin_client().unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), HOSTS);
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": anchor},
    }))
    .unwrap();
    let secret = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let request: TokenRequest = serde_json::from_value(json!({"spec": {
        "audiences": [],
        "boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": anchor, "uid": secret.metadata.uid},
    }}))
    .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin, HOSTS);
    let answer = accounts
        .create_token_request(identity(node).name(), &PostParams::default(), &request)
        .await
        .unwrap();
    SecretString::from(answer.status.unwrap().token)
}

/// Deletes the anchor of a token from [`anchored_token`], and waits until
/// the API refuses the token.
pub async fn revoke_anchor(plane: &ControlPlane, anchor: &str, token: &SecretString) {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(plane.admin_client().unwrap(), HOSTS);
    secrets.delete(anchor, &Default::default()).await.unwrap();
    wait_refused(plane, anchor, token).await;
}

/// Waits until the API answers 401 to `token`.
pub async fn wait_refused(plane: &ControlPlane, what: &str, token: &SecretString) {
    let client = plane.client_for_token(token).unwrap();
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client, "kube-system");
    let started = clock::Clock::system().now();
    loop {
        match leases.get("fleet-regrade").await {
            Err(kube::Error::Api(s)) if s.code == 401 => return,
            other => assert!(
                started.elapsed() < DEADLINE,
                "the token of {what} still works: {:?}",
                other.map(|_| ())
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Writes `token` to a new mode-0600 file, as the installer would, with no
/// trailing newline (an HTTP header cannot carry one).
pub fn write_token(path: &Path, token: &SecretString) {
    let _ = fs::remove_file(path);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .expect("a token file");
    std::io::Write::write_all(&mut f, token.expose_secret().as_bytes()).expect("token written");
}

/// Replaces the token in `path` atomically (write beside, rename over), as
/// kubelet's projected token volumes do when they rotate a token.
pub fn rotate_token(path: &Path, token: &SecretString) {
    let next = path.with_extension("next");
    write_token(&next, token);
    fs::rename(&next, path).expect("token file replaced");
}

/// Panics if `text` holds any of `secrets` or the fixture's k3s token,
/// showing the lines that do with the secret itself masked.
pub fn assert_no_secret(what: &str, text: &str, secrets: &[&str]) {
    for secret in secrets.iter().copied().chain([K3S_TOKEN_MARKER]) {
        assert!(!secret.is_empty(), "an empty secret proves nothing");
        let leaks: Vec<String> = text
            .lines()
            .filter(|l| l.contains(secret))
            .map(|l| l.replace(secret, "<SECRET>"))
            .collect();
        assert!(
            leaks.is_empty(),
            "a secret appears in {what}:\n{}",
            leaks.join("\n")
        );
    }
}

/// The log line of each decision (at debug level).
pub const DECIDED: &str = "decided decision=";

/// Waits until the actuator has decided `n` more times than `before`: it
/// has then decided again, each time on what its watches hold now.
pub async fn wait_decisions(watcher: &Actuator, before: usize, n: usize) {
    let started = clock::Clock::system().now();
    while watcher.count(DECIDED) < before + n {
        assert!(
            started.elapsed() < DEADLINE,
            "the actuator stopped deciding; log:\n{}",
            watcher.log_tail(15)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The report kept on the host, beside the role file.
pub const HOST_REPORT: &str = "var/lib/rancher/k3s/fleet-role.report";

// === impl Controller ===

/// The controller, played by hand through one API server as the admin.
#[derive(Clone)]
pub struct Controller {
    /// The admin client.
    pub client: Client,
}

impl Controller {
    /// The controller talking to the plane's first running API server.
    pub fn new(plane: &ControlPlane) -> Controller {
        Controller {
            client: plane.admin_client().expect("an admin client"),
        }
    }

    /// The controller talking to API server `index`.
    pub fn via(plane: &ControlPlane, index: usize) -> Controller {
        let config = plane
            .client_config(index, Some(plane.admin_token()))
            .expect("that API server exists");
        Controller {
            client: Client::try_from(config).expect("an admin client"),
        }
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// Creates a Node with these annotations, as its kubelet would register it.
    pub async fn create_node(&self, name: &str, annotations: Value) {
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": annotations},
        }))
        .expect("a Node");
        self.nodes()
            .create(&PostParams::default(), &node)
            .await
            .unwrap_or_else(|e| panic!("creating node {name}: {e}"));
    }

    /// A standby's Node and the voter it will join (`voter-a`, whose etcd
    /// address k3s published as 127.0.0.1).
    pub async fn create_standby_and_voter(&self, standby: &str) {
        self.create_node(standby, json!({})).await;
        if self.nodes().get_opt("voter-a").await.unwrap().is_none() {
            self.create_node(
                "voter-a",
                json!({"etcd.k3s.cattle.io/node-address": "127.0.0.1"}),
            )
            .await;
        }
    }

    /// Takes (or renews) the regrade Lease for `swap`: holder `fleet-role`,
    /// renewed now, for 60 s.
    pub async fn take_lease(&self, swap: &str) {
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {
                "name": "fleet-regrade", "namespace": "kube-system",
                "annotations": { format!("{P}/role-swap"): swap },
            },
            "spec": {
                "holderIdentity": "fleet-role",
                "leaseDurationSeconds": 60,
                "renewTime": micro_time_now(),
            },
        });
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.client.clone(), "kube-system");
        // kube-system is made by the API server's system-namespaces controller
        // just after `/readyz`; a fresh plane may need a moment.
        let started = clock::Clock::system().now();
        loop {
            match leases
                .patch(
                    "fleet-regrade",
                    &PatchParams::apply("fleet-role").force(),
                    &Patch::Apply(&lease),
                )
                .await
            {
                Ok(_) => return,
                Err(e) if started.elapsed() < DEADLINE => {
                    eprintln!("taking the lease: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("taking the lease: {e}"),
            }
        }
    }

    /// Renews the Lease for `swap` every 5 s, as the controller does for as
    /// long as its swap runs, until the handle is dropped.
    pub fn keep_lease(&self, swap: &str) -> Renewing {
        let me = self.clone();
        let swap = swap.to_owned();
        Renewing(tokio::spawn(async move {
            loop {
                me.take_lease(&swap).await;
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }))
    }

    /// Asks `node` for a step as the controller does: the regrade Lease
    /// names the host for it and records the ask (`swap-in` or `swap-out`,
    /// and `swap-asked`), then the Node gets the desired-role label and the
    /// swap, step and (for a promotion) join-node annotations.
    pub async fn ask(
        &self,
        node: &str,
        swap: &str,
        step: &str,
        desired_role: &str,
        join_node: Option<&str>,
    ) {
        self.ask_lease(node, step).await;
        self.mark(node, swap, step, desired_role, join_node).await;
    }

    /// The Lease's half of [`Controller::ask`]: names `node` for `step` and
    /// records the ask.
    pub async fn ask_lease(&self, node: &str, step: &str) {
        let named = if step == "step-down" {
            "swap-out"
        } else {
            "swap-in"
        };
        let patch = json!({"metadata": {"annotations": {
            format!("{P}/{named}"): node,
            format!("{P}/swap-asked"): step,
        }}});
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.client.clone(), "kube-system");
        match leases
            .patch(
                "fleet-regrade",
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            // No Lease (a test of a step asked without one): the Node's
            // marks alone.
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => panic!("asking {node} for {step} on the Lease: {e}"),
        }
    }

    /// The Node's half of [`Controller::ask`] alone, as any holder of `patch
    /// nodes` can write it: the desired-role label and the swap, step and
    /// (for a promotion) join-node annotations.
    pub async fn mark(
        &self,
        node: &str,
        swap: &str,
        step: &str,
        desired_role: &str,
        join_node: Option<&str>,
    ) {
        let mut annotations = json!({
            format!("{P}/role-swap"): swap,
            format!("{P}/role-step"): step,
        });
        if let Some(join) = join_node {
            annotations[format!("{P}/role-join-node")] = json!(join);
        }
        let patch = json!({"metadata": {
            "labels": { format!("{P}/desired-role"): desired_role },
            "annotations": annotations,
        }});
        self.nodes()
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("writing the step on {node}: {e}"));
    }

    /// Writes the protocol version the controller's marks on `node` claim.
    pub async fn mark_protocol(&self, node: &str, version: &str) {
        let patch = json!({"metadata": {"annotations": { format!("{P}/protocol"): version }}});
        self.nodes()
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("writing the protocol mark on {node}: {e}"));
    }

    /// Sets k3s's `EtcdIsVoter` condition on `node` to True, through the
    /// status subresource as k3s does once it promoted the learner.
    pub async fn set_voter(&self, node: &str) {
        let patch = json!({"status": {"conditions": [{
            "type": "EtcdIsVoter", "status": "True",
            "reason": "MemberIsVoter", "message": "the etcd member is a voter",
            "lastHeartbeatTime": micro_time_now().replace(".000000", ""),
            "lastTransitionTime": micro_time_now().replace(".000000", ""),
        }]}});
        self.nodes()
            .patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("setting EtcdIsVoter on {node}: {e}"));
    }

    /// Sets `node`'s InternalIP, through the status subresource as its
    /// kubelet does.
    pub async fn set_address(&self, node: &str, ip: &str) {
        let patch = json!({"status": {"addresses": [{"type": "InternalIP", "address": ip}]}});
        self.nodes()
            .patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("setting the address of {node}: {e}"));
    }

    /// `node`'s report ConfigMap as stored.
    pub async fn report_configmap(&self, node: &str) -> Option<ConfigMap> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), HOSTS);
        api.get_opt(node)
            .await
            .expect("the report ConfigMap can be read")
    }

    /// `node`'s heartbeat Lease as stored.
    pub async fn heartbeat(&self, node: &str) -> Option<Lease> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), HOSTS);
        api.get_opt(node)
            .await
            .expect("the heartbeat Lease can be read")
    }

    /// Sets `node`'s report to `raw` (`None` removes it), as an admin can:
    /// a write the host made and the API lost, or a damaged one.
    pub async fn put_report(&self, node: &str, raw: Option<&str>) {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), HOSTS);
        let patch = json!({"data": { "report": raw }});
        api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("setting {node}'s report: {e}"));
    }

    /// `node`'s report, if it wrote one.
    pub async fn report(&self, node: &str) -> Option<Report> {
        let raw = self
            .report_configmap(node)
            .await
            .and_then(|cm| cm.data)
            .and_then(|d| d.get("report").cloned())?;
        Some(Report::from_json(&raw).unwrap_or_else(|| panic!("an unreadable report: {raw}")))
    }

    /// Waits until `node`'s report satisfies `done`, and returns it; on
    /// timeout, fails showing the last report and the actuator's log.
    pub async fn wait_report(
        &self,
        node: &str,
        what: &str,
        actuator: &Actuator,
        done: impl Fn(&Report) -> bool,
    ) -> Report {
        let started = clock::Clock::system().now();
        loop {
            let report = self.report(node).await;
            if let Some(r) = report.as_ref().filter(|r| done(r)) {
                return r.clone();
            }
            assert!(
                started.elapsed() < DEADLINE,
                "{node} never reported {what}; last report {report:?}\nactuator log:\n{}",
                actuator.log_tail(15)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A task renewing the Lease; stops on drop.
pub struct Renewing(tokio::task::JoinHandle<()>);

impl Drop for Renewing {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Now as a Kubernetes MicroTime.
pub fn micro_time_now() -> String {
    k8s_openapi::jiff::Timestamp::try_from(clock::Clock::system().wall())
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        .to_string()
}

/// Whether a report is at `phase` (and `detail`, when given).
pub fn at(phase: Phase, detail: Option<Detail>) -> impl Fn(&Report) -> bool {
    move |r| r.phase == phase && (detail.is_none() || r.detail == detail)
}

// === impl Reports ===

/// Whether `r` is a heartbeat write after `prev` (the host part changed, the
/// step as it was), or the report of a host that took no step yet: neither
/// is a phase. A step written twice keeps its host part, so it still shows.
pub fn is_heartbeat(prev: Option<&Report>, r: &Report) -> bool {
    if r.step == protocol::report::ReportStep::None {
        return true;
    }
    let Some(p) = prev else {
        return false;
    };
    let step_of = |x: &Report| {
        (
            x.swap.clone(),
            x.step,
            x.phase,
            x.detail,
            x.reason.clone(),
            x.started_at,
            x.snapshot_file.clone(),
            x.settled.clone(),
        )
    };
    p.host != r.host && step_of(p) == step_of(r)
}

/// Every version of every host's report, as a watch of the ConfigMap saw it:
/// the report itself keeps only its latest phase, and this shows each phase
/// the actuator wrote, so a repeated `started` cannot hide.
pub struct Reports {
    seen: Arc<Mutex<BTreeMap<String, Vec<Report>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Reports {
    /// Starts recording through `client` (which must stay up for the record
    /// to be complete).
    pub fn record(client: Client) -> Reports {
        let seen: Arc<Mutex<BTreeMap<String, Vec<Report>>>> = Arc::default();
        let api: Api<ConfigMap> = Api::namespaced(client, HOSTS);
        let stream = watcher(api, watcher::Config::default());
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                futures::pin_mut!(stream);
                while let Some(event) = stream.next().await {
                    let cm = match event {
                        Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => cm,
                        Ok(_) => continue,
                        Err(e) => {
                            eprintln!("report recorder: {e}");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            continue;
                        }
                    };
                    let mut seen = seen.lock().unwrap();
                    let node = cm.metadata.name.clone().unwrap_or_default();
                    if let Some(raw) = cm.data.unwrap_or_default().remove("report") {
                        let Some(r) = Report::from_json(&raw) else {
                            continue;
                        };
                        let versions = seen.entry(node).or_default();
                        if versions.last() != Some(&r) && !is_heartbeat(versions.last(), &r) {
                            versions.push(r);
                        }
                    }
                }
            }
        });
        Reports { seen, task }
    }

    /// Every version of `node`'s report seen, oldest first.
    pub fn of(&self, node: &str) -> Vec<Report> {
        self.seen
            .lock()
            .unwrap()
            .get(node)
            .cloned()
            .unwrap_or_default()
    }

    /// The phases `node` went through, oldest first.
    pub fn phases(&self, node: &str) -> Vec<(Phase, Option<Detail>)> {
        self.of(node).iter().map(|r| (r.phase, r.detail)).collect()
    }

    /// The phases `node` went through, once they are `want` or 15 s have
    /// passed: the record comes through a watch, which may show a report a
    /// moment after a GET did (a busy machine widens the gap).
    pub async fn phases_until(
        &self,
        node: &str,
        want: &[(Phase, Option<Detail>)],
    ) -> Vec<(Phase, Option<Detail>)> {
        let start = clock::Clock::system().now();
        loop {
            let seen = self.phases(node);
            if seen == want || start.elapsed() > std::time::Duration::from_secs(15) {
                return seen;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Reports {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// === impl Actuator ===

/// `fleet-role-actuator watch` running as a child process on a test host,
/// logging at debug level to a file. Killed on drop.
pub struct Actuator {
    child: Option<Child>,
    stdout: PathBuf,
    stderr: PathBuf,
}

/// How to reach the API: candidates, CA file, token file.
#[derive(Clone)]
pub struct Access {
    /// The API server URLs, in order.
    pub api: Vec<String>,
    /// The CA bundle.
    pub ca_file: PathBuf,
    /// The token file.
    pub token_file: PathBuf,
}

impl Access {
    /// The flags that name them.
    pub fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for url in &self.api {
            args.extend(["--api".to_owned(), url.clone()]);
        }
        args.extend([
            "--ca-file".to_owned(),
            self.ca_file.display().to_string(),
            "--token-file".to_owned(),
            self.token_file.display().to_string(),
        ]);
        args
    }
}

impl Actuator {
    /// Starts `watch` on `host`, its output in files under `logs` named by
    /// `tag`, logging at debug level. The watcher resyncs every 2 s (the
    /// default is 10), so a test sees a Lease change in seconds.
    pub fn watch(host: &TestHost, logs: &Path, tag: &str, access: &Access) -> Actuator {
        Actuator::watch_logging(host, logs, tag, access, "debug")
    }

    /// [`Actuator::watch`] with `FLEET_ROLE_LOG` set to `level`.
    pub fn watch_logging(
        host: &TestHost,
        logs: &Path,
        tag: &str,
        access: &Access,
        level: &str,
    ) -> Actuator {
        Actuator::watch_configured(host, logs, tag, access, level, "")
    }

    /// [`Actuator::watch_logging`] with `more` added to its config file.
    pub fn watch_configured(
        host: &TestHost,
        logs: &Path,
        tag: &str,
        access: &Access,
        level: &str,
        more: &str,
    ) -> Actuator {
        Actuator::watch_in(host, logs, tag, access, level, more, &[])
    }

    /// [`Actuator::watch`] with `env` set in its environment.
    pub fn watch_with_env(
        host: &TestHost,
        logs: &Path,
        tag: &str,
        access: &Access,
        env: &[(&str, &str)],
    ) -> Actuator {
        Actuator::watch_in(host, logs, tag, access, "debug", "", env)
    }

    fn watch_in(
        host: &TestHost,
        logs: &Path,
        tag: &str,
        access: &Access,
        level: &str,
        more: &str,
        env: &[(&str, &str)],
    ) -> Actuator {
        let config = logs.join(format!("{tag}.toml"));
        fs::write(&config, format!("resync_secs = 2\n{more}")).expect("a config file");
        let stdout = logs.join(format!("{tag}.stdout"));
        let stderr = logs.join(format!("{tag}.stderr"));
        let mut args = vec![
            "--config".to_owned(),
            config.display().to_string(),
            "watch".to_owned(),
        ];
        args.extend(access.args());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let child = host
            .actuator(&args)
            .env("FLEET_ROLE_LOG", level)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(fs::File::create(&stdout).expect("a stdout file"))
            .stderr(fs::File::create(&stderr).expect("a stderr file"))
            .spawn()
            .expect("the actuator starts");
        Actuator {
            child: Some(child),
            stdout,
            stderr,
        }
    }

    /// Everything it printed so far: stdout, then stderr (the log).
    pub fn log(&self) -> String {
        let read = |p: &Path| fs::read_to_string(p).unwrap_or_default();
        format!("{}{}", read(&self.stdout), read(&self.stderr))
    }

    /// For a failure's message: every line above debug level, then the last
    /// `n` lines (the debug log of one request is a dozen lines).
    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines.len().saturating_sub(n);
        let above_debug = lines[..tail]
            .iter()
            .filter(|l| !l.contains(" DEBUG ") && !l.contains(" TRACE "));
        let mut out: Vec<&str> = above_debug.copied().collect();
        out.push("[…]");
        out.extend(&lines[tail..]);
        out.join("\n")
    }

    /// How many log lines contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.log().lines().filter(|l| l.contains(needle)).count()
    }

    /// How many requests it sent whose log line contains `needle` (kube logs
    /// each request at debug level as `HTTP{http.method=… http.url=…}: requesting`).
    pub fn count_requests(&self, needle: &str) -> usize {
        self.log()
            .lines()
            .filter(|l| l.contains(needle) && l.ends_with(": requesting"))
            .count()
    }

    /// Kills it (SIGKILL, as a crash or a power cut would) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits (polling, up to [`DEADLINE`]) until it exits, and returns its
    /// exit code; fails showing its log if it does not.
    pub async fn wait_exit(&mut self) -> Option<i32> {
        let started = clock::Clock::system().now();
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return status.code();
            }
            assert!(
                started.elapsed() < DEADLINE,
                "the actuator did not stop; log:\n{}",
                self.log_tail(15)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Whether it is still running (a watcher never exits by itself).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }
}

impl Drop for Actuator {
    fn drop(&mut self) {
        self.kill();
    }
}

// === impl Relay ===

/// A TCP relay on 127.0.0.1 in front of an API server. TLS passes through
/// it untouched (the serving certificate names 127.0.0.1), so the actuator
/// cannot tell it is there; the test can point it at another API server and
/// cut every connection, as a network blip or a load balancer would.
pub struct Relay {
    port: u16,
    backend: Arc<AtomicU16>,
    connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// A relay to `backend_port` on 127.0.0.1.
    pub async fn start(backend_port: u16) -> Relay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a relay port");
        let port = listener.local_addr().unwrap().port();
        let backend = Arc::new(AtomicU16::new(backend_port));
        let connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let accept = tokio::spawn({
            let backend = backend.clone();
            let connections = connections.clone();
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    let to = backend.load(Ordering::SeqCst);
                    let task = tokio::spawn(async move {
                        if let Ok(mut outbound) =
                            tokio::net::TcpStream::connect(("127.0.0.1", to)).await
                        {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    connections.lock().unwrap().push(task.abort_handle());
                }
            }
        });
        Relay {
            port,
            backend,
            connections,
            accept,
        }
    }

    /// The URL the actuator is given.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Sends new connections to `port` from now on.
    pub fn point_at(&self, port: u16) {
        self.backend.store(port, Ordering::SeqCst);
    }

    /// Drops every open connection, both ways.
    pub fn cut(&self) {
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

/// The port of a `https://127.0.0.1:PORT` URL.
pub fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a URL ending in a port")
}

// === impl Frozen ===

/// A kube-apiserver frozen with SIGSTOP, as a hung machine or a network that
/// drops packets would leave it: its sockets stay open and the kernel still
/// accepts connections, but nothing answers. Thawed (SIGCONT) on drop.
pub struct Frozen(u32);

impl Frozen {
    /// Freezes API server `index` of `plane`.
    pub fn apiserver(plane: &ControlPlane, index: usize) -> Frozen {
        let guard = plane.apiservers()[index]
            .guard_pid()
            .expect("the API server runs");
        // The server is a child of its bash guard (beside the guard's watcher).
        let children = fs::read_to_string(format!("/proc/{guard}/task/{guard}/children"))
            .expect("the guard's children");
        let pid: u32 = children
            .split_whitespace()
            .find(|pid| {
                fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim() == "kube-apiserver")
            })
            .and_then(|pid| pid.parse().ok())
            .expect("kube-apiserver under its guard");
        signal(pid, "-STOP");
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill(1) runs");
    assert!(status.success(), "kill {signal} {pid}");
}
