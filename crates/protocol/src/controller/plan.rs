//! The dry run: every preflight gate's verdict and the steps a swap would
//! take now.

use serde::Serialize;

use super::{FleetView, Gate, join_voter, preflight, snapshot_voter};
use crate::names::K3S_ETCD_REMOVE;

// === Dry run ===

/// What `swap --dry-run` prints: every gate's verdict and the steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The preflight gates.
    pub gates: Vec<Gate>,
    /// The steps, in order, one line each.
    pub steps: Vec<String>,
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
    let mut steps = vec![
        format!(
            "take the Lease {lease} for a new swap (held as {}, {} s, renewed every {} s)",
            v.settings.names.controller_identity,
            v.settings.lease_duration,
            (v.settings.lease_duration / 3).max(1)
        ),
        format!(
            "ask {snap} for an etcd snapshot named for the swap; wait for its file (timeout {} s)",
            t.snapshot
        ),
        format!(
            "promote {incoming} joining {join}; wait for it to report voter with EtcdIsVoter (timeout {} s); on failure roll it back and remove its member",
            t.promote
        ),
    ];
    if out_down {
        steps.push(format!(
            "cordon {out}; it is NotReady, so it is not asked to step down (timeout {} s)",
            t.step_down
        ));
        steps.push(format!(
            "ask k3s to remove {out}'s member; wait for removed-node-name (timeout {} s)",
            t.removal
        ));
        steps.push(format!(
            "{out} cannot finish while down: its server labels and cordon stay; run `fleet-role-actuator demote-local --force` on it when it returns"
        ));
    } else {
        steps.push(format!(
            "cordon {out}; ask it to step down; wait for etcd-only (timeout {} s)",
            t.step_down
        ));
        steps.push(format!(
            "ask k3s to remove {out}'s member ({K3S_ETCD_REMOVE}=true); wait for removed-node-name (timeout {} s)",
            t.removal
        ));
        steps.push(format!(
            "wait for {out} to finish as an agent: Ready, node Lease renewed since the finish began (timeout {} s)",
            t.finish
        ));
        steps.push(format!(
            "remove {out}'s server role labels and k3s etcd annotations; clear the swap's annotations; uncordon {out}"
        ));
    }
    steps.push("release the Lease".into());
    Plan {
        gates: preflight(v, out, incoming),
        steps,
    }
}
