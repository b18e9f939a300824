//! The building blocks of a real-systemd lab host, on this machine's own
//! systemd: a host's network, `Type=notify` k3s units as install.sh writes
//! them, the overlap check read from systemd's journal, and teardown.
//!
//! These boot containers (`systemd-nspawn`, root): if that cannot run here,
//! the tests fail and say why; they are never skipped. They run one at a
//! time (at most two hosts up at once) and every wait is bounded.

use std::{
    fs,
    io::Read,
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    sync::Mutex,
    thread,
    time::Duration,
};

use lab::{
    bounded,
    machine::{self, Machine, MachineSpec},
    net::{self, LabNet},
    overlap, units,
};

/// One test's hosts at a time: the machine has 2 cores and is shared.
static SERIAL: Mutex<()> = Mutex::new(());

/// A boot on a busy machine takes about 10 s; this is the bound.
const BOOT: Duration = Duration::from_secs(180);
/// The bound of one quick command inside a host.
const QUICK: Duration = Duration::from_secs(30);

fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_fleet-role-lab"))
        .parent()
        .expect("a directory")
        .to_path_buf()
}

fn probe() -> String {
    env!("CARGO_BIN_EXE_fleet-role-lab-probe").to_string()
}

/// A test's lab: its hosts are powered off, then its network removed, then
/// its directory, also when the test fails (fields drop in this order).
struct Lab {
    machines: Vec<Machine>,
    net: LabNet,
    dir: tempfile::TempDir,
    serial: Option<std::sync::MutexGuard<'static, ()>>,
}

impl Lab {
    fn new() -> Lab {
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        Lab {
            machines: Vec::new(),
            net: lab::machine::lab_net().expect("the lab network (needs root and ip(8))"),
            dir: tempfile::tempdir().expect("a temporary directory"),
            serial: Some(serial),
        }
    }

    /// The turn of this test, kept past the lab's teardown (so that no
    /// other test's lab takes the same number before it is checked).
    fn keep_turn(&mut self) -> std::sync::MutexGuard<'static, ()> {
        self.serial.take().expect("the turn is held")
    }

    fn root(&self, name: &str) -> PathBuf {
        self.dir.path().join("hosts").join(name)
    }

    /// Adds host `name` (number `n`), lets `prepare` fill its root, boots it.
    fn boot(&mut self, name: &str, n: u8, prepare: impl FnOnce(&Path)) -> usize {
        let h = self.net.add_host(name, n).expect("the host's network");
        let root = self.root(name);
        fs::create_dir_all(&root).unwrap();
        let spec = MachineSpec::lab_host(
            &h,
            &root,
            &bin_dir(),
            Path::new(env!("CARGO_BIN_EXE_fleet-role-lab")),
        );
        for b in &spec.binds {
            fs::create_dir_all(&b.outside).unwrap();
        }
        prepare(&root);
        let start = clock::Clock::system().now();
        let m = Machine::boot(spec, BOOT).unwrap_or_else(|e| {
            panic!("host {name} did not boot (systemd-nspawn must run here, as root): {e}")
        });
        eprintln!("{name} booted in {:.1}s", start.elapsed().as_secs_f32());
        self.machines.push(m);
        self.machines.len() - 1
    }
}

/// Polls `check` until it holds, at most `bound`; then fails naming `what`.
fn wait_until(what: &str, bound: Duration, mut check: impl FnMut() -> bool) {
    let start = clock::Clock::system().now();
    while !check() {
        assert!(start.elapsed() < bound, "not within {bound:?}: {what}");
        thread::sleep(Duration::from_millis(300));
    }
}

/// What a TCP listener at `addr` answers, seen from this (the root) namespace.
fn answer(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text)
}

/// What a listener at `addr` answers, seen from inside host `m`.
fn answer_inside(m: &Machine, addr: &str) -> Option<String> {
    let o = m.exec(&[&probe(), "connect", addr], QUICK).ok()?;
    o.status.success().then_some(o.stdout)
}

/// A host whose `/usr/local/bin/k3s` is the probe, with k3s's units (and
/// nothing of fleet-role's: these tests are about systemd itself).
fn k3s_probe_host(root: &Path, ready: bool) {
    let sys = root.join("etc/systemd/system");
    units::write_k3s_units(&sys).unwrap();
    std::os::unix::fs::symlink(probe(), root.join("usr/local/bin/k3s")).unwrap();
    if !ready {
        // Through the unit's own `EnvironmentFile=-/etc/systemd/system/k3s.service.env`.
        fs::write(
            sys.join("k3s.service.env"),
            "FLEET_ROLE_LAB_PROBE_READY=never\n",
        )
        .unwrap();
    }
}

