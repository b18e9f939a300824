//! Firing a host fault on the lab and healing it. Every call is bounded
//! (the machine's own bounds: a boot within 180 s, a `systemctl` or
//! `pkill` inside within 30 s), and an error says which fault on which
//! host could not be done.

use std::time::Duration;

use anyhow::Context;

use super::schedule::FaultKind;
use crate::systemd_lab::SystemdLab;

/// The bound of a command inside a host.
const INSIDE: Duration = Duration::from_secs(30);

/// Runs `args` inside `host`, within [`INSIDE`]: its standard output; a
/// failure status is an error.
fn run(lab: &SystemdLab, host: &str, args: &[&str]) -> anyhow::Result<String> {
    let m = lab.machine(host)?;
    let out = tokio::task::block_in_place(|| m.exec_ok(args, INSIDE))
        .with_context(|| format!("{} on {host}", args.join(" ")))?;
    Ok(out.stdout)
}

/// Signals the processes named `name` inside `host`; whether there was
/// one (pkill's exit 1: none matched).
fn signal(lab: &SystemdLab, host: &str, signal: &str, name: &str) -> anyhow::Result<bool> {
    let m = lab.machine(host)?;
    let args = ["pkill", signal, "-x", name];
    let out = tokio::task::block_in_place(|| m.exec(&args, INSIDE))
        .with_context(|| format!("{} on {host}", args.join(" ")))?;
    match out.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => anyhow::bail!("{} on {host}: {}", args.join(" "), out.stderr.trim()),
    }
}

/// Fires a host fault of `kind` on `host`: whether it acted on anything (a
/// freeze on a host with no etcd, or no API server, does nothing; nor does
/// a kill of k3s on a host between roles).
pub fn fire(lab: &mut SystemdLab, kind: FaultKind, host: &str) -> anyhow::Result<bool> {
    match kind {
        // systemd starts a killed unit again (Restart=always, as shipped).
        FaultKind::KillActuator => {
            let kill = [
                "systemctl",
                "kill",
                "--signal=KILL",
                "fleet-role-actuator.service",
            ];
            run(lab, host, &kill).map(|_| true)
        }
        // Whichever k3s unit runs (none on a host between roles).
        FaultKind::KillK3s => {
            let script = "for u in k3s.service k3s-agent.service; do systemctl is-active --quiet $u && systemctl kill --signal=KILL $u && echo killed; done; true";
            Ok(run(lab, host, &["sh", "-c", script])?.contains("killed"))
        }
        FaultKind::PowerOff => lab.poweroff(host).map(|()| true),
        FaultKind::Reboot => lab.reboot(host).map(|()| true),
        FaultKind::HardReset => lab.hard_reset(host).map(|()| true),
        FaultKind::Cut => Ok(lab.net().cut_off(host).map(|()| true)?),
        FaultKind::FreezeEtcd => signal(lab, host, "-STOP", "etcd"),
        FaultKind::FreezeApi => signal(lab, host, "-STOP", "kube-apiserver"),
        FaultKind::KillSwapController | FaultKind::KillLeadingRun => {
            anyhow::bail!("{} is no host fault", kind.name())
        }
    }
}

/// Ends a host fault of `kind` on `host` (nothing for the kills and the
/// reboot, over when fired).
pub fn heal(lab: &mut SystemdLab, kind: FaultKind, host: &str) -> anyhow::Result<()> {
    match kind {
        FaultKind::PowerOff | FaultKind::HardReset => lab.boot(host).map(drop),
        FaultKind::Cut => Ok(lab.net().restore(host)?),
        FaultKind::FreezeEtcd => signal(lab, host, "-CONT", "etcd").map(drop),
        FaultKind::FreezeApi => signal(lab, host, "-CONT", "kube-apiserver").map(drop),
        FaultKind::KillActuator
        | FaultKind::KillK3s
        | FaultKind::Reboot
        | FaultKind::KillSwapController
        | FaultKind::KillLeadingRun => Ok(()),
    }
}
