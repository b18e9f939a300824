//! The campaign itself: a lab of three servers and two agents, two `run`
//! instances, clients reading and writing through the members, and the
//! schedule's swaps, each driven by `fleet-role swap` while its faults fire;
//! then the end checks and the summary.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use serde_json::Value;

use super::{
    clients::Clients,
    clocks,
    controllers::{FleetRole, Runs},
    end, faults, linear,
    schedule::{self, Budget, Fault, FaultKind, Schedule},
    summary::{Ending, FaultTally, Summary, SwapLine},
    verdict,
    watch::{self, Watch},
};
use crate::{
    etcd_gw, lab_setup,
    spec::LabSpec,
    systemd_lab::{self, SystemdLab},
};

/// How to run a campaign.
#[derive(Debug, Clone)]
pub struct Options {
    /// The campaign's directory (its lab under `lab/`, its logs, schedule
    /// and summary beside it); emptied first.
    pub dir: PathBuf,
    /// The schedule to run.
    pub schedule: Schedule,
    /// The lab's programs.
    pub bins: lab_setup::Bins,
    /// `fleet-role`.
    pub fleet_role: PathBuf,
    /// A planted defect every host's actuator carries from the start (one
    /// it carries: `Plant::in_the_actuator`); none in a real campaign.
    pub plant: Option<plants::Plant>,
}

/// The file on a host that plants a defect in its actuator.
const PLANT_FILE: &str = "var/lib/rancher/k3s/fleet-role.plant";

/// The longest one swap may take, its resumes and faults included, before
/// it counts as unfinished.
const SWAP_BOUND: Duration = Duration::from_secs(20 * 60);
/// The longest the fleet may take to be clean again (`status` exits 0)
/// once a swap ended and its faults healed.
const CLEAN_BOUND: Duration = Duration::from_secs(6 * 60);
/// How often a stopped swap is resumed before it is aborted.
const RESUMES: u32 = 3;
/// The liveness bound: a swap that did not end done under its faults must
/// end done within this, tried again with no fault active once they all
/// healed and the fleet is clean (each try is bounded by [`SWAP_BOUND`]
/// too, so the last try may end past it).
const LIVENESS_BOUND: Duration = Duration::from_secs(10 * 60);
/// The pause between two tries with no fault (a refusal may stand for a
/// moment: a host back from a reboot is not a healthy standby for
/// `standby_min_healthy_secs`).
const RETRY_PAUSE: Duration = Duration::from_secs(15);
/// The bound of one `fleet-role status` or `abort`.
const COMMAND_BOUND: Duration = Duration::from_secs(60);
/// The longest a member may take to serve again after a fault healed.
const MEMBER_BACK: Duration = Duration::from_secs(180);

/// The campaign's settings for `fleet-role`: short Leases, so a killed
/// controller's swap is taken up within seconds; a grace longer than any
/// fault, so `run` only takes up swaps and never replaces a voter by
/// itself; every host's API to fail over to.
fn settings(spec: &LabSpec) -> String {
    format!(
        "lease_duration_secs = 20\ngrace_period_secs = 3600\nsettle_secs = 5\nstandby_min_healthy_secs = 10\nretry_max = 50\nretry_backoff_secs = 5\npoll_millis = 500\nleader_lease_duration_secs = 15\napi_servers = {}\n",
        spec.all_api_urls_toml()
    )
}

/// Everything the swaps and their faults share.
struct Shared {
    lab: tokio::sync::Mutex<SystemdLab>,
    spec: LabSpec,
    fleet_role: FleetRole,
    /// Every host's admin kubeconfig: a command tries them in turn.
    kubeconfigs: BTreeMap<String, PathBuf>,
    runs: tokio::sync::Mutex<Runs>,
    budget: Arc<Mutex<Budget>>,
    /// Hosts in a fault now.
    busy: Mutex<BTreeSet<String>>,
    /// Hosts a fault took down (or cut off) during the current swap.
    downed: Mutex<BTreeSet<String>>,
    /// The running `fleet-role swap`'s pid.
    swap_pid: Mutex<Option<u32>>,
    tallies: Mutex<BTreeMap<FaultKind, FaultTally>>,
    violations: Mutex<Vec<String>>,
    /// Set at the first violation, the campaign's or the watcher's.
    tripped: Arc<AtomicBool>,
    /// A campaign over a planted defect stops at its first violation: the
    /// defect is shown, and what follows from it is not the question.
    stop_early: bool,
    say: Box<dyn Fn(&str) + Send + Sync>,
}

