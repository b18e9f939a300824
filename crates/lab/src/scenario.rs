//! The seed's scenario, with the controller's part done by hand through the
//! API: a Lease, a snapshot on a voter, a standby promoted (learner, then
//! voter), an old voter stepped down to etcd-only, its member removed through
//! k3s's annotation, and its finish as an agent, while a writer puts to etcd
//! at a steady rate. Used by `fleet-role-lab demo` and the lab's tests.

use crate::systemd_lab::SystemdLab;
use std::{
    fmt::Write as _,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use protocol::{
    Phase, Report,
    names::{
        K3S_CONTROL_PLANE_LABEL, K3S_ETCD_NODE_ADDRESS, K3S_ETCD_NODE_NAME, K3S_ETCD_REMOVE,
        K3S_ETCD_REMOVED_NODE_NAME, K3S_ETCD_ROLE_LABEL, K3S_MASTER_LABEL,
    },
    report::ReportStep,
};
use serde_json::json;

pub use crate::hand_controller::{Ask, Hand};
use crate::{etcd_gw, history::History, lab_setup, spawn, spec::LabSpec};

/// A steady writer to etcd through one voter: every put must succeed.
///
/// A put is given [`PUT_BOUND`], longer than etcd's own request timeout,
/// so that a failed put is one etcd failed (or one with no answer at all),
/// never a slow one: how long a put took is a figure the report prints
/// ([`WriterStats::longest`]), not a promise a loaded machine could break.
pub struct Writer {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    longest_ms: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<(Vec<String>, History)>,
    member: etcd_gw::Endpoint,
    started: Instant,
    clock: clock::Clock,
}

/// How long the writer waits for one put's answer: etcd fails a write it
/// could not commit after its request timeout (5 s plus two election
/// timeouts, 7 s by default), so 30 s leaves the verdict to etcd.
pub const PUT_BOUND: Duration = Duration::from_secs(30);

/// What the writer saw.
#[derive(Debug, Clone)]
pub struct WriterStats {
    /// Puts that succeeded.
    pub ok: u64,
    /// Puts that failed.
    pub failed: u64,
    /// Puts per second.
    pub rate: f64,
    /// The first failures, if any.
    pub errors: Vec<String>,
    /// The longest a put took, answered or not (a figure: a starved
    /// member stalls puts without failing them).
    pub longest: Duration,
    /// What the read of every key at the end broke of the history
    /// (`history.rs`: an acknowledged write lost, a value never written).
    pub history_broken: Vec<String>,
}

impl Writer {
    /// Puts a key every `every` through `member`.
    pub fn start(member: etcd_gw::Endpoint, every: Duration) -> Writer {
        let endpoint = member.clone();
        let clock = clock::Clock::system();
        let stop = Arc::new(AtomicBool::new(false));
        let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let longest_ms = Arc::new(AtomicU64::new(0));
        let (s, o, f, l) = (stop.clone(), ok.clone(), failed.clone(), longest_ms.clone());
        let timer = clock.clone();
        let task = tokio::spawn(async move {
            let mut errors = vec![];
            let mut history = History::default();
            let mut tick = tokio::time::interval(every);
            let mut n = 0u64;
            while !s.load(Ordering::Relaxed) {
                tick.tick().await;
                n += 1;
                let asked = timer.now();
                let key = format!("/lab/writer/{}", n % 100);
                let put = etcd_gw::put_within(&member, &key, &n.to_string(), PUT_BOUND).await;
                let took = u64::try_from(timer.since(asked).as_millis()).unwrap_or(u64::MAX);
                l.fetch_max(took, Ordering::Relaxed);
                history.put(&key, n, put.is_ok());
                match put {
                    Ok(()) => {
                        o.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        f.fetch_add(1, Ordering::Relaxed);
                        if errors.len() < 5 {
                            errors.push(format!("{e:#}"));
                        }
                    }
                }
            }
            (errors, history)
        });
        Writer {
            stop,
            ok,
            failed,
            longest_ms,
            task,
            member: endpoint,
            started: clock.now(),
            clock,
        }
    }

    /// Stops it and tells what it saw.
    pub async fn finish(self) -> WriterStats {
        self.stop.store(true, Ordering::Relaxed);
        let mut history_broken = Vec::new();
        let (errors, history) = match self.task.await {
            Ok(done) => done,
            // No history to check is itself a broken one.
            Err(e) => {
                history_broken.push(format!("the writer's task ended: {e}"));
                Default::default()
            }
        };
        let ok = self.ok.load(Ordering::Relaxed);
        // Every key read back through the same member (a linearizable
        // read) and checked against what was put.
        let mut read = std::collections::BTreeMap::new();
        for key in history.keys() {
            match etcd_gw::get(&self.member, &key).await {
                Ok(v) => {
                    read.insert(key, v);
                }
                Err(e) => history_broken.push(format!("{key} could not be read back: {e:#}")),
            }
        }
        history_broken.extend(history.check(&read));
        WriterStats {
            ok,
            failed: self.failed.load(Ordering::Relaxed),
            rate: ok as f64 / self.clock.since(self.started).as_secs_f64(),
            errors,
            longest: Duration::from_millis(self.longest_ms.load(Ordering::Relaxed)),
            history_broken,
        }
    }
}

/// The members as etcd lists them, through any live member.
pub async fn members(spec: &LabSpec) -> anyhow::Result<Vec<etcd_gw::Member>> {
    members_within(
        spec,
        etcd_gw::Endpoint::bound_for("/v3/cluster/member/list"),
    )
    .await
}

/// [`members`], giving each host at most `per_host` to answer (a watcher
/// that looks every second asks a cut-off host for less).
pub async fn members_within(
    spec: &LabSpec,
    per_host: Duration,
) -> anyhow::Result<Vec<etcd_gw::Member>> {
    for h in &spec.hosts {
        let ep = spec.etcd(h.ip)?;
        if let Ok(Ok((_, m))) = tokio::time::timeout(per_host, etcd_gw::member_list(&ep)).await {
            return Ok(m);
        }
    }
    bail!("no etcd member answers")
}

/// Whether a lab answers (its spec exists and etcd has a voter).
pub async fn healthy(spec: &LabSpec) -> bool {
    members(spec)
        .await
        .is_ok_and(|m| m.iter().any(|x| !x.is_learner))
}

/// What the scenario measured and checked.
#[derive(Debug, Clone)]
pub struct SwapReport {
    /// The swap id.
    pub swap: String,
    /// Each step with its duration.
    pub steps: Vec<(String, Duration)>,
    /// The whole swap's time.
    pub total: Duration,
    /// The writer's figures.
    pub writer: WriterStats,
    /// The snapshot file on the voter.
    pub snapshot: String,
    /// The voters at the end.
    pub voters: Vec<String>,
    /// Learners at the end.
    pub learners: usize,
    /// The most k3s units active at once, per host.
    pub max_active: Vec<(String, usize)>,
    /// Whether the outgoing host's node password is unchanged.
    pub password_unchanged: bool,
    /// Whether its address is unchanged.
    pub address_unchanged: bool,
    /// Whether its datastore copy is in place.
    pub db_demoted: bool,
    /// The most shims seen on the outgoing host after its step-down, while
    /// it served etcd only (over [`SHIM_WATCH`] at most).
    pub shims_after_step_down: usize,
    /// Shims running on the outgoing host before the swap (some, or "none
    /// after" proves nothing).
    pub shims_before: usize,
}

impl SwapReport {
    /// The seed's promises of a finished swap of `out` for `incoming` that
    /// this one broke (none: all kept): every write succeeded (and more than
    /// 50 were made), every key read back at the end as its history allows
    /// (no acknowledged write lost, no value never written), three voters
    /// with `incoming` in and `out` out, no learner, the old voter's node
    /// password and address unchanged, its
    /// datastore moved aside, no shim left after its step-down (and some
    /// before), and never two
    /// k3s units running at once on any host.
    pub fn broken_promises(&self, out: &str, incoming: &str) -> Vec<String> {
        let mut broken = vec![];
        let mut check = |kept: bool, what: String| {
            if !kept {
                broken.push(what);
            }
        };
        check(
            self.writer.ok > 50,
            format!("the writer wrote only {} times", self.writer.ok),
        );
        check(
            self.writer.failed == 0,
            format!("writes failed: {:?}", self.writer.errors),
        );
        check(
            self.writer.history_broken.is_empty(),
            format!(
                "the writes' history broken: {:?}",
                self.writer.history_broken
            ),
        );
        check(self.voters.len() == 3, format!("voters: {:?}", self.voters));
        check(self.learners == 0, format!("{} learners", self.learners));
        check(
            self.voters
                .iter()
                .any(|v| v.starts_with(&format!("{incoming}-"))),
            format!("{incoming} is not a voter: {:?}", self.voters),
        );
        check(
            !self
                .voters
                .iter()
                .any(|v| v.starts_with(&format!("{out}-"))),
            format!("{out} is still a voter: {:?}", self.voters),
        );
        check(
            self.password_unchanged,
            format!("{out}'s node password changed"),
        );
        check(self.address_unchanged, format!("{out}'s address changed"));
        check(
            self.db_demoted,
            format!("{out}'s datastore is not moved aside"),
        );
        check(
            self.shims_before > 0,
            format!("no pod shim ran on {out} before the swap: none after proves nothing"),
        );
        check(
            self.shims_after_step_down == 0,
            format!("{} shims after the step-down", self.shims_after_step_down),
        );
        check(
            self.max_active.iter().all(|(_, n)| *n <= 1),
            format!("k3s units running together: {:?}", self.max_active),
        );
        broken
    }

    /// A summary for a person.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "swap {} done in {:.1}s",
            self.swap,
            self.total.as_secs_f64()
        )];
        for (s, d) in &self.steps {
            out.push(format!("  {s}: {:.1}s", d.as_secs_f64()));
        }
        let mut w = format!(
            "writer: {} puts, {} failed, {:.1}/s, the longest put {} ms",
            self.writer.ok,
            self.writer.failed,
            self.writer.rate,
            self.writer.longest.as_millis()
        );
        if self.writer.history_broken.is_empty() {
            w.push_str("; every key read back as written");
        }
        if !self.writer.errors.is_empty() {
            let _ = write!(w, " (first error: {})", self.writer.errors[0]);
        }
        out.push(w);
        out.push(format!("snapshot: {}", self.snapshot));
        out.push(format!(
            "voters now: {} (learners: {})",
            self.voters.join(", "),
            self.learners
        ));
        out.push(format!(
            "old voter: node password unchanged: {}, address unchanged: {}, db.demoted in place: {}, shims before: {}, after step-down: {}",
            self.password_unchanged, self.address_unchanged, self.db_demoted, self.shims_before, self.shims_after_step_down
        ));
        let most: Vec<String> = self
            .max_active
            .iter()
            .map(|(h, n)| format!("{h}={n}"))
            .collect();
        out.push(format!("most k3s units active at once: {}", most.join(" ")));
        out
    }
}

