//! `fleet-role-actuator remove-learner`: whether a learner etcd lists may
//! be removed by hand, decided on etcd's own member list, the regrade
//! Lease and the health of each voting member.
//!
//! A learner holds no vote, so its removal never touches quorum; what can
//! go wrong is removing something else:
//!
//! - a voter. k3s's etcd leader promotes a caught-up learner every 15 s
//!   (`manageLearners` in k3s's `pkg/etcd/etcd.go`), and etcd has no
//!   conditional removal: the learner check and the removal are two
//!   requests, and a promotion can fall between them. So the voters other
//!   than the learner must be a healthy quorum among themselves: if the
//!   member removed turns out to have just been promoted, the cluster is
//!   back at the voters it had, which keep quorum.
//! - the learner of a change under way: the controller is promoting it.
//!   While a change holds the regrade Lease, or one recorded on a lapsed
//!   Lease names the learner's host as its incoming one, the removal is
//!   refused and `fleet-role abort` named (it removes that learner itself).
//!
//! An operator names the member as `etcd member list` prints it: its id
//! (hex) or its name (k3s's `<node>-<8 hex>`; a learner added but never
//! started has none, and is named by its id).

use protocol::{
    LeaseFacts,
    etcd::{Member, MemberId, keeps_quorum},
    text::one_line,
};

/// What the command was asked to remove, as the operator typed it.
pub fn member_named<'a>(members: &'a [Member], asked: &str) -> Option<&'a Member> {
    // etcd prints 16 hex digits; `from_str_radix` alone would take a `+`
    // and any number of leading zeros.
    let by_id = u64::from_str_radix(asked, 16)
        .ok()
        .filter(|_| asked.len() <= 16 && asked.bytes().all(|b| b.is_ascii_hexdigit()));
    members
        .iter()
        .find(|m| Some(m.id.0) == by_id || (!m.name.is_empty() && m.name == asked))
}

/// Why the removal is refused; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No member matches what was asked.
    #[error(
        "etcd lists no member {asked} (its id as `etcd member list` prints it, or its name): nothing to remove"
    )]
    NoSuchMember {
        /// What was asked, escaped.
        asked: String,
    },
    /// The member votes.
    #[error(
        "member {id} ({name}) votes: a voter leaves only through a swap or a shrink, whose gates keep quorum (`fleet-role swap --out NODE --in STANDBY`)"
    )]
    Votes {
        /// Its id.
        id: MemberId,
        /// Its name, escaped.
        name: String,
    },
    /// A change holds the regrade Lease, or one recorded names the
    /// learner's host as its incoming one.
    #[error("{0}: `fleet-role abort` winds it down and removes its learner, or wait for it to end")]
    ChangeUnderWay(String),
    /// The other voters are no healthy quorum among themselves.
    #[error(
        "{healthy} of the {voters} voting members answer as healthy, under the {quorum} a quorum needs: should k3s promote the learner as it is removed, the removal would leave etcd without quorum; bring the voters back first"
    )]
    VotersUnhealthy {
        /// The voting members answering as healthy.
        healthy: usize,
        /// The voting members.
        voters: usize,
        /// Their quorum.
        quorum: usize,
    },
}

