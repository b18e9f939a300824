//! When a voter is down: only on evidence no add-on can forge.
//!
//! More in docs/internals.md, "fleetdecide: evidence".

use std::collections::BTreeMap;

use crate::view::FleetView;
use fleetfacts::{Class, classify};

/// Weighs a voting host whose Node reads NotReady against its own word
/// on its member, and notes the dispute on it
/// ([`protocol::NodeFacts::ready_disputed`], which `status` shows):
///
/// - its node Lease renewed within [`crate::settings::Settings::heartbeat_grace`]
///   and its own view of etcd, read within that same grace, saying its
///   member is healthy: counted Ready again. Its kubelet is alive and its
///   etcd served a linearizable read moments ago: for the quorum
///   arithmetic, the member is healthy, whoever wrote `Ready`. (A host
///   that died keeps both for at most that grace: the window in which its
///   stale `Ready=True` is believed anyway, [`crate::view::apply_heartbeats`].)
/// - else, its own view within [`crate::settings::Settings::actuator_heartbeat_max_age`]
///   still vouches for the member: not counted Ready (a host that just
///   died keeps its last view that long), but never taken for down.
///
/// So a `nodes/status` writer alone can make a healthy voter neither
/// replaced nor counted unhealthy; with a node Lease writer too, it can
/// make the gates refuse (and `status` names it), never remove a member.
pub fn weigh_evidence(v: &mut FleetView) {
    let p = v.etcd();
    let (now, grace) = (v.now, v.settings.heartbeat_grace);
    let recent = |t: Option<i64>| t.is_some_and(|t| now.saturating_sub(t) <= grace);
    for n in &mut v.nodes {
        if n.ready || !matches!(classify(n), Class::Voter | Class::EtcdOnly) {
            continue;
        }
        if !p.of_node(&n.name).is_some_and(|m| m.vouched) {
            continue;
        }
        // Vouched means its own view names this member healthy: what is
        // left to weigh is whether that view is as fresh as the grace.
        let fresh_view = recent(
            n.host
                .as_ref()
                .and_then(|h| h.etcd.as_ref())
                .map(|e| e.read_at),
        );
        if recent(n.lease_renewed_at) && fresh_view {
            n.ready = true;
            n.ready_disputed = Some(format!(
                "{} reads NotReady, but its kubelet renewed its node Lease and its own view of etcd says its member is healthy: counted Ready",
                n.name
            ));
        } else {
            n.ready_disputed = Some(format!(
                "{} reads NotReady, but its own view of etcd says its member is healthy: not taken for down",
                n.name
            ));
        }
    }
}

/// When the controller first saw each Node in its current readiness, by
/// its own clock. A Node's `lastTransitionTime` is written with its
/// condition by whoever wrote that (a forged old time would have a voter
/// replaced at once); a controller that starts knows nothing, and counts
/// from its start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sightings {
    seen: BTreeMap<String, (bool, i64)>,
}

