//! The controller's own names: the regrade Lease's annotations it writes.

use crate::names::Names;

// === Names of the controller's own Lease annotations ===

impl Names {
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
    /// for ([`crate::version`]; none reads as version 1).
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
    /// (a list of [`super::Ending`] as JSON, the last
    /// [`super::ENDINGS_KEPT`]).
    pub fn lease_endings(&self) -> String {
        self.key("swap-endings")
    }
}

#[cfg(test)]
mod tests {
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
