//! The names of every object and key the protocol touches.

/// The default prefix of fleet-role's labels and annotations.
pub const DEFAULT_PREFIX: &str = "github-runner.exadev.com";
/// The default name of the regrade Lease in `kube-system`.
pub const DEFAULT_LEASE_NAME: &str = "fleet-regrade";
/// The namespace of the regrade Lease: k3s's own, where operators look for it.
pub const LEASE_NAMESPACE: &str = "kube-system";
/// The namespace of the kubelets' node Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The namespace of the Events about Nodes (as the kubelet's).
pub const EVENT_NAMESPACE: &str = "default";
/// The default of the controller's setting `admin_group`: the group whose members may
/// change what only the controller and the hosts write (the regrade Lease,
/// the marks on the Nodes, the hosts' reports), for recovery by hand.
/// k3s's admin kubeconfig (`/etc/rancher/k3s/k3s.yaml`) is in it.
pub const ADMIN_GROUP: &str = "system:masters";
/// The default namespace of the shared report ConfigMap of protocol 1's
/// first transport (kept for one release: see [`REPORT_CONFIGMAP`]).
pub const DEFAULT_REPORT_NAMESPACE: &str = "platform";
/// The name of the shared report ConfigMap (one data key per Node) that
/// actuators before the per-host objects write. The controller still reads
/// it for one release, so a fleet upgrades host by host; no actuator of
/// this release writes it.
pub const REPORT_CONFIGMAP: &str = "fleet-role-actuators";
/// The default namespace of the per-host objects: each host's
/// ServiceAccount, its heartbeat Lease, its report ConfigMap and the Role
/// and RoleBinding that give it those two by name. It holds nothing else,
/// so the roles every host shares are bound once, to its ServiceAccounts'
/// group.
pub const DEFAULT_HOSTS_NAMESPACE: &str = "fleet-role-hosts";
/// The data key of a host's report ConfigMap (named for its Node).
pub const HOST_REPORT_KEY: &str = "report";
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

/// kured's Node annotation while it drains and reboots the Node (written
/// with `--annotate-nodes`, removed once the Node is back; its value is the
/// time it began, RFC 3339). Source: kubereboot/kured `cmd/kured/main.go`
/// (`KuredRebootInProgressAnnotation`). kured's lock itself
/// (`weave.works/kured-node-lock`, `pkg/daemonsetlock/daemonsetlock.go`)
/// lives on kured's DaemonSet, which fleet-role does not read; kured
/// cordons the Node before it reboots it, and the cordon counts too.
pub const KURED_REBOOT_IN_PROGRESS: &str = "weave.works/kured-reboot-in-progress";

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
    /// The namespace of the shared report ConfigMap of earlier releases
    /// (read, never written, for one release).
    pub report_namespace: String,
    /// The namespace of the per-host objects ([`DEFAULT_HOSTS_NAMESPACE`]).
    pub hosts_namespace: String,
    /// The identity the controller holds the Lease with.
    pub controller_identity: String,
}

