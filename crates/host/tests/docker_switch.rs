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

fn sleeper(restart: RestartPolicy) -> ContainerSpec {
    ContainerSpec {
        image: "fr-shell:1".into(),
        // PID 1 gets only the signals it handles: the trap makes a stop's
        // SIGTERM end it at once, as k3s's own handler does.
        cmd: vec![
            "/bin/sh".into(),
            "-c".into(),
            "trap 'exit 0' TERM; /bin/sleep 600 & wait".into(),
        ],
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
        ))
        .unwrap();
        let since = clock.unix_millis();
        let containers = Containers::default();
        if with.contains(&"server") {
            rt.block_on(engine.create(&containers.server, &sleeper(RestartPolicy::No)))
                .unwrap();
        }
        if with.contains(&"agent") {
            rt.block_on(engine.create(&containers.agent, &sleeper(RestartPolicy::UnlessStopped)))
                .unwrap();
            rt.block_on(engine.start(&containers.agent)).unwrap();
        }
        let root = tempfile::tempdir().unwrap();
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
        let units = DockerUnits::new(
            self.engine.clone(),
            Containers::default(),
            Duration::from_secs(10),
            &self.clock,
        );
        let mut h = Host::new(self.root.path(), "docker-1", self.clock.clone()).with_docker(units);
        h.start_wait = Duration::from_secs(60);
        h.stop_wait = Duration::from_secs(60);
        h
    }

    fn container(&self, name: &str) -> dockerengine::Container {
        self.rt
            .block_on(self.engine.inspect(name))
            .unwrap()
            .unwrap_or_else(|| panic!("no container {name}"))
    }

    /// Docker's events since the host was set up, read until `last`
    /// (name, action) shows: the daemon records an event as the change
    /// completes, a moment after the call returned.
    fn events_until(&self, last: (&str, &str)) -> Vec<Event> {
        let start = self.clock.now();
        loop {
            let events = self
                .rt
                .block_on(self.engine.events(self.since, self.clock.unix_millis()))
                .unwrap();
            if events
                .iter()
                .any(|e| (e.name.as_str(), e.action.as_str()) == last)
            {
                return events;
            }
            assert!(
                self.clock.since(start) < Duration::from_secs(30),
                "no {last:?} in {events:?}\ndockerd's log:\n{}",
                self.daemon.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Whether the two containers ever ran together, by Docker's own events:
/// a start of one while the other's last start has no die after it.
fn ran_together(events: &[Event]) -> Option<String> {
    let mut running: Vec<&str> = vec![];
    for e in events {
        match e.action.as_str() {
            "start" => {
                if let Some(other) = running.iter().find(|n| **n != e.name) {
                    return Some(format!("{} started while {other} ran", e.name));
                }
                running.push(&e.name);
            }
            "die" => running.retain(|n| *n != e.name),
            _ => {}
        }
    }
    None
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
    let events = d.events_until((&c.agent, "start"));
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
fn the_never_together_check_sees_a_start_while_the_other_container_runs() {
    let event = |name: &str, action: &str| Event {
        action: action.into(),
        id: String::new(),
        name: name.into(),
        time_nano: 0,
    };
    let apart = [event("a", "start"), event("a", "die"), event("b", "start")];
    assert_eq!(ran_together(&apart), None);
    let together = [event("a", "start"), event("b", "start"), event("a", "die")];
    assert_eq!(
        ran_together(&together).as_deref(),
        Some("b started while a ran")
    );
}
