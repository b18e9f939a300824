//! `fleet-role status`, `pause`/`resume`, `run`, a stopped swap resumed,
//! and the command line's errors, against a real kube-apiserver with the
//! scripted fleet.

mod support;

use std::time::Duration;

use protocol::names::{K3S_ETCD_REMOVED_NODE_NAME, K3S_ETCD_ROLE_LABEL};
use support::{CONFIG, Harness, condition, three_voters};

/// A line of `out` that starts (after spaces) with `head` and ends with `tail`.
fn has_line(out: &str, head: &str, tail: &str) -> bool {
    out.lines()
        .any(|l| l.trim_start().starts_with(head) && l.trim_end().ends_with(tail))
}

#[tokio::test]
async fn status_shows_the_fleet_and_a_running_swap_at_a_glance() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.settle().await;
    let run = h.run_until_done(&["status"]).await;
    let out = &run.stdout;
    assert!(
        out.contains("Lease kube-system/fleet-regrade: free"),
        "{out}"
    );
    assert!(
        out.contains("Voters: 3 seen (3 healthy) of 3 configured; quorum 2"),
        "{out}"
    );
    assert!(has_line(out, "voters", "n1, n2, n3"), "{out}");
    assert!(has_line(out, "agents", "n4 (eligible), n5"), "{out}");
    assert!(out.contains("NODE") && out.contains("LAST REPORT"), "{out}");
    assert!(out.contains("Health: nothing degraded"), "{out}");
    assert!(
        out.contains("Protocol: this controller writes version 1 and reads 1 to 1"),
        "{out}"
    );

    // While a swap waits for its promotion, status shows it and its step.
    h.fleet.set(|f| {
        f.stall_promotion.insert("n4".into());
    });
    let _swap = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    h.wait_for("the promotion", || async {
        h.lease_annotation("swap-step").await.as_deref() == Some("promote")
            && h.report("n4")
                .await
                .is_some_and(|r| r.step == protocol::report::ReportStep::Promote)
    })
    .await;
    // The servers' views of etcd take in the new learner one heartbeat at
    // a time; until they all list it they disagree, which status rightly
    // counts as degraded. Each form is read once they agree.
    let run = h.run_until_done(&["status"]).await;
    let out = &run.stdout;
    assert!(out.contains("held by fleet-role"), "{out}");
    assert!(out.contains("out n1, in n4"), "{out}");
    assert!(out.contains("step promote since"), "{out}");
    assert!(has_line(out, "learners", "n4"), "{out}");
    assert!(out.contains("snapshot swap-"), "{out}");
    let json = h.run_until_done(&["status", "--output", "json"]).await;
    let v: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(v["lease"]["swap"]["out"], "n1");
    assert_eq!(v["lease"]["step"], "promote");
    assert_eq!(v["voters"]["healthy"], 3);
    assert_eq!(v["degraded"], serde_json::json!([]));
    // Times are RFC 3339 with a zone.
    for t in [&v["lease"]["expiresAt"], &v["lease"]["stepSince"]] {
        let t = t.as_str().unwrap_or_else(|| panic!("{t}"));
        assert!(t.ends_with('Z') && t.contains('T'), "{t}");
    }
    let n4 = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "n4")
        .unwrap();
    assert_eq!(n4["class"], "learner");
    assert_eq!(n4["protocol"], 1);
    let started = n4["report"]["startedAt"].as_str().unwrap();
    assert!(started.ends_with('Z'), "{started}");
}

