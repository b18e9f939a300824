//! etcd's own view of the cluster, as one server's actuator read it from its
//! local member: the member list (learners included, which no Node shows),
//! the leader, the raft position, the alarms, the database size and whether
//! the member served a linearizable read.
//!
//! It travels in the host's report, so the controller reads it like any
//! other report: untrusted. [`EtcdView::check`] bounds every value before
//! anything decides on it, and the member ids are written as 16 hex digits
//! (etcd's own notation; a JSON number could not carry a `u64` exactly to
//! every reader).

use serde::{Deserialize, Serialize};

/// At most this many members in a view (etcd itself advises 7; a fleet of
/// voters plus a learner or two fits with room to spare).
pub const MAX_MEMBERS: usize = 15;
/// At most this many URLs per member, each at most [`MAX_URL`] bytes.
pub const MAX_URLS: usize = 4;
/// The longest URL kept.
pub const MAX_URL: usize = 256;
/// The longest member name (k3s's `<node>-<8 hex>`: a Node name and 9 more).
pub const MAX_NAME: usize = 263;
/// At most this many alarms.
pub const MAX_ALARMS: usize = 32;

/// The majority of `members` voting members: how many must be healthy for
/// etcd to make progress. The one quorum rule of the controller's gates and
/// the actuator's.
pub fn quorum(members: usize) -> usize {
    members / 2 + 1
}

/// Whether a cluster of `members_left` voting members with `healthy_left`
/// of them healthy keeps quorum. A cluster with no member left never does.
pub fn keeps_quorum(members_left: usize, healthy_left: usize) -> bool {
    members_left > 0 && healthy_left >= quorum(members_left)
}

/// A member id, as etcd prints it: 16 lower-case hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemberId(pub u64);

impl std::fmt::Display for MemberId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl Serialize for MemberId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for MemberId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(serde::de::Error::custom(
                "a member id is 1 to 16 hex digits",
            ));
        }
        u64::from_str_radix(&s, 16)
            .map(MemberId)
            .map_err(serde::de::Error::custom)
    }
}

/// One member as etcd lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    /// Its id.
    pub id: MemberId,
    /// Its name (empty for a member added but not started yet).
    pub name: String,
    /// Its peer URLs.
    pub peer_urls: Vec<String>,
    /// Its client URLs (empty until it started).
    pub client_urls: Vec<String>,
    /// A learner: it replicates but does not vote.
    pub learner: bool,
}

impl Member {
    /// Whether this member is the one of the Node `node`, which publishes
    /// `address` as its etcd address (`etcd.k3s.cattle.io/node-address`)
    /// or none: its name is that Node's (`<node>-<8 hex>`), and where the
    /// Node publishes an address its first peer address is that one.
    /// k3s's own rule for which member a Node stands for (its
    /// `RemovePeer` matches both).
    pub fn belongs_to(&self, node: &str, address: Option<&str>) -> bool {
        self.node_name() == Some(node)
            && match (address, self.peer_host()) {
                (Some(addr), Some(host)) => addr == host,
                _ => true,
            }
    }

    /// The host part of its first peer URL (`https://10.0.0.4:2380` gives
    /// `10.0.0.4`), which k3s matches a Node's address against.
    pub fn peer_host(&self) -> Option<&str> {
        let url = self.peer_urls.first()?;
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        let authority = rest.split('/').next().unwrap_or_default();
        let host = match authority.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or_default(),
            None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
        };
        (!host.is_empty()).then_some(host)
    }

    /// The Node name k3s's member name carries (`<node>-<8 hex>`), if it
    /// has that shape.
    pub fn node_name(&self) -> Option<&str> {
        let (node, suffix) = self.name.rsplit_once('-')?;
        (!node.is_empty() && suffix.len() == 8 && suffix.bytes().all(|b| b.is_ascii_hexdigit()))
            .then_some(node)
    }
}

/// An alarm raised on a member (`NOSPACE`, `CORRUPT`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Alarm {
    /// The member it is raised on.
    pub member: MemberId,
    /// Its kind, as etcd names it.
    pub kind: String,
}

/// One server's reading of etcd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EtcdView {
    /// When it was read (unix seconds, the host's clock).
    pub read_at: i64,
    /// The local member's id.
    pub member: MemberId,
    /// Every member.
    pub members: Vec<Member>,
    /// The leader, as the local member knows it (`None`: no leader).
    pub leader: Option<MemberId>,
    /// The raft term.
    pub raft_term: u64,
    /// The raft index the local member applied.
    pub raft_index: u64,
    /// The local member's database size, in bytes.
    pub db_size: u64,
    /// Every alarm in the cluster.
    pub alarms: Vec<Alarm>,
    /// Whether the local member served a linearizable read.
    pub healthy: bool,
}

