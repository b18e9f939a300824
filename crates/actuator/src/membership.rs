//! Whether etcd still lists this host's member, known only from a reading
//! of etcd itself ([`hostdecide::HostState::etcd_lists_member`]).
//!
//! More in docs/internals.md, "actuator: membership".

use std::time::Instant;

use clock::Clock;
use etcdaccess::Endpoint;
use host::addresses::LocalAddresses;
use protocol::etcd::{EtcdView, Member, MemberId};
use tracing::{info, warn};

use crate::etcdreport::{FAILED_READ_PACE, READ_PACE, REQUEST_BOUND};

/// How many servers one reading asks at most before it gives up (each
/// bounded by [`etcdaccess::read`]'s own bound): the loop is held for at
/// most this many bounds, once per [`FAILED_READ_PACE`].
pub const MAX_CANDIDATES: usize = 3;

/// Whether `view` lists this host's member: by its name (`member`, from
/// `server/db/etcd/name`), or, for a member added but never started (etcd
/// lists it with no name), by a peer address of this host. `None` when
/// the view does not list it but its member served no linearizable read:
/// a member cut off from the quorum may list an old membership, or none.
pub fn listed(view: &EtcdView, member: Option<&str>, addresses: &LocalAddresses) -> Option<bool> {
    if view.members.iter().any(|m| is_own(m, member, addresses)) {
        Some(true)
    } else {
        view.healthy.then_some(false)
    }
}

/// Whether `m` is this host's member: named `member`, or unnamed with a
/// peer address of this host.
pub fn is_own(m: &Member, member: Option<&str>, addresses: &LocalAddresses) -> bool {
    member.is_some_and(|mine| m.name == mine)
        || (m.name.is_empty()
            && m.peer_host()
                .and_then(|h| h.parse().ok())
                .is_some_and(|ip| addresses.contains(ip)))
}

/// The other servers' etcd endpoints to read through, reached as
/// `template` is (its scheme, port and certificate): the client URLs of
/// `view`'s other members, then `extra` hosts (the joined server, the
/// server Nodes), each once, the local member's own URL left out.
pub fn candidates(template: &Endpoint, view: Option<&EtcdView>, extra: &[String]) -> Vec<Endpoint> {
    let port = template
        .url
        .rsplit_once(':')
        .and_then(|(_, p)| p.trim_end_matches('/').parse::<u16>().ok())
        .unwrap_or(2379);
    let scheme = template.url.split_once("://").map_or("https", |(s, _)| s);
    let mut urls: Vec<String> = Vec::new();
    if let Some(v) = view {
        for m in v.members.iter().filter(|m| m.id != v.member) {
            urls.extend(m.client_urls.iter().cloned());
        }
    }
    for host in extra {
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        urls.push(format!("{scheme}://{host}:{port}"));
    }
    let mut seen = Vec::new();
    for url in urls {
        // The local member's own URL was read already (a k3s member
        // advertises only its node address; a test's may be loopback).
        if url != template.url && !seen.contains(&url) {
            seen.push(url);
        }
    }
    seen.into_iter()
        .map(|url| Endpoint {
            url,
            timeout: REQUEST_BOUND,
            ..template.clone()
        })
        .collect()
}

/// The last reading of the member list through another server.
pub struct RemoteReader {
    /// What the pace is measured on, and the reading stamped with.
    clock: Clock,
    last: Option<Instant>,
    answer: Option<bool>,
    failing: Option<String>,
}

impl RemoteReader {
    /// No reading made yet; paced on `clock`.
    pub fn new(clock: Clock) -> Self {
        Self {
            clock,
            last: None,
            answer: None,
            failing: None,
        }
    }

    /// The last answer (none: not read, or no server answered).
    pub fn answer(&self) -> Option<bool> {
        self.answer
    }

    /// Forgets the answer (the datastore is gone: nothing left to ask).
    pub fn forget(&mut self) {
        *self = Self::new(self.clock.clone());
    }

