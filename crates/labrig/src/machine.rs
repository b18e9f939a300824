//! A lab host as a container booting this machine's own systemd as its PID 1.
//!
//! More in docs/internals.md, "labrig: machine".

use std::{
    fs,
    io::{self, Read, Seek, SeekFrom},
    os::unix::process::{CommandExt, ExitStatusExt},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    thread,
    time::Duration,
};

use crate::{bounded, net};

/// How long one `systemctl is-system-running` poll may take.
const POLL_DEADLINE: Duration = Duration::from_secs(10);

/// The PATH of commands run inside a host (nothing of the caller's leaks in).
const HOST_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Errors of a lab machine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `systemd-nspawn` is not installed.
    #[error(
        "systemd-nspawn is missing: install Debian's systemd-container \
         (`apt-get install -y systemd-container`; scripts/test.sh does it)"
    )]
    NoNspawn,
    /// The machine's directories or console log could not be made.
    #[error("preparing machine {name}: {path}: {source}")]
    Prepare {
        /// The machine.
        name: String,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// nspawn could not be started.
    #[error("starting `{command}`: {source}")]
    Spawn {
        /// What was run.
        command: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// nspawn ended before the machine was up (or while it was in use).
    #[error(
        "machine {name}: systemd-nspawn exited ({status}); nothing of it runs now; console:\n{console}"
    )]
    Exited {
        /// The machine.
        name: String,
        /// How nspawn ended.
        status: ExitStatus,
        /// The end of its console log.
        console: String,
    },
    /// The machine was not up ([`UpWhen`]) in time; it was killed.
    #[error("machine {name} was not up within {}s (last state: {last}); it was killed; console:\n{console}", after.as_secs())]
    NotUp {
        /// The machine.
        name: String,
        /// The bound.
        after: Duration,
        /// The last answer of `systemctl is-system-running` (or why none).
        last: String,
        /// The end of its console log.
        console: String,
    },
    /// A command inside the machine failed or timed out.
    #[error("on machine {name}: {source}")]
    Exec {
        /// The machine.
        name: String,
        /// What went wrong.
        #[source]
        source: bounded::Error,
    },
    /// The machine did not stop within its bound and was killed.
    #[error("machine {name} did not {what} within {}s; it was killed", after.as_secs())]
    StopTimeout {
        /// The machine.
        name: String,
        /// `power off`, `reboot`.
        what: &'static str,
        /// The bound.
        after: Duration,
    },
    /// The machine's journal could not be read as JSON.
    #[error("machine {name}: journal line {line} is not JSON: {source}")]
    Journal {
        /// The machine.
        name: String,
        /// The 1-based line.
        line: usize,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A sweep left processes or cgroups behind.
    #[error("sweep left: {}", .0.join("; "))]
    Leftovers(Vec<String>),
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

use crate::machine_spec::JOURNALD_CONF;
pub use crate::machine_spec::{Bind, HOST_DIRS, MachineSpec, UpWhen};

/// A running lab host. Dropping it powers it off (bounded) and kills it.
#[derive(Debug)]
pub struct Machine {
    spec: MachineSpec,
    nspawn: Option<Child>,
    leader: u32,
}

/// The cgroup hierarchies a machine's cgroup is made in: the unified one
/// (pure v2 at `/sys/fs/cgroup`, or hybrid at `/sys/fs/cgroup/unified`) and
/// the legacy `name=systemd` one, whichever exist.
fn cgroup_roots() -> Vec<PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    if base.join("cgroup.controllers").exists() {
        return vec![base.to_path_buf()];
    }
    ["unified", "systemd"]
        .iter()
        .map(|h| base.join(h))
        .filter(|p| p.join("cgroup.procs").exists())
        .collect()
}

/// Moves this process into the cgroup `name` of each hierarchy (made if
/// missing) and replaces it with `program`: what `fleet-role-lab in-cgroup`
/// does, so nspawn starts in the machine's own cgroup. Returns only on error.
pub fn exec_in_cgroup(name: &str, program: &str, args: &[String]) -> io::Error {
    for root in cgroup_roots() {
        let dir = root.join(name);
        if let Err(e) = fs::create_dir_all(&dir) {
            return io::Error::new(e.kind(), format!("{}: {e}", dir.display()));
        }
        if let Err(e) = fs::write(dir.join("cgroup.procs"), std::process::id().to_string()) {
            return io::Error::new(e.kind(), format!("{}/cgroup.procs: {e}", dir.display()));
        }
    }
    Command::new(program).args(args).exec()
}