impl Shared {
    fn tally(&self, kind: FaultKind, f: impl FnOnce(&mut FaultTally)) {
        f(self
            .tallies
            .lock()
            .expect("tallies")
            .entry(kind)
            .or_default());
    }

    fn violation(&self, v: String) {
        (self.say)(&format!("VIOLATION: {v}"));
        self.violations.lock().expect("violations").push(v);
        self.tripped.store(true, Ordering::Relaxed);
    }

    /// Whether the campaign stops here: a planted defect was caught.
    fn stopping(&self) -> bool {
        self.stop_early && self.tripped.load(Ordering::Relaxed)
    }
}

/// Runs a campaign: its summary (violations included; an error only when
/// the lab could not be brought up or checked at all).
pub async fn run(
    o: Options,
    say: impl Fn(&str) + Send + Sync + 'static,
) -> anyhow::Result<Summary> {
    let clock = clock::Clock::system();
    let t0 = clock.now();
    // A host's `k3s etcd-snapshot` finds its lab by path, and every host
    // has a /tmp of its own: refused before anything is removed.
    if std::path::absolute(&o.dir)?.starts_with("/tmp") {
        anyhow::bail!(
            "{}: a lab under /tmp is not seen from its hosts (they have a /tmp of their own); use another --dir",
            o.dir.display()
        );
    }
    if let Some(p) = o.plant.filter(|p| !p.in_the_actuator()) {
        anyhow::bail!(
            "{} is a defect of the decisions, which no host's actuator carries",
            p.name()
        );
    }
    let _ = std::fs::remove_dir_all(&o.dir);
    std::fs::create_dir_all(&o.dir)?;
    let dir = std::fs::canonicalize(&o.dir)?;
    let schedule_file = dir.join("schedule.json");
    std::fs::write(&schedule_file, serde_json::to_string_pretty(&o.schedule)?)?;
    say(&format!(
        "chaos: seed {}, {} swaps, {} faults; schedule in {}",
        o.schedule.seed,
        o.schedule.swaps.len(),
        o.schedule.faults(),
        schedule_file.display()
    ));
    let lab = SystemdLab::up(
        systemd_lab::Options {
            dir: dir.join("lab"),
            servers: 3,
            agents: 2,
            docker_agents: 0,
            timings: Default::default(),
            bins: o.bins.clone(),
        },
        &say,
    )
    .await?;
    let spec = lab.spec.clone();
    if let Some(p) = o.plant.map(plants::Plant::name) {
        say(&format!("planting the defect {p} in every host's actuator"));
        for h in &spec.hosts {
            let file = spec.root(&h.name).join(PLANT_FILE);
            if let Some(d) = file.parent() {
                std::fs::create_dir_all(d)?;
            }
            std::fs::write(file, format!("{p}\n"))?;
        }
    }
    say("libfaketime into every actuator and controller, their clocks true");
    clocks::prepare_hosts(&lab).await?;
    let controller_clock = dir.join("controller-clock");
    clocks::set(&controller_clock, 0)?;
    let config = dir.join("fleet-role.toml");
    std::fs::write(&config, settings(&spec))?;
    let fleet_role = FleetRole {
        program: o.fleet_role.clone(),
        config,
        logs: dir.clone(),
        clock: Some(controller_clock),
    };
    // Written once: a file rewritten while a `fleet-role` starts could be
    // read half-written.
    let kubeconfigs: BTreeMap<String, PathBuf> = spec
        .hosts
        .iter()
        .map(|h| Ok((h.name.clone(), lab_setup::kubeconfig_for(&spec, &h.name)?)))
        .collect::<anyhow::Result<_>>()?;
    let runs = Runs::start(
        fleet_role.clone(),
        vec![
            kubeconfigs["server-1"].clone(),
            kubeconfigs["server-2"].clone(),
        ],
    )?;
    let budget = Arc::new(Mutex::new(Budget::default()));
    let shared = Arc::new(Shared {
        lab: tokio::sync::Mutex::new(lab),
        spec: spec.clone(),
        fleet_role,
        kubeconfigs,
        runs: tokio::sync::Mutex::new(runs),
        budget: budget.clone(),
        busy: Mutex::new(BTreeSet::new()),
        downed: Mutex::new(BTreeSet::new()),
        swap_pid: Mutex::new(None),
        tallies: Mutex::new(BTreeMap::new()),
        violations: Mutex::new(Vec::new()),
        tripped: Arc::new(AtomicBool::new(false)),
        stop_early: o.plant.is_some(),
        say: Box::new(say),
    });
    let say = |l: &str| (shared.say)(l);
    lab_setup::wait_for(
        "a `fleet-role run` instance to lead",
        Duration::from_secs(120),
        || async { shared.runs.lock().await.any_leading() },
    )
    .await?;
    let endpoints: Vec<etcd_gw::Endpoint> = spec
        .hosts
        .iter()
        .map(|h| spec.etcd(h.ip))
        .collect::<anyhow::Result<_>>()?;
    let clients = Clients::start(
        &format!("/chaos/{}", o.schedule.seed),
        endpoints.clone(),
        3,
        Duration::from_millis(100),
        o.schedule.seed,
    );
    let watcher = Watch::start(
        spec.clone(),
        budget,
        spec.hosts
            .iter()
            .filter(|h| h.role == protocol::Role::Server)
            .count(),
        shared.tripped.clone(),
    )?;
    let mut swaps = Vec::new();
    for (n, plan) in o.schedule.swaps.iter().enumerate() {
        if shared.stopping() {
            break;
        }
        if let Err(e) = wait_clean(&shared, CLEAN_BOUND).await {
            shared.violation(format!("before swap {}: {e:#}", n + 1));
        }
        let (voters, standbys) = fleet(&spec).await;
        let Some((out, incoming)) = schedule::pick_pair(plan.pick, &voters, &standbys) else {
            shared.violation(format!(
                "swap {}: no pair to swap ({voters:?}, {standbys:?})",
                n + 1
            ));
            swaps.push(SwapLine {
                out: String::new(),
                incoming: String::new(),
                ending: Ending::Unfinished,
                resumes: 0,
                secs: 0,
                retried: None,
            });
            continue;
        };
        say(&format!("swap {}: {out} -> {incoming}", n + 1));
        let mut line = one_swap(
            &shared,
            n + 1,
            &out,
            &incoming,
            &plan.faults,
            &voters,
            &standbys,
        )
        .await;
        say(&format!(
            "swap {}: {} in {} s ({} resumes)",
            n + 1,
            line.ending.name(),
            line.secs,
            line.resumes
        ));
        if shared.stopping() {
            say("a violation was found over the planted defect: the campaign stops here");
            swaps.push(line);
            break;
        }
        match line.ending {
            Ending::Done => check_done(&shared, n + 1, &out, &incoming, voters.len()).await,
            Ending::Unfinished => shared.violation(format!(
                "swap {} ({out} -> {incoming}) was not over within {} s",
                n + 1,
                SWAP_BOUND.as_secs()
            )),
            Ending::Refused | Ending::WoundDown => {
                line.retried = Some(until_done(&shared, n + 1, plan.pick, line.ending).await);
            }
        }
        swaps.push(line);
    }
    if !shared.stopping()
        && let Err(e) = wait_clean(&shared, CLEAN_BOUND).await
    {
        shared.violation(format!("after the last swap: {e:#}"));
    }
    // Stop the clients and check their history.
    let history = clients.finish(&endpoints).await;
    let found = watcher.finish().await;
    for v in linear::check(&history).into_iter().chain(found.violations) {
        shared.violation(v);
    }
    if !shared.stopping() {
        say("the end checks: etcd's members, HashKV, reports, the k3s units");
        for v in end::checks(&shared.spec, &*shared.lab.lock().await).await {
            shared.violation(v);
        }
    }
    shared.runs.lock().await.stop().await;
    let summary = Summary {
        seed: o.schedule.seed,
        schedule: schedule_file.display().to_string(),
        swaps,
        faults: shared.tallies.lock().expect("tallies").clone(),
        ops: linear::counts(&history),
        longest_quorum_stall_ms: found.longest_stall_ms,
        violations: shared.violations.lock().expect("violations").clone(),
        secs: clock.since(t0).as_secs(),
    };
    std::fs::write(dir.join("summary.txt"), summary.lines().join("\n") + "\n")?;
    Ok(summary)
}

