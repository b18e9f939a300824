//! etcd's members joined with the Nodes: what the servers' own reading of
//! etcd says, beside what the Nodes say.
//!
//! More in docs/internals.md, "fleetfacts: members".

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use protocol::{
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
    /// report (or too long ago), or its Node reads NotReady.
    pub healthy: bool,
    /// Its own host's fresh view says it is healthy, whatever its Node's
    /// `Ready` reads. Not a count of quorum (a host that just died keeps
    /// its last view for a while, which `healthy` leaves out once its Node
    /// turns NotReady), but the host's own word that no other principal
    /// can write: a member it vouches for is not taken for down
    /// ([`crate::FleetView::down_evidence`]).
    pub vouched: bool,
}

/// etcd's membership as the servers report it, joined with the Nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Picture {
    /// The hosts whose fresh view was taken, sorted.
    pub reporters: Vec<String>,
    /// The members, as most of the views taken list them, each with its Node.
    pub members: Vec<MappedMember>,
    /// Hosts whose view lists other members (ids, names, peer URLs or
    /// learner flags) than the one most views agree on.
    pub disagreeing: Vec<String>,
    /// The leader, as most of the agreeing views name it.
    pub leader: Option<MemberId>,
    /// Every alarm any view reports: the member's Node (or id) and kind.
    pub alarms: Vec<String>,
    /// Fresh views left out, and why (`<node>: <reason>`): a view from a
    /// host that cannot know etcd's membership.
    pub ignored: Vec<String>,
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
    nodes
        .iter()
        .find(|n| m.belongs_to(&n.name, n.k3s.node_address.as_deref()))
}

/// Whose views [`picture`] takes, and how far ahead a reading may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trust<'a> {
    /// A view older than this many seconds does not count (it rides the
    /// heartbeat).
    pub max_age: i64,
    /// A view read more than this many seconds after now (by the
    /// controller's clock) is refused: the clocks differ by less, and a
    /// view from the future would outlive every fresh one.
    pub future_slack: i64,
    /// The swap's incoming host: its view counts for its own member's
    /// health only (a learner's Node carries no etcd label).
    pub incoming: Option<&'a str>,
}

/// Why a host's view is not taken as a picture of the membership, if it
/// is not: the Node carries no etcd label (written by k3s's server; a
/// kubelet cannot set `node-role.kubernetes.io/*` on itself, so an agent's
/// report cannot pass for a server's), or the view's own member is not
/// this Node's by k3s's member name (`<node>-<8 hex>`, and the Node's
/// `etcd.k3s.cattle.io/node-name` where it has one).
fn untrusted(host: &str, n: &NodeFacts, v: &EtcdView) -> Option<&'static str> {
    if !n.etcd_label {
        return Some("its Node carries no etcd label");
    }
    if !own_member(host, n, v) {
        return Some("its own member is not its Node's");
    }
    None
}

/// Whether the view's own member is `host`'s: named `<host>-<8 hex>`, and
/// the name the Node publishes where it publishes one.
fn own_member(host: &str, n: &NodeFacts, v: &EtcdView) -> bool {
    let Some(m) = v.member(v.member) else {
        return false;
    };
    m.node_name() == Some(host) && n.k3s.node_name.as_deref().is_none_or(|name| name == m.name)
}

