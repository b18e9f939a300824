//! Fixtures shared by the controller core's tests: a healthy fleet of three
//! voters and two agents, and helpers to shape it.
#![allow(missing_docs)] // test fixtures: each is one line of a picture, named for what it shapes

use crate::*;
use protocol::{
    etcd::{EtcdView, Member, MemberId},
    report::{Detail, Phase, Report, ReportStep},
    validate::{NodeName, SwapId},
};

pub const NOW: i64 = 1_000_000;
pub const ME: &str = "ctl-a";

pub fn voter(name: &str, ip: u8) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        ready: true,
        ready_since: Some(0),
        lease_renewed_at: Some(NOW),
        etcd_is_voter: true,
        etcd_label: true,
        control_plane_label: true,
        master_label: true,
        k3s: K3sEtcd {
            node_name: Some(format!("{name}-0123abcd")),
            node_address: Some(format!("10.0.0.{ip}")),
            ..K3sEtcd::default()
        },
        eligible: true,
        marks: FleetMarks {
            desired_role: Some("server".into()),
            ..FleetMarks::default()
        },
        host: Some(alive(Some(protocol::report::Eligibility::Ok))),
        ..NodeFacts::default()
    }
}

/// A host part written now, with `demotion` as its verdict.
pub fn alive(demotion: Option<protocol::report::Eligibility>) -> protocol::report::HostPart {
    protocol::report::HostPart {
        heartbeat_at: NOW,
        demotion,
        promotion: None,
        etcd: None,
        release: Some(protocol::version::RELEASE.into()),
        credential_expires_at: None,
    }
}

pub fn agent(name: &str, eligible: bool) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        ready: true,
        ready_since: Some(0),
        lease_renewed_at: Some(NOW),
        eligible,
        host: Some(alive(None)),
        ..NodeFacts::default()
    }
}

pub fn settings() -> Settings {
    Settings {
        timeouts: Timeouts::all(120),
        ..Settings::default()
    }
}

/// `v` with every server's etcd view as etcd would list the members its
/// Nodes show (learners by the Nodes' classes), read now, each member
/// healthy while its Node is Ready.
pub fn with_etcd_views(mut v: FleetView) -> FleetView {
    refresh_etcd_views(&mut v, |_| true);
    v
}

/// Writes the etcd view of each member's host that `reporting` lets
/// report, and clears that of a reporting host with no member (the others'
/// views stay as they were, going stale).
pub fn refresh_etcd_views(v: &mut FleetView, reporting: impl Fn(&NodeFacts) -> bool) {
    refresh_etcd_views_voting(v, reporting, |_| false);
}

/// [`refresh_etcd_views`], with the members `votes` names listed as voters
/// whatever their Nodes show (etcd promoted them, k3s did not mark them).
pub fn refresh_etcd_views_voting(
    v: &mut FleetView,
    reporting: impl Fn(&NodeFacts) -> bool,
    votes: impl Fn(&NodeFacts) -> bool,
) {
    use protocol::etcd::{EtcdView, Member, MemberId};
    let id_of = |name: &str| {
        MemberId(name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        }))
    };
    let listed: Vec<&NodeFacts> = v.nodes.iter().filter(|n| n.has_member()).collect();
    let members: Vec<Member> = listed
        .iter()
        .map(|n| Member {
            id: id_of(&n.name),
            name: n
                .k3s
                .node_name
                .clone()
                .unwrap_or_else(|| format!("{}-0123abcd", n.name)),
            peer_urls: vec![format!(
                "https://{}:2380",
                n.k3s.node_address.as_deref().unwrap_or("10.0.9.9")
            )],
            client_urls: vec![],
            learner: classify(n) == Class::Learner && !votes(n),
        })
        .collect();
    let leader = listed.iter().find(|n| is_voting(n)).map(|n| id_of(&n.name));
    let health: Vec<(String, bool)> = listed
        .iter()
        .filter(|n| reporting(n))
        .map(|n| (n.name.clone(), n.ready))
        .collect();
    for n in &mut v.nodes {
        let Some((_, healthy)) = health.iter().find(|(name, _)| *name == n.name) else {
            // A reporting host with no member reads no view (a removed
            // member's etcd stops serving).
            if reporting(n)
                && let Some(h) = n.host.as_mut()
            {
                h.etcd = None;
            }
            continue;
        };
        if let Some(h) = n.host.as_mut() {
            h.etcd = Some(EtcdView {
                read_at: v.now,
                member: id_of(&n.name),
                members: members.clone(),
                leader,
                raft_term: 2,
                raft_index: 100,
                db_size: 1 << 20,
                alarms: vec![],
                healthy: *healthy,
            });
        }
    }
}

/// Takes `name` down as a dead host goes: its Node NotReady, its node
/// Lease stale, its own view of etcd gone (it no longer reports one).
pub fn take_down(v: &mut FleetView, name: &str) {
    let now = v.now;
    let n = node_mut(v, name);
    n.ready = false;
    n.lease_renewed_at = Some(now - 10_000);
    if let Some(h) = n.host.as_mut() {
        h.etcd = None;
    }
}

