//! The server a host's k3s bootstraps from: named afresh at a step-down
//! ([`for_step_down`]), waited for by a network wrapper before k3s starts
//! ([`wait_join`], `fleet-role-actuator wait-join`), and reached by a
//! standby's preflight ([`reachable`]).

use std::time::Duration;

use clock::Clock;
use etcdaccess::Endpoint;
use hostdecide::join::{Configured, JoinChoice};
use protocol::JoinUrl;
use tracing::info;

/// The voter a step-down must name in `server:`, read from the local
/// member's list just before it (`None`: what the host names will do). A
/// failure changes nothing, and says why: the step-down does not begin.
/// It reads the host's unit files and one etcd view (bounded by the
/// endpoint's timeout), on the watcher's task.
pub async fn for_step_down(
    host: &host::Host,
    local: &Endpoint,
    clock: &Clock,
) -> Result<Option<JoinUrl>, String> {
    let server = host::join::server_unit(&host.paths);
    let agent = host::join::agent_unit(&host.paths);
    let urls = [&server, &agent].map(|c| c.as_ref().map(host::join::Configured::url));
    fn configured(u: &Option<Result<JoinUrl, String>>) -> Configured<'_> {
        match u {
            None => Configured::Nothing,
            Some(Ok(url)) => Configured::Url(url),
            Some(Err(_)) => Configured::NotAUrl,
        }
    }
    let view = etcdaccess::read(local, clock.unix_secs())
        .await
        .map_err(|e| {
            format!("could not read etcd's members to check the server k3s bootstraps from: {e}")
        })?;
    let mut sources = [&server, &agent]
        .iter()
        .filter_map(|c| c.as_ref().map(host::join::Configured::source))
        .collect::<Vec<_>>()
        .join(", ");
    if sources.is_empty() {
        sources = "none set".into();
    }
    match hostdecide::join::for_step_down(&view, configured(&urls[0]), configured(&urls[1])) {
        JoinChoice::Keep => Ok(None),
        JoinChoice::Name(url) => {
            info!(
                "the server k3s bootstraps from ({sources}) is no voter for one of its units: the step-down names {url}"
            );
            Ok(Some(url))
        }
        JoinChoice::NoVoter => Err(format!(
            "the server k3s bootstraps from ({sources}) is no voter, and etcd lists no other started voter to name"
        )),
    }
}

/// How often [`wait_join`] asks again.
const RETRY: Duration = Duration::from_secs(1);

/// The longest one connection attempt of [`wait_join`] may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether something accepts a TCP connection at `url`'s address and port
/// (k3s's supervisor, on a server), within `bound`: the route to the server
/// is there. What answers is not checked: the join itself checks the
/// cluster's CA and the token.
pub async fn reachable(url: &JoinUrl, bound: Duration) -> Result<(), String> {
    let host = url.host().trim_start_matches('[').trim_end_matches(']');
    let connect = tokio::net::TcpStream::connect((host, url.port()));
    match tokio::time::timeout(bound, connect).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no connection within {} s", bound.as_secs())),
    }
}

/// Waits until [`reachable`] says the server at `url` is there (every k3s
/// server's supervisor listens from its start, an etcd-only one's
/// included), at most `bound`. Returns how long that took.
///
/// # Errors
/// When `bound` passes first: the last reason the server was not reached.
pub async fn wait_join(url: &JoinUrl, bound: Duration, clock: &Clock) -> Result<Duration, String> {
    let start = clock.now();
    loop {
        let why = match reachable(url, CONNECT_TIMEOUT.min(bound)).await {
            Ok(()) => return Ok(clock.since(start)),
            Err(e) => e,
        };
        if clock.since(start) + RETRY > bound {
            return Err(format!(
                "{url} was not reached within {} s (last: {why})",
                bound.as_secs()
            ));
        }
        tokio::time::sleep(RETRY).await;
    }
}
