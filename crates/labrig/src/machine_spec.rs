//! How a lab host is booted: what is bound into its container, and the
//! `systemd-nspawn` arguments that make it (see [`crate::machine`] for the
//! running host).

use std::path::{Path, PathBuf};

use crate::net;

/// A directory bound into a machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// The directory on this machine.
    pub outside: PathBuf,
    /// Where the host sees it.
    pub inside: PathBuf,
    /// Bound read-only.
    pub read_only: bool,
}

/// How to boot one lab host.
#[derive(Debug, Clone)]
pub struct MachineSpec {
    /// The machine's name (`frlK-server-1`): its cgroup and nspawn's `-M`.
    pub name: String,
    /// The host name it sees (`server-1`).
    pub hostname: String,
    /// Its root directory on this machine (the bound directories live below).
    pub root: PathBuf,
    /// Its network namespace (`/run/netns/…`).
    pub netns: PathBuf,
    /// The directories bound in.
    pub binds: Vec<Bind>,
    /// `fleet-role-lab`, which starts nspawn in the machine's own cgroup.
    pub launcher: PathBuf,
    /// When a boot counts as done.
    pub up_when: UpWhen,
    /// `/usr` and dpkg's database writable, so that packages can be
    /// installed inside (see [`MachineSpec::with_writable_usr`]).
    pub writable_usr: bool,
}

/// When a boot counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpWhen {
    /// `systemctl is-system-running` says `running` or `degraded`: every
    /// start job of the boot has ended.
    #[default]
    Running,
    /// `basic.target` is active (systemd answers, sockets and mounts are up)
    /// while start jobs may still wait: an enabled `Type=notify` k3s that is
    /// not ready holds `multi-user.target` (and `running`) back for as long
    /// as it is not, which for a learner that cannot catch up is for ever.
    BasicTarget,
}

/// The directories of a host's root that a lab host binds in, and where.
pub const HOST_DIRS: &[&str] = &[
    "etc/systemd/system",
    "etc/rancher",
    "etc/fleet-role",
    "var/lib/rancher",
    "var/lib/fleet-role",
    "usr/local/bin",
    // The journal persists across the host's reboots and can be read from
    // outside (`journalctl -D ROOT/var/log/journal`) after it is gone.
    "var/log/journal",
    // journald without rate limits, so the units' records are complete.
    "etc/systemd/journald.conf.d",
];

/// journald's settings in a lab host: persistent, and no rate limit (the
/// overlap check needs every one of systemd's records; a suppressed one would
/// be a gap it reports as an error).
pub(crate) const JOURNALD_CONF: &str = "# fleet-role lab: every record kept\n[Journal]\nStorage=persistent\nRateLimitIntervalSec=0\nRateLimitBurst=0\n";

impl MachineSpec {
    /// A lab host: `root`'s [`HOST_DIRS`] bound in, `bin_dir` (the built
    /// binaries) read-only at its own path, in the network of `host`.
    pub fn lab_host(
        net: &net::HostNet,
        root: &Path,
        bin_dir: &Path,
        launcher: &Path,
    ) -> MachineSpec {
        let mut binds: Vec<Bind> = HOST_DIRS
            .iter()
            .map(|d| Bind {
                outside: root.join(d),
                inside: Path::new("/").join(d),
                read_only: false,
            })
            .collect();
        binds.push(Bind {
            outside: bin_dir.to_path_buf(),
            inside: bin_dir.to_path_buf(),
            read_only: true,
        });
        // The machine's CA store: the volatile /etc has none, and rustls'
        // native roots refuse to build a client without any (the lab's own
        // CA is configured on top; no traffic leaves the lab either way).
        binds.push(Bind {
            outside: "/etc/ssl".into(),
            inside: "/etc/ssl".into(),
            read_only: true,
        });
        MachineSpec {
            name: net.netns.clone(),
            hostname: net.name.clone(),
            root: root.to_path_buf(),
            netns: net.netns_path(),
            binds,
            launcher: launcher.to_path_buf(),
            up_when: UpWhen::default(),
            writable_usr: false,
        }
    }

    /// Makes `/usr` and `/var/lib/dpkg` writable inside the host: `/usr` an
    /// overlay whose upper directory is `ROOT/usr` over this machine's own,
    /// dpkg's database a copy of this machine's (`ROOT/var/lib/dpkg`, made
    /// at the first boot). `dpkg -i` inside then installs into the host
    /// alone; this machine's `/usr` and package database are never written.
    /// The host starts knowing every package this machine has (a package's
    /// `Depends` on systemd or libc are met).
    pub fn with_writable_usr(mut self) -> MachineSpec {
        self.writable_usr = true;
        self
    }

    /// A stable machine id (so the persistent journal keeps one directory
    /// across reboots): a digest of the name, shaped as a UUID.
    pub(crate) fn uuid(&self) -> String {
        let d = ring::digest::digest(&ring::digest::SHA256, self.name.as_bytes());
        let h: String = d.as_ref()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!(
            "{}-{}-4{}-8{}-{}",
            &h[0..8],
            &h[8..12],
            &h[13..16],
            &h[17..20],
            &h[20..32]
        )
    }

