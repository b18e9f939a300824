//! When to decide again with nothing changed: the decisions read the clock
//! (a heartbeat going stale, a voter NotReady past its grace, the settle
//! time, the regrade Lease's renewal and expiry, a step's deadline), so the
//! loop wakes at the next moment one of those could change an answer, and
//! otherwise only when a watch reports a change. No fixed poll.

use fleetfacts::{Class, classify};

use crate::view::{FleetView, SwapRecord};

/// The next unix second, after `v.now`, at which a time-based rule could
/// change a decision over `v`; `deadline` is the current step's, if any.
/// `None`: nothing changes with time alone.
pub fn next_edge(v: &FleetView, deadline: Option<i64>) -> Option<i64> {
    let s = &v.settings;
    let mut edges: Vec<i64> = Vec::new();
    edges.extend(deadline.map(|d| d.saturating_add(1)));
    for n in &v.nodes {
        // A fresh heartbeat goes stale once its grace has passed
        // (`apply_heartbeats` counts it NotReady strictly after).
        if n.ready
            && let Some(r) = n.lease_renewed_at
        {
            edges.push(r.saturating_add(s.heartbeat_grace).saturating_add(1));
        }
        // `run` replaces a voter NotReady for the grace period, once its
        // own view of etcd no longer vouches for it.
        if !n.ready && classify(n) == Class::Voter {
            edges.push(
                n.ready_since
                    .unwrap_or(v.now)
                    .saturating_add(s.grace_period),
            );
            if let Some(e) = n.host.as_ref().and_then(|h| h.etcd.as_ref()) {
                edges.push(
                    e.read_at
                        .saturating_add(s.actuator_heartbeat_max_age)
                        .saturating_add(1),
                );
            }
        }
    }
    if let Some(l) = &v.lease {
        if let Some(r) = l.renew_time {
            // The holder renews a third of the way; the swap's writes stop
            // a skew margin before the expiry; others may take it after.
            edges.push(r.saturating_add((s.lease_duration / 3).max(1)));
        }
        if let Some(e) = l.expiry() {
            edges.push(e.saturating_sub(s.skew_margin));
            edges.push(e.saturating_add(1));
        }
        if let Some(last) = l.last() {
            edges.push(last.at.saturating_add(s.settle));
        }
    }
    edges.into_iter().filter(|&t| t > v.now).min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Settings;
    use protocol::{LeaseFacts, NodeFacts};

    fn view(nodes: Vec<NodeFacts>, lease: Option<LeaseFacts>) -> FleetView {
        FleetView {
            now: 1000,
            settings: Settings::default(),
            nodes,
            lease,
            pods: vec![],
        }
    }

    #[test]
    fn a_quiet_fleet_with_no_heartbeats_and_no_lease_never_wakes_by_itself() {
        let n = NodeFacts {
            name: "a".into(),
            ready: true,
            ..NodeFacts::default()
        };
        assert_eq!(next_edge(&view(vec![n], None), None), None);
    }

    #[test]
    fn a_fresh_heartbeat_wakes_the_loop_right_after_its_grace_runs_out() {
        let n = NodeFacts {
            name: "a".into(),
            ready: true,
            lease_renewed_at: Some(990),
            ..NodeFacts::default()
        };
        // default heartbeat grace 40: stale strictly after 1030.
        assert_eq!(next_edge(&view(vec![n], None), None), Some(1031));
    }

    #[test]
    fn a_step_deadline_earlier_than_anything_else_is_the_next_edge() {
        let n = NodeFacts {
            name: "a".into(),
            ready: true,
            lease_renewed_at: Some(990),
            ..NodeFacts::default()
        };
        assert_eq!(next_edge(&view(vec![n], None), Some(1005)), Some(1006));
    }

    #[test]
    fn a_held_lease_wakes_the_loop_for_its_renewal() {
        let l = LeaseFacts {
            holder: Some("x".into()),
            renew_time: Some(995),
            duration_secs: Some(60),
            ..LeaseFacts::default()
        };
        // renewal due at 995 + 60/3 = 1015, before the expiry's edges.
        assert_eq!(next_edge(&view(vec![], Some(l)), None), Some(1015));
    }

    #[test]
    fn edges_in_the_past_are_not_edges() {
        assert_eq!(next_edge(&view(vec![], None), Some(10)), None);
    }
}