#[tokio::test]
async fn pause_halts_a_running_swap_at_its_next_safe_point_and_resume_lets_it_finish() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    // The host does not take the promotion up until the pause is written, so
    // the pause lands in it however slow the machine.
    h.fleet.set(|f| {
        f.hold.insert("promote".into());
    });
    let mut swap = h.spawn(&["swap", "--out", "n1", "--in", "n4"]);
    h.wait_for("the promotion", || async {
        h.lease_annotation("swap-step").await.as_deref() == Some("promote")
            && h.fleet.has_held("promote")
    })
    .await;
    h.run(&["pause"]).await.expect(0);
    h.fleet.set(|f| f.hold.clear());
    // The promotion under way goes on (a host is working on it); the swap
    // halts before its next write, the cordon of n1.
    h.wait_for("the swap to halt", || async {
        h.lease_annotation("swap-step").await.as_deref() == Some("paused")
    })
    .await;
    // The controller's decision on the halted swap: it waits, and writes
    // nothing until something changes.
    Harness::read_until(&mut swap, "paused before ").await;
    let n1 = h.node("n1").await;
    assert_ne!(
        n1.spec.and_then(|s| s.unschedulable),
        Some(true),
        "cordoned while paused"
    );
    assert!(
        h.report("n1")
            .await
            .is_none_or(|r| r.step != protocol::report::ReportStep::StepDown)
    );
    // A new swap is refused while paused.
    let dry = h
        .run(&["swap", "--out", "n2", "--in", "n5", "--dry-run"])
        .await;
    dry.expect(1);
    assert!(
        dry.stdout
            .lines()
            .any(|l| l.contains("FAIL") && l.contains("not-paused")),
        "{}",
        dry.stdout
    );
    assert!(h.run(&["status"]).await.stdout.contains("paused: yes"));
    // The controller package's upgrade reads the pause from the JSON this
    // way (deploy/debian/controller/postinst: `grep -Eq '"paused": *true'`).
    let json = h.run(&["status", "--output", "json"]).await.stdout;
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["lease"]["paused"], serde_json::json!(true));
    assert_eq!(
        json.matches("\"paused\":true").count() + json.matches("\"paused\": true").count(),
        1,
        "{json}"
    );
    h.run(&["resume"]).await.expect(0);
    let status = tokio::time::timeout(Duration::from_secs(300), swap.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    h.assert_swapped("n1", "n4").await;
}

#[tokio::test]
async fn a_swap_stopped_by_a_failed_step_down_says_what_to_do_and_the_runbooks_command_resumes_it()
{
    let h = Harness::start(&three_voters(), CONFIG).await;
    h.fleet.set(|f| {
        f.fail_step_down.insert("n1".into());
    });
    let run = h.run(&["swap", "--out", "n1", "--in", "n4"]).await;
    // Stopped part-way: a person must look.
    run.expect(4);
    let out = &run.stdout;
    assert!(out.contains("stopped at step-down"), "{out}");
    assert!(out.contains("etcd did not serve again"), "{out}");
    assert!(out.contains("Left: n4 is a voter"), "{out}");
    assert!(
        out.contains("`fleet-role swap --out n1 --in n4` resumes the swap"),
        "{out}"
    );
    let status = h.run(&["status"]).await;
    // A stopped swap is degraded.
    status.expect(5);
    let status = status.stdout;
    assert!(status.contains("STOPPED"), "{status}");
    assert!(
        status.contains("DEGRADED: a swap stopped part-way: "),
        "{status}"
    );
    // Another swap is refused while this one is unfinished.
    let other = h
        .run(&["swap", "--out", "n2", "--in", "n5", "--dry-run"])
        .await;
    other.expect(1);
    assert!(other.stdout.contains("is unfinished"), "{}", other.stdout);
    // The host is fixed; the runbook's command (the same swap) resumes it
    // under a new id and finishes.
    h.fleet.set(|f| f.fail_step_down.clear());
    let again = h
        .run_runbook("swap-stopped", &[("OUT", "n1"), ("IN", "n4")])
        .await
        .pop()
        .unwrap();
    again.expect(0);
    assert!(
        again
            .stdout
            .contains("resume the stopped swap (out n1, in n4)"),
        "{}",
        again.stdout
    );
    h.assert_swapped("n1", "n4").await;
}

