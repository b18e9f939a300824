//! Packet filters in one lab host's network namespace: the network faults
//! of the chaos campaign (a peer-only partition, a link dropped one way,
//! a split of the voters, the controller's API server unreachable).
//!
//! The rules are iptables' (nf_tables underneath), in the host's own
//! namespace, so they act on that host's traffic alone and vanish with the
//! namespace at teardown. This machine has no `sch_netem`, so a fault can
//! drop packets but never delay or reorder them. Nothing else in a lab
//! writes a host's tables, so healing empties them.

use std::{net::Ipv4Addr, process::Command, time::Duration};

use crate::{bounded, net::HostNet};

/// The bound of one iptables call; `-w` waits for the tables' lock within it.
const DEADLINE: Duration = Duration::from_secs(20);

/// One packet filter, seen from the host it is put on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// TCP to or from this port, both ways: for etcd's peer port, the
    /// member is cut from its peers while its clients still reach it.
    Port(u16),
    /// Everything this host sends to that address (replies included, so a
    /// TCP connection from there cannot complete either, as on a real link
    /// that loses one direction).
    To(Ipv4Addr),
    /// Everything this host receives from that address.
    From(Ipv4Addr),
    /// TCP from that address to this port: one client cut from one
    /// service, the rest of the host reachable.
    FromToPort(Ipv4Addr, u16),
}

impl Rule {
    /// The iptables rules (chain and match) that make it.
    pub fn iptables(self) -> Vec<Vec<String>> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
        match self {
            Rule::Port(p) => {
                let p = p.to_string();
                vec![
                    s(&["INPUT", "-p", "tcp", "--dport", &p]),
                    s(&["INPUT", "-p", "tcp", "--sport", &p]),
                    s(&["OUTPUT", "-p", "tcp", "--dport", &p]),
                    s(&["OUTPUT", "-p", "tcp", "--sport", &p]),
                ]
            }
            Rule::To(a) => vec![s(&["OUTPUT", "-d", &a.to_string()])],
            Rule::From(a) => vec![s(&["INPUT", "-s", &a.to_string()])],
            Rule::FromToPort(a, p) => vec![s(&[
                "INPUT",
                "-s",
                &a.to_string(),
                "-p",
                "tcp",
                "--dport",
                &p.to_string(),
            ])],
        }
    }
}

fn iptables(host: &HostNet, args: &[String]) -> Result<bounded::Output, bounded::Error> {
    bounded::run_ok(
        Command::new("ip")
            .args(["netns", "exec", &host.netns, "iptables", "-w", "10"])
            .args(args),
        DEADLINE,
    )
}

/// Drops the packets `rules` match on `host`. On an error the rules put so
/// far stay; [`clear`] removes them.
pub fn drop_packets(host: &HostNet, rules: &[Rule]) -> Result<(), bounded::Error> {
    for r in rules {
        for mut args in r.iptables() {
            args.insert(0, "-A".into());
            args.extend(["-j".to_string(), "DROP".to_string()]);
            iptables(host, &args)?;
        }
    }
    Ok(())
}

/// Removes every filter from `host`.
pub fn clear(host: &HostNet) -> Result<(), bounded::Error> {
    for chain in ["INPUT", "OUTPUT"] {
        iptables(host, &["-F".to_string(), chain.to_string()])?;
    }
    Ok(())
}

/// The filters on `host` now, one `iptables -S` line each (the default
/// policies left out).
pub fn listed(host: &HostNet) -> Result<Vec<String>, bounded::Error> {
    let out = iptables(host, &["-S".to_string()])?;
    Ok(out
        .stdout
        .lines()
        .filter(|l| l.starts_with("-A "))
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_port_rule_drops_that_port_both_ways_and_nothing_else() {
        let r = Rule::Port(2380).iptables();
        assert_eq!(r.len(), 4);
        assert!(r.iter().all(|a| a.contains(&"2380".to_string())));
        assert_eq!(r.iter().filter(|a| a[0] == "INPUT").count(), 2);
        assert_eq!(r.iter().filter(|a| a[0] == "OUTPUT").count(), 2);
    }

    #[test]
    fn a_one_way_rule_names_only_the_direction_it_drops() {
        let a = Ipv4Addr::new(198, 18, 1, 2);
        assert_eq!(
            Rule::To(a).iptables(),
            vec![vec!["OUTPUT", "-d", "198.18.1.2"]]
        );
        assert_eq!(
            Rule::FromToPort(a, 6443).iptables()[0],
            vec!["INPUT", "-s", "198.18.1.2", "-p", "tcp", "--dport", "6443"]
        );
    }
}
