//! The Kubernetes objects another principal writes: a Node's labels and
//! annotations, the regrade Lease, and what the host's and the
//! controller's decisions make of them with the reports.

use fleetdecide::SwapRecord;
use std::collections::BTreeMap;

use fleetdecide::{
    DEFAULT_SPREAD_LABEL, ENDINGS_KEPT, FleetView, Settings, SwapEnding, SwapState, SwapStep,
    Writer,
};
use hostdecide::{Decision, HostState, Observation, decide::JoinTarget};
use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::Node},
    apimachinery::pkg::apis::meta::v1::{MicroTime, Time},
    jiff::Timestamp,
};
use protocol::{Names, NodeFacts, NodeName, Report, Role, SwapId, validate::parse_address};
use serde::Deserialize;

use crate::one_line;

/// Now, for the decisions: 2026-12-01T11:32:11Z. The clock is the reader's
/// own, not something another principal writes; the times in the objects
/// are theirs, and range over everything the API can hold.
const NOW: i64 = 1_796_124_731;

/// The controller identity the hosts accept steps under (the default).
const IDENTITY: &str = "fleet-role";

/// A Node, as the API returns it (JSON), read the way the actuator and the
/// controller read it ([`kubeview::node_facts`], [`kubeview::node_facts_zoned`])
/// and each mark then parsed as they parse it.
///
/// Who writes it: any holder of `patch nodes` (an operator, kured, a
/// system-upgrade-controller Plan, k3s's servers for their etcd
/// annotations), and each host's kubelet for its own Node's labels and
/// status (a compromised host's kubelet included). The API server checks
/// the shape of names and labels; this target does not rely on it.
pub fn node_marks(data: &[u8]) {
    let Ok(node) = serde_json::from_slice::<Node>(data) else {
        return;
    };
    let names = Names::default();
    let settings = Settings::default();
    let facts = kubeview::node_facts(&names, &node);
    let zoned = kubeview::node_facts_zoned(&names, Some(DEFAULT_SPREAD_LABEL), &node);
    assert_eq!(
        NodeFacts {
            zone: None,
            ..zoned.clone()
        },
        facts,
        "the zone is the only difference of the controller's reading"
    );
    if let Some(zone) = &zoned.zone {
        assert_eq!(protocol::validate::label_value(zone), Some(zone.as_str()));
    }

    // Each mark, as the host's decision and the controller parse it.
    let marks = &facts.marks;
    let _ = marks.step_kind();
    let _ = marks.any_annotation();
    if let Some(role) = &marks.desired_role {
        let _ = Role::parse(role);
    }
    for swap in [&marks.swap, &marks.snapshot_request].into_iter().flatten() {
        let _ = SwapId::parse(swap);
    }
    if let Some(join) = &marks.join_node {
        let _ = NodeName::parse(join);
    }
    let _ = protocol::version::check(marks.protocol.as_deref());
    let _ = (facts.k3s.remove_requested(), facts.k3s.any());
    let _ = (facts.member_gone(), facts.has_member(), facts.k3s_mark());
    let _ = fleetdecide::classify(&zoned);

    // The maintenance marks only ever lengthen the grace, never past the
    // maintenance grace, and what is said of them stays on one line.
    let since = facts.ready_since.unwrap_or(NOW);
    let grace = fleetdecide::grace_for(&zoned, &settings, since);
    let ordinary = since.saturating_add(settings.grace_period);
    let longest = since.saturating_add(settings.maintenance_grace.max(settings.grace_period));
    assert!(
        (ordinary..=longest).contains(&grace.deadline),
        "a grace of {grace:?} from {since}"
    );
    assert!(one_line(&grace.why), "{:?}", grace.why);

    // The addresses a promotion may join.
    if let JoinTarget::Found { address: Some(a) } = kubeview::join_target(Some(&node)) {
        let _ = parse_address(&a);
    }
    for a in kubeview::addresses(&node) {
        let _ = parse_address(&a);
    }

    // A Node written back unchanged is no write at all.
    assert_eq!(kubeview::node_patch(&names, &facts, &facts), None);
    let at = Time(Timestamp::from_second(NOW).expect("a time in range"));
    assert_eq!(kubeview::node_status_patch(&facts, &facts, at), None);
}