/// The voters and the standbys (hosts with no member), each by name.
async fn fleet(spec: &LabSpec) -> (Vec<String>, Vec<String>) {
    let members = watch::members(spec).await.unwrap_or_default();
    let voting: BTreeSet<&str> = members
        .iter()
        .filter(|m| !m.is_learner)
        .map(|m| watch::host_of(&m.name))
        .collect();
    let any: BTreeSet<&str> = members.iter().map(|m| watch::host_of(&m.name)).collect();
    let names = |f: &dyn Fn(&str) -> bool| -> Vec<String> {
        spec.hosts
            .iter()
            .map(|h| h.name.clone())
            .filter(|n| f(n))
            .collect()
    };
    (names(&|n| voting.contains(n)), names(&|n| !any.contains(n)))
}

/// `fleet-role status --output json` through the first host that answers:
/// its exit code and JSON.
async fn status(shared: &Shared) -> Option<(i32, Value)> {
    // In the lab's order: servers first (a host with no API answers at once).
    for k in shared
        .spec
        .hosts
        .iter()
        .filter_map(|h| shared.kubeconfigs.get(&h.name))
    {
        let (code, out) = shared
            .fleet_role
            .output(k, &["status", "--output", "json"], COMMAND_BOUND)
            .await;
        if let (Some(c @ (0 | 5)), Ok(v)) = (code, serde_json::from_str::<Value>(&out)) {
            return Some((c, v));
        }
    }
    None
}

