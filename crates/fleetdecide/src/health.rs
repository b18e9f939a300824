//! Whether the fleet is degraded: what `fleet-role status` names and exits
//! non-zero for, so that a cron job or an alert can ask it.

use serde::Serialize;

use crate::etcd_gates::etcd_learners;
use crate::gate::GateName;
use crate::gates::etcd_view_gates;
use crate::quorum::count_voters;
use crate::view::{FleetView, SwapRecord};
use fleetfacts::{Class, classify};
use protocol::text::one_line;
use protocol::version;

/// The kind of one thing degraded about the fleet: a fixed, short name
/// (the `reason` label of `fleet_role_degraded`) an alert can match on,
/// where the line itself names hosts and members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DegradedReason {
    /// Fewer healthy voters than configured.
    VotersUnhealthy,
    /// The regrade Lease is missing: no swap can run.
    LeaseMissing,
    /// A swap stopped part-way, recorded on the Lease.
    SwapStopped,
    /// A swap recorded on a Lease no controller holds (its controller
    /// went away: Ctrl-C, a closed lid, a dropped ssh), not stopped.
    SwapAbandoned,
    /// An even number of voting members stands with no change under way.
    EvenVoters,
    /// A host left between roles with no swap under way.
    HostBetweenRoles,
    /// A host reports a protocol version this build does not know.
    UnknownProtocol,
    /// A host's actuator is of a release older than this controller drives.
    ReleaseUnsupported,
    /// No server reported a fresh view of etcd, or their views disagree.
    EtcdViews,
    /// An etcd member no Node matches.
    EtcdGhostMember,
    /// A voter Node with no voting member in etcd.
    VoterWithoutMember,
    /// A voter reads NotReady while its own view of etcd vouches for it.
    ReadyDisputed,
    /// An alarm on an etcd member.
    EtcdAlarm,
    /// A learner only etcd lists, with no swap under way.
    EtcdLearner,
    /// The API refuses a host's report (its heartbeat says why).
    ReportRefused,
}

impl DegradedReason {
    /// Every reason, in the order [`degradations`] lists them.
    pub const ALL: [DegradedReason; 15] = [
        DegradedReason::VotersUnhealthy,
        DegradedReason::LeaseMissing,
        DegradedReason::SwapStopped,
        DegradedReason::SwapAbandoned,
        DegradedReason::EvenVoters,
        DegradedReason::HostBetweenRoles,
        DegradedReason::UnknownProtocol,
        DegradedReason::ReleaseUnsupported,
        DegradedReason::EtcdViews,
        DegradedReason::EtcdGhostMember,
        DegradedReason::VoterWithoutMember,
        DegradedReason::EtcdAlarm,
        DegradedReason::EtcdLearner,
        DegradedReason::ReportRefused,
        DegradedReason::ReadyDisputed,
    ];

    /// The reason's name (kebab-case, stable: alerts match on it).
    pub fn as_str(self) -> &'static str {
        match self {
            DegradedReason::VotersUnhealthy => "voters-unhealthy",
            DegradedReason::LeaseMissing => "lease-missing",
            DegradedReason::SwapStopped => "swap-stopped",
            DegradedReason::SwapAbandoned => "swap-abandoned",
            DegradedReason::EvenVoters => "even-voters",
            DegradedReason::HostBetweenRoles => "host-between-roles",
            DegradedReason::UnknownProtocol => "unknown-protocol",
            DegradedReason::ReleaseUnsupported => "release-unsupported",
            DegradedReason::EtcdViews => "etcd-views",
            DegradedReason::EtcdGhostMember => "etcd-ghost-member",
            DegradedReason::VoterWithoutMember => "voter-without-member",
            DegradedReason::ReadyDisputed => "ready-disputed",
            DegradedReason::EtcdAlarm => "etcd-alarm",
            DegradedReason::EtcdLearner => "etcd-learner",
            DegradedReason::ReportRefused => "report-refused",
        }
    }

    /// The reason an etcd view gate's refusal degrades the fleet by.
    fn of_etcd_gate(name: GateName) -> Self {
        match name {
            GateName::NoGhostMember => DegradedReason::EtcdGhostMember,
            GateName::VotersAreMembers => DegradedReason::VoterWithoutMember,
            GateName::NoEtcdAlarm => DegradedReason::EtcdAlarm,
            _ => DegradedReason::EtcdViews,
        }
    }
}

