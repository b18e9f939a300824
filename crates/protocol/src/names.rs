//! The names of every object and key the protocol touches.

/// The default prefix of fleet-role's labels and annotations.
pub const DEFAULT_PREFIX: &str = "github-runner.exadev.com";
/// The default name of the regrade Lease in `kube-system`.
pub const DEFAULT_LEASE_NAME: &str = "fleet-regrade";
/// The namespace of the regrade Lease: k3s's own, where operators look for it.
pub const LEASE_NAMESPACE: &str = "kube-system";
/// The default namespace of the report ConfigMap.
pub const DEFAULT_REPORT_NAMESPACE: &str = "platform";
/// The name of the report ConfigMap (one data key per Node).
pub const REPORT_CONFIGMAP: &str = "fleet-role-actuators";
/// The default holder identity the controller writes into the Lease.
pub const DEFAULT_CONTROLLER_IDENTITY: &str = "fleet-role";

/// k3s's label on a Node whose host runs an etcd member.
pub const K3S_ETCD_ROLE_LABEL: &str = "node-role.kubernetes.io/etcd";
/// k3s's control-plane role label.
pub const K3S_CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";
/// k3s's legacy master role label.
pub const K3S_MASTER_LABEL: &str = "node-role.kubernetes.io/master";
/// k3s's annotation naming a Node's etcd member.
pub const K3S_ETCD_NODE_NAME: &str = "etcd.k3s.cattle.io/node-name";
/// k3s's annotation giving a Node's etcd advertise address.
pub const K3S_ETCD_NODE_ADDRESS: &str = "etcd.k3s.cattle.io/node-address";
/// k3s's member-removal request annotation (`"true"`).
pub const K3S_ETCD_REMOVE: &str = "etcd.k3s.cattle.io/remove";
/// Set by k3s once the member is removed.
pub const K3S_ETCD_REMOVED_NODE_NAME: &str = "etcd.k3s.cattle.io/removed-node-name";
/// The Node condition k3s sets to `True` once the host's member is a voter.
pub const K3S_ETCD_IS_VOTER: &str = "EtcdIsVoter";

/// The label that makes a host eligible to vote (`"true"`), set by a
/// cluster admin.
///
/// Why this domain: under the NodeRestriction admission plugin a kubelet may
/// set any label outside `kubernetes.io`/`k8s.io` on its own Node, so a
/// compromised agent (a CI runner) could label itself eligible under
/// fleet-role's own prefix and become `run`'s first standby. Labels under
/// `node-restriction.kubernetes.io/` are the ones Kubernetes reserves for
/// exactly this: no kubelet may add, change or remove them. It carries no
/// configurable prefix, since the domain is what protects it.
pub const ELIGIBLE_LABEL: &str = "node-restriction.kubernetes.io/fleet-role-voter-eligible";

/// The configurable names of the protocol.
///
/// Every side must agree on them: the controller writes with them, the
/// actuator reads with them, and the RBAC manifests grant exactly them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The prefix of fleet-role's own labels and annotations.
    pub prefix: String,
    /// The regrade Lease's name in [`LEASE_NAMESPACE`].
    pub lease_name: String,
    /// The namespace of the report ConfigMap.
    pub report_namespace: String,
    /// The identity the controller holds the Lease with.
    pub controller_identity: String,
}

impl Default for Names {
    fn default() -> Self {
        Self {
            prefix: DEFAULT_PREFIX.to_string(),
            lease_name: DEFAULT_LEASE_NAME.to_string(),
            report_namespace: DEFAULT_REPORT_NAMESPACE.to_string(),
            controller_identity: DEFAULT_CONTROLLER_IDENTITY.to_string(),
        }
    }
}

impl Names {
    pub(crate) fn key(&self, name: &str) -> String {
        format!("{}/{}", self.prefix, name)
    }
    /// Label: the role the host should end as.
    pub fn desired_role(&self) -> String {
        self.key("desired-role")
    }
    /// Label: the host may vote (the controller's eligibility):
    /// [`ELIGIBLE_LABEL`], whatever the prefix.
    pub fn eligible(&self) -> String {
        ELIGIBLE_LABEL.to_string()
    }
    /// Label: the old `<prefix>/voter-eligible`, which a host's own kubelet
    /// can set. It makes no host eligible; it is read only so that `status`
    /// can name the Nodes still to relabel with [`Names::eligible`].
    pub fn legacy_eligible(&self) -> String {
        self.key("voter-eligible")
    }
    /// Annotation: the swap the step belongs to.
    pub fn role_swap(&self) -> String {
        self.key("role-swap")
    }
    /// Annotation: the step asked for.
    pub fn role_step(&self) -> String {
        self.key("role-step")
    }
    /// Annotation: the Node to join on a promotion.
    pub fn role_join_node(&self) -> String {
        self.key("role-join-node")
    }
    /// Annotation: the protocol version the step or snapshot request is
    /// asked in ([`crate::version`]; none reads as version 1).
    pub fn protocol(&self) -> String {
        self.key("protocol")
    }
    /// Annotation: take a snapshot named for this swap.
    pub fn snapshot_request(&self) -> String {
        self.key("snapshot-request")
    }
    /// Lease annotation: the swap the Lease is held for.
    pub fn lease_swap(&self) -> String {
        self.key("role-swap")
    }
    /// The server-side-apply field manager of one host's report key.
    pub fn report_field_manager(&self, node: &str) -> String {
        format!("fleet-role-actuator-{node}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_carries_the_configured_prefix() {
        let names = Names {
            prefix: "example.org".into(),
            ..Names::default()
        };
        assert_eq!(names.desired_role(), "example.org/desired-role");
        assert_eq!(names.role_swap(), "example.org/role-swap");
        assert_eq!(names.role_step(), "example.org/role-step");
        assert_eq!(names.role_join_node(), "example.org/role-join-node");
        assert_eq!(names.snapshot_request(), "example.org/snapshot-request");
        assert_eq!(names.protocol(), "example.org/protocol");
        assert_eq!(names.lease_swap(), "example.org/role-swap");
        assert_eq!(names.legacy_eligible(), "example.org/voter-eligible");
        assert_eq!(names.report_field_manager("n1"), "fleet-role-actuator-n1");
    }

    #[test]
    fn eligibility_is_a_label_no_kubelet_may_set_whatever_the_prefix() {
        let names = Names {
            prefix: "example.org".into(),
            ..Names::default()
        };
        assert_eq!(
            names.eligible(),
            "node-restriction.kubernetes.io/fleet-role-voter-eligible"
        );
        assert_eq!(names.eligible(), Names::default().eligible());
    }
}
