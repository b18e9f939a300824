//! The voter count changed in place on real systemd, as a home lab grows
//! and an edge fleet shrinks: one server grows to three and then five
//! voters with `fleet-role grow`, and shrinks back to three with
//! `fleet-role shrink`, while a writer puts to etcd through the server that
//! keeps its vote; a change that would leave an even count standing is
//! refused with the reason. Fails, never skips, when nspawn cannot run.

use lab::{
    resize::{Resized, fleet_role_with_writer},
    systemd_lab::SystemdLab,
};

mod common;
use common::{etcd_members as members, fleet_role, lab_dir, lab_of, until_gates_pass};

/// Runs `fleet-role ARGS` through server-1 with the writer on, and checks
/// its exit code.
async fn run(lab: &SystemdLab, args: &[&str], code: i32) -> Resized {
    let r = fleet_role_with_writer(&lab.spec, &fleet_role(), "server-1", args, &|l: &str| {
        eprintln!("{l}")
    })
    .await
    .unwrap_or_else(|e| panic!("fleet-role {}: {e:#}", args.join(" ")));
    assert_eq!(
        r.code,
        Some(code),
        "fleet-role {}:\n{}\n{}",
        args.join(" "),
        r.output,
        r.log
    );
    r
}

/// Each host named runs its server and not its agent (`true`), or the
/// other way round.
fn runs_server(lab: &SystemdLab, hosts: &[&str], server: bool) {
    for h in hosts {
        let (k3s, agent) = (
            lab.is_active(h, "k3s").unwrap(),
            lab.is_active(h, "k3s-agent").unwrap(),
        );
        assert_eq!((k3s, agent), (server, !server), "{h}: k3s, k3s-agent");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_voter_grows_to_three_and_five_and_shrinks_back_to_three_with_no_failed_write_and_an_even_count_is_refused()
 {
    let dir = lab_dir();
    let lab = lab_of(1, 4, dir.path()).await;
    let mut figures = Vec::new();

    // 1 → 2 would leave an even count: refused, nothing changed.
    let even = run(&lab, &["grow", "--in", "agent-1"], 1).await;
    assert!(
        even.output.contains("odd-voter-count") && even.output.contains("queue a second --in"),
        "{}",
        even.output
    );
    assert_eq!(members(&lab).await.0.len(), 1);

    for (args, voters, promoted) in [
        (
            &["grow", "--in", "agent-1", "--in", "agent-2"][..],
            3,
            &["agent-1", "agent-2"][..],
        ),
        (
            &["grow", "--in", "agent-3", "--in", "agent-4"][..],
            5,
            &["agent-3", "agent-4"][..],
        ),
    ] {
        until_gates_pass(&lab, args).await;
        let r = run(&lab, args, 0).await;
        assert_eq!(r.writes.failed, 0, "{:?}", r.writes.errors);
        let (v, learners) = members(&lab).await;
        assert_eq!((v.len(), learners.len()), (voters, 0), "{v:?} {learners:?}");
        runs_server(&lab, promoted, true);
        figures.push(line(args, &r));
    }

    // 5 → 4 would leave an even count: refused with the reason.
    let even = run(&lab, &["shrink", "--out", "agent-1"], 1).await;
    assert!(
        even.output.contains("odd-voter-count") && even.output.contains("queue a second --out"),
        "{}",
        even.output
    );

    let args = &["shrink", "--out", "agent-1", "--out", "agent-2"];
    until_gates_pass(&lab, args).await;
    let r = run(&lab, args, 0).await;
    assert_eq!(r.writes.failed, 0, "{:?}", r.writes.errors);
    let (v, learners) = members(&lab).await;
    assert_eq!(
        (v.len(), learners.len()),
        (3, 0),
        "etcd's members: {v:?} {learners:?}"
    );
    // The two stepped down and came home as agents.
    runs_server(&lab, &["agent-1", "agent-2"], false);
    runs_server(&lab, &["server-1", "agent-3", "agent-4"], true);
    figures.push(line(args, &r));
    for f in &figures {
        println!("{f}");
    }
}

/// A figure line: the command, its time, the writer's puts.
fn line(args: &[&str], r: &Resized) -> String {
    format!(
        "fleet-role {}: {:.0} s; writer: {} puts ok, {} failed, {:.1}/s, longest {} ms",
        args.join(" "),
        r.took.as_secs_f64(),
        r.writes.ok,
        r.writes.failed,
        r.writes.rate,
        r.writes.longest.as_millis()
    )
}