/// The learner to remove, or why not. `members` is etcd's list as this
/// host's member gives it; `voter_health` says, for each voting member,
/// whether it served a linearizable read when asked (a member not asked or
/// not answering counts as unhealthy); `lease` is the regrade Lease as the
/// API holds it (`None`: there is none), judged at `now` with `margin`
/// seconds of clock skew.
pub fn verdict(
    members: &[Member],
    asked: &str,
    voter_health: &[(MemberId, bool)],
    lease: Option<&LeaseFacts>,
    now: i64,
    margin: i64,
) -> Result<MemberId, Refusal> {
    let m = member_named(members, asked).ok_or_else(|| Refusal::NoSuchMember {
        asked: one_line(asked),
    })?;
    let shown_name = || {
        if m.name.is_empty() {
            "not started, no name yet".to_string()
        } else {
            one_line(&m.name)
        }
    };
    if !m.learner {
        return Err(Refusal::Votes {
            id: m.id,
            name: shown_name(),
        });
    }
    if let Some(l) = lease {
        let swap = l.swap.as_deref().map(one_line);
        // A Lease that may still be valid by any clock within the margin
        // counts as held: a controller may be promoting this very learner.
        if let Some(swap) = &swap
            // Valid by a clock `margin` seconds behind this one.
            && l.valid_at(now.saturating_sub(margin.max(0)), 0)
        {
            return Err(Refusal::ChangeUnderWay(format!(
                "the change {swap} holds the regrade Lease"
            )));
        }
        let incoming = l.swap_in.as_deref();
        if let (Some(swap), Some(node), Some(inc)) = (&swap, m.node_name(), incoming)
            && node == inc
        {
            return Err(Refusal::ChangeUnderWay(format!(
                "the change {swap} recorded on the regrade Lease has {} as its incoming host",
                one_line(inc)
            )));
        }
    }
    let voters: Vec<MemberId> = members
        .iter()
        .filter(|v| !v.learner)
        .map(|v| v.id)
        .collect();
    let healthy = voters
        .iter()
        .filter(|id| voter_health.iter().any(|(h, ok)| h == *id && *ok))
        .count();
    if !keeps_quorum(voters.len(), healthy) {
        return Err(Refusal::VotersUnhealthy {
            healthy,
            voters: voters.len(),
            quorum: protocol::etcd::quorum(voters.len()),
        });
    }
    Ok(m.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, name: &str, learner: bool) -> Member {
        Member {
            id: MemberId(id),
            name: name.into(),
            peer_urls: vec![format!("https://10.0.0.{id}:2380")],
            client_urls: vec![],
            learner,
        }
    }

    fn cluster() -> Vec<Member> {
        vec![
            member(1, "server-1-0000000a", false),
            member(2, "server-2-0000000b", false),
            member(3, "server-3-0000000c", false),
            member(0x4d, "agent-1-0000000d", true),
            member(0xee, "", true),
        ]
    }

    fn all_healthy() -> Vec<(MemberId, bool)> {
        (1..=3).map(|i| (MemberId(i), true)).collect()
    }

    fn lease(swap: Option<&str>, incoming: Option<&str>, renewed: i64) -> LeaseFacts {
        LeaseFacts {
            holder: Some("fleet-role".into()),
            renew_time: Some(renewed),
            duration_secs: Some(30),
            swap: swap.map(str::to_string),
            swap_in: incoming.map(str::to_string),
            ..LeaseFacts::default()
        }
    }

    const NOW: i64 = 10_000;

    #[test]
    fn a_learner_named_by_its_id_or_its_name_is_removed_when_the_other_voters_keep_quorum() {
        let m = cluster();
        for asked in ["4d", "000000000000004d", "agent-1-0000000d"] {
            assert_eq!(
                verdict(&m, asked, &all_healthy(), None, NOW, 2),
                Ok(MemberId(0x4d)),
                "{asked}"
            );
        }
        // One voter of three down: two healthy are a quorum of three.
        let health = [
            (MemberId(1), true),
            (MemberId(2), true),
            (MemberId(3), false),
        ];
        assert_eq!(verdict(&m, "ee", &health, None, NOW, 2), Ok(MemberId(0xee)));
        // A lapsed Lease with no change recorded, or a change of other hosts.
        let free = lease(None, None, NOW - 100);
        assert_eq!(
            verdict(&m, "4d", &all_healthy(), Some(&free), NOW, 2),
            Ok(MemberId(0x4d))
        );
        let other = lease(Some("swap-1"), Some("agent-2"), NOW - 100);
        assert_eq!(
            verdict(&m, "4d", &all_healthy(), Some(&other), NOW, 2),
            Ok(MemberId(0x4d))
        );
    }

    #[test]
    fn a_voter_or_a_member_etcd_does_not_list_is_refused() {
        let m = cluster();
        assert!(matches!(
            verdict(&m, "server-2-0000000b", &all_healthy(), None, NOW, 2),
            Err(Refusal::Votes {
                id: MemberId(2),
                ..
            })
        ));
        assert!(matches!(
            verdict(&m, "1", &all_healthy(), None, NOW, 2),
            Err(Refusal::Votes {
                id: MemberId(1),
                ..
            })
        ));
        for asked in [
            "agent-9-0000000d",
            "",
            "zz",
            "agent-1",
            "10000000000000004d",
            "+4d",
            "00000000000000004d",
        ] {
            assert!(
                matches!(
                    verdict(&m, asked, &all_healthy(), None, NOW, 2),
                    Err(Refusal::NoSuchMember { .. })
                ),
                "{asked:?}"
            );
        }
        // An unnamed learner is named by its id only, never by "".
        assert_eq!(member_named(&m, ""), None);
        let e = verdict(&m, "no\u{1b}[2Jpe", &all_healthy(), None, NOW, 2).unwrap_err();
        assert!(!e.to_string().contains('\u{1b}'), "{e}");
    }

    #[test]
    fn a_learner_is_kept_while_a_change_holds_the_lease_or_one_recorded_is_promoting_its_host() {
        let m = cluster();
        // Held now, or within the skew margin of lapsing, by any change.
        for renewed in [NOW, NOW - 29, NOW - 31] {
            let held = lease(Some("swap-1"), Some("agent-2"), renewed);
            let e = verdict(&m, "4d", &all_healthy(), Some(&held), NOW, 2).unwrap_err();
            assert_eq!(
                e.to_string(),
                "the change swap-1 holds the regrade Lease: `fleet-role abort` winds it down and removes its learner, or wait for it to end",
                "{renewed}"
            );
        }
        // Lapsed well past the margin, but its incoming host is this
        // learner's: the abandoned change's own learner.
        let abandoned = lease(Some("swap-1"), Some("agent-1"), NOW - 3_600);
        let e = verdict(
            &m,
            "agent-1-0000000d",
            &all_healthy(),
            Some(&abandoned),
            NOW,
            2,
        )
        .unwrap_err();
        assert!(
            matches!(e, Refusal::ChangeUnderWay(ref w) if w.contains("agent-1 as its incoming host")),
            "{e}"
        );
        // Lapsed past the margin (just, or long) and of other hosts: removed.
        let just = lease(Some("swap-1"), Some("agent-2"), NOW - 32);
        assert_eq!(
            verdict(&m, "4d", &all_healthy(), Some(&just), NOW, 2),
            Ok(MemberId(0x4d))
        );
        let lapsed = lease(Some("swap-1"), Some("agent-2"), NOW - 33);
        assert_eq!(
            verdict(&m, "4d", &all_healthy(), Some(&lapsed), NOW, 2),
            Ok(MemberId(0x4d))
        );
    }

    #[test]
    fn a_learner_is_kept_while_the_other_voters_are_no_healthy_quorum() {
        let m = cluster();
        let health = [(MemberId(1), true), (MemberId(2), false)];
        assert_eq!(
            verdict(&m, "4d", &health, None, NOW, 2),
            Err(Refusal::VotersUnhealthy {
                healthy: 1,
                voters: 3,
                quorum: 2
            })
        );
        // A learner's health is no voter's.
        let health = [
            (MemberId(1), true),
            (MemberId(0x4d), true),
            (MemberId(0xee), true),
        ];
        assert!(matches!(
            verdict(&m, "4d", &health, None, NOW, 2),
            Err(Refusal::VotersUnhealthy { healthy: 1, .. })
        ));
    }
}
