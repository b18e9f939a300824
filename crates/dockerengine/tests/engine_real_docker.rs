//! The Engine API client against a real Docker daemon (Debian's
//! `docker.io`, which scripts/prereqs.sh installs): a private `dockerd`
//! per test, its data, sockets and containerd under the test's own folder,
//! with no bridge and no iptables rules, so nothing of it outlives the
//! test or touches the machine's network. The image is a root file system
//! of this machine's own `sh` and `sleep`, imported from a local tar (no
//! registry). Fails, never skips, when dockerd cannot run.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use dockerengine::{ContainerSpec, Engine, Error, PrivateDaemon, RestartPolicy, Status};

/// How long a private daemon may take to answer after its start.
const DAEMON_START: Duration = Duration::from_secs(90);

/// A private dockerd in a short folder under target/tmp (containerd's
/// sockets live under it), the folder removed after the daemon stopped.
struct Daemon {
    d: PrivateDaemon,
    engine: Engine,
    _dir: tempfile::TempDir,
}

impl Daemon {
    async fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("dk")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let d = PrivateDaemon::start(dir.path(), DAEMON_START, &clock::Clock::system())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let engine = d.engine().clone();
        Self {
            d,
            engine,
            _dir: dir,
        }
    }

    /// Imports a root file system of this machine's `sh` and `sleep` as
    /// `repo:tag`.
    async fn import_shell_image(&self, repo: &str, tag: &str) {
        self.d
            .import_programs(
                repo,
                tag,
                &[Path::new("/bin/sh"), Path::new("/bin/sleep")],
                &[],
            )
            .await
            .unwrap();
    }
}