/// Waits until `status` exits 0 (nothing degraded, no swap under way);
/// the degradations seen last when it does not within `bound`.
async fn wait_clean(shared: &Shared, bound: Duration) -> anyhow::Result<()> {
    let clock = clock::Clock::system();
    let start = clock.now();
    let mut last = String::from("no status answered");
    while clock.since(start) < bound {
        match status(shared).await {
            Some((0, v)) if v["lease"]["swap"].is_null() => return Ok(()),
            Some((_, v)) => last = format!("{} {}", v["degraded"], v["lease"]["swap"]),
            None => {}
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    anyhow::bail!(
        "the fleet was not clean within {} s: {last}",
        bound.as_secs()
    )
}

/// The Lease's last ending, as `(swap id, outcome, kind, warning)`.
fn last_swap(v: &Value) -> Option<(String, String, String, String)> {
    let l = &v["lease"]["lastSwap"];
    let s = |x: &Value| x.as_str().unwrap_or_default().to_string();
    (!l.is_null()).then(|| {
        (
            s(&l["swap"]),
            s(&l["outcome"]["outcome"]),
            s(&l["outcome"]["kind"]),
            s(&l["outcome"]["warning"]),
        )
    })
}

/// Drives one swap with its faults to its end.
async fn one_swap(
    shared: &Arc<Shared>,
    n: usize,
    out: &str,
    incoming: &str,
    plan: &[Fault],
    voters: &[String],
    standbys: &[String],
) -> SwapLine {
    let clock = clock::Clock::system();
    let t0 = clock.now();
    let before = status(shared).await.and_then(|(_, v)| last_swap(&v));
    shared.downed.lock().expect("downed").clear();
    // The controller goes through a voter that stays.
    let through_host = voters.iter().find(|v| *v != out).cloned();
    let through = through_host
        .as_ref()
        .and_then(|v| shared.kubeconfigs.get(v).cloned());
    // The faults run beside the swap, each in its own task.
    let fault_tasks: Vec<_> = plan
        .iter()
        .cloned()
        .map(|f| {
            let shared = shared.clone();
            let target = match f.kind {
                // The API server the swap's controller goes through.
                FaultKind::ApiCut => through_host.clone(),
                _ => schedule::name_target(f.target, (out, incoming), voters, standbys),
            };
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(f.after_ms)).await;
                one_fault(&shared, &f, target).await;
            })
        })
        .collect();
    let mut line = SwapLine {
        out: out.into(),
        incoming: incoming.into(),
        ending: Ending::Unfinished,
        resumes: 0,
        secs: 0,
        retried: None,
    };
    let log = format!("swap-{n}.log");
    let args = ["swap", "--out", out, "--in", incoming, "--timeout", "10m"];
    let spawn = || {
        let k = through.clone()?;
        let child = shared.fleet_role.spawn(&k, &args, &log, |_| {}).ok()?;
        *shared.swap_pid.lock().expect("pid") = child.id();
        Some(child)
    };
    let mut child = spawn();
    let mut exit = None;
    while clock.since(t0) < SWAP_BOUND && !shared.stopping() {
        if let Some(c) = child.as_mut() {
            match c.try_wait() {
                Ok(Some(s)) => {
                    exit = s.code();
                    child = None;
                    *shared.swap_pid.lock().expect("pid") = None;
                }
                Ok(None) => {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    continue;
                }
                Err(_) => child = None,
            }
        }
        let Some((_, v)) = status(shared).await else {
            tokio::time::sleep(Duration::from_secs(2)).await;
            continue;
        };
        let lease = &v["lease"];
        if lease["held"].as_bool() == Some(true) {
            // A controller drives it (`run`, having taken it up), or a
            // dead one's Lease has yet to lapse.
            tokio::time::sleep(Duration::from_secs(2)).await;
            continue;
        }
        if !lease["stopped"].is_null() {
            if line.resumes < RESUMES {
                line.resumes += 1;
                (shared.say)(&format!("swap {n}: stopped; resumed ({})", line.resumes));
                child = spawn();
                continue;
            }
            let k = through.clone().unwrap_or_default();
            let (code, _) = shared
                .fleet_role
                .output(&k, &["abort"], Duration::from_secs(15 * 60))
                .await;
            (shared.say)(&format!(
                "swap {n}: stopped {RESUMES} times; aborted (exit {code:?})"
            ));
            line.ending = Ending::WoundDown;
            break;
        }
        if !lease["swap"].is_null() {
            // Recorded, not held: `run` takes it up.
            tokio::time::sleep(Duration::from_secs(2)).await;
            continue;
        }
        let last = last_swap(&v);
        // A swap done as if its outgoing host had been down (no step-down,
        // no finish) when no fault took it down misread the host.
        if let Some(l) = last.as_ref().filter(|l| Some(*l) != before.as_ref())
            && l.3.contains("was down")
            && !shared.downed.lock().expect("downed").contains(out)
        {
            shared.violation(format!(
                "swap {n} ({out} -> {incoming}) ended as if {out} had been down, and no fault took it down: {}",
                l.3
            ));
        }
        line.ending = match (&last, exit) {
            (Some(l), _) if Some(l) != before.as_ref() => match (l.1.as_str(), l.2.as_str()) {
                ("done", _) => Ending::Done,
                (_, "refused") => Ending::Refused,
                _ => Ending::WoundDown,
            },
            (_, Some(0)) => Ending::Done,
            _ => Ending::Refused,
        };
        break;
    }
    if let Some(mut c) = child {
        let _ = c.kill().await;
        *shared.swap_pid.lock().expect("pid") = None;
    }
    for t in fault_tasks {
        let _ = t.await;
    }
    line.secs = clock.since(t0).as_secs();
    line
}