/// The regrade Lease, as the API returns it (JSON), read the way both sides
/// read it ([`kubeview::lease_facts`]), each of its annotations then read as
/// the controller and the hosts read them (the recorded swap, the
/// wind-down note, the last swap, the endings, the step and its time);
/// written back unchanged, it must read the same.
///
/// Who writes it: the controller, by design the only one; but anyone with
/// `update leases` in `kube-system` can, and a host's actuator reads
/// whatever is there (its credential can read it, not write it).
pub fn lease_annotations(data: &[u8]) {
    let Ok(lease) = serde_json::from_slice::<Lease>(data) else {
        return;
    };
    let names = Names::default();
    let facts = kubeview::lease_facts(&names, &lease);
    let _ = facts.recorded_swap();
    if let Some(note) = facts.stop_note() {
        let _ = note.reason.to_string();
    }
    let _ = facts.last();
    let _ = facts.current_step();
    if let Some(step) = &facts.step
        && let Some(s) = SwapStep::parse(step)
    {
        assert_eq!(s.as_str(), step);
    }
    let _ = fleetdecide::endings_of(&facts);
    let _ = (facts.expiry(), facts.valid_at(NOW, 5), facts.is_held(NOW));
    let _ = (
        facts.valid_at(i64::MIN, i64::MAX),
        facts.valid_at(i64::MAX, i64::MIN),
    );

    // The endings are kept as a bounded list, whatever was there before.
    let kept = fleetdecide::record_ending(
        facts.endings.as_deref(),
        SwapEnding {
            swap: "s1".into(),
            out: "n1".into(),
            at: NOW,
            failed: false,
        },
    );
    let list: Vec<SwapEnding> = serde_json::from_str(&kept).expect("the endings written read back");
    assert!(!list.is_empty() && list.len() <= ENDINGS_KEPT, "{kept}");

    // Written back as it was read, the Lease reads the same, and a patch
    // from the facts to themselves is none.
    let stamp = MicroTime(Timestamp::from_second(NOW).expect("a time in range"));
    let again = kubeview::lease_object(&names, Some(&lease), &facts, &facts, stamp);
    assert_eq!(kubeview::lease_facts(&names, &again), facts);
    assert_eq!(kubeview::lease_patch(&names, &facts, &facts, None), None);
}

/// The host's disk as the actuator reads it, for [`host_decision`]: root's
/// files (the role file, the datastore, the member name) and etcd's reading.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Disk {
    role: Option<String>,
    datastore: bool,
    tombstone: bool,
    member: Option<String>,
    etcd_lists_member: Option<bool>,
}

/// What [`host_decision`] reads: the host's Node, the regrade Lease, the
/// host's last report (its ConfigMap value), the promotion's join Node, and
/// the host's disk, at `at` seconds after [`NOW`].
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HostInput {
    #[serde(default)]
    at: u32,
    node: Node,
    #[serde(default)]
    lease: Option<Lease>,
    #[serde(default)]
    report: Option<String>,
    #[serde(default)]
    join_node: Option<Node>,
    #[serde(default)]
    host: Disk,
}

