//! One identity per host: the ServiceAccount a host's actuator runs as, and
//! the bindings that give it the shared roles of `deploy/rbac/actuator.yaml`.
//!
//! `fleet-role enroll` creates these objects (or prints them), the lab and
//! the tests create them the same way, so the ServiceAccount's name, which
//! the report's admission policy reads back into a Node name, is made in one
//! place only.

use protocol::{Names, NodeName, names::LEASE_NAMESPACE};
use serde_json::{Value, json};

/// Every actuator's ServiceAccount is this prefix and its Node's name. The
/// admission policy `fleet-role-actuator-report` (in `deploy/rbac/`) takes
/// the rest of the name as the one report key the ServiceAccount may write.
pub const SERVICE_ACCOUNT_PREFIX: &str = "fleet-role-actuator-";

/// The shared ClusterRole: read Nodes.
pub const NODES_CLUSTER_ROLE: &str = "fleet-role-actuator";
/// The shared Role in `kube-system`: get the regrade Lease.
pub const LEASE_ROLE: &str = "fleet-role-actuator-lease";
/// The shared Role in the report namespace: get and patch the report.
pub const REPORT_ROLE: &str = "fleet-role-actuator-report";

/// The field manager enroll applies the identity's objects with.
pub const ENROLL_FIELD_MANAGER: &str = "fleet-role-enroll";

/// What the user name of every host's tokens starts with: the rest is its
/// Node's name. The report's admission policy (`fleet-role manifests`)
/// matches on it and reads the Node back from what follows it.
pub fn username_prefix(names: &Names) -> String {
    format!(
        "system:serviceaccount:{}:{SERVICE_ACCOUNT_PREFIX}",
        names.report_namespace
    )
}

/// Why a Node cannot be given an identity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The ServiceAccount's name would be longer than Kubernetes allows.
    #[error(
        "node name {node} is too long for an identity: `{SERVICE_ACCOUNT_PREFIX}{node}` would be {len} characters, at most 253"
    )]
    TooLong {
        /// The Node.
        node: String,
        /// The length the name would have.
        len: usize,
    },
}

/// A host's identity: its Node, and the names of what is made for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    node: NodeName,
    name: String,
}

impl Identity {
    /// The identity of `node`. A Node name is a DNS subdomain, so the prefix
    /// and it are one too, as long as the whole stays within 253 characters.
    pub fn of(node: &NodeName) -> Result<Self, IdentityError> {
        let name = format!("{SERVICE_ACCOUNT_PREFIX}{}", node.as_str());
        if name.len() > 253 {
            return Err(IdentityError::TooLong {
                node: node.as_str().to_string(),
                len: name.len(),
            });
        }
        Ok(Self {
            node: node.clone(),
            name,
        })
    }

    /// The Node this identity is for.
    pub fn node(&self) -> &NodeName {
        &self.node
    }

    /// The name of the ServiceAccount, and of each of its bindings.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The user name the API server gives this ServiceAccount's tokens.
    pub fn username(&self, names: &Names) -> String {
        format!("{}{}", username_prefix(names), self.node.as_str())
    }

    /// The objects that make the identity, in the order they are created:
    /// the ServiceAccount, then its three bindings to the shared roles.
    /// Removing them (in any order) revokes the host: deleting the
    /// ServiceAccount invalidates every token issued for it.
    pub fn objects(&self, names: &Names) -> Vec<Value> {
        let ns = names.report_namespace.as_str();
        let meta = |namespace: Option<&str>| {
            let mut m = json!({
                "name": self.name,
                "labels": {
                    "app.kubernetes.io/name": "fleet-role-actuator",
                    "app.kubernetes.io/managed-by": "fleet-role",
                },
                // A label value holds at most 63 characters; a Node name may
                // hold 253, so the Node is named in an annotation.
                "annotations": { format!("{}/node", names.prefix): self.node.as_str() },
            });
            if let Some(n) = namespace {
                m["namespace"] = json!(n);
            }
            m
        };
        let subjects = json!([{ "kind": "ServiceAccount", "name": self.name, "namespace": ns }]);
        let binding = |kind: &str, namespace: Option<&str>, role_kind: &str, role: &str| {
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": kind,
                "metadata": meta(namespace),
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role },
                "subjects": subjects,
            })
        };
        vec![
            json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(Some(ns)) }),
            binding(
                "ClusterRoleBinding",
                None,
                "ClusterRole",
                NODES_CLUSTER_ROLE,
            ),
            binding("RoleBinding", Some(LEASE_NAMESPACE), "Role", LEASE_ROLE),
            binding("RoleBinding", Some(ns), "Role", REPORT_ROLE),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(n: &str) -> NodeName {
        NodeName::parse(n).unwrap()
    }

    #[test]
    fn an_identity_is_named_for_its_node_and_the_policy_reads_the_node_back() {
        let id = Identity::of(&node("runner-3")).unwrap();
        assert_eq!(id.name(), "fleet-role-actuator-runner-3");
        let user = id.username(&Names::default());
        assert_eq!(
            user,
            "system:serviceaccount:platform:fleet-role-actuator-runner-3"
        );
        // deploy/rbac/actuator.yaml's policy takes the key as the user name
        // after this many characters.
        let prefix = format!("system:serviceaccount:platform:{SERVICE_ACCOUNT_PREFIX}");
        assert_eq!(prefix.len(), 51);
        assert_eq!(&user[51..], "runner-3");
    }

    #[test]
    fn a_node_name_too_long_for_a_service_account_is_refused() {
        let long = format!(
            "{}.{}.{}.{}",
            "a".repeat(60),
            "b".repeat(60),
            "c".repeat(60),
            "d".repeat(60)
        );
        assert!(matches!(
            Identity::of(&node(&long)),
            Err(IdentityError::TooLong { .. })
        ));
    }

    #[test]
    fn the_identity_binds_its_service_account_to_the_three_shared_roles_only() {
        let id = Identity::of(&node("runner-3")).unwrap();
        let objects = id.objects(&Names::default());
        let kinds: Vec<(&str, Option<&str>, Option<&str>)> = objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["namespace"].as_str(),
                    o["roleRef"]["name"].as_str(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("ServiceAccount", Some("platform"), None),
                ("ClusterRoleBinding", None, Some(NODES_CLUSTER_ROLE)),
                ("RoleBinding", Some("kube-system"), Some(LEASE_ROLE)),
                ("RoleBinding", Some("platform"), Some(REPORT_ROLE)),
            ]
        );
        for o in &objects[1..] {
            assert_eq!(
                o["subjects"],
                json!([{"kind": "ServiceAccount", "name": "fleet-role-actuator-runner-3", "namespace": "platform"}])
            );
        }
    }
}
