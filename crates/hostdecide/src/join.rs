//! The server a server host names in `server:` when it steps down.
//!
//! At the etcd-only level (`disable-apiserver`) k3s's embedded agent
//! bootstraps from `server:` when one is set, and only from it
//! (`pkg/cli/server/server.go`): a `server:` naming a host that has left
//! (a voter swapped out since this host joined through it, or the first
//! server an installer named) keeps the step-down's restart from ever
//! coming up. The agent the host finishes as bootstraps from its own
//! `server:` (or `K3S_URL`) the same way. So the step-down names a voter
//! that is there, read from etcd's own member list just before it, in the
//! join drop-in both units read, unless what each unit names already is
//! one. The server unit may name none (the cluster's first server
//! bootstraps from its own supervisor); the agent must name one.

use std::net::IpAddr;

use protocol::{JoinUrl, etcd::EtcdView};

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

/// The choice for a host whose server unit would bootstrap from `server`
/// and whose agent from `agent`, with `view` its own member's reading of
/// etcd. A voter counts when it has started (it has client URLs), is not
/// this host's member, and its peer URL names an address (the supervisor
/// listens on the same host, at the port the host's `server:` names, 6443
/// when it names none). The name kept is the server unit's where it is a
/// voter, else the lowest member id's, so that every retry names the same.
pub fn for_step_down(view: &EtcdView, server: Configured<'_>, agent: Configured<'_>) -> JoinChoice {
    let mut voters: Vec<(protocol::etcd::MemberId, IpAddr)> = view
        .voters()
        .filter(|m| m.id != view.member && !m.client_urls.is_empty())
        .filter_map(|m| Some((m.id, m.peer_host()?.parse().ok()?)))
        .collect();
    voters.sort();
    let names_a_voter = |c: Configured<'_>| match c {
        Configured::Url(u) => {
            let host = u.host().trim_start_matches('[').trim_end_matches(']');
            voters.iter().any(|(_, ip)| host.parse() == Ok(*ip))
        }
        Configured::Nothing | Configured::NotAUrl => false,
    };
    let server_ok = server == Configured::Nothing || names_a_voter(server);
    if server_ok && names_a_voter(agent) {
        return JoinChoice::Keep;
    }
    let port = |c: Configured<'_>| match c {
        Configured::Url(u) => Some(u.port()),
        _ => None,
    };
    let port = port(server).or(port(agent)).unwrap_or(6443);
    if let Configured::Url(u) = server
        && names_a_voter(server)
    {
        return JoinChoice::Name(u.clone());
    }
    voters.first().map_or(JoinChoice::NoVoter, |(_, ip)| {
        JoinChoice::Name(JoinUrl::for_address(*ip, port))
    })
}

#[cfg(test)]
mod tests;