/// The host's decision ([`hostdecide::decide()`]) on its Node, the regrade
/// Lease, its last report and the join Node, as JSON
/// `{"node": .., "lease": .., "report": "..", "joinNode": .., "host": ..}`:
/// what the marks and the Lease ask is taken, refused or waited on, and a
/// refusal's reason (which the host writes into its report) stays on one
/// line.
///
/// Who writes it: the Node and the join Node as in [`node_marks`], the
/// Lease as in [`lease_annotations`], the report as in [`report`](crate::report)
/// (the host's own, which the API keeps; whoever can write the ConfigMap
/// can change it).
pub fn host_decision(data: &[u8]) {
    let Ok(input) = serde_json::from_slice::<HostInput>(data) else {
        return;
    };
    let names = Names::default();
    let node = kubeview::node_facts(&names, &input.node);
    let lease = input
        .lease
        .as_ref()
        .map(|l| kubeview::lease_facts(&names, l));
    let report = input.report.as_deref().and_then(Report::from_json);
    let join = match (&input.join_node, &node.marks.join_node) {
        (Some(j), _) => kubeview::join_target(Some(j)),
        (None, Some(_)) => JoinTarget::Missing,
        (None, None) => JoinTarget::NotLooked,
    };
    let disk = input.host;
    let host = HostState {
        role: disk.role.as_deref().and_then(|r| host::role::parse(r).ok()),
        datastore: disk.datastore,
        tombstone: disk.tombstone,
        member: disk.member,
        etcd_lists_member: disk.etcd_lists_member,
    };
    let _ = (
        host.member_gone(),
        host.member_gone_for_good(),
        host.member_may_vote(),
    );
    let observation = Observation {
        now: NOW + i64::from(input.at),
        node: &node,
        lease: lease.as_ref(),
        report: report.as_ref(),
        host,
        join: &join,
        identity: IDENTITY,
        skew_margin: 5,
        clock: None,
        join_port: 6443,
    };
    match hostdecide::decide(&observation) {
        Decision::Refuse { reason, .. } | Decision::Wait { reason } => {
            assert!(one_line(&reason), "{reason:?}");
        }
        Decision::Take { step, .. } => {
            let _ = step.report_step();
        }
        Decision::Nothing => {}
    }
}

/// What [`fleet_view`] reads: every Node, the kubelets' node Lease renewals
/// (by Node name), the report ConfigMap's data (by Node name), and the
/// regrade Lease, at `at` seconds after [`NOW`].
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FleetInput {
    #[serde(default)]
    at: u32,
    #[serde(default)]
    nodes: Vec<Node>,
    #[serde(default)]
    renewed: BTreeMap<String, MicroTime>,
    #[serde(default)]
    reports: BTreeMap<String, String>,
    #[serde(default)]
    lease: Option<Lease>,
}