impl Sightings {
    /// Sets each Node's `ready_since` to the controller's own first
    /// sighting of its current readiness (now, for a Node not seen before or
    /// whose readiness changed), and forgets Nodes no longer listed. Apply
    /// before [`weigh_evidence`]: what is counted is how long the Node has
    /// read NotReady.
    pub fn apply(&mut self, v: &mut FleetView) {
        let now = v.now;
        self.seen
            .retain(|name, _| v.nodes.iter().any(|n| &n.name == name));
        for n in &mut v.nodes {
            let e = self.seen.entry(n.name.clone()).or_insert((n.ready, now));
            if e.0 != n.ready {
                *e = (n.ready, now);
            }
            n.ready_since = Some(e.1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn a_voter_whose_node_alone_reads_not_ready_is_not_down() {
        let mut v = fleet();
        node_mut(&mut v, "n2").ready = false;
        let why = v.down_evidence("n2").unwrap_err();
        assert!(why.contains("renewed its node Lease"), "{why}");
        // Its node Lease aged too (a Lease writer): its own view still vouches.
        node_mut(&mut v, "n2").lease_renewed_at = Some(NOW - 1_000);
        let why = v.down_evidence("n2").unwrap_err();
        assert!(why.contains("says its member is healthy"), "{why}");
    }

    #[test]
    fn a_voter_is_down_once_its_lease_is_stale_and_its_member_unvouched() {
        let mut v = fleet();
        take_down(&mut v, "n2");
        assert!(v.down("n2"), "{:?}", v.down_evidence("n2"));
        assert!(!v.down("n1"));
    }

    #[test]
    fn with_no_view_of_etcd_no_voter_is_taken_for_down() {
        let mut v = fleet();
        take_down(&mut v, "n2");
        for n in &mut v.nodes {
            if let Some(h) = n.host.as_mut() {
                h.etcd = None;
            }
        }
        let why = v.down_evidence("n2").unwrap_err();
        assert!(why.contains("no server reported"), "{why}");
    }

    #[test]
    fn a_voter_node_with_no_member_in_etcd_is_not_down_but_no_voter() {
        let mut v = fleet();
        let mut fake = voter("a9", 99);
        fake.ready = false;
        fake.lease_renewed_at = None;
        v.nodes.push(fake);
        let why = v.down_evidence("a9").unwrap_err();
        assert!(why.contains("lists no member"), "{why}");
    }

    #[test]
    fn a_forged_not_ready_on_a_live_voter_is_counted_ready_and_shown_as_disputed() {
        let mut v = fleet();
        node_mut(&mut v, "n2").ready = false;
        node_mut(&mut v, "n5").ready = false;
        let mut weighed = v.clone();
        weigh_evidence(&mut weighed);
        let n2 = weighed.node("n2").unwrap();
        assert!(n2.ready && n2.ready_disputed.is_some());
        assert!(crate::is_healthy_voter(n2));
        // An agent has no member to vouch for.
        assert!(!weighed.node("n5").unwrap().ready);
        assert!(weighed.node("n5").unwrap().ready_disputed.is_none());
        assert!(weighed.node("n1").unwrap().ready_disputed.is_none());
        // Its node Lease aged too (a Lease writer): vouched for, not down,
        // but not counted Ready.
        let mut aged = v.clone();
        node_mut(&mut aged, "n2").lease_renewed_at = Some(NOW - 1_000);
        weigh_evidence(&mut aged);
        let n2 = aged.node("n2").unwrap();
        assert!(!n2.ready && n2.ready_disputed.is_some());
        assert!(!aged.down("n2"));
        // Its own view read longer ago than the node Lease's grace (a host
        // that may have just died): not counted Ready either.
        let mut old = v.clone();
        let grace = old.settings.heartbeat_grace;
        if let Some(e) = node_mut(&mut old, "n2")
            .host
            .as_mut()
            .and_then(|h| h.etcd.as_mut())
        {
            e.read_at = NOW - grace - 1;
        }
        weigh_evidence(&mut old);
        assert!(!old.node("n2").unwrap().ready);
    }

    #[test]
    fn a_voter_whose_own_view_aged_out_keeps_its_not_ready() {
        let mut v = fleet();
        take_down(&mut v, "n2");
        weigh_evidence(&mut v);
        assert!(v.node("n2").unwrap().ready_disputed.is_none());
    }

    #[test]
    fn not_ready_is_counted_from_the_controllers_first_sighting_not_the_nodes_time() {
        let mut s = Sightings::default();
        let mut v = fleet();
        node_mut(&mut v, "n2").ready = false;
        node_mut(&mut v, "n2").ready_since = Some(i64::MIN);
        s.apply(&mut v);
        assert_eq!(v.node("n2").unwrap().ready_since, Some(NOW));
        // Later, still NotReady: the first sighting stands.
        v.now = NOW + 50;
        node_mut(&mut v, "n2").ready_since = Some(0);
        s.apply(&mut v);
        assert_eq!(v.node("n2").unwrap().ready_since, Some(NOW));
        // Ready again, then NotReady: counted afresh.
        node_mut(&mut v, "n2").ready = true;
        s.apply(&mut v);
        v.now = NOW + 60;
        node_mut(&mut v, "n2").ready = false;
        s.apply(&mut v);
        assert_eq!(v.node("n2").unwrap().ready_since, Some(NOW + 60));
        // A Node gone is forgotten.
        v.nodes.retain(|n| n.name != "n2");
        s.apply(&mut v);
        assert!(!s.seen.contains_key("n2"));
    }
}
