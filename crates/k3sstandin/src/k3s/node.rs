//! The kubelet's part, as k3s embeds it in both `server` and `agent`: the node
//! password check, the Node's registration and its heartbeat (the Ready
//! condition and the node Lease). Its pods are in [`super::pods`].

use std::{collections::BTreeMap, fs, os::unix::fs::PermissionsExt, path::Path};

use anyhow::{Context, bail};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Node, Secret},
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use crate::api::Apis;

/// One Node's kubelet.
pub struct Kubelet {
    /// The Node name.
    pub name: String,
    /// The host's address.
    pub ip: String,
    /// Admin access (k3s's own components have it).
    pub apis: Apis,
}

/// The agent's node password: made once (32 hex, 0600), never changed.
pub fn ensure_password(root: &Path) -> anyhow::Result<String> {
    let path = root.join("etc/rancher/node/password");
    if let Ok(p) = fs::read_to_string(&path) {
        return Ok(p.trim().to_string());
    }
    let mut bytes = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| anyhow::anyhow!("no randomness"))?;
    let pw: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    fs::create_dir_all(path.parent().expect("a parent"))?;
    fs::write(&path, format!("{pw}\n"))?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600))?;
    Ok(pw)
}

fn hash(password: &str) -> String {
    // k3s stores an scrypt hash; a SHA-256 does the same job for the lab.
    ring::digest::digest(&ring::digest::SHA256, password.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Kubelet {
    /// Checks the node password against `kube-system/<node>.node-password.k3s`,
    /// creating the Secret on first registration, as k3s's server does.
    pub async fn check_password(&self, password: &str) -> anyhow::Result<()> {
        let name = format!("{}.node-password.k3s", self.name);
        let want = hash(password);
        let secret: Option<Secret> = self
            .apis
            .any(|c| {
                let name = name.clone();
                async move {
                    Api::<Secret>::namespaced(c, "kube-system")
                        .get_opt(&name)
                        .await
                }
            })
            .await?;
        match secret.and_then(|s| s.data).and_then(|d| {
            d.get("hash")
                .map(|h| String::from_utf8_lossy(&h.0).into_owned())
        }) {
            Some(h) if h == want => Ok(()),
            Some(_) => bail!(
                "Node password rejected, duplicate hostname or contents of '/etc/rancher/node/password' may not match server node-passwd entry"
            ),
            None => {
                let s: Secret = serde_json::from_value(json!({
                    "metadata": {"name": name, "namespace": "kube-system"},
                    "type": "k3s.cattle.io/node-password",
                    "immutable": true,
                    "stringData": {"hash": want},
                }))?;
                self.apis
                    .any(|c| {
                        let s = s.clone();
                        async move {
                            Api::<Secret>::namespaced(c, "kube-system")
                                .create(&PostParams::default(), &s)
                                .await
                        }
                    })
                    .await?;
                Ok(())
            }
        }
    }

    /// Registers the Node if it is not there.
    pub async fn register(&self) -> anyhow::Result<()> {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": self.name, "labels": {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux"}},
        }))?;
        let existing = self
            .apis
            .any(|c| {
                let n = self.name.clone();
                async move { Api::<Node>::all(c).get_opt(&n).await }
            })
            .await?;
        if existing.is_none() {
            self.apis
                .any(|c| {
                    let node = node.clone();
                    async move {
                        Api::<Node>::all(c)
                            .create(&PostParams::default(), &node)
                            .await
                    }
                })
                .await
                .context("registering the Node")?;
        }
        Ok(())
    }

    /// Merges labels and annotations into the Node (`null` removes one).
    pub async fn patch_meta(&self, labels: Value, annotations: Value) -> anyhow::Result<()> {
        let patch = json!({"metadata": {"labels": labels, "annotations": annotations}});
        self.apis
            .any(|c| {
                let (n, p) = (self.name.clone(), patch.clone());
                async move {
                    Api::<Node>::all(c)
                        .patch(&n, &PatchParams::default(), &Patch::Merge(&p))
                        .await
                }
            })
            .await
            .map(drop)
    }

    /// The Node as the API has it.
    pub async fn get(&self) -> anyhow::Result<Option<Node>> {
        self.apis
            .any(|c| {
                let n = self.name.clone();
                async move { Api::<Node>::all(c).get_opt(&n).await }
            })
            .await
    }

    /// One heartbeat: Ready (and `extra` conditions) in the Node's status,
    /// its address, and the node Lease renewed.
    pub async fn heartbeat(&self, extra: &[(&str, bool, &str)]) -> anyhow::Result<()> {
        let clock = clock::Clock::system();
        let mut conditions = vec![("Ready", true, "KubeletReady")];
        conditions.extend_from_slice(extra);
        self.post_conditions(&conditions, true).await?;
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": self.name, "leaseDurationSeconds": 40, "renewTime": crate::stamps::micro(&clock)},
        });
        self.apis
            .any(|c| {
                let (n, l) = (self.name.clone(), lease.clone());
                async move {
                    Api::<Lease>::namespaced(c, "kube-node-lease")
                        .patch(
                            &n,
                            &PatchParams::apply("kubelet").force(),
                            &Patch::Apply(&l),
                        )
                        .await
                }
            })
            .await
            .context("the node Lease")?;
        Ok(())
    }

    /// Sets `conditions` in the Node's status (merged by type: the others
    /// keep their last values), and its addresses with `addresses`.
    pub async fn post_conditions(
        &self,
        conditions: &[(&str, bool, &str)],
        addresses: bool,
    ) -> anyhow::Result<()> {
        let clock = clock::Clock::system();
        let now = crate::stamps::rfc3339(&clock);
        // A condition's transition time moves only when its status changes,
        // as the kubelet keeps it (`pkg/kubelet/nodestatus/setters.go`):
        // `run` counts a host's healthy time from its Ready transition.
        let current = self.get().await.ok().flatten();
        let since = |kind: &str, status: &str| -> Option<Value> {
            let c = current
                .as_ref()?
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == kind && c.status == status)?;
            Some(json!(c.last_transition_time.as_ref()?.0.to_string()))
        };
        let conditions: Vec<Value> = conditions
            .iter()
            .map(|(kind, on, reason)| {
                let status = if *on { "True" } else { "False" };
                let mut c = json!({
                    "type": kind, "status": status, "reason": reason,
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": since(kind, status).unwrap_or_else(|| json!(now)),
                });
                if *kind == "Ready" {
                    c["message"] = json!("kubelet is posting ready status (lab)");
                }
                c
            })
            .collect();
        let mut status = json!({"status": {"conditions": conditions}});
        if addresses {
            status["status"]["addresses"] = json!([
                {"type": "InternalIP", "address": self.ip},
                {"type": "Hostname", "address": self.name},
            ]);
        }
        self.apis
            .any(|c| {
                let (n, p) = (self.name.clone(), status.clone());
                async move {
                    Api::<Node>::all(c)
                        .patch_status(&n, &PatchParams::default(), &Patch::Strategic(&p))
                        .await
                }
            })
            .await
            .context("the Node's status")
            .map(drop)
    }
}

/// k3s's labels and etcd annotations for a server (empty values: none).
pub fn server_meta(control_plane: bool, member: &str, ip: &str) -> (Value, Value) {
    let mut labels = BTreeMap::new();
    // k3s skips (does not remove) the control-plane labels with --disable-apiserver.
    if control_plane {
        labels.insert(protocol::names::K3S_CONTROL_PLANE_LABEL, json!("true"));
        labels.insert(protocol::names::K3S_MASTER_LABEL, json!("true"));
    }
    labels.insert(protocol::names::K3S_ETCD_ROLE_LABEL, json!("true"));
    let annotations = json!({
        protocol::names::K3S_ETCD_NODE_NAME: member,
        protocol::names::K3S_ETCD_NODE_ADDRESS: ip,
    });
    (json!(labels), annotations)
}

#[cfg(test)]
mod tests;
