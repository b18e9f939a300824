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

/// Runs `script` with `sh -c` inside `host`, within [`INSIDE`].
fn inside(lab: &SystemdLab, host: &str, script: &str) -> anyhow::Result<()> {
    let m = lab.machine(host)?;
    tokio::task::block_in_place(|| m.exec_ok(&["sh", "-c", script], INSIDE))
        .with_context(|| format!("{script} on {host}"))?;
    Ok(())
}

/// Fires a host fault of `kind` on `host`.
pub fn fire(lab: &mut SystemdLab, kind: FaultKind, host: &str) -> anyhow::Result<()> {
    match kind {
        // systemd starts a killed unit again (Restart=always, as shipped).
        FaultKind::KillActuator => inside(
            lab,
            host,
            "systemctl kill --signal=KILL fleet-role-actuator.service",
        ),
        // Whichever k3s unit runs (one only, or none on a host between
        // roles): killing an inactive unit is no error here.
        FaultKind::KillK3s => inside(
            lab,
            host,
            "for u in k3s.service k3s-agent.service; do systemctl is-active --quiet $u && systemctl kill --signal=KILL $u; done; true",
        ),
        FaultKind::PowerOff => lab.poweroff(host),
        FaultKind::Reboot => lab.reboot(host),
        FaultKind::HardReset => lab.hard_reset(host),
        FaultKind::Cut => Ok(lab.net().cut_off(host)?),
        // A host with no etcd (an agent) or no API server freezes nothing:
        // pkill's "no process" is not an error here.
        FaultKind::FreezeEtcd => inside(lab, host, "pkill -STOP -x etcd; true"),
        FaultKind::FreezeApi => inside(lab, host, "pkill -STOP -x kube-apiserver; true"),
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
        FaultKind::FreezeEtcd => inside(lab, host, "pkill -CONT -x etcd; true"),
        FaultKind::FreezeApi => inside(lab, host, "pkill -CONT -x kube-apiserver; true"),
        FaultKind::KillActuator
        | FaultKind::KillK3s
        | FaultKind::Reboot
        | FaultKind::KillSwapController
        | FaultKind::KillLeadingRun => Ok(()),
    }
}
