//! The local commands against the `systemctl` and `k3s` stand-ins, as the
//! installer and systemd call them.

use std::{
    fs,
    path::Path,
    process::{Command, Output, Stdio},
    thread,
    time::Duration,
};

use standins::fixture::{K3S_TOKEN_MARKER, TestHost};

fn bin_dir() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_fleet-role-actuator"))
        .parent()
        .unwrap()
}

fn agent(node: &str) -> TestHost {
    TestHost::new(node, bin_dir()).as_agent()
}

fn server(node: &str) -> TestHost {
    TestHost::new(node, bin_dir()).as_server()
}

fn run(h: &TestHost, args: &[&str]) -> Output {
    let out = h.actuator(args).output().unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !all.contains(K3S_TOKEN_MARKER),
        "the k3s token leaked: {all}"
    );
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const JOIN: &str = "https://10.0.0.1:6443";

#[test]
fn a_promotion_joins_the_named_voter_and_starts_the_server_unit_in_place_of_the_agent() {
    let h = agent("standby");
    let out = run(&h, &["promote-local", "--join", JOIN]);
    assert!(out.status.success(), "{}", stderr(&out));
    let config =
        fs::read_to_string(h.at("etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml")).unwrap();
    assert!(config.contains(&format!("server: \"{JOIN}\"")), "{config}");
    let unit = fs::read_to_string(h.at("etc/systemd/system/k3s.service.d/90-fleet-role-join.conf"))
        .unwrap();
    assert!(
        unit.contains(&format!("Environment=\"FLEET_ROLE_JOIN_URL={JOIN}\"")),
        "{unit}"
    );
    assert_eq!(h.role().as_deref(), Some("server"));
    assert!(h.active("k3s") && h.enabled("k3s"));
    assert!(!h.active("k3s-agent") && !h.enabled("k3s-agent"));
    assert_eq!(h.max_active_k3s(), 1, "both units were active at once");
    let log = h.systemd_log();
    let stop = log
        .iter()
        .position(|l| l == "stop --no-block k3s-agent")
        .expect("agent stopped");
    let start = log
        .iter()
        .position(|l| l == "enable --now --no-block k3s")
        .expect("server enabled and started in one call");
    assert!(stop < start, "{log:?}");
    assert!(stdout(&out).contains("did: systemctl enable --now k3s"));
}

#[test]
fn a_second_promotion_changes_nothing() {
    let h = agent("standby");
    assert!(run(&h, &["promote-local", "--join", JOIN]).status.success());
    let before = h.tree();
    let out = run(&h, &["promote-local", "--join", JOIN]);
    assert!(out.status.success());
    assert!(
        stdout(&out).contains("nothing to change"),
        "{}",
        stdout(&out)
    );
    assert_eq!(before, h.tree());
}