impl Default for Names {
    fn default() -> Self {
        Self {
            prefix: DEFAULT_PREFIX.to_string(),
            lease_name: DEFAULT_LEASE_NAME.to_string(),
            report_namespace: DEFAULT_REPORT_NAMESPACE.to_string(),
            hosts_namespace: DEFAULT_HOSTS_NAMESPACE.to_string(),
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
    /// Annotation: an operator's planned maintenance of the Node, until the
    /// time it gives (RFC 3339 or unix seconds); see
    /// [`crate::controller::grace_for`].
    pub fn maintenance(&self) -> String {
        self.key("maintenance")
    }
    /// Lease annotation: the swap the Lease is held for.
    pub fn lease_swap(&self) -> String {
        self.key("role-swap")
    }
    /// Annotation of a host's heartbeat Lease: why the API refused the
    /// host's last report (one line, at most [`MAX_REFUSAL_CHARS`]), set
    /// while it stands and removed once a report is accepted again.
    pub fn report_refused(&self) -> String {
        self.key("report-refused")
    }
    /// The server-side-apply field manager of one host's report key:
    /// `fleet-role-actuator-<node>`, or, for a Node name too long for it (the
    /// API refuses a manager over [`FIELD_MANAGER_MAX`] characters, a Node
    /// name may have 253), the name cut short and a hash of the whole name,
    /// so that it still differs from every other host's. The hash follows a
    /// `_`, which no Node name has, so a cut name is never a whole one. Only
    /// the host's own applies use it: neither the controller nor the
    /// admission policy reads a manager.
    pub fn report_field_manager(&self, node: &str) -> String {
        const PREFIX: &str = "fleet-role-actuator-";
        let whole = format!("{PREFIX}{node}");
        if whole.len() <= FIELD_MANAGER_MAX {
            return whole;
        }
        let hash = format!("_{:016x}", fnv1a64(node.as_bytes()));
        let mut keep = FIELD_MANAGER_MAX - PREFIX.len() - hash.len();
        while !node.is_char_boundary(keep) {
            keep -= 1;
        }
        format!("{PREFIX}{}{hash}", &node[..keep])
    }

    // === The controller's own Lease annotations ===

    /// Lease annotation: the outgoing Node of the swap the Lease is held for.
    pub fn lease_swap_out(&self) -> String {
        self.key("swap-out")
    }
    /// Lease annotation: the incoming Node of the swap.
    pub fn lease_swap_in(&self) -> String {
        self.key("swap-in")
    }
    /// Lease annotation: the voter the swap asked for its snapshot. The
    /// snapshot request on a Node is any `patch nodes` holder's to write;
    /// this one is the controller's alone, so a voter takes a snapshot only
    /// when the Lease names it.
    pub fn lease_swap_snapshot(&self) -> String {
        self.key("swap-snapshot")
    }
    /// Lease annotation: the address of the voter a promotion joins, as
    /// etcd's own view lists its member (its peer URL's host), written with
    /// the promote ask. The join Node's address is any `patch nodes`
    /// holder's (or its kubelet's) to point elsewhere, and the server token
    /// goes to it: a host refuses a join address that is not this one.
    pub fn lease_swap_join(&self) -> String {
        self.key("swap-join-address")
    }
    /// Lease annotation: the host step the controller asked for last, written
    /// in the same action as the Node's marks, after the gates passed. A
    /// host takes a new step only while it is the one asked.
    pub fn lease_swap_asked(&self) -> String {
        self.key("swap-asked")
    }
    /// Lease annotation: the controller process holding the Lease (the holder
    /// identity is shared, since the actuators check it; this tells two
    /// controller processes apart).
    pub fn lease_instance(&self) -> String {
        self.key("swap-instance")
    }
    /// Lease annotation: the step the swap is in ([`SwapStep`]).
    pub fn lease_step(&self) -> String {
        self.key("swap-step")
    }
    /// Lease annotation: when the step began (unix seconds); its timeout
    /// runs from here, across controller restarts.
    pub fn lease_step_since(&self) -> String {
        self.key("swap-step-since")
    }
    /// Lease annotation: the swap is winding down to the cluster as it was
    /// ([`StopNote`] as JSON).
    pub fn lease_stopping(&self) -> String {
        self.key("swap-stopping")
    }
    /// Lease annotation: the swap stopped part-way, and why; running it again
    /// resumes it.
    pub fn lease_stopped(&self) -> String {
        self.key("swap-stopped")
    }
    /// Lease annotation: the protocol version of the swap the Lease is held
    /// for ([`protocol::version`]; none reads as version 1).
    pub fn lease_protocol(&self) -> String {
        self.key("protocol")
    }
    /// Lease annotation: `"true"` while the controller is paused.
    pub fn lease_paused(&self) -> String {
        self.key("paused")
    }
    /// Lease annotation: the last swap's outcome ([`LastSwap`] as JSON).
    pub fn lease_last_swap(&self) -> String {
        self.key("last-swap")
    }
    /// Lease annotation: the latest swaps' endings, for `run`'s pacing
    /// (a list of `fleetdecide::SwapEnding` as JSON, the last
    /// [`super::ENDINGS_KEPT`]).
    pub fn lease_endings(&self) -> String {
        self.key("swap-endings")
    }
}

/// The longest refusal a host's heartbeat Lease carries
/// ([`Names::report_refused`]); the admission policy refuses a longer one.
pub const MAX_REFUSAL_CHARS: usize = 512;

/// The longest field manager the API takes (apimachinery's
/// `FieldManagerMaxLength`); a longer one gets 422 on every apply.
pub const FIELD_MANAGER_MAX: usize = 128;

/// FNV-1a, 64 bits: a stable hash (the same on every host and release, as
/// std's `DefaultHasher` is not promised to be), for names only.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
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
        assert_eq!(names.maintenance(), "example.org/maintenance");
        assert_eq!(names.lease_swap(), "example.org/role-swap");
        assert_eq!(names.legacy_eligible(), "example.org/voter-eligible");
        assert_eq!(names.report_refused(), "example.org/report-refused");
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

    #[test]
    fn a_field_manager_fits_the_apis_bound_and_differs_per_node_even_for_long_names() {
        let names = Names::default();
        // The longest name that fits is kept whole.
        let fits = "a".repeat(FIELD_MANAGER_MAX - "fleet-role-actuator-".len());
        assert_eq!(
            names.report_field_manager(&fits),
            format!("fleet-role-actuator-{fits}")
        );
        // A Node name of 253 characters, the most Kubernetes allows.
        let longest = format!("{}.example", "r".repeat(245));
        assert_eq!(longest.len(), 253);
        let m = names.report_field_manager(&longest);
        assert_eq!(m.len(), FIELD_MANAGER_MAX, "{m}");
        assert!(m.starts_with("fleet-role-actuator-rrr"), "{m}");
        assert_eq!(m, names.report_field_manager(&longest), "stable");
        // Two long names alike in their first 108 characters (all of them
        // the whole form could keep) still get two managers.
        let common = "x".repeat(108);
        let (a, b) = (format!("{common}-a"), format!("{common}-b"));
        let (ma, mb) = (
            names.report_field_manager(&a),
            names.report_field_manager(&b),
        );
        assert_ne!(ma, mb);
        assert!(ma.len() <= FIELD_MANAGER_MAX && mb.len() <= FIELD_MANAGER_MAX);
        // A cut name is never another host's whole one.
        assert!(ma.contains('_') && !names.report_field_manager(&fits).contains('_'));
        // The hash is FNV-1a's (its published test value), so every host and
        // release names a host's manager alike.
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}

#[cfg(test)]
mod lease_annotation_tests {
    use super::*;

    #[test]
    fn the_lease_annotations_are_the_documented_keys_under_the_prefix() {
        let n = Names::default();
        let p = &n.prefix;
        for (got, key) in [
            (n.lease_swap_out(), "swap-out"),
            (n.lease_swap_in(), "swap-in"),
            (n.lease_swap_snapshot(), "swap-snapshot"),
            (n.lease_swap_asked(), "swap-asked"),
            (n.lease_swap_join(), "swap-join-address"),
            (n.lease_instance(), "swap-instance"),
            (n.lease_step(), "swap-step"),
            (n.lease_step_since(), "swap-step-since"),
            (n.lease_stopping(), "swap-stopping"),
            (n.lease_stopped(), "swap-stopped"),
            (n.lease_paused(), "paused"),
            (n.lease_protocol(), "protocol"),
            (n.lease_last_swap(), "last-swap"),
            (n.lease_endings(), "swap-endings"),
        ] {
            assert_eq!(got, format!("{p}/{key}"));
        }
    }
}
