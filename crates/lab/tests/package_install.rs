//! The Debian package and the Ansible role, installed as an operator does on
//! a k3s server that runs: one real-systemd lab host whose k3s (the stand-in,
//! as `/usr/local/bin/k3s` under install.sh's unit) is active before anything
//! of fleet-role is there, with `/usr` and dpkg's database writable in the
//! host alone ([`lab::machine::MachineSpec::with_writable_usr`]).
//!
//! They need the packages `scripts/package.sh` builds (scripts/test.sh builds
//! them before the tests) and, for the role, ansible-core from
//! `scripts/ansible.sh`. Without either they fail and say so; they never skip.

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicBool, Ordering},
    thread,
    time::Duration,
};

use lab::{
    bounded, etcd_gw,
    lab_setup::Bins,
    machine::{Bind, Machine},
    systemd_lab::{FleetRole, Options, SystemdLab},
};
use tokio::sync::Mutex;

/// One lab at a time: the machine has 2 cores and is shared.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// The bound of a quick command inside the host.
const QUICK: Duration = Duration::from_secs(30);
/// The bound of one `dpkg` run (a man-db trigger included) on a busy machine.
const DPKG: Duration = Duration::from_secs(300);
/// The bound of one `ansible-playbook` run.
const PLAYBOOK: Duration = Duration::from_secs(900);

const ROLE_FILE: &str = "var/lib/rancher/k3s/fleet-role";

fn top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The folder of the built packages: `FLEET_ROLE_DEB_DIR` (scripts/test.sh
/// sets it) or the checkout's `target/debian`.
fn deb_dir() -> PathBuf {
    let dir = std::env::var_os("FLEET_ROLE_DEB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| top().join("target/debian"));
    fs::canonicalize(&dir).unwrap_or(dir)
}

/// The newest built `fleet-role-actuator_*.deb`; a missing one fails the test.
fn actuator_deb() -> PathBuf {
    newest_deb("fleet-role-actuator_")
}

/// The newest built package whose file name starts with `prefix`; a
/// missing one fails the test.
fn newest_deb(prefix: &str) -> PathBuf {
    let dir = deb_dir();
    let mut debs: Vec<PathBuf> = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".deb"))
        })
        .collect();
    debs.sort_by_key(|p| fs::metadata(p).and_then(|m| m.modified()).ok());
    debs.pop().unwrap_or_else(|| {
        panic!(
            "no {prefix}*.deb in {}: build the packages first with scripts/package.sh \
             (scripts/test.sh does it before the tests), or name their folder in FLEET_ROLE_DEB_DIR",
            dir.display()
        )
    })
}

/// Whether `bytes` hold `marker` anywhere.
fn holds(bytes: &[u8], marker: &str) -> bool {
    bytes.windows(marker.len()).any(|w| w == marker.as_bytes())
}

/// The crash test's failpoint (`actuator::failpoint`) SIGKILLs the
/// actuator after each change while its file exists, and the planted
/// defects (`actuator::plant`) break it on purpose: testing aids no
/// installed host may carry. They are built only with the actuator's
/// `failpoint` feature, which this crate's dependency turns on for the
/// workspace build and `scripts/package.sh` never does. The workspace's
/// debug binary is checked to carry their markers first, so the check of
/// the package is one that can fail. Needs the packages (no lab).
#[test]
fn the_packaged_actuator_is_built_without_the_failpoint_and_the_plants_the_workspace_build_carries()
{
    for marker in [
        actuator::failpoint::MARKER,
        plants::Plant::FinishAtStepDown.name(),
    ] {
        packaged_actuator_lacks(marker);
    }
}

fn packaged_actuator_lacks(marker: &str) {
    let built = Path::new(env!("CARGO_BIN_EXE_fleet-role-lab"))
        .parent()
        .unwrap()
        .join("fleet-role-actuator");
    let debug = fs::read(&built).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (build the workspace's binaries first)",
            built.display()
        )
    });
    assert!(
        holds(&debug, marker),
        "{} lacks {marker:?}: was it built by `cargo build --workspace --bins`?",
        built.display()
    );
    let deb = actuator_deb();
    let tree = tempfile::tempdir().unwrap();
    run_here(
        Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(tree.path()),
    );
    let packaged = fs::read(tree.path().join("usr/bin/fleet-role-actuator")).unwrap();
    assert!(
        !holds(&packaged, marker),
        "the actuator in {} carries {marker:?}",
        deb.display()
    );
}

