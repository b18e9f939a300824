//! A container as the daemon shows it, and as one is asked for.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A container's state, as `GET /containers/{name}/json` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// Its id.
    pub id: String,
    /// Its name, without Docker's leading `/`.
    pub name: String,
    /// Its status.
    pub status: Status,
    /// The main process's pid while it runs, else 0.
    pub pid: u32,
    /// The main process's exit code once it exited.
    pub exit_code: i64,
    /// How often Docker's restart policy started it again.
    pub restart_count: u64,
    /// The image it was created from, as asked.
    pub image: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its restart policy; a policy this client does not know reads as
    /// [`RestartPolicy::Other`].
    pub restart: RestartPolicy,
    /// When its process last started, as the daemon wrote it (RFC 3339;
    /// Docker's zero time for a container never started). A start that has
    /// run changes it, so a start not yet run can be told from one that ran
    /// and ended.
    pub started_at: String,
    /// How it runs: its entry point, binds, network and privilege, what a
    /// one-off container of the same program needs to see what it sees.
    pub run: RunSettings,
}

/// How a container runs, as inspect shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunSettings {
    /// Its entry point (`None`: the image's).
    pub entrypoint: Option<Vec<String>>,
    /// Its binds, `source:target[:options]`.
    pub binds: Vec<String>,
    /// Its network mode.
    pub network_mode: String,
    /// Whether it runs privileged.
    pub privileged: bool,
}

/// A container's status, Docker's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Created, never started.
    Created,
    /// Running.
    Running,
    /// Frozen (`docker pause`).
    Paused,
    /// Being started again by its restart policy.
    Restarting,
    /// Being removed.
    Removing,
    /// Its process ended.
    Exited,
    /// Docker failed to stop or remove it.
    Dead,
    /// A word this client does not know (a newer daemon), kept as said.
    Other(String),
}

impl Status {
    /// Docker's word for it.
    pub fn parse(word: &str) -> Self {
        match word {
            "created" => Self::Created,
            "running" => Self::Running,
            "paused" => Self::Paused,
            "restarting" => Self::Restarting,
            "removing" => Self::Removing,
            "exited" => Self::Exited,
            "dead" => Self::Dead,
            other => Self::Other(crate::error::one_line(other)),
        }
    }

    /// Whether its process may run now or soon: running, paused or being
    /// restarted. A switch that must never have two k3s at once treats each
    /// of these as running.
    pub fn may_run(&self) -> bool {
        matches!(self, Self::Running | Self::Paused | Self::Restarting)
    }
}

/// The part of Docker's inspect answer read here.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Inspected {
    id: String,
    name: String,
    state: InspectedState,
    #[serde(default)]
    restart_count: u64,
    config: InspectedConfig,
    #[serde(default)]
    host_config: InspectedHostConfig,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct InspectedHostConfig {
    #[serde(default)]
    restart_policy: InspectedPolicy,
    #[serde(default)]
    binds: Option<Vec<String>>,
    #[serde(default)]
    network_mode: String,
    #[serde(default)]
    privileged: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct InspectedPolicy {
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct InspectedState {
    status: String,
    #[serde(default)]
    pid: u32,
    #[serde(default)]
    exit_code: i64,
    #[serde(default)]
    started_at: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct InspectedConfig {
    #[serde(default)]
    image: String,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    entrypoint: Option<Vec<String>>,
}

impl From<Inspected> for Container {
    fn from(i: Inspected) -> Self {
        Self {
            id: i.id,
            name: i.name.trim_start_matches('/').to_string(),
            status: Status::parse(&i.state.status),
            pid: i.state.pid,
            exit_code: i.state.exit_code,
            restart_count: i.restart_count,
            image: i.config.image,
            labels: i.config.labels.unwrap_or_default(),
            restart: RestartPolicy::parse(&i.host_config.restart_policy.name),
            started_at: i.state.started_at,
            run: RunSettings {
                entrypoint: i.config.entrypoint,
                binds: i.host_config.binds.unwrap_or_default(),
                network_mode: i.host_config.network_mode,
                privileged: i.host_config.privileged,
            },
        }
    }
}

/// Docker's restart policy for a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestartPolicy {
    /// Never started again by Docker.
    #[default]
    No,
    /// Started again whenever it exits, and with the daemon, unless it was
    /// stopped by hand (`unless-stopped`): the container counterpart of an
    /// enabled unit with `Restart=always`.
    UnlessStopped,
    /// `always`, `on-failure`, or a word this client does not know: some
    /// policy that may start the container again. Never asked for here.
    Other,
}

impl RestartPolicy {
    /// Docker's word for it (`""` and `no` are both no policy).
    pub fn parse(word: &str) -> Self {
        match word {
            "" | "no" => Self::No,
            "unless-stopped" => Self::UnlessStopped,
            _ => Self::Other,
        }
    }

    /// Whether Docker may start the container on its own (after it exits,
    /// or with the daemon): any policy but `no`. A switch treats such a
    /// container as an enabled unit.
    pub fn starts_on_its_own(self) -> bool {
        self != Self::No
    }

    /// Docker's word, for a create or an update. [`RestartPolicy::Other`]
    /// is never asked for: it reads as `no`.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Self::UnlessStopped => "unless-stopped",
            Self::No | Self::Other => "no",
        }
    }
}