fn console_tail(path: &Path) -> String {
    let Ok(mut f) = fs::File::open(path) else {
        return "(no console log)".into();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(3000)));
    let mut s = Vec::new();
    let _ = f.read_to_end(&mut s);
    String::from_utf8_lossy(&s).into_owned()
}

/// Copies this machine's dpkg database to the host's `ROOT/var/lib/dpkg`
/// unless it is there (from an earlier boot of the host): `cp -a` (owners,
/// modes and times as they are), into a temporary name first, so a copy cut
/// short is made again at the next boot rather than taken for a database;
/// without `statoverride`'s entries.
fn copy_dpkg_database(spec: &MachineSpec) -> Result<()> {
    let dest = spec.root.join("var/lib/dpkg");
    if dest.join("status").exists() {
        return Ok(());
    }
    let prep = |path: &Path, e: io::Error| Error::Prepare {
        name: spec.name.clone(),
        path: path.to_path_buf(),
        source: e,
    };
    let tmp = spec.root.join("var/lib/dpkg.copying");
    let _ = fs::remove_dir_all(&tmp);
    if let Some(parent) = tmp.parent() {
        fs::create_dir_all(parent).map_err(|e| prep(parent, e))?;
    }
    let _ = fs::remove_dir_all(&dest);
    bounded::run_ok(
        Command::new("cp").arg("-a").arg("/var/lib/dpkg").arg(&tmp),
        Duration::from_secs(120),
    )
    .map_err(|source| Error::Exec {
        name: spec.name.clone(),
        source,
    })?;
    // The overrides name this machine's users and groups (ssl-cert), which
    // the host's /etc (systemd-sysusers' at boot) may lack, and dpkg stops
    // at an unknown one. They are for this machine's own files, which the
    // host never unpacks again.
    let overrides = tmp.join("statoverride");
    fs::write(&overrides, "").map_err(|e| prep(&overrides, e))?;
    fs::rename(&tmp, &dest).map_err(|e| prep(&dest, e))
}

/// The children of a process with the given command name.
fn children_named(parent: u32, comm: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = &stat[open + 1..close];
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if name == comm && ppid == Some(parent) {
            v.push(pid);
        }
    }
    v
}

impl Machine {
    /// Boots a host and waits (at most `bound`) until it is up as
    /// [`MachineSpec::up_when`] says. On any error nothing of it is left running.
    pub fn boot(spec: MachineSpec, bound: Duration) -> Result<Machine> {
        let clock = clock::Clock::system();
        if !Path::new("/usr/bin/systemd-nspawn").exists()
            && !Path::new("/bin/systemd-nspawn").exists()
        {
            return Err(Error::NoNspawn);
        }
        let prep = |path: &Path, e: io::Error| Error::Prepare {
            name: spec.name.clone(),
            path: path.to_path_buf(),
            source: e,
        };
        for b in &spec.binds {
            fs::create_dir_all(&b.outside).map_err(|e| prep(&b.outside, e))?;
        }
        let usr_bin = spec.root.join("usr/bin");
        fs::create_dir_all(&usr_bin).map_err(|e| prep(&usr_bin, e))?;
        if spec.writable_usr {
            copy_dpkg_database(&spec)?;
        }
        let jconf = spec
            .root
            .join("etc/systemd/journald.conf.d/50-fleet-role-lab.conf");
        if let Some(dir) = jconf.parent()
            && dir.exists()
        {
            fs::write(&jconf, JOURNALD_CONF).map_err(|e| prep(&jconf, e))?;
        }
        // A machine of this name left by a crash would share its cgroups
        // with the new one (and confuse its systemd): it goes first.
        kill_cgroup(&spec.name);
        let start = clock.now();
        while let left @ [_, ..] = remove_cgroups(&spec.name).as_slice() {
            if clock.since(start) > Duration::from_secs(15) {
                return Err(Error::Leftovers(
                    left.iter()
                        .map(|p| format!("cgroup {}", p.display()))
                        .collect(),
                ));
            }
            kill_cgroup(&spec.name);
            thread::sleep(Duration::from_millis(100));
        }
        let id = spec.machine_id_file();
        fs::write(&id, format!("{}\n", spec.uuid().replace('-', ""))).map_err(|e| prep(&id, e))?;
        let log = spec.console_log();
        let console = fs::File::create(&log).map_err(|e| prep(&log, e))?;
        let console2 = console.try_clone().map_err(|e| prep(&log, e))?;
        let mut cmd = Command::new(&spec.launcher);
        cmd.arg("in-cgroup")
            .arg(&spec.name)
            .arg("--")
            .arg("systemd-nspawn")
            .args(spec.nspawn_args())
            .env_clear()
            .env("PATH", HOST_PATH)
            .stdin(Stdio::null())
            .stdout(console)
            .stderr(console2)
            // Its own group: a Ctrl-C meant for the test runner does not
            // reach it half-way; it is stopped by `poweroff` or killed.
            .process_group(0);
        let command = bounded::Shown(&cmd).to_string();
        let child = cmd
            .spawn()
            .map_err(|source| Error::Spawn { command, source })?;
        let mut m = Machine {
            spec,
            nspawn: Some(child),
            leader: 0,
        };
        // On an error `m` is dropped, which kills nspawn and removes its cgroups.
        m.wait_up(bound)?;
        Ok(m)
    }

