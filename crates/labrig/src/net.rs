//! The lab's network: a bridge in a network namespace of its own, a network
//! namespace per host joined to it, and one link from this machine's root
//! namespace so the test runner and the controller reach the hosts.
//!
//! More in docs/internals.md, "labrig: net".

use std::{
    collections::BTreeMap,
    fs, io,
    net::Ipv4Addr,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use crate::bounded;

/// Where labs claim their number `K` (one file per lab, holding its owner).
pub const CLAIMS: &str = "/run/fleet-role-lab";

/// The prefix of everything a lab names (namespaces, links, machines, cgroups).
pub const PREFIX: &str = "frl";

/// The deadline of one `ip` call (they are quick; a bound keeps a wedged
/// kernel or a held lock from hanging the lab).
const IP_DEADLINE: Duration = Duration::from_secs(20);

/// The last host number: `.254` is the root namespace's end.
pub const MAX_HOSTS: u8 = 253;

/// Errors of the lab's network.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An `ip` command failed or timed out; what it had made so far is left
    /// in place for [`LabNet::teardown`] (or `machine::sweep_stale`) to remove.
    #[error("setting up the lab network: {0}")]
    Ip(#[from] bounded::Error),
    /// All of 198.18.0.0/24 … 198.18.255.0/24 are in use by other labs.
    #[error("no free lab number: every 198.18.K.0/24 is claimed under {CLAIMS} or routed")]
    NoFreeLab,
    /// The claim file could not be written or removed.
    #[error("the claim {path}: {source}")]
    Claim {
        /// The claim file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A host name was used twice, or a host number is outside 1..=253.
    #[error("host {name} (number {number}): {why}")]
    BadHost {
        /// The host's name.
        name: String,
        /// Its number.
        number: u8,
        /// What is wrong.
        why: &'static str,
    },
    /// A host not added to this lab.
    #[error("no host {0} in this lab")]
    NoHost(String),
    /// Teardown removed what it could; these were left.
    #[error("teardown left: {}", .0.join("; "))]
    Leftovers(Vec<String>),
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The datagram queue each host's namespace allows (see [`LabNet::add_host`]).
const JOURNAL_QUEUE: u32 = 16_384;

fn ip(args: &[&str]) -> Result<bounded::Output> {
    Ok(bounded::run_ok(Command::new("ip").args(args), IP_DEADLINE)?)
}

/// One host's place in the lab network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostNet {
    /// The host's name (`server-1`).
    pub name: String,
    /// Its number `N` (its address is `198.18.K.N`).
    pub number: u8,
    /// Its network namespace's name (`frlK-server-1`).
    pub netns: String,
    /// Its address on the lab's subnet.
    pub addr: Ipv4Addr,
    /// Its port on the bridge, in the bridge's namespace (`pN`).
    pub bridge_port: String,
}

impl HostNet {
    /// The namespace's path, as `systemd-nspawn --network-namespace-path` wants it.
    pub fn netns_path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.netns)
    }
}

/// A lab's network; torn down on drop.
#[derive(Debug)]
pub struct LabNet {
    k: u8,
    hosts: BTreeMap<String, HostNet>,
    done: bool,
}

impl LabNet {
    /// Claims a free lab number and makes the bridge and the root
    /// namespace's link to it. A dead owner's leftovers could hold the
    /// number it would pick: [`crate::machine::lab_net`] sweeps them first.
    pub fn create() -> Result<LabNet> {
        let k = claim()?;
        let mut net = LabNet {
            k,
            hosts: BTreeMap::new(),
            done: false,
        };
        // On an error `net` is dropped, which removes what was made.
        net.make_bridge()?;
        Ok(net)
    }

