//! The controller's gates on etcd's own view, on real systemd with real
//! etcd: members that no Node shows (a learner, a ghost voter, both added
//! straight to etcd) refuse a swap with nothing changed, a ghost too when
//! an agent's own report forges a view that hides it, and a rollback of
//! an incoming host that already votes in etcd is not asked while another
//! voter is down: the swap stops with quorum kept. An alarm (NOSPACE) stops
//! every write, so the servers' views age out, and the runbook's etcd
//! commands clear it. Fails (never skips) when containers cannot run here.

use std::{
    net::Ipv4Addr,
    sync::{Arc, Mutex},
    time::Duration,
};

use lab::{
    etcd_gw::{self, Member},
    scenario::{self, Hand},
    spec::LabSpec,
    systemd_lab::SystemdLab,
};
use protocol::{Names, names::K3S_ETCD_IS_VOTER, report::ReportStep};
use serde_json::{Value, json};

mod common;
use common::{SERIAL, fleet_role, fleet_role_cmd, gate, lab_dir, lab_of, lease, unchanged};

const QUICK: Duration = Duration::from_secs(60);

/// A peer URL in the lab's subnet at an address no host uses (hosts are
/// numbered from 1; the root namespace's end is .254): a member there
/// never starts.
fn phantom_peer(spec: &LabSpec) -> String {
    let o = spec.hosts[0].ip.octets();
    LabSpec::etcd_peer_url(Ipv4Addr::new(o[0], o[1], o[2], 250))
}

/// Adds a member straight to etcd, as an operator's `etcdctl member add`
/// would (`learner`: `--learner`), through the lab's TLS gateway; its id.
/// etcd's API takes no name: a member that never started has none.
async fn member_add(spec: &LabSpec, peer_url: &str, learner: bool) -> u64 {
    let ep = spec.etcd(spec.hosts[0].ip).unwrap();
    let body = json!({ "peerURLs": [peer_url], "isLearner": learner }).to_string();
    let r = ep
        .request("/v3/cluster/member/add", Some(&body))
        .await
        .expect("etcd answers a member add");
    assert_eq!(r.status, 200, "member add refused: {}", r.body);
    let v: Value = serde_json::from_str(r.body.trim()).unwrap();
    let id = &v["member"]["ID"];
    id.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| id.as_u64())
        .unwrap_or_else(|| panic!("no member id in {v}"))
}

/// Raises `alarm` (`NOSPACE`, `CORRUPT`) on the member `id` through etcd's
/// API, as etcd raises NOSPACE itself once its datastore outgrows the
/// quota: the alarm goes through raft, and every member then refuses
/// writes.
async fn raise_alarm(spec: &LabSpec, id: u64, alarm: &str) {
    let ep = spec.etcd(spec.hosts[0].ip).unwrap();
    let body =
        json!({ "action": "ACTIVATE", "memberID": id.to_string(), "alarm": alarm }).to_string();
    let r = ep
        .request("/v3/maintenance/alarm", Some(&body))
        .await
        .expect("etcd answers an alarm request");
    assert_eq!(r.status, 200, "the alarm was refused: {}", r.body);
}

/// Runs the commands of docs/recovery.md's block `mark` on `host`, each in a
/// shell that first defines the doc's own `etcd` function, as an operator
/// who followed the doc has it; each command's output.
fn run_runbook_on(
    lab: &SystemdLab,
    host: &str,
    mark: &str,
) -> Vec<(String, labrig::bounded::Output)> {
    testcp::runbook::commands(mark)
        .into_iter()
        .map(|c| {
            let o = in_etcd_shell(lab, host, &c);
            (c, o)
        })
        .collect()
}

/// Runs `command` on `host` in a shell that first defines docs/recovery.md's
/// `etcd` function.
fn in_etcd_shell(lab: &SystemdLab, host: &str, command: &str) -> labrig::bounded::Output {
    let shell = testcp::runbook::block("etcd-shell");
    let o = lab
        .machine(host)
        .unwrap()
        .exec(
            &["sh", "-c", &format!("{shell}{command}")],
            Duration::from_secs(120),
        )
        .unwrap();
    eprintln!("{host}$ {command}: {}\n{}{}", o.status, o.stdout, o.stderr);
    o
}

