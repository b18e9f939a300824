//! `wait-join [--url URL] [--timeout SECS]`: a bounded wait for the server
//! k3s joins through, for a network wrapper started before k3s.

use std::process::ExitCode;

use actuator::{cli::Cli, output::print};
use clock::Clock;
use protocol::JoinUrl;

use super::{settings, usage};

/// Runs `wait-join`: the URL given, else the one this host's k3s unit
/// joins through; none (the cluster's first server) is nothing to wait for.
pub(crate) fn wait_join(
    cli: &Cli,
    url: Option<&str>,
    timeout: u64,
    rt: &tokio::runtime::Runtime,
    clock: &Clock,
) -> anyhow::Result<ExitCode> {
    let url = match url.filter(|u| !u.trim().is_empty()) {
        Some(u) => Some(JoinUrl::parse(u.trim()).map_err(usage)?),
        None => {
            let s = settings(cli, None, None)?;
            let paths = &s.host(clock, rt.handle()).paths;
            match host::join::server_unit(paths).or_else(|| host::join::agent_unit(paths)) {
                None => None,
                Some(c) => Some(
                    c.url()
                        .map_err(|why| usage(anyhow::anyhow!("{}: {why}", c.source())))?,
                ),
            }
        }
    };
    let Some(url) = url else {
        print(
            cli.output,
            &[
                "no join server is configured (the cluster's first server): nothing to wait for"
                    .into(),
            ],
            &serde_json::json!({ "ok": true, "url": null }),
        );
        return Ok(ExitCode::SUCCESS);
    };
    let bound = std::time::Duration::from_secs(timeout);
    let took = rt
        .block_on(actuator::join::wait_join(&url, bound, clock))
        .map_err(|why| anyhow::anyhow!("{why}; nothing was changed"))?;
    print(
        cli.output,
        &[format!(
            "{url} is reachable (after {} ms)",
            took.as_millis()
        )],
        &serde_json::json!({ "ok": true, "url": url.as_str(), "tookMs": took.as_millis() as u64 }),
    );
    Ok(ExitCode::SUCCESS)
}
