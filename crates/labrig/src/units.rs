//! The systemd units of a real-systemd lab host: `k3s.service` and
//! `k3s-agent.service` exactly as k3s's `install.sh` writes them
//! (`create_systemd_service_file`), and fleet-role's drop-ins and actuator
//! unit read from the checkout's `deploy/systemd/`, so what the lab tests is
//! what an operator installs.

use std::{
    fs, io,
    path::{Path, PathBuf},
};

/// Errors of writing units.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A unit file or drop-in could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One of the two k3s units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum K3sUnit {
    /// `k3s.service`: `k3s server`.
    Server,
    /// `k3s-agent.service`: `k3s agent`.
    Agent,
}

impl K3sUnit {
    /// Both, server first.
    pub const BOTH: [K3sUnit; 2] = [K3sUnit::Server, K3sUnit::Agent];

    /// The unit's name without suffix (install.sh's `SYSTEM_NAME`).
    pub fn name(self) -> &'static str {
        match self {
            K3sUnit::Server => "k3s",
            K3sUnit::Agent => "k3s-agent",
        }
    }

    /// The unit's file name (`k3s.service`).
    pub fn service(self) -> String {
        format!("{}.service", self.name())
    }

    /// The k3s subcommand it runs.
    pub fn command(self) -> &'static str {
        match self {
            K3sUnit::Server => "server",
            K3sUnit::Agent => "agent",
        }
    }

    /// The unit file as install.sh writes it for `sh install.sh server` (or
    /// `agent`) with no extra arguments and the default `BIN_DIR`
    /// (`/usr/local/bin`) and `SYSTEMD_TYPE` (`notify`). Its `ExecStart`
    /// continues over two lines, ending in a backslash before an empty line,
    /// as install.sh's `quote_indent` leaves it.
    pub fn unit_file(self) -> String {
        let name = self.name();
        let cmd = self.command();
        format!(
            "[Unit]
Description=Lightweight Kubernetes
Documentation=https://k3s.io
Wants=network-online.target
After=network-online.target

[Install]
WantedBy=multi-user.target

[Service]
Type=notify
EnvironmentFile=-/etc/default/%N
EnvironmentFile=-/etc/sysconfig/%N
EnvironmentFile=-/etc/systemd/system/{name}.service.env
KillMode=process
Delegate=yes
User=root
# Having non-zero Limit*s causes performance problems due to accounting overhead
# in the kernel. We recommend using cgroups to do container-local accounting.
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
TimeoutStartSec=0
Restart=always
RestartSec=5s
ExecStartPre=-/sbin/modprobe br_netfilter
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/k3s \\
    {cmd} \\

"
        )
    }

    /// The file install.sh fills with the `K3S_*` environment
    /// (`/etc/systemd/system/<unit>.service.env`), as seen inside the host.
    pub fn env_file(self) -> PathBuf {
        Path::new("/etc/systemd/system").join(format!("{}.env", self.service()))
    }
}

/// A stand-in for the seed's regrade watcher, `fleet-regrade.service`: a
/// long-running service restarted when it exits, as a watcher is. What it
/// would do (move the server between levels) is not imitated: the lab shows
/// that fleet-role's drop-in keeps it from starting on a stepped-down host
/// and that a step-down stops it.
pub const REGRADE_UNIT: &str = "[Unit]
Description=fleet-regrade (the lab's stand-in watcher)
After=k3s.service

[Install]
WantedBy=multi-user.target

[Service]
Type=simple
ExecStart=/bin/sh -c 'exec sleep infinity'
Restart=always
RestartSec=2s
";

/// The checkout's `deploy/systemd/` (fleet-role's units and drop-ins).
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/systemd")
}

fn write(path: &Path, text: &str) -> Result<()> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(io)?;
    }
    fs::write(path, text).map_err(io)
}

/// Writes both k3s units into `system_dir` (a host's `etc/systemd/system`).
pub fn write_k3s_units(system_dir: &Path) -> Result<()> {
    for u in K3sUnit::BOTH {
        write(&system_dir.join(u.service()), &u.unit_file())?;
    }
    Ok(())
}