    pub(crate) fn nspawn_args(&self) -> Vec<String> {
        let mut a: Vec<String> = [
            "-q",
            "-D",
            "/",
            "--volatile=yes",
            "--register=no",
            "--keep-unit",
            "--console=read-only",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.push(format!("--machine={}", self.name));
        a.push(format!("--hostname={}", self.hostname));
        a.push(format!("--uuid={}", self.uuid()));
        a.push(format!("--network-namespace-path={}", self.netns.display()));
        // A machine id from the start: without one systemd takes the boot
        // for a first boot and applies the presets ("enable *" on Debian),
        // enabling every unit with an [Install] section, k3s's both, into
        // the host's bound `etc/systemd/system`. A real host's k3s units are
        // enabled by install.sh (`systemctl enable`), one at a time.
        a.push(format!(
            "--bind-ro={}:/etc/machine-id",
            self.machine_id_file().display()
        ));
        // The host's own /usr/bin files (the actuator, where its package puts
        // it and the units name it) over the machine's: /usr is read-only in
        // a volatile machine, so a bind cannot make a new file there, but a
        // read-only overlay of the two directories can.
        if self.writable_usr {
            // A writable overlay (nspawn makes its work directory beside the
            // upper one); ROOT/usr/bin is the upper's bin. dpkg's database is
            // a bind of the copy: nspawn cannot make an overlay's mount point
            // under a /var/lib that does not exist yet, as it does a bind's.
            a.push(format!(
                "--overlay=/usr:{}:/usr",
                self.root.join("usr").display()
            ));
            a.push(format!(
                "--bind={}:/var/lib/dpkg",
                self.root.join("var/lib/dpkg").display()
            ));
        } else {
            a.push(format!(
                "--overlay-ro=/usr/bin:{}:/usr/bin",
                self.root.join("usr/bin").display()
            ));
        }
        for b in &self.binds {
            let flag = if b.read_only { "--bind-ro" } else { "--bind" };
            a.push(format!(
                "{flag}={}:{}",
                b.outside.display(),
                b.inside.display()
            ));
        }
        a.push("-b".into());
        a.push("--".into());
        // No first-boot prompt (it would wait on the console for ever); the
        // normal target; debug logging, so systemd records each unit state
        // change ("Changed dead -> start") that the overlap check reads.
        a.extend(
            [
                "systemd.firstboot=off",
                "systemd.unit=multi-user.target",
                "systemd.log_level=debug",
            ]
            .map(String::from),
        );
        a
    }

    pub(crate) fn machine_id_file(&self) -> PathBuf {
        self.root.join("machine-id")
    }

    pub(crate) fn console_log(&self) -> PathBuf {
        self.root.join("console.log")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> MachineSpec {
        let h = net::HostNet {
            name: "server-1".into(),
            number: 1,
            netns: "frl7-server-1".into(),
            addr: "198.18.7.1".parse().unwrap(),
            bridge_port: "p1".into(),
        };
        MachineSpec::lab_host(
            &h,
            Path::new("/lab/hosts/server-1"),
            Path::new("/src/target/debug"),
            Path::new("/src/target/debug/fleet-role-lab"),
        )
    }

    #[test]
    fn a_lab_host_binds_its_own_directories_and_the_binaries_read_only() {
        let a = spec().nspawn_args();
        for want in [
            "--bind=/lab/hosts/server-1/var/lib/rancher:/var/lib/rancher",
            "--bind=/lab/hosts/server-1/etc/systemd/system:/etc/systemd/system",
            "--bind=/lab/hosts/server-1/usr/local/bin:/usr/local/bin",
            "--bind-ro=/src/target/debug:/src/target/debug",
            "--bind-ro=/etc/ssl:/etc/ssl",
            "--network-namespace-path=/run/netns/frl7-server-1",
            "--machine=frl7-server-1",
            "--hostname=server-1",
            "--register=no",
            "--keep-unit",
            "--volatile=yes",
            "systemd.firstboot=off",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} missing from {a:?}");
        }
        let dashes = a.iter().position(|x| x == "--").unwrap();
        assert_eq!(a[dashes - 1], "-b", "systemd's arguments follow -b --");
        assert!(
            !a.iter().any(|x| x.starts_with("--overlay=")),
            "nothing of this machine's is writable: {a:?}"
        );
    }

    #[test]
    fn a_host_for_packages_writes_usr_and_dpkgs_database_into_its_own_root_only() {
        let a = spec().with_writable_usr().nspawn_args();
        for want in [
            "--overlay=/usr:/lab/hosts/server-1/usr:/usr",
            "--bind=/lab/hosts/server-1/var/lib/dpkg:/var/lib/dpkg",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} missing from {a:?}");
        }
        assert!(
            !a.iter().any(|x| x.starts_with("--overlay-ro=/usr/bin")),
            "the read-only /usr/bin overlay would hide the writable one: {a:?}"
        );
    }

    #[test]
    fn a_machine_id_is_stable_per_name_and_shaped_as_a_uuid() {
        let u = spec().uuid();
        assert_eq!(u, spec().uuid());
        assert_eq!(u.len(), 36);
        assert_eq!(u.matches('-').count(), 4);
        let mut other = spec();
        other.name = "frl7-server-2".into();
        assert_ne!(u, other.uuid());
    }
}