    fn make_bridge(&mut self) -> Result<()> {
        let br = self.bridge_netns();
        let up = self.uplink();
        ip(&["netns", "add", &br])?;
        ip(&["-n", &br, "link", "set", "lo", "up"])?;
        ip(&["-n", &br, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &br, "link", "set", "br0", "up"])?;
        // Made in the root namespace with its peer placed straight into the
        // bridge's, so the only root-namespace name is the lab's prefix.
        ip(&[
            "link", "add", &up, "type", "veth", "peer", "name", "uplink", "netns", &br,
        ])?;
        ip(&[
            "-n", &br, "link", "set", "dev", "uplink", "master", "br0", "up",
        ])?;
        let gw = format!("{}/24", self.gateway());
        ip(&["addr", "add", &gw, "dev", &up])?;
        ip(&["link", "set", "dev", &up, "up"])?;
        Ok(())
    }

    /// The lab's number `K` (its subnet is `198.18.K.0/24`).
    pub fn number(&self) -> u8 {
        self.k
    }

    /// The lab's prefix (`frlK`): every name it makes starts with it.
    pub fn prefix(&self) -> String {
        prefix(self.k)
    }

    /// The bridge's namespace (`frlK-br`).
    pub fn bridge_netns(&self) -> String {
        format!("{}-br", self.prefix())
    }

    /// The root namespace's link into the bridge (`frlK`).
    pub fn uplink(&self) -> String {
        self.prefix()
    }

    /// The root namespace's address on the lab's subnet (`198.18.K.254`).
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, self.k, 254)
    }

    /// A host's address (`198.18.K.N`).
    pub fn addr(&self, number: u8) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, self.k, number)
    }

    /// The hosts added so far.
    pub fn hosts(&self) -> impl Iterator<Item = &HostNet> {
        self.hosts.values()
    }

    /// A host added before.
    pub fn host(&self, name: &str) -> Result<&HostNet> {
        self.hosts
            .get(name)
            .ok_or_else(|| Error::NoHost(name.to_string()))
    }

    /// Makes a host's namespace, with its loopback up and a link into the
    /// bridge holding `198.18.K.number/24`.
    pub fn add_host(&mut self, name: &str, number: u8) -> Result<HostNet> {
        let bad = |why| Error::BadHost {
            name: name.to_string(),
            number,
            why,
        };
        if number == 0 || number > MAX_HOSTS {
            return Err(bad("the number must be in 1..=253"));
        }
        if self.hosts.contains_key(name) || self.hosts.values().any(|h| h.number == number) {
            return Err(bad("already in this lab"));
        }
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(bad("a name is letters, digits and '-'"));
        }
        let h = HostNet {
            name: name.to_string(),
            number,
            netns: format!("{}-{name}", self.prefix()),
            addr: self.addr(number),
            bridge_port: format!("p{number}"),
        };
        // Recorded first, so that teardown removes a half-made host too.
        self.hosts.insert(name.to_string(), h.clone());
        let br = self.bridge_netns();
        ip(&["netns", "add", &h.netns])?;
        // Its own loopback: 127.0.0.1 inside is the host's, as on a real one.
        ip(&["-n", &h.netns, "link", "set", "lo", "up"])?;
        // The queue of journald's datagram socket, per network namespace:
        // a new one starts at the kernel's 10. systemd (PID 1) waits at most
        // 10 ms for room and then drops its record, so on a busy machine a
        // host booting at debug level lost unit state changes the tests
        // replay (`overlap.rs`). A real host gets 512 from systemd's
        // sysctl.d at boot; the lab's hosts get more, before they boot.
        ip(&[
            "netns",
            "exec",
            &h.netns,
            "sysctl",
            "-qw",
            &format!("net.unix.max_dgram_qlen={JOURNAL_QUEUE}"),
        ])?;
        ip(&[
            "-n",
            &br,
            "link",
            "add",
            &h.bridge_port,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &h.netns,
        ])?;
        ip(&[
            "-n",
            &br,
            "link",
            "set",
            &h.bridge_port,
            "master",
            "br0",
            "up",
        ])?;
        let cidr = format!("{}/24", h.addr);
        ip(&["-n", &h.netns, "addr", "add", &cidr, "dev", "eth0"])?;
        ip(&["-n", &h.netns, "link", "set", "dev", "eth0", "up"])?;
        Ok(h)
    }

    /// Cuts a host off the lab (its bridge port down): nothing reaches it
    /// and it reaches nothing but itself, as when a cable is pulled.
    pub fn cut_off(&self, name: &str) -> Result<()> {
        let h = self.host(name)?;
        ip(&[
            "-n",
            &self.bridge_netns(),
            "link",
            "set",
            &h.bridge_port,
            "down",
        ])?;
        Ok(())
    }

    /// Undoes [`LabNet::cut_off`].
    pub fn restore(&self, name: &str) -> Result<()> {
        let h = self.host(name)?;
        ip(&[
            "-n",
            &self.bridge_netns(),
            "link",
            "set",
            &h.bridge_port,
            "up",
        ])?;
        Ok(())
    }

    /// Removes every namespace and link of this lab, and its claim. The
    /// hosts' machines must be stopped first: a namespace a process still
    /// uses outlives its name.
    pub fn teardown(&mut self) -> Result<()> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        sweep_lab(self.k)
    }
}

