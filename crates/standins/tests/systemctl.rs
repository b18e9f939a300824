//! The `systemctl` stand-in behaves as systemd does where the actuator
//! depends on it: unit states, a blocking notify start, `--no-block`,
//! auto-restart, `is-active`'s word and exit code, `Conflicts=`.

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    thread,
    time::Duration,
};

use standins::{fixture::tempfile_dir::TempDir, units};

struct Root(TempDir);

impl Root {
    fn new(tag: &str) -> Root {
        Root(TempDir::new(tag))
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
    fn at(&self, rel: &str) -> PathBuf {
        self.path().join(rel)
    }
    fn unit(&self, name: &str, body: &str) {
        let p = self.at(&format!("etc/systemd/system/{name}.service"));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(
            p,
            format!("[Unit]\nDescription={name}\n[Service]\n{body}\n"),
        )
        .unwrap();
    }
    /// A program under the root: it waits for `go` under the root, then
    /// signals readiness the stand-in's way, then runs on.
    fn notify_program(&self) {
        let p = self.at("usr/local/bin/slow-k3s");
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(
            &p,
            format!(
                "#!/bin/sh\nwhile [ ! -e {go} ]; do sleep 0.05; done\ntouch \"$FLEET_ROLE_NOTIFY_FILE\"\nexec sleep 300\n",
                go = self.at("go").display()
            ),
        )
        .unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_systemctl"));
        c.args(args).env("FLEET_ROLE_ROOT", self.path());
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }
    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }
    fn state(&self, unit: &str) -> (String, String) {
        let s = units::state(self.path(), unit);
        (s.active, s.sub)
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        for u in ["k3s", "k3s-agent"] {
            let _ = self.run(&["stop", u]);
        }
    }
}

fn until(what: &str, f: impl Fn() -> bool) {
    let start = clock::Clock::system().now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn exits(child: &mut Child) -> bool {
    let start = clock::Clock::system().now();
    while start.elapsed() < Duration::from_secs(60) {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    false
}

const NOTIFY: &str = "Type=notify\nTimeoutStartSec=0\nKillMode=process\nRestart=always\nRestartSec=5s\nExecStart=/usr/local/bin/slow-k3s";

#[test]
fn a_notify_start_blocks_until_ready_and_a_no_block_start_returns_leaving_it_activating() {
    let r = Root::new("notify");
    r.notify_program();
    r.unit("k3s", NOTIFY);
    // --no-block returns although the unit cannot become ready (no `go`).
    let mut queued = r.spawn(&["start", "--no-block", "k3s"]);
    assert!(exits(&mut queued), "start --no-block blocked");
    assert!(queued.wait().unwrap().success());
    until("k3s activating (start)", || {
        r.state("k3s") == ("activating".into(), "start".into())
    });
    let out = r.run(&["is-active", "k3s"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "activating\n");
    assert_eq!(out.status.code(), Some(3), "activating is not active");
    let out = r.run(&["show", "-p", "ActiveState,SubState", "k3s"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ActiveState=activating\nSubState=start\n"
    );
    assert!(r.run(&["stop", "k3s"]).status.success());
    assert_eq!(r.state("k3s"), ("inactive".into(), "dead".into()));

    // A plain start waits for readiness: it cannot have returned before the
    // program was told to go, since the unit is not ready until then.
    let mut blocking = r.spawn(&["start", "k3s"]);
    until("k3s activating (start) again", || {
        r.state("k3s") == ("activating".into(), "start".into())
    });
    assert!(
        blocking.try_wait().unwrap().is_none(),
        "a notify start returned before the unit was ready"
    );
    fs::write(r.at("go"), "").unwrap();
    assert!(exits(&mut blocking), "the start never returned once ready");
    assert!(blocking.wait().unwrap().success());
    assert_eq!(r.state("k3s"), ("active".into(), "running".into()));
    let out = r.run(&["is-active", "k3s"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "active\n");
    assert!(out.status.success());
}

#[test]
fn a_unit_whose_process_exited_is_activating_during_its_restart_wait() {
    let r = Root::new("restart");
    r.unit("k3s", "Restart=always\nRestartSec=600s\nExecStart=false");
    assert!(r.run(&["start", "--no-block", "k3s"]).status.success());
    until("k3s activating (auto-restart)", || {
        r.state("k3s") == ("activating".into(), "auto-restart".into())
    });
    assert!(units::is_active(r.path(), "k3s"), "auto-restart is running");
    let out = r.run(&["is-active", "k3s"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "activating\n");
    assert_eq!(out.status.code(), Some(3));
    assert!(r.run(&["stop", "k3s"]).status.success());
    assert_eq!(r.state("k3s"), ("inactive".into(), "dead".into()));
}

#[test]
fn starting_a_unit_stops_the_one_it_conflicts_with_first() {
    let r = Root::new("conflicts");
    r.unit("k3s", "Conflicts=k3s-agent.service\nExecStart=sleep 300");
    // The agent names nothing: systemd applies the dependency both ways.
    r.unit("k3s-agent", "ExecStart=sleep 300");
    assert!(r.run(&["start", "k3s-agent"]).status.success());
    assert!(r.run(&["start", "k3s"]).status.success());
    assert_eq!(r.state("k3s-agent"), ("inactive".into(), "dead".into()));
    assert_eq!(r.state("k3s"), ("active".into(), "running".into()));
    assert!(r.run(&["start", "k3s-agent"]).status.success());
    assert_eq!(r.state("k3s"), ("inactive".into(), "dead".into()));
    assert_eq!(units::max_active_k3s(r.path()), 1, "both ran at once");
}