    /// Reads through `candidates` in turn (at most [`MAX_CANDIDATES`],
    /// each bounded) until one gives an answer, at most once per
    /// [`READ_PACE`] ([`FAILED_READ_PACE`] after a failure).
    pub async fn read(
        &mut self,
        candidates: &[Endpoint],
        member: Option<&str>,
        addresses: &LocalAddresses,
    ) -> Option<bool> {
        let pace = if self.failing.is_some() {
            FAILED_READ_PACE
        } else {
            READ_PACE
        };
        if self.last.is_some_and(|t| self.clock.since(t) < pace) {
            return self.answer;
        }
        self.last = Some(self.clock.now());
        let now = self.clock.unix_secs();
        let mut errors = Vec::new();
        for ep in candidates.iter().take(MAX_CANDIDATES) {
            match etcdaccess::read(ep, now).await {
                Ok(v) => match listed(&v, member, addresses) {
                    Some(answer) => {
                        if self.failing.take().is_some() || self.answer != Some(answer) {
                            info!(
                                through = %ep.url,
                                "etcd, read through another server, {} this host's member",
                                if answer { "lists" } else { "no longer lists" }
                            );
                        }
                        self.answer = Some(answer);
                        return self.answer;
                    }
                    None => errors.push(format!("{}: its member serves no quorum read", ep.url)),
                },
                Err(e) => errors.push(e.to_string()),
            }
        }
        let why = if errors.is_empty() {
            "no other server to ask".to_string()
        } else {
            errors.join("; ")
        };
        if self.failing.as_deref() != Some(&why) {
            warn!(
                "cannot read etcd's member list through another server, so the member is not taken as gone: {why}"
            );
        }
        self.failing = Some(why);
        self.answer = None;
        None
    }
}

/// Each voting member's health, asked of the member itself through its
/// first client URL with this host's certificate (k3s gives every server
/// the same etcd client CA), each bounded by the endpoint's timeout; this
/// host's own from the view already read. A voter that does not answer
/// counts as unhealthy.
pub async fn voter_health(local: &Endpoint, view: &EtcdView, now: i64) -> Vec<(MemberId, bool)> {
    let mut health = Vec::new();
    for m in view.members.iter().filter(|m| !m.learner) {
        let healthy = if m.id == view.member {
            view.healthy
        } else {
            match m.client_urls.first() {
                Some(url) => {
                    let ep = Endpoint {
                        url: url.clone(),
                        ..local.clone()
                    };
                    etcdaccess::read(&ep, now).await.is_ok_and(|v| v.healthy)
                }
                None => false,
            }
        };
        health.push((m.id, healthy));
    }
    health
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::etcd::MemberId;
    use std::time::Duration;

    fn member(id: u64, name: &str, peer: &str, client: &str) -> Member {
        Member {
            id: MemberId(id),
            name: name.into(),
            peer_urls: vec![format!("https://{peer}:2380")],
            client_urls: vec![format!("https://{client}:2379")],
            learner: false,
        }
    }

    fn view(members: Vec<Member>, healthy: bool) -> EtcdView {
        EtcdView {
            read_at: 1,
            member: members[0].id,
            leader: Some(members[0].id),
            members,
            raft_term: 1,
            raft_index: 1,
            db_size: 1,
            alarms: vec![],
            healthy,
        }
    }

    fn here() -> LocalAddresses {
        LocalAddresses::parse("  |-- 10.0.0.4\n     /32 host LOCAL\n", "")
    }

    #[test]
    fn a_member_is_not_listed_only_by_a_view_whose_member_serves_a_quorum_read() {
        let v = view(vec![member(1, "a-00000001", "10.0.0.1", "10.0.0.1")], true);
        assert_eq!(listed(&v, Some("me-00000004"), &here()), Some(false));
        let cut_off = view(v.members.clone(), false);
        assert_eq!(listed(&cut_off, Some("me-00000004"), &here()), None);
        // Listed is listed, however the member fares.
        let mut ms = v.members.clone();
        ms.push(member(4, "me-00000004", "10.0.0.4", "10.0.0.4"));
        assert_eq!(
            listed(&view(ms.clone(), false), Some("me-00000004"), &here()),
            Some(true)
        );
        // A host that does not know its member's name (no datastore name
        // file) is not listed by a named member.
        assert_eq!(listed(&view(ms, true), None, &here()), Some(false));
    }

    #[test]
    fn the_other_members_then_the_joined_server_and_the_server_nodes_are_asked_each_once() {
        let template = Endpoint {
            url: "https://127.0.0.1:2379".into(),
            tls: None,
            timeout: Duration::from_secs(9),
        };
        let mut me = member(4, "me-00000004", "10.0.0.4", "10.0.0.4");
        me.client_urls.push("https://127.0.0.1:2379".into());
        let mut other = member(1, "a-00000001", "10.0.0.1", "10.0.0.1");
        other.client_urls.push("https://127.0.0.1:2379".into());
        let v = EtcdView {
            member: MemberId(4),
            ..view(vec![me, other], true)
        };
        let got: Vec<String> = candidates(
            &template,
            Some(&v),
            &["10.0.0.1".into(), "10.0.0.2".into(), "fd00::3".into()],
        )
        .into_iter()
        .map(|e| {
            assert_eq!(e.timeout, REQUEST_BOUND);
            e.url
        })
        .collect();
        assert_eq!(
            got,
            [
                "https://10.0.0.1:2379",
                "https://10.0.0.2:2379",
                "https://[fd00::3]:2379"
            ]
        );
    }
}
