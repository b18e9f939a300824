//! Whether the regrade Lease is still this process's to write under: one
//! pure predicate over the Lease as read, which the controller's writer asks right
//! before every irreversible write (the Lease is no fence, so it is asked
//! as late as possible).
//!
//! The pure core asks the Lease a different question for its choice of
//! the next action (is there a swap of this instance to drive, or one to
//! take up: `swap::next_action`), and the actuator asks it for a host's
//! step (`hostdecide::decide::lease_holds`, with the host named for the
//! step besides); this is the one answer to "may this write go now".

use protocol::view::LeaseFacts;

/// Who this process claims to be on the Lease.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    /// The controller's holder identity.
    pub identity: &'a str,
    /// This process's instance id.
    pub instance: &'a str,
    /// The swap this process took the Lease for (none before it took it).
    pub swap: Option<&'a str>,
}

/// Where the Lease stands for a write of the claimant's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Its own, for its swap, and valid past the skew margin: the write
    /// may go.
    Ours,
    /// Its own, but lapsing within the skew margin: renew before writing,
    /// as another process could take it while the write is in flight.
    Lapsing,
    /// Another holder's, another instance's, or for another swap: nothing
    /// more may be written.
    NotOurs,
}

/// Where `lease` stands for a write by `claim` at the unix second `now`,
/// the Lease counted as lapsed `skew_margin` seconds early (the clocks of
/// the writer and the API server may differ by that much).
pub fn standing(lease: &LeaseFacts, claim: Claim<'_>, now: i64, skew_margin: i64) -> Standing {
    let ours = lease.instance.as_deref() == Some(claim.instance)
        && lease.holder.as_deref() == Some(claim.identity)
        && lease.swap.as_deref() == claim.swap;
    if !ours {
        Standing::NotOurs
    } else if lease.valid_at(now, skew_margin) {
        Standing::Ours
    } else {
        Standing::Lapsing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;

    fn held() -> LeaseFacts {
        LeaseFacts {
            holder: Some("fleet-role".into()),
            instance: Some("me".into()),
            swap: Some("swap-1".into()),
            renew_time: Some(NOW - 10),
            duration_secs: Some(60),
            ..LeaseFacts::default()
        }
    }

    fn me() -> Claim<'static> {
        Claim {
            identity: "fleet-role",
            instance: "me",
            swap: Some("swap-1"),
        }
    }

    #[test]
    fn a_write_goes_under_a_lease_this_process_holds_for_its_swap() {
        assert_eq!(standing(&held(), me(), NOW, 5), Standing::Ours);
    }

    #[test]
    fn a_lease_of_another_holder_instance_or_swap_is_not_ours() {
        for lease in [
            LeaseFacts {
                holder: Some("someone".into()),
                ..held()
            },
            LeaseFacts {
                instance: Some("other".into()),
                ..held()
            },
            LeaseFacts {
                swap: Some("swap-2".into()),
                ..held()
            },
            LeaseFacts {
                swap: None,
                ..held()
            },
        ] {
            assert_eq!(
                standing(&lease, me(), NOW, 5),
                Standing::NotOurs,
                "{lease:?}"
            );
        }
    }

    #[test]
    fn our_lease_lapsing_within_the_skew_margin_is_renewed_before_a_write() {
        // Lapses at NOW + 50: within a 50 s margin, not within 49 s.
        assert_eq!(standing(&held(), me(), NOW, 50), Standing::Lapsing);
        assert_eq!(standing(&held(), me(), NOW, 49), Standing::Ours);
        let unrenewed = LeaseFacts {
            renew_time: None,
            ..held()
        };
        assert_eq!(standing(&unrenewed, me(), NOW, 5), Standing::Lapsing);
    }
}
