//! The host's switch on a Docker host, against a real Docker daemon
//! (Debian's `docker.io`, a private `dockerd` per test: see
//! `dockerengine::PrivateDaemon`): the server and the agent are two
//! containers, and the same plans that drive systemd's units on a native
//! host stop one, disable it, and enable and start the other. Docker's
//! own event stream shows the two never running together. The image is
//! this machine's `sh` and `sleep`, imported from a local tar. Fails,
//! never skips, when dockerd cannot run.

use std::{path::Path, time::Duration};

use dockerengine::{ContainerSpec, Engine, Event, PrivateDaemon, RestartPolicy, Status};
use host::{
    Host,
    docker::{Containers, DockerUnits},
};
use protocol::{JoinUrl, Role};

const DAEMON_START: Duration = Duration::from_secs(90);

/// The image's `k3s`, as `rancher/k3s`'s entry point is: `server` and
/// `agent` run until stopped, `--version` prints k3s's lines, and
/// `etcd-snapshot save --name NAME` writes the file k3s would, in the
/// default snapshot folder (which only a bind mount makes the host's).
/// `server` exits 1 at once while the data folder holds `fail-server`.
const FAKE_K3S: &str = r#"#!/bin/sh
case "$1" in
  server | agent)
    # The test's way to make a server fail to start, as a k3s whose etcd
    # cannot join exits non-zero.
    if [ "$1" = server ] && [ -e /var/lib/rancher/k3s/fail-server ]; then
      echo "failed to start the server" >&2; exit 1
    fi
    trap 'exit 0' TERM; /bin/sleep 600 & wait ;;
  --version) echo "k3s version v1.33.5+k3s1 (f4k3d0c)"; echo "go version go1.24.11" ;;
  etcd-snapshot)
    [ "$2" = save ] || exit 0
    echo "etcd" > "/var/lib/rancher/k3s/server/db/snapshots/$4-docker-1-1764770000" ;;
  *) echo "unknown command $1" >&2; exit 3 ;;
esac
"#;

/// A private daemon with the two containers of a Docker host, the agent
/// running and enabled, the server created and stopped; the host's root
/// (its role file naming the agent) in a folder of its own.
struct DockerHost {
    rt: tokio::runtime::Runtime,
    daemon: PrivateDaemon,
    engine: Engine,
    root: tempfile::TempDir,
    clock: clock::Clock,
    since: u64,
    _dir: tempfile::TempDir,
}

/// A k3s container of the image, `k3s ROLE` with the host's data folder
/// bound in at k3s's path. PID 1 gets only the signals it handles: the
/// fake's trap makes a stop's SIGTERM end it at once, as k3s's own handler
/// does.
fn k3s_container(role: &str, data: &Path, restart: RestartPolicy) -> ContainerSpec {
    ContainerSpec {
        image: "fr-shell:1".into(),
        entrypoint: Some(vec!["/bin/k3s".into()]),
        cmd: vec![role.into()],
        binds: vec![format!("{}:/var/lib/rancher/k3s", data.display())],
        network_mode: "none".into(),
        restart,
        ..Default::default()
    }
}

