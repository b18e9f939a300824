//! Stand-ins for the two host programs that cannot run here: systemd's
//! `systemctl` and the `k3s` CLI. Tests put their directory first on `PATH`.
//!
//! They keep all state under `$FLEET_ROLE_ROOT/run/fleet-role-standin/`, and
//! refuse to run without `FLEET_ROLE_ROOT`, so they can never touch a real host.
//! What they imitate, and how faithfully, is written in `docs/testing.md`.
#![forbid(unsafe_code)]

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
};

/// The host root the stand-in acts on, from `FLEET_ROLE_ROOT`.
pub fn root() -> Result<PathBuf, String> {
    match std::env::var_os("FLEET_ROLE_ROOT") {
        Some(r) if !r.is_empty() && Path::new(&r) != Path::new("/") => Ok(PathBuf::from(r)),
        _ => Err("stand-in refuses to run without FLEET_ROLE_ROOT set to a test root".into()),
    }
}

/// The stand-in's state directory for `what` (`systemd`, `k3s`).
pub fn state_dir(root: &Path, what: &str) -> PathBuf {
    root.join("run/fleet-role-standin").join(what)
}

/// Appends one line to the stand-in's log of commands
/// (`var/log/fleet-role-standin/<what>/log`, kept across reboots).
pub fn log(root: &Path, what: &str, line: &str) {
    let dir = root.join("var/log/fleet-role-standin").join(what);
    let _ = fs::create_dir_all(&dir);
    if let Ok(mut f) = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("log"))
    {
        let _ = writeln!(f, "{line}");
    }
}

/// The systemd stand-in's view of a unit, readable by tests.
///
/// Like systemd, what survives a reboot is under `etc` and `var` (a unit is
/// enabled by a link in `multi-user.target.wants`; the record of units active
/// at once is kept in `var/log`), and what does not is under `run`.
pub mod units {
    use super::*;

    /// The units whose simultaneous activity is recorded.
    pub const K3S_UNITS: [&str; 2] = ["k3s", "k3s-agent"];

    fn unit_name(unit: &str) -> &str {
        unit.strip_suffix(".service").unwrap_or(unit)
    }

    /// The link that enables a unit.
    pub fn wants_link(root: &Path, unit: &str) -> PathBuf {
        root.join(format!(
            "etc/systemd/system/multi-user.target.wants/{}.service",
            unit_name(unit)
        ))
    }

    /// The runtime marker of an active unit.
    pub fn active_marker(root: &Path, unit: &str) -> PathBuf {
        state_dir(root, "systemd").join(format!("{}.active", unit_name(unit)))
    }

    /// Where the persistent records are (surviving a reboot).
    pub fn records(root: &Path) -> PathBuf {
        root.join("var/log/fleet-role-standin/systemd")
    }

    /// Whether `unit` is running on the host under `root`, in systemd's
    /// sense: `active`, `activating` (a start, its `ExecCondition=`, an
    /// auto-restart's wait) or `deactivating`. Only `inactive` and `failed`
    /// are stopped.
    pub fn is_active(root: &Path, unit: &str) -> bool {
        active_marker(root, unit).exists()
    }

