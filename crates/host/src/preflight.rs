//! Whether this agent host could join as a server, were it promoted: the
//! check an eligible standby reports before any swap picks it, so that a
//! host that cannot join is refused before the first write rather than
//! found after `start_wait_secs` and a rollback.
//!
//! More in docs/internals.md, "host: preflight".

use std::path::Path;

use crate::{HostPaths, eligibility, join, k3s_config};

/// The least free space a host needs where k3s keeps its datastore: etcd's
/// default quota (2 GiB) is the largest its copy of the cluster's data can
/// grow to.
pub const MIN_FREE_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// What the host holds that decides whether it could join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinConfig {
    /// Where the server unit's token is set, if anywhere.
    pub token: Option<String>,
    /// Free bytes where k3s keeps its datastore (`server/db`, or its
    /// nearest existing parent: an operator may give etcd a disk of its
    /// own there), or why they could not be read.
    pub free: Result<u64, String>,
    /// The agent's keys, for the later demotion.
    pub agent: eligibility::AgentConfig,
}

/// Reads the token's place, the free space and the agent's keys.
pub fn read(paths: &HostPaths) -> JoinConfig {
    JoinConfig {
        token: token_source(paths),
        free: free_bytes(&paths.etcd_dir()),
        agent: eligibility::read(paths),
    }
}

/// Where the server unit would take its token from: a config file's
/// `token`/`token-file`, else `K3S_TOKEN`/`K3S_TOKEN_FILE` in its
/// environment files. Only the place: the token is never read here.
fn token_source(paths: &HostPaths) -> Option<String> {
    let from_files = k3s_config::read(paths).into_iter().rev().find_map(|f| {
        let map = f.content.ok()?;
        let key = map
            .keys()
            .iter()
            .find(|k| *k == "token" || *k == "token-file" || *k == "t")?;
        Some(format!("{key}: in {}", f.path.display()))
    });
    from_files.or_else(|| {
        join::env_value(
            paths,
            join::SERVER_ENV_FILES,
            &["K3S_TOKEN", "K3S_TOKEN_FILE"],
        )
        .map(|(key, _, file)| format!("{key} in {}", file.display()))
    })
}

/// Free bytes (for an unprivileged user) on the filesystem of `dir`, or of
/// its nearest existing parent.
fn free_bytes(dir: &Path) -> Result<u64, String> {
    let existing = dir
        .ancestors()
        .find(|d| d.exists())
        .ok_or_else(|| format!("{}: no part of it exists", dir.display()))?;
    let s = rustix::fs::statvfs(existing).map_err(|e| format!("{}: {e}", existing.display()))?;
    Ok(s.f_bavail.saturating_mul(s.f_frsize))
}

/// Why the datastore's disk is too small for a copy of etcd, if it is:
/// `free` as [`JoinConfig::free`] holds it.
pub fn room_reason(free: &Result<u64, String>) -> Option<String> {
    match free {
        Ok(free) if *free < MIN_FREE_BYTES => Some(format!(
            "{} MiB free where k3s keeps its datastore, under the {} MiB a copy of etcd may need",
            free / (1024 * 1024),
            MIN_FREE_BYTES / (1024 * 1024)
        )),
        Ok(_) => None,
        Err(why) => Some(format!("the free space could not be read: {why}")),
    }
}

/// Why this host's datastore has no room for a promotion now, read now
/// (the promotion's own check: the disk may have filled since the host
/// last reported itself eligible).
pub fn datastore_short(paths: &HostPaths) -> Option<String> {
    room_reason(&free_bytes(&paths.etcd_dir()))
}

/// Why this host could not join as a server; empty when it could.
/// `server` says whether a server was reached (`Err` with why not), or is
/// `None` where that was not asked.
pub fn assess(config: &JoinConfig, server: Option<&Result<(), String>>) -> Vec<String> {
    let mut reasons = Vec::new();
    if config.token.is_none() {
        reasons.push(
            "k3s server would have no join token: set token: in k3s's config (both roles take it) or K3S_TOKEN in k3s.service.env; k3s-agent.service.env is read by the agent only".to_string(),
        );
    }
    reasons.extend(room_reason(&config.free));
    if let Some(Err(why)) = server {
        reasons.push(format!("no k3s server could be reached: {why}"));
    }
    // Judged on its keys: once a voter, its step-down names its server.
    for r in eligibility::assess(&config.agent, "", None, eligibility::Judged::KeysOnly) {
        reasons.push(format!("once promoted it could never be demoted: {r}"));
    }
    reasons
}

#[cfg(test)]
mod tests;