/// Debian's own checker on both packages: no error and no warning, and
/// every finding overridden in `deploy/debian/*/lintian-overrides` shows
/// its reason (the comment above it, which lintian prints as `N:` lines).
/// lintian comes from scripts/prereqs.sh. Needs the packages (no lab).
#[test]
fn lintian_finds_no_error_or_warning_in_either_package_and_each_override_gives_its_reason() {
    let debs = [
        newest_deb("fleet-role-actuator_"),
        newest_deb("fleet-role_"),
    ];
    let out = bounded::run(
        Command::new("lintian")
            // Shown overrides count toward --fail-on, so warnings are
            // looked for in the output instead.
            .args(["--no-cfg", "--show-overrides", "--fail-on", "error"])
            .args(&debs),
        Duration::from_secs(300),
    )
    .unwrap_or_else(|e| panic!("lintian (from scripts/prereqs.sh): {e}"));
    let text = out.stdout.clone();
    eprintln!("{text}");
    assert!(out.status.success(), "lintian failed: {out:?}");
    let tags: Vec<&str> = text
        .lines()
        .filter(|l| l.len() > 2 && &l[1..3] == ": ")
        .collect();
    assert!(
        !tags
            .iter()
            .any(|l| l.starts_with("E:") || l.starts_with("W:")),
        "{text}"
    );
    // Each override is shown with its reason just before it.
    let mut reason = false;
    let mut overridden = 0;
    for l in &tags {
        match &l[..1] {
            "N" => reason = true,
            "O" => {
                assert!(reason, "an override without its reason: {l}\n{text}");
                overridden += 1;
                reason = false;
            }
            _ => reason = false,
        }
    }
    // The overrides shipped are in force (not outdated by a fix): the
    // actuator's preinst reading k3s's units. (The first upload's "closes
    // no bug" went with the changelog's second entry, 0.2.0.)
    assert_eq!(overridden, 1, "{text}");
}