    /// A unit's state as `systemctl show` gives it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct State {
        /// `ActiveState`: `active`, `activating`, `deactivating`, `inactive`, `failed`.
        pub active: String,
        /// `SubState`: `running`, `start`, `condition`, `auto-restart`, `stop-sigterm`, `dead`, `failed`.
        pub sub: String,
        /// `Result` of the last run: `success`, `exec-condition`, `exit-code`.
        pub result: String,
        /// `InactiveExitTimestampMonotonic` (see [`inactive_exit`]).
        pub inactive_exit: u64,
    }

    impl State {
        /// Whether this state is stopped (`inactive` or `failed`).
        pub fn is_stopped(&self) -> bool {
            self.active == "inactive" || self.active == "failed"
        }
    }

    fn state_file(root: &Path, unit: &str) -> PathBuf {
        state_dir(root, "systemd").join(format!("{}.state", unit_name(unit)))
    }

    /// The unit's state (`inactive dead success` when never started, or
    /// after a reboot emptied `run/`).
    pub fn state(root: &Path, unit: &str) -> State {
        let text = fs::read_to_string(state_file(root, unit)).unwrap_or_default();
        let mut words = text.split_whitespace();
        State {
            active: words.next().unwrap_or("inactive").to_string(),
            sub: words.next().unwrap_or("dead").to_string(),
            result: words.next().unwrap_or("success").to_string(),
            inactive_exit: words.next().and_then(|w| w.parse().ok()).unwrap_or(0),
        }
    }

    /// `InactiveExitTimestampMonotonic`: when the unit last left `inactive`
    /// or `failed`, in microseconds (0 if never). It changes with every start,
    /// so a caller can tell a start that has run from one still queued. It
    /// is kept in the state file itself, so a reader never sees a new stamp
    /// beside an old state (a start that looks as if it ran and ended).
    pub fn inactive_exit(root: &Path, unit: &str) -> u64 {
        state(root, unit).inactive_exit
    }

    fn uptime_micros() -> u64 {
        fs::read_to_string("/proc/uptime")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0, |s| (s * 1e6) as u64)
    }

    /// Sets a unit's state, keeps the running marker and the start stamp in
    /// step with it, and updates the record of k3s units running at once.
    pub fn set_state(root: &Path, unit: &str, active: &str, sub: &str, result: &str) {
        let before = state(root, unit);
        let dir = state_dir(root, "systemd");
        fs::create_dir_all(&dir).expect("the state dir");
        let mut stamp = before.inactive_exit;
        let now = State {
            active: active.to_string(),
            sub: sub.to_string(),
            result: result.to_string(),
            inactive_exit: stamp,
        };
        if before.is_stopped() && !now.is_stopped() {
            // Strictly increasing, even for two starts within one tick.
            stamp = uptime_micros().max(stamp + 1);
        }
        // Written whole and renamed, so a reader never sees half a state.
        let tmp = dir.join(format!(".{}.state.{}", unit_name(unit), std::process::id()));
        let _ = fs::write(&tmp, format!("{active} {sub} {result} {stamp}\n"));
        let _ = fs::rename(&tmp, state_file(root, unit));
        let marker = active_marker(root, unit);
        if now.is_stopped() {
            let _ = fs::remove_file(&marker);
        } else {
            let _ = fs::write(&marker, "");
        }
        record_active(root);
    }

    /// Whether `unit` is enabled on the host under `root`.
    pub fn is_enabled(root: &Path, unit: &str) -> bool {
        fs::symlink_metadata(wants_link(root, unit)).is_ok()
    }

    /// Every enabled unit.
    pub fn enabled(root: &Path) -> Vec<String> {
        let dir = root.join("etc/systemd/system/multi-user.target.wants");
        let mut out: Vec<String> = fs::read_dir(dir)
            .map(|es| {
                es.filter_map(|e| {
                    e.ok()?
                        .file_name()
                        .to_str()?
                        .strip_suffix(".service")
                        .map(str::to_string)
                })
                .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// The most k3s units ever running at once on the host (0 if never);
    /// see [`record_active`] for what counts.
    pub fn max_active_k3s(root: &Path) -> usize {
        fs::read_to_string(records(root).join("max-active-k3s"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Marks a unit enabled or not.
    pub fn set_enabled(root: &Path, unit: &str, enabled: bool) {
        let link = wants_link(root, unit);
        if enabled {
            fs::create_dir_all(link.parent().expect("a parent")).expect("the wants dir");
            let _ = std::os::unix::fs::symlink(format!("../{}.service", unit_name(unit)), &link);
        } else {
            let _ = fs::remove_file(&link);
        }
    }

    /// Marks a unit `active (running)` or `inactive (dead)`, and updates the record.
    pub fn set_active(root: &Path, unit: &str, active: bool) {
        if active {
            set_state(root, unit, "active", "running", "success");
        } else {
            set_state(root, unit, "inactive", "dead", "success");
        }
    }

    /// Sets a unit's state directly (test set-up: a host as installed).
    pub fn set(root: &Path, unit: &str, enabled: bool, active: bool) {
        set_enabled(root, unit, enabled);
        set_active(root, unit, active);
    }

    /// Updates the record of the most k3s units active at once.
    ///
    /// A unit counts from its start to the end of its stop, auto-restart
    /// waits included, except while only its `ExecCondition=` runs: no k3s
    /// process runs then, and the condition is what keeps the two apart.
    pub fn record_active(root: &Path) {
        let now = K3S_UNITS
            .iter()
            .filter(|u| {
                let s = state(root, u);
                !s.is_stopped() && s.sub != "condition"
            })
            .count();
        if now > max_active_k3s(root) {
            let dir = records(root);
            let _ = fs::create_dir_all(&dir);
            let _ = fs::write(dir.join("max-active-k3s"), now.to_string());
        }
    }
}

/// A host root for tests: the units k3s's installer writes, fleet-role's
/// drop-ins from `deploy/`, a k3s config and a node password, with the
/// stand-ins and the built actuator first on `PATH`.
pub mod fixture {
    use std::{
        collections::BTreeMap,
        fs,
        os::unix::fs::PermissionsExt,
        path::{Path, PathBuf},
        process::Command,
    };

    use super::units;

    /// A k3s token marker written into every fixture host's config: tests
    /// check it appears in nothing the actuator prints or reports.
    pub const K3S_TOKEN_MARKER: &str = "K10fixturek3stokenMARKER::server:f1xtur3s3cr3t";

    /// The address of the server every test host's `server:` names: a
    /// Ready server Node at it makes a host's agent bootstrap from a live
    /// server, as eligibility judges it.
    pub const JOIN_SERVER_IP: &str = "127.0.0.1";

    /// The port of the server test hosts name: a listener of this process
    /// that accepts and drops every connection, so that a standby's
    /// preflight finds its server reachable.
    pub fn join_server_port() -> u16 {
        static PORT: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
        *PORT.get_or_init(|| {
            let listener =
                std::net::TcpListener::bind((JOIN_SERVER_IP, 0)).expect("a loopback listener");
            let port = listener.local_addr().expect("its address").port();
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    drop(conn);
                }
            });
            port
        })
    }

    /// One test host.
    pub struct TestHost {
        dir: tempfile_dir::TempDir,
        /// Its Node name.
        pub node: String,
        bin_dir: PathBuf,
    }

    /// A tiny owned temporary directory (removed on drop), so the stand-ins
    /// crate needs no dependency.
    pub mod tempfile_dir {
        use std::path::{Path, PathBuf};

        /// A directory removed on drop.
        pub struct TempDir(PathBuf);

        impl TempDir {
            /// A new empty directory under the system's temp dir.
            pub fn new(tag: &str) -> TempDir {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let n = N.fetch_add(1, Ordering::Relaxed);
                let p = std::env::temp_dir()
                    .join(format!("fleet-role-{tag}-{}-{n}", std::process::id()));
                let _ = std::fs::remove_dir_all(&p);
                std::fs::create_dir_all(&p).expect("a temp dir");
                TempDir(p)
            }
            /// Its path.
            pub fn path(&self) -> &Path {
                &self.0
            }
        }

        impl Drop for TempDir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    /// The workspace's root (for `deploy/`).
    pub fn workspace() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn write(path: &Path, contents: &str) {
        fs::create_dir_all(path.parent().expect("a parent")).expect("a dir");
        fs::write(path, contents).expect("a fixture file");
    }

    // No ExecStart: these units are state only (active or not), so the tests of
    // the local commands need no k3s process. The lab's units run real ones.
    const UNIT: &str = "[Unit]\nDescription=Lightweight Kubernetes {role} (stand-in unit, no process)\n[Service]\nType=notify\nKillMode=process\nRestart=always\n[Install]\nWantedBy=multi-user.target\n";

    impl TestHost {
        /// A new host named `node`, with its programs in `bin_dir` (where
        /// cargo put `fleet-role-actuator`, `systemctl` and `k3s`).
        pub fn new(node: &str, bin_dir: &Path) -> TestHost {
            for bin in ["systemctl", "k3s", "fleet-role-actuator"] {
                assert!(
                    bin_dir.join(bin).is_file(),
                    "{} is missing: build the workspace's binaries first (cargo build --workspace --bins); scripts/test.sh does",
                    bin_dir.join(bin).display()
                );
            }
            let dir = tempfile_dir::TempDir::new(node);
            let root = dir.path();
            let sys = root.join("etc/systemd/system");
            write(&sys.join("k3s.service"), &UNIT.replace("{role}", "server"));
            write(
                &sys.join("k3s-agent.service"),
                &UNIT.replace("{role}", "agent"),
            );
            write(
                &sys.join("fleet-regrade.service"),
                "[Unit]\nDescription=regrade watcher (no process)\n[Service]\n",
            );
            for unit in ["k3s", "k3s-agent", "fleet-regrade"] {
                let from = workspace().join(format!(
                    "deploy/systemd/{unit}.service.d/50-fleet-role.conf"
                ));
                let text =
                    fs::read_to_string(&from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
                // The drop-in pins the condition's root to `/`; a test
                // host's root is its directory, pinned the same way.
                let text = text.replace("--root / ", &format!("--root {} ", root.display()));
                write(
                    &sys.join(format!("{unit}.service.d/50-fleet-role.conf")),
                    &text,
                );
            }
            write(
                &root.join("etc/rancher/k3s/config.yaml"),
                &format!(
                    "node-name: {node}\ntoken: \"{K3S_TOKEN_MARKER}\"\nwith-node-id: false\nserver: \"https://{JOIN_SERVER_IP}:{}\"\n",
                    join_server_port()
                ),
            );
            let pw = root.join("etc/rancher/node/password");
            write(&pw, "0123456789abcdef0123456789abcdef\n");
            fs::set_permissions(&pw, fs::Permissions::from_mode(0o600)).expect("mode");
            TestHost {
                dir,
                node: node.to_string(),
                bin_dir: bin_dir.to_path_buf(),
            }
        }

        /// The host's root.
        pub fn root(&self) -> &Path {
            self.dir.path()
        }

        /// `rel` under the root.
        pub fn at(&self, rel: &str) -> PathBuf {
            self.root().join(rel)
        }

        /// Makes the host an agent as installed: role file, unit enabled and active.
        pub fn as_agent(self) -> Self {
            write(&self.at("var/lib/rancher/k3s/fleet-role"), "agent\n");
            units::set(self.root(), "k3s-agent", true, true);
            self
        }

        /// Makes the host a server as installed: role file, unit enabled and
        /// active, and an initialised etcd datastore.
        pub fn as_server(self) -> Self {
            write(&self.at("var/lib/rancher/k3s/fleet-role"), "server\n");
            write(&self.at("var/lib/rancher/k3s/server/db/etcd/member/wal/0000000000000000-0000000000000000.wal"), "wal");
            write(
                &self.at("var/lib/rancher/k3s/server/db/etcd/name"),
                &format!("{}-0a1b2c3d", self.node),
            );
            units::set(self.root(), "k3s", true, true);
            self
        }

        /// `PATH` with the stand-ins first.
        pub fn path_env(&self) -> String {
            format!(
                "{}:{}",
                self.bin_dir.display(),
                std::env::var("PATH").unwrap_or_default()
            )
        }

        /// A command running the actuator on this host.
        pub fn actuator(&self, args: &[&str]) -> Command {
            let mut c = Command::new(self.bin_dir.join("fleet-role-actuator"));
            c.args([
                "--root",
                &self.root().display().to_string(),
                "--node",
                &self.node,
            ])
            .args(args)
            .env("PATH", self.path_env())
            .env("FLEET_ROLE_ROOT", self.root())
            .env_remove("FLEET_ROLE_CONFIG")
            .env_remove("FLEET_ROLE_API");
            c
        }

        /// Runs `systemctl` (the stand-in) on this host.
        pub fn systemctl(&self, args: &[&str]) -> std::process::ExitStatus {
            Command::new(self.bin_dir.join("systemctl"))
                .args(args)
                .env("PATH", self.path_env())
                .env("FLEET_ROLE_ROOT", self.root())
                .status()
                .expect("the systemctl stand-in runs")
        }

        /// Whether a unit is active.
        pub fn active(&self, unit: &str) -> bool {
            units::is_active(self.root(), unit)
        }

        /// Whether a unit is enabled.
        pub fn enabled(&self, unit: &str) -> bool {
            units::is_enabled(self.root(), unit)
        }

        /// The most k3s units ever active at once.
        pub fn max_active_k3s(&self) -> usize {
            units::max_active_k3s(self.root())
        }

        /// The role file's contents, trimmed (`None` when missing).
        pub fn role(&self) -> Option<String> {
            fs::read_to_string(self.at("var/lib/rancher/k3s/fleet-role"))
                .ok()
                .map(|s| s.trim().to_string())
        }

        /// The systemd stand-in's log of mutating commands, one per line.
        pub fn systemd_log(&self) -> Vec<String> {
            fs::read_to_string(self.root().join("var/log/fleet-role-standin/systemd/log"))
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect()
        }

        /// Every file and directory under the root with its mode and contents:
        /// equal snapshots mean a byte-identical tree.
        pub fn tree(&self) -> BTreeMap<PathBuf, (u32, Vec<u8>)> {
            fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, (u32, Vec<u8>)>) {
                let Ok(entries) = fs::read_dir(dir) else {
                    return;
                };
                for e in entries.flatten() {
                    let p = e.path();
                    let meta = fs::symlink_metadata(&p).expect("metadata");
                    let rel = p.strip_prefix(base).expect("under base").to_path_buf();
                    if meta.is_dir() {
                        out.insert(rel, (meta.permissions().mode(), vec![]));
                        walk(base, &p, out);
                    } else {
                        out.insert(
                            rel,
                            (meta.permissions().mode(), fs::read(&p).unwrap_or_default()),
                        );
                    }
                }
            }
            let mut out = BTreeMap::new();
            walk(self.root(), self.root(), &mut out);
            out
        }
    }
}
