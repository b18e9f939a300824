//! `fleet-role-lab bench`: figures, not assertions. The actuator's reaction
//! time from a Node change to its report's `started`, its idle memory, CPU
//! and API requests, and a whole swap's time beside the waits built into it,
//! in a fresh lab on real systemd (the actuator runs as its hardened unit).

use std::{collections::BTreeSet, path::Path, time::Duration};

use anyhow::Context;
use protocol::report::ReportStep;

use crate::{
    lab_setup,
    scenario::{self, Ask, Hand},
    spec::{LabSpec, Timings},
    systemd_lab::{self, SystemdLab},
};

/// How long one look into a host may take.
const LOOK: Duration = Duration::from_secs(30);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Distinct requests the actuators made, from every API server's audit log.
fn audited_requests(spec: &LabSpec) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for h in &spec.hosts {
        let Ok(text) = std::fs::read_to_string(spec.root(&h.name).join("var/log/k3s/audit.log"))
        else {
            continue;
        };
        for line in text.lines() {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(line)
                && let Some(id) = v["auditID"].as_str()
            {
                ids.insert(id.to_string());
            }
        }
    }
    ids
}

/// (resident KiB, CPU ticks) of a unit's main process on a host, read
/// inside the host (its pids are the container's own).
fn usage(lab: &SystemdLab, host: &str, unit: &str) -> anyhow::Result<(u64, u64)> {
    let m = lab.machine(host)?;
    let pid = m
        .exec_ok(
            &["systemctl", "show", "-p", "MainPID", "--value", unit],
            LOOK,
        )?
        .text()
        .to_string();
    anyhow::ensure!(
        pid != "0" && !pid.is_empty(),
        "{unit} is not running on {host}"
    );
    let read = |f: &str| -> anyhow::Result<String> {
        Ok(m.exec_ok(&["cat", &format!("/proc/{pid}/{f}")], LOOK)?
            .stdout
            .clone())
    };
    let status = read("status")?;
    let stat = read("stat")?;
    parse_usage(&status, &stat).with_context(|| format!("reading /proc/{pid} on {host}"))
}

fn parse_usage(status: &str, stat: &str) -> Option<(u64, u64)> {
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some((
        rss,
        f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
    ))
}

/// Runs the benchmark in a fresh lab under `dir`, printing its figures.
pub async fn run(
    dir: &Path,
    bins: lab_setup::Bins,
    steps: usize,
    idle: Duration,
    say: &dyn Fn(&str),
) -> anyhow::Result<()> {
    let lab = SystemdLab::up(
        systemd_lab::Options {
            dir: dir.to_path_buf(),
            servers: 3,
            agents: 1,
            docker_agents: 0,
            timings: Timings::default(),
            bins,
        },
        say,
    )
    .await?;
    let result = measure(&lab, steps, idle, say).await;
    tokio::task::block_in_place(|| drop(lab));
    result
}

async fn measure(
    lab: &SystemdLab,
    steps: usize,
    idle: Duration,
    say: &dyn Fn(&str),
) -> anyhow::Result<()> {
    let clock = clock::Clock::system();
    let spec = &lab.spec;
    let hand = Hand::new(spec)?;
    let n = hand.names.clone();

    say(&format!(
        "reaction: {steps} snapshot requests on server-1, each timed from the Node's update to the report's `started`"
    ));
    let mut times = vec![];
    for i in 0..steps {
        let swap = format!("bench-{}-{i}", clock.unix_secs());
        // A snapshot of server-1 is all this asks: the swap's sides are
        // named as a controller would (another voter out, an agent in).
        hand.hold_lease(&swap, "server-2", "agent-1", &n.controller_identity)
            .await?;
        let t0 = clock.now();
        hand.ask("server-1", Ask::Snapshot { swap: &swap }).await?;
        loop {
            if let Some(r) = hand.report("server-1").await?
                && r.swap.as_ref().is_some_and(|s| s.as_str() == swap)
                && r.step == ReportStep::Snapshot
            {
                times.push(clock.since(t0));
                break;
            }
            anyhow::ensure!(
                clock.since(t0) < Duration::from_secs(30),
                "no report for {swap}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        hand.wait_step(
            "server-1",
            &swap,
            ReportStep::Snapshot,
            Duration::from_secs(60),
            &|_| {},
        )
        .await?;
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    say(&format!(
        "reaction time (Node update -> report started), {} steps: median {:.0} ms, p99 {:.0} ms, min {:.0} ms, max {:.0} ms (includes the 5 ms poll of the report)",
        times.len(),
        ms(percentile(&times, 0.5)),
        ms(percentile(&times, 0.99)),
        ms(times[0]),
        ms(times[times.len() - 1])
    ));
    hand.release_lease().await?;

    say(&format!(
        "idle: agent-1's actuator alone for {}s (the others stopped)",
        idle.as_secs()
    ));
    for h in spec.hosts.iter().filter(|h| h.name != "agent-1") {
        lab.systemctl(&h.name, &["stop", "fleet-role-actuator"])?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let actuator = "fleet-role-actuator";
    let before_req = audited_requests(spec);
    let (rss0, cpu0) = tokio::task::block_in_place(|| usage(lab, "agent-1", actuator))?;
    let t0 = clock.now();
    tokio::time::sleep(idle).await;
    let (rss1, cpu1) = tokio::task::block_in_place(|| usage(lab, "agent-1", actuator))?;
    let secs = clock.since(t0).as_secs_f64();
    let after_req = audited_requests(spec);
    let new = after_req.difference(&before_req).count();
    let hz = 100.0; // USER_HZ on Linux
    say(&format!(
        "idle actuator: resident {rss0} KiB -> {rss1} KiB, CPU {:.2}% of one core ({} ticks in {secs:.0}s), {new} API requests in {secs:.0}s ({:.1}/min; resync every 2 s in the lab, 10 s by default)",
        (cpu1 - cpu0) as f64 / hz / secs * 100.0,
        cpu1 - cpu0,
        new as f64 * 60.0 / secs
    ));
    for h in spec.hosts.iter().filter(|h| h.name != "agent-1") {
        lab.systemctl(&h.name, &["start", "fleet-role-actuator"])?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;

    say("swap: server-3 out, agent-1 in");
    let r = scenario::swap_by_hand(lab, "server-3", "agent-1", &|_| {}).await?;
    for line in r.lines() {
        say(&line);
    }
    let t = spec.timings;
    say(&format!(
        "inherent waits of the lab's k3s: the leader's learner loop every {:.1}s (a learner waits up to one period, and etcd refuses a new member until the voters have been connected ~5 s), the kubelet heartbeat and node Lease every {:.1}s (the finish waits for one renewal); a real k3s's loop is 15 s and its kubelet's 10 s",
        t.promote_every_ms as f64 / 1000.0,
        t.heartbeat_ms as f64 / 1000.0
    ));
    Ok(())
}