/// Runs a command on this machine, bounded; a failure fails the test.
fn run_here(cmd: &mut Command) -> String {
    bounded::run_ok(cmd, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"))
        .stdout
}

/// A field of the package's control file.
fn field(deb: &Path, name: &str) -> String {
    run_here(Command::new("dpkg-deb").arg("--field").arg(deb).arg(name))
        .trim()
        .to_string()
}

/// `deb` unpacked, its version raised, packed again into `dir` as an operator
/// gets a rebuilt package: the same files, a higher version.
fn rebuilt(deb: &Path, dir: &Path) -> (PathBuf, String) {
    let tree = dir.join("tree");
    run_here(Command::new("dpkg-deb").arg("-R").arg(deb).arg(&tree));
    let control = tree.join("DEBIAN/control");
    let text = fs::read_to_string(&control).unwrap();
    let old = field(deb, "Version");
    let new = format!("{old}+rebuilt1");
    let text = text.replace(&format!("Version: {old}\n"), &format!("Version: {new}\n"));
    assert!(text.contains(&format!("Version: {new}\n")), "{text}");
    fs::write(&control, text).unwrap();
    let out = dir.join(format!("fleet-role-actuator_{new}.deb"));
    run_here(Command::new("dpkg-deb").arg("-b").arg(&tree).arg(&out));
    run_here(Command::new("dpkg").args(["--compare-versions", &new, "gt", &old]));
    (out, new)
}

/// A lab of one server and `agents` agents with nothing of fleet-role on
/// it, `binds` seen inside every host.
async fn k3s_lab(dir: &Path, agents: usize, binds: Vec<Bind>) -> SystemdLab {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_fleet-role-lab"))
        .parent()
        .unwrap();
    let bins = Bins::beside(bin_dir).expect("the workspace's binaries are built");
    let start = clock::Clock::system().now();
    let lab = SystemdLab::up_with(
        Options {
            dir: dir.join("lab"),
            servers: 1,
            agents,
            docker_agents: 0,
            timings: Default::default(),
            bins,
        },
        FleetRole::FromPackage { binds },
        &|l| eprintln!("{l}"),
    )
    .await
    .expect("the lab comes up on real systemd (systemd-nspawn must run here, as root)");
    eprintln!(
        "k3s server and {agents} agents up in {:.0}s",
        start.elapsed().as_secs_f32()
    );
    lab
}

fn ro(dir: &Path) -> Bind {
    Bind {
        outside: dir.to_path_buf(),
        inside: dir.to_path_buf(),
        read_only: true,
    }
}

/// Runs `args` inside; a failure fails the test with its output.
fn inside(m: &Machine, args: &[&str], bound: Duration) -> bounded::Output {
    m.exec_ok(args, bound).unwrap_or_else(|e| panic!("{e}"))
}

/// A unit property (`systemctl show -p NAME --value UNIT`).
fn prop(m: &Machine, unit: &str, name: &str) -> String {
    inside(
        m,
        &["systemctl", "show", "-p", name, "--value", unit],
        QUICK,
    )
    .text()
    .to_string()
}

/// Polls until `unit` is active, at most `bound`.
fn wait_active(m: &Machine, unit: &str, bound: Duration) {
    let start = clock::Clock::system().now();
    loop {
        let state = m.active_state(unit).unwrap();
        if state == "active" {
            return;
        }
        if start.elapsed() > bound {
            let status = m
                .systemctl(&["status", "--no-pager", "-n", "40", unit], QUICK)
                .map(|o| o.stdout)
                .unwrap_or_else(|e| e.to_string());
            panic!("{unit} is {state} after {bound:?}, not active:\n{status}");
        }
        thread::sleep(Duration::from_millis(300));
    }
}

/// Polls until `unit` runs again (active, in an invocation other than
/// `before`), at most `bound`.
fn wait_restarted(m: &Machine, unit: &str, before: &str, bound: Duration) {
    let start = clock::Clock::system().now();
    while prop(m, unit, "InvocationID") == before {
        assert!(
            start.elapsed() < bound,
            "{unit} was not restarted within {bound:?}"
        );
        thread::sleep(Duration::from_millis(300));
    }
    wait_active(m, unit, bound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_actuator_package_installs_on_a_running_k3s_server_and_upgrades_and_purges_with_k3s_active_throughout()
 {
    let deb = actuator_deb();
    let _turn = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let debs = dir.path().join("debs");
    fs::create_dir_all(&debs).unwrap();
    let lab = k3s_lab(dir.path(), 0, vec![ro(&debs), ro(&deb_dir())]).await;
    let root = lab.spec.root("server-1");
    let m = lab.machine("server-1").unwrap();

    // This machine is a container whose /usr/sbin/policy-rc.d forbids every
    // start and restart (exit 101), which deb-systemd-invoke obeys; a k3s
    // server has none. It goes from the host's own /usr (an overlay).
    inside(m, &["rm", "-f", "/usr/sbin/policy-rc.d"], QUICK);

    // Before: k3s runs, and nothing names its role yet.
    wait_active(m, "k3s", QUICK);
    assert!(
        !root.join(ROLE_FILE).exists(),
        "no role file before the install"
    );
    let k3s_run = prop(m, "k3s", "InvocationID");

    let t = clock::Clock::system().now();
    let installed = inside(m, &["dpkg", "-i", deb.to_str().unwrap()], DPKG);
    eprintln!("dpkg -i (install) took {:.1}s", t.elapsed().as_secs_f32());
    assert!(
        installed.stderr.contains("names the server"),
        "the install says which role it wrote: {installed:?}"
    );
    assert_eq!(
        fs::read_to_string(root.join(ROLE_FILE)).unwrap(),
        "server\n"
    );
    assert_eq!(
        inside(
            m,
            &["dpkg-query", "-W", "-f", "${Status}", "fleet-role-actuator"],
            QUICK
        )
        .text(),
        "install ok installed"
    );

    // Every unit the package adds to, as systemd loads it (drop-ins merged).
    let verify = inside(
        m,
        &[
            "systemd-analyze",
            "verify",
            "/usr/lib/systemd/system/fleet-role-actuator.service",
            "/usr/lib/systemd/system/fleet-role-handover.service",
            "/usr/lib/systemd/system/fleet-role-handover-shutdown.service",
            "/etc/systemd/system/k3s.service",
            "/etc/systemd/system/k3s-agent.service",
        ],
        QUICK,
    );
    assert_eq!(verify.stderr.trim(), "", "systemd-analyze verify is silent");
    // The leadership hand-overs need no settings: enabled by the first
    // install (the actuator itself is not).
    for unit in [
        "fleet-role-handover.service",
        "fleet-role-handover-shutdown.service",
    ] {
        assert_eq!(
            inside(m, &["systemctl", "is-enabled", unit], QUICK).text(),
            "enabled",
            "{unit}"
        );
    }
    let cat = inside(m, &["systemctl", "cat", "k3s"], QUICK).stdout;
    assert!(
        cat.contains("# /usr/lib/systemd/system/k3s.service.d/50-fleet-role.conf")
            && cat.lines().any(
                |l| l.starts_with("ExecCondition=/usr/bin/fleet-role-actuator ")
                    && l.contains(" is server")
            ),
        "systemctl cat k3s shows the drop-in:\n{cat}"
    );
    assert_eq!(
        prop(m, "k3s", "InvocationID"),
        k3s_run,
        "k3s was not restarted"
    );
    // The first install does not start the watcher: it has no settings yet.
    assert_eq!(m.active_state("fleet-role-actuator").unwrap(), "inactive");

    // Configured as docs/install.md says: settings, token (0600), start.
    fs::write(
        root.join("etc/fleet-role/actuator.toml"),
        lab.actuator_settings("server-1").unwrap(),
    )
    .unwrap();
    let token = root.join("etc/fleet-role/token");
    fs::copy(lab.token_file("server-1"), &token).unwrap();
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    inside(
        m,
        &["systemctl", "enable", "--now", "fleet-role-actuator"],
        QUICK,
    );
    wait_active(m, "fleet-role-actuator", QUICK);
    // It reads the configured file: its status reaches the API with it.
    let status = inside(
        m,
        &["fleet-role-actuator", "--output", "json", "status"],
        QUICK,
    );
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(status["ok"], true, "{status}");
    assert_eq!(prop(m, "fleet-role-actuator", "NRestarts"), "0");
    let watcher_run = prop(m, "fleet-role-actuator", "InvocationID");

    // The upgrade to a rebuilt package, with k3s sampled all along.
    let (newer, version) = rebuilt(&deb, &debs);
    let done = AtomicBool::new(false);
    let (upgraded, samples) = thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut seen = Vec::new();
            while !done.load(Ordering::SeqCst) {
                let o = m.systemctl(&["is-active", "k3s"], QUICK);
                seen.push(
                    o.map(|o| o.text().to_string())
                        .unwrap_or_else(|e| e.to_string()),
                );
                thread::sleep(Duration::from_millis(50));
            }
            seen
        });
        let t = clock::Clock::system().now();
        let upgraded = m.exec(&["dpkg", "-i", newer.to_str().unwrap()], DPKG);
        done.store(true, Ordering::SeqCst);
        eprintln!("dpkg -i (upgrade) took {:.1}s", t.elapsed().as_secs_f32());
        (upgraded, sampler.join().unwrap())
    });
    let upgraded = upgraded.unwrap();
    assert!(upgraded.status.success(), "the upgrade: {upgraded:?}");
    assert!(!samples.is_empty());
    assert!(
        samples.iter().all(|s| s == "active"),
        "k3s never left active during the upgrade: {samples:?}"
    );
    eprintln!("k3s sampled {} times during the upgrade", samples.len());
    assert_eq!(
        prop(m, "k3s", "InvocationID"),
        k3s_run,
        "k3s was not restarted"
    );
    assert_eq!(
        inside(
            m,
            &[
                "dpkg-query",
                "-W",
                "-f",
                "${Version}",
                "fleet-role-actuator"
            ],
            QUICK
        )
        .text(),
        version
    );
    // The running watcher was restarted onto the new package (the restart
    // is queued, so it may not have begun yet), with the operator's
    // settings kept (a conffile).
    wait_restarted(m, "fleet-role-actuator", &watcher_run, QUICK);
    assert_eq!(
        fs::read_to_string(root.join("etc/fleet-role/actuator.toml")).unwrap(),
        lab.actuator_settings("server-1").unwrap()
    );

    // The purge: fleet-role's files go, k3s's stay and k3s runs on.
    inside(m, &["dpkg", "--purge", "fleet-role-actuator"], DPKG);
    assert_eq!(
        fs::read_to_string(root.join(ROLE_FILE)).unwrap(),
        "server\n",
        "the role file is kept"
    );
    assert!(
        root.join("var/lib/rancher/k3s/server/db/etcd/member")
            .is_dir(),
        "the datastore is kept"
    );
    assert!(!root.join("etc/fleet-role/actuator.toml").exists());
    assert_eq!(m.active_state("k3s").unwrap(), "active");
    assert_eq!(
        prop(m, "k3s", "InvocationID"),
        k3s_run,
        "k3s was not restarted"
    );
    let cat = inside(m, &["systemctl", "cat", "k3s"], QUICK).stdout;
    assert!(
        !cat.contains("50-fleet-role.conf"),
        "the drop-in is gone:\n{cat}"
    );
    assert_eq!(prop(m, "fleet-role-actuator", "LoadState"), "not-found");
    // The enablement the operator made (`systemctl enable` above) went with
    // it, and no mask is left behind.
    for link in [
        "etc/systemd/system/multi-user.target.wants/fleet-role-actuator.service",
        "etc/systemd/system/fleet-role-actuator.service",
        "etc/systemd/system/sleep.target.wants/fleet-role-handover.service",
        "etc/systemd/system/multi-user.target.wants/fleet-role-handover-shutdown.service",
        "etc/systemd/system/fleet-role-handover.service",
    ] {
        assert!(
            fs::symlink_metadata(root.join(link)).is_err(),
            "{link} is left after the purge"
        );
    }
}

