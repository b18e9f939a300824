//! One identity per host: the ServiceAccount a host's actuator runs as,
//! the Role and RoleBinding that give it its own heartbeat Lease and report
//! ConfigMap by name, and those two objects, all in the hosts' namespace
//! ([`protocol::Names::hosts_namespace`]).
//!
//! `fleet-role enroll` creates these objects (or prints them), the lab and
//! the tests create them the same way, so the ServiceAccount's name, which
//! the hosts' admission policy reads back into a Node name, is made in one
//! place only. The roles every host shares (read Nodes, get the regrade
//! Lease) are bound once, to the group of the namespace's ServiceAccounts,
//! by `fleet-role manifests`: a binding per host would be weighed by RBAC
//! on every request in the cluster.

use protocol::{Names, NodeName, names::LEASE_NAMESPACE};
use serde_json::{Value, json};

/// Every actuator's ServiceAccount is this prefix and its Node's name. The
/// hosts' admission policy (`fleet-role manifests`) takes the rest of the
/// name as the one Node whose objects the ServiceAccount may write.
pub const SERVICE_ACCOUNT_PREFIX: &str = "fleet-role-actuator-";

/// The shared ClusterRole: read Nodes.
pub const NODES_CLUSTER_ROLE: &str = "fleet-role-actuator";
/// The shared Role in `kube-system`: get the regrade Lease.
pub const LEASE_ROLE: &str = "fleet-role-actuator-lease";
/// The Role in the shared report's namespace that earlier releases bound
/// each host to (get and patch the shared report ConfigMap); kept for one
/// release, for the hosts not enrolled again yet.
pub const REPORT_ROLE: &str = "fleet-role-actuator-report";
/// The name of the two bindings of the shared roles to every host's
/// ServiceAccount at once (the group of the hosts' namespace).
pub const SHARED_BINDING: &str = "fleet-role-actuators";

/// The field manager enroll applies the identity's objects with.
pub const ENROLL_FIELD_MANAGER: &str = "fleet-role-enroll";

/// What the user name of every host's tokens starts with: the rest is its
/// Node's name. The hosts' admission policy (`fleet-role manifests`)
/// matches on it and reads the Node back from what follows it.
pub fn username_prefix(names: &Names) -> String {
    format!(
        "{}{SERVICE_ACCOUNT_PREFIX}",
        service_account_user_prefix(&names.hosts_namespace)
    )
}

/// What the user name of a token of earlier releases' host identities
/// (ServiceAccounts in the shared report's namespace) starts with; the
/// shared report's admission policy still judges them for one release.
pub fn legacy_username_prefix(names: &Names) -> String {
    format!(
        "{}{SERVICE_ACCOUNT_PREFIX}",
        service_account_user_prefix(&names.report_namespace)
    )
}

/// `system:serviceaccount:<namespace>:`, what the API server names every
/// ServiceAccount of `namespace` by.
fn service_account_user_prefix(namespace: &str) -> String {
    format!("system:serviceaccount:{namespace}:")
}

