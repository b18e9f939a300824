//! The reasons of the Events the controller records on the Nodes of a swap
//! (`events.k8s.io/v1`, see [`crate::act`]): one closed list, so that what
//! an alert rule or `kubectl get events --field-selector reason=...` can
//! match is written once, and docs/reference.md is held to it by a test.

/// Declares [`EventReason`] and [`EventReason::ALL`] from one list of
/// names, so that no reason can be recorded that `ALL` leaves out.
macro_rules! event_reasons {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// Why an Event was recorded: its `reason` (and `action`), the
        /// variant's name as it is.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EventReason {
            $($(#[doc = $doc])* $name,)*
        }

        impl EventReason {
            /// Every reason, in the order of a swap.
            pub const ALL: &[EventReason] = &[$(EventReason::$name,)*];

            /// The reason as the Event carries it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EventReason::$name => stringify!($name),)*
                }
            }
        }
    };
}

event_reasons! {
    /// The regrade Lease was taken for a swap (on both of its Nodes).
    SwapStarted,
    /// A voter was asked for the swap's snapshot.
    SnapshotRequested,
    /// The incoming host was asked to promote.
    PromoteRequested,
    /// The incoming host was asked to roll back (a warning).
    RollbackRequested,
    /// The outgoing Node was cordoned.
    Cordoned,
    /// The drain evicted pods of the outgoing Node.
    PodsEvicted,
    /// The outgoing host was asked to step down.
    StepDownRequested,
    /// k3s was asked to remove a member.
    MemberRemovalRequested,
    /// k3s's server labels and etcd annotations were removed.
    ServerLabelsRemoved,
    /// The swap's annotations were cleared from a Node.
    SwapAnnotationsCleared,
    /// The outgoing Node was uncordoned.
    Uncordoned,
    /// The swap began to wind down (a warning after a failure).
    SwapWindingDown,
    /// The swap was wound down to the cluster as it was (a warning).
    SwapWoundDown,
    /// The swap stopped part-way (a warning).
    SwapStopped,
    /// The swap is done (a warning when it carries one).
    SwapDone,
}

impl std::fmt::Display for EventReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_its_own_upper_camel_case_word() {
        let names: std::collections::HashSet<_> =
            EventReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), EventReason::ALL.len());
        for n in names {
            assert!(
                n.starts_with(|c: char| c.is_ascii_uppercase())
                    && n.chars().all(|c| c.is_ascii_alphanumeric()),
                "{n}"
            );
        }
        assert_eq!(EventReason::PodsEvicted.to_string(), "PodsEvicted");
    }
}