impl Drop for LabNet {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("fleet-role-lab: {e}");
        }
    }
}

fn prefix(k: u8) -> String {
    format!("{PREFIX}{k}")
}

fn claim_path(k: u8) -> PathBuf {
    Path::new(CLAIMS).join(prefix(k))
}

/// A process's identity: its pid and its start time (field 22 of
/// `/proc/PID/stat`), so a reused pid is not taken for the owner.
fn identity(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let start = rest.split_whitespace().nth(19)?;
    Some(format!("{pid} {start}"))
}

/// Whether a claim's owner (as written by [`claim`]) is still running.
fn owner_alive(owner: &str) -> bool {
    let Some(pid) = owner.split_whitespace().next().and_then(|p| p.parse().ok()) else {
        return false;
    };
    identity(pid).is_some_and(|id| id == owner.trim())
}

fn routed(k: u8) -> bool {
    let dst = format!("198.18.{k}.0/24");
    let link = Path::new("/sys/class/net").join(prefix(k));
    link.exists()
        || ip(&["route", "show", "match", &dst])
            .map(|o| o.stdout.lines().any(|l| !l.starts_with("default")))
            .unwrap_or(true)
        || Path::new("/run/netns")
            .join(format!("{}-br", prefix(k)))
            .exists()
}

/// Claims a lab number: the claim file is created exclusively, so two labs
/// starting at once cannot take the same one, and it is created already
/// naming its owner (written to a file of this process's own, then linked
/// in its place, which fails if the name is taken): a claim seen empty
/// would be taken for a crashed lab's and swept away by another lab
/// starting meanwhile, namespaces and all.
fn claim() -> Result<u8> {
    fs::create_dir_all(CLAIMS).map_err(|source| Error::Claim {
        path: CLAIMS.into(),
        source,
    })?;
    let me = identity(std::process::id()).unwrap_or_else(|| std::process::id().to_string());
    // Not under the lab prefix: never read as a claim. One file per call, so
    // two threads of one process claiming at once do not share it.
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mine = Path::new(CLAIMS).join(format!(".claiming-{}-{call}", std::process::id()));
    fs::write(&mine, format!("{me}\n")).map_err(|source| Error::Claim {
        path: mine.clone(),
        source,
    })?;
    let claimed = take_a_number(&mine);
    let _ = fs::remove_file(&mine);
    claimed
}

/// Links `mine` (the owner's claim, written) in place of the first free lab
/// number's claim.
fn take_a_number(mine: &Path) -> Result<u8> {
    let seed = (std::process::id() as usize).wrapping_mul(31);
    for i in 0..256 {
        let k = ((seed + i) % 256) as u8;
        let path = claim_path(k);
        match fs::hard_link(mine, &path) {
            Ok(()) => {
                // Something else (a VPN, another tool) may route the subnet.
                if routed(k) {
                    let _ = fs::remove_file(&path);
                    continue;
                }
                return Ok(k);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(Error::Claim { path, source }),
        }
    }
    Err(Error::NoFreeLab)
}

/// Namespaces of lab `k` (`frlK-…` under `/run/netns`).
pub fn namespaces_of(k: u8) -> Vec<String> {
    let p = format!("{}-", prefix(k));
    let mut v: Vec<String> = fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(&p))
        .collect();
    v.sort();
    v
}