impl DockerHost {
    fn start(with: &[&str]) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let clock = clock::Clock::system();
        let dir = tempfile::Builder::new()
            .prefix("dh")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let daemon = rt
            .block_on(PrivateDaemon::start(dir.path(), DAEMON_START, &clock))
            .unwrap_or_else(|e| panic!("{e}"));
        let engine = daemon.engine().clone();
        rt.block_on(daemon.import_programs(
            "fr-shell",
            "1",
            &[Path::new("/bin/sh"), Path::new("/bin/sleep")],
            &[("/bin/k3s", FAKE_K3S)],
        ))
        .unwrap();
        let since = clock.unix_millis();
        let containers = Containers::default();
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("var/lib/rancher/k3s");
        std::fs::create_dir_all(&data).unwrap();
        if with.contains(&"server") {
            let spec = k3s_container("server", &data, RestartPolicy::No);
            rt.block_on(engine.create(&containers.server, &spec))
                .unwrap();
        }
        if with.contains(&"agent") {
            let spec = k3s_container("agent", &data, RestartPolicy::UnlessStopped);
            rt.block_on(engine.create(&containers.agent, &spec))
                .unwrap();
            rt.block_on(engine.start(&containers.agent)).unwrap();
        }
        let h = Self {
            rt,
            daemon,
            engine,
            root,
            clock,
            since,
            _dir: dir,
        };
        host::role::write(&h.host().paths, Role::Agent).unwrap();
        h
    }

    fn host(&self) -> Host {
        self.host_ready(None)
    }

    /// The host, its server counted as started only once `ready` (an etcd
    /// health endpoint) answers healthy, as the actuator sets it.
    fn host_ready(&self, ready: Option<&str>) -> Host {
        let mut units = self.units();
        if let Some(url) = ready {
            units = units.with_server_ready(url);
        }
        let mut h = Host::new(self.root.path(), "docker-1", self.clock.clone()).with_docker(units);
        h.start_wait = Duration::from_secs(60);
        h.stop_wait = Duration::from_secs(60);
        h
    }

    /// The host's two containers, each stop given 10 s before Docker kills.
    fn units(&self) -> DockerUnits {
        DockerUnits::new(
            self.engine.clone(),
            Containers::default(),
            Duration::from_secs(10),
            self.rt.handle().clone(),
            &self.clock,
        )
    }

    fn container(&self, name: &str) -> dockerengine::Container {
        self.rt
            .block_on(self.engine.inspect(name))
            .unwrap()
            .unwrap_or_else(|| panic!("no container {name}"))
    }

    /// Docker's events since the host was set up, read until `done` holds
    /// of them: the daemon records an event as the change completes, a
    /// moment after the call returned.
    fn events_until(&self, done: impl Fn(&[Event]) -> bool) -> Vec<Event> {
        let start = self.clock.now();
        loop {
            let events = self
                .rt
                .block_on(self.engine.events(self.since, self.clock.unix_millis()))
                .unwrap();
            if done(&events) {
                return events;
            }
            assert!(
                self.clock.since(start) < Duration::from_secs(30),
                "not yet what the test waits for: {events:?}\ndockerd's log:\n{}",
                self.daemon.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Whether the two containers ever ran together, by Docker's own events.
fn ran_together(events: &[Event]) -> Option<String> {
    dockerengine::ran_together(events, &["k3s-server", "k3s-agent"])
}

#[test]
fn a_promotion_on_a_docker_host_stops_and_disables_the_agent_container_before_the_server_container_starts_and_a_demotion_goes_back()
 {
    let d = DockerHost::start(&["server", "agent"]);
    let c = Containers::default();
    let host = d.host();
    let join = JoinUrl::parse("https://10.0.0.7:6443").unwrap();

    let plan = host.plan_promote(&join).unwrap();
    let shown: Vec<String> = plan.iter().map(|p| host.show(p).to_string()).collect();
    assert!(
        shown
            .iter()
            .any(|l| l == "docker stop k3s-agent (then confirmed)"),
        "{shown:?}"
    );
    assert!(
        !shown.iter().any(|l| l.contains("systemctl")),
        "a Docker host's plan asks nothing of systemd: {shown:?}"
    );
    host.apply(&plan).unwrap();

    let server = d.container(&c.server);
    let agent = d.container(&c.agent);
    assert_eq!(
        (server.status, server.restart),
        (Status::Running, RestartPolicy::UnlessStopped)
    );
    assert_eq!(
        (agent.status, agent.restart),
        (Status::Exited, RestartPolicy::No)
    );
    assert_eq!(host.role().unwrap(), Some(Role::Server));
    // The join is in k3s's config drop-in, which the container reads
    // through the bind mount; a container has no unit drop-in.
    let dropin = host.paths.k3s_dropins().join("90-fleet-role-join.yaml");
    assert!(
        std::fs::read_to_string(dropin)
            .unwrap()
            .contains("https://10.0.0.7:6443")
    );
    assert!(!host.paths.unit_dropins("k3s").exists());
    assert!(
        host.plan_promote(&join).unwrap().is_empty(),
        "a promoted Docker host plans nothing more"
    );

    host.apply(&host.plan_demote().unwrap()).unwrap();
    let server = d.container(&c.server);
    let agent = d.container(&c.agent);
    assert_eq!(
        (server.status, server.restart),
        (Status::Exited, RestartPolicy::No)
    );
    assert_eq!(
        (agent.status, agent.restart),
        (Status::Running, RestartPolicy::UnlessStopped)
    );
    assert_eq!(host.role().unwrap(), Some(Role::Agent));

    // Docker's own record: agent, server, agent, one at a time.
    let agent_starts = |events: &[Event]| {
        events
            .iter()
            .filter(|e| e.name == c.agent && e.action == "start")
            .count()
    };
    let events = d.events_until(|e| agent_starts(e) == 2);
    let starts: Vec<&str> = events
        .iter()
        .filter(|e| e.action == "start")
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(
        starts,
        [c.agent.as_str(), c.server.as_str(), c.agent.as_str()],
        "{events:?}"
    );
    assert_eq!(ran_together(&events), None, "{events:?}");
}

#[test]
fn a_promotion_whose_server_container_fails_rolls_back_to_the_running_agent_container_with_the_join_removed_and_the_datastore_aside()
 {
    let d = DockerHost::start(&["server", "agent"]);
    let c = Containers::default();
    // Nothing serves etcd's health here: a server container that ran for a
    // moment is not taken for a ready k3s (the actuator always sets this).
    let mut host = d.host_ready(Some("http://127.0.0.1:9/health"));
    // Docker restarts a failing container with `unless-stopped`, so its
    // status flips between `restarting` and `exited`, as a unit with
    // `Restart=always` does: the start's wait ends at its bound or at the
    // first failed run it sees. Either is the failure the rollback follows.
    host.start_wait = Duration::from_secs(10);
    let data = d.root.path().join("var/lib/rancher/k3s");
    std::fs::write(data.join("fail-server"), "").unwrap();
    // What a learner that never caught up leaves: a member folder.
    std::fs::create_dir_all(host.paths.etcd_dir().join("member/wal")).unwrap();
    let join = JoinUrl::parse("https://10.0.0.7:6443").unwrap();

    let e = host
        .apply(&host.plan_promote(&join).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("k3s") && e.contains("after its start"), "{e}");
    assert_eq!(
        d.container(&c.agent).restart,
        RestartPolicy::No,
        "the promotion had got as far as the server's start"
    );

    host.apply(&host.plan_rollback().unwrap()).unwrap();
    let server = d.container(&c.server);
    let agent = d.container(&c.agent);
    assert!(
        server.status != Status::Running && server.status != Status::Restarting,
        "{:?}",
        server.status
    );
    assert_eq!(server.restart, RestartPolicy::No);
    assert_eq!(
        (agent.status, agent.restart),
        (Status::Running, RestartPolicy::UnlessStopped)
    );
    assert_eq!(host.role().unwrap(), Some(Role::Agent));
    assert!(
        !host
            .paths
            .k3s_dropins()
            .join("90-fleet-role-join.yaml")
            .exists(),
        "a rollback removes the join it wrote"
    );
    assert!(!host.paths.etcd_dir().exists());
    assert!(host.paths.db_demoted().join("etcd/member/wal").is_dir());
    assert!(
        host.plan_rollback().unwrap().is_empty(),
        "a rolled-back Docker host plans nothing more"
    );

    // Docker's record: the server's failed runs all ended before the
    // agent's second start.
    let events = d.events_until(|events| {
        events
            .iter()
            .filter(|e| e.name == c.agent && e.action == "start")
            .count()
            == 2
    });
    assert!(
        events
            .iter()
            .any(|e| e.name == c.server && e.action == "die"),
        "the server never ran: {events:?}"
    );
    assert_eq!(ran_together(&events), None, "{events:?}");
}

#[test]
fn a_docker_host_missing_its_server_container_refuses_the_promotion_and_its_agent_keeps_running() {
    let d = DockerHost::start(&["agent"]);
    let host = d.host();
    let join = JoinUrl::parse("https://10.0.0.7:6443").unwrap();
    let e = host.plan_promote(&join).unwrap_err().to_string();
    assert!(
        e.contains("k3s-server") && e.contains("no such container"),
        "{e}"
    );
    let agent = d.container("k3s-agent");
    assert_eq!(
        (agent.status, agent.restart),
        (Status::Running, RestartPolicy::UnlessStopped)
    );
    assert_eq!(host.role().unwrap(), Some(Role::Agent));
    assert!(!host.paths.k3s_dropins().exists());
}

#[test]
fn a_docker_hosts_snapshot_and_k3s_release_come_from_a_one_off_container_of_the_server_image_which_is_removed()
 {
    let d = DockerHost::start(&["server", "agent"]);
    let host = d.host();
    let v = host.k3s_version().unwrap();
    assert_eq!((v.major, v.minor, v.patch), (1, 33, 5), "{}", v.text);
    std::fs::create_dir_all(host.paths.snapshots()).unwrap();
    let swap = protocol::SwapId::parse("swap-1").unwrap();
    let file = host.snapshot(&swap).unwrap();
    assert_eq!(
        file,
        "/var/lib/rancher/k3s/server/db/snapshots/swap-1-docker-1-1764770000"
    );
    assert!(
        host.paths
            .snapshots()
            .join("swap-1-docker-1-1764770000")
            .exists()
    );
    // The one-off containers are gone; the server's and the agent's stay
    // as they were (the server was never started for it).
    let one_off = |e: &&Event| e.name.starts_with("k3s-server-k3s-");
    let events = d.events_until(|events| {
        events
            .iter()
            .filter(one_off)
            .filter(|e| e.action == "destroy")
            .count()
            >= 2
    });
    let one_offs: Vec<&Event> = events.iter().filter(one_off).collect();
    for action in ["create", "start", "die", "destroy"] {
        assert_eq!(
            one_offs.iter().filter(|e| e.action == action).count(),
            2,
            "{action} of the two one-off runs: {events:?}"
        );
    }
    assert_eq!(d.container("k3s-server").status, Status::Created);
    assert_eq!(d.container("k3s-agent").status, Status::Running);

    // A k3s that fails is an error naming the command, with its words.
    let out = d
        .units()
        .run_k3s(&["nonsense"], Duration::from_secs(30))
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "unknown command nonsense\n"
    );
}
