//! What the watches have shown: the own Node (and the view of it the last
//! decision was made on), the regrade Lease, and whether the Node's
//! InternalIP was checked against this host's addresses.

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use protocol::{LeaseFacts, NodeFacts};

/// What the watches have shown, kept across sessions (the Node) or for one
/// (the Lease, the view decided on).
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// The own Node as its watch last showed it (kept across sessions).
    pub(super) node: Option<Node>,
    /// The view of the Node the last decision was made on, this session
    /// (only a change of it is worth a decision).
    last_view: Option<NodeFacts>,
    /// The regrade Lease as this session's watch (or a decision's read)
    /// has shown it.
    pub(super) lease: LeaseSeen,
    address_check: AddressCheck,
}

impl Seen {
    /// A new session decides once the Lease's watch has listed, whatever
    /// it shows, and on the Node as its watch shows it.
    pub(super) fn new_session(&mut self) {
        self.last_view = None;
        self.lease = LeaseSeen::NotListed;
    }

    /// Whether a decision can be made: the Node seen, the Lease listed.
    pub(super) fn decidable(&self) -> bool {
        self.node.is_some() && self.lease != LeaseSeen::NotListed
    }

    /// Refuses a Node whose InternalIP is not an address of this host (the
    /// first time the Node is seen with one): its steps are another
    /// machine's. `name` is this host's Node.
    pub(super) fn check_address(
        &mut self,
        node: Option<&Node>,
        name: &str,
        addresses: &host::addresses::LocalAddresses,
    ) -> Result<(), String> {
        let ip = node.and_then(kubeview::internal_ip);
        if let (AddressCheck::Pending, Some(ip)) = (self.address_check, ip) {
            host::identity::check_internal_ip(name, &ip, addresses).map_err(|e| e.to_string())?;
            self.address_check = AddressCheck::Passed;
        }
        Ok(())
    }

    /// Keeps the Node as its watch shows it; says whether its view changed.
    /// A kubelet heartbeat changes the Node every few seconds without
    /// changing anything fleet-role reads: only a change of the view is
    /// worth a decision.
    pub(super) fn node_seen(&mut self, names: &protocol::Names, node: Option<Node>) -> bool {
        let view = node.as_ref().map(|n| kubeview::node_facts(names, n));
        let changed = view != self.last_view;
        self.node = node;
        self.last_view = view;
        changed
    }

    /// Keeps the Lease as shown (`None`: absent); says whether it changed.
    pub(super) fn lease_seen(&mut self, names: &protocol::Names, lease: Option<Lease>) -> bool {
        let facts = lease.map(|l| kubeview::lease_facts(names, &l));
        let seen = LeaseSeen::Listed(facts);
        let changed = seen != self.lease;
        self.lease = seen;
        changed
    }
}

/// The regrade Lease as this session's watch has shown it.
#[derive(Debug, Default, Clone, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per watcher, held in place: boxing it would buy nothing"
)]
pub(super) enum LeaseSeen {
    /// Not listed yet this session: no decision is made, as an absent
    /// Lease and an unknown one are not the same.
    #[default]
    NotListed,
    /// Listed (`None`: absent).
    Listed(Option<LeaseFacts>),
}

impl LeaseSeen {
    /// The Lease as last shown (none: absent, or not listed yet).
    pub(super) fn facts(&self) -> Option<&LeaseFacts> {
        match self {
            LeaseSeen::Listed(facts) => facts.as_ref(),
            LeaseSeen::NotListed => None,
        }
    }
}

/// Whether the Node's InternalIP was checked against this host's addresses.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum AddressCheck {
    /// Not yet: the Node has not been seen with an InternalIP.
    #[default]
    Pending,
    /// The InternalIP is one of this host's.
    Passed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_not_listed_yet_shows_no_facts() {
        assert_eq!(LeaseSeen::NotListed.facts(), None);
        assert_eq!(LeaseSeen::Listed(None).facts(), None);
    }
}