/// The labs that hold a claim, a namespace or a link on this machine.
pub fn labs_present() -> Vec<u8> {
    let mut ks: Vec<u8> = Vec::new();
    let names = fs::read_dir(CLAIMS)
        .into_iter()
        .chain(fs::read_dir("/run/netns"))
        .chain(fs::read_dir("/sys/class/net"))
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok());
    for n in names {
        let Some(rest) = n.strip_prefix(PREFIX) else {
            continue;
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(k) = digits.parse::<u8>()
            && (rest.len() == digits.len() || rest[digits.len()..].starts_with('-'))
            && !ks.contains(&k)
        {
            ks.push(k);
        }
    }
    ks.sort();
    ks
}

/// Removes lab `k`'s namespaces, its link and its claim, whoever made them.
/// Its machines must be gone (see [`crate::machine::sweep_lab`]).
pub fn sweep_lab(k: u8) -> Result<()> {
    let clock = clock::Clock::system();
    let mut left = Vec::new();
    // Hosts first, then the bridge: deleting the bridge's namespace also
    // removes the root end of its link, once the kernel has freed it.
    let br = format!("{}-br", prefix(k));
    let mut all = namespaces_of(k);
    all.sort_by_key(|n| *n == br);
    for ns in all {
        if let Err(e) = ip(&["netns", "del", &ns]) {
            left.push(format!("namespace {ns}: {e}"));
        }
    }
    let link = Path::new("/sys/class/net").join(prefix(k));
    let start = clock.now();
    while link.exists() && clock.since(start) < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if link.exists()
        && let Err(e) = ip(&["link", "del", &prefix(k)])
        && link.exists()
    {
        left.push(format!("link {}: {e}", prefix(k)));
    }
    let claim = claim_path(k);
    if let Err(e) = fs::remove_file(&claim)
        && e.kind() != io::ErrorKind::NotFound
    {
        left.push(format!("claim {}: {e}", claim.display()));
    }
    if left.is_empty() {
        Ok(())
    } else {
        Err(Error::Leftovers(left))
    }
}

/// The labs whose owner is gone (crashed, killed) and which still hold a
/// claim, namespaces or a link.
pub fn stale_labs() -> Vec<u8> {
    labs_present()
        .into_iter()
        .filter(|&k| {
            fs::read_to_string(claim_path(k))
                .map(|owner| !owner_alive(&owner))
                // No claim but namespaces or a link: a claim removed by hand,
                // or a lab killed between its teardown's steps.
                .unwrap_or(true)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_names_its_living_owner_from_the_moment_it_exists_and_leaves_no_file_behind() {
        let k = claim().unwrap();
        let owner = fs::read_to_string(claim_path(k)).unwrap();
        assert!(owner_alive(&owner), "{owner:?}");
        assert!(!stale_labs().contains(&k));
        let prefix = format!(".claiming-{}-", std::process::id());
        let leftovers = fs::read_dir(CLAIMS)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .count();
        assert_eq!(leftovers, 0);
        fs::remove_file(claim_path(k)).unwrap();
    }

    #[test]
    fn this_process_is_alive_and_a_reaped_child_is_not() {
        let me = identity(std::process::id()).unwrap();
        assert!(owner_alive(&me));
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!owner_alive(&format!("{pid} 1")));
        // Same pid, another start time: a reused pid is not the owner.
        let other = format!("{} 0", std::process::id());
        assert!(!owner_alive(&other));
        assert!(!owner_alive("garbage"));
    }
}