/// `ansible-playbook` of the pinned ansible-core, installed by
/// scripts/ansible.sh into the ignored `.cache/` (once; then it only prints
/// the path).
fn ansible_playbook() -> PathBuf {
    let out = bounded::run_ok(
        &mut Command::new(top().join("scripts/ansible.sh")),
        Duration::from_secs(900),
    )
    .unwrap_or_else(|e| panic!("scripts/ansible.sh (ansible-core from PyPI into .cache/): {e}"));
    PathBuf::from(out.text())
}

/// Runs a playbook inside the host, against itself (`-c local`).
fn playbook(m: &Machine, bin: &Path, roles: &Path, file: &Path, check: bool) -> bounded::Output {
    let roles = format!("ANSIBLE_ROLES_PATH={}", roles.display());
    let mut args = vec![
        "env",
        "HOME=/tmp/ansible-home",
        "LC_ALL=C.UTF-8",
        "ANSIBLE_NOCOLOR=1",
        "ANSIBLE_RETRY_FILES_ENABLED=0",
        &roles,
        bin.to_str().unwrap(),
        "-i",
        "localhost,",
        "-c",
        "local",
        "-e",
        "ansible_python_interpreter=/usr/bin/python3",
        file.to_str().unwrap(),
    ];
    if check {
        args.push("--check");
    }
    let o = m.exec(&args, PLAYBOOK).unwrap_or_else(|e| panic!("{e}"));
    if !o.status.success() {
        // What the actuator's unit said, for whoever reads the failure.
        let journal = m
            .exec(
                &[
                    "journalctl",
                    "--no-pager",
                    "-n",
                    "40",
                    "-u",
                    "fleet-role-actuator",
                ],
                QUICK,
            )
            .map(|j| j.stdout)
            .unwrap_or_else(|e| e.to_string());
        panic!(
            "{} failed:\n{}{}\nthe actuator's journal:\n{journal}",
            file.display(),
            o.stdout,
            o.stderr
        );
    }
    o
}

