//! etcd's members joined with the Nodes: what the servers' own reading of
//! etcd says, beside what the Nodes say.
//!
//! The Nodes do not tell the whole truth about etcd (a learner's Node has
//! no etcd metadata; a member whose Node was deleted is a ghost no Node
//! shows; `Ready` is not etcd's health). Only the hosts can read etcd, so
//! each server's actuator reports its member's view ([`EtcdView`]); this
//! file joins those views with the Nodes into one [`Picture`], and the
//! gates decide on it:
//!
//! - each member is mapped to its Node by k3s's member name
//!   (`<node>-<8 hex>`), confirmed by its peer address where the Node
//!   publishes one (`etcd.k3s.cattle.io/node-address`);
//! - a member is healthy only by its own host's fresh view (a linearizable
//!   read served); a member whose host does not report, or reports too
//!   long ago, counts as down;
//! - the servers' views must agree on the membership; a view older than the
//!   bound does not count at all.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::{
    etcd::{EtcdView, Member, MemberId},
    view::NodeFacts,
};

/// One member, with the Node it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MappedMember {
    /// The member as etcd lists it.
    pub member: Member,
    /// Its Node, if one matches.
    pub node: Option<String>,
    /// Healthy by its own host's fresh view; `false` when its host did not
    /// report (or too long ago).
    pub healthy: bool,
}

/// etcd's membership as the servers report it, joined with the Nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Picture {
    /// The hosts whose fresh view was taken, sorted.
    pub reporters: Vec<String>,
    /// The members, as the freshest view lists them, each with its Node.
    pub members: Vec<MappedMember>,
    /// Hosts whose view lists other members (or other learner flags) than
    /// the freshest one.
    pub disagreeing: Vec<String>,
    /// The leader, as the freshest view knows it.
    pub leader: Option<MemberId>,
    /// Every alarm any view reports: the member's Node (or id) and kind.
    pub alarms: Vec<String>,
}

impl Picture {
    /// Whether any fresh view was reported at all.
    pub fn known(&self) -> bool {
        !self.reporters.is_empty()
    }

    /// Members no Node matches.
    pub fn ghosts(&self) -> impl Iterator<Item = &MappedMember> {
        self.members.iter().filter(|m| m.node.is_none())
    }

    /// The learners.
    pub fn learners(&self) -> impl Iterator<Item = &MappedMember> {
        self.members.iter().filter(|m| m.member.learner)
    }

    /// The member of `node`, if it has one.
    pub fn of_node(&self, node: &str) -> Option<&MappedMember> {
        self.members
            .iter()
            .find(|m| m.node.as_deref() == Some(node))
    }

    /// Voters and healthy voters once the member of `removed` is gone (all
    /// of them with `None`): etcd's own quorum arithmetic, over its members.
    pub fn voters_after(&self, removed: Option<&str>) -> (usize, usize) {
        let staying = self
            .members
            .iter()
            .filter(|m| !m.member.learner)
            .filter(|m| removed.is_none() || m.node.as_deref() != removed);
        staying.fold((0, 0), |(v, h), m| (v + 1, h + usize::from(m.healthy)))
    }
}

/// The Node `m` belongs to: its name's Node, if that Node exists and, when
/// it publishes an etcd address, the member's peer address is that one.
fn node_of<'a>(m: &Member, nodes: &'a [NodeFacts]) -> Option<&'a NodeFacts> {
    let name = m.node_name()?;
    let n = nodes.iter().find(|n| n.name == name)?;
    match (n.k3s.node_address.as_deref(), m.peer_host()) {
        (Some(addr), Some(host)) if addr != host => None,
        _ => Some(n),
    }
}