/// A container to create: what `docker create` would be told.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerSpec {
    /// The image.
    pub image: String,
    /// The entry point (`None`: the image's own).
    pub entrypoint: Option<Vec<String>>,
    /// The command's arguments after the entry point.
    pub cmd: Vec<String>,
    /// `NAME=value` environment entries.
    pub env: Vec<String>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `source:target[:options]` binds and named volumes.
    pub binds: Vec<String>,
    /// tmpfs mounts: target and options.
    pub tmpfs: BTreeMap<String, String>,
    /// `host`, `none`, `bridge` or a network's name.
    pub network_mode: String,
    /// Whether it runs privileged (k3s in a container needs it).
    pub privileged: bool,
    /// Its restart policy.
    pub restart: RestartPolicy,
    /// The hostname inside (with `network_mode` `host`, the host's own).
    pub hostname: Option<String>,
}

/// The body of `POST /containers/create`.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct CreateBody<'a> {
    image: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    entrypoint: Option<&'a [String]>,
    cmd: &'a [String],
    env: &'a [String],
    labels: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hostname: Option<&'a str>,
    host_config: HostConfig<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct HostConfig<'a> {
    binds: &'a [String],
    tmpfs: &'a BTreeMap<String, String>,
    network_mode: &'a str,
    privileged: bool,
    restart_policy: Policy,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Policy {
    pub(crate) name: &'static str,
}

impl ContainerSpec {
    /// The JSON body Docker's create takes.
    pub(crate) fn body(&self) -> serde_json::Value {
        let network_mode = if self.network_mode.is_empty() {
            "none"
        } else {
            &self.network_mode
        };
        serde_json::to_value(CreateBody {
            image: &self.image,
            entrypoint: self.entrypoint.as_deref(),
            cmd: &self.cmd,
            env: &self.env,
            labels: &self.labels,
            hostname: self.hostname.as_deref(),
            host_config: HostConfig {
                binds: &self.binds,
                tmpfs: &self.tmpfs,
                network_mode,
                privileged: self.privileged,
                restart_policy: Policy {
                    name: self.restart.word(),
                },
            },
        })
        .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inspect_answer_reads_as_the_container_with_its_name_unslashed() {
        let raw = r#"{"Id":"abc","Name":"/k3s","RestartCount":2,
            "State":{"Status":"running","Running":true,"Pid":42,"ExitCode":0,
                "StartedAt":"2026-12-03T14:20:01.5Z"},
            "Config":{"Image":"k3s:lab","Labels":{"role":"server"},"Entrypoint":["/bin/k3s"]},
            "HostConfig":{"RestartPolicy":{"Name":"always"},"Binds":["/d:/var/lib/rancher/k3s"],
                "NetworkMode":"host","Privileged":true}}"#;
        let c: Container = serde_json::from_str::<Inspected>(raw).unwrap().into();
        assert_eq!(c.name, "k3s");
        assert_eq!(c.status, Status::Running);
        assert_eq!((c.pid, c.restart_count), (42, 2));
        assert_eq!(c.labels["role"], "server");
        assert_eq!(c.started_at, "2026-12-03T14:20:01.5Z");
        assert_eq!(c.restart, RestartPolicy::Other);
        assert!(c.restart.starts_on_its_own(), "always starts it on its own");
        assert_eq!(
            c.run,
            RunSettings {
                entrypoint: Some(vec!["/bin/k3s".into()]),
                binds: vec!["/d:/var/lib/rancher/k3s".into()],
                network_mode: "host".into(),
                privileged: true,
            }
        );
        // An answer without a host config (an older daemon) is no policy.
        let bare = r#"{"Id":"a","Name":"/x","State":{"Status":"created"},"Config":{}}"#;
        let c: Container = serde_json::from_str::<Inspected>(bare).unwrap().into();
        assert_eq!(
            (c.restart, c.run),
            (RestartPolicy::No, RunSettings::default())
        );
    }

    #[test]
    fn a_status_docker_may_still_run_is_counted_as_running() {
        for (word, runs) in [
            ("running", true),
            ("paused", true),
            ("restarting", true),
            ("created", false),
            ("exited", false),
            ("dead", false),
            ("removing", false),
        ] {
            assert_eq!(Status::parse(word).may_run(), runs, "{word}");
        }
        assert_eq!(Status::parse("x\ny"), Status::Other("x y".into()));
    }

    #[test]
    fn a_spec_without_a_network_asks_for_none_and_names_its_restart_policy() {
        let spec = ContainerSpec {
            image: "i".into(),
            restart: RestartPolicy::UnlessStopped,
            ..Default::default()
        };
        let body = spec.body();
        assert_eq!(body["HostConfig"]["NetworkMode"], "none");
        assert_eq!(
            body["HostConfig"]["RestartPolicy"]["Name"],
            "unless-stopped"
        );
        assert!(body.get("Hostname").is_none());
    }
}