#[test]
fn a_host_has_its_own_loopback_reaches_another_over_the_bridge_and_can_be_cut_off() {
    let mut lab = Lab::new();
    let a = lab.boot("server-1", 1, |_| {});
    let b = lab.boot("server-2", 2, |_| {});
    let a_addr = lab.net.host("server-1").unwrap().addr;
    let (ma, mb) = (&lab.machines[a], &lab.machines[b]);
    assert_eq!(ma.exec_ok(&["hostname"], QUICK).unwrap().text(), "server-1");
    // Loopback and the lab's subnet only: no way out.
    let routes = ma.exec_ok(&["ip", "route"], QUICK).unwrap().stdout;
    assert!(!routes.contains("default"), "no default route: {routes}");

    let lab_port = format!("{a_addr}:7002");
    for (unit, addr, text) in [
        ("probe-lo", "127.0.0.1:7001", "server-1 loopback"),
        ("probe-lab", lab_port.as_str(), "server-1"),
    ] {
        ma.exec_ok(
            &[
                "systemd-run",
                &format!("--unit={unit}"),
                &probe(),
                "listen",
                addr,
                text,
            ],
            QUICK,
        )
        .unwrap();
    }
    wait_until("server-1's loopback answers inside it", QUICK, || {
        answer_inside(ma, "127.0.0.1:7001").as_deref() == Some("server-1 loopback")
    });
    // Its 127.0.0.1 is its own: neither this namespace nor the other host
    // reaches it there (whatever else may listen on this machine's port).
    assert_ne!(
        answer("127.0.0.1:7001".parse().unwrap()).as_deref(),
        Some("server-1 loopback")
    );
    assert_ne!(
        answer_inside(mb, "127.0.0.1:7001").as_deref(),
        Some("server-1 loopback")
    );
    wait_until("server-2 reaches server-1 over the bridge", QUICK, || {
        answer_inside(mb, &lab_port).as_deref() == Some("server-1")
    });
    let from_root: SocketAddr = lab_port.parse().unwrap();
    wait_until("the root namespace reaches server-1", QUICK, || {
        answer(from_root).as_deref() == Some("server-1")
    });

    lab.net.cut_off("server-1").unwrap();
    assert_eq!(answer(from_root), None, "cut off, it is unreachable");
    assert_eq!(answer_inside(&lab.machines[b], &lab_port), None);

    lab.net.restore("server-1").unwrap();
    wait_until("server-1 is reachable again once restored", QUICK, || {
        answer(from_root).as_deref() == Some("server-1")
    });
    assert_eq!(
        answer_inside(&lab.machines[b], &lab_port).as_deref(),
        Some("server-1")
    );
}

#[test]
fn a_notify_k3s_unit_that_never_sends_ready_blocks_a_plain_start_but_not_a_no_block_start() {
    let mut lab = Lab::new();
    let i = lab.boot("server-1", 1, |root| k3s_probe_host(root, false));
    let m = &lab.machines[i];

    // What hung the actuator: `systemctl start` waits for READY=1, and with
    // TimeoutStartSec=0 it waits for ever. The bound here ends the wait.
    let started = m.systemctl(&["start", "k3s"], Duration::from_secs(20));
    assert!(
        matches!(
            &started,
            Err(machine::Error::Exec {
                source: bounded::Error::Timeout { .. },
                ..
            })
        ),
        "a plain start must still be waiting after 20 s: {started:?}"
    );
    assert_eq!(m.active_state("k3s").unwrap(), "activating");
    // Its job is still queued in systemd; a stop cancels it.
    m.systemctl(&["stop", "k3s"], QUICK).unwrap();
    wait_until("k3s is inactive after the stop", QUICK, || {
        m.active_state("k3s").unwrap() == "inactive"
    });

    let queued = m
        .systemctl(&["start", "--no-block", "k3s"], QUICK)
        .expect("a queued start returns");
    assert!(queued.status.success(), "{queued:?}");
    wait_until("k3s is activating", QUICK, || {
        m.active_state("k3s").unwrap() == "activating"
    });
    // It stays there: the process runs but never says it is ready.
    thread::sleep(Duration::from_secs(2));
    let sub = m
        .exec_ok(
            &["systemctl", "show", "-p", "SubState", "--value", "k3s"],
            QUICK,
        )
        .unwrap();
    assert_eq!(m.active_state("k3s").unwrap(), "activating");
    assert_eq!(sub.text(), "start");
    m.systemctl(&["stop", "k3s"], QUICK).unwrap();
}

