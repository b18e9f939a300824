//! The `[docker]` table of the actuator's settings: present on a host
//! whose k3s runs as two Docker containers (Colima, a NAS box), absent on
//! a native host, where k3s's systemd units are switched.

use std::{path::PathBuf, time::Duration};

use serde::Deserialize;

use settings::Error as ConfigError;

/// The default Docker socket.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// The `[docker]` table as written; every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DockerFile {
    /// The Docker daemon's unix socket.
    pub socket: Option<PathBuf>,
    /// The server's container.
    pub server_container: Option<String>,
    /// The agent's container.
    pub agent_container: Option<String>,
    /// How long a stop waits after SIGTERM before Docker kills.
    pub stop_grace_secs: Option<u64>,
}

/// A Docker host's validated settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerSettings {
    /// The daemon's socket.
    pub socket: PathBuf,
    /// The two containers.
    pub containers: host::docker::Containers,
    /// A stop's grace (k3s's units: systemd's 90 s).
    pub stop_grace: Duration,
}

impl DockerFile {
    /// Validates the table: an absolute socket path, two distinct
    /// container names Docker would take.
    pub fn resolve(self) -> Result<DockerSettings, ConfigError> {
        let socket = self.socket.unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET));
        if !socket.is_absolute() {
            return Err(ConfigError::invalid(
                "docker.socket",
                "must be an absolute path (the Docker daemon's unix socket)",
            ));
        }
        let defaults = host::docker::Containers::default();
        let server = self.server_container.unwrap_or(defaults.server);
        let agent = self.agent_container.unwrap_or(defaults.agent);
        for (key, name) in [
            ("docker.server_container", &server),
            ("docker.agent_container", &agent),
        ] {
            if !protocol::validate::is_container_name(name) {
                return Err(ConfigError::invalid(
                    key,
                    "must be a Docker container name: a letter or digit, then letters, digits, _, . or -",
                ));
            }
        }
        if server == agent {
            return Err(ConfigError::invalid(
                "docker.agent_container",
                "must differ from docker.server_container: a switch starts one in place of the other",
            ));
        }
        let stop_grace = settings::seconds("docker.stop_grace_secs", self.stop_grace_secs, 90)?;
        Ok(DockerSettings {
            socket,
            containers: host::docker::Containers { server, agent },
            stop_grace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_docker_table_names_the_default_socket_containers_and_grace() {
        let d = DockerFile::default().resolve().unwrap();
        assert_eq!(d.socket, PathBuf::from("/var/run/docker.sock"));
        assert_eq!(d.containers, host::docker::Containers::default());
        assert_eq!(d.stop_grace, Duration::from_secs(90));
    }

    #[test]
    fn a_relative_socket_a_bad_container_name_or_one_container_for_both_is_refused_naming_the_key()
    {
        let bad = |f: DockerFile, key: &str| {
            let e = f.resolve().unwrap_err().to_string();
            assert!(e.contains(key), "{e}");
        };
        bad(
            DockerFile {
                socket: Some("docker.sock".into()),
                ..Default::default()
            },
            "docker.socket",
        );
        for name in ["", "-k3s", "k3s server", "k3s/x", "k3s\n"] {
            bad(
                DockerFile {
                    server_container: Some(name.into()),
                    ..Default::default()
                },
                "docker.server_container",
            );
        }
        bad(
            DockerFile {
                server_container: Some("k3s".into()),
                agent_container: Some("k3s".into()),
                ..Default::default()
            },
            "docker.agent_container",
        );
        bad(
            DockerFile {
                stop_grace_secs: Some(604_801),
                ..Default::default()
            },
            "docker.stop_grace_secs",
        );
    }
}