/// Swaps the voter `out` for the standby `incoming`, doing the controller's
/// part by hand, and checks the seed's promises on the way.
pub async fn swap_by_hand(
    hosts: &SystemdLab,
    out: &str,
    incoming: &str,
    say: &dyn Fn(&str),
) -> anyhow::Result<SwapReport> {
    let clock = clock::Clock::system();
    let spec = hosts.spec();
    let hand = Hand::new(spec)?;
    let n = &hand.names;
    let stay = a_voter_that_stays(spec, out)?;
    let out_root = spec.root(out);
    let swap = format!("swap-{}", clock.unix_secs());
    let t0 = clock.now();
    let mut steps = vec![];
    let mut mark = clock.now();
    let mut step_done = |name: &str, steps: &mut Vec<(String, Duration)>| {
        steps.push((name.to_string(), clock.since(mark)));
        mark = clock.now();
    };
    let before = Before::read(hosts, &hand, out).await?;
    say(&format!(
        "writer: a put every 50 ms through {} (a voter that stays)",
        stay.name
    ));
    let writer = Writer::start(spec.etcd(stay.ip)?, Duration::from_millis(50));

    say(&format!("1. take the regrade Lease for {swap}"));
    hand.hold_lease(&swap, out, incoming, &n.controller_identity)
        .await?;
    let renewing = Arc::new(AtomicBool::new(true));
    let renewer = {
        let r = renewing.clone();
        let h = Hand::new(spec)?;
        tokio::spawn(async move {
            while r.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_secs(5)).await;
                let _ = h.renew_lease().await;
            }
        })
    };
    let progress = |r: &Report| {
        let detail = r
            .detail
            .map(|d| {
                format!(
                    " ({})",
                    serde_json::to_value(d)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                )
            })
            .unwrap_or_default();
        say(&format!(
            "   report: {} {}{}",
            r.step.as_str(),
            serde_json::to_value(r.phase)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            detail
        ));
    };
    let result = async {
        say(&format!("2. ask {} for a snapshot named for the swap", stay.name));
        hand.ask(&stay.name, Ask::Snapshot { swap: &swap }).await?;
        let r = hand.wait_step(&stay.name, &swap, ReportStep::Snapshot, Duration::from_secs(60), &progress).await?;
        let snapshot = r.snapshot_file.clone().unwrap_or_default();
        let size = std::fs::metadata(spec.root(&stay.name).join(snapshot.trim_start_matches('/'))).map(|m| m.len()).unwrap_or(0);
        if size == 0 {
            bail!("the snapshot file {snapshot} is missing or empty");
        }
        say(&format!("   snapshot {snapshot} ({size} bytes)"));
        step_done("snapshot", &mut steps);

        say(&format!("3. promote {incoming}, joining {}", stay.name));
        hand.ask(
            incoming,
            Ask::Promote {
                swap: &swap,
                join: &stay.name,
            },
        )
        .await?;
        hand.wait_step(incoming, &swap, ReportStep::Promote, Duration::from_secs(180), &progress).await?;
        step_done("promote (learner, then voter)", &mut steps);

        say(&format!("4. cordon {out} and step it down to etcd-only"));
        hand.ask(
            out,
            Ask::StepDown {
                swap: &swap,
                cordon: true,
            },
        )
        .await?;
        hand.wait_step(out, &swap, ReportStep::StepDown, Duration::from_secs(180), &progress).await?;
        let shims = shims_at_etcd_only(hosts, &hand, out).await;
        say(&format!(
            "   {out} serves etcd only; most pod shims seen over {} s: {shims}",
            SHIM_WATCH.as_secs()
        ));
        step_done("step-down (etcd-only)", &mut steps);

        say(&format!("5. remove {out}'s member through k3s's annotation (its actuator paused meanwhile)"));
        // Paused so the finish meets k3s as it is once its member is gone:
        // k3s does not exit on removal (pkg/etcd/etcd.go), it writes the
        // tombstone and stays up until something stops it.
        hosts.systemctl(out, &["stop", "fleet-role-actuator"])?;
        hand.patch_node(out, json!({"metadata": {"annotations": { K3S_ETCD_REMOVE: "true" }}})).await?;
        let start = clock.now();
        loop {
            let node = hand.node(out).await?;
            if node.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(K3S_ETCD_REMOVED_NODE_NAME)) {
                break;
            }
            if clock.since(start) > Duration::from_secs(120) {
                bail!("k3s did not remove the member of {out}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        say("   k3s removed the member (removed-node-name set)");
        let tombstone = host::HostPaths::new(&out_root).tombstone();
        let start = clock.now();
        while !tombstone.exists() {
            if clock.since(start) > Duration::from_secs(60) {
                bail!("k3s on {out} wrote no tombstone after its removal");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Two heartbeats later, k3s still runs: the finish must stop it.
        tokio::time::sleep(spec.heartbeat() * 2).await;
        if !hosts.is_active(out, "k3s")? {
            bail!("k3s on {out} exited on its removal; k3s keeps running");
        }
        say(&format!("   k3s on {out} wrote its tombstone and keeps running; its actuator resumes"));
        hosts.systemctl(out, &["start", "fleet-role-actuator"])?;
        step_done("member removal", &mut steps);

        say(&format!("6. {out} finishes as an agent by itself"));
        let fin = hand.wait_step(out, &swap, ReportStep::Finish, Duration::from_secs(180), &progress).await?;
        let start = clock.now();
        loop {
            let node = hand.node(out).await?;
            let lease = hand
                .apis
                .any(|c| { let o = out.to_string(); async move { Api::<Lease>::namespaced(c, "kube-node-lease").get(&o).await } })
                .await?;
            let renewed = lease.spec.and_then(|s| s.renew_time).is_some_and(|t| t.0.as_second() > fin.started_at);
            if kubeview::condition_true(&node, "Ready") && renewed {
                break;
            }
            if clock.since(start) > Duration::from_secs(120) {
                bail!("{out} did not come back Ready as an agent");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        say(&format!("   {out} is Ready as an agent, its node Lease renewed since the finish began"));
        step_done("finish (agent Ready)", &mut steps);

        say(&format!("7. clear {out}'s server labels and k3s annotations, uncordon, clear the swap's annotations"));
        hand.patch_node(
            out,
            json!({"spec": {"unschedulable": null}, "metadata": {
                "labels": { K3S_CONTROL_PLANE_LABEL: null, K3S_MASTER_LABEL: null, K3S_ETCD_ROLE_LABEL: null },
                "annotations": { K3S_ETCD_NODE_NAME: null, K3S_ETCD_NODE_ADDRESS: null, K3S_ETCD_REMOVED_NODE_NAME: null, K3S_ETCD_REMOVE: null,
                                 n.role_swap(): null, n.role_step(): null },
            }}),
        )
        .await?;
        hand.patch_node(incoming, json!({"metadata": {"annotations": { n.role_swap(): null, n.role_step(): null, n.role_join_node(): null }}}))
            .await?;
        hand.patch_node(&stay.name, json!({"metadata": {"annotations": { n.snapshot_request(): null }}})).await?;
        step_done("clean-up", &mut steps);
        Ok::<_, anyhow::Error>((snapshot, shims))
    }
    .await;
    renewing.store(false, Ordering::Relaxed);
    renewer.abort();
    let _ = hand.release_lease().await;
    let writer = writer.finish().await;
    let (snapshot, shims) = result?;
    say("8. the Lease is released");
    conclude(
        hosts, &hand, out, before, swap, steps, t0, writer, snapshot, shims,
    )
    .await
}

/// How long a swap watches the outgoing host's pod shims once it serves
/// etcd only: a kubelet restarts a killed pod within seconds.
pub const SHIM_WATCH: Duration = Duration::from_secs(10);

/// The most pod shims seen on `out` over [`SHIM_WATCH`] from now, sampled
/// while its report still says step-down done: a host that went on to its
/// finish runs its pods again as an agent, rightly. A shim the kubelet
/// brings back after the step-down killed it counts.
pub async fn shims_at_etcd_only(hosts: &SystemdLab, hand: &Hand, out: &str) -> usize {
    let clock = clock::Clock::system();
    let at_etcd_only = |r: anyhow::Result<Option<Report>>| matches!(r, Ok(Some(r)) if r.step == ReportStep::StepDown && r.phase == Phase::Done);
    let start = clock.now();
    let mut most = 0;
    while clock.since(start) < SHIM_WATCH {
        if !at_etcd_only(hand.report(out).await) {
            break;
        }
        // A host that cannot be asked counts as the figure no test accepts.
        let n = hosts.shims(out).unwrap_or(usize::MAX);
        // Counted only if the host was at etcd-only on both sides of the count.
        if !at_etcd_only(hand.report(out).await) {
            break;
        }
        most = most.max(n);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    most
}

/// What is compared on the outgoing host before and after a swap.
pub struct Before {
    password: Vec<u8>,
    address: Option<String>,
    shims: usize,
}

impl Before {
    /// Reads it.
    pub async fn read(hosts: &SystemdLab, hand: &Hand, out: &str) -> anyhow::Result<Before> {
        Ok(Before {
            password: std::fs::read(hosts.spec().root(out).join("etc/rancher/node/password"))?,
            address: kubeview::internal_ip(&hand.node(out).await?),
            shims: hosts.shims(out)?,
        })
    }
}

#[allow(clippy::too_many_arguments)]
async fn conclude(
    hosts: &SystemdLab,
    hand: &Hand,
    out: &str,
    before: Before,
    swap: String,
    steps: Vec<(String, Duration)>,
    t0: Instant,
    writer: WriterStats,
    snapshot: String,
    shims: usize,
) -> anyhow::Result<SwapReport> {
    let clock = clock::Clock::system();
    let spec = hosts.spec();
    let out_root = spec.root(out);
    let out_ip = spec
        .host(out)
        .context("no such outgoing host")?
        .ip
        .to_string();
    let members = members(spec).await?;
    let voters: Vec<String> = members
        .iter()
        .filter(|m| !m.is_learner)
        .map(|m| m.name.clone())
        .collect();
    let address_after = kubeview::internal_ip(&hand.node(out).await?);
    let mut max_active = vec![];
    for h in &spec.hosts {
        max_active.push((h.name.clone(), hosts.most_k3s_at_once(&h.name)?));
    }
    Ok(SwapReport {
        swap,
        steps,
        total: clock.since(t0),
        writer,
        snapshot,
        voters,
        learners: members.iter().filter(|m| m.is_learner).count(),
        max_active,
        password_unchanged: std::fs::read(out_root.join("etc/rancher/node/password"))?
            == before.password,
        address_unchanged: address_after == before.address && address_after == Some(out_ip),
        db_demoted: out_root
            .join("var/lib/rancher/k3s/server/db.demoted")
            .is_dir(),
        shims_after_step_down: shims,
        shims_before: before.shims,
    })
}

/// A host other than `out` whose role file names the server now (an
/// earlier swap may have moved the lab's first servers): the writer's and
/// the controller's way in.
fn a_voter_that_stays(spec: &LabSpec, out: &str) -> anyhow::Result<crate::spec::HostSpec> {
    spec.hosts
        .iter()
        .find(|h| {
            h.name != out
                && host::role::read(&host::HostPaths::new(spec.root(&h.name)))
                    .ok()
                    .flatten()
                    == Some(protocol::Role::Server)
        })
        .cloned()
        .context("a voter that stays")
}

/// Swaps the voter `out` for the standby `incoming` with the controller,
/// `fleet-role swap`, run with the lab's kubeconfig, while a writer puts to
/// etcd; its output is passed to `say` line by line.
pub async fn swap_with_controller(
    hosts: &SystemdLab,
    fleet_role: &std::path::Path,
    out: &str,
    incoming: &str,
    say: &dyn Fn(&str),
) -> anyhow::Result<SwapReport> {
    let clock = clock::Clock::system();
    let spec = hosts.spec();
    let hand = Hand::new(spec)?;
    let stay = a_voter_that_stays(spec, out)?;
    let before = Before::read(hosts, &hand, out).await?;
    say(&format!(
        "writer: a put every 50 ms through {} (a voter that stays)",
        stay.name
    ));
    let writer = Writer::start(spec.etcd(stay.ip)?, Duration::from_millis(50));
    // Count the outgoing host's pod shims as soon as it reports etcd-only,
    // and for as long as it stays there (within `SHIM_WATCH`).
    let watch_hand = Hand::new(spec)?;
    let watch = async {
        loop {
            if let Ok(Some(r)) = watch_hand.report(out).await
                && r.step == ReportStep::StepDown
                && r.phase == Phase::Done
            {
                return anyhow::Ok(shims_at_etcd_only(hosts, &watch_hand, out).await);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let t0 = clock.now();
    // The controller talks to a server that stays (the first server's API
    // goes with it when it is the one swapped out).
    let kubeconfig = lab_setup::kubeconfig_for(spec, &stay.name)?;
    let spawn::Running {
        mut child,
        mut lines,
        log: errors,
    } = spawn::fleet_role(
        fleet_role,
        &kubeconfig,
        &["swap", "--out", out, "--in", incoming, "--timeout", "3m"],
    )?;
    let reading = async {
        while let Some(line) = lines.next_line().await? {
            say(&format!("   fleet-role: {line}"));
        }
        anyhow::Ok(())
    };
    tokio::pin!(watch, reading);
    let mut shims = None;
    loop {
        tokio::select! {
            r = &mut reading => { r?; break; }
            n = &mut watch, if shims.is_none() => shims = Some(n?),
        }
    }
    let status = child.wait().await?;
    let err = errors.await.unwrap_or_default();
    let writer = writer.finish().await;
    if !status.success() {
        bail!("fleet-role swap failed ({status}): {}", err.trim());
    }
    let report = hand
        .report(out)
        .await?
        .context("no report from the outgoing host")?;
    let swap = report.swap.map(|s| s.to_string()).unwrap_or_default();
    let mut snapshot = String::new();
    for h in &spec.hosts {
        if let Ok(Some(r)) = hand.report(&h.name).await
            && let Some(f) = r
                .snapshot_file
                .filter(|_| r.swap.as_ref().is_some_and(|s| s.as_str() == swap))
        {
            snapshot = f;
        }
    }
    let steps = vec![("fleet-role swap".to_string(), clock.since(t0))];
    // Never seen at etcd-only: a figure no test accepts.
    let shims = shims.unwrap_or(usize::MAX);
    conclude(
        hosts, &hand, out, before, swap, steps, t0, writer, snapshot, shims,
    )
    .await
}
