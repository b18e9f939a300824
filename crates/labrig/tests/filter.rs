//! The chaos campaign's packet filters on a real lab network: two host
//! namespaces on the lab's bridge, a TCP connection between them refused
//! (nothing listens) while unfiltered, dropped while a filter holds, and
//! refused again once it is cleared. Needs root and ip(8), iptables; fails,
//! never skips, without them.

use std::process::Command;

use labrig::filter::{self, Rule};

/// Tries a TCP connection from `netns` to `to:port` for at most two
/// seconds: whether it was refused (a reset came back), the way an
/// unfiltered connection to a closed port ends.
fn refused(netns: &str, to: std::net::Ipv4Addr, port: u16) -> bool {
    let out = Command::new("ip")
        .args(["netns", "exec", netns, "timeout", "2", "bash", "-c"])
        .arg(format!("exec 3<>/dev/tcp/{to}/{port}"))
        .output()
        .expect("ip netns exec runs");
    String::from_utf8_lossy(&out.stderr).contains("refused")
}

/// The packets the DROP rules on `netns` have counted.
fn dropped(netns: &str) -> u64 {
    let out = Command::new("ip")
        .args([
            "netns", "exec", netns, "iptables", "-w", "10", "-L", "-v", "-x", "-n",
        ])
        .output()
        .expect("iptables runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("DROP"))
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_filter_drops_one_hosts_packets_to_another_until_it_is_cleared() {
    let mut net = labrig::machine::lab_net().expect("a lab network (needs root and ip(8))");
    let a = net.add_host("a", 1).unwrap();
    let b = net.add_host("b", 2).unwrap();
    assert!(
        refused(&a.netns, b.addr, 9),
        "unfiltered, a closed port refuses"
    );

    filter::drop_packets(&a, &[Rule::To(b.addr)]).unwrap();
    assert_eq!(filter::listed(&a).unwrap().len(), 1);
    assert!(
        !refused(&a.netns, b.addr, 9),
        "a's packets to b are dropped"
    );
    assert!(dropped(&a.netns) > 0, "the rule counted what it dropped");
    // Only that direction, only that host: b's own table is empty.
    assert!(filter::listed(&b).unwrap().is_empty());

    filter::clear(&a).unwrap();
    assert!(filter::listed(&a).unwrap().is_empty());
    assert!(
        refused(&a.netns, b.addr, 9),
        "cleared, the port refuses again"
    );
    net.teardown().unwrap();
}

#[test]
fn a_port_filter_cuts_that_port_and_leaves_the_others_reachable() {
    let mut net = labrig::machine::lab_net().expect("a lab network (needs root and ip(8))");
    let a = net.add_host("a", 1).unwrap();
    let b = net.add_host("b", 2).unwrap();
    filter::drop_packets(&b, &[Rule::Port(2380)]).unwrap();
    assert!(!refused(&a.netns, b.addr, 2380), "the peer port is cut");
    assert!(
        refused(&a.netns, b.addr, 2379),
        "the client port still answers"
    );
    filter::clear(&b).unwrap();
    assert!(refused(&a.netns, b.addr, 2380));
    net.teardown().unwrap();
}