/// One thing degraded about the fleet: its kind and its line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Degradation {
    /// Its kind.
    pub reason: DegradedReason,
    /// What it is, one line, naming the hosts or members.
    pub text: String,
}

/// What is degraded about the fleet, one line each; empty when nothing is.
/// The lines of [`degradations`].
pub fn degraded(v: &FleetView) -> Vec<String> {
    degradations(v).into_iter().map(|d| d.text).collect()
}

/// What is degraded about the fleet, each with its kind; empty when
/// nothing is:
///
/// - fewer healthy voters than configured (a missing voter Node counts as
///   down);
/// - the regrade Lease is missing (no swap can be run);
/// - a swap stopped part-way, recorded on the Lease;
/// - a swap recorded, not stopped, on a Lease no controller holds: its
///   controller went away mid-change and nothing drives it (`run` takes
///   it up; with no `run`, the command that resumes it is named);
/// - with no change holding the Lease, an even number of voting members in
///   etcd (the servers' views, never the Nodes: any `patch nodes` holder
///   can label one): a count that tolerates no more failures than one
///   fewer, which a change leaves only while it runs;
/// - with no swap holding the Lease, a host left between roles (a learner,
///   an etcd-only or a rolled-back host): nothing will move it on;
/// - a host whose report is of a protocol version this build does not know
///   (no swap involving it will run);
/// - a host whose actuator is of a release older than this controller
///   drives, or names none (no swap involving it will run:
///   `supported-release`);
/// - a voter whose Node reads NotReady while its own view of etcd
///   vouches for its member ([`crate::evidence::weigh_evidence`]): a forged
///   condition, or a kubelet that cannot run pods on a healthy member;
/// - a host whose report the API refuses, as its heartbeat says (its
///   report in the API is behind it, and no step of it can be reported);
/// - etcd's view, as the servers report it: none fresh, views that
///   disagree, a member with no Node, a voter Node with no member, an
///   alarm (each shuts the swap's
///   gates), and, with no swap under way, a learner only etcd shows.
///
/// A swap under way is not degraded by itself: its learner and its
/// etcd-only host are its steps.
pub fn degradations(v: &FleetView) -> Vec<Degradation> {
    let mut out = Vec::new();
    let mut push = |reason, text: String| out.push(Degradation { reason, text });
    let incoming = v.lease.as_ref().and_then(|l| l.swap_in.as_deref());
    let count = count_voters(v, incoming);
    if count.healthy < v.settings.voters {
        push(
            DegradedReason::VotersUnhealthy,
            format!(
                "{} healthy voter(s) of {} configured{}",
                count.healthy,
                v.settings.voters,
                if count.missing > 0 {
                    format!(" ({} voter Node(s) missing)", count.missing)
                } else {
                    String::new()
                }
            ),
        );
    }
    let held = v.lease.as_ref().is_some_and(|l| l.is_held(v.now));
    match &v.lease {
        None => push(
            DegradedReason::LeaseMissing,
            "the regrade Lease is missing: no swap can run".into(),
        ),
        Some(l) => {
            if let Some(s) = &l.stopped {
                push(
                    DegradedReason::SwapStopped,
                    format!("a swap stopped part-way: {}", one_line(s)),
                );
            } else if !held && let Some(r) = l.recorded_swap() {
                push(
                    DegradedReason::SwapAbandoned,
                    format!(
                        "{} {} ({}) is recorded on the regrade Lease and no controller holds it{}: `{}` takes it up (`fleet-role run` does by itself), `fleet-role abort` winds it down",
                        r.change().as_str(),
                        r.id,
                        crate::view::halves(r.out.as_ref(), r.incoming.as_ref()),
                        l.expiry()
                            .map(|t| format!(" (lapsed {} s ago)", v.now.saturating_sub(t)))
                            .unwrap_or_default(),
                        r.resume_command()
                    ),
                );
            }
        }
    }
    let picture = v.etcd();
    if !held && picture.known() {
        let (voting, _) = picture.voters_after(None);
        if voting > 0 && voting % 2 == 0 {
            push(
                DegradedReason::EvenVoters,
                format!(
                    "etcd has {voting} voting members, an even count that tolerates no more failures than {}: finish or abort the change that left it, or `fleet-role grow` / `shrink` to an odd count",
                    voting - 1
                ),
            );
        }
    }
    for n in v.sorted() {
        let class = classify(n);
        if !held && matches!(class, Class::Learner | Class::EtcdOnly | Class::RolledBack) {
            push(
                DegradedReason::HostBetweenRoles,
                format!(
                    "{} is {} and no swap is under way to move it on",
                    n.name,
                    class.as_str()
                ),
            );
        }
        if let Err(e) = version::check(n.report_protocol.as_deref()) {
            push(
                DegradedReason::UnknownProtocol,
                format!("{}'s report: {e}", n.name),
            );
        }
        if let Some(Err(e)) = n
            .host
            .as_ref()
            .map(|h| version::host_release_supported(h.release.as_deref()))
        {
            push(
                DegradedReason::ReleaseUnsupported,
                format!(
                    "{}: {e}; no swap involving it will run until it is upgraded",
                    n.name
                ),
            );
        }
        if let Some(why) = &n.ready_disputed {
            push(DegradedReason::ReadyDisputed, why.clone());
        }
        if let Some(why) = &n.report_refused {
            push(
                DegradedReason::ReportRefused,
                format!(
                    "{}'s report was refused by the API: {}",
                    n.name,
                    one_line(why)
                ),
            );
        }
    }
    for g in etcd_view_gates(v) {
        if !g.passed {
            push(
                DegradedReason::of_etcd_gate(g.name),
                format!("etcd: {}", g.reason),
            );
        }
    }
    if !held {
        let by_nodes = |l: &String| v.node(l).is_some_and(|n| classify(n) == Class::Learner);
        for l in etcd_learners(&picture, None) {
            if !by_nodes(&l) {
                push(
                    DegradedReason::EtcdLearner,
                    format!("etcd lists the learner {l} and no swap is under way to move it on"),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LeaseFacts, fixtures::*};
    use protocol::report::{Detail, Phase, ReportStep};

    fn healthy() -> FleetView {
        let mut v = fleet();
        v.lease = Some(LeaseFacts::default());
        v
    }

    #[test]
    fn a_host_whose_report_the_api_refuses_degrades_the_fleet_with_the_apis_reason() {
        let mut v = healthy();
        assert!(degradations(&v).is_empty());
        v.nodes
            .iter_mut()
            .find(|n| n.name == "n4")
            .unwrap()
            .report_refused = Some("403 Forbidden: at most 16384 bytes".into());
        let d = degradations(&v);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].reason, DegradedReason::ReportRefused);
        assert_eq!(
            d[0].text,
            "n4's report was refused by the API: 403 Forbidden: at most 16384 bytes"
        );
    }

    /// A swap recorded for n1 -> n4 on a Lease renewed `ago` seconds ago
    /// (its duration 60 s).
    fn recorded(ago: i64) -> FleetView {
        let mut v = healthy();
        let mut l = lease_held_by("fleet-role", "i-1", "swap-20261205-092147-463d", "n1", "n4");
        l.renew_time = Some(NOW - ago);
        v.lease = Some(l);
        v
    }

    #[test]
    fn a_swap_on_a_lease_no_controller_holds_is_abandoned_and_named_with_the_command_that_takes_it_up()
     {
        let v = recorded(200);
        let d = degradations(&v);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].reason, DegradedReason::SwapAbandoned);
        assert_eq!(
            d[0].text,
            "swap swap-20261205-092147-463d (out n1, in n4) is recorded on the regrade Lease and no controller holds it (lapsed 140 s ago): `fleet-role swap --out n1 --in n4` takes it up (`fleet-role run` does by itself), `fleet-role abort` winds it down"
        );
        // Held: a controller drives it.
        assert!(degradations(&recorded(10)).is_empty());
        // Stopped: that is said once, as stopped.
        let mut v = recorded(200);
        v.lease.as_mut().unwrap().stopped = Some("the step-down failed".into());
        let kinds: Vec<DegradedReason> = degradations(&v).iter().map(|d| d.reason).collect();
        assert_eq!(kinds, [DegradedReason::SwapStopped]);
    }

    #[test]
    fn an_even_count_of_voting_members_in_etcd_degrades_the_fleet_only_while_no_change_holds_the_lease()
     {
        // n4 promoted and voting, as a swap abandoned after its promotion
        // leaves it: four voting members.
        let mut v = recorded(200);
        *node_mut(&mut v, "n4") = voter("n4", 4);
        let mut v = with_etcd_views(v);
        let kinds: Vec<DegradedReason> = degradations(&v).iter().map(|d| d.reason).collect();
        assert_eq!(
            kinds,
            [DegradedReason::SwapAbandoned, DegradedReason::EvenVoters]
        );
        assert!(
            degraded(&v)[1].starts_with(
                "etcd has 4 voting members, an even count that tolerates no more failures than 3"
            ),
            "{:?}",
            degraded(&v)
        );
        // While the swap's controller holds the Lease, four is its step.
        v.lease.as_mut().unwrap().renew_time = Some(NOW - 10);
        assert!(degradations(&v).is_empty(), "{:?}", degraded(&v));
        // A Node dressed as a voter (k3s's label and condition, any
        // `patch nodes` or `nodes/status` holder's to write) counts for
        // nothing: etcd's views list three.
        let mut v = healthy();
        let n4 = node_mut(&mut v, "n4");
        (n4.etcd_label, n4.etcd_is_voter) = (true, true);
        assert!(
            !degradations(&v)
                .iter()
                .any(|d| d.reason == DegradedReason::EvenVoters),
            "{:?}",
            degraded(&v)
        );
        // No voting member at all (views listing learners only) is no
        // even count: other reasons say what is wrong.
        let mut v = healthy();
        for n in &mut v.nodes {
            if let Some(e) = n.host.as_mut().and_then(|h| h.etcd.as_mut()) {
                for m in &mut e.members {
                    m.learner = true;
                }
            }
        }
        assert!(
            !degradations(&v)
                .iter()
                .any(|d| d.reason == DegradedReason::EvenVoters),
            "{:?}",
            degraded(&v)
        );
    }

    #[test]
    fn a_healthy_fleet_with_its_lease_is_not_degraded() {
        assert_eq!(degraded(&healthy()), Vec::<String>::new());
    }

    #[test]
    fn a_voter_down_or_missing_degrades_the_fleet() {
        let mut v = healthy();
        node_mut(&mut v, "n2").ready = false;
        assert_eq!(degraded(&v), vec!["2 healthy voter(s) of 3 configured"]);
        let mut v = healthy();
        v.nodes.retain(|n| n.name != "n3");
        let d = degraded(&v);
        assert_eq!(
            d[0],
            "2 healthy voter(s) of 3 configured (1 voter Node(s) missing)"
        );
        // etcd still lists its member: a ghost.
        assert!(
            d[1].starts_with("etcd: etcd member(s) with no Node: n3-0123abcd"),
            "{d:?}"
        );
        assert_eq!(d.len(), 2);
        let mut v = healthy();
        v.settings.voters = 2;
        assert!(
            degraded(&v).is_empty(),
            "more healthy voters than configured"
        );
    }

    #[test]
    fn a_missing_lease_or_a_stopped_swap_degrades_the_fleet() {
        let mut v = healthy();
        v.lease = None;
        assert_eq!(
            degraded(&v),
            vec!["the regrade Lease is missing: no swap can run"]
        );
        let mut v = healthy();
        v.lease.as_mut().unwrap().stopped = Some("the step-down\nfailed".into());
        assert_eq!(
            degraded(&v),
            vec!["a swap stopped part-way: the step-down\\nfailed"]
        );
    }

    #[test]
    fn a_host_left_between_roles_degrades_the_fleet_only_while_no_swap_holds_the_lease() {
        let mut v = healthy();
        let n4 = node_mut(&mut v, "n4");
        n4.etcd_label = true;
        assert_eq!(
            degraded(&v),
            vec!["n4 is learner and no swap is under way to move it on"]
        );
        v.lease = Some(lease_held_by("fleet-role", ME, "swap-1", "n1", "n4"));
        assert!(degraded(&v).is_empty(), "{:?}", degraded(&v));
        let mut v = healthy();
        node_mut(&mut v, "n1").report = Some(report(
            "swap-1",
            ReportStep::StepDown,
            Phase::Done,
            Some(Detail::EtcdOnly),
        ));
        assert_eq!(
            degraded(&v),
            vec!["n1 is etcd-only and no swap is under way to move it on"]
        );
    }

    /// A learner no Node shows, with a NOSPACE alarm, in every server's view.
    fn learner_with_an_alarm_in_every_view(v: &mut FleetView) {
        for n in &mut v.nodes {
            if let Some(e) = n.host.as_mut().and_then(|h| h.etcd.as_mut()) {
                e.members.push(protocol::etcd::Member {
                    id: protocol::etcd::MemberId(9),
                    name: "n4-0a1b2c3d".into(),
                    peer_urls: vec!["https://10.0.0.4:2380".into()],
                    client_urls: vec![],
                    learner: true,
                });
                e.alarms.push(protocol::etcd::Alarm {
                    member: protocol::etcd::MemberId(9),
                    kind: "NOSPACE".into(),
                });
            }
        }
    }

    #[test]
    fn what_etcd_alone_shows_degrades_the_fleet() {
        let mut v = healthy();
        learner_with_an_alarm_in_every_view(&mut v);
        assert_eq!(
            degraded(&v),
            vec![
                "etcd: etcd alarm: NOSPACE on n4; clear its cause and disarm it first (docs/recovery.md, \"No fresh view of etcd\")",
                "etcd lists the learner n4 and no swap is under way to move it on",
            ]
        );
        // No fresh view at all.
        let mut v = healthy();
        v.now += 1000;
        for n in &mut v.nodes {
            if let Some(h) = n.host.as_mut() {
                h.heartbeat_at = v.now;
            }
            n.lease_renewed_at = Some(v.now);
        }
        let d = degraded(&v);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].starts_with("etcd: no server reported etcd's view"),
            "{d:?}"
        );
    }

    #[test]
    fn each_degradation_is_named_by_its_kind() {
        let reasons = |v: &FleetView| -> Vec<&'static str> {
            degradations(v).iter().map(|d| d.reason.as_str()).collect()
        };
        let mut v = healthy();
        node_mut(&mut v, "n2").ready = false;
        assert_eq!(reasons(&v), ["voters-unhealthy"]);
        let mut v = healthy();
        v.lease = None;
        assert_eq!(reasons(&v), ["lease-missing"]);
        let mut v = healthy();
        v.lease.as_mut().unwrap().stopped = Some("the step-down failed".into());
        assert_eq!(reasons(&v), ["swap-stopped"]);
        let mut v = healthy();
        node_mut(&mut v, "n4").etcd_label = true;
        assert_eq!(reasons(&v), ["host-between-roles"]);
        let mut v = healthy();
        node_mut(&mut v, "n5").report_protocol = Some("2".into());
        assert_eq!(reasons(&v), ["unknown-protocol"]);
        let mut v = healthy();
        node_mut(&mut v, "n4").host.as_mut().unwrap().release = Some("0.1.0".into());
        assert_eq!(reasons(&v), ["release-unsupported"]);
        let mut v = healthy();
        v.nodes.retain(|n| n.name != "n3");
        assert_eq!(reasons(&v), ["voters-unhealthy", "etcd-ghost-member"]);
        let mut v = healthy();
        learner_with_an_alarm_in_every_view(&mut v);
        assert_eq!(reasons(&v), ["etcd-alarm", "etcd-learner"]);
        let mut v = healthy();
        for n in &mut v.nodes {
            if let Some(e) = n.host.as_mut().and_then(|h| h.etcd.as_mut()) {
                e.read_at = NOW - 500;
            }
        }
        assert_eq!(reasons(&v), ["etcd-views"]);
        // The lines are degraded()'s, in the same order.
        let texts: Vec<String> = degradations(&v).into_iter().map(|d| d.text).collect();
        assert_eq!(texts, degraded(&v));
        // Every name is distinct (an alert tells them apart).
        let mut names: Vec<&str> = DegradedReason::ALL.iter().map(|r| r.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DegradedReason::ALL.len());
    }

    #[test]
    fn a_host_reporting_an_unknown_protocol_version_degrades_the_fleet() {
        let mut v = healthy();
        node_mut(&mut v, "n5").report_protocol = Some("2".into());
        assert_eq!(
            degraded(&v),
            vec!["n5's report: protocol version \"2\" is not one this build knows (1 to 1)"]
        );
    }

    #[test]
    fn a_host_whose_actuator_is_older_than_the_controller_drives_degrades_the_fleet() {
        let mut v = healthy();
        node_mut(&mut v, "n2").host.as_mut().unwrap().release = None;
        assert_eq!(
            degraded(&v),
            vec![format!(
                "n2: its actuator reports no release (an actuator before {}, the oldest this controller drives); no swap involving it will run until it is upgraded",
                version::OLDEST_HOST_RELEASE
            )]
        );
        // A host with no actuator report at all is not counted here.
        let mut v = healthy();
        node_mut(&mut v, "n5").host = None;
        assert!(degraded(&v).is_empty(), "{:?}", degraded(&v));
    }
}
