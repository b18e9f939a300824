//! Firing a host fault on the lab and healing it. Every call is bounded
//! (the machine's own bounds: a boot within 180 s, a `systemctl` or
//! `pkill` inside within 30 s), and an error says which fault on which
//! host could not be done.

use std::time::Duration;

use anyhow::Context;

use labrig::filter::{self, Rule};

use super::{
    clocks,
    schedule::{Fault, FaultKind},
};
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

/// The packet filters a network fault of `kind` puts on `host`, given the
/// voters of the moment (by name): none when it has nothing to act on (a
/// link to another voter, or a split, from a host with no vote).
fn network_rules(
    lab: &SystemdLab,
    kind: FaultKind,
    host: &str,
    voters: &[String],
) -> anyhow::Result<Vec<Rule>> {
    let net = lab.net();
    let others: Vec<std::net::Ipv4Addr> = voters
        .iter()
        .filter(|v| *v != host)
        .map(|v| Ok(net.host(v)?.addr))
        .collect::<anyhow::Result<_>>()?;
    let voting = voters.iter().any(|v| v == host);
    Ok(match kind {
        FaultKind::PeerCut => vec![Rule::Port(k3sstandin::spec::ETCD_PEER_PORT)],
        FaultKind::OneWay if voting => others.first().map(|a| Rule::To(*a)).into_iter().collect(),
        FaultKind::Split if voting => others
            .iter()
            .flat_map(|a| [Rule::To(*a), Rule::From(*a)])
            .collect(),
        // The controller runs on this machine, reaching the lab through
        // its gateway address.
        FaultKind::ApiCut => vec![Rule::FromToPort(net.gateway(), k3sstandin::spec::API_PORT)],
        _ => Vec::new(),
    })
}

/// Fires a host fault `f` on `host` (`voters`: the voting members' hosts
/// now): whether it acted on anything (a freeze on a host with no etcd, or
/// no API server, does nothing; nor does a kill of k3s on a host between
/// roles, nor a split of a host with no vote).
pub fn fire(
    lab: &mut SystemdLab,
    f: &Fault,
    host: &str,
    voters: &[String],
) -> anyhow::Result<bool> {
    let kind = f.kind;
    match kind {
        FaultKind::PeerCut | FaultKind::OneWay | FaultKind::Split | FaultKind::ApiCut => {
            let rules = network_rules(lab, kind, host, voters)?;
            if rules.is_empty() {
                return Ok(false);
            }
            let h = lab.net().host(host)?;
            filter::drop_packets(h, &rules)
                .with_context(|| format!("{} on {host}", kind.name()))?;
            Ok(true)
        }
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
        FaultKind::HostClock => clocks::set(&clocks::host_file(lab, host), f.offset_secs)
            .with_context(|| format!("host-clock on {host}"))
            .map(|()| true),
        FaultKind::KillSwapController | FaultKind::KillLeadingRun | FaultKind::ControllerClock => {
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
        FaultKind::PeerCut | FaultKind::OneWay | FaultKind::Split | FaultKind::ApiCut => {
            let h = lab.net().host(host)?;
            filter::clear(h).with_context(|| format!("clearing {}'s filters", host))
        }
        FaultKind::HostClock => clocks::set(&clocks::host_file(lab, host), 0),
        FaultKind::KillActuator
        | FaultKind::KillK3s
        | FaultKind::Reboot
        | FaultKind::KillSwapController
        | FaultKind::KillLeadingRun
        | FaultKind::ControllerClock => Ok(()),
    }
}
