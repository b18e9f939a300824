use super::*;

/// An operation on key `k` by `client`, asked at `asked`, answered at
/// `answered` (unused unless ok).
fn op(client: u64, ask: Ask, asked: u64, answered: u64, outcome: Outcome) -> Op {
    Op {
        client,
        key: "k".into(),
        ask,
        asked,
        answered,
        outcome,
        at_ms: answered * 10,
    }
}

fn w(client: u64, v: u64, asked: u64, answered: u64) -> Op {
    op(client, Ask::Write(v), asked, answered, Outcome::Ok(None))
}

fn r(client: u64, v: u64, asked: u64, answered: u64) -> Op {
    op(client, Ask::Read, asked, answered, Outcome::Ok(Some(v)))
}

#[test]
fn reads_that_follow_the_acknowledged_writes_are_linearizable() {
    let h = vec![w(1, 5, 1, 2), r(2, 5, 3, 4), w(2, 6, 5, 6), r(1, 6, 7, 8)];
    assert_eq!(check(&h), Vec::<String>::new());
}

#[test]
fn a_read_of_an_older_value_after_a_newer_write_was_acknowledged_is_not() {
    let h = vec![w(1, 5, 1, 2), w(1, 6, 3, 4), r(2, 5, 5, 6)];
    let broken = check(&h);
    assert_eq!(broken.len(), 1, "{broken:?}");
    // The line names the key, counts the operations and shows each.
    assert!(
        broken[0].starts_with("k: not linearizable (3 operations, 0 of unknown outcome): "),
        "{broken:?}"
    );
    assert!(
        broken[0].ends_with("c1[1..2]w5 c1[3..4]w6 c2[5..6]r5"),
        "{broken:?}"
    );
}

#[test]
fn an_acknowledged_write_lost_to_a_later_read_of_nothing_is_not() {
    let h = vec![w(1, 5, 1, 2), r(2, 0, 3, 4)];
    assert_eq!(check(&h).len(), 1);
}

#[test]
fn concurrent_writes_may_land_in_either_order() {
    // Both writes overlap; the reads after them agree on one order.
    let h = vec![w(1, 5, 1, 4), w(2, 6, 2, 3), r(3, 5, 5, 6), r(1, 5, 7, 8)];
    assert_eq!(check(&h), Vec::<String>::new());
    // Two reads that disagree on the order, one after the other, do not.
    let h = vec![w(1, 5, 1, 4), w(2, 6, 2, 3), r(3, 5, 5, 6), r(1, 6, 7, 8)];
    assert_eq!(check(&h).len(), 1);
}

#[test]
fn a_write_of_unknown_outcome_may_take_effect_late_or_never() {
    let unknown = op(1, Ask::Write(7), 1, 0, Outcome::Unknown);
    // Never seen.
    let h = vec![unknown.clone(), w(2, 8, 2, 3), r(3, 8, 4, 5)];
    assert_eq!(check(&h), Vec::<String>::new());
    // Seen, after a later acknowledged write: it took effect after it.
    let h = vec![unknown.clone(), w(2, 8, 2, 3), r(3, 7, 4, 5)];
    assert_eq!(check(&h), Vec::<String>::new());
    // But once seen it cannot be unseen for an older value.
    let h = vec![unknown, w(2, 8, 2, 3), r(3, 7, 4, 5), r(3, 8, 6, 7)];
    let broken = check(&h);
    assert!(
        broken[0].contains("(4 operations, 1 of unknown outcome)"),
        "{broken:?}"
    );
    assert!(broken[0].contains("c1[1..0]w7?"), "{broken:?}");
}

#[test]
fn a_write_that_never_reached_etcd_must_never_be_read() {
    let failed = op(1, Ask::Write(7), 1, 0, Outcome::Failed);
    let h = vec![failed.clone(), r(2, 0, 2, 3)];
    assert_eq!(check(&h), Vec::<String>::new());
    let h = vec![failed, r(2, 7, 2, 3)];
    let broken = check(&h);
    assert!(broken[0].contains("no client wrote"), "{broken:?}");
}

#[test]
fn a_value_no_client_wrote_is_named() {
    let h = vec![w(1, 5, 1, 2), r(2, 99, 3, 4)];
    let broken = check(&h);
    assert_eq!(broken.len(), 1);
    assert!(broken[0].starts_with("k: read 99"), "{broken:?}");
}

#[test]
fn keys_are_checked_apart_and_each_broken_key_is_named() {
    let mut other = r(2, 0, 3, 4);
    other.key = "j".into();
    let h = vec![w(1, 5, 1, 2), other, r(2, 0, 5, 6)];
    let broken = check(&h);
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(broken[0].starts_with("k:"), "{broken:?}");
}

#[test]
fn a_client_asking_again_with_an_answer_pending_is_a_malformed_history() {
    let h = vec![op(1, Ask::Write(5), 1, 0, Outcome::Unknown), w(1, 6, 2, 3)];
    let broken = check(&h);
    assert!(broken[0].contains("malformed"), "{broken:?}");
}

#[test]
fn the_counts_give_each_outcome_and_the_longest_gap_between_acknowledged_writes() {
    let h = vec![
        w(1, 5, 1, 2),
        r(2, 5, 3, 4),
        op(1, Ask::Write(6), 5, 0, Outcome::Unknown),
        op(2, Ask::Read, 6, 0, Outcome::Failed),
        w(3, 7, 7, 9),
        w(3, 8, 10, 11),
    ];
    let c = counts(&h);
    assert_eq!((c.ok, c.failed, c.unknown), (4, 1, 1));
    // Acknowledged at 20, 90 and 110 ms.
    assert_eq!(c.longest_write_stall_ms, 70);
}