/// The `changed=N` of the play recap.
fn changed(out: &bounded::Output) -> u32 {
    out.stdout
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("changed="))
        .filter_map(|n| n.parse::<u32>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ansible_role_installs_configures_and_runs_the_actuator_and_promotes_an_agent_through_promote_local()
 {
    let deb = actuator_deb();
    let ansible = ansible_playbook();
    let _turn = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let work = fs::canonicalize(dir.path()).unwrap().join("ansible");
    fs::create_dir_all(&work).unwrap();
    let roles = fs::canonicalize(top().join("deploy/ansible/roles")).unwrap();
    let venv = ansible
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    let writable = Bind {
        read_only: false,
        ..ro(&work)
    };
    let lab = k3s_lab(
        dir.path(),
        1,
        vec![ro(&deb_dir()), ro(&roles), ro(&venv), writable],
    )
    .await;
    // The agent: the role installs there, then promotes it to a server.
    let host = "agent-1";
    let root = lab.spec.root(host);
    let m = lab.machine(host).unwrap();
    wait_active(m, "k3s-agent", QUICK);
    let agent_run = prop(m, "k3s-agent", "InvocationID");
    // What apt's own install makes on a real host; the lab's root starts empty.
    inside(
        m,
        &[
            "mkdir",
            "-p",
            "/var/lib/apt/lists/partial",
            "/var/cache/apt/archives/partial",
        ],
        QUICK,
    );

    // The role's variables, from the settings the lab's actuator runs with.
    let want: toml::Table = lab.actuator_settings(host).unwrap().parse().unwrap();
    let token = fs::read_to_string(lab.token_file(host)).unwrap();
    let mut settings = want.clone();
    for k in ["node", "api", "ca_file", "token_file"] {
        settings.remove(k);
    }
    let vars = serde_json::json!({
        "fleet_role_actuator_deb": deb,
        "fleet_role_actuator_node": want["node"].as_str(),
        "fleet_role_actuator_api": want["api"].as_array().unwrap().iter().map(|v| v.as_str()).collect::<Vec<_>>(),
        "fleet_role_actuator_ca_file": want["ca_file"].as_str(),
        "fleet_role_actuator_token_file": want["token_file"].as_str(),
        "fleet_role_actuator_token": token,
        "fleet_role_actuator_settings": serde_json::to_value(&settings).unwrap(),
    });
    let vars_file = work.join("vars.json");
    fs::write(&vars_file, vars.to_string()).unwrap();
    fs::set_permissions(&vars_file, fs::Permissions::from_mode(0o600)).unwrap();
    let site = work.join("site.yml");
    fs::write(
        &site,
        "- hosts: all\n  gather_facts: false\n  vars_files: [vars.json]\n  roles: [fleet_role_actuator]\n",
    )
    .unwrap();
    let join = format!("https://{}:6443", lab.spec.hosts[0].ip);
    let switch = |name: &str| {
        let f = work.join(format!("{name}.yml"));
        // The demotion of a host whose member may still vote needs the
        // operator's word (`demote-local --force`): here, a check of the plan.
        let force = if name == "demote" {
            "        fleet_role_actuator_force: true\n"
        } else {
            ""
        };
        fs::write(
            &f,
            format!(
                "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.include_role:\n        name: fleet_role_actuator\n        tasks_from: {name}\n      vars:\n        fleet_role_actuator_join: \"{join}\"\n        fleet_role_actuator_lock_timeout_secs: 5\n        fleet_role_actuator_switch_timeout_secs: 600\n{force}"
            ),
        )
        .unwrap();
        f
    };
    let role_file = || fs::read_to_string(root.join(ROLE_FILE)).unwrap();

    // The install: the package (its preinst names the running agent), the
    // settings from the template, the token 0600, the watcher running.
    let first = playbook(m, &ansible, &roles, &site, false);
    assert!(
        !first.stdout.contains(token.trim()),
        "the token is never shown"
    );
    assert_eq!(role_file(), "agent\n");
    let read_settings = || -> toml::Table {
        fs::read_to_string(root.join("etc/fleet-role/actuator.toml"))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(
        read_settings(),
        want,
        "the template writes the settings given"
    );
    let mode = |p: &str| fs::metadata(root.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("etc/fleet-role/actuator.toml"), 0o640);
    assert_eq!(mode("etc/fleet-role/token"), 0o600);
    assert_eq!(
        fs::read_to_string(root.join("etc/fleet-role/token")).unwrap(),
        token
    );
    wait_active(m, "fleet-role-actuator", QUICK);
    assert_eq!(prop(m, "fleet-role-actuator", "UnitFileState"), "enabled");
    assert_eq!(
        prop(m, "k3s-agent", "InvocationID"),
        agent_run,
        "the agent was not restarted"
    );

    // Run again, nothing changes.
    let again = playbook(m, &ansible, &roles, &site, false);
    assert_eq!(
        changed(&again),
        0,
        "a second run changes nothing:\n{}",
        again.stdout
    );

    // A changed setting is written and the watcher restarted onto it.
    let watcher_run = prop(m, "fleet-role-actuator", "InvocationID");
    let mut vars = vars;
    vars["fleet_role_actuator_settings"]["resync_secs"] = 3.into();
    fs::write(&vars_file, vars.to_string()).unwrap();
    let third = playbook(m, &ansible, &roles, &site, false);
    assert!(
        third
            .stdout
            .contains("RUNNING HANDLER [fleet_role_actuator : Restart fleet-role-actuator]"),
        "{}",
        third.stdout
    );
    assert_eq!(read_settings()["resync_secs"].as_integer(), Some(3));
    wait_restarted(m, "fleet-role-actuator", &watcher_run, QUICK);

    // The promotion: in check mode, the actuator's --check shows the plan
    // and nothing changes; then for real, the agent becomes a server that
    // joins server-1 (a learner, then a voter: its k3s is active only then).
    let check = playbook(m, &ansible, &roles, &switch("promote"), true);
    let command = format!("fleet-role-actuator promote-local --join {join}");
    for want in [
        format!("{command} --check"),
        "\"write /etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml\"".to_string(),
    ] {
        assert!(check.stdout.contains(&want), "{want}:\n{}", check.stdout);
    }
    assert_eq!(changed(&check), 1, "the plan is a change to come");
    assert_eq!(role_file(), "agent\n");
    assert_eq!(
        prop(m, "k3s-agent", "InvocationID"),
        agent_run,
        "a check changes nothing"
    );
    let t = clock::Clock::system().now();
    let promoted = playbook(m, &ansible, &roles, &switch("promote"), false);
    eprintln!(
        "the promotion through the role took {:.0}s",
        t.elapsed().as_secs_f32()
    );
    assert!(promoted.stdout.contains(&command), "{}", promoted.stdout);
    assert!(!promoted.stdout.contains(&format!("{command} --check")));
    assert_eq!(changed(&promoted), 1);
    assert_eq!(role_file(), "server\n");
    assert_eq!(m.active_state("k3s").unwrap(), "active");
    assert_eq!(m.active_state("k3s-agent").unwrap(), "inactive");
    assert_eq!(prop(m, "k3s-agent", "UnitFileState"), "disabled");
    assert!(
        root.join("etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml")
            .exists()
    );

    let (_, members) = etcd_gw::member_list(&lab.spec.etcd(lab.spec.hosts[0].ip).unwrap())
        .await
        .unwrap();
    assert_eq!(members.len(), 2, "{members:?}");
    assert!(
        members.iter().all(|m| !m.is_learner),
        "both vote: {members:?}"
    );

    // The demotion, in check mode: the plan stops the server it now is.
    let k3s_run = prop(m, "k3s", "InvocationID");
    let check = playbook(m, &ansible, &roles, &switch("demote"), true);
    for want in [
        "fleet-role-actuator demote-local --force --check",
        "\"systemctl stop k3s (queued, then confirmed)\"",
    ] {
        assert!(check.stdout.contains(want), "{want}:\n{}", check.stdout);
    }
    assert_eq!(changed(&check), 1, "the plan is a change to come");
    assert_eq!(role_file(), "server\n");
    assert_eq!(
        prop(m, "k3s", "InvocationID"),
        k3s_run,
        "a check changes nothing"
    );
}
