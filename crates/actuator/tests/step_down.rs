//! A step-down against a real etcd (its health read from its metrics
//! listener, as on a k3s host) and the systemctl stand-in.

use std::{
    fs,
    net::TcpListener,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
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
        let start = Instant::now();
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
fn start_shim(h: &TestHost) -> Child {
    let bin = h.at("var/lib/rancher/k3s/data/0123abcd/bin");
    fs::create_dir_all(&bin).unwrap();
    let shim = bin.join("containerd-shim-runc-v2");
    fs::copy("/bin/sleep", &shim).unwrap();
    Command::new(&shim).arg("300").spawn().unwrap()
}

fn host(h: &TestHost, health: &str, wait: Duration) -> Host {
    let mut host = Host::new(h.root(), h.node.as_str()).with_search_path(h.path_env());
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
    host.apply(&host.plan_step_down().unwrap()).unwrap();
    let dropin =
        fs::read_to_string(h.at("etc/rancher/k3s/config.yaml.d/90-fleet-role-etcd-only.yaml"))
            .unwrap();
    assert!(
        dropin.contains("disable-apiserver: true") && dropin.contains("disable-scheduler: true")
    );
    assert!(
        h.systemd_log()
            .contains(&"restart --no-block k3s".to_string())
    );
    assert!(h.active("k3s"), "etcd-only still runs the server unit");
    assert!(host::shims::find(&host.paths).is_empty());
    assert!(shim.try_wait().unwrap().is_some(), "the shim still runs");
    assert_eq!(h.role().as_deref(), Some("agent"));
    // Resumed after it finished: no second restart.
    let again = host.plan_step_down().unwrap();
    assert!(!again.contains(&host::Change::Restart("k3s")), "{again:?}");
}

#[test]
fn a_step_down_whose_etcd_does_not_come_back_fails_with_the_role_file_still_naming_the_server() {
    let closed = format!("http://127.0.0.1:{}/health", free_port());
    let h = TestHost::new("old-voter", bin_dir()).as_server();
    let host = host(&h, &closed, Duration::from_secs(2));
    let err = host.apply(&host.plan_step_down().unwrap()).unwrap_err();
    assert!(matches!(err, Error::EtcdNotBack { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("the role file still names the server")
    );
    assert_eq!(h.role().as_deref(), Some("server"));
}