/// The controller's reading of the whole fleet, as JSON `{"nodes": [..],
/// "renewed": {node: time}, "reports": {node: "report"}, "lease": ..}`:
/// the view put together as the controller's `observe::assemble` does
/// (each Node with its report and its node Lease renewal, the heartbeat
/// rule applied), then what `status`, `swap` and `run` compute from it: the
/// classes, etcd's picture from the servers' reported views and its gates,
/// the degradations, the preflight of the recorded swap, its plan, `run`'s
/// decision, the tidy-up, and the swap's next action (said on one line) with
/// the Lease and Node writes it makes.
///
/// Who writes it: the Nodes as in [`node_marks`], the Lease as in
/// [`lease_annotations`], each report (and the etcd view in it) by its
/// host, the renewals by each kubelet.
pub fn fleet_view(data: &[u8]) {
    let Ok(input) = serde_json::from_slice::<FleetInput>(data) else {
        return;
    };
    let settings = Settings::default();
    let names = &settings.names;
    let spread = settings.spread_label.as_ref().map(|l| l.as_str());
    let mut nodes = Vec::new();
    for n in input.nodes.iter().filter(|n| n.metadata.name.is_some()) {
        let mut f = kubeview::node_facts_zoned(names, spread, n);
        f.lease_renewed_at = input.renewed.get(&f.name).map(|t| t.0.as_second());
        let raw = input.reports.get(&f.name);
        f.report = raw.and_then(|v| Report::from_json(v));
        f.report_protocol = raw.and_then(|v| protocol::version::of_report(v));
        f.host = f.report.as_ref().and_then(|r| r.host.clone());
        nodes.push(f);
    }
    let mut view = FleetView {
        now: NOW + i64::from(input.at),
        settings: settings.clone(),
        nodes,
        lease: input
            .lease
            .as_ref()
            .map(|l| kubeview::lease_facts(names, l)),
        pods: vec![],
    };
    fleetdecide::apply_heartbeats(&mut view);

    for n in &view.nodes {
        let _ = (fleetdecide::classify(n), fleetdecide::is_voting(n));
        let _ = view.member_gone(&n.name);
    }
    let picture = view.etcd();
    let _ = fleetdecide::gate_etcd_views_agree(&view, &picture);
    let _ = fleetdecide::gate_no_ghost_member(&picture);
    let _ = fleetdecide::gate_no_etcd_alarm(&picture);
    let _ = fleetdecide::degradations(&view);
    let _ = fleetdecide::count_voters(&view, None);

    // The swap the Lease records, else the first voter and the first Node
    // that does not vote, by name.
    let (out, incoming) = match view.lease.as_ref().and_then(|l| l.recorded_swap()) {
        Some(r) => (r.out_name().to_string(), r.in_name().to_string()),
        None => {
            let sorted: BTreeMap<&str, bool> = view
                .nodes
                .iter()
                .map(|n| (n.name.as_str(), fleetdecide::is_voting(n)))
                .collect();
            let first = |voting: bool| {
                sorted
                    .iter()
                    .find(|(_, v)| **v == voting)
                    .map_or(if voting { "n1" } else { "n2" }, |(n, _)| *n)
                    .to_string()
            };
            (first(true), first(false))
        }
    };
    let gates = fleetdecide::preflight(&view, &out, &incoming);
    let _ = (fleetdecide::all_pass(&gates), fleetdecide::failures(&gates));
    let _ = fleetdecide::plan(&view, &out, &incoming);
    let _ = fleetdecide::run_decision(&view);
    // `run` with a window (kured's form, across midnight in a fixed zone):
    // its next opening is computed from the times the Lease's endings give.
    let mut windowed = view.clone();
    windowed.settings.window = fleetdecide::fixed_zone("+01:00").and_then(|zone| {
        let days = ["mon".to_string(), "fri".to_string()];
        fleetdecide::Window::new(&days, "22:00", "06:00", zone, "+01:00").ok()
    });
    assert!(windowed.settings.window.is_some(), "the window reads");
    let _ = fleetdecide::run_decision(&windowed);
    let _ = fleetdecide::pace(&windowed, &out);
    let _ = fleetdecide::tidy(&view);
    let _ = fleetdecide::voterset::path_of(&view);

    // The swap's next write, as `swap` and `run` drive it: taken up again
    // when the Lease records one, else a new one between the two Nodes.
    // A half left empty (a grow's or a shrink's) stays absent.
    let half = |n: &str| (!n.is_empty()).then(|| NodeName::parse(n));
    let (Ok(out), Ok(incoming)) = (half(&out).transpose(), half(&incoming).transpose()) else {
        return;
    };
    let recorded = view.lease.as_ref().and_then(|l| l.recorded_swap());
    let instance = view
        .lease
        .as_ref()
        .and_then(|l| l.instance.clone())
        .unwrap_or_else(|| "fleet-role-fuzz".into());
    let state = SwapState {
        out,
        incoming,
        queued: Vec::new(),
        candidate: SwapId::parse("swap-20261201-9").expect("a valid id"),
        instance: instance.clone(),
        taken: recorded.map(|r| r.id),
    };
    let action = fleetdecide::next_action(&view, &state);
    let said = action.describe();
    assert!(one_line(&said), "{said:?}");
    let writer = Writer {
        identity: IDENTITY,
        instance: &instance,
        lease_duration: settings.lease_duration,
        now: view.now,
    };
    if let Some(after) = fleetdecide::lease_after(view.lease.as_ref(), &action, writer) {
        let before = view.lease.clone().unwrap_or_default();
        let _ = kubeview::lease_patch(names, &before, &after, Some("1"));
        let _ = fleetdecide::write_may_go(&view, &after);
    }
    for n in &view.nodes {
        if let Some(after) = fleetdecide::node_after(n, &action) {
            let _ = kubeview::node_patch(names, n, &after);
        }
    }
}
