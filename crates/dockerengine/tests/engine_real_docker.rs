//! The Engine API client against a real Docker daemon (Debian's
//! `docker.io`, which scripts/prereqs.sh installs): a private `dockerd`
//! per test, its data, sockets and containerd under the test's own folder,
//! with no bridge and no iptables rules, so nothing of it outlives the
//! test or touches the machine's network. The image is a root file system
//! of this machine's own `sh` and `sleep`, imported from a local tar (no
//! registry). Fails, never skips, when dockerd cannot run.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use dockerengine::{ContainerSpec, Engine, Error, RestartPolicy, Status};

/// How long a private daemon may take to answer after its start.
const DAEMON_START: Duration = Duration::from_secs(90);
/// How long it may take to stop.
const DAEMON_STOP: Duration = Duration::from_secs(30);

/// A private dockerd, stopped (SIGTERM, then SIGKILL) when dropped.
struct Daemon {
    child: Child,
    engine: Engine,
    dir: tempfile::TempDir,
}

impl Daemon {
    async fn start() -> Self {
        // Unix socket paths are short (108 bytes): containerd's live under
        // the exec root, so the folder is a short one under target/tmp.
        let dir = tempfile::Builder::new()
            .prefix("dk")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let at = |p: &str| dir.path().join(p).display().to_string();
        let log = std::fs::File::create(dir.path().join("dockerd.log")).unwrap();
        let child = Command::new("dockerd")
            .args([
                "--data-root",
                &at("data"),
                "--exec-root",
                &at("exec"),
                "--pidfile",
                &at("docker.pid"),
                "-H",
                &format!("unix://{}", at("docker.sock")),
                "--bridge=none",
                "--iptables=false",
                "--ip-masq=false",
                "--log-level=warn",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("dockerd (scripts/prereqs.sh installs docker.io): {e}"));
        let engine =
            Engine::new(dir.path().join("docker.sock")).with_timeout(Duration::from_secs(60));
        let d = Self { child, engine, dir };
        let clock = clock::Clock::system();
        let start = clock.now();
        loop {
            if d.engine.version().await.is_ok() {
                return d;
            }
            assert!(
                clock.since(start) < DAEMON_START,
                "dockerd did not answer within {DAEMON_START:?}:\n{}",
                std::fs::read_to_string(d.dir.path().join("dockerd.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Imports a root file system of this machine's `sh` and `sleep` as
    /// `repo:tag`.
    async fn import_shell_image(&self, repo: &str, tag: &str) {
        let root = self.dir.path().join("rootfs");
        let out = Command::new("ldd")
            .args(["/bin/sh", "/bin/sleep"])
            .output()
            .unwrap();
        let libs = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut files: Vec<PathBuf> = vec!["/bin/sh".into(), "/bin/sleep".into()];
        files.extend(
            libs.split_whitespace()
                .filter(|w| w.starts_with('/') && !w.ends_with(':'))
                .map(PathBuf::from),
        );
        for f in files {
            let to = root.join(f.strip_prefix("/").unwrap());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(std::fs::canonicalize(&f).unwrap(), &to).unwrap();
        }
        let tar = Command::new("tar")
            .arg("-C")
            .arg(&root)
            .args(["-c", "."])
            .output()
            .unwrap();
        assert!(tar.status.success(), "tar: {tar:?}");
        self.engine.import(repo, tag, tar.stdout).await.unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let clock = clock::Clock::system();
        let start = clock.now();
        while clock.since(start) < DAEMON_STOP {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    assert!(d.engine.start("k3s-agent").await.unwrap());

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
