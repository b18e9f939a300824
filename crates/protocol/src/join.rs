//! The server a server host names in `server:` when it steps down.
//!
//! At the etcd-only level (`disable-apiserver`) k3s's embedded agent
//! bootstraps from `server:` when one is set, and only from it
//! (`pkg/cli/server/server.go`): a `server:` naming a host that has left
//! (a voter swapped out since this host joined through it, or the first
//! server an installer named) keeps the step-down's restart from ever
//! coming up. So the step-down names a voter that is there, read from etcd's
//! own member list just before it, unless what the host names already is one.
//! With no `server:` at all (the cluster's first server) k3s bootstraps from
//! its own supervisor, and nothing is written.

use std::net::IpAddr;

use crate::{JoinUrl, etcd::EtcdView};

/// What the step-down does with the host's `server:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinChoice {
    /// Leave it: none is set, or it names a voter that is there.
    Keep,
    /// Name this voter instead (the join drop-in rewritten).
    Name(JoinUrl),
    /// It names no voter that is there, and no other voter has an address
    /// to name: the step-down is refused before any change.
    NoVoter,
}

/// What the host's k3s is configured to bootstrap from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Configured<'a> {
    /// No `server:` anywhere: its own supervisor.
    Nothing,
    /// This server.
    Url(&'a JoinUrl),
    /// A value that is no join URL: k3s reaches no server with it either.
    NotAUrl,
}

/// The choice for a host whose k3s would bootstrap from `current`, with
/// `view` its own member's reading of etcd. A voter counts when it has
/// started (it has client URLs), is not this host's member, and its peer
/// URL names an address (the supervisor listens on the same host, at the
/// port `current` names, 6443 when it names none). Of several, the lowest member id, so that every
/// retry names the same one.
pub fn for_step_down(view: &EtcdView, current: Configured<'_>) -> JoinChoice {
    let (named, port) = match current {
        Configured::Nothing => return JoinChoice::Keep,
        Configured::Url(u) => (
            u.host().trim_start_matches('[').trim_end_matches(']'),
            u.port(),
        ),
        Configured::NotAUrl => ("", 6443),
    };
    let mut voters: Vec<(crate::etcd::MemberId, IpAddr)> = view
        .voters()
        .filter(|m| m.id != view.member && !m.client_urls.is_empty())
        .filter_map(|m| Some((m.id, m.peer_host()?.parse().ok()?)))
        .collect();
    voters.sort();
    if voters.iter().any(|(_, ip)| named.parse() == Ok(*ip)) {
        return JoinChoice::Keep;
    }
    voters.first().map_or(JoinChoice::NoVoter, |(_, ip)| {
        JoinChoice::Name(JoinUrl::for_address(*ip, port))
    })
}

#[cfg(test)]
#[path = "join_tests.rs"]
mod tests;