#[tokio::test]
async fn run_replaces_a_voter_that_stopped_within_its_grace_period_and_one_swap() {
    let h = Harness::start(&three_voters(), CONFIG).await;
    let mut run = h.spawn(&["run"]);
    // The run has listed the fleet and found nothing to do.
    Harness::read_until(&mut run, "idle: every voter is healthy").await;
    let down_at = clock::Clock::system().now();
    h.fleet.set(|f| {
        f.down.insert("n2".into());
    });
    h.wait_for("n4 to replace n2", || async {
        let n4 = h.node("n4").await;
        let n2 = h.node("n2").await;
        condition(&n4, "EtcdIsVoter")
            && n2
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(K3S_ETCD_REMOVED_NODE_NAME))
            && h.lease_annotation("role-swap").await.is_none()
            && h.lease_annotation("last-swap").await.is_some()
    })
    .await;
    eprintln!(
        "run replaced the stopped voter {:.1} s after it went down (grace period 3 s)",
        down_at.elapsed().as_secs_f64()
    );
    // n2 was down: no step-down, its member removed; it comes home by
    // itself when it boots.
    let last = h.lease_annotation("last-swap").await.unwrap();
    assert!(last.contains("comes home as an agent by itself"), "{last}");
    let n2 = h.node("n2").await;
    assert!(
        n2.metadata
            .labels
            .unwrap_or_default()
            .contains_key(K3S_ETCD_ROLE_LABEL)
    );
    let n4 = h.node("n4").await;
    assert!(
        n4.metadata
            .labels
            .unwrap_or_default()
            .contains_key(K3S_ETCD_ROLE_LABEL)
    );
    assert!(
        h.fleet.violations().is_empty(),
        "{:?}",
        h.fleet.violations()
    );
    // SIGTERM: run stops cleanly.
    let pid = run.id().unwrap();
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), run.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn the_help_and_so_the_man_page_list_every_exit_code() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fleet-role"))
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains(protocol::exit::EXIT_CODES_HELP), "{help}");
    // clap's own usage errors are exit 2, as ours are.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fleet-role"))
        .arg("--no-such-flag")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A kubeconfig that is not there is the caller's, and said once.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fleet-role"))
        .args(["--kubeconfig", "/nonexistent/kubeconfig", "status"])
        .env_remove("FLEET_ROLE_CONFIG")
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(
            "fleet-role: usage error: cannot use the kubeconfig /nonexistent/kubeconfig: "
        ),
        "{err}"
    );
    assert_eq!(err.matches("No such file").count(), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[tokio::test]
async fn bad_input_is_a_usage_error_2_a_refused_credential_a_safe_failure_3_and_the_token_is_never_shown()
 {
    let h = Harness::start(&three_voters(), CONFIG).await;
    let same = h.run(&["swap", "--out", "n1", "--in", "n1"]).await;
    same.expect(2);
    assert!(
        same.stderr.contains("name the same Node"),
        "{}",
        same.stderr
    );
    let bad = h.run(&["swap", "--out", "N1;rm", "--in", "n4"]).await;
    bad.expect(2);
    assert!(bad.stderr.contains("invalid node name"), "{}", bad.stderr);
    let timeout = h
        .run(&["swap", "--out", "n1", "--in", "n4", "--timeout", "soon"])
        .await;
    timeout.expect(2);
    let json = h
        .run(&["swap", "--out", "n1", "--in", "n1", "--output", "json"])
        .await;
    json.expect(2);
    let v: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["exit"], 2);
    // Said once, with the value at fault.
    let err = v["error"].as_str().unwrap();
    assert_eq!(
        err, "usage error: --out and --in name the same Node n1",
        "{err}"
    );

    // A credential that may not read Nodes: the API's refusal, no token.
    let token_file = h.kubeconfig.parent().unwrap().join("token");
    std::fs::write(&token_file, "not-a-token-but-long-enough-to-check").unwrap();
    let denied = h.run(&["status"]).await;
    denied.expect(3);
    assert!(
        denied.stderr.contains("reading the cluster"),
        "{}",
        denied.stderr
    );
    // A config file that does not parse: a usage error naming the file, once.
    std::fs::write(&h.config, "voters = \"three\"\n").unwrap();
    let run = h.run(&["status"]).await;
    run.expect(2);
    let file = h.config.display().to_string();
    assert!(
        run.stderr.starts_with("fleet-role: usage error: "),
        "{}",
        run.stderr
    );
    assert_eq!(run.stderr.matches(&file).count(), 1, "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}

#[tokio::test]
async fn a_swap_by_hand_asked_to_keep_to_the_window_is_refused_outside_it_and_changes_nothing() {
    // A one-hour window starting two hours from now (UTC): closed now.
    let hour = clock::Clock::system()
        .wall()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 3600
        % 24;
    let (start, end) = ((hour + 2) % 24, (hour + 3) % 24);
    let config = format!("{CONFIG}\n[window]\nstart = \"{start:02}:00\"\nend = \"{end:02}:00\"\n");
    let h = Harness::start(&three_voters(), &config).await;
    let refused = h
        .run(&["swap", "--out", "n1", "--in", "n4", "--in-window"])
        .await;
    refused.expect(1);
    assert!(
        refused.stderr.contains(&format!(
            "outside the window (sun,mon,tue,wed,thu,fri,sat {start:02}:00:00-{end:02}:00:00 UTC): it next opens at"
        )),
        "{}",
        refused.stderr
    );
    assert_eq!(h.lease_annotation("role-swap").await, None);
    assert!(h.fleet.log().is_empty(), "{:?}", h.fleet.log());
    // Without the flag, a swap by hand ignores the window.
    h.run(&["swap", "--out", "n1", "--in", "n4"])
        .await
        .expect(0);
    h.assert_swapped("n1", "n4").await;
}
