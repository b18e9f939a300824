//! The lab's hosts as a swap sees them, on either kind of lab: the stand-in
//! lab (one `systemctl` stand-in per host root) or the lab on real systemd
//! (one container booting systemd per host). A swap (`scenario.rs`) asks
//! only these questions, so the same swap runs on both.

use anyhow::Context;

use crate::{overlap, spec::LabSpec, systemd_lab::SystemdLab};

/// What a swap needs of a lab's hosts, beyond the API and etcd.
pub trait Hosts: Send + Sync {
    /// The lab's description (hosts, addresses, roots).
    fn spec(&self) -> &LabSpec;

    /// `systemctl ARGS` on a host; a failure status is an error.
    fn systemctl(&self, host: &str, args: &[&str]) -> anyhow::Result<()>;

    /// Whether a unit runs on a host (`active`, as systemd reports it).
    fn is_active(&self, host: &str, unit: &str) -> anyhow::Result<bool>;

    /// The most k3s units (server and agent) that ran at once on a host,
    /// over the lab's life: 1 (or 0) is the promise kept, 2 broken.
    fn most_k3s_at_once(&self, host: &str) -> anyhow::Result<usize>;

    /// How many pod shims run on a host now.
    fn shims(&self, host: &str) -> anyhow::Result<usize>;
}

/// How long one question to a real-systemd host may take.
const ASK: std::time::Duration = std::time::Duration::from_secs(60);

/// A Docker host's answer, asked from a blocking call on the runtime.
fn on_docker<T>(f: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

impl Hosts for SystemdLab {
    fn spec(&self) -> &LabSpec {
        &self.spec
    }

    fn systemctl(&self, host: &str, args: &[&str]) -> anyhow::Result<()> {
        if let Some(d) = self.docker_host(host) {
            // Only the actuator is a service there (k3s is its containers).
            return match args {
                [verb, "fleet-role-actuator"] => d.actuator(verb),
                _ => anyhow::bail!("{host} is a Docker host: no systemctl {}", args.join(" ")),
            };
        }
        let m = self.machine(host)?;
        let out = tokio::task::block_in_place(|| m.systemctl(args, ASK))?;
        if !out.status.success() {
            anyhow::bail!(
                "systemctl {} on {host} failed ({}): {}",
                args.join(" "),
                out.status,
                out.stderr.trim()
            );
        }
        Ok(())
    }

    fn is_active(&self, host: &str, unit: &str) -> anyhow::Result<bool> {
        if let Some(d) = self.docker_host(host) {
            return on_docker(d.is_active(unit));
        }
        let m = self.machine(host)?;
        Ok(tokio::task::block_in_place(|| m.active_state(unit))? == "active")
    }

    fn most_k3s_at_once(&self, host: &str) -> anyhow::Result<usize> {
        // From systemd's own records of each unit's state (its journal),
        // or Docker's of its containers, never from a counter the lab keeps.
        if let Some(d) = self.docker_host(host) {
            return on_docker(d.most_k3s_at_once());
        }
        let m = self.machine(host)?;
        let overlaps = tokio::task::block_in_place(|| overlap::of_k3s_units(m, ASK))
            .with_context(|| format!("the k3s units' records on {host}"))?;
        Ok(if overlaps.is_empty() { 1 } else { 2 })
    }

    fn shims(&self, host: &str) -> anyhow::Result<usize> {
        if let Some(d) = self.docker_host(host) {
            return on_docker(d.shims());
        }
        // Inside the host the shims' command lines name its own root (`/`).
        let m = self.machine(host)?;
        let out = tokio::task::block_in_place(|| {
            m.exec(
                &[
                    "pgrep",
                    "-f",
                    "^/var/lib/rancher/k3s/data/[^/]+/bin/containerd-shim",
                ],
                ASK,
            )
        })?;
        Ok(out.stdout.lines().filter(|l| !l.trim().is_empty()).count())
    }
}