    fn wait_up(&mut self, bound: Duration) -> Result<()> {
        let clock = clock::Clock::system();
        let start = clock.now();
        let mut last = String::from("no systemd yet");
        loop {
            self.check_alive()?;
            if self.leader == 0 {
                let pid = self.nspawn_pid();
                if let Some(&l) = children_named(pid, "systemd").first() {
                    self.leader = l;
                }
            }
            if self.leader != 0 {
                let probe: &[&str] = match self.spec.up_when {
                    UpWhen::Running => &["systemctl", "is-system-running"],
                    UpWhen::BasicTarget => &["systemctl", "is-active", "basic.target"],
                };
                match self.exec(probe, POLL_DEADLINE) {
                    Ok(o) => {
                        last = o.text().to_string();
                        if matches!(last.as_str(), "running" | "degraded" | "active") {
                            return Ok(());
                        }
                    }
                    Err(e) => last = e.to_string(),
                }
            }
            if clock.since(start) > bound {
                self.kill();
                return Err(Error::NotUp {
                    name: self.spec.name.clone(),
                    after: bound,
                    last,
                    console: console_tail(&self.spec.console_log()),
                });
            }
            thread::sleep(Duration::from_millis(250));
        }
    }

    fn nspawn_pid(&self) -> u32 {
        self.nspawn.as_ref().map(Child::id).unwrap_or(0)
    }

    fn check_alive(&mut self) -> Result<()> {
        let Some(child) = self.nspawn.as_mut() else {
            return Err(Error::Exited {
                name: self.spec.name.clone(),
                status: ExitStatus::from_raw(0),
                console: "(already stopped)".into(),
            });
        };
        if let Ok(Some(status)) = child.try_wait() {
            self.nspawn = None;
            // nspawn gone does not mean the container is: kill what is left.
            self.kill();
            return Err(Error::Exited {
                name: self.spec.name.clone(),
                status,
                console: console_tail(&self.spec.console_log()),
            });
        }
        Ok(())
    }

    /// The machine's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// How it was booted.
    pub fn spec(&self) -> &MachineSpec {
        &self.spec
    }

    /// The container's systemd, as this machine's pid.
    pub fn leader(&self) -> u32 {
        self.leader
    }

    /// Whether nspawn still runs.
    pub fn is_running(&mut self) -> bool {
        self.check_alive().is_ok()
    }

    fn nsenter(&self, args: &[&str]) -> Command {
        let mut c = Command::new("nsenter");
        // -a: every namespace of the container's systemd; -r -w: its root and
        // working directory (the caller's may not exist inside).
        c.args(["-t", &self.leader.to_string(), "-a", "-r", "-w", "--"])
            .args(args)
            .env_clear()
            .env("PATH", HOST_PATH)
            .env("SYSTEMD_PAGER", "")
            .env("SYSTEMD_COLORS", "0");
        c
    }

    /// Runs a command inside the host; its failure status is returned, not
    /// an error. Past `deadline` it is killed (with what it started).
    pub fn exec(&self, args: &[&str], deadline: Duration) -> Result<bounded::Output> {
        bounded::run(&mut self.nsenter(args), deadline).map_err(|source| Error::Exec {
            name: self.spec.name.clone(),
            source,
        })
    }

    /// Runs a command inside the host; a failure status is an error.
    pub fn exec_ok(&self, args: &[&str], deadline: Duration) -> Result<bounded::Output> {
        bounded::run_ok(&mut self.nsenter(args), deadline).map_err(|source| Error::Exec {
            name: self.spec.name.clone(),
            source,
        })
    }

    /// `systemctl ARGS` inside the host (failure status returned, not an error).
    pub fn systemctl(&self, args: &[&str], deadline: Duration) -> Result<bounded::Output> {
        let mut a = vec!["systemctl"];
        a.extend_from_slice(args);
        self.exec(&a, deadline)
    }