/// Checks a swap the product recorded done against etcd itself: the
/// members, read through any member within [`MEMBER_BACK`], are the voters
/// the swap says, as many as before.
async fn check_done(shared: &Shared, n: usize, out: &str, incoming: &str, voters_before: usize) {
    let clock = clock::Clock::system();
    let start = clock.now();
    let members = loop {
        if let Some(ms) = watch::members(&shared.spec).await {
            break ms;
        }
        if clock.since(start) > MEMBER_BACK {
            shared.violation(format!(
                "swap {n} ({out} -> {incoming}) done, and no member answered within {} s",
                MEMBER_BACK.as_secs()
            ));
            return;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    for w in verdict::done_swap_mismatch(&members, out, incoming, voters_before) {
        shared.violation(format!(
            "swap {n} ({out} -> {incoming}) done, but etcd's members disagree: {w}"
        ));
    }
}

/// The liveness half of the verdict: a planned swap that ended `first`
/// (not done) under its faults, tried again with no fault active (its
/// faults have all healed: `one_swap` waited for them) once the fleet is
/// clean, until it ends done or [`LIVENESS_BOUND`] passes, which is a
/// violation. The pair is picked again from the fleet of the moment with
/// the plan's `pick`. How many tries, and how the last ended.
async fn until_done(shared: &Arc<Shared>, n: usize, pick: u64, first: Ending) -> (u32, Ending) {
    let clock = clock::Clock::system();
    let start = clock.now();
    let (mut tries, mut last) = (0u32, first);
    let elapsed = |tries: u32| {
        (tries > 0).then(|| u64::try_from(clock.since(start).as_millis()).unwrap_or(u64::MAX))
    };
    while let Some(within) = verdict::retry(last, elapsed(tries), LIVENESS_BOUND.as_millis() as u64)
    {
        if !within {
            shared.violation(format!(
                "liveness: swap {n} did not end done with no fault active within {} s ({tries} tries, the last {})",
                LIVENESS_BOUND.as_secs(),
                last.name()
            ));
            break;
        }
        if tries > 0 {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
        tries += 1;
        if let Err(e) = wait_clean(shared, CLEAN_BOUND).await {
            (shared.say)(&format!("swap {n}, try {tries} with no fault: {e:#}"));
        }
        let (voters, standbys) = fleet(&shared.spec).await;
        let Some((out, incoming)) = schedule::pick_pair(pick, &voters, &standbys) else {
            last = Ending::Unfinished;
            continue;
        };
        (shared.say)(&format!(
            "swap {n}, try {tries} with no fault: {out} -> {incoming}"
        ));
        let line = one_swap(shared, n, &out, &incoming, &[], &voters, &standbys).await;
        (shared.say)(&format!(
            "swap {n}, try {tries} with no fault: {} in {} s",
            line.ending.name(),
            line.secs
        ));
        last = line.ending;
        if last == Ending::Done {
            check_done(shared, n, &out, &incoming, voters.len()).await;
        }
    }
    (tries, last)
}

/// Fires one fault at its moment (waiting while the budget or the host is
/// taken), holds it, and heals it.
async fn one_fault(shared: &Shared, f: &Fault, target: Option<String>) {
    let say = |l: &str| (shared.say)(l);
    match f.kind {
        FaultKind::KillSwapController => {
            let pid = *shared.swap_pid.lock().expect("pid");
            match pid.and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
                Some(p)
                    if rustix::process::kill_process(p, rustix::process::Signal::KILL).is_ok() =>
                {
                    say("fault: kill-swap-controller");
                    shared.tally(f.kind, |t| t.fired += 1);
                }
                _ => shared.tally(f.kind, |t| t.skipped += 1),
            }
            return;
        }
        FaultKind::ControllerClock => {
            let Some(file) = shared.fleet_role.clock.as_deref() else {
                shared.tally(f.kind, |t| t.skipped += 1);
                return;
            };
            if let Err(e) = clocks::set(file, f.offset_secs) {
                say(&format!("fault controller-clock not done: {e:#}"));
                shared.tally(f.kind, |t| t.skipped += 1);
                return;
            }
            let sizes = clocks::log_sizes(&shared.fleet_role.logs);
            say(&format!(
                "fault: controller-clock {:+} s for {} ms",
                f.offset_secs, f.hold_ms
            ));
            tokio::time::sleep(Duration::from_millis(f.hold_ms)).await;
            let noticed = clocks::noticed_in_logs(&shared.fleet_role.logs, &sizes);
            shared.tally(f.kind, |t| {
                t.fired += 1;
                t.noticed += u32::from(noticed);
            });
            if let Err(e) = clocks::set(file, 0) {
                shared.violation(format!("controller-clock could not be healed: {e:#}"));
            }
            return;
        }
        FaultKind::KillLeadingRun => {
            let killed = shared.runs.lock().await.kill_leader().await;
            let Some(i) = killed else {
                shared.tally(f.kind, |t| t.skipped += 1);
                return;
            };
            say(&format!("fault: kill-leading-run (instance {})", i + 1));
            shared.tally(f.kind, |t| t.fired += 1);
            tokio::time::sleep(Duration::from_millis(f.hold_ms)).await;
            if let Err(e) = shared.runs.lock().await.restart(i) {
                say(&format!(
                    "run instance {} could not start again: {e:#}",
                    i + 1
                ));
            }
            return;
        }
        _ => {}
    }
    let Some(host) = target else {
        shared.tally(f.kind, |t| t.skipped += 1);
        return;
    };
    // Wait for the budget and the host (at most a swap's bound).
    let clock = clock::Clock::system();
    let asked = clock.now();
    let mut deferred = false;
    let (holds, voters) = loop {
        let members = watch::members(&shared.spec).await;
        let member = members
            .as_ref()
            .is_none_or(|ms| ms.iter().any(|m| watch::host_of(&m.name) == host));
        let voters: Vec<String> = members
            .iter()
            .flatten()
            .filter(|m| !m.is_learner)
            .map(|m| watch::host_of(&m.name).to_string())
            .collect();
        {
            let mut busy = shared.busy.lock().expect("busy");
            if !busy.contains(&host)
                && let Some(holds) = shared.budget.lock().expect("budget").take(f.kind, member)
            {
                busy.insert(host.clone());
                break (holds, voters);
            }
        }
        if clock.since(asked) > SWAP_BOUND {
            shared.tally(f.kind, |t| t.skipped += 1);
            return;
        }
        deferred = true;
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    say(&format!(
        "fault: {}{} on {host}{}{}",
        f.kind.name(),
        if f.kind.on_clock() {
            format!(" {:+} s", f.offset_secs)
        } else {
            String::new()
        },
        if f.kind.lasts() {
            format!(" for {} ms", f.hold_ms)
        } else {
            String::new()
        },
        if deferred { " (deferred)" } else { "" }
    ));
    let fired_at = clock.unix_secs();
    let fired = faults::fire(&mut *shared.lab.lock().await, f, &host, &voters);
    match &fired {
        Ok(true) => {
            if f.kind.takes_member_down() {
                shared.downed.lock().expect("downed").insert(host.clone());
            }
            shared.tally(f.kind, |t| {
                t.fired += 1;
                t.deferred += u32::from(deferred);
            })
        }
        Ok(false) => {
            say(&format!(
                "fault {} on {host}: nothing there to act on",
                f.kind.name()
            ));
            shared.tally(f.kind, |t| t.skipped += 1);
        }
        Err(e) => {
            say(&format!(
                "fault {} on {host} not done: {e:#}",
                f.kind.name()
            ));
            shared.tally(f.kind, |t| t.skipped += 1);
        }
    }
    // A kill or a reboot is over when done (systemd starts the unit
    // again); only a fault that lasts is held.
    if f.kind.lasts() {
        tokio::time::sleep(Duration::from_millis(f.hold_ms)).await;
    }
    if f.kind == FaultKind::HostClock && matches!(fired, Ok(true)) {
        let lab = shared.lab.lock().await;
        match clocks::noticed_on_host(&lab, &host, fired_at.saturating_sub(1)) {
            Ok(noticed) => shared.tally(f.kind, |t| t.noticed += u32::from(noticed)),
            Err(e) => say(&format!("{host}'s journal could not be read: {e:#}")),
        }
    }
    if let Err(e) = faults::heal(&mut *shared.lab.lock().await, f.kind, &host) {
        shared.violation(format!(
            "{} on {host} could not be healed: {e:#}",
            f.kind.name()
        ));
    }
    if holds {
        // The budget is free once the member serves again (or is no
        // member any more: the swap took it out meanwhile), so that the
        // next fault never finds two members down.
        let ep = shared
            .spec
            .hosts
            .iter()
            .find(|h| h.name == host)
            .map(|h| shared.spec.etcd(h.ip));
        if let Some(Ok(ep)) = ep {
            let back = lab_setup::wait_for("the member to serve", MEMBER_BACK, || async {
                let serves = matches!(
                    tokio::time::timeout(Duration::from_secs(3), etcd_gw::status(&ep)).await,
                    Ok(Ok(_))
                );
                serves
                    || watch::members(&shared.spec)
                        .await
                        .is_some_and(|ms| ms.iter().all(|m| watch::host_of(&m.name) != host))
            })
            .await;
            if back.is_err() {
                say(&format!(
                    "{host}'s etcd did not serve within {} s of the heal",
                    MEMBER_BACK.as_secs()
                ));
            }
        }
        shared.budget.lock().expect("budget").release();
    }
    shared.busy.lock().expect("busy").remove(&host);
}

/// A replayed schedule, read from `path`.
pub fn load(path: &Path) -> anyhow::Result<Schedule> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a chaos schedule", path.display()))
}