/// Why a view is not taken as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    /// Too many members, URLs or alarms.
    #[error("{what}: {count}, more than the {max} a view may hold")]
    TooMany {
        /// What.
        what: &'static str,
        /// How many.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// A name or URL too long, or with control characters.
    #[error("a member's {what} is not plain text of at most {max} bytes")]
    BadText {
        /// What.
        what: &'static str,
        /// The bound.
        max: usize,
    },
    /// Two members with one id.
    #[error("member {0} is listed twice")]
    Duplicate(MemberId),
    /// The local member, the leader or an alarm names no listed member.
    #[error("the {what} {id} is not in the member list")]
    Unlisted {
        /// Which.
        what: &'static str,
        /// The id.
        id: MemberId,
    },
}

fn plain(s: &str, max: usize) -> bool {
    s.len() <= max && !s.chars().any(char::is_control)
}

impl EtcdView {
    /// Checks every bound and every reference; the controller decides on a
    /// view only once it passed.
    pub fn check(&self) -> Result<(), ViewError> {
        let many = |what, count, max| {
            if count > max {
                Err(ViewError::TooMany { what, count, max })
            } else {
                Ok(())
            }
        };
        many("members", self.members.len(), MAX_MEMBERS)?;
        many("alarms", self.alarms.len(), MAX_ALARMS)?;
        let mut seen = std::collections::BTreeSet::new();
        for m in &self.members {
            if !seen.insert(m.id) {
                return Err(ViewError::Duplicate(m.id));
            }
            if !plain(&m.name, MAX_NAME) {
                return Err(ViewError::BadText {
                    what: "name",
                    max: MAX_NAME,
                });
            }
            many("peer URLs", m.peer_urls.len(), MAX_URLS)?;
            many("client URLs", m.client_urls.len(), MAX_URLS)?;
            if !m
                .peer_urls
                .iter()
                .chain(&m.client_urls)
                .all(|u| plain(u, MAX_URL))
            {
                return Err(ViewError::BadText {
                    what: "URL",
                    max: MAX_URL,
                });
            }
        }
        let listed = |what, id: MemberId| {
            if seen.contains(&id) {
                Ok(())
            } else {
                Err(ViewError::Unlisted { what, id })
            }
        };
        listed("local member", self.member)?;
        if let Some(l) = self.leader {
            listed("leader", l)?;
        }
        for a in &self.alarms {
            listed("alarmed member", a.member)?;
            if !plain(&a.kind, 32) {
                return Err(ViewError::BadText {
                    what: "alarm",
                    max: 32,
                });
            }
        }
        Ok(())
    }