#[test]
fn a_notify_k3s_unit_whose_process_sends_ready_starts_and_is_active() {
    let mut lab = Lab::new();
    let i = lab.boot("server-1", 1, |root| k3s_probe_host(root, true));
    let m = &lab.machines[i];
    // install.sh's two-line ExecStart is read as `k3s server`.
    let exec = m
        .exec_ok(&["systemctl", "show", "-p", "ExecStart", "k3s"], QUICK)
        .unwrap();
    assert!(
        exec.stdout.contains("argv[]=/usr/local/bin/k3s server ;"),
        "{}",
        exec.stdout
    );
    for unit in ["k3s", "k3s-agent"] {
        let o = m
            .systemctl(&["start", unit], Duration::from_secs(60))
            .unwrap();
        assert!(o.status.success(), "systemctl start {unit}: {o:?}");
        assert_eq!(m.active_state(unit).unwrap(), "active", "{unit}");
    }
}

#[test]
fn the_overlap_check_sees_both_k3s_units_running_together_and_not_when_one_stops_before_the_other_starts()
 {
    let mut lab = Lab::new();
    let i = lab.boot("server-1", 1, |root| k3s_probe_host(root, true));
    let long = Duration::from_secs(60);
    let run = |m: &Machine, args: &[&str]| {
        let o = m.systemctl(args, long).unwrap();
        assert!(o.status.success(), "systemctl {args:?}: {o:?}");
    };
    let check = |m: &Machine| overlap::of_k3s_units(m, long).unwrap();

    let m = &lab.machines[i];
    // One after the other, with a daemon-reload while the server runs
    // (systemd logs the restored state then, which is not a gap).
    run(m, &["start", "k3s"]);
    run(m, &["daemon-reload"]);
    run(m, &["stop", "k3s"]);
    run(m, &["start", "k3s-agent"]);
    run(m, &["stop", "k3s-agent"]);
    assert_eq!(check(m), vec![], "one stopped before the other started");
    // The check saw both units' changes (it did not pass on an empty journal).
    let recs = m
        .journal(&["k3s.service", "k3s-agent.service"], long)
        .unwrap();
    let seen = overlap::changes(&recs, &["k3s.service", "k3s-agent.service"]);
    for c in &seen {
        eprintln!("{} {}: {} -> {}", c.at_us, c.unit, c.from, c.to);
    }
    for u in ["k3s.service", "k3s-agent.service"] {
        assert!(
            seen.iter().any(|c| c.unit == u && c.to == "running"),
            "{u} in {seen:?}"
        );
    }

    run(m, &["start", "k3s"]);
    run(m, &["start", "k3s-agent"]);
    run(m, &["stop", "k3s"]);
    let found = check(m);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].began.unit, "k3s-agent.service");
    assert_eq!(found[0].ended.as_ref().unwrap().unit, "k3s.service");

    // The journal outlives a reboot: the overlap is still reported, and the
    // new boot starts with both units dead.
    lab.machines[i].reboot(BOOT).unwrap();
    let m = &lab.machines[i];
    run(m, &["start", "k3s-agent"]);
    let after = check(m);
    assert_eq!(after, found, "the earlier boot's overlap only");
}

fn mounts_of(k: u8) -> Vec<String> {
    let p = format!("{}{k}-", net::PREFIX);
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&p))
        .map(String::from)
        .collect()
}

fn assert_nothing_left(k: u8) {
    assert_eq!(net::namespaces_of(k), Vec::<String>::new(), "namespaces");
    assert!(
        !Path::new("/sys/class/net")
            .join(format!("{}{k}", net::PREFIX))
            .exists(),
        "the root namespace's link"
    );
    assert_eq!(mounts_of(k), Vec::<String>::new(), "mounts");
    assert_eq!(machine::processes_of(k), Vec::<u32>::new(), "processes");
    assert_eq!(machine::cgroups_of(k), Vec::<PathBuf>::new(), "cgroups");
    assert!(!net::labs_present().contains(&k), "the claim");
}

fn busy_lab() -> (Lab, u8) {
    let mut lab = Lab::new();
    let i = lab.boot("server-1", 1, |_| {});
    lab.net.add_host("agent-1", 2).unwrap();
    let k = lab.net.number();
    lab.machines[i]
        .exec_ok(&["systemd-run", "--unit=busy", "sleep", "3600"], QUICK)
        .unwrap();
    assert!(!net::namespaces_of(k).is_empty());
    assert!(!machine::processes_of(k).is_empty());
    assert!(!machine::cgroups_of(k).is_empty());
    (lab, k)
}

#[test]
fn teardown_leaves_no_namespace_link_mount_cgroup_or_process_behind() {
    let (mut lab, k) = busy_lab();
    let _turn = lab.keep_turn();
    drop(lab);
    assert_nothing_left(k);
}

