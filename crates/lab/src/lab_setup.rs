//! What a lab is made of, whatever runs its hosts: the programs it runs, the
//! k3s token, the audit policy, the admin kubeconfig, the manifests of
//! `deploy/` applied, the pods bound to each host, the hosts' eligibility
//! and the actuators' identities. A lab's hosts run on real systemd
//! ([`crate::systemd_lab`]).

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, bail};
use k8s_openapi::api::{
    apps::v1::ReplicaSet,
    authentication::v1::TokenRequest,
    core::v1::{Namespace, Node, Pod, ServiceAccount},
};
use kube::{Api, api::PostParams};
use secrecy::ExposeSecret;
use testcp::TokenAuthFile;

use crate::{
    api::Apis,
    spec::{HostSpec, LabSpec},
};
use protocol::Role;

/// The programs a lab runs.
#[derive(Debug, Clone)]
pub struct Bins {
    /// `fleet-role-lab` (every host's `k3s`, the stand-in, is beside it).
    pub lab: PathBuf,
    /// `fleet-role-actuator`.
    pub actuator: PathBuf,
    /// The directory of the `systemctl` stand-in.
    pub standin_dir: PathBuf,
}

impl Bins {
    /// The programs beside each other in one directory (cargo's target dir).
    pub fn beside(dir: &Path) -> anyhow::Result<Bins> {
        for b in ["fleet-role-lab", "fleet-role-actuator", "systemctl", "k3s"] {
            if !dir.join(b).is_file() {
                bail!(
                    "{} is missing: build the workspace's binaries (cargo build --workspace --bins)",
                    dir.join(b).display()
                );
            }
        }
        Ok(Bins {
            lab: dir.join("fleet-role-lab"),
            actuator: dir.join("fleet-role-actuator"),
            standin_dir: dir.to_path_buf(),
        })
    }
}