    /// A unit's `ActiveState` as systemd reports it (`active`, `activating`, …).
    pub fn active_state(&self, unit: &str) -> Result<String> {
        let o = self.exec_ok(
            &["systemctl", "show", "-p", "ActiveState", "--value", unit],
            POLL_DEADLINE,
        )?;
        Ok(o.text().to_string())
    }

    /// A unit's journal records (`journalctl -u UNIT -o json`, every boot of
    /// this host), after journald has written all it was sent.
    pub fn journal(&self, units: &[&str], deadline: Duration) -> Result<Vec<serde_json::Value>> {
        self.journal_matching("-u", units, deadline)
    }

    /// The records a process logged under one of `identifiers` (`journalctl
    /// -t ID`): journald does not always tie a stream's lines to the unit
    /// of the process that wrote them, so a program's own messages are
    /// found by its identifier rather than by its unit.
    pub fn journal_of(
        &self,
        identifiers: &[&str],
        deadline: Duration,
    ) -> Result<Vec<serde_json::Value>> {
        self.journal_matching("-t", identifiers, deadline)
    }

    fn journal_matching(
        &self,
        flag: &str,
        values: &[&str],
        deadline: Duration,
    ) -> Result<Vec<serde_json::Value>> {
        // --sync: records sent before now (systemd's of a finished job) are
        // in the files before they are read.
        self.exec_ok(&["journalctl", "--sync"], deadline)?;
        let mut a = vec!["journalctl", "-o", "json", "--no-pager", "--all"];
        for v in values {
            a.push(flag);
            a.push(v);
        }
        let o = self.exec_ok(&a, deadline)?;
        o.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|source| Error::Journal {
                    name: self.spec.name.clone(),
                    line: i + 1,
                    source,
                })
            })
            .collect()
    }

    /// Powers the host off cleanly (`systemctl poweroff`); past `bound` it
    /// is killed and that is the error. Either way it is stopped after.
    pub fn poweroff(&mut self, bound: Duration) -> Result<()> {
        self.stop("power off", &["systemctl", "poweroff"], bound)
            .map(|_| ())
    }

    /// Boots a host that was powered off again, from the same spec, as the
    /// power button would (its enabled units start as at any boot), and
    /// waits until it is up (bounded by `bound`). Whether it was off: a
    /// host still running is left as it is.
    pub fn power_on(&mut self, bound: Duration) -> Result<bool> {
        if self.nspawn.is_some() {
            return Ok(false);
        }
        *self = Machine::boot(self.spec.clone(), bound)?;
        Ok(true)
    }

    /// Reboots the host: `systemctl reboot` inside (nspawn exits with 133,
    /// as it does for a reboot), then boots it again from the same spec and
    /// waits until it is up (each half bounded by `bound`).
    pub fn reboot(&mut self, bound: Duration) -> Result<()> {
        self.stop("reboot", &["systemctl", "reboot"], bound)?;
        let again = Machine::boot(self.spec.clone(), bound)?;
        // The new nspawn is now ours; the old (stopped) one has nothing left.
        *self = again;
        Ok(())
    }

    fn stop(&mut self, what: &'static str, how: &[&str], bound: Duration) -> Result<ExitStatus> {
        let clock = clock::Clock::system();
        if self.nspawn.is_none() {
            return Ok(ExitStatus::from_raw(0));
        }
        let start = clock.now();
        // The request may die with the machine: only the exit counts.
        let _ = self.exec(how, POLL_DEADLINE.min(bound));
        loop {
            if let Some(child) = self.nspawn.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.nspawn = None;
                // Stragglers (none after a clean power-off) and the cgroups.
                self.kill();
                return Ok(status);
            }
            if clock.since(start) > bound {
                self.kill();
                return Err(Error::StopTimeout {
                    name: self.spec.name.clone(),
                    what,
                    after: bound,
                });
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the machine: every process in its cgroups (the container's
    /// systemd among them: when it dies, so does all of its pid namespace;
    /// killing nspawn alone would leave the container running, orphaned),
    /// then nspawn, and removes its cgroups.
    pub fn kill(&mut self) {
        let clock = clock::Clock::system();
        kill_cgroup(&self.spec.name);
        if let Some(mut child) = self.nspawn.take() {
            let pid = rustix::process::Pid::from_child(&child);
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            let _ = child.kill();
            let _ = child.wait();
        }
        // The container's processes die with its pid namespace, a moment
        // after its PID 1; their cgroups can be removed only then.
        let start = clock.now();
        while !self.remove_cgroups() && clock.since(start) < Duration::from_secs(15) {
            kill_cgroup(&self.spec.name);
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Removes the machine's cgroups (deepest first); true if none is left.
    fn remove_cgroups(&self) -> bool {
        remove_cgroups(&self.spec.name).is_empty()
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        if self.nspawn.is_some() {
            if self.leader != 0 {
                let _ = self.poweroff(Duration::from_secs(20));
            }
            self.kill();
        }
    }
}

/// The processes in cgroup `name` (and below it) of every hierarchy.
fn cgroup_pids(name: &str) -> Vec<u32> {
    fn walk(dir: &Path, out: &mut Vec<u32>) {
        if let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) {
            out.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
        for e in fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&e.path(), out);
            }
        }
    }
    let mut v = Vec::new();
    for root in cgroup_roots() {
        walk(&root.join(name), &mut v);
    }
    v.sort();
    v.dedup();
    v
}

/// SIGKILLs every process in cgroup `name`.
fn kill_cgroup(name: &str) {
    for pid in cgroup_pids(name) {
        if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
}

/// Removes cgroup `name` in every hierarchy, deepest first; returns what is left.
fn remove_cgroups(name: &str) -> Vec<PathBuf> {
    fn rm(dir: &Path) {
        for e in fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                rm(&e.path());
            }
        }
        let _ = fs::remove_dir(dir);
    }
    let mut left = Vec::new();
    for root in cgroup_roots() {
        let dir = root.join(name);
        if dir.exists() {
            rm(&dir);
            if dir.exists() {
                left.push(dir);
            }
        }
    }
    left
}

