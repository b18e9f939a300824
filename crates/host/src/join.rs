//! The server this host's k3s bootstraps from (`server:`), as k3s would
//! read it for either unit, and whether fleet-role's join drop-in decides it.
//!
//! k3s turns every config file's keys into flags, a later file winning
//! (`pkg/configfilearg/parser.go`), and a flag beats the `K3S_URL`
//! environment variable install.sh writes for each unit. So a unit's server
//! is the last config file's `server:` ([`crate::k3s_config`]'s order), else
//! `K3S_URL` from that unit's environment files (a later file winning, as
//! systemd reads them). Both units read the same config files: fleet-role's
//! join drop-in names the server for the two at once.

use std::path::PathBuf;

use protocol::JoinUrl;

use crate::{HostPaths, k3s_config, paths::JOIN_DROPIN};

/// The server unit's environment files, in systemd's order (install.sh's
/// unit names all three): read for `K3S_URL` only.
pub const SERVER_ENV_FILES: &[&str] = &[
    "etc/default/k3s",
    "etc/sysconfig/k3s",
    "etc/systemd/system/k3s.service.env",
];

/// The agent unit's environment files, in systemd's order.
pub const AGENT_ENV_FILES: &[&str] = &[
    "etc/default/k3s-agent",
    "etc/sysconfig/k3s-agent",
    "etc/systemd/system/k3s-agent.service.env",
];

/// A unit's server as configured: the value and the file that sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured {
    /// The value as written (a join URL or not: see [`Configured::url`]).
    pub value: String,
    /// The file that sets it.
    pub file: PathBuf,
    /// Set by `K3S_URL` in an environment file rather than `server:`.
    pub from_env: bool,
}

impl Configured {
    /// The value as a join URL, or why k3s would reach no server with it.
    pub fn url(&self) -> Result<JoinUrl, String> {
        JoinUrl::parse(self.value.trim()).map_err(|e| e.to_string())
    }

    /// Where it is set, for a message: `server: in FILE` or `K3S_URL in FILE`.
    pub fn source(&self) -> String {
        let key = if self.from_env { "K3S_URL" } else { "server:" };
        format!("{key} in {}", self.file.display())
    }
}

/// The last config file's `server:`, fleet-role's join drop-in included.
/// An unusable file sets nothing readable here (eligibility counts it).
fn from_config_files(paths: &HostPaths) -> Option<Configured> {
    #[derive(Default, serde::Deserialize)]
    struct ServerKey {
        server: Option<String>,
    }
    k3s_config::read(paths).into_iter().rev().find_map(|f| {
        let map = f.content.ok()?;
        // A value of a type k3s would not take still sets the key: it reads
        // as no URL rather than as no server.
        let value = match map.get::<ServerKey>() {
            Ok(ServerKey { server: Some(s) }) => s,
            Ok(ServerKey { server: None }) => return None,
            Err(_) => "(a value k3s would not take)".to_string(),
        };
        Some(Configured {
            value,
            file: f.path,
            from_env: false,
        })
    })
}

/// The last `K3S_URL=` of `files` (a later file winning).
fn from_env_files(paths: &HostPaths, files: &[&str]) -> Option<Configured> {
    env_value(paths, files, &["K3S_URL"]).map(|(_, value, file)| Configured {
        value,
        file,
        from_env: true,
    })
}

/// The last non-empty assignment of one of `keys` in the environment files
/// `files` (a later line and a later file winning, as systemd reads them):
/// the key, its value unquoted, and the file.
pub(crate) fn env_value(
    paths: &HostPaths,
    files: &[&str],
    keys: &[&str],
) -> Option<(String, String, PathBuf)> {
    let mut found = None;
    for rel in files {
        let file = paths.at(rel);
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        if let Some((key, value)) = env_assignment(&text, keys) {
            found = Some((key.to_string(), value.to_string(), file));
        }
    }
    found
}

/// The last non-empty assignment of one of `keys` in the text of one
/// environment file (`KEY=value` or `export KEY=value` per line, a later
/// line winning, quotes around the value removed): the key and the value.
/// These files are root's (install.sh writes them, an operator or a
/// provisioning tool edits them), and what they set is passed on to a
/// [`JoinUrl`] check, never used as it is.
pub fn env_assignment<'a>(text: &'a str, keys: &[&str]) -> Option<(&'a str, &'a str)> {
    let mut found = None;
    for line in text.lines().map(str::trim) {
        let line = line.strip_prefix("export ").unwrap_or(line);
        if let Some((key, v)) = line.split_once('=')
            && keys.contains(&key)
        {
            let v = v.trim().trim_matches(['"', '\'']);
            if !v.is_empty() {
                found = Some((key, v));
            }
        }
    }
    found
}

/// The server `k3s server` would start with: `None` when none is set (the
/// cluster's first server bootstraps from its own supervisor).
pub fn server_unit(paths: &HostPaths) -> Option<Configured> {
    from_config_files(paths).or_else(|| from_env_files(paths, SERVER_ENV_FILES))
}

/// The server `k3s agent` would bootstrap from: `None` when none is set
/// (an agent with none does not start).
pub fn agent_unit(paths: &HostPaths) -> Option<Configured> {
    from_config_files(paths).or_else(|| agent_env(paths))
}

/// `K3S_URL` in the agent unit's environment files.
pub(crate) fn agent_env(paths: &HostPaths) -> Option<Configured> {
    from_env_files(paths, AGENT_ENV_FILES)
}

/// The config file sorting after fleet-role's join drop-in that sets
/// `server:`, if any: a join drop-in written now would not be what k3s reads.
pub fn overridden_by(paths: &HostPaths) -> Option<PathBuf> {
    let ours = paths.k3s_dropins().join(JOIN_DROPIN);
    match from_config_files(paths) {
        Some(c) if c.file.starts_with(paths.k3s_dropins()) && c.file > ours => Some(c.file),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