/// The lab's kube-apiservers log the actuators' requests (and nothing else),
/// so the benchmark can count what an idle actuator asks. Each host has an
/// identity of its own (`platform/fleet-role-actuator-<node>`, as `fleet-role
/// enroll` makes them), so the rule names the ServiceAccounts' group, less
/// the controller's own account in that namespace.
pub(crate) const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n- level: None\n  users: [\"system:serviceaccount:platform:fleet-role\"]\n- level: Metadata\n  userGroups: [\"system:serviceaccounts:platform\"]\n- level: None\n";

/// A k3s server token for the lab (fake, but shaped as k3s's: the tests check
/// it never appears in anything fleet-role prints).
pub const K3S_TOKEN: &str = "K10labca5e11b0a7::server:lab-k3s-token-SECRETMARK";

pub(crate) fn write(path: &Path, text: &str, mode: u32) -> anyhow::Result<()> {
    fs::create_dir_all(path.parent().expect("a parent"))?;
    fs::write(path, text).with_context(|| path.display().to_string())?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// A lab host's k3s configuration, laid out so that either role starts
/// (k3s's `agent` fails on a server-only key in `config.yaml`): the keys both
/// roles take in `config.yaml` (node name, address, token); what only the
/// server reads in `k3s.service.env` (`K3S_CLUSTER_INIT` on the first
/// server, `K3S_URL` naming it on the others); what only the agent reads in
/// `k3s-agent.service.env` (`K3S_URL`: a server other than the host itself,
/// so that a server's agent, once it is demoted, has a live server to
/// bootstrap from). These are the files install.sh writes.
pub(crate) fn write_k3s_config(
    spec: &LabSpec,
    h: &HostSpec,
    first: &HostSpec,
) -> anyhow::Result<()> {
    let root = spec.root(&h.name);
    let config = format!(
        "node-name: {}\nnode-ip: {}\ntoken: \"{K3S_TOKEN}\"\n",
        h.name, h.ip
    );
    write(&root.join("etc/rancher/k3s/config.yaml"), &config, 0o600)?;
    let sys = root.join("etc/systemd/system");
    let server_env = if h.name == first.name {
        "K3S_CLUSTER_INIT=true\n".to_string()
    } else {
        format!("K3S_URL={}\n", LabSpec::api_url(first.ip))
    };
    write(&sys.join("k3s.service.env"), &server_env, 0o600)?;
    let registration = spec
        .hosts
        .iter()
        .find(|o| o.role == Role::Server && o.name != h.name);
    let agent_env = registration.map_or_else(String::new, |o| {
        format!("K3S_URL={}\n", LabSpec::api_url(o.ip))
    });
    write(&sys.join("k3s-agent.service.env"), &agent_env, 0o600)?;
    Ok(())
}

/// Polls `check` until it holds, within `timeout`; the error names `what`.
pub(crate) async fn wait_for<F, Fut>(
    what: &str,
    timeout: Duration,
    mut check: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let clock = clock::Clock::system();
    let start = clock.now();
    while !check().await {
        if clock.since(start) > timeout {
            bail!("timed out after {}s waiting for {what}", timeout.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(())
}

/// Waits for a Node's condition to be True.
pub async fn wait_condition(
    apis: &Apis,
    node: &str,
    kind: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    wait_for(&format!("{node} {kind}"), timeout, || async {
        let n = node.to_string();
        matches!(apis.any(|c| { let n = n.clone(); async move { Api::<Node>::all(c).get_opt(&n).await } }).await, Ok(Some(ref x)) if kubeview::condition_true(x, kind))
    })
    .await
}

/// Waits until every actuator of the lab has written its heartbeat (the
/// report's host part): a swap asked before would be refused by the
/// controller's `actuators-alive` gate, a server's by `outgoing-demotable`
/// too until its verdict is in, and its member counted down by etcd's
/// quorum until its view of etcd is in.
pub(crate) async fn wait_heartbeats(
    apis: &Apis,
    spec: &LabSpec,
    timeout: Duration,
) -> anyhow::Result<()> {
    let names = protocol::Names::default();
    let hosts: Vec<(String, bool)> = spec
        .hosts
        .iter()
        .map(|h| (h.name.clone(), h.role == Role::Server))
        .collect();
    wait_for(
        "every actuator's heartbeat (a server's with its etcd view)",
        timeout,
        || async {
            let ns = names.hosts_namespace.clone();
            let Ok(list) = apis
                .any(|c| {
                    let ns = ns.clone();
                    async move {
                        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(c, &ns)
                            .list(&Default::default())
                            .await
                    }
                })
                .await
            else {
                return false;
            };
            let data = kubeview::hostobjects::reports_by_node(&list.items);
            hosts.iter().all(|(h, server)| {
                data.get(h)
                    .and_then(|v| protocol::Report::from_json(v))
                    .and_then(|r| r.host)
                    // A server's part carries its demotion verdict and its
                    // view of etcd (the controller's gates want a fresh one).
                    .is_some_and(|p| !server || (p.demotion.is_some() && p.etcd.is_some()))
            })
        },
    )
    .await
}

/// The lab's admin kubeconfig, `<dir>/kubeconfig` (mode 0600), naming the
/// first server's API (the one the demo keeps).
pub fn kubeconfig(spec: &LabSpec) -> PathBuf {
    spec.dir.join("kubeconfig")
}

pub(crate) fn write_kubeconfig(spec: &LabSpec) -> anyhow::Result<()> {
    write_kubeconfig_to(spec, spec.hosts[0].ip, &kubeconfig(spec))
}

/// An admin kubeconfig naming `host`'s API server, `<dir>/kubeconfig-<host>`
/// (mode 0600): what a controller whose swap takes the first server's API
/// away (a swap of that server) is given, as an operator would point it at
/// a server that stays (or at a load balancer).
pub fn kubeconfig_for(spec: &LabSpec, host: &str) -> anyhow::Result<PathBuf> {
    let h = spec
        .hosts
        .iter()
        .find(|h| h.name == host)
        .with_context(|| format!("no host {host} in this lab"))?;
    let path = spec.dir.join(format!("kubeconfig-{host}"));
    write_kubeconfig_to(spec, h.ip, &path)?;
    Ok(path)
}

fn write_kubeconfig_to(spec: &LabSpec, ip: std::net::Ipv4Addr, path: &Path) -> anyhow::Result<()> {
    let tokens = TokenAuthFile::load(&spec.tokens_file())?;
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: admin\n  user:\n    token: {}\ncontexts:\n- name: lab\n  context:\n    cluster: lab\n    user: admin\ncurrent-context: lab\n",
        LabSpec::api_url(ip),
        spec.pki_dir().join("ca.crt").display(),
        tokens.admin_token().expose_secret(),
    );
    write(path, &text, 0o600)
}

/// Server-side applies a manifest of this checkout's `deploy/` folder.
pub(crate) async fn apply_deploy(apis: &Apis, rel: &str) -> anyhow::Result<()> {
    let manifest = fs::read_to_string(standins::fixture::workspace().join(rel))
        .with_context(|| rel.to_string())?;
    apis.any(|c| {
        let m = manifest.clone();
        async move {
            testcp::apply_manifest(&c, &m)
                .await
                .map_err(|e| kube::Error::Service(Box::new(std::io::Error::other(e.to_string()))))
        }
    })
    .await
    .with_context(|| format!("applying {rel}"))
    .map(drop)
}

/// How many pods the lab binds to each host.
pub const PODS_PER_HOST: usize = 2;

/// The ReplicaSet that owns the lab's workload, as a Deployment's pods are
/// owned in a real cluster (the drain evicts only pods a controller owns
/// unless forced, as `kubectl drain` does). Nothing runs it: the lab has no
/// controller-manager, so an evicted pod is not made again. Returns the
/// ownerReferences its pods carry.
async fn workload_owner(apis: &Apis) -> anyhow::Result<serde_json::Value> {
    let rs: ReplicaSet = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "lab-workload", "namespace": "default"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "lab-workload"}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "lab-workload"}},
                "spec": {"containers": [{"name": "sleep", "image": "lab.invalid/sleep:1"}]},
            },
        },
    }))?;
    let api = |c| Api::<ReplicaSet>::namespaced(c, "default");
    let created = apis
        .any(|c| {
            let rs = rs.clone();
            async move { api(c).create(&PostParams::default(), &rs).await }
        })
        .await;
    let rs = match created {
        Ok(rs) => rs,
        Err(e)
            if e.downcast_ref::<kube::Error>()
                .is_some_and(|k| matches!(k, kube::Error::Api(s) if s.code == 409)) =>
        {
            apis.any(|c| async move { api(c).get("lab-workload").await })
                .await?
        }
        Err(e) => return Err(e.context("creating the workload's ReplicaSet")),
    };
    let uid = rs.metadata.uid.context("the ReplicaSet has no uid")?;
    Ok(serde_json::json!([{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "lab-workload",
        "uid": uid, "controller": true, "blockOwnerDeletion": true,
    }]))
}

