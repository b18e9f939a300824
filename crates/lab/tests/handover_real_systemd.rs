//! etcd's leadership handed over before a voter sleeps or shuts down, on
//! real systemd: `fleet-role-handover.service` (before `sleep.target`) and
//! `fleet-role-handover-shutdown.service` (its `ExecStop` before k3s
//! stops). The write gap a writer through another server sees when the
//! leader powers off is measured with and without the hand-over and
//! printed (figures, never asserted: docs/actuator.md keeps them).

mod common;
use common::{SERIAL, lab_dir, lab_of};

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use clock::Clock;
use lab::{etcd_gw, systemd_lab::SystemdLab};

/// The server whose member leads etcd, as the first member that answers
/// with a leader says.
async fn leader(lab: &SystemdLab) -> Option<String> {
    for h in &lab.spec.hosts {
        let Ok(ep) = lab.spec.etcd(h.ip) else {
            continue;
        };
        let (Ok(s), Ok((_, members))) =
            (etcd_gw::status(&ep).await, etcd_gw::member_list(&ep).await)
        else {
            continue;
        };
        if s.leader == 0 {
            continue;
        }
        let m = members.iter().find(|m| m.id == s.leader)?;
        return lab
            .spec
            .hosts
            .iter()
            .find(|h| m.name.starts_with(&format!("{}-", h.name)))
            .map(|h| h.name.clone());
    }
    None
}