#[test]
fn what_a_crashed_lab_left_is_swept_away_by_its_prefix() {
    let (mut lab, k) = busy_lab();
    let _turn = lab.keep_turn();
    // A crash: nothing of the lab's own teardown runs.
    std::mem::forget(lab.machines.pop());
    let Lab { net, dir, .. } = lab;
    std::mem::forget(net);
    machine::sweep_lab(k).unwrap();
    net::sweep_lab(k).unwrap();
    assert_nothing_left(k);
    drop(dir);
}

#[test]
fn a_host_whose_enabled_k3s_never_sends_ready_boots_but_stays_starting_until_k3s_is_stopped() {
    let mut lab = Lab::new();
    let h = lab.net.add_host("server-1", 1).unwrap();
    let root = lab.root("server-1");
    let mut spec = MachineSpec::lab_host(
        &h,
        &root,
        &bin_dir(),
        Path::new(env!("CARGO_BIN_EXE_fleet-role-lab")),
    );
    for b in &spec.binds {
        fs::create_dir_all(&b.outside).unwrap();
    }
    k3s_probe_host(&root, false);
    // Enabled as install.sh enables it (`systemctl enable k3s`).
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink("/etc/systemd/system/k3s.service", wants.join("k3s.service"))
        .unwrap();
    // A real host in this state never reaches `running`: wait for less.
    spec.up_when = machine::UpWhen::BasicTarget;
    lab.machines
        .push(Machine::boot(spec, BOOT).expect("the host boots to basic.target"));
    let m = &lab.machines[0];
    wait_until("k3s is activating at boot", QUICK, || {
        m.active_state("k3s").unwrap() == "activating"
    });
    let state = m.systemctl(&["is-system-running"], QUICK).unwrap();
    assert_eq!(state.text(), "starting", "the boot waits for k3s");
    m.systemctl(&["stop", "k3s"], QUICK).unwrap();
    wait_until("the boot ends once k3s is stopped", QUICK, || {
        let s = m.systemctl(&["is-system-running"], QUICK).unwrap();
        matches!(s.text(), "running" | "degraded")
    });
}

#[test]
fn fleet_role_drop_ins_start_only_the_unit_the_role_file_names_on_real_systemd() {
    let actuator = bin_dir().join("fleet-role-actuator");
    assert!(
        actuator.is_file(),
        "{} is missing: build the workspace's binaries (cargo build --workspace --bins)",
        actuator.display()
    );
    let mut lab = Lab::new();
    let role_file = lab.root("server-1").join("var/lib/rancher/k3s/fleet-role");
    let i = lab.boot("server-1", 1, |root| {
        k3s_probe_host(root, true);
        units::write_fleet_role_units(&units::deploy_dir(), &root.join("etc/systemd/system"))
            .unwrap();
        fs::create_dir_all(root.join("usr/bin")).unwrap();
        std::os::unix::fs::symlink(&actuator, root.join("usr/bin/fleet-role-actuator")).unwrap();
        fs::create_dir_all(role_file.parent().unwrap()).unwrap();
        fs::write(&role_file, "server\n").unwrap();
    });
    let m = &lab.machines[i];
    let long = Duration::from_secs(60);
    let start = |unit: &str| {
        let o = m.systemctl(&["start", unit], long).unwrap();
        assert!(o.status.success(), "a skipped start is no failure: {o:?}");
    };
    // The drop-ins are in place, as deploy/ has them.
    let cond = m
        .exec_ok(
            &["systemctl", "show", "-p", "ExecCondition", "k3s-agent"],
            QUICK,
        )
        .unwrap();
    assert!(
        cond.stdout.contains(
            "fleet-role-actuator ; argv[]=/usr/bin/fleet-role-actuator --root / is agent"
        ),
        "{}",
        cond.stdout
    );

    start("k3s-agent");
    assert_eq!(
        m.active_state("k3s-agent").unwrap(),
        "inactive",
        "role: server"
    );
    start("k3s");
    assert_eq!(m.active_state("k3s").unwrap(), "active");
    m.systemctl(&["stop", "k3s"], long).unwrap();

    fs::write(&role_file, "agent\n").unwrap();
    start("k3s");
    assert_eq!(m.active_state("k3s").unwrap(), "inactive", "role: agent");
    start("k3s-agent");
    assert_eq!(m.active_state("k3s-agent").unwrap(), "active");
    // The skipped starts ran only their condition, each while the other unit
    // was stopped: never both at once.
    assert_eq!(overlap::of_k3s_units(m, long).unwrap(), vec![]);
}