/// The group every ServiceAccount of the hosts' namespace is in, which the
/// shared roles are bound to.
pub fn hosts_group(names: &Names) -> String {
    format!("system:serviceaccounts:{}", names.hosts_namespace)
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

    /// The name of the ServiceAccount, and of its Role and RoleBinding.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The user name the API server gives this ServiceAccount's tokens.
    pub fn username(&self, names: &Names) -> String {
        format!("{}{}", username_prefix(names), self.node.as_str())
    }

    /// The metadata of an object enroll makes for this host: `name` in
    /// `namespace` (none: a cluster object), labelled as fleet-role's, the
    /// Node named in an annotation (a label value holds at most 63
    /// characters; a Node name may hold 253).
    fn meta(&self, names: &Names, name: &str, namespace: Option<&str>) -> Value {
        let mut m = json!({
            "name": name,
            "labels": {
                "app.kubernetes.io/name": "fleet-role-actuator",
                "app.kubernetes.io/managed-by": "fleet-role",
            },
            "annotations": { format!("{}/node", names.prefix): self.node.as_str() },
        });
        if let Some(n) = namespace {
            m["namespace"] = json!(n);
        }
        m
    }

    /// The objects that make the identity, in the order they are created:
    /// the ServiceAccount, its Role (get and update its own heartbeat Lease
    /// and report ConfigMap, by name: no create, list, watch or delete, no
    /// other host's object) and RoleBinding, then the Lease and the
    /// ConfigMap themselves, both named for the Node and empty (the host
    /// may update them, never create them). Removing them (in any order)
    /// revokes the host: deleting the ServiceAccount invalidates every
    /// token issued for it.
    pub fn objects(&self, names: &Names) -> Vec<Value> {
        let ns = names.hosts_namespace.as_str();
        let node = self.node.as_str();
        let meta = |name: &str| self.meta(names, name, Some(ns));
        let own = |resource: &str, group: &str| {
            json!({
                "apiGroups": [group],
                "resources": [resource],
                "resourceNames": [node],
                "verbs": ["get", "update"],
            })
        };
        vec![
            json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(&self.name) }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": meta(&self.name),
                "rules": [own("leases", "coordination.k8s.io"), own("configmaps", "")],
            }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": meta(&self.name),
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": self.name },
                "subjects": [{ "kind": "ServiceAccount", "name": self.name, "namespace": ns }],
            }),
            // The heartbeat: its holder and renew time are the host's to
            // write; the policy keeps everything else as enroll made it.
            json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": { "name": node, "namespace": ns },
            }),
            // The report: one key, `report`, written only on a change.
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": { "name": node, "namespace": ns },
            }),
        ]
    }

    /// The objects earlier releases' `enroll` made for this host, in the
    /// order they were created: its ServiceAccount in the shared report's
    /// namespace and its three bindings (the Nodes' ClusterRole, the
    /// regrade Lease's Role, the shared report's Role). `unenroll` deletes
    /// them too, so a host enrolled before the per-host objects is revoked
    /// whole; the tests and the lab make them for a host that still runs an
    /// earlier release.
    pub fn legacy_objects(&self, names: &Names) -> Vec<Value> {
        let ns = names.report_namespace.as_str();
        let meta = |namespace: Option<&str>| self.meta(names, &self.name, namespace);
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
            "system:serviceaccount:fleet-role-hosts:fleet-role-actuator-runner-3"
        );
        let prefix = username_prefix(&Names::default());
        assert_eq!(&user[prefix.len()..], "runner-3");
        assert_eq!(
            legacy_username_prefix(&Names::default()),
            "system:serviceaccount:platform:fleet-role-actuator-"
        );
        assert_eq!(
            hosts_group(&Names::default()),
            "system:serviceaccounts:fleet-role-hosts"
        );
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
    fn the_identity_gets_and_updates_its_own_lease_and_report_by_name_and_nothing_else() {
        let id = Identity::of(&node("runner-3")).unwrap();
        let objects = id.objects(&Names::default());
        let kinds: Vec<(&str, &str, &str)> = objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["namespace"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        let (sa, ns) = ("fleet-role-actuator-runner-3", "fleet-role-hosts");
        assert_eq!(
            kinds,
            vec![
                ("ServiceAccount", ns, sa),
                ("Role", ns, sa),
                ("RoleBinding", ns, sa),
                ("Lease", ns, "runner-3"),
                ("ConfigMap", ns, "runner-3"),
            ]
        );
        assert_eq!(
            objects[1]["rules"],
            json!([
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["runner-3"], "verbs": ["get", "update"]},
                {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["runner-3"], "verbs": ["get", "update"]},
            ])
        );
        assert_eq!(
            objects[2]["subjects"],
            json!([{"kind": "ServiceAccount", "name": sa, "namespace": ns}])
        );
        // Neither object carries a spec or data enroll would own.
        assert!(objects[3].get("spec").is_none() && objects[4].get("data").is_none());
    }

    #[test]
    fn the_identity_of_earlier_releases_is_a_service_account_of_the_shared_namespace_and_three_bindings()
     {
        let id = Identity::of(&node("runner-3")).unwrap();
        let objects = id.legacy_objects(&Names::default());
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
    }
}