    /// The member called `id`.
    pub fn member(&self, id: MemberId) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    /// The voting members.
    pub fn voters(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| !m.learner)
    }

    /// The learners.
    pub fn learners(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| m.learner)
    }

    /// The members as a comparable set (id, name, peer URLs, learner flag),
    /// for comparing two servers' views: what a member list says, not when
    /// it was read. Names and peer URLs count, so a view that renames a
    /// member (to map a ghost onto some Node) disagrees with the others.
    pub fn membership(&self) -> std::collections::BTreeSet<(MemberId, &str, Vec<&str>, bool)> {
        self.members
            .iter()
            .map(|m| {
                let mut peers: Vec<&str> = m.peer_urls.iter().map(String::as_str).collect();
                peers.sort_unstable();
                (m.id, m.name.as_str(), peers, m.learner)
            })
            .collect()
    }

    /// Whether `a` and `b` say the same about the cluster's shape: the local
    /// member, the membership with its learner flags, the leader, the
    /// alarms and the health. The raft index, the database size and the
    /// time of the reading move all the time and are left out, so a host
    /// writes its report at once on a change of shape and otherwise only
    /// with its heartbeat. A view and none (etcd read, then not) differ.
    pub fn same_shape(a: Option<&EtcdView>, b: Option<&EtcdView>) -> bool {
        fn shape(v: &EtcdView) -> impl PartialEq + '_ {
            let alarms: std::collections::BTreeSet<(MemberId, &str)> = v
                .alarms
                .iter()
                .map(|a| (a.member, a.kind.as_str()))
                .collect();
            (v.member, v.membership(), v.leader, alarms, v.healthy)
        }
        match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => shape(a) == shape(b),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, name: &str, ip: &str, learner: bool) -> Member {
        Member {
            id: MemberId(id),
            name: name.into(),
            peer_urls: vec![format!("https://{ip}:2380")],
            client_urls: vec![format!("https://{ip}:2379")],
            learner,
        }
    }

    fn view() -> EtcdView {
        EtcdView {
            read_at: 100,
            member: MemberId(1),
            members: vec![
                member(1, "n1-0a1b2c3d", "10.0.0.1", false),
                member(2, "n2-0a1b2c3e", "10.0.0.2", false),
                member(3, "n4-0a1b2c3f", "10.0.0.4", true),
            ],
            leader: Some(MemberId(2)),
            raft_term: 4,
            raft_index: 900,
            db_size: 1 << 20,
            alarms: vec![],
            healthy: true,
        }
    }

    #[test]
    fn a_view_round_trips_with_member_ids_as_hex() {
        let v = view();
        let json = serde_json::to_string(&v).unwrap();
        assert!(json.contains(r#""member":"0000000000000001""#), "{json}");
        assert_eq!(serde_json::from_str::<EtcdView>(&json).unwrap(), v);
        for bad in ["", "x", "00000000000000001", "-1"] {
            let j = json.replace(
                r#""member":"0000000000000001""#,
                &format!(r#""member":"{bad}""#),
            );
            assert!(serde_json::from_str::<EtcdView>(&j).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_view_naming_unlisted_or_duplicate_members_or_too_much_is_refused() {
        assert_eq!(view().check(), Ok(()));
        let mut v = view();
        v.leader = Some(MemberId(9));
        assert_eq!(
            v.check(),
            Err(ViewError::Unlisted {
                what: "leader",
                id: MemberId(9)
            })
        );
        let mut v = view();
        v.members.push(member(2, "x", "10.0.0.9", false));
        assert_eq!(v.check(), Err(ViewError::Duplicate(MemberId(2))));
        let mut v = view();
        v.members = (1..=16)
            .map(|i| member(i, "m", "10.0.0.1", false))
            .collect();
        assert!(matches!(v.check(), Err(ViewError::TooMany { .. })));
        let mut v = view();
        v.members[0].name = "n1\u{1b}[31m".into();
        assert!(matches!(v.check(), Err(ViewError::BadText { .. })));
        let mut v = view();
        v.alarms.push(Alarm {
            member: MemberId(7),
            kind: "NOSPACE".into(),
        });
        assert!(matches!(v.check(), Err(ViewError::Unlisted { .. })));
    }

    #[test]
    fn a_views_shape_changes_with_members_learners_leader_alarms_and_health_not_with_its_progress()
    {
        let a = view();
        let same = |b: &EtcdView| EtcdView::same_shape(Some(&a), Some(b));
        // Progress alone: the same shape.
        let mut b = a.clone();
        b.read_at += 60;
        b.raft_index += 1000;
        b.raft_term += 1;
        b.db_size *= 2;
        assert!(same(&b));
        // Members listed in another order: the same shape.
        let mut b = a.clone();
        b.members.reverse();
        assert!(same(&b));
        // Each of these is a change of shape.
        let mut changes: Vec<EtcdView> = Vec::new();
        let mut b = a.clone();
        b.members[2].learner = false;
        changes.push(b);
        let mut b = a.clone();
        b.members.pop();
        changes.push(b);
        let mut b = a.clone();
        b.leader = Some(MemberId(1));
        changes.push(b);
        let mut b = a.clone();
        b.leader = None;
        changes.push(b);
        let mut b = a.clone();
        b.alarms.push(Alarm {
            member: MemberId(2),
            kind: "NOSPACE".into(),
        });
        changes.push(b);
        let mut b = a.clone();
        b.healthy = false;
        changes.push(b);
        let mut b = a.clone();
        b.member = MemberId(2);
        changes.push(b);
        for b in &changes {
            assert!(!same(b), "{b:?}");
        }
        // A view and none differ; none and none do not.
        assert!(!EtcdView::same_shape(Some(&a), None));
        assert!(!EtcdView::same_shape(None, Some(&a)));
        assert!(EtcdView::same_shape(None, None));
    }

    #[test]
    fn a_members_node_and_peer_host_are_read_as_k3s_names_them() {
        let m = member(1, "server-1-0a1b2c3d", "10.0.0.1", false);
        assert_eq!(m.node_name(), Some("server-1"));
        assert_eq!(m.peer_host(), Some("10.0.0.1"));
        let v6 = Member {
            peer_urls: vec!["https://[fd00::1]:2380".into()],
            ..m.clone()
        };
        assert_eq!(v6.peer_host(), Some("fd00::1"));
        for name in ["server-1", "server-1-xyz", "-0a1b2c3d", ""] {
            let m = Member {
                name: name.into(),
                ..m.clone()
            };
            assert_eq!(m.node_name(), None, "{name}");
        }
    }
}
