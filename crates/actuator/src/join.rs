//! The server a host's k3s bootstraps from: named afresh at a step-down
//! ([`for_step_down`]), and waited for by a network wrapper before k3s
//! starts ([`wait_join`], `fleet-role-actuator wait-join`).

use std::time::Duration;

use clock::Clock;
use etcdview::Endpoint;
use protocol::{
    JoinUrl,
    join::{Configured, JoinChoice},
};
use tracing::info;

/// The voter a step-down must name in `server:`, read from the local
/// member's list just before it (`None`: what the host names will do). A
/// failure changes nothing, and says why: the step-down does not begin.
/// Runs on the step's blocking thread.
pub fn for_step_down(
    host: &host::Host,
    handle: &tokio::runtime::Handle,
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
    let view = handle
        .block_on(etcdview::read(local, clock.unix_secs()))
        .map_err(|e| {
            format!("could not read etcd's members to check the server k3s bootstraps from: {e}")
        })?;
    let sources = [&server, &agent]
        .iter()
        .filter_map(|c| c.as_ref().map(host::join::Configured::source))
        .collect::<Vec<_>>()
        .join(", ");
    match protocol::join::for_step_down(&view, configured(&urls[0]), configured(&urls[1])) {
        JoinChoice::Keep => Ok(None),
        JoinChoice::Name(url) => {
            info!(
                "the server k3s bootstraps from ({}) is no voter for one of its units: the step-down names {url}",
                if sources.is_empty() {
                    "none set"
                } else {
                    &sources
                }
            );
            Ok(Some(url))
        }
        JoinChoice::NoVoter => Err(format!(
            "the server k3s bootstraps from ({}) is no voter, and etcd lists no other started voter to name",
            if sources.is_empty() {
                "none set"
            } else {
                &sources
            }
        )),
    }
}

/// How often [`wait_join`] asks again.
const RETRY: Duration = Duration::from_secs(1);

/// The longest one `/ping` may take.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// Asks the supervisor at `url` for `/ping` once, bounded.
///
/// Any TLS certificate is taken: this says only that a k3s server is there
/// and answers; the join itself checks the cluster's CA against the token.
pub async fn ping(url: &JoinUrl) -> Result<(), String> {
    let uri: http::Uri = url.as_str().parse().map_err(|e| format!("{e}"))?;
    let mut config = kube::Config::new(uri);
    config.accept_invalid_certs = true;
    config.connect_timeout = Some(PING_TIMEOUT);
    config.read_timeout = Some(PING_TIMEOUT);
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    let request = http::Request::get("/ping")
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    match tokio::time::timeout(PING_TIMEOUT, client.request_text(request)).await {
        Ok(Ok(body)) if body.trim() == "pong" => Ok(()),
        Ok(Ok(body)) => Err(format!(
            "answered {:?}, not pong",
            body.chars().take(40).collect::<String>()
        )),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} s", PING_TIMEOUT.as_secs())),
    }
}

/// Waits until the supervisor at `url` answers `/ping` (every k3s server
/// serves it from its start, an etcd-only one included), at most `bound`.
/// Returns how long that took.
///
/// # Errors
/// When `bound` passes first: the last reason the server did not answer.
pub async fn wait_join(url: &JoinUrl, bound: Duration, clock: &Clock) -> Result<Duration, String> {
    let start = clock.now();
    loop {
        let why = match ping(url).await {
            Ok(()) => return Ok(clock.since(start)),
            Err(e) => e,
        };
        if clock.since(start) + RETRY > bound {
            return Err(format!(
                "{url} did not answer /ping within {} s (last: {why})",
                bound.as_secs()
            ));
        }
        tokio::time::sleep(RETRY).await;
    }
}