/// Copies fleet-role's units and drop-ins from `deploy` (see [`deploy_dir`])
/// into `system_dir`: every `*.service` file and every `*.service.d/*.conf`.
/// Returns the paths written, relative to `system_dir`.
pub fn write_fleet_role_units(deploy: &Path, system_dir: &Path) -> Result<Vec<PathBuf>> {
    let read_dir = |d: &Path| {
        fs::read_dir(d).map_err(|source| Error::Io {
            path: d.to_path_buf(),
            source,
        })
    };
    let mut written = Vec::new();
    let mut entries: Vec<_> = read_dir(deploy)?.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().expect("a file name").to_owned();
        let copy = |from: &Path, rel: PathBuf, written: &mut Vec<PathBuf>| -> Result<()> {
            let text = fs::read_to_string(from).map_err(|source| Error::Io {
                path: from.to_path_buf(),
                source,
            })?;
            write(&system_dir.join(&rel), &text)?;
            written.push(rel);
            Ok(())
        };
        if p.is_dir() && name.to_string_lossy().ends_with(".service.d") {
            let mut confs: Vec<_> = read_dir(&p)?.flatten().map(|e| e.path()).collect();
            confs.sort();
            for c in confs
                .iter()
                .filter(|c| c.extension().is_some_and(|e| e == "conf"))
            {
                let rel = Path::new(&name).join(c.file_name().expect("a file name"));
                copy(c, rel, &mut written)?;
            }
        } else if p.is_file() && name.to_string_lossy().ends_with(".service") {
            copy(&p, PathBuf::from(&name), &mut written)?;
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_k3s_units_are_notify_units_that_wait_for_ever_and_always_restart() {
        for u in K3sUnit::BOTH {
            let text = u.unit_file();
            for line in [
                "Type=notify",
                "TimeoutStartSec=0",
                "KillMode=process",
                "Delegate=yes",
                "Restart=always",
                "RestartSec=5s",
                "EnvironmentFile=-/etc/default/%N",
                "EnvironmentFile=-/etc/sysconfig/%N",
            ] {
                assert!(text.lines().any(|l| l == line), "{line} in {}", u.service());
            }
            let env = format!(
                "EnvironmentFile=-/etc/systemd/system/{}.service.env",
                u.name()
            );
            assert!(text.lines().any(|l| l == env));
            assert!(text.contains(&format!(
                "ExecStart=/usr/local/bin/k3s \\\n    {} \\\n\n",
                u.command()
            )));
        }
    }

    #[test]
    fn fleet_role_units_are_copied_from_the_checkout() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_fleet_role_units(&deploy_dir(), dir.path()).unwrap();
        for want in [
            "k3s.service.d/50-fleet-role.conf",
            "k3s-agent.service.d/50-fleet-role.conf",
            "fleet-role-actuator.service",
        ] {
            assert!(
                written.iter().any(|w| w == Path::new(want)),
                "{want} in {written:?}"
            );
            assert_eq!(
                fs::read_to_string(dir.path().join(want)).unwrap(),
                fs::read_to_string(deploy_dir().join(want)).unwrap()
            );
        }
    }
}

#[cfg(test)]
mod exposure {
    use super::deploy_dir;

    /// The overall exposure `systemd-analyze security` gives: its last line,
    /// `→ Overall exposure level for NAME: 2.2 OK 🙂`.
    fn overall(text: &str) -> Option<f64> {
        let line = text
            .lines()
            .find(|l| l.contains("Overall exposure level for"))?;
        let (_, rest) = line.rsplit_once(": ")?;
        rest.split_whitespace().next()?.parse().ok()
    }

    #[test]
    fn the_exposure_line_is_read_as_systemd_analyze_prints_it() {
        let text = "✗ UMask= …  0.1\n\n→ Overall exposure level for a.service: 9.0 UNSAFE 😨\n";
        assert_eq!(overall(text), Some(9.0));
        assert_eq!(overall("no such line"), None);
    }

    /// The actuator runs as root on hosts that are often the least trusted of
    /// a cluster: its unit must stay hardened. The rating is systemd's own
    /// (`systemd-analyze security`, offline, on the file as shipped).
    #[test]
    fn the_actuators_unit_is_rated_an_exposure_of_4_or_less_by_systemd_analyze() {
        let unit = deploy_dir().join("fleet-role-actuator.service");
        let out = std::process::Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--no-pager"])
            .arg(&unit)
            .output()
            .expect("systemd-analyze (systemd 250 or later) must be installed for this test");
        let text = String::from_utf8_lossy(&out.stdout);
        let score = overall(&text).unwrap_or_else(|| {
            panic!(
                "no exposure level in systemd-analyze's output ({}):\n{text}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert!(
            score <= 4.0,
            "{} is rated {score} (more than 4.0):\n{text}",
            unit.display()
        );
    }
}