/// n1, n2, n3 healthy voters; n4 an eligible standby; n5 an agent that
/// may not vote.
pub fn fleet() -> FleetView {
    with_etcd_views(FleetView {
        now: NOW,
        settings: settings(),
        nodes: vec![
            voter("n1", 1),
            voter("n2", 2),
            voter("n3", 3),
            agent("n4", true),
            agent("n5", false),
        ],
        lease: Some(LeaseFacts::default()),
        pods: vec![],
    })
}

pub fn node_mut<'a>(v: &'a mut FleetView, name: &str) -> &'a mut NodeFacts {
    v.nodes.iter_mut().find(|n| n.name == name).unwrap()
}

pub fn name(s: &str) -> NodeName {
    NodeName::parse(s).unwrap()
}

pub fn id(s: &str) -> SwapId {
    SwapId::parse(s).unwrap()
}

/// A half named by `n`, none when it is empty (a grow's `out`, a shrink's
/// `incoming`).
pub fn half(n: &str) -> Option<NodeName> {
    (!n.is_empty()).then(|| name(n))
}

/// A change of `out` for `incoming`; an empty name is a half left out.
pub fn request(out: &str, incoming: &str) -> SwapState {
    SwapState {
        out: half(out),
        incoming: half(incoming),
        queued: Vec::new(),
        candidate: id("swap-1"),
        instance: ME.into(),
        taken: None,
    }
}

pub fn gate(gates: &[Gate], which: GateName) -> &Gate {
    gates.iter().find(|g| g.name == which).unwrap()
}

pub fn refused_by(a: &Action) -> Vec<GateName> {
    match a {
        Action::Refuse { gates } => gates.iter().filter(|g| !g.passed).map(|g| g.name).collect(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

pub fn lease_held_by(holder: &str, instance: &str, swap: &str, out: &str, inc: &str) -> LeaseFacts {
    LeaseFacts {
        holder: Some(holder.into()),
        instance: Some(instance.into()),
        renew_time: Some(NOW - 1),
        duration_secs: Some(60),
        swap: Some(swap.into()),
        swap_out: (!out.is_empty()).then(|| out.into()),
        swap_in: (!inc.is_empty()).then(|| inc.into()),
        ..LeaseFacts::default()
    }
}

pub fn report(swap: &str, step: ReportStep, phase: Phase, detail: Option<Detail>) -> Report {
    let mut r = Report::next(None, Some(id(swap)), step, phase, NOW - 5);
    r.detail = detail;
    r
}

/// The fleet with the Lease ours for swap-1 (n1 out, n4 in).
pub fn ours(mut v: FleetView, step: Option<SwapStep>) -> FleetView {
    let mut l = lease_held_by("fleet-role", ME, "swap-1", "n1", "n4");
    l.renew_time = Some(v.now);
    l.step = step.map(|s| s.as_str().into());
    l.step_since = step.map(|_| v.now);
    // The voter the snapshot is asked of (recorded with its request).
    l.snapshot_from = Some("n2".into());
    v.lease = Some(l);
    v
}

pub fn taken() -> SwapState {
    SwapState {
        taken: Some(id("swap-1")),
        ..request("n1", "n4")
    }
}

pub fn after_promotion() -> FleetView {
    let mut v = fleet();
    let n4 = node_mut(&mut v, "n4");
    *n4 = voter("n4", 4);
    n4.marks = FleetMarks {
        desired_role: Some("server".into()),
        swap: Some("swap-1".into()),
        step: Some("promote".into()),
        join_node: Some("n2".into()),
        snapshot_request: None,
        protocol: Some("1".into()),
    };
    n4.report = Some(report(
        "swap-1",
        ReportStep::Promote,
        Phase::Done,
        Some(Detail::Voter),
    ));
    node_mut(&mut v, "n2").marks.snapshot_request = Some("swap-1".into());
    node_mut(&mut v, "n2").report = Some(report(
        "swap-1",
        ReportStep::Snapshot,
        Phase::Done,
        Some(Detail::Snapshot),
    ));
    with_etcd_views(v)
}

/// A Lease recording these swap endings `(outgoing Node, unix seconds,
/// failed)`, oldest first, as the controller records them.
pub fn lease_with_endings(endings: &[(&str, i64, bool)]) -> LeaseFacts {
    let mut raw = None;
    for (i, (out, at, failed)) in endings.iter().enumerate() {
        raw = Some(super::pacing::record_ending(
            raw.as_deref(),
            super::pacing::SwapEnding {
                swap: format!("swap-{i}"),
                out: (*out).into(),
                at: *at,
                failed: *failed,
            },
        ));
    }
    LeaseFacts {
        endings: raw,
        ..LeaseFacts::default()
    }
}

/// Member `id` of `node`, by k3s's member name.
pub fn member(id: u64, node: &str, learner: bool) -> Member {
    Member {
        id: MemberId(id),
        name: format!("{node}-0a1b2c3d"),
        peer_urls: vec![format!("https://10.0.0.{id}:2380")],
        client_urls: vec![],
        learner,
    }
}

/// A server's view of etcd, read by its own member `me` at `read_at`, with
/// `leader` leading.
pub fn etcd_view(me: u64, read_at: i64, leader: u64, members: Vec<Member>) -> EtcdView {
    EtcdView {
        read_at,
        member: MemberId(me),
        members,
        leader: Some(MemberId(leader)),
        raft_term: 3,
        raft_index: 77,
        db_size: 3 << 20,
        alarms: vec![],
        healthy: true,
    }
}