#[test]
fn a_demotion_moves_the_datastore_aside_and_starts_the_agent_with_the_node_password_untouched() {
    let h = server("old-voter");
    fs::create_dir_all(h.at("var/lib/rancher/k3s/server/db.demoted/etcd")).unwrap();
    fs::write(
        h.at("var/lib/rancher/k3s/server/db.demoted/etcd/name"),
        "older",
    )
    .unwrap();
    fs::create_dir_all(h.at("etc/rancher/k3s/config.yaml.d")).unwrap();
    fs::write(
        h.at("etc/rancher/k3s/config.yaml.d/90-fleet-role-etcd-only.yaml"),
        "disable-apiserver: true\n",
    )
    .unwrap();
    let password = fs::read(h.at("etc/rancher/node/password")).unwrap();
    // k3s has written its tombstone: the member is removed.
    fs::write(h.at("var/lib/rancher/k3s/server/db/etcd/tombstone"), "").unwrap();
    let out = run(&h, &["demote-local"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Only the etcd datastore moves: server/db stays, for k3s's snapshots.
    assert!(!h.at("var/lib/rancher/k3s/server/db/etcd").exists());
    assert_eq!(
        fs::read_to_string(h.at("var/lib/rancher/k3s/server/db.demoted/etcd/name")).unwrap(),
        "old-voter-0a1b2c3d"
    );
    assert!(
        !h.at("etc/rancher/k3s/config.yaml.d/90-fleet-role-etcd-only.yaml")
            .exists()
    );
    assert_eq!(h.role().as_deref(), Some("agent"));
    assert!(h.active("k3s-agent") && h.enabled("k3s-agent"));
    assert!(!h.active("k3s") && !h.enabled("k3s"));
    assert_eq!(h.max_active_k3s(), 1);
    assert_eq!(
        fs::read(h.at("etc/rancher/node/password")).unwrap(),
        password
    );
    let log = h.systemd_log();
    let stop = log.iter().position(|l| l == "stop --no-block k3s").unwrap();
    let start = log
        .iter()
        .position(|l| l == "enable --now --no-block k3s-agent")
        .unwrap();
    assert!(stop < start, "{log:?}");
}

#[test]
fn a_check_run_prints_the_plan_and_leaves_the_tree_byte_identical() {
    for (h, args) in [
        (agent("a"), vec!["promote-local", "--join", JOIN, "--check"]),
        (server("s"), vec!["demote-local", "--check", "--force"]),
    ] {
        let before = h.tree();
        let out = run(&h, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("would: systemctl enable --now"),
            "{}",
            stdout(&out)
        );
        assert_eq!(before, h.tree(), "{args:?} changed the tree");
        assert!(!h.at("var/lib/rancher/k3s/fleet-role.lock").exists());
    }
}

#[test]
fn a_check_run_in_json_lists_the_changes() {
    let h = agent("a");
    let out = run(
        &h,
        &[
            "--output",
            "json",
            "promote-local",
            "--join",
            JOIN,
            "--check",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["check"], true);
    let changes: Vec<String> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert!(
        changes.contains(&"name server in /var/lib/rancher/k3s/fleet-role".to_string()),
        "{changes:?}"
    );
}

fn hold_lock(h: &TestHost, secs: &str) -> std::process::Child {
    let lock = h.at("var/lib/rancher/k3s/fleet-role.lock");
    fs::create_dir_all(lock.parent().unwrap()).unwrap();
    // --no-fork: the holder is `sleep` itself, so killing it frees the lock.
    let child = Command::new("flock")
        .arg("--no-fork")
        .arg(&lock)
        .args(["sleep", secs])
        .stdout(Stdio::null())
        .spawn()
        .expect("flock(1) from util-linux");
    // Wait until the other process holds it.
    let start = clock::Clock::system().now();
    while !fs::File::open(&lock).is_ok_and(|f| f.try_lock().is_err()) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "flock never took the host's lock"
        );
        thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn a_switch_waits_for_the_hosts_lock_and_fails_when_another_holds_it_too_long() {
    let h = agent("locked");
    let mut holder = hold_lock(&h, "30");
    let before = h.tree();
    let out = run(
        &h,
        &["promote-local", "--join", JOIN, "--lock-timeout", "1"],
    );
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert!(
        err.contains("fleet-role.lock") && err.contains("another switch"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(before, h.tree(), "a refused switch changed the host");
    holder.kill().unwrap();
    holder.wait().unwrap();

    // A holder that lets go: the switch waits for it and goes through. The
    // holder lets go only once the switch has the lock file open (it is
    // waiting), so the switch is seen to wait however slow the machine.
    let mut holder = hold_lock(&h, "300");
    let mut switch = h
        .actuator(&["promote-local", "--join", JOIN, "--lock-timeout", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lock = fs::canonicalize(h.at("var/lib/rancher/k3s/fleet-role.lock")).unwrap();
    let start = clock::Clock::system().now();
    while !has_open(switch.id(), &lock) {
        assert!(
            switch.try_wait().unwrap().is_none(),
            "the switch ended before it waited for the lock"
        );
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the switch never opened the lock"
        );
        thread::sleep(Duration::from_millis(20));
    }
    assert!(
        switch.try_wait().unwrap().is_none(),
        "switched under the lock"
    );
    assert_eq!(
        h.role().as_deref(),
        Some("agent"),
        "switched under the lock"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    let out = switch.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(h.role().as_deref(), Some("server"));
}

/// Whether process `pid` has the file `path` (canonical) open.
fn has_open(pid: u32, path: &Path) -> bool {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .any(|fd| fs::read_link(fd.path()).is_ok_and(|p| p == path))
}

#[test]
fn a_bad_join_url_is_refused_with_one_line_and_changes_nothing() {
    let h = agent("a");
    let before = h.tree();
    for bad in [
        "http://10.0.0.1:6443",
        "https://10.0.0.1:6443\nserver: https://evil:6443",
        "https://10.0.0.1:6443; systemctl stop k3s",
        "https://$(reboot):6443",
        "https://10.0.0.1",
        &format!("https://{}:6443", "a".repeat(300)),
    ] {
        let out = run(&h, &["promote-local", "--join", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = stderr(&out);
        assert!(
            err.starts_with("fleet-role-actuator: usage error: invalid join URL"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(before, h.tree());
    }
    let out = run(
        &h,
        &["--output", "json", "promote-local", "--join", "ftp://x:1"],
    );
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["ok"], false);
    assert!(v["error"].as_str().unwrap().contains("invalid join URL"));
}

#[test]
fn is_answers_from_the_role_file_and_any_doubt_is_no() {
    let h = server("s");
    let is = |args: &[&str]| run(&h, &[&["is"], args].concat()).status.code();
    assert_eq!(is(&["server"]), Some(0));
    assert_eq!(is(&["agent"]), Some(1));
    assert_eq!(is(&["server", "--no-tombstone"]), Some(0));
    fs::write(h.at("var/lib/rancher/k3s/server/db/etcd/tombstone"), "").unwrap();
    assert_eq!(is(&["server", "--no-tombstone"]), Some(1));
    assert_eq!(is(&["server"]), Some(0));
    fs::write(h.at("var/lib/rancher/k3s/fleet-role"), "voter\n").unwrap();
    assert_eq!(is(&["server"]), Some(1));
    fs::remove_file(h.at("var/lib/rancher/k3s/fleet-role")).unwrap();
    assert_eq!(is(&["server"]), Some(1));
    assert_eq!(is(&["nonsense"]), Some(1));
}

#[test]
fn a_mistyped_node_name_is_refused_at_start_saying_which_is_which_and_changes_nothing() {
    // A server: its k3s config names runner-3, its member runner-3-0a1b2c3d.
    let h = server("runner-3");
    let before = h.role();
    // Not through `h.actuator`, which names the host's own node.
    let out = Command::new(bin_dir().join("fleet-role-actuator"))
        .args([
            "--root",
            &h.root().display().to_string(),
            "--node",
            "runner-4",
        ])
        .args(["watch", "--api", "https://127.0.0.1:9"])
        .env("PATH", h.path_env())
        .env_remove("FLEET_ROLE_CONFIG")
        .env_remove("FLEET_ROLE_ROOT")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("\"runner-4\" is not this host"), "{err}");
    assert!(
        err.contains("node-name in") && err.contains("\"runner-3\""),
        "{err}"
    );
    assert!(
        err.contains("etcd member") && err.contains("runner-3-0a1b2c3d"),
        "{err}"
    );
    assert_eq!(h.role(), before);
    assert!(!h.at("var/lib/rancher/k3s/fleet-role.lock").exists());
    assert!(h.active("k3s"));
}

#[test]
fn a_node_ip_that_is_not_an_address_of_this_host_is_refused_at_start_and_changes_nothing() {
    let h = server("runner-3");
    let before = h.tree();
    // 203.0.113.0/24 is for documentation: no machine has it.
    let dropin = h.at("etc/rancher/k3s/config.yaml.d/40-ip.yaml");
    fs::create_dir_all(dropin.parent().unwrap()).unwrap();
    fs::write(&dropin, "node-ip: 127.0.0.1,203.0.113.77\n").unwrap();
    let out = Command::new(bin_dir().join("fleet-role-actuator"))
        .args([
            "--root",
            &h.root().display().to_string(),
            "--node",
            "runner-3",
        ])
        .args(["watch", "--api", "https://127.0.0.1:9"])
        .env("PATH", h.path_env())
        .env_remove("FLEET_ROLE_CONFIG")
        .env_remove("FLEET_ROLE_ROOT")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("\"runner-3\" is not this host"), "{err}");
    assert!(
        err.contains("node-ip in")
            && err.contains("(not an address of this host) says \"203.0.113.77\""),
        "{err}"
    );
    assert!(
        !err.contains("\"127.0.0.1\""),
        "only the address that disagrees: {err}"
    );
    fs::remove_dir_all(dropin.parent().unwrap()).unwrap();
    assert_eq!(before, h.tree());
}

#[test]
fn the_drop_ins_pin_the_conditions_root_so_no_environment_file_can_move_it() {
    // Every condition in deploy/systemd names its root on the command line,
    // where a flag wins over FLEET_ROLE_ROOT (which an EnvironmentFile= of
    // the k3s unit could set).
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/systemd");
    for unit in ["k3s", "k3s-agent", "fleet-regrade"] {
        let text = fs::read_to_string(deploy.join(format!("{unit}.service.d/50-fleet-role.conf")))
            .unwrap();
        let conditions: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("ExecCondition="))
            .collect();
        assert!(!conditions.is_empty(), "{unit}");
        for c in conditions {
            assert!(
                c.starts_with("ExecCondition=/usr/bin/fleet-role-actuator --root / is "),
                "{unit}: {c}"
            );
        }
    }
    // And the flag wins: an agent's condition, with the environment naming a
    // server's root, still answers for the agent.
    let a = agent("a");
    let s = server("s");
    let out = a
        .actuator(&["is", "server"])
        .env("FLEET_ROLE_ROOT", s.root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "the environment moved the root");
    // The pinned drop-in, as installed on the test host, keeps the server
    // from starting on the agent whatever the environment says.
    assert!(a.systemctl(&["start", "k3s"]).success());
    assert!(!a.active("k3s"));
}

#[test]
fn the_units_condition_keeps_the_other_role_from_starting() {
    let h = agent("a");
    assert!(
        h.systemctl(&["start", "k3s"]).success(),
        "a skipped start is not a failure"
    );
    assert!(!h.active("k3s"));
    assert_eq!(h.max_active_k3s(), 1);
    let s = server("s");
    assert!(s.systemctl(&["start", "k3s-agent"]).success());
    assert!(!s.active("k3s-agent"));
}

#[test]
fn the_server_unit_never_starts_over_a_tombstone_and_a_promotion_moves_it_aside() {
    let s = server("removed");
    assert!(s.systemctl(&["stop", "k3s"]).success());
    // k3s wrote the tombstone when its member was removed; started over it,
    // k3s would join again as a new member.
    fs::write(s.at("var/lib/rancher/k3s/server/db/etcd/tombstone"), "").unwrap();
    assert!(s.systemctl(&["start", "k3s"]).success());
    assert!(!s.active("k3s"), "k3s started over a tombstone");
    // A promotion of that host (its role file still naming the server) moves
    // the removed member's datastore aside first, so k3s joins afresh.
    let out = run(&s, &["promote-local", "--join", JOIN]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !s.at("var/lib/rancher/k3s/server/db/etcd/tombstone")
            .exists()
    );
    assert!(
        s.at("var/lib/rancher/k3s/server/db.demoted/etcd/tombstone")
            .exists()
    );
    assert!(s.active("k3s"));
}

#[test]
fn the_regrade_unit_starts_only_on_a_server_whose_datastore_holds_no_tombstone() {
    let s = server("s");
    s.systemctl(&["start", "fleet-regrade"]);
    assert!(s.active("fleet-regrade"));
    s.systemctl(&["stop", "fleet-regrade"]);
    fs::write(s.at("var/lib/rancher/k3s/server/db/etcd/tombstone"), "").unwrap();
    s.systemctl(&["start", "fleet-regrade"]);
    assert!(!s.active("fleet-regrade"), "started with a tombstone");
    let a = agent("a");
    a.systemctl(&["start", "fleet-regrade"]);
    assert!(!a.active("fleet-regrade"), "started on an agent");
}

#[test]
fn a_voter_takes_the_snapshot_named_for_the_swap_and_reports_its_file() {
    let h = server("voter-a");
    let out = run(&h, &["snapshot", "--name", "swap-1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stdout(&out);
    assert!(
        line.starts_with("snapshot: /var/lib/rancher/k3s/server/db/snapshots/swap-1-voter-a-"),
        "{line}"
    );
    let file = line.trim().trim_start_matches("snapshot: /");
    assert!(h.at(file).is_file());
    let out = run(&h, &["snapshot", "--name", "Bad Name;"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("invalid swap id"));
    h.systemctl(&["stop", "k3s"]);
    let out = run(&h, &["snapshot", "--name", "swap-2"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("k3s etcd-snapshot save --name swap-2 failed"),
        "{}",
        stderr(&out)
    );
}

/// The file names in a host's snapshot directory, sorted.
fn snapshot_names(h: &TestHost) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(h.at("var/lib/rancher/k3s/server/db/snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn pruning_keeps_the_newest_swap_snapshots_and_never_another_name_and_a_failed_prune_keeps_all() {
    let h = server("voter-a");
    let dir = h.at("var/lib/rancher/k3s/server/db/snapshots");
    fs::create_dir_all(&dir).unwrap();
    for name in [
        "swap-a-voter-a-100",
        "swap-b-voter-a-300.zip",
        "swap-c-voter-a-200",
        "etcd-snapshot-voter-a-50",
        "before-upgrade-voter-a-10",
    ] {
        fs::write(dir.join(name), "old\n").unwrap();
    }
    let mut host =
        host::Host::new(h.root(), "voter-a", clock::Clock::system()).with_search_path(h.path_env());
    let taken = host
        .snapshot(&protocol::SwapId::parse("swap-new").unwrap())
        .unwrap();
    host.snapshot_retention = 2;
    assert_eq!(host.prune_snapshots().unwrap(), Some(2));
    let left = snapshot_names(&h);
    assert_eq!(
        left.iter()
            .filter(|n| n.starts_with("swap-"))
            .cloned()
            .collect::<Vec<_>>(),
        vec![
            "swap-b-voter-a-300.zip".to_string(),
            taken.rsplit('/').next().unwrap().to_string()
        ],
        "the newest two by the time in their names"
    );
    assert!(left.contains(&"etcd-snapshot-voter-a-50".to_string()));
    assert!(left.contains(&"before-upgrade-voter-a-10".to_string()));
    // 0 keeps every one, and asks k3s nothing.
    host.snapshot_retention = 0;
    assert_eq!(host.prune_snapshots().unwrap(), None);
    // With k3s down the prune fails, saying what it left, and removes nothing.
    h.systemctl(&["stop", "k3s"]);
    host.snapshot_retention = 1;
    let e = host.prune_snapshots().unwrap_err().to_string();
    assert!(
        e.contains("k3s etcd-snapshot prune --name swap- --snapshot-retention 1"),
        "{e}"
    );
    assert_eq!(snapshot_names(&h), left);
}

#[test]
fn a_bad_config_file_is_a_clear_error() {
    let h = agent("a");
    let cfg = h.at("actuator.toml");
    fs::write(&cfg, "nodee = \"x\"\n").unwrap();
    let out = run(&h, &["--config", cfg.to_str().unwrap(), "demote-local"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("invalid config file"),
        "{}",
        stderr(&out)
    );
    assert_eq!(h.role().as_deref(), Some("agent"));
    assert!(h.systemd_log().is_empty());
}

#[test]
fn status_shows_the_role_file_the_drop_ins_and_each_units_state_and_exits_0_when_nothing_is_degraded()
 {
    let h = server("s");
    let out = run(&h, &["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    for line in [
        "role file:    server",
        "k3s:          active (running)",
        "k3s-agent:    inactive",
        "drop-in:      k3s           /etc/systemd/system/k3s.service.d/50-fleet-role.conf",
        "drop-in:      k3s-agent     /etc/systemd/system/k3s-agent.service.d/50-fleet-role.conf",
        "protocol:     1",
        "health:       nothing degraded",
    ] {
        assert!(text.lines().any(|l| l.starts_with(line)), "{line}\n{text}");
    }
    assert!(text.contains("kept report:  none"), "{text}");
    assert!(
        text.lines().any(|l| l == "k3s release:  v1.34.3+k3s1"),
        "{text}"
    );
    let out = run(&h, &["--output", "json", "status"]);
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["host"]["role"], "server");
    assert_eq!(
        v["host"]["role_file"],
        serde_json::json!({"state": "names", "role": "server"})
    );
    assert_eq!(v["host"]["datastore"], true);
    assert_eq!(v["report_kept"], serde_json::Value::Null);
    assert_eq!(v["host"]["degraded"], serde_json::json!([]));
    assert_eq!(v["exit"], 0);
    assert_eq!(
        v["k3s"],
        serde_json::json!({"version": "v1.34.3+k3s1", "supported": true})
    );

    // A k3s release fleet-role was not checked against: said, not degraded.
    let state = h.at("run/fleet-role-standin/k3s");
    fs::create_dir_all(&state).unwrap();
    fs::write(state.join("version"), "v1.37.0+k3s1\n").unwrap();
    let out = run(&h, &["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.lines().any(|l| l.starts_with("k3s release:  v1.37.0+k3s1; WARNING: k3s v1.37.0+k3s1 is not a release fleet-role was checked against (v1.32 to v1.36)")),
        "{text}"
    );
}

#[test]
fn status_shows_the_report_kept_on_the_host_and_says_when_it_does_not_parse() {
    let h = agent("a");
    let kept = h.at("var/lib/rancher/k3s/fleet-role.report");
    let r = protocol::Report::next(
        None,
        Some(protocol::SwapId::parse("s1").unwrap()),
        protocol::report::ReportStep::Finish,
        protocol::Phase::Done,
        7,
    );
    fs::write(&kept, r.to_json()).unwrap();
    let out = run(&h, &["status"]);
    let text = stdout(&out);
    assert!(
        text.contains("kept report:  swap s1 step finish Done (seq 1)"),
        "{text}"
    );
    let out = run(&h, &["--output", "json", "status"]);
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["report_kept"]["phase"], "done");

    fs::write(&kept, "{\"step\":").unwrap();
    let out = run(&h, &["status"]);
    // `watch` would refuse to start over it: degraded.
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("kept report:  the report kept on this host")
            && text.contains("does not parse"),
        "{text}"
    );
    let out = run(&h, &["--output", "json", "status"]);
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert!(
        v["report_kept_error"]
            .as_str()
            .unwrap()
            .contains("does not parse")
    );
}

#[test]
fn status_names_an_invalid_role_file_with_its_bytes_escaped_and_exits_5() {
    let h = server("s");
    let role = h.at("var/lib/rancher/k3s/fleet-role");
    fs::write(&role, b"serv\x1b[2Jer\n\xff").unwrap();
    let out = run(&h, &["status"]);
    assert_eq!(out.status.code(), Some(5), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        !text.contains('\x1b'),
        "an escape reached the terminal: {text:?}"
    );
    assert!(
        text.contains("role file:    INVALID: \"serv\\u{1b}[2Jer\\n\\xff\""),
        "{text}"
    );
    assert!(
        text.contains(
            "DEGRADED:     the role file is invalid (it holds \"serv\\u{1b}[2Jer\\n\\xff\""
        ),
        "{text}"
    );
    fs::remove_file(&role).unwrap();
    let out = run(&h, &["status"]);
    assert_eq!(out.status.code(), Some(5));
    assert!(
        stdout(&out).contains("DEGRADED:     the role file is missing"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn status_says_so_when_systemd_cannot_be_asked_or_a_drop_in_is_missing_or_the_wrong_unit_runs() {
    let h = server("s");
    let out = h
        .actuator(&["status"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let text = stdout(&out);
    assert!(
        text.contains("k3s:          unknown: systemd could not be asked: "),
        "{text}"
    );
    assert!(
        text.contains("DEGRADED:     systemd could not be asked about k3s-agent: "),
        "{text}"
    );
    fs::remove_file(h.at("etc/systemd/system/k3s-agent.service.d/50-fleet-role.conf")).unwrap();
    let out = run(&h, &["status"]);
    assert_eq!(out.status.code(), Some(5));
    let text = stdout(&out);
    assert!(
        text.contains("drop-in:      k3s-agent     missing"),
        "{text}"
    );
    assert!(
        text.contains("DEGRADED:     k3s-agent.service has no fleet-role drop-in"),
        "{text}"
    );
    h.systemctl(&["stop", "k3s"]);
    let out = run(&h, &["status"]);
    assert!(
        stdout(&out).contains("DEGRADED:     k3s is inactive"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn the_help_and_so_the_man_page_list_every_exit_code() {
    let out = Command::new(env!("CARGO_BIN_EXE_fleet-role-actuator"))
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = stdout(&out);
    assert!(help.contains(protocol::exit::EXIT_CODES_HELP), "{help}");
    let out = Command::new(env!("CARGO_BIN_EXE_fleet-role-actuator"))
        .arg("--no-such-flag")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "clap's usage errors are ours");
}

#[test]
fn a_token_file_with_a_newline_is_refused_without_showing_the_token() {
    let h = agent("a");
    let token = h.at("token");
    fs::write(&token, "secretMARKERtoken\n").unwrap();
    let out = run(
        &h,
        &[
            "status",
            "--api",
            "https://127.0.0.1:1",
            "--token-file",
            token.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("unusable token file") && err.contains("newline"),
        "{err}"
    );
    assert!(!err.contains("secretMARKERtoken") && !stdout(&out).contains("secretMARKERtoken"));
    fs::write(&token, "").unwrap();
    let err = stderr(&run(
        &h,
        &[
            "watch",
            "--api",
            "https://127.0.0.1:1",
            "--token-file",
            token.to_str().unwrap(),
        ],
    ));
    assert!(err.contains("it is empty"), "{err}");
}

/// Replaces a unit of the host by one that runs `exec` under the stand-in's
/// supervisor, as k3s's installer writes them (`Type=notify`,
/// `Restart=always`), keeping fleet-role's drop-ins.
fn unit_with_process(h: &TestHost, unit: &str, exec: &str, restart_sec: u32) {
    fs::write(
        h.at(&format!("etc/systemd/system/{unit}.service")),
        format!(
            "[Unit]\nDescription=k3s (stand-in, with a process)\n[Service]\nType=notify\nTimeoutStartSec=0\nKillMode=process\nRestart=always\nRestartSec={restart_sec}s\nExecStart={exec}\n[Install]\nWantedBy=multi-user.target\n"
        ),
    )
    .unwrap();
}

fn config(h: &TestHost, toml: &str) -> String {
    let p = h.at("actuator.toml");
    fs::write(&p, toml).unwrap();
    p.display().to_string()
}

fn state(h: &TestHost, unit: &str) -> standins::units::State {
    standins::units::state(h.root(), unit)
}

fn until(what: &str, f: impl Fn() -> bool) {
    let start = clock::Clock::system().now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_promotion_whose_server_never_becomes_ready_fails_within_its_bound_and_leaves_the_lock_free() {
    let h = agent("learner");
    // A k3s that never sends READY=1: a learner that cannot catch up.
    unit_with_process(&h, "k3s", "sleep 300", 5);
    let cfg = config(&h, "start_wait_secs = 2\n");
    let out = run(&h, &["--config", &cfg, "promote-local", "--join", JOIN]);
    assert_eq!(out.status.code(), Some(4), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("k3s is activating (start) after its start was queued (waited 2s)")
            && err.contains("a rollback or demote-local stops it"),
        "{err}"
    );
    assert_eq!(h.max_active_k3s(), 1, "both units ran at once");
    // The lock is free: demote-local undoes the promotion at once.
    let out = run(
        &h,
        &["--config", &cfg, "demote-local", "--lock-timeout", "1"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(state(&h, "k3s").is_stopped(), "{:?}", state(&h, "k3s"));
    assert_eq!(state(&h, "k3s-agent").active, "active");
    assert_eq!(h.role().as_deref(), Some("agent"));
    assert_eq!(h.max_active_k3s(), 1, "both units ran at once");
}

#[test]
fn a_server_waiting_to_auto_restart_counts_as_running_and_is_stopped_before_the_agent_starts() {
    let h = server("crashloop");
    // A k3s that exits at once, restarted by Restart=always after a long wait.
    unit_with_process(&h, "k3s", "false", 600);
    standins::units::set_active(h.root(), "k3s", false);
    // No datastore to move: only the switch of units itself must stop it.
    fs::remove_dir_all(h.at("var/lib/rancher/k3s/server/db")).unwrap();
    assert!(h.systemctl(&["start", "--no-block", "k3s"]).success());
    until("k3s waiting to auto-restart", || {
        state(&h, "k3s").sub == "auto-restart"
    });
    let out = run(&h, &["demote-local"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = h.systemd_log();
    let stop = log
        .iter()
        .position(|l| l == "stop --no-block k3s")
        .unwrap_or_else(|| panic!("no stop of the auto-restarting server: {log:?}"));
    let start = log
        .iter()
        .position(|l| l == "enable --now --no-block k3s-agent")
        .unwrap();
    assert!(stop < start, "{log:?}");
    assert!(state(&h, "k3s").is_stopped());
    assert_eq!(state(&h, "k3s-agent").active, "active");
}

#[test]
fn a_damaged_or_unreadable_role_file_makes_promote_and_demote_refuse_and_changes_nothing() {
    let h = server("damaged");
    let role = h.at("var/lib/rancher/k3s/fleet-role");
    for damage in ["invalid", "unreadable"] {
        if damage == "invalid" {
            fs::write(&role, "voter\n").unwrap();
        } else {
            fs::remove_file(&role).unwrap();
            fs::create_dir(&role).unwrap();
        }
        let before = h.tree();
        for args in [
            &["promote-local", "--join", JOIN][..],
            &["demote-local"][..],
        ] {
            let out = run(&h, args);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{damage} {args:?}: {}",
                stdout(&out)
            );
            let err = stderr(&out);
            assert!(
                err.contains("fleet-role") && err.lines().count() == 1,
                "{damage} {args:?}: {err}"
            );
            assert_eq!(before, h.tree(), "{damage} {args:?} changed the host");
        }
    }
    assert!(h.active("k3s"), "the server was touched");
}

#[test]
fn a_snapshot_survives_two_demotions() {
    let h = server("twice");
    let out = run(&h, &["snapshot", "--name", "swap-1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let file = h.at(stdout(&out).trim().trim_start_matches("snapshot: /"));
    assert!(file.is_file());
    assert!(run(&h, &["demote-local", "--force"]).status.success());
    assert!(run(&h, &["promote-local", "--join", JOIN]).status.success());
    // The new member's datastore, as k3s makes it on joining.
    fs::create_dir_all(h.at("var/lib/rancher/k3s/server/db/etcd/member/wal")).unwrap();
    fs::write(
        h.at("var/lib/rancher/k3s/server/db/etcd/name"),
        "twice-second",
    )
    .unwrap();
    let out = run(&h, &["demote-local", "--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(file.is_file(), "the swap's snapshot went with a demotion");
    assert_eq!(
        fs::read_to_string(h.at("var/lib/rancher/k3s/server/db.demoted/etcd/name")).unwrap(),
        "twice-second"
    );
    assert!(!h.at("var/lib/rancher/k3s/server/db/etcd").exists());
}

#[test]
fn a_snapshot_is_found_where_k3s_config_puts_it_compressed() {
    let h = server("voter-z");
    fs::create_dir_all(h.at("etc/rancher/k3s/config.yaml.d")).unwrap();
    fs::write(
        h.at("etc/rancher/k3s/config.yaml.d/20-snapshots.yaml"),
        "etcd-snapshot-dir: /srv/k3s-snapshots\netcd-snapshot-compress: true\n",
    )
    .unwrap();
    let out = run(&h, &["snapshot", "--name", "swap-1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stdout(&out);
    assert!(
        line.starts_with("snapshot: /srv/k3s-snapshots/swap-1-voter-z-")
            && line.trim().ends_with(".zip"),
        "{line}"
    );
}

#[test]
fn the_drop_ins_make_the_two_units_conflict_so_starting_one_stops_the_other() {
    let h = server("by-hand");
    // The role file changed by hand, behind the actuator's back: the
    // condition alone would let the agent start beside the running server.
    fs::write(h.at("var/lib/rancher/k3s/fleet-role"), "agent\n").unwrap();
    assert!(h.systemctl(&["start", "k3s-agent"]).success());
    assert!(h.active("k3s-agent"));
    assert!(!h.active("k3s"), "the server kept running beside the agent");
    assert_eq!(h.max_active_k3s(), 1);
}

#[test]
fn demote_local_refuses_a_host_whose_member_may_still_vote_unless_forced() {
    let h = server("voter");
    let before = h.tree();
    for args in [&["demote-local"][..], &["demote-local", "--check"][..]] {
        let out = run(&h, args);
        // Exit 1: refused, nothing changed.
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(
            err.contains("may still vote") && err.contains("--force") && err.lines().count() == 1,
            "{args:?}: {err}"
        );
        assert_eq!(before, h.tree(), "{args:?} changed the host");
    }
    assert!(h.systemd_log().iter().all(|l| !l.contains("stop")));
    // With the tombstone k3s writes once the member is removed, no force is needed.
    fs::write(h.at("var/lib/rancher/k3s/server/db/etcd/tombstone"), "").unwrap();
    let out = run(&h, &["demote-local", "--check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    fs::remove_file(h.at("var/lib/rancher/k3s/server/db/etcd/tombstone")).unwrap();
    // Forced, it demotes.
    let out = run(&h, &["demote-local", "--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(h.role().as_deref(), Some("agent"));
    assert!(!h.at("var/lib/rancher/k3s/server/db/etcd").exists());
}

#[test]
fn promote_local_refuses_a_datastore_whose_member_may_still_vote_unless_the_role_file_names_the_server()
 {
    // An etcd-only voter whose role file already names the agent, and one
    // whose role file was lost: a promotion would move a voting member's
    // datastore aside.
    for role in [Some("agent\n"), None] {
        let h = server("stepped-down");
        match role {
            Some(r) => fs::write(h.at("var/lib/rancher/k3s/fleet-role"), r).unwrap(),
            None => fs::remove_file(h.at("var/lib/rancher/k3s/fleet-role")).unwrap(),
        }
        let before = h.tree();
        for args in [
            &["promote-local", "--join", JOIN][..],
            &["promote-local", "--join", JOIN, "--check"][..],
        ] {
            let out = run(&h, args);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{role:?} {args:?}: {}",
                stdout(&out)
            );
            let err = stderr(&out);
            assert!(
                err.contains("may still vote") && err.lines().count() == 1,
                "{role:?} {args:?}: {err}"
            );
            assert_eq!(before, h.tree(), "{role:?} {args:?} changed the host");
        }
        assert!(h.systemd_log().iter().all(|l| !l.contains("stop")));
        // With the tombstone k3s writes once the member is removed, it goes on.
        fs::write(h.at("var/lib/rancher/k3s/server/db/etcd/tombstone"), "").unwrap();
        let out = run(&h, &["promote-local", "--join", JOIN, "--check"]);
        assert!(out.status.success(), "{role:?}: {}", stderr(&out));
    }
    // A server's own datastore is its own: nothing to refuse.
    let s = server("voter");
    let out = run(&s, &["promote-local", "--join", JOIN, "--check"]);
    assert!(out.status.success(), "{}", stderr(&out));
}