/// Joins the servers' views with the Nodes. `views` are `(node, view)` as
/// the hosts reported them; a view older than `max_age` seconds at `now`,
/// one that does not [`EtcdView::check`], and one of a host whose Node is
/// not Ready are left out: a host that went down keeps its last view in
/// its report for up to `max_age`, listing the members as they were.
pub fn picture(
    now: i64,
    max_age: i64,
    nodes: &[NodeFacts],
    views: &[(String, EtcdView)],
) -> Picture {
    let fresh: Vec<&(String, EtcdView)> = views
        .iter()
        .filter(|(_, v)| v.check().is_ok() && now.saturating_sub(v.read_at) <= max_age)
        .filter(|(_, v)| v.read_at <= now.saturating_add(max_age))
        .filter(|(host, _)| nodes.iter().any(|n| n.name == *host && n.ready))
        .collect();
    let Some((_, newest)) = fresh
        .iter()
        .max_by_key(|(n, v)| (v.read_at, std::cmp::Reverse(n.clone())))
        .map(|x| (&x.0, &x.1))
    else {
        return Picture::default();
    };
    // A member is healthy by its own host's view: the host that read it as
    // its local member, and whose Node is the one the member maps to.
    let own: BTreeMap<MemberId, bool> = fresh
        .iter()
        .filter_map(|(host, v)| {
            let m = v.member(v.member)?;
            (node_of(m, nodes).map(|n| n.name.as_str()) == Some(host.as_str()))
                .then_some((v.member, v.healthy))
        })
        .collect();
    let members = newest
        .members
        .iter()
        .map(|m| MappedMember {
            member: m.clone(),
            node: node_of(m, nodes).map(|n| n.name.clone()),
            healthy: own.get(&m.id).copied().unwrap_or(false),
        })
        .collect();
    let membership = newest.membership();
    let mut disagreeing: Vec<String> = fresh
        .iter()
        .filter(|(_, v)| v.membership() != membership)
        .map(|(n, _)| n.clone())
        .collect();
    disagreeing.sort();
    let mut alarms: BTreeSet<String> = BTreeSet::new();
    for (_, v) in &fresh {
        for a in &v.alarms {
            let who = v
                .member(a.member)
                .and_then(|m| node_of(m, nodes))
                .map_or_else(|| a.member.to_string(), |n| n.name.clone());
            alarms.insert(format!("{} on {who}", super::one_line(&a.kind)));
        }
    }
    let mut reporters: Vec<String> = fresh.iter().map(|(n, _)| n.clone()).collect();
    reporters.sort();
    Picture {
        reporters,
        members,
        disagreeing,
        leader: newest.leader,
        alarms: alarms.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcd::Alarm;

    fn node(name: &str, addr: Option<&str>) -> NodeFacts {
        let mut n = NodeFacts {
            name: name.into(),
            ready: true,
            ..NodeFacts::default()
        };
        n.k3s.node_address = addr.map(Into::into);
        n
    }

    fn member(id: u64, node: &str, ip: &str, learner: bool) -> Member {
        Member {
            id: MemberId(id),
            name: format!("{node}-0000000{id}"),
            peer_urls: vec![format!("https://{ip}:2380")],
            client_urls: vec![],
            learner,
        }
    }

    fn members() -> Vec<Member> {
        vec![
            member(1, "n1", "10.0.0.1", false),
            member(2, "n2", "10.0.0.2", false),
            member(3, "n3", "10.0.0.3", false),
        ]
    }

    fn view_of(me: u64, at: i64, members: Vec<Member>) -> EtcdView {
        EtcdView {
            read_at: at,
            member: MemberId(me),
            members,
            leader: Some(MemberId(1)),
            raft_term: 2,
            raft_index: 10,
            db_size: 1,
            alarms: vec![],
            healthy: true,
        }
    }

    fn nodes() -> Vec<NodeFacts> {
        vec![
            node("n1", Some("10.0.0.1")),
            node("n2", Some("10.0.0.2")),
            node("n3", Some("10.0.0.3")),
            node("n4", None),
        ]
    }

    fn all_report(at: i64) -> Vec<(String, EtcdView)> {
        (1..=3)
            .map(|i| (format!("n{i}"), view_of(i, at, members())))
            .collect()
    }

    #[test]
    fn every_member_maps_to_its_node_and_is_healthy_by_its_own_hosts_view() {
        let p = picture(100, 30, &nodes(), &all_report(95));
        assert_eq!(p.reporters, ["n1", "n2", "n3"]);
        assert!(p.members.iter().all(|m| m.healthy && m.node.is_some()));
        assert_eq!(p.ghosts().count(), 0);
        assert!(p.disagreeing.is_empty());
        assert_eq!(p.voters_after(None), (3, 3));
        assert_eq!(p.voters_after(Some("n1")), (2, 2));
    }

    #[test]
    fn a_member_whose_host_does_not_report_or_reports_too_long_ago_counts_as_down() {
        let mut views = all_report(95);
        views[2].1.read_at = 50; // n3's is stale
        let p = picture(100, 30, &nodes(), &views);
        assert_eq!(p.reporters, ["n1", "n2"]);
        assert_eq!(p.voters_after(None), (3, 2));
        let p = picture(100, 30, &nodes(), &views[..1]);
        assert_eq!(p.voters_after(None), (3, 1));
        // One that reports itself unhealthy is down too.
        let mut views = all_report(95);
        views[1].1.healthy = false;
        assert_eq!(
            picture(100, 30, &nodes(), &views).voters_after(None),
            (3, 2)
        );
    }

    #[test]
    fn a_learner_invisible_on_its_node_is_seen_and_mapped_by_its_name() {
        let mut ms = members();
        ms.push(member(4, "n4", "10.0.0.4", true));
        let views: Vec<(String, EtcdView)> = (1..=3)
            .map(|i| (format!("n{i}"), view_of(i, 95, ms.clone())))
            .collect();
        let p = picture(100, 30, &nodes(), &views);
        let l: Vec<_> = p.learners().collect();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].node.as_deref(), Some("n4"));
        // A learner does not vote: the quorum counts 3.
        assert_eq!(p.voters_after(None), (3, 3));
    }

    #[test]
    fn a_member_with_no_node_or_another_address_is_a_ghost() {
        let mut ms = members();
        ms.push(member(5, "gone", "10.0.0.9", false));
        ms[1].peer_urls = vec!["https://10.9.9.9:2380".into()]; // not n2's address
        let views = vec![("n1".to_string(), view_of(1, 95, ms))];
        let p = picture(100, 30, &nodes(), &views);
        let ghosts: Vec<u64> = p.ghosts().map(|m| m.member.id.0).collect();
        assert_eq!(ghosts, [2, 5]);
        // A ghost votes and, with no host to vouch for it, counts as down.
        assert_eq!(p.voters_after(None), (4, 1));
    }

    #[test]
    fn a_down_hosts_last_view_is_left_out_and_does_not_disagree() {
        let mut views = all_report(95);
        let mut old = members();
        old.push(member(4, "n4", "10.0.0.4", true));
        views[2].1 = view_of(3, 90, old);
        let mut ns = nodes();
        ns[2].ready = false;
        let p = picture(100, 30, &ns, &views);
        assert_eq!(p.reporters, ["n1", "n2"]);
        assert!(p.disagreeing.is_empty(), "{:?}", p.disagreeing);
        assert_eq!(p.voters_after(None), (3, 2));
        // Ready again, its view counts (and here disagrees).
        assert_eq!(picture(100, 30, &nodes(), &views).disagreeing, ["n3"]);
    }

    #[test]
    fn servers_that_list_other_members_disagree() {
        let mut views = all_report(95);
        let mut other = members();
        other[2].learner = true;
        views[2].1 = view_of(3, 94, other);
        let p = picture(100, 30, &nodes(), &views);
        assert_eq!(p.disagreeing, ["n3"]);
    }

    #[test]
    fn alarms_from_any_view_are_named_by_node() {
        let mut views = all_report(95);
        views[0].1.alarms.push(Alarm {
            member: MemberId(2),
            kind: "NOSPACE".into(),
        });
        let p = picture(100, 30, &nodes(), &views);
        assert_eq!(p.alarms, ["NOSPACE on n2"]);
    }

    #[test]
    fn no_fresh_view_is_an_unknown_picture_and_a_view_that_does_not_check_is_left_out() {
        assert!(!picture(100, 30, &nodes(), &all_report(10)).known());
        let mut views = all_report(95);
        for (_, v) in &mut views {
            v.leader = Some(MemberId(99)); // names no member
        }
        assert!(!picture(100, 30, &nodes(), &views).known());
        // A view from the future past the bound is not taken either.
        assert!(!picture(100, 30, &nodes(), &all_report(200)).known());
    }
}
