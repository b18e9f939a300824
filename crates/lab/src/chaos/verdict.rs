//! The campaign's verdict on each swap, from etcd itself rather than from
//! the product's own record: a swap the Lease calls done must have left the
//! members it says (the outgoing host's member gone, the incoming host's a
//! voter, no learner) and as many voters as before; and a swap that did
//! not end done under its faults must end done once they healed (the
//! liveness half: a campaign in which nothing moves is no pass).

use std::collections::BTreeSet;

use super::{summary::Ending, watch::host_of};
use crate::etcd_gw::Member;

/// What is wrong with etcd's `members` after a swap of `out` for
/// `incoming` the product recorded done, with `voters_before` voting
/// members before it: nothing when they are as the swap says.
pub fn done_swap_mismatch(
    members: &[Member],
    out: &str,
    incoming: &str,
    voters_before: usize,
) -> Vec<String> {
    let mut wrong = Vec::new();
    let voting: BTreeSet<&str> = members
        .iter()
        .filter(|m| !m.is_learner)
        .map(|m| host_of(&m.name))
        .collect();
    if members.iter().any(|m| host_of(&m.name) == out) {
        wrong.push(format!("{out} still has a member"));
    }
    if !voting.contains(incoming) {
        wrong.push(format!("{incoming} has no voting member"));
    }
    let learners: Vec<&str> = members
        .iter()
        .filter(|m| m.is_learner)
        .map(|m| m.name.as_str())
        .collect();
    if !learners.is_empty() {
        wrong.push(format!("learners are left: {learners:?}"));
    }
    if voting.len() != voters_before {
        wrong.push(format!(
            "{} voters, {voters_before} before the swap",
            voting.len()
        ));
    }
    wrong
}

/// What to do after an attempt of a planned swap ended `ending`: `None`
/// when it is over (done), else whether a retry with no fault is still
/// within the liveness bound (`elapsed_ms` since the first retry began,
/// none before it).
pub fn retry(ending: Ending, elapsed_ms: Option<u64>, bound_ms: u64) -> Option<bool> {
    (ending != Ending::Done).then(|| elapsed_ms.is_none_or(|e| e < bound_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, learner: bool) -> Member {
        Member {
            id: 1,
            name: name.into(),
            peer_urls: vec![],
            client_urls: vec![],
            is_learner: learner,
        }
    }

    fn after(ms: &[(&str, bool)]) -> Vec<Member> {
        ms.iter().map(|(n, l)| m(n, *l)).collect()
    }

    #[test]
    fn a_done_swap_that_left_the_members_it_says_has_nothing_wrong() {
        let ms = after(&[
            ("server-1-a", false),
            ("server-2-b", false),
            ("agent-1-c", false),
        ]);
        assert!(done_swap_mismatch(&ms, "server-3", "agent-1", 3).is_empty());
    }

    #[test]
    fn a_done_swap_whose_outgoing_member_stayed_is_named() {
        let ms = after(&[
            ("server-1-a", false),
            ("server-2-b", false),
            ("server-3-d", false),
            ("agent-1-c", false),
        ]);
        let w = done_swap_mismatch(&ms, "server-3", "agent-1", 3);
        assert!(
            w.iter().any(|x| x.contains("server-3 still has a member")),
            "{w:?}"
        );
        assert!(w.iter().any(|x| x.contains("4 voters, 3 before")), "{w:?}");
    }

    #[test]
    fn a_done_swap_whose_incoming_host_is_still_a_learner_is_named() {
        let ms = after(&[
            ("server-1-a", false),
            ("server-2-b", false),
            ("agent-1-c", true),
        ]);
        let w = done_swap_mismatch(&ms, "server-3", "agent-1", 3);
        assert!(
            w.iter().any(|x| x.contains("agent-1 has no voting member")),
            "{w:?}"
        );
        assert!(w.iter().any(|x| x.contains("learners are left")), "{w:?}");
        assert!(w.iter().any(|x| x.contains("2 voters, 3 before")), "{w:?}");
    }

    #[test]
    fn a_swap_not_done_is_retried_until_the_liveness_bound_and_a_done_one_never() {
        assert_eq!(retry(Ending::Done, None, 1000), None);
        assert_eq!(retry(Ending::Done, Some(5000), 1000), None);
        assert_eq!(retry(Ending::Refused, None, 1000), Some(true));
        assert_eq!(retry(Ending::WoundDown, Some(999), 1000), Some(true));
        assert_eq!(retry(Ending::Unfinished, Some(1000), 1000), Some(false));
    }
}
