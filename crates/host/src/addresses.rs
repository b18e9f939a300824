//! This host's own addresses, as the kernel lists them under `/proc/net`:
//! IPv4 from the local routing table (`fib_trie`, every `LOCAL` route, so
//! all of 127.0.0.0/8 counts, as the kernel treats it), IPv6 from
//! `if_inet6`. Read from files, so no socket call and no `unsafe`; the
//! source is a directory, so tests give their own.

use std::{
    fs, io,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::Path,
};

/// The addresses this host answers on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalAddresses {
    /// IPv4 `LOCAL` routes: a network and its prefix length.
    v4: Vec<(Ipv4Addr, u8)>,
    /// IPv6 addresses, each on an interface.
    v6: Vec<Ipv6Addr>,
}

impl LocalAddresses {
    /// Reads `fib_trie` and `if_inet6` under `proc_net` (`/proc/net` on a
    /// host). A file that is not there lists nothing (a host without IPv6
    /// has no `if_inet6`); one that cannot be read is an error.
    pub fn read(proc_net: &Path) -> io::Result<Self> {
        let read = |name: &str| match fs::read_to_string(proc_net.join(name)) {
            Ok(text) => Ok(text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("{}: {e}", proc_net.join(name).display()),
            )),
        };
        Ok(Self::parse(&read("fib_trie")?, &read("if_inet6")?))
    }

    /// The addresses listed in the texts of `fib_trie` and `if_inet6`.
    pub fn parse(fib_trie: &str, if_inet6: &str) -> Self {
        let mut v4 = Vec::new();
        let mut leaf = None;
        for line in fib_trie.lines().map(str::trim) {
            if let Some(ip) = line.strip_prefix("|-- ") {
                leaf = ip.trim().parse::<Ipv4Addr>().ok();
            } else if let Some(route) = line.strip_prefix('/') {
                // `/32 host LOCAL`: the route to the leaf above, its type last.
                let mut words = route.split_whitespace();
                let len = words.next().and_then(|l| l.parse::<u8>().ok());
                if let (Some(ip), Some(len), Some("LOCAL")) = (leaf, len, words.last())
                    && len <= 32
                    && !v4.contains(&(ip, len))
                {
                    v4.push((ip, len));
                }
            }
        }
        let v6 = if_inet6
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter_map(|hex| {
                u128::from_str_radix(hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 32)
            })
            .map(Ipv6Addr::from)
            .collect();
        Self { v4, v6 }
    }

    /// Whether `ip` is an address of this host.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(ip) => self.v4.iter().any(|&(net, len)| {
                let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                u32::from(ip) & mask == u32::from(net) & mask
            }),
            IpAddr::V6(ip) => match ip.to_ipv4_mapped() {
                Some(v4) => self.contains(IpAddr::V4(v4)),
                None => self.v6.contains(&ip),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIB_TRIE: &str = "Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 192.0.2.0/24 2 0 2
        |-- 192.0.2.0
           /24 link UNICAST
        |-- 192.0.2.2
           /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
     +-- 192.0.2.0/24 2 0 2
        |-- 192.0.2.2
           /32 host LOCAL
";
    const IF_INET6: &str = "00000000000000000000000000000001 01 80 10 80       lo
fd000000000000000000000000000002 04 40 00 82     eth0
";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_local_routes_and_interface_addresses_are_this_hosts_and_nothing_else() {
        let a = LocalAddresses::parse(FIB_TRIE, IF_INET6);
        for yes in [
            "192.0.2.2",
            "127.0.0.1",
            "127.77.0.3",
            "::1",
            "fd00::2",
            "::ffff:192.0.2.2",
        ] {
            assert!(a.contains(ip(yes)), "{yes} is this host's");
        }
        // A network the host is on is not an address of it, nor is its
        // broadcast, nor the default route.
        for no in [
            "192.0.2.3",
            "192.0.2.0",
            "10.0.0.9",
            "0.0.0.0",
            "fd00::3",
            "8.8.8.8",
        ] {
            assert!(!a.contains(ip(no)), "{no} is not this host's");
        }
        assert!(!LocalAddresses::default().contains(ip("127.0.0.1")));
    }

    #[test]
    fn missing_files_list_no_address_and_this_machines_own_include_loopback() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            LocalAddresses::read(dir.path()).unwrap(),
            LocalAddresses::default()
        );
        let here = LocalAddresses::read(Path::new("/proc/net")).unwrap();
        assert!(here.contains(ip("127.0.0.1")), "{here:?}");
    }
}