/// `fleet-role status` until `done` holds for its exit code and output,
/// for at most `within`; the last output.
async fn status_until(
    lab: &SystemdLab,
    args: &[&str],
    within: Duration,
    what: &str,
    done: impl Fn(Option<i32>, &str) -> bool,
) -> String {
    let start = clock::Clock::system().now();
    loop {
        let o = fleet_role_cmd(lab, args).await;
        let shown = String::from_utf8_lossy(&o.stdout).to_string();
        if done(o.status.code(), &shown) {
            return shown;
        }
        assert!(start.elapsed() < within, "status never {what}:\n{shown}");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

async fn members(spec: &LabSpec) -> Vec<Member> {
    let start = clock::Clock::system().now();
    loop {
        match scenario::members(spec).await {
            Ok(m) => return m,
            Err(e) => assert!(start.elapsed() < QUICK, "{e:#}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until every server's report carries an etcd view that lists the
/// member `id` (`listed`) or does not (`!listed`): the controller decides
/// on the views the actuators report, written once per heartbeat.
async fn wait_views(lab: &SystemdLab, hand: &Hand, id: u64, listed: bool) {
    let start = clock::Clock::system().now();
    for h in lab
        .spec
        .hosts
        .iter()
        .filter(|h| h.name.starts_with("server"))
    {
        loop {
            let view = hand
                .report(&h.name)
                .await
                .ok()
                .flatten()
                .and_then(|r| r.host)
                .and_then(|p| p.etcd);
            if view
                .as_ref()
                .is_some_and(|v| v.members.iter().any(|m| m.id.0 == id) == listed)
            {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "{}'s report never showed etcd's view {} member {id:016x}: {view:?}",
                h.name,
                if listed { "with" } else { "without" },
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Whether `line` names the member `id` (etcd's 16 hex digits), or its
/// peer host.
fn names_member(line: &str, id: u64, peer_url: &str) -> bool {
    let host = peer_url
        .trim_start_matches("https://")
        .split(':')
        .next()
        .unwrap_or_default();
    line.contains(&format!("{id:016x}")) || line.contains(&format!("{id:x}")) || line.contains(host)
}

/// Runs `fleet-role swap --dry-run` and the swap itself with a member no
/// Node shows in etcd; both are refused by `gate_name`, naming it, and
/// nothing changes. Returns the dry run's output.
async fn refused_with_nothing_changed(
    lab: &SystemdLab,
    hand: &Hand,
    out: &str,
    id: u64,
    peer: &str,
    gate_name: &str,
) -> String {
    let before = unchanged(lab, hand).await;
    let dry = fleet_role_cmd(lab, &["swap", "--dry-run", "--out", out, "--in", "agent-1"]).await;
    let dry_out = String::from_utf8_lossy(&dry.stdout).into_owned();
    assert_eq!(dry.status.code(), Some(1), "the dry run passed:\n{dry_out}");
    let (passed, line) =
        gate(&dry_out, gate_name).unwrap_or_else(|| panic!("no {gate_name} gate in:\n{dry_out}"));
    assert!(!passed && names_member(line, id, peer), "{line}");

    let real = fleet_role_cmd(lab, &["swap", "--out", out, "--in", "agent-1"]).await;
    let real_out = String::from_utf8_lossy(&real.stdout);
    assert_eq!(
        real.status.code(),
        Some(1),
        "the swap was not refused:\n{real_out}"
    );
    assert!(
        gate(&real_out, gate_name).is_some_and(|(passed, l)| !passed && names_member(l, id, peer)),
        "{real_out}"
    );
    assert_eq!(
        unchanged(lab, hand).await,
        before,
        "the refused swap changed something"
    );
    dry_out
}

/// A compromised host forging its own report: its actuator stopped (the
/// host is the attacker's), its report key rewritten every 2 s with its own
/// actuator token, as the actuator would write it, carrying a view of etcd
/// read now in which the ghost member is the host's own, named as k3s
/// names a member (`<node>-<8 hex>`), and healthy.
struct Forger {
    host: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Forger {
    async fn start(lab: &SystemdLab, hand: &Hand, host: &str, ghost: u64) -> Forger {
        lab.systemctl(host, &["stop", "fleet-role-actuator"])
            .unwrap();
        let token = std::fs::read_to_string(lab.token_file(host)).unwrap();
        let own = lab::api::Apis::for_lab_as(&lab.spec, &token.trim().to_string().into()).unwrap();
        // A server's view as it stands, the ghost in it.
        let real = hand
            .report("server-1")
            .await
            .unwrap()
            .and_then(|r| r.host)
            .and_then(|p| p.etcd)
            .expect("server-1 reports etcd's view");
        let mut report = hand
            .report(host)
            .await
            .unwrap()
            .expect("the host's own report");
        let forged_name = format!("{host}-0badf00d");
        let forge = move |report: &mut protocol::report::Report| {
            let now = clock::Clock::system().unix_secs();
            let mut view = real.clone();
            for m in view.members.iter_mut().filter(|m| m.id.0 == ghost) {
                m.name = forged_name.clone();
            }
            view.member = protocol::etcd::MemberId(ghost);
            view.healthy = true;
            view.read_at = now;
            let part = report.host.get_or_insert(protocol::report::HostPart {
                heartbeat_at: now,
                promotion: None,
                demotion: None,
                etcd: None,
                release: Some(protocol::version::RELEASE.into()),
                credential_expires_at: None,
            });
            part.heartbeat_at = now;
            part.etcd = Some(view);
            report.seq = report.seq.saturating_add(1);
            report.updated_at = now;
        };
        let write = |own: lab::api::Apis, report: protocol::report::Report, host: String| async move {
            own.any(|c| {
                let (r, host) = (report.clone(), host.clone());
                async move {
                    actuator::report::Published::default()
                        .write(&c, &Names::default(), &host, &r)
                        .await
                }
            })
            .await
        };
        forge(&mut report);
        write(own.clone(), report.clone(), host.to_string())
            .await
            .expect("a host writes its own report key with its own token");
        // What the API now holds under its key is the forgery.
        let held = hand
            .report(host)
            .await
            .unwrap()
            .and_then(|r| r.host)
            .and_then(|p| p.etcd);
        assert!(
            held.as_ref().is_some_and(|v| v.member.0 == ghost
                && v.healthy
                && v.member(v.member)
                    .is_some_and(|m| m.name.starts_with(&format!("{host}-")))),
            "{held:?}"
        );
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let task = tokio::spawn({
            let (stop, host) = (stop.clone(), host.to_string());
            async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    forge(&mut report);
                    if let Err(e) = write(own.clone(), report.clone(), host.clone()).await {
                        eprintln!("{host}'s forged report not written: {e:#}");
                    }
                }
            }
        });
        Forger {
            host: host.to_string(),
            stop,
            task,
        }
    }

    /// Stops forging and starts the host's actuator again; returns once its
    /// report is its own again (an agent's carries no etcd view).
    async fn stop(self, lab: &SystemdLab, hand: &Hand) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.unwrap();
        lab.systemctl(&self.host, &["start", "fleet-role-actuator"])
            .unwrap();
        let start = clock::Clock::system().now();
        while hand
            .report(&self.host)
            .await
            .ok()
            .flatten()
            .and_then(|r| r.host)
            .is_none_or(|p| p.etcd.is_some())
        {
            assert!(
                start.elapsed() < QUICK,
                "{}'s actuator did not write its own report again",
                self.host
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_added_straight_to_etcd_that_no_node_shows_refuses_the_swap_by_no_learner_until_the_runbooks_command_removes_it()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(2, 1, dir.path()).await;
    let spec = &lab.spec;
    let hand = Hand::new(spec).unwrap();
    let peer = phantom_peer(spec);
    let id = member_add(spec, &peer, true).await;

    // etcd lists it; no Node shows it (every Node is a host's, and none of
    // them carries a learner's condition).
    let m = members(spec).await;
    assert!(
        m.iter().any(|x| x.id == id && x.is_learner),
        "etcd does not list the learner: {m:?}"
    );
    for h in &spec.hosts {
        let n = hand.node(&h.name).await.unwrap();
        let reasons: Vec<String> = n
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.type_ == K3S_ETCD_IS_VOTER)
            .filter_map(|c| c.reason)
            .collect();
        assert!(
            !reasons.iter().any(|r| r == "MemberIsLearner"),
            "{}: {reasons:?}",
            h.name
        );
    }
    wait_views(&lab, &hand, id, true).await;
    refused_with_nothing_changed(&lab, &hand, "server-2", id, &peer, "no-learner").await;

    // `status` calls it degraded (`etcd-learner`), as the runbook says.
    let status = fleet_role_cmd(&lab, &["status"]).await;
    let shown = String::from_utf8_lossy(&status.stdout);
    assert_eq!(status.status.code(), Some(5), "{shown}");
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("DEGRADED: etcd lists the learner")
                && l.contains(&format!("{id:x}"))),
        "{shown}"
    );

    // The runbook's command, as docs/recovery.md gives it, run on a
    // server: refused for a voter with nothing changed, then the learner
    // removed.
    let m = lab.machine("server-1").unwrap();
    let commands = testcp::runbook::commands("etcd-learner");
    let run = |member: &str| {
        commands
            .iter()
            .map(|c| {
                let c = c.replace("MEMBER_ID", member);
                let o = m.exec(&["sh", "-c", &c], Duration::from_secs(120)).unwrap();
                eprintln!("server-1$ {c}: {}\n{}{}", o.status, o.stdout, o.stderr);
                o
            })
            .collect::<Vec<_>>()
    };
    let voter = members(spec)
        .await
        .into_iter()
        .find(|x| x.name.starts_with("server-2-") && !x.is_learner)
        .expect("server-2 votes");
    let before = members(spec).await.len();
    let o = run(&format!("{:x}", voter.id)).pop().unwrap();
    assert_eq!(o.status.code(), Some(1), "a voter's removal is refused");
    assert!(
        o.stderr.contains("votes: a voter leaves only through"),
        "{}",
        o.stderr
    );
    assert_eq!(members(spec).await.len(), before, "nothing changed");
    let o = run(&format!("{id:x}")).pop().unwrap();
    assert!(o.status.success(), "{}", o.stderr);
    assert!(o.stdout.contains("removed the learner"), "{}", o.stdout);
    assert!(!members(spec).await.iter().any(|x| x.id == id));

    // Gone from etcd, the same swap's dry run passes the gate, and
    // `status` no longer names the learner.
    wait_views(&lab, &hand, id, false).await;
    let status = fleet_role_cmd(&lab, &["status"]).await;
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(!shown.contains("etcd lists the learner"), "{shown}");
    let dry = fleet_role_cmd(
        &lab,
        &["swap", "--dry-run", "--out", "server-2", "--in", "agent-1"],
    )
    .await;
    let dry_out = String::from_utf8_lossy(&dry.stdout);
    assert!(
        gate(&dry_out, "no-learner").is_some_and(|(passed, _)| passed),
        "{dry_out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ghost_voter_added_straight_to_etcd_refuses_the_swap_by_no_ghost_member_counts_as_down_and_no_agents_forged_view_hides_it()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(3, 1, dir.path()).await;
    let spec = &lab.spec;
    let hand = Hand::new(spec).unwrap();
    let peer = phantom_peer(spec);
    // A voter that never starts: 4 voters, 3 healthy, quorum 3 (etcd adds
    // it since the 3 started members keep quorum of 4).
    let id = member_add(spec, &peer, false).await;
    let m = members(spec).await;
    assert!(
        m.iter().any(|x| x.id == id && !x.is_learner),
        "etcd does not list the ghost as a voter: {m:?}"
    );
    wait_views(&lab, &hand, id, true).await;
    let dry =
        refused_with_nothing_changed(&lab, &hand, "server-3", id, &peer, "no-ghost-member").await;
    // Quorum is counted over etcd's members: the ghost is a voter, down.
    // After the swap: server-1, server-2, agent-1 and the ghost vote, three
    // of them healthy.
    let (_, quorum) = gate(&dry, "quorum-after-removal").expect("a quorum-after-removal gate");
    assert!(
        quorum.contains("by etcd's members: 3 healthy of 4 voting, quorum 3"),
        "{quorum}"
    );

    // A compromised agent hides the ghost: its own report key, written with
    // its own actuator token, carries etcd's view read now with the ghost
    // renamed to agent-1's member and healthy. Its Node carries no etcd
    // label, so the view is left out: the swap is still refused by
    // `no-ghost-member`, and the servers' views alone picture etcd.
    let forged_at = clock::Clock::system().now();
    let forger = Forger::start(&lab, &hand, "agent-1", id).await;
    let status = fleet_role_cmd(&lab, &["status", "--output", "json"]).await;
    let j: Value = serde_json::from_str(String::from_utf8_lossy(&status.stdout).trim())
        .expect("status --output json gives one JSON object");
    let ignored: Vec<&str> = j["etcd"]["ignored"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        ignored.contains(&"agent-1: its Node carries no etcd label"),
        "agent-1's forged view was not left out: {}",
        j["etcd"]
    );
    assert_eq!(
        j["etcd"]["reporters"],
        json!(["server-1", "server-2", "server-3"]),
        "{}",
        j["etcd"]
    );
    let dry =
        refused_with_nothing_changed(&lab, &hand, "server-3", id, &peer, "no-ghost-member").await;
    let (agree, views) = gate(&dry, "etcd-views-agree").expect("an etcd-views-agree gate");
    assert!(
        agree && views.contains("etcd's view from server-1, server-2, server-3:"),
        "{views}"
    );
    forger.stop(&lab, &hand).await;
    eprintln!(
        "the forged view, refused and undone in {:.0}s",
        forged_at.elapsed().as_secs_f32()
    );

    // `status` calls it degraded (`etcd-ghost-member`); the runbook's
    // commands, as docs/recovery.md gives them, run on a server: refused
    // for a host's voter with nothing changed, then the ghost removed.
    let status = fleet_role_cmd(&lab, &["status"]).await;
    let shown = String::from_utf8_lossy(&status.stdout);
    assert_eq!(status.status.code(), Some(5), "{shown}");
    assert!(
        shown
            .lines()
            .any(|l| l.contains(&format!("{id:016x}")) && l.contains("ghost")),
        "{shown}"
    );
    let m = lab.machine("server-1").unwrap();
    let commands = testcp::runbook::commands("etcd-ghost-member");
    let removal = commands
        .iter()
        .find(|c| c.starts_with("fleet-role-actuator remove-ghost"))
        .expect("the runbook removes the ghost with fleet-role-actuator");
    let remove = |member: &str| {
        let c = removal.replace("MEMBER_ID", member);
        let o = m.exec(&["sh", "-c", &c], Duration::from_secs(120)).unwrap();
        eprintln!("server-1$ {c}: {}\n{}{}", o.status, o.stdout, o.stderr);
        o
    };
    let voter = members(spec)
        .await
        .into_iter()
        .find(|x| x.name.starts_with("server-2-"))
        .expect("server-2 votes");
    let before = members(spec).await.len();
    let o = remove(&format!("{:x}", voter.id));
    assert_eq!(
        o.status.code(),
        Some(1),
        "a host's voter's removal is refused"
    );
    assert!(
        o.stderr.contains("is the member of the Node server-2"),
        "{}",
        o.stderr
    );
    assert_eq!(members(spec).await.len(), before, "nothing changed");
    let o = remove(&format!("{id:x}"));
    assert!(o.status.success(), "{}", o.stderr);
    assert!(
        o.stdout.contains("removed the ghost member"),
        "{}",
        o.stdout
    );
    assert!(!members(spec).await.iter().any(|x| x.id == id));
    wait_views(&lab, &hand, id, false).await;
    let status = fleet_role_cmd(&lab, &["status"]).await;
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(!shown.contains("ghost"), "{shown}");
    let dry = fleet_role_cmd(
        &lab,
        &["swap", "--dry-run", "--out", "server-3", "--in", "agent-1"],
    )
    .await;
    let dry_out = String::from_utf8_lossy(&dry.stdout);
    assert!(
        gate(&dry_out, "no-ghost-member").is_some_and(|(passed, _)| passed),
        "{dry_out}"
    );
    let (_, quorum) = gate(&dry_out, "quorum-after-removal").expect("a quorum-after-removal gate");
    assert!(
        quorum.contains("by etcd's members: 3 healthy of 3 voting, quorum 2"),
        "{quorum}"
    );

    // An alarm, as etcd raises NOSPACE when its datastore outgrows the
    // quota: etcd refuses every write of the cluster from then on, the
    // servers' reports with them, so the views age out and `status` says
    // so (`etcd-views`; a view that lists the alarm never gets through).
    // The views' age limit shortened for the test, as an operator's
    // `actuator_heartbeat_max_age_secs` would.
    let config = dir.path().join("short-views.toml");
    std::fs::write(&config, "actuator_heartbeat_max_age_secs = 20\n").unwrap();
    let config = config.display().to_string();
    let short = ["--config", config.as_str(), "status"];
    let healthy =
        |when: &'static str| status_until(&lab, &short, QUICK, when, |code, _| code == Some(0));
    healthy("healthy before the alarm").await;
    let server_1 = members(spec)
        .await
        .into_iter()
        .find(|x| x.name.starts_with("server-1-"))
        .expect("server-1 votes");
    raise_alarm(spec, server_1.id, "NOSPACE").await;
    let alarmed_at = clock::Clock::system().now();
    let shown = status_until(&lab, &short, QUICK, "said the views aged out", |code, s| {
        code == Some(5) && s.contains("no server reported etcd's view in the last 20 s")
    })
    .await;
    assert!(
        !shown.contains("etcd alarm:"),
        "an alarm reported through a write etcd refuses:\n{shown}"
    );
    // The runbook's commands, as docs/recovery.md gives them, on a server:
    // the alarm listed, the space given back, the alarm disarmed.
    let ran = run_runbook_on(&lab, "server-1", "etcd-alarm");
    for (c, o) in &ran {
        assert!(o.status.success(), "`{c}` failed: {}{}", o.stdout, o.stderr);
    }
    assert!(
        ran[0].1.stdout.contains("alarm:NOSPACE")
            && ran[0]
                .1
                .stdout
                .contains(&format!("memberID:{}", server_1.id)),
        "`{}` did not list the alarm: {}",
        ran[0].0,
        ran[0].1.stdout
    );
    let listed = in_etcd_shell(&lab, "server-1", &ran[0].0);
    assert_eq!(listed.stdout.trim(), "", "the alarm is still listed");
    healthy("healthy again after the runbook").await;
    eprintln!(
        "the alarm raised, seen and disarmed by the runbook in {:.0}s",
        alarmed_at.elapsed().as_secs_f32()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_of_an_incoming_host_that_votes_while_another_voter_is_down_is_not_asked_and_quorum_holds()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(3, 1, dir.path()).await;
    let spec = &lab.spec;
    let hand = Hand::new(spec).unwrap();
    let names = Names::default();
    // agent-1's member will vote in etcd, but its Node never shows
    // EtcdIsVoter (the lab holds the leader's write of it), so the
    // promotion does not complete in the controller's eyes and its timeout
    // asks for the rollback.
    let hold = spec.hold_etcd_is_voter_file();
    std::fs::create_dir_all(hold.parent().unwrap()).unwrap();
    std::fs::write(&hold, "agent-1\n").unwrap();
    let promote_secs = 180;
    let config = spec.dir.join("fleet-role.toml");
    std::fs::write(
        &config,
        format!("heartbeat_grace_secs = 10\n\n[timeouts]\npromote = {promote_secs}\n"),
    )
    .unwrap();
    let kubeconfig = lab::lab_setup::kubeconfig_for(spec, "server-1").unwrap();
    let mut child = tokio::process::Command::new(fleet_role())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--config")
        .arg(&config)
        .args(["swap", "--out", "server-3", "--in", "agent-1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let started = clock::Clock::system().now();
    // Its output is read as it comes (a pipe nobody reads fills).
    let said = Arc::new(Mutex::new(String::new()));
    for pipe in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let said = said.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(pipe).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                eprintln!("   fleet-role: {l}");
                let mut s = said.lock().unwrap();
                s.push_str(&l);
                s.push('\n');
            }
        });
    }

    // agent-1 joins and its member votes; its k3s becomes active.
    let voter = loop {
        if let Some(m) = members(spec)
            .await
            .into_iter()
            .find(|m| m.name.starts_with("agent-1-") && !m.is_learner)
        {
            break m;
        }
        assert!(
            started.elapsed() < Duration::from_secs(promote_secs - 60),
            "agent-1's member did not vote within {} s of the swap's start",
            promote_secs - 60
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the swap ended before agent-1 voted:\n{}",
            said.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    lab.wait_active("agent-1", "k3s", Duration::from_secs(60))
        .await
        .unwrap();
    eprintln!(
        "agent-1 votes ({}) {:.0}s into the swap",
        voter.name,
        started.elapsed().as_secs_f32()
    );
    let n = hand.node("agent-1").await.unwrap();
    assert!(
        !kubeview::condition_true(&n, K3S_ETCD_IS_VOTER),
        "agent-1's Node shows EtcdIsVoter though the lab holds it"
    );

    // Another voter goes down before the promotion's timeout: 4 voters, 3
    // healthy; stopping agent-1 before its member is removed would leave 2,
    // below quorum 3.
    lab.systemctl("server-2", &["stop", "k3s"]).unwrap();
    eprintln!(
        "server-2's k3s stopped {:.0}s into the swap",
        started.elapsed().as_secs_f32()
    );

    // The controller stops the swap; agent-1's server is never stopped.
    let status = loop {
        assert_eq!(
            lab.machine("agent-1").unwrap().active_state("k3s").unwrap(),
            "active",
            "agent-1's server was stopped while server-2 was down:\n{}",
            said.lock().unwrap()
        );
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(promote_secs + 240),
            "the swap did not end:\n{}",
            said.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let said = said.lock().unwrap().clone();
    assert!(!status.success(), "the swap succeeded:\n{said}");
    let l = lease(&hand.apis).await.expect("the regrade Lease");
    let stopped = l
        .metadata
        .annotations
        .unwrap_or_default()
        .get(&names.lease_stopped())
        .cloned()
        .unwrap_or_else(|| panic!("no stop note on the Lease:\n{said}"));
    // The note on the Lease is bounded (cut with an ellipsis); the
    // controller's own output has the whole count.
    assert!(stopped.contains("quorum-at-host-stop"), "{stopped}");
    assert!(
        said.contains("quorum-at-host-stop")
            && said.contains("by etcd's members: 2 healthy of 4 voting, quorum 3"),
        "{said}"
    );

    // Nothing rolled back: agent-1 runs its server, its member votes, and
    // no rollback was asked of it.
    let m = lab.machine("agent-1").unwrap();
    assert_eq!(m.active_state("k3s").unwrap(), "active");
    assert_eq!(m.active_state("k3s-agent").unwrap(), "inactive");
    assert_eq!(
        std::fs::read_to_string(spec.root("agent-1").join("var/lib/rancher/k3s/fleet-role"))
            .unwrap(),
        "server\n"
    );
    let now = members(spec).await;
    assert!(
        now.iter().any(|x| x.id == voter.id && !x.is_learner),
        "agent-1's member no longer votes: {now:?}"
    );
    let step = hand
        .node("agent-1")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default()
        .get(&names.role_step())
        .cloned();
    assert_ne!(step.as_deref(), Some("rollback"), "a rollback was asked");
    let r = hand.report("agent-1").await.unwrap();
    assert!(
        r.as_ref().is_none_or(|r| r.step != ReportStep::Rollback),
        "{r:?}"
    );
    assert_eq!(lab.most_k3s_at_once("agent-1").unwrap(), 1);
    // The cluster keeps quorum: a quorum write succeeds.
    let s1 = spec.host("server-1").unwrap().ip;
    etcd_gw::put(&spec.etcd(s1).unwrap(), "/lab/after-stopped-rollback", "ok")
        .await
        .expect("etcd takes a write: quorum holds");
}
