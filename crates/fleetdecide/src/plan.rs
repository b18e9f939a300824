//! The dry run: every preflight gate's verdict and the steps a swap, a
//! grow or a shrink would take now, each with its fault tolerance.

use serde::Serialize;

use super::voterset::{Event, Tolerance};
use crate::gate::Gate;
use crate::gates::preflight;
use crate::quorum::count_voters;
use crate::resize::{grow_gates, shrink_gates, voting_now};
use crate::swap::{join_voter, snapshot_voter};
use crate::view::FleetView;
use fleetfacts::is_healthy_voter;
use protocol::names::K3S_ETCD_REMOVE;

// === Dry run ===

/// What `swap --dry-run` (and `grow`'s, `shrink`'s) prints: every gate's
/// verdict and the steps.
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
    // The voting members as the swap starts, the incoming host's vote not
    // counted (a resumed swap's incoming host may vote already).
    let count = count_voters(v, Some(incoming));
    let incoming_votes = v.node(incoming).is_some_and(is_healthy_voter);
    let start = Tolerance::of(
        count.members() - usize::from(incoming_votes),
        count.healthy - usize::from(incoming_votes),
    );
    let mut steps = vec![lease_step(v), snapshot_step(v, out)];
    steps.push(promote_step(v, incoming, out));
    steps.extend(leave_steps(v, out));
    steps.push(("release the Lease".into(), vec![]));
    Plan {
        gates: preflight(v, out, incoming),
        steps: walk_steps(start, steps),
    }
}

/// The plan of a grow promoting `incoming`, one host after the other, as it
/// would run now (`fleet-role grow --dry-run`).
pub fn plan_grow(v: &FleetView, incoming: &[&str]) -> Plan {
    let mut steps = vec![lease_step(v), snapshot_step(v, "")];
    for inc in incoming {
        steps.push(promote_step(v, inc, ""));
        steps.push((format!("clear the grow's annotations on {inc}"), vec![]));
    }
    steps.push(("release the Lease".into(), vec![]));
    Plan {
        gates: grow_gates(v, incoming),
        steps: walk_steps(voting_now(v), steps),
    }
}

/// The plan of a shrink removing `out`, one host after the other, as it
/// would run now (`fleet-role shrink --dry-run`).
pub fn plan_shrink(v: &FleetView, out: &[&str]) -> Plan {
    let mut steps = vec![
        lease_step(v),
        snapshot_step(v, out.first().copied().unwrap_or("")),
    ];
    for o in out {
        steps.extend(leave_steps(v, o));
    }
    steps.push(("release the Lease".into(), vec![]));
    Plan {
        gates: shrink_gates(v, out),
        steps: walk_steps(voting_now(v), steps),
    }
}

/// One step's line and the events etcd sees during it.
type Step = (String, Vec<Event>);

/// Each step with the lowest tolerance it passes through, walked from
/// `start`.
fn walk_steps(start: Tolerance, steps: Vec<Step>) -> Vec<PlanStep> {
    let mut at = start;
    steps
        .into_iter()
        .map(|(step, events)| {
            let (each, low) = crate::voterset::walk(at, &events);
            at = each.last().copied().unwrap_or(at);
            PlanStep {
                step,
                tolerance: low,
            }
        })
        .collect()
}

fn lease_step(v: &FleetView) -> Step {
    let lease = format!(
        "{}/{}",
        protocol::names::LEASE_NAMESPACE,
        v.settings.names.lease_name
    );
    (
        format!(
            "take the Lease {lease} for a new swap (held as {}, {} s, renewed every {} s)",
            v.settings.names.controller_identity,
            v.settings.lease_duration,
            (v.settings.lease_duration / 3).max(1)
        ),
        vec![],
    )
}

/// The snapshot, asked of a healthy voter other than `out` where there is
/// one.
fn snapshot_step(v: &FleetView, out: &str) -> Step {
    let snap = snapshot_voter(v, out).map_or_else(|| "(no healthy voter)".into(), String::from);
    (
        format!(
            "ask {snap} for an etcd snapshot named for the swap; wait for its file (timeout {} s)",
            v.settings.timeouts.snapshot
        ),
        vec![],
    )
}

/// The promotion of `incoming`, joining a healthy voter other than `out`.
fn promote_step(v: &FleetView, incoming: &str, out: &str) -> Step {
    let join = join_voter(v, out).map_or_else(|| "(no healthy voter)".into(), String::from);
    (
        format!(
            "promote {incoming} joining {join}; wait for it to report voter with EtcdIsVoter (timeout {} s); on failure roll it back and remove its member",
            v.settings.timeouts.promote
        ),
        vec![Event::Joins],
    )
}

/// The outgoing host's leaving: its step-down (a restart as etcd-only),
/// its member's removal, its finish as an agent and the clean-up; a down
/// host is removed without a step and cannot finish.
fn leave_steps(v: &FleetView, out: &str) -> Vec<Step> {
    let t = &v.settings.timeouts;
    let out_healthy = v.node(out).is_some_and(is_healthy_voter);
    let leave = vec![Event::Leaves {
        healthy: out_healthy,
    }];
    if v.down(out) {
        return vec![
            (
                format!(
                    "cordon {out}; it is down, so it is not asked to step down (timeout {} s)",
                    t.step_down
                ),
                vec![],
            ),
            (
                format!(
                    "ask k3s to remove {out}'s member; wait for removed-node-name (timeout {} s)",
                    t.removal
                ),
                leave,
            ),
            (
                format!(
                    "{out} cannot finish while down: its server labels and cordon stay; run `fleet-role-actuator demote-local --force` on it when it returns"
                ),
                vec![],
            ),
        ];
    }
    let restart = if out_healthy {
        vec![Event::Restarts, Event::Restarted]
    } else {
        vec![]
    };
    vec![
        (
            format!(
                "cordon {out}; ask it to step down (its k3s restarts etcd-only); wait for etcd-only (timeout {} s)",
                t.step_down
            ),
            restart,
        ),
        (
            format!(
                "ask k3s to remove {out}'s member ({K3S_ETCD_REMOVE}=true); wait for removed-node-name (timeout {} s)",
                t.removal
            ),
            leave,
        ),
        (
            format!(
                "wait for {out} to finish as an agent: Ready, node Lease renewed since the finish began (timeout {} s)",
                t.finish
            ),
            vec![],
        ),
        (
            format!(
                "remove {out}'s server role labels and k3s etcd annotations; clear the swap's annotations; uncordon {out}"
            ),
            vec![],
        ),
    ]
}