/// A container of the shell image that sleeps until stopped.
fn sleeper() -> ContainerSpec {
    ContainerSpec {
        image: "fr-shell:1".into(),
        cmd: vec!["/bin/sh".into(), "-c".into(), "exec /bin/sleep 600".into()],
        network_mode: "none".into(),
        restart: RestartPolicy::No,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_container_stopped_before_the_other_starts_shows_so_in_dockers_own_event_stream() {
    let d = Daemon::start().await;
    let v = d.engine.version().await.unwrap();
    assert!(!v.api_version.is_empty(), "{v:?}");
    d.import_shell_image("fr-shell", "1").await;
    let clock = clock::Clock::system();
    let since = clock.unix_millis();

    for name in ["k3s", "k3s-agent"] {
        let id = d.engine.create(name, &sleeper()).await.unwrap();
        let c = d.engine.inspect(name).await.unwrap().unwrap();
        assert_eq!((c.id.as_str(), c.name.as_str()), (id.as_str(), name));
        assert_eq!(c.status, Status::Created);
    }
    assert!(
        d.engine.start("k3s").await.unwrap(),
        "the first start starts it"
    );
    assert!(
        !d.engine.start("k3s").await.unwrap(),
        "a second start is no change"
    );
    let running = d.engine.inspect("k3s").await.unwrap().unwrap();
    assert_eq!(running.status, Status::Running);
    assert!(running.pid > 0);

    // sleep under sh's exec is PID 1 and ignores SIGTERM: the stop's grace
    // runs out and Docker kills it, and the call returns once it is dead.
    assert!(d.engine.stop("k3s", Duration::from_secs(1)).await.unwrap());
    assert!(!d.engine.stop("k3s", Duration::from_secs(1)).await.unwrap());
    let stopped = d.engine.inspect("k3s").await.unwrap().unwrap();
    assert_eq!(stopped.status, Status::Exited);
    assert_eq!(stopped.started_at, running.started_at, "a stop is no start");

    // A restart policy is what an enable or a disable sets, on a stopped
    // container as on a running one.
    assert_eq!(stopped.restart, RestartPolicy::No);
    d.engine
        .set_restart_policy("k3s-agent", RestartPolicy::UnlessStopped)
        .await
        .unwrap();
    let enabled = d.engine.inspect("k3s-agent").await.unwrap().unwrap();
    assert_eq!(enabled.restart, RestartPolicy::UnlessStopped);
    assert!(enabled.restart.starts_on_its_own());
    assert!(d.engine.start("k3s-agent").await.unwrap());
    d.engine
        .set_restart_policy("k3s-agent", RestartPolicy::No)
        .await
        .unwrap();
    let disabled = d.engine.inspect("k3s-agent").await.unwrap().unwrap();
    assert_eq!(
        (disabled.restart, disabled.status),
        (RestartPolicy::No, Status::Running)
    );
    let e = d
        .engine
        .set_restart_policy("nothing", RestartPolicy::No)
        .await
        .unwrap_err();
    assert!(matches!(&e, Error::Refused { status: 404, .. }), "{e}");

    // The daemon records an event as the change completes, which may be
    // a moment after the call returned: read until the last one shows.
    let start = clock.now();
    let events = loop {
        let events = d.engine.events(since, clock.unix_millis()).await.unwrap();
        if events
            .iter()
            .any(|e| e.name == "k3s-agent" && e.action == "start")
        {
            break events;
        }
        assert!(clock.since(start) < Duration::from_secs(30), "{events:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let at = |name: &str, action: &str| {
        events
            .iter()
            .position(|e| e.name == name && e.action == action)
            .unwrap_or_else(|| panic!("no {action} of {name} in {events:?}"))
    };
    assert!(at("k3s", "start") < at("k3s", "die"), "{events:?}");
    assert!(at("k3s", "die") < at("k3s-agent", "start"), "{events:?}");

    d.engine.remove("k3s-agent", true).await.unwrap();
    d.engine.remove("k3s", false).await.unwrap();
    assert!(d.engine.inspect("k3s-agent").await.unwrap().is_none());
    d.engine.remove("k3s", false).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_container_inspects_as_none_and_its_start_and_a_taken_name_are_refused_with_dockers_message()
 {
    let d = Daemon::start().await;
    assert!(d.engine.inspect("nothing").await.unwrap().is_none());
    let e = d.engine.start("nothing").await.unwrap_err();
    assert!(
        matches!(&e, Error::Refused { status: 404, message, .. } if message.contains("No such container")),
        "{e}"
    );
    let e = d.engine.create("xx", &sleeper()).await.unwrap_err();
    assert!(
        matches!(&e, Error::Refused { status: 404, .. }),
        "no image: {e}"
    );
    d.import_shell_image("fr-shell", "1").await;
    d.engine.create("xx", &sleeper()).await.unwrap();
    let e = d.engine.create("xx", &sleeper()).await.unwrap_err();
    assert!(
        matches!(&e, Error::Refused { status: 409, .. }),
        "a taken name: {e}"
    );
    let e = d
        .engine
        .import("fr-bad", "1", b"not a tar".to_vec())
        .await
        .unwrap_err();
    assert!(matches!(&e, Error::Refused { .. }), "{e}");
}

/// A socket of the test's own in place of a daemon's: its folder (kept
/// while the test runs), its path and its listener.
fn fake_daemon(name: &str) -> (tempfile::TempDir, PathBuf, tokio::net::UnixListener) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join(name);
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    (dir, socket, listener)
}

#[tokio::test]
async fn a_daemon_that_never_answers_is_a_timeout_naming_the_call_and_no_daemon_is_unreachable() {
    // Accepts, reads, never answers.
    let (dir, socket, listener) = fake_daemon("silent.sock");
    let held = tokio::spawn(async move {
        let mut kept = vec![];
        while let Ok((s, _)) = listener.accept().await {
            kept.push(s);
        }
    });
    let engine = Engine::new(&socket).with_timeout(Duration::from_millis(300));
    let e = engine.inspect("k3s").await.unwrap_err();
    assert!(
        matches!(&e, Error::Timeout { call, .. } if call == "GET /containers/k3s/json"),
        "{e}"
    );
    assert!(e.to_string().contains("may or may not"), "{e}");
    held.abort();

    let gone = Engine::new(Path::new(dir.path()).join("none.sock"));
    let e = gone.version().await.unwrap_err();
    assert!(matches!(&e, Error::Unreachable { .. }), "{e}");
}

#[tokio::test]
async fn an_answer_past_the_cap_is_refused_unread_rather_than_held() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_dir, socket, listener) = fake_daemon("loud.sock");
    let loud = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf).await;
        let size = 32usize << 20;
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n");
        let _ = s.write_all(head.as_bytes()).await;
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..32 {
            if s.write_all(&chunk).await.is_err() {
                break;
            }
        }
    });
    let e = Engine::new(&socket).version().await.unwrap_err();
    assert!(
        matches!(&e, Error::Unreadable { reason, .. } if reason.contains("at most")),
        "{e}"
    );
    loud.abort();
}
