//! The dry run: every preflight gate's verdict and the steps a swap would
//! take now.

use serde::Serialize;

use super::voterset::{Event, Tolerance};
use super::{
    FleetView, Gate, count_voters, is_healthy_voter, join_voter, preflight, snapshot_voter,
};
use crate::names::K3S_ETCD_REMOVE;

// === Dry run ===

/// What `swap --dry-run` prints: every gate's verdict and the steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The preflight gates.
    pub gates: Vec<Gate>,
    /// The steps, in order.
    pub steps: Vec<PlanStep>,
}

/// One step of a plan and the fault tolerance it keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanStep {
    /// What the step does, in one line.
    pub step: String,
    /// The voting members at the step's lowest moment and how many more
    /// may fail then (the outgoing host's restart as etcd-only is the
    /// step-down's lowest).
    pub tolerance: Tolerance,
}

/// The plan of a swap of `out` for `incoming`, as it would run now.
pub fn plan(v: &FleetView, out: &str, incoming: &str) -> Plan {
    let t = &v.settings.timeouts;
    let snap = snapshot_voter(v, out).map_or_else(|| "(no healthy voter)".into(), String::from);
    let join = join_voter(v, out).map_or_else(|| "(no healthy voter)".into(), String::from);
    let lease = format!(
        "{}/{}",
        crate::names::LEASE_NAMESPACE,
        v.settings.names.lease_name
    );
    let out_down = v.node(out).is_some_and(|o| !o.ready);
    // The voting members as the swap starts, the incoming host's vote not
    // counted (a resumed swap's incoming host may vote already).
    let count = count_voters(v, Some(incoming));
    let incoming_votes = v.node(incoming).is_some_and(is_healthy_voter);
    let start = Tolerance::of(
        count.members() - usize::from(incoming_votes),
        count.healthy - usize::from(incoming_votes),
    );
    let out_healthy = v.node(out).is_some_and(is_healthy_voter);
    let mut at = start;
    // Each step's lowest moment, after its events.
    let mut lowest = |events: &[Event]| {
        let (each, low) = super::voterset::walk(at, events);
        at = each.last().copied().unwrap_or(at);
        low
    };
    let restart: &[Event] = if out_healthy {
        &[Event::Restarts, Event::Restarted]
    } else {
        &[]
    };
    let leave = [Event::Leaves {
        healthy: out_healthy,
    }];
    let mut steps: Vec<(String, &[Event])> = vec![
        (
            format!(
                "take the Lease {lease} for a new swap (held as {}, {} s, renewed every {} s)",
                v.settings.names.controller_identity,
                v.settings.lease_duration,
                (v.settings.lease_duration / 3).max(1)
            ),
            &[],
        ),
        (
            format!(
                "ask {snap} for an etcd snapshot named for the swap; wait for its file (timeout {} s)",
                t.snapshot
            ),
            &[],
        ),
        (
            format!(
                "promote {incoming} joining {join}; wait for it to report voter with EtcdIsVoter (timeout {} s); on failure roll it back and remove its member",
                t.promote
            ),
            &[Event::Joins],
        ),
    ];
    if out_down {
        steps.push((
            format!(
                "cordon {out}; it is NotReady, so it is not asked to step down (timeout {} s)",
                t.step_down
            ),
            &[],
        ));
        steps.push((
            format!(
                "ask k3s to remove {out}'s member; wait for removed-node-name (timeout {} s)",
                t.removal
            ),
            &leave,
        ));
        steps.push((
            format!(
                "{out} cannot finish while down: its server labels and cordon stay; run `fleet-role-actuator demote-local --force` on it when it returns"
            ),
            &[],
        ));
    } else {
        steps.push((
            format!(
                "cordon {out}; ask it to step down (its k3s restarts etcd-only); wait for etcd-only (timeout {} s)",
                t.step_down
            ),
            restart,
        ));
        steps.push((
            format!(
                "ask k3s to remove {out}'s member ({K3S_ETCD_REMOVE}=true); wait for removed-node-name (timeout {} s)",
                t.removal
            ),
            &leave,
        ));
        steps.push((
            format!(
                "wait for {out} to finish as an agent: Ready, node Lease renewed since the finish began (timeout {} s)",
                t.finish
            ),
            &[],
        ));
        steps.push((
            format!(
                "remove {out}'s server role labels and k3s etcd annotations; clear the swap's annotations; uncordon {out}"
            ),
            &[],
        ));
    }
    steps.push(("release the Lease".into(), &[]));
    let steps = steps
        .into_iter()
        .map(|(step, events)| PlanStep {
            step,
            tolerance: lowest(events),
        })
        .collect();
    Plan {
        gates: preflight(v, out, incoming),
        steps,
    }
}
