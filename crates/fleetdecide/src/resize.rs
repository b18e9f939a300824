//! Growing and shrinking the voter set by hand (`fleet-role grow --in`,
//! `fleet-role shrink --out`): the two halves of a swap on their own, and
//! the gates each must pass before it starts. A grow or shrink may queue
//! several hosts (`--in A --in B`: 1 → 3 voters), since etcd should never be
//! left standing with an even count ([`gate_odd_voter_count`]): an even
//! count needs one voter more for its quorum than the odd count below it,
//! and tolerates no more failures.
//!
//! Each host queued is its own change on the regrade Lease (a record with
//! one half: see [`crate::view::Recorded`]), driven by the swap's state machine;
//! these gates are those before the first of them starts.

use crate::gate::{Gate, GateName};
use crate::gates::Outgoing;
use crate::gates::{
    etcd_view_gates, gate_actuators_alive, gate_incoming_agent, gate_incoming_eligible,
    gate_incoming_ready, gate_known_protocol, gate_no_learner, gate_no_other_swap, gate_not_paused,
    gate_outgoing_demotable, gate_outgoing_voter, gate_quorum_for, gate_voters_healthy,
};
use crate::quorum::count_voters;
use crate::view::FleetView;
use crate::voterset::{Move, Tolerance, walk};
use fleetfacts::is_healthy_voter;

/// The voting members now, as the Nodes show them, and how many are
/// healthy. etcd's own list must agree before anything starts (the
/// `etcd-views-agree` and `no-ghost-member` gates), so the Nodes' count is
/// the count etcd has.
pub fn voting_now(v: &FleetView) -> Tolerance {
    let c = count_voters(v, None);
    Tolerance::of(c.seen, c.healthy)
}

/// Gate: going from `now` voters to `after` ends on an odd count, and not
/// on none. `grow` says which way, for the advice.
pub fn gate_odd_voter_count(now: usize, after: usize, grow: bool) -> Gate {
    let name = GateName::OddVoterCount;
    if after == 0 {
        return Gate::fail(
            name,
            format!("shrinking from {now} voters to none leaves no cluster"),
        );
    }
    if after % 2 == 1 {
        return Gate::pass(name, format!("{now} voters to {after}: an odd count"));
    }
    let (verb, flag, next) = if grow {
        ("growing", "--in", after + 1)
    } else {
        ("shrinking", "--out", after - 1)
    };
    Gate::fail(
        name,
        format!(
            "{verb} from {now} voters to {after} leaves an even count standing: {after} voters need {} for quorum and tolerate no more failures than {} would; queue a second {flag} to go on to {next}",
            crate::quorum(after),
            after - 1
        ),
    )
}

/// The gates a grow promoting `incoming`, in order, must pass before it
/// starts: those of a swap's promotion, and an odd count at the end.
pub fn grow_gates(v: &FleetView, incoming: &[&str]) -> Vec<Gate> {
    let first = incoming.first().copied().unwrap_or_default();
    let mut gates = vec![gate_not_paused(v), gate_no_other_swap(v, "", first)];
    for &inc in incoming {
        gates.extend([
            gate_known_protocol(v, "", inc),
            gate_incoming_eligible(v, inc),
            gate_incoming_ready(v, inc),
            gate_incoming_agent(v, "", inc),
            gate_actuators_alive(v, None, Some(inc)),
        ]);
    }
    let now = voting_now(v).voting;
    gates.extend([
        gate_voters_healthy(v, ""),
        gate_no_learner(v, None),
        gate_odd_voter_count(now, now + incoming.len(), true),
    ]);
    gates.extend(etcd_view_gates(v));
    gates
}

/// The gates a shrink removing `out`, in order, must pass before it starts:
/// those of a swap's step-down and removal, quorum at every moment of every
/// removal, and an odd count at the end.
pub fn shrink_gates(v: &FleetView, out: &[&str]) -> Vec<Gate> {
    let first = out.first().copied().unwrap_or_default();
    let mut gates = vec![gate_not_paused(v), gate_no_other_swap(v, first, "")];
    for &o in out {
        gates.extend([
            gate_known_protocol(v, o, ""),
            gate_outgoing_voter(v, o, Outgoing::Voting),
            gate_outgoing_demotable(v, o),
            gate_actuators_alive(v, Some(o), None),
        ]);
    }
    let now = voting_now(v);
    gates.extend([
        gate_voters_healthy(v, first),
        gate_no_learner(v, None),
        gate_quorum_for(v, first, None),
        gate_quorum_through(v, now, out),
        gate_odd_voter_count(now.voting, now.voting.saturating_sub(out.len()), false),
    ]);
    gates.extend(etcd_view_gates(v));
    gates
}

/// Gate: every moment of removing `out` in turn keeps quorum, a healthy
/// voter's restart as etcd-only included (the Nodes' count; the first
/// removal is checked against etcd's own count by `gate_quorum_for`).
fn gate_quorum_through(v: &FleetView, start: Tolerance, out: &[&str]) -> Gate {
    let name = GateName::QuorumAfterRemoval;
    let mut at = start;
    for &o in out {
        let healthy = v.node(o).is_some_and(is_healthy_voter);
        let (each, low) = walk(at, &Move::Shrink { out: o.into() }.events(healthy));
        if low.may_fail.is_none() {
            return Gate::fail(
                name,
                format!(
                    "removing {} loses quorum: {}",
                    out.join(" then "),
                    low.describe()
                ),
            );
        }
        at = each.last().copied().unwrap_or(at);
    }
    Gate::pass(
        name,
        format!(
            "removing {} keeps quorum at every moment; at the end {}",
            out.join(" then "),
            at.describe()
        ),
    )
}

#[cfg(test)]
mod tests;