/// Joins the servers' views with the Nodes. `views` are `(node, view)` as
/// the hosts reported them. Left out: a view older than `trust.max_age`
/// seconds at `now` or read more than `trust.future_slack` ahead of it,
/// one that does not [`EtcdView::check`], one of a host whose Node is not
/// Ready (a host that went down keeps its last view in its report for up
/// to `max_age`, listing the members as they were), and one a host could
/// not know ([`untrusted`]: each host writes its own report, and a
/// compromised agent would rename a ghost to itself). The incoming host's
/// view says only whether its own member is healthy.
///
/// The membership is the one most of the views taken agree on (ties go
/// to the one read last), never simply the newest view's; every view that
/// lists anything else is named as disagreeing, which shuts the gates.
pub fn picture<'a>(
    now: i64,
    trust: Trust<'_>,
    nodes: &'a [NodeFacts],
    views: &'a [(String, EtcdView)],
) -> Picture {
    let any_node = |host: &str| nodes.iter().find(|n| n.name == host);
    let recent: Vec<(&str, &NodeFacts, &EtcdView)> = views
        .iter()
        .filter(|(_, v)| v.check().is_ok() && now.saturating_sub(v.read_at) <= trust.max_age)
        .filter(|(_, v)| v.read_at <= now.saturating_add(trust.future_slack.max(0)))
        .filter_map(|(host, v)| Some((host.as_str(), any_node(host)?, v)))
        .collect();
    let fresh: Vec<(&str, &NodeFacts, &EtcdView)> =
        recent.iter().copied().filter(|(_, n, _)| n.ready).collect();
    let servers: Vec<(&str, &EtcdView)> = fresh
        .iter()
        .filter(|(host, n, v)| untrusted(host, n, v).is_none())
        .map(|(host, _, v)| (*host, *v))
        .collect();
    // The membership most views agree on; a tie goes to the one read last.
    let mut groups: BTreeMap<_, (usize, i64, &EtcdView)> = BTreeMap::new();
    for (_, v) in &servers {
        let g = groups.entry(v.membership()).or_insert((0, v.read_at, v));
        g.0 += 1;
        if v.read_at > g.1 {
            (g.1, g.2) = (v.read_at, v);
        }
    }
    let Some((membership, (_, _, chosen))) = groups
        .into_iter()
        .max_by_key(|(_, (count, newest, _))| (*count, *newest))
    else {
        return Picture::default();
    };
    // A member is healthy by its own host's view: the server that read it
    // as its local member, or the incoming host for its own member. The
    // vouching host must be the Node the agreed membership maps that member
    // to: a view that claims another member's id as its own (a ghost's)
    // vouches for nothing.
    let vouching =
        |views: &[(&'a str, &'a NodeFacts, &'a EtcdView)]| -> BTreeMap<MemberId, (&'a str, bool)> {
            views
                .iter()
                .filter(|(host, n, v)| {
                    own_member(host, n, v)
                        && (untrusted(host, n, v).is_none() || trust.incoming == Some(*host))
                })
                .filter_map(|(host, _, v)| {
                    let m = v.member(v.member)?;
                    (node_of(m, nodes).map(|n| n.name.as_str()) == Some(*host))
                        .then_some((v.member, (*host, v.healthy)))
                })
                .collect()
        };
    let own = vouching(&fresh);
    let own_any = vouching(&recent);
    let says_healthy = |own: &BTreeMap<MemberId, (&str, bool)>, m: &Member, node: Option<&str>| {
        own.get(&m.id)
            .is_some_and(|(host, ok)| *ok && node == Some(*host))
    };
    let members = chosen
        .members
        .iter()
        .map(|m| {
            let node = node_of(m, nodes).map(|n| n.name.clone());
            MappedMember {
                member: m.clone(),
                healthy: says_healthy(&own, m, node.as_deref()),
                vouched: says_healthy(&own_any, m, node.as_deref()),
                node,
            }
        })
        .collect();
    let mut disagreeing: Vec<String> = servers
        .iter()
        .filter(|(_, v)| v.membership() != membership)
        .map(|(n, _)| (*n).to_string())
        .collect();
    disagreeing.sort();
    // The leader most of the agreeing views name (a change of leader
    // between two readings is no disagreement).
    let mut leaders: BTreeMap<Option<MemberId>, (usize, i64)> = BTreeMap::new();
    for (_, v) in servers.iter().filter(|(_, v)| v.membership() == membership) {
        let l = leaders.entry(v.leader).or_insert((0, v.read_at));
        l.0 += 1;
        l.1 = l.1.max(v.read_at);
    }
    let leader = leaders
        .into_iter()
        .max_by_key(|(_, k)| *k)
        .and_then(|(l, _)| l);
    let mut alarms: BTreeSet<String> = BTreeSet::new();
    for (_, v) in &servers {
        for a in &v.alarms {
            let who = v
                .member(a.member)
                .and_then(|m| node_of(m, nodes))
                .map_or_else(|| a.member.to_string(), |n| n.name.clone());
            alarms.insert(format!("{} on {who}", protocol::text::one_line(&a.kind)));
        }
    }
    let mut reporters: Vec<String> = servers.iter().map(|(n, _)| (*n).to_string()).collect();
    reporters.sort();
    let mut ignored: Vec<String> = fresh
        .iter()
        .filter(|(host, _, _)| trust.incoming != Some(*host))
        .filter_map(|(host, n, v)| untrusted(host, n, v).map(|why| format!("{host}: {why}")))
        .collect();
    ignored.sort();
    Picture {
        reporters,
        members,
        disagreeing,
        leader,
        alarms: alarms.into_iter().collect(),
        ignored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::etcd::Alarm;

    fn trust() -> Trust<'static> {
        Trust {
            max_age: 30,
            future_slack: 5,
            incoming: None,
        }
    }

    /// A server's Node (k3s's etcd label; an address for the agent n4 is
    /// none, and no label).
    fn node(name: &str, addr: Option<&str>) -> NodeFacts {
        let mut n = NodeFacts {
            name: name.into(),
            ready: true,
            etcd_label: addr.is_some(),
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
        let p = picture(100, trust(), &nodes(), &all_report(95));
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
        let p = picture(100, trust(), &nodes(), &views);
        assert_eq!(p.reporters, ["n1", "n2"]);
        assert_eq!(p.voters_after(None), (3, 2));
        let p = picture(100, trust(), &nodes(), &views[..1]);
        assert_eq!(p.voters_after(None), (3, 1));
        // One that reports itself unhealthy is down too.
        let mut views = all_report(95);
        views[1].1.healthy = false;
        assert_eq!(
            picture(100, trust(), &nodes(), &views).voters_after(None),
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
        let p = picture(100, trust(), &nodes(), &views);
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
        let p = picture(100, trust(), &nodes(), &views);
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
        let p = picture(100, trust(), &ns, &views);
        assert_eq!(p.reporters, ["n1", "n2"]);
        assert!(p.disagreeing.is_empty(), "{:?}", p.disagreeing);
        assert_eq!(p.voters_after(None), (3, 2));
        // Ready again, its view counts (and here disagrees).
        assert_eq!(picture(100, trust(), &nodes(), &views).disagreeing, ["n3"]);
    }

    #[test]
    fn a_server_whose_node_reads_not_ready_still_vouches_for_its_member_until_its_view_ages_out() {
        // `Ready` is anyone's with `nodes/status` to write: it makes the
        // member count unhealthy, never unvouched.
        let mut ns = nodes();
        ns[2].ready = false;
        let p = picture(100, trust(), &ns, &all_report(95));
        let m = p.of_node("n3").unwrap();
        assert!(!m.healthy && m.vouched);
        // A host that really went down stops reporting: its view ages out.
        let mut views = all_report(95);
        views[2].1.read_at = 100 - trust().max_age - 1;
        let p = picture(100, trust(), &ns, &views);
        let m = p.of_node("n3").unwrap();
        assert!(!m.healthy && !m.vouched);
        // A view claiming another member's id vouches for nothing.
        let mut views = all_report(95);
        views[2].1.member = MemberId(1);
        let p = picture(100, trust(), &ns, &views);
        assert!(!p.of_node("n1").unwrap().vouched || views[0].0 == "n1");
        assert!(!p.of_node("n3").unwrap().vouched);
    }

    #[test]
    fn servers_that_list_other_members_disagree() {
        let mut views = all_report(95);
        let mut other = members();
        other[2].learner = true;
        views[2].1 = view_of(3, 94, other);
        let p = picture(100, trust(), &nodes(), &views);
        assert_eq!(p.disagreeing, ["n3"]);
    }

    #[test]
    fn alarms_from_any_view_are_named_by_node() {
        let mut views = all_report(95);
        views[0].1.alarms.push(Alarm {
            member: MemberId(2),
            kind: "NOSPACE".into(),
        });
        let p = picture(100, trust(), &nodes(), &views);
        assert_eq!(p.alarms, ["NOSPACE on n2"]);
    }

    #[test]
    fn no_fresh_view_is_an_unknown_picture_and_a_view_that_does_not_check_is_left_out() {
        assert!(!picture(100, trust(), &nodes(), &all_report(10)).known());
        let mut views = all_report(95);
        for (_, v) in &mut views {
            v.leader = Some(MemberId(99)); // names no member
        }
        assert!(!picture(100, trust(), &nodes(), &views).known());
        // A view from the future past the bound is not taken either.
        assert!(!picture(100, trust(), &nodes(), &all_report(200)).known());
    }

    #[test]
    fn an_agents_view_counts_for_nothing_however_new_and_is_named_as_ignored() {
        // A compromised agent (n4, no etcd label) maps the ghost onto itself
        // and calls everyone healthy, with the newest reading.
        let mut ms = members();
        ms.push(member(5, "gone", "10.0.0.9", false));
        let mut views: Vec<(String, EtcdView)> = (1..=3)
            .map(|i| (format!("n{i}"), view_of(i, 95, ms.clone())))
            .collect();
        let mut forged = ms.clone();
        forged[3] = member(5, "n4", "10.0.0.9", false);
        views.push(("n4".into(), view_of(5, 99, forged)));
        let p = picture(100, trust(), &nodes(), &views);
        assert_eq!(p.reporters, ["n1", "n2", "n3"]);
        assert_eq!(p.ignored, ["n4: its Node carries no etcd label"]);
        assert!(p.disagreeing.is_empty());
        let ghosts: Vec<u64> = p.ghosts().map(|m| m.member.id.0).collect();
        assert_eq!(ghosts, [5]);
        assert_eq!(p.voters_after(None), (4, 3));
        // Alone, it is no picture at all.
        assert!(!picture(100, trust(), &nodes(), &views[3..]).known());
    }

    #[test]
    fn a_servers_view_whose_own_member_is_not_its_nodes_is_ignored() {
        let mut views = all_report(95);
        // n3 reports n1's member as its own.
        views[2].1.member = MemberId(1);
        let p = picture(100, trust(), &nodes(), &views);
        assert_eq!(p.reporters, ["n1", "n2"]);
        assert_eq!(p.ignored, ["n3: its own member is not its Node's"]);
        // n3's member is then vouched for by no one.
        assert_eq!(p.voters_after(None), (3, 2));
        // A Node publishing another member name than the view's own.
        let mut ns = nodes();
        ns[1].k3s.node_name = Some("n2-ffffffff".into());
        let p = picture(100, trust(), &ns, &all_report(95));
        assert_eq!(p.ignored, ["n2: its own member is not its Node's"]);
        ns[1].k3s.node_name = Some("n2-00000002".into());
        assert!(
            picture(100, trust(), &ns, &all_report(95))
                .ignored
                .is_empty()
        );
    }

    #[test]
    fn a_view_renaming_a_member_or_moving_its_peer_address_disagrees() {
        for change in [
            (|m: &mut Member| m.name = "n9-00000002".into()) as fn(&mut Member),
            |m: &mut Member| m.peer_urls = vec!["https://10.9.9.9:2380".into()],
        ] {
            let mut views = all_report(95);
            change(&mut views[2].1.members[1]);
            let p = picture(100, trust(), &nodes(), &views);
            assert_eq!(p.disagreeing, ["n3"]);
        }
    }

    #[test]
    fn the_membership_is_what_most_views_list_not_the_newest() {
        let mut views = all_report(95);
        let mut fewer = members();
        fewer.remove(1);
        views[2].1 = view_of(3, 99, fewer);
        let p = picture(100, trust(), &nodes(), &views);
        assert_eq!(p.members.len(), 3, "{p:?}");
        assert_eq!(p.disagreeing, ["n3"]);
    }

    #[test]
    fn a_view_read_ahead_of_now_by_more_than_the_slack_is_refused() {
        assert!(picture(100, trust(), &nodes(), &all_report(105)).known());
        assert!(!picture(100, trust(), &nodes(), &all_report(106)).known());
    }

    #[test]
    fn the_incoming_hosts_view_vouches_for_its_own_member_only() {
        let mut ms = members();
        ms.push(member(4, "n4", "10.0.0.4", true));
        let mut views: Vec<(String, EtcdView)> = (1..=3)
            .map(|i| (format!("n{i}"), view_of(i, 95, ms.clone())))
            .collect();
        // The learner n4 reports, listing itself a voter and no n1.
        let mut own = ms.clone();
        own[3].learner = false;
        own.remove(0);
        let mut learner = view_of(4, 99, own);
        learner.leader = Some(MemberId(2));
        views.push(("n4".into(), learner));
        let unnamed = picture(100, trust(), &nodes(), &views);
        assert!(!unnamed.of_node("n4").unwrap().healthy);
        let t = Trust {
            incoming: Some("n4"),
            ..trust()
        };
        let p = picture(100, t, &nodes(), &views);
        assert!(p.of_node("n4").unwrap().healthy);
        assert!(
            p.of_node("n4").unwrap().member.learner,
            "the servers' listing stands"
        );
        assert_eq!(p.reporters, ["n1", "n2", "n3"]);
        assert!(p.disagreeing.is_empty() && p.ignored.is_empty());
    }

    #[test]
    fn a_view_claiming_a_ghosts_id_as_its_own_member_vouches_for_nothing() {
        // The incoming host (an agent's Node, no etcd label) reports a view
        // whose own member carries the ghost's id under its own name.
        let mut ms = members();
        ms.push(member(5, "gone", "10.0.0.9", false));
        let mut views: Vec<(String, EtcdView)> = (1..=3)
            .map(|i| (format!("n{i}"), view_of(i, 95, ms.clone())))
            .collect();
        let mut claimed = ms.clone();
        claimed[3].name = "n4-00000005".into();
        views.push(("n4".into(), view_of(5, 99, claimed)));
        let t = Trust {
            incoming: Some("n4"),
            ..trust()
        };
        let p = picture(100, t, &nodes(), &views);
        let ghost = p.ghosts().next().expect("the ghost stays a ghost");
        assert!(!ghost.healthy, "{p:?}");
        assert_eq!(p.voters_after(None), (4, 3));
        // A server claiming it the same way is ignored outright.
        let mut views = views[..3].to_vec();
        views[2].1.member = MemberId(5);
        views[2].1.members[3].name = "n3-00000005".into();
        let p = picture(100, trust(), &nodes(), &views);
        assert!(p.ghosts().all(|m| !m.healthy), "{p:?}");
    }
}