/// Waits until some member leads, within a bound.
async fn wait_leader(lab: &SystemdLab) -> String {
    let clock = Clock::system();
    let start = clock.now();
    loop {
        if let Some(l) = leader(lab).await {
            return l;
        }
        assert!(
            clock.since(start) < Duration::from_secs(120),
            "no leader within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A writer putting a key through `host`'s member every 20 ms: the times
/// of its successful writes, until dropped.
struct Writer {
    done: Arc<Mutex<Vec<Duration>>>,
    task: tokio::task::JoinHandle<()>,
    clock: Clock,
    start: std::time::Instant,
}

impl Writer {
    fn start(lab: &SystemdLab, host: &str) -> Writer {
        let ip = lab.spec.hosts.iter().find(|h| h.name == host).unwrap().ip;
        let ep = lab.spec.etcd(ip).unwrap();
        let clock = Clock::system();
        let start = clock.now();
        let done = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let (done, clock) = (done.clone(), clock.clone());
            async move {
                for i in 0u64.. {
                    let value = i.to_string();
                    let put = etcd_gw::put(&ep, "/fleet-role-lab/writer", &value);
                    if let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(2), put).await {
                        done.lock().unwrap().push(clock.since(start));
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
        Writer {
            done,
            task,
            clock,
            start,
        }
    }

    fn now(&self) -> Duration {
        self.clock.since(self.start)
    }

    /// The longest time between two successful writes within `from..to`
    /// (each end counting as one), once a write after `to` succeeded.
    async fn longest_gap(&self, from: Duration, to: Duration) -> Duration {
        let waited = self.clock.now();
        loop {
            let times = self.done.lock().unwrap().clone();
            if times.iter().any(|t| *t > to) {
                let mut points: Vec<Duration> = times
                    .into_iter()
                    .filter(|t| *t >= from && *t <= to)
                    .collect();
                points.insert(0, from);
                points.push(to);
                return points
                    .windows(2)
                    .map(|w| w[1] - w[0])
                    .max()
                    .unwrap_or_default();
            }
            assert!(
                self.clock.since(waited) < Duration::from_secs(60),
                "the writer wrote nothing for 60 s after the window"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What `fleet-role-actuator` said on a host, read from the host's journal
/// directory (the host may be off), one message a line. By its identifier,
/// not its unit: journald cannot always tell the unit of a process that
/// ended at once (`hand-over` on a member that does not lead).
fn journal(lab: &SystemdLab, host: &str) -> String {
    // A running host's journald first writes out what it holds (a host
    // that is off flushed it at its shutdown).
    if let Ok(m) = lab.machine(host) {
        let _ = m.exec(&["journalctl", "--sync"], Duration::from_secs(30));
    }
    let dir = lab.spec.root(host).join("var/log/journal");
    let out = std::process::Command::new("journalctl")
        .arg("-D")
        .arg(&dir)
        .args(["-t", "fleet-role-actuator", "-o", "cat", "--no-pager"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The write gap a writer through another server sees while `host` powers
/// off, from the poweroff's start to 15 s after it ended.
async fn gap_over_poweroff(lab: &mut SystemdLab, host: &str) -> Duration {
    let writer = lab
        .spec
        .hosts
        .iter()
        .map(|h| h.name.clone())
        .find(|h| h != host)
        .unwrap();
    let w = Writer::start(lab, &writer);
    // Writes go through before the poweroff.
    let clock = Clock::system();
    let warm = clock.now();
    while w.done.lock().unwrap().len() < 10 {
        assert!(
            clock.since(warm) < Duration::from_secs(60),
            "the writer never wrote"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let from = w.now();
    lab.poweroff(host).unwrap();
    let to = w.now() + Duration::from_secs(15);
    w.longest_gap(from, to).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_hands_etcd_leadership_over_before_it_sleeps_and_before_k3s_stops_at_shutdown() {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let mut lab = lab_of(3, 0, dir.path()).await;
    let quick = Duration::from_secs(60);

    // Sleep. A container cannot suspend, and sleep.target refuses a manual
    // start: a lab unit pulls it in exactly as systemd-suspend.service does
    // (Requires= and After= sleep.target), without systemd-sleep itself.
    let l = wait_leader(&lab).await;
    let m = lab.machine(&l).unwrap();
    m.exec_ok(
        &[
            "sh",
            "-c",
            "printf '[Unit]\\nDefaultDependencies=no\\nRequires=sleep.target\\nAfter=sleep.target\\n[Service]\\nType=oneshot\\nExecStart=/bin/true\\n' > /run/systemd/system/lab-sleep.service && systemctl daemon-reload",
        ],
        quick,
    )
    .unwrap();
    let goes_to_sleep = |says: &str| {
        let o = m.systemctl(&["start", "lab-sleep.service"], quick).unwrap();
        assert!(o.status.success(), "start lab-sleep.service: {o:?}");
        let said = journal(&lab, &l);
        assert!(said.contains(says), "{l}: {said}");
    };
    goes_to_sleep("before sleep: etcd leadership moved to");
    let after = wait_leader(&lab).await;
    assert_ne!(after, l, "{l} still leads after its sleep's hand-over");
    // On a member that does not lead, nothing to hand over.
    goes_to_sleep("before sleep: this member does not lead etcd; nothing to hand over");

    // Shutdown without the hand-over: a runtime drop-in (gone at the next
    // boot) empties its ExecStop on the leader.
    let l = wait_leader(&lab).await;
    lab.machine(&l)
        .unwrap()
        .exec_ok(
            &[
                "sh",
                "-c",
                "mkdir -p /run/systemd/system/fleet-role-handover-shutdown.service.d && printf '[Service]\\nExecStop=\\n' > /run/systemd/system/fleet-role-handover-shutdown.service.d/lab-off.conf && systemctl daemon-reload",
            ],
            quick,
        )
        .unwrap();
    let without = gap_over_poweroff(&mut lab, &l).await;
    assert!(
        !journal(&lab, &l).contains("before shutdown"),
        "the hand-over ran on {l} with its ExecStop emptied"
    );
    assert!(lab.boot(&l).unwrap());
    lab.wait_active(&l, "k3s", Duration::from_secs(180))
        .await
        .unwrap();

    // Shutdown with it: the leader (another host now, or the same one
    // back) hands leadership over before its k3s stops.
    let l2 = wait_leader(&lab).await;
    lab.wait_active(
        &l2,
        "fleet-role-handover-shutdown.service",
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    let with = gap_over_poweroff(&mut lab, &l2).await;
    let said = journal(&lab, &l2);
    assert!(
        said.contains("before shutdown: etcd leadership moved to"),
        "{l2}: {said}"
    );
    println!(
        "the longest write gap through another server while the etcd leader powers off: {} ms without the hand-over, {} ms with it",
        without.as_millis(),
        with.as_millis()
    );
    assert!(lab.boot(&l2).unwrap());
}