/// The cgroups of lab `k`'s machines (`frlK-…` in each hierarchy).
pub fn cgroups_of(k: u8) -> Vec<PathBuf> {
    let p = format!("{}{k}-", net::PREFIX);
    cgroup_roots()
        .iter()
        .flat_map(|r| fs::read_dir(r).into_iter().flatten().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&p))
        .map(|e| e.path())
        .collect()
}

/// The processes of lab `k`'s machines: its nspawns (`--machine=frlK-…`) and
/// everything in its machines' cgroups (their containers).
pub fn processes_of(k: u8) -> Vec<u32> {
    let flag = format!("--machine={}{k}-", net::PREFIX);
    let mut v: Vec<u32> = cgroups_of(k)
        .iter()
        .filter_map(|g| g.file_name().map(|n| n.to_string_lossy().into_owned()))
        .flat_map(|n| cgroup_pids(&n))
        .collect();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if cmdline
            .split(|b| *b == 0)
            .any(|a| a.starts_with(flag.as_bytes()))
        {
            v.push(pid);
        }
    }
    v.sort();
    v.dedup();
    v
}

/// Kills lab `k`'s machines and removes their cgroups, whoever started them
/// (a crashed lab's leftovers).
pub fn sweep_lab(k: u8) -> Result<()> {
    let clock = clock::Clock::system();
    for pid in processes_of(k) {
        if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
    let start = clock.now();
    loop {
        for pid in processes_of(k) {
            if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            }
        }
        let procs = processes_of(k);
        let groups: Vec<PathBuf> = cgroups_of(k)
            .into_iter()
            .filter(|g| {
                let name = g.file_name().map(|n| n.to_string_lossy().into_owned());
                name.is_some_and(|n| !remove_cgroups(&n).is_empty())
            })
            .collect();
        if procs.is_empty() && groups.is_empty() {
            return Ok(());
        }
        if clock.since(start) > Duration::from_secs(15) {
            let mut left: Vec<String> = procs.iter().map(|p| format!("process {p}")).collect();
            left.extend(groups.iter().map(|g| format!("cgroup {}", g.display())));
            return Err(Error::Leftovers(left));
        }
        thread::sleep(Duration::from_millis(200));
    }
}

/// Sweeps every stale lab: its machines, then its network.
pub fn sweep_stale() -> Result<Vec<u8>> {
    let stale = net::stale_labs();
    let mut left = Vec::new();
    for &k in &stale {
        if let Err(e) = sweep_lab(k) {
            left.push(e.to_string());
        }
        if let Err(e) = net::sweep_lab(k) {
            left.push(e.to_string());
        }
    }
    if left.is_empty() {
        Ok(stale)
    } else {
        Err(Error::Leftovers(left))
    }
}

/// A new lab network, once every stale lab (machines, then network) is
/// swept: a dead owner's leftovers could hold the number it would pick.
pub fn lab_net() -> net::Result<net::LabNet> {
    let _ = sweep_stale();
    net::LabNet::create()
}
