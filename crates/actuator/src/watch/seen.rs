//! What the watches have shown of the regrade Lease, and whether the
//! Node's InternalIP was checked against this host's addresses.

use protocol::LeaseFacts;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AddressCheck {
    /// Not yet: the Node has not been seen with an InternalIP.
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
