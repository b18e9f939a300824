//! A step-down against a real etcd (its health read from its metrics
//! listener, as on a k3s host) and the systemctl stand-in.

use std::{
    fs,
    net::TcpListener,
    os::unix::process::{CommandExt, ExitStatusExt},
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    time::Duration,
};

use host::{Error, Host};
use standins::fixture::TestHost;

fn bin_dir() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_fleet-role-actuator"))
        .parent()
        .unwrap()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A real etcd member on loopback, killed on drop.
struct Etcd {
    child: Child,
    health: String,
    _dir: tempfile::TempDir,
}

impl Etcd {
    fn start() -> Etcd {
        let dir = tempfile::tempdir().unwrap();
        let (client, peer, metrics) = (free_port(), free_port(), free_port());
        let peer_url = format!("http://127.0.0.1:{peer}");
        let child = Command::new(
            etcd_bin_vendored::etcd_bin_path().expect("an etcd binary for this machine"),
        )
        .args(["--name", "t", "--data-dir"])
        .arg(dir.path().join("data"))
        .args([
            "--listen-client-urls",
            &format!("http://127.0.0.1:{client}"),
        ])
        .args([
            "--advertise-client-urls",
            &format!("http://127.0.0.1:{client}"),
        ])
        .args([
            "--listen-peer-urls",
            &peer_url,
            "--initial-advertise-peer-urls",
            &peer_url,
        ])
        .args(["--initial-cluster", &format!("t={peer_url}")])
        .args([
            "--listen-metrics-urls",
            &format!("http://127.0.0.1:{metrics}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("etcd from etcd-bin-vendored");
        let health = format!("http://127.0.0.1:{metrics}/health");
        let start = clock::Clock::system().now();
        while !host::etcd::is_healthy(&health, Duration::from_millis(500)) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "etcd did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Etcd {
            child,
            health,
            _dir: dir,
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process that looks like a pod's shim to k3s-killall: its command line
/// starts with `<data-dir>/data/<id>/bin/containerd-shim-runc-v2`.
///
/// It is `/bin/sleep` run under that `argv[0]`, not a copy of it: writing an
/// executable and then running it can fail with "text file busy" when another
/// test thread forks while the copy is still open. Returns once the process
/// shows that command line, since `spawn` returns before the kernel has set
/// it up: `/proc/PID/cmdline` is empty for a moment after the exec, and on a
/// busy machine that moment is long enough for a lookup to miss the shim.
fn start_shim(h: &TestHost) -> Shim {
    let shim = h.at("var/lib/rancher/k3s/data/0123abcd/bin/containerd-shim-runc-v2");
    fs::create_dir_all(shim.parent().unwrap()).unwrap();
    let child = Shim(
        Command::new("/bin/sleep")
            .arg0(&shim)
            .arg("300")
            .spawn()
            .unwrap(),
    );
    let cmdline = format!("/proc/{}/cmdline", child.0.id());
    let start = clock::Clock::system().now();
    loop {
        let arg0 = fs::read(&cmdline)
            .unwrap_or_default()
            .split(|b| *b == 0)
            .next()
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        if arg0 == shim.as_os_str().as_encoded_bytes() {
            return child;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the shim's command line never showed {}",
            shim.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The shim's process, killed on drop so a failed test leaves none behind.
struct Shim(Child);

impl Drop for Shim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How long a test waits for something the machine does on its own time (an
/// exec, a signal's delivery): generous, since the tests share 2 busy cores.
const DEADLINE: Duration = Duration::from_secs(30);

/// Waits for `child` to end and returns how; fails the test if it is still
/// running after [`DEADLINE`]. A process killed with SIGKILL drops out of
/// `/proc`'s command lines (its memory released) a moment before it can be
/// reaped, so "no shim found" does not yet mean `try_wait` sees it gone.
fn ended(Shim(child): &mut Shim) -> ExitStatus {
    let start = clock::Clock::system().now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < DEADLINE, "the shim still runs");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn host(h: &TestHost, health: &str, wait: Duration) -> Host {
    let mut host =
        Host::new(h.root(), h.node.as_str(), clock::Clock::system()).with_search_path(h.path_env());
    host.etcd_health_url = health.to_string();
    host.etcd_wait = wait;
    host
}

#[test]
fn a_step_down_goes_to_etcd_only_with_no_shim_left_and_then_names_the_agent() {
    let etcd = Etcd::start();
    let h = TestHost::new("old-voter", bin_dir()).as_server();
    let mut shim = start_shim(&h);
    let host = host(&h, &etcd.health, Duration::from_secs(20));
    assert_eq!(host::shims::find(&host.paths).len(), 1);
    host.apply(&host.plan_step_down(None).unwrap()).unwrap();
    let dropin =
        fs::read_to_string(h.at("etc/rancher/k3s/config.yaml.d/90-fleet-role-etcd-only.yaml"))
            .unwrap();
    assert!(
        dropin.contains("disable-apiserver: true") && dropin.contains("disable-scheduler: true")
    );
    // No kubelet at etcd-only: nothing restarts the shims killed below.
    assert!(dropin.contains("disable-agent: true"), "{dropin}");
    assert!(
        h.systemd_log()
            .contains(&"restart --no-block k3s".to_string())
    );
    assert!(h.active("k3s"), "etcd-only still runs the server unit");
    assert!(host::shims::find(&host.paths).is_empty());
    assert_eq!(ended(&mut shim).signal(), Some(9), "killed with SIGKILL");
    assert_eq!(h.role().as_deref(), Some("agent"));
    // Resumed after it finished: no second restart.
    let again = host.plan_step_down(None).unwrap();
    assert!(!again.contains(&host::Change::Restart("k3s")), "{again:?}");
}

#[test]
fn a_step_down_stops_a_running_regrade_watcher_before_it_restarts_the_server() {
    let etcd = Etcd::start();
    let h = TestHost::new("old-voter", bin_dir()).as_server();
    standins::units::set_active(h.root(), "fleet-regrade", true);
    let host = host(&h, &etcd.health, Duration::from_secs(20));
    let plan = host.plan_step_down(None).unwrap();
    let stop = plan
        .iter()
        .position(|c| *c == host::Change::Stop("fleet-regrade"));
    let restart = plan.iter().position(|c| *c == host::Change::Restart("k3s"));
    assert!(stop.is_some() && stop < restart, "{plan:?}");
    host.apply(&plan).unwrap();
    assert!(!h.active("fleet-regrade"));
    // Nothing to stop once it is stopped.
    assert!(
        !host
            .plan_step_down(None)
            .unwrap()
            .contains(&host::Change::Stop("fleet-regrade"))
    );
}

#[test]
fn a_step_down_whose_etcd_does_not_come_back_fails_with_the_role_file_still_naming_the_server() {
    let closed = format!("http://127.0.0.1:{}/health", free_port());
    let h = TestHost::new("old-voter", bin_dir()).as_server();
    let host = host(&h, &closed, Duration::from_secs(2));
    let err = host.apply(&host.plan_step_down(None).unwrap()).unwrap_err();
    assert!(matches!(err, Error::EtcdNotBack { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("the role file still names the server")
    );
    assert_eq!(h.role().as_deref(), Some("server"));
}

#[test]
fn a_finish_leaves_an_agent_without_the_servers_keys_but_with_its_token_datastore_and_snapshots() {
    // A host stepped down (the role file names the agent) whose member is
    // gone, with what a k3s server leaves on its disk.
    let h = TestHost::new("old-voter", bin_dir()).as_server();
    fs::write(h.at("var/lib/rancher/k3s/fleet-role"), "agent\n").unwrap();
    fs::write(h.at("var/lib/rancher/k3s/server/db/etcd/tombstone"), "").unwrap();
    let server = h.at("var/lib/rancher/k3s/server");
    for f in [
        "tls/server-ca.key",
        "tls/client-ca.key",
        "tls/client-admin.key",
        "tls/etcd/server-ca.key",
        "tls/etcd/peer-ca.key",
        "cred/passwd",
        "cred/encryption-config.json",
        "token",
        "db/snapshots/fleet-role-s1-old-voter",
    ] {
        fs::create_dir_all(server.join(f).parent().unwrap()).unwrap();
        fs::write(server.join(f), "x").unwrap();
    }
    fs::write(h.at("etc/rancher/k3s/k3s.yaml"), "admin").unwrap();
    let host = host(&h, "http://127.0.0.1:9/health", Duration::from_secs(2));
    let plan = host.plan_finish().unwrap();
    applied_leaving_no_secret(&h, &host, &plan);
    for kept in [
        "token",
        "db/snapshots/fleet-role-s1-old-voter",
        "db.demoted/etcd/name",
    ] {
        assert!(server.join(kept).exists(), "server/{kept} is gone");
    }
    assert!(h.at("etc/rancher/k3s/config.yaml").exists());
    assert!(h.at("etc/rancher/node/password").exists());
    // Resumed after it finished: nothing left to do.
    assert!(
        !host
            .plan_finish()
            .unwrap()
            .contains(&host::Change::RemoveServerSecrets)
    );
}

#[test]
fn a_rollback_and_demote_local_leave_no_server_secret_on_the_agent_either() {
    for rollback in [true, false] {
        let h = TestHost::new("rolled-back", bin_dir()).as_server();
        let server = h.at("var/lib/rancher/k3s/server");
        for f in ["tls/server-ca.key", "tls/client-admin.key", "cred/passwd"] {
            fs::create_dir_all(server.join(f).parent().unwrap()).unwrap();
            fs::write(server.join(f), "x").unwrap();
        }
        fs::write(h.at("etc/rancher/k3s/k3s.yaml"), "admin").unwrap();
        let host = host(&h, "http://127.0.0.1:9/health", Duration::from_secs(2));
        let plan = if rollback {
            host.plan_rollback()
        } else {
            host.plan_demote()
        }
        .unwrap();
        applied_leaving_no_secret(&h, &host, &plan);
    }
}

/// Applies `plan`, which ends by removing the server's secrets, and checks
/// the host is an agent with none of them left.
fn applied_leaving_no_secret(h: &TestHost, host: &host::Host, plan: &[host::Change]) {
    assert_eq!(
        plan.last(),
        Some(&host::Change::RemoveServerSecrets),
        "{plan:?}"
    );
    host.apply(plan).unwrap();
    assert!(h.active("k3s-agent") && !h.active("k3s"));
    let server = h.at("var/lib/rancher/k3s/server");
    for gone in ["tls", "cred"] {
        assert!(!server.join(gone).exists(), "server/{gone} is left");
    }
    assert!(!h.at("etc/rancher/k3s/k3s.yaml").exists());
}
