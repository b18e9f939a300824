//! The controller's own names: the regrade Lease's annotations it writes,
//! and the k3s labels and annotations it removes from a host that finished
//! as an agent.

use crate::names::{
    K3S_CONTROL_PLANE_LABEL, K3S_ETCD_NODE_ADDRESS, K3S_ETCD_NODE_NAME, K3S_ETCD_REMOVE,
    K3S_ETCD_REMOVED_NODE_NAME, K3S_ETCD_ROLE_LABEL, K3S_MASTER_LABEL, Names,
};

// === Names of the controller's own Lease annotations ===

impl Names {
    fn controller_key(&self, name: &str) -> String {
        format!("{}/{}", self.prefix, name)
    }
    /// Lease annotation: the outgoing Node of the swap the Lease is held for.
    pub fn lease_swap_out(&self) -> String {
        self.controller_key("swap-out")
    }
    /// Lease annotation: the incoming Node of the swap.
    pub fn lease_swap_in(&self) -> String {
        self.controller_key("swap-in")
    }
    /// Lease annotation: the controller process holding the Lease (the holder
    /// identity is shared, since the actuators check it; this tells two
    /// controller processes apart).
    pub fn lease_instance(&self) -> String {
        self.controller_key("swap-instance")
    }
    /// Lease annotation: the step the swap is in ([`SwapStep`]).
    pub fn lease_step(&self) -> String {
        self.controller_key("swap-step")
    }
    /// Lease annotation: when the step began (unix seconds); its timeout
    /// runs from here, across controller restarts.
    pub fn lease_step_since(&self) -> String {
        self.controller_key("swap-step-since")
    }
    /// Lease annotation: the swap is winding down to the cluster as it was
    /// ([`StopNote`] as JSON).
    pub fn lease_stopping(&self) -> String {
        self.controller_key("swap-stopping")
    }
    /// Lease annotation: the swap stopped part-way, and why; running it again
    /// resumes it.
    pub fn lease_stopped(&self) -> String {
        self.controller_key("swap-stopped")
    }
    /// Lease annotation: `"true"` while the controller is paused.
    pub fn lease_paused(&self) -> String {
        self.controller_key("paused")
    }
    /// Lease annotation: the last swap's outcome ([`LastSwap`] as JSON).
    pub fn lease_last_swap(&self) -> String {
        self.controller_key("last-swap")
    }
}

/// The k3s labels a server carries and an agent should not: removed once
/// the host runs as an agent.
pub const SERVER_LABELS: [&str; 3] = [
    K3S_CONTROL_PLANE_LABEL,
    K3S_MASTER_LABEL,
    K3S_ETCD_ROLE_LABEL,
];

/// k3s's etcd annotations, removed with the server labels.
pub const K3S_ETCD_ANNOTATIONS: [&str; 4] = [
    K3S_ETCD_NODE_NAME,
    K3S_ETCD_NODE_ADDRESS,
    K3S_ETCD_REMOVE,
    K3S_ETCD_REMOVED_NODE_NAME,
];