/// The lab's workload: [`PODS_PER_HOST`] pods bound to each host by
/// `spec.nodeName` (the lab runs no scheduler or controller-manager), in
/// `default`, owned by one ReplicaSet ([`workload_owner`]), mounting no
/// ServiceAccount token. Waits until each host's kubelet runs them
/// (`Running`, which it sets once their shims start).
pub async fn create_pods(apis: &Apis, spec: &LabSpec, timeout: Duration) -> anyhow::Result<()> {
    let owners = workload_owner(apis).await?;
    for h in &spec.hosts {
        for i in 1..=PODS_PER_HOST {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("{}-pod-{i}", h.name), "namespace": "default",
                             "labels": {"app.kubernetes.io/name": "lab-workload"},
                             "ownerReferences": owners},
                "spec": {
                    "nodeName": h.name,
                    "automountServiceAccountToken": false,
                    "containers": [{"name": "sleep", "image": "lab.invalid/sleep:1"}],
                },
            }))?;
            let created = apis
                .any(|c| {
                    let pod = pod.clone();
                    async move {
                        Api::<Pod>::namespaced(c, "default")
                            .create(&PostParams::default(), &pod)
                            .await
                    }
                })
                .await;
            match created {
                Ok(_) => {}
                Err(e)
                    if e.downcast_ref::<kube::Error>()
                        .is_some_and(|k| matches!(k, kube::Error::Api(s) if s.code == 409)) => {}
                Err(e) => return Err(e.context(format!("creating {}'s pods", h.name))),
            }
        }
    }
    wait_for("every lab pod Running", timeout, || async {
        let list = apis
            .any(|c| async move {
                Api::<Pod>::namespaced(c, "default")
                    .list(
                        &kube::api::ListParams::default()
                            .labels("app.kubernetes.io/name=lab-workload"),
                    )
                    .await
            })
            .await;
        list.is_ok_and(|l| {
            l.items.len() == spec.hosts.len() * PODS_PER_HOST
                && l.items
                    .iter()
                    .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        })
    })
    .await
}

/// Labels `node` eligible to vote (every lab host may be swapped in).
pub(crate) async fn mark_eligible(apis: &Apis, node: &str) -> anyhow::Result<()> {
    let eligible = protocol::Names::default().eligible();
    let patch = serde_json::json!({"metadata": {"labels": { eligible: "true" }}});
    apis.patch_node(node, &patch).await
}

/// Makes host `node`'s identity (the objects `fleet-role enroll` makes) and
/// returns a token of it.
pub(crate) async fn actuator_token(
    apis: &Apis,
    node: &str,
) -> anyhow::Result<secrecy::SecretString> {
    let names = protocol::Names::default();
    let ns = names.hosts_namespace.clone();
    let _ = apis
        .any(|c| {
            let ns = ns.clone();
            async move { Api::<Namespace>::all(c).get(&ns).await }
        })
        .await?;
    let id = kubeview::Identity::of(&protocol::NodeName::parse(node)?)?;
    apply_objects(apis, &id.objects(&names), node).await?;
    token_of(apis, &names.hosts_namespace, id.name()).await
}

/// Makes host `node`'s identity as the previous release's `enroll` made it
/// (a ServiceAccount in the shared report's namespace and three bindings)
/// and returns a token of it: the credential of a host that still runs
/// that release.
pub async fn previous_release_token(
    apis: &Apis,
    node: &str,
) -> anyhow::Result<secrecy::SecretString> {
    let names = protocol::Names::default();
    let id = kubeview::Identity::of(&protocol::NodeName::parse(node)?)?;
    apply_objects(apis, &id.legacy_objects(&names), node).await?;
    token_of(apis, &names.report_namespace, id.name()).await
}

/// Applies `objects` (an identity's) in order, server-side, as the admin.
async fn apply_objects(
    apis: &Apis,
    objects: &[serde_json::Value],
    node: &str,
) -> anyhow::Result<()> {
    for object in objects {
        let manifest = object.to_string();
        apis.any(|c| {
            let m = manifest.clone();
            async move {
                testcp::apply_manifest(&c, &m).await.map_err(|e| {
                    kube::Error::Service(Box::new(std::io::Error::other(e.to_string())))
                })
            }
        })
        .await
        .with_context(|| format!("applying the identity of {node}"))?;
    }
    Ok(())
}

/// A token (a day long) of the ServiceAccount `namespace/account`, through
/// the TokenRequest API.
async fn token_of(
    apis: &Apis,
    namespace: &str,
    account: &str,
) -> anyhow::Result<secrecy::SecretString> {
    let req: TokenRequest = serde_json::from_value(
        serde_json::json!({"spec": {"audiences": [], "expirationSeconds": 86400}}),
    )?;
    let t = apis
        .any(|c| {
            let (req, ns, account) = (req.clone(), namespace.to_string(), account.to_string());
            async move {
                Api::<ServiceAccount>::namespaced(c, &ns)
                    .create_token_request(&account, &PostParams::default(), &req)
                    .await
            }
        })
        .await?;
    let token = t
        .status
        .map(|s| s.token)
        .context("no token in the TokenRequest's answer")?;
    Ok(token.into())
}

/// The ServiceAccount `default/lab-node-problem-detector`, bound to
/// Kubernetes' own ClusterRole `system:node-problem-detector` (get Nodes,
/// patch `nodes/status`, create Events): what node-problem-detector's
/// DaemonSet holds on every node. Makes it and returns a token of it, for
/// the tests of what a writer of Node conditions can make fleet-role do.
pub async fn node_status_token(apis: &Apis) -> anyhow::Result<secrecy::SecretString> {
    let manifest = "\
apiVersion: v1
kind: ServiceAccount
metadata: {name: lab-node-problem-detector, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: lab-node-problem-detector}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: \"system:node-problem-detector\"}
subjects:
  - {kind: ServiceAccount, name: lab-node-problem-detector, namespace: default}
";
    identity_token(apis, manifest, "lab-node-problem-detector").await
}

/// The ServiceAccount `default/lab-node-patcher`, bound to a ClusterRole
/// granting `get`, `list`, `watch` and `patch` on Nodes and nothing else:
/// what many cluster add-ons hold (kured, system-upgrade-controller,
/// node-feature-discovery, an operator's script). Makes it and returns a
/// token of it, for the tests of what such a writer of Nodes can and
/// cannot make a host do.
pub async fn patch_nodes_token(apis: &Apis) -> anyhow::Result<secrecy::SecretString> {
    let manifest = "\
apiVersion: v1
kind: ServiceAccount
metadata: {name: lab-node-patcher, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: lab-node-patcher}
rules:
  - apiGroups: [\"\"]
    resources: [nodes]
    verbs: [get, list, watch, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: lab-node-patcher}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: lab-node-patcher}
subjects:
  - {kind: ServiceAccount, name: lab-node-patcher, namespace: default}
";
    identity_token(apis, manifest, "lab-node-patcher").await
}

/// Applies `manifest` (a ServiceAccount `default/<account>` and its
/// bindings) as the admin and returns a token of that ServiceAccount.
async fn identity_token(
    apis: &Apis,
    manifest: &'static str,
    account: &str,
) -> anyhow::Result<secrecy::SecretString> {
    apis.any(|c| async move {
        testcp::apply_manifest(&c, manifest)
            .await
            .map_err(|e| kube::Error::Service(Box::new(std::io::Error::other(e.to_string()))))
    })
    .await
    .with_context(|| format!("applying the identity {account}"))?;
    token_of(apis, "default", account).await
}
