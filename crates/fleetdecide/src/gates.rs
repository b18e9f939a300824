//! The gates: each answers one question about the fleet with a verdict and
//! a reason, for `swap --dry-run` and for the re-check before every
//! irreversible write; and the sets of gates each write is guarded by.

use crate::gate::{Gate, GateName};
use crate::view::SwapRecord;
use protocol::{validate::StepKind, version};

pub(super) use crate::etcd_gates::etcd_view_gates;
use crate::etcd_gates::{etcd_after_removal, etcd_learners, etcd_quorum_text};
use crate::quorum;
use crate::quorum::{Removing, VoterCount, count_voters, keeps_quorum, removing};
use crate::view::FleetView;
use fleetfacts::{Class, classify, is_healthy_voter, is_voting};
use protocol::text::one_line;

// === The gates ===

/// Gate: the controller is not paused.
pub fn gate_not_paused(v: &FleetView) -> Gate {
    Gate::check(
        GateName::NotPaused,
        !v.paused(),
        if v.paused() {
            "the controller is paused (`fleet-role resume` lifts it)"
        } else {
            "not paused"
        },
    )
}

/// Gate: no other swap. The Lease is free (no holder, or lapsed); no
/// unfinished swap with another pair is recorded on it; no Node other than
/// `out` and `incoming` carries a step. (A swap this process holds the Lease
/// for is driven by [`crate::swap::next_action`], which does not ask this gate.)
pub fn gate_no_other_swap(v: &FleetView, out: &str, incoming: &str) -> Gate {
    let name = GateName::NoOtherSwap;
    let Some(l) = &v.lease else {
        // The controller may update the Lease but not create it (its role
        // names it): a swap would fail at its first write.
        return Gate::fail(
            name,
            "the regrade Lease is missing and this controller may not create it: `fleet-role manifests controller | kubectl apply -f -` with an administrator's kubeconfig puts it back (docs/recovery.md)",
        );
    };
    {
        if l.is_held(v.now) {
            let what = match l.recorded_swap() {
                Some(r) => format!(
                    " for swap {} ({})",
                    r.id,
                    crate::view::halves(r.out.as_ref(), r.incoming.as_ref())
                ),
                None => String::new(),
            };
            return Gate::fail(
                name,
                format!(
                    "the regrade Lease is held by {}{what} for {} s more",
                    one_line(l.holder.as_deref().unwrap_or_default()),
                    l.expiry().unwrap_or(v.now).saturating_sub(v.now)
                ),
            );
        }
        if let Some(r) = l.recorded_swap()
            && (r.out_name() != out || r.in_name() != incoming)
        {
            let why = l
                .stopped
                .as_deref()
                .map(|s| format!(" (stopped: {})", one_line(s)))
                .unwrap_or_default();
            return Gate::fail(
                name,
                format!(
                    "swap {} ({}) is unfinished{why}; resume it with `{}`",
                    r.id,
                    crate::view::halves(r.out.as_ref(), r.incoming.as_ref()),
                    r.resume_command()
                ),
            );
        }
        if l.recorded_swap().is_none() && l.swap.is_some() {
            return Gate::fail(
                name,
                "the regrade Lease names a swap that does not parse; see docs/controller.md (recovery)",
            );
        }
    }
    // Only marks of the swap the Lease records count: any kubelet can
    // annotate its own Node, and a step mark nobody asked for would
    // otherwise stop every swap. (Hosts act on a mark only when the
    // Lease asks the same, so a stray one moves nothing either.)
    let recorded = v
        .lease
        .as_ref()
        .and_then(|l| l.recorded_swap())
        .map(|r| r.id.to_string());
    let others: Vec<String> = v
        .sorted()
        .into_iter()
        .filter(|n| n.name != out && n.name != incoming && n.marks.step.is_some())
        .filter(|n| recorded.is_some() && n.marks.swap == recorded)
        .map(|n| {
            format!(
                "{} carries step {} of swap {}",
                n.name,
                one_line(n.marks.step.as_deref().unwrap_or_default()),
                one_line(n.marks.swap.as_deref().unwrap_or("(none)"))
            )
        })
        .collect();
    if !others.is_empty() {
        return Gate::fail(
            name,
            format!("a step of another swap is left: {}", others.join(", ")),
        );
    }
    Gate::pass(name, "the regrade Lease is free or ours")
}

/// Gate: the outgoing and incoming hosts' reports and the regrade Lease
/// are of a protocol version this build knows ([`version::check`]; none
/// written is version 1). A host of a newer version writes a report this
/// build may misread, so no swap involving it is started or driven on; the
/// fix is to upgrade the controller, as the upgrade order has it.
pub fn gate_known_protocol(v: &FleetView, out: &str, incoming: &str) -> Gate {
    let name = GateName::KnownProtocol;
    let mut unknown: Vec<String> = [out, incoming]
        .into_iter()
        .filter_map(|host| {
            let n = v.node(host)?;
            let e = version::check(n.report_protocol.as_deref()).err()?;
            Some(format!("{host}'s report: {e}"))
        })
        .collect();
    if let Some(e) = v
        .lease
        .as_ref()
        .and_then(|l| version::check(l.protocol.as_deref()).err())
    {
        unknown.push(format!("the regrade Lease: {e}"));
    }
    if unknown.is_empty() {
        Gate::pass(
            name,
            format!(
                "{} and the regrade Lease are of protocol versions this build knows ({} to {})",
                [out, incoming]
                    .into_iter()
                    .filter(|h| !h.is_empty())
                    .collect::<Vec<_>>()
                    .join(", "),
                version::OLDEST_KNOWN,
                version::PROTOCOL_VERSION
            ),
        )
    } else {
        Gate::fail(
            name,
            format!(
                "{}; upgrade fleet-role to a version that knows it (see docs/upgrade.md)",
                unknown.join("; ")
            ),
        )
    }
}

/// Gate: the swap's hosts' actuators are of a release this controller
/// drives ([`version::host_release_supported`]): an older actuator speaks a
/// protocol version this build knows yet acts as this controller no longer
/// plans for, so nothing involving it starts or goes on until it is
/// upgraded (docs/upgrade.md). The hosts are those `actuators-alive`
/// checks: a down outgoing voter is not asked anything, so its release is
/// not in question (its member is removed without it).
pub fn gate_supported_release(v: &FleetView, out: Option<&str>, incoming: Option<&str>) -> Gate {
    let name = GateName::SupportedRelease;
    let hosts: Vec<&str> = out
        .filter(|o| !outgoing_is_down(v, o))
        .into_iter()
        .chain(incoming)
        .collect();
    let unsupported: Vec<String> = hosts
        .iter()
        .filter_map(|host| match v.node(host).and_then(|n| n.host.as_ref()) {
            None => Some(format!("{host} has no actuator report")),
            Some(h) => version::host_release_supported(h.release.as_deref())
                .err()
                .map(|e| format!("{host}: {e}")),
        })
        .collect();
    if unsupported.is_empty() {
        Gate::pass(
            name,
            format!(
                "{} run a release this controller drives ({} or later)",
                if hosts.is_empty() {
                    "no host asked".to_string()
                } else {
                    hosts.join(", ")
                },
                version::OLDEST_HOST_RELEASE
            ),
        )
    } else {
        Gate::fail(
            name,
            format!(
                "{}; upgrade its actuator first (docs/upgrade.md)",
                unsupported.join("; ")
            ),
        )
    }
}

/// Whether the outgoing host is down, by evidence no add-on can forge
/// ([`FleetView::down_evidence`]). A down voter's
/// member is removed without its host taking a step (its actuator may be as
/// dead as its k3s); the finish waits until it is back, and the actuator
/// refuses it there if its agent could not start.
fn outgoing_is_down(v: &FleetView, out: &str) -> bool {
    v.down(out)
}

/// Gate: the outgoing host's report says its agent could start once it is
/// demoted (`host::eligibility`: no key `k3s agent` does not define in
/// k3s's config files, a `server:` naming another live server). A verdict
/// missing (an actuator older than this controller, or none) or unknown
/// closes it: a demotion into an agent that cannot start leaves a host
/// neither role. A down outgoing voter passes (see `outgoing_is_down`).
pub fn gate_outgoing_demotable(v: &FleetView, out: &str) -> Gate {
    use protocol::report::Eligibility;
    let name = GateName::OutgoingDemotable;
    let Some(n) = v.node(out) else {
        return Gate::fail(name, format!("no Node {out}"));
    };
    if outgoing_is_down(v, out) {
        return Gate::pass(
            name,
            format!(
                "{out} is down: its member is removed without it; its actuator checks again before its finish"
            ),
        );
    }
    match n.host.as_ref().and_then(|h| h.demotion.as_ref()) {
        Some(Eligibility::Ok) => Gate::pass(name, format!("{out} reports its agent could start")),
        Some(Eligibility::Ineligible { reasons }) => Gate::fail(
            name,
            format!(
                "{out} reports its agent could not start once demoted: {}",
                reasons
                    .iter()
                    .map(|r| one_line(r))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ),
        Some(Eligibility::Unknown) => Gate::fail(
            name,
            format!(
                "{out} reports a demotion verdict this build does not know; upgrade fleet-role"
            ),
        ),
        None => Gate::fail(
            name,
            format!(
                "{out} has not reported whether it may be demoted (no actuator heartbeat with a verdict; is its actuator running, and as new as this controller?)"
            ),
        ),
    }
}

/// Gate: the swap's hosts' actuators are alive: each one's report carries a
/// heartbeat no older than [`crate::settings::Settings::actuator_heartbeat_max_age`],
/// and the API accepts its report. A host whose actuator is dead would
/// never take the step asked of it, nor would a host whose report the API
/// refuses (a step whose start cannot be reported is not taken), and the
/// swap would wait out its timeout half done. A down outgoing voter
/// is not asked anything before its removal (see `outgoing_is_down`).
pub fn gate_actuators_alive(v: &FleetView, out: Option<&str>, incoming: Option<&str>) -> Gate {
    let name = GateName::ActuatorsAlive;
    let max = v.settings.actuator_heartbeat_max_age;
    let mut stale = Vec::new();
    let mut refused = Vec::new();
    let mut fresh = Vec::new();
    let hosts = out
        .filter(|o| !outgoing_is_down(v, o))
        .into_iter()
        .chain(incoming);
    for host in hosts {
        if let Some(why) = v.node(host).and_then(|n| n.report_refused.as_deref()) {
            refused.push(format!("{host}'s report was refused by the API: {why}"));
            continue;
        }
        match v.node(host).and_then(|n| n.host.as_ref()) {
            None => stale.push(format!("{host} has no actuator heartbeat")),
            Some(h) => {
                let age = v.now.saturating_sub(h.heartbeat_at);
                if age > max {
                    stale.push(format!(
                        "{host}'s actuator heartbeat is {age} s old (more than {max} s)"
                    ));
                } else {
                    fresh.push(format!("{host} {} s ago", age.max(0)));
                }
            }
        }
    }
    let mut failed = Vec::new();
    if !refused.is_empty() {
        failed.push(format!(
            "{}; its actuator runs, but no step can be reported until the API takes its report (docs/recovery.md)",
            refused.join("; ")
        ));
    }
    if !stale.is_empty() {
        failed.push(format!(
            "{}; check that fleet-role-actuator runs there (journalctl -u fleet-role-actuator)",
            stale.join("; ")
        ));
    }
    if failed.is_empty() {
        Gate::pass(name, format!("actuator heartbeats: {}", fresh.join(", ")))
    } else {
        Gate::fail(name, failed.join("; "))
    }
}

/// What the outgoing host may be for [`gate_outgoing_voter`] to pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outgoing {
    /// A voter (before anything is asked of it).
    Voting,
    /// A voter, or a voter this swap already stepped down to etcd-only.
    VotingOrSteppedDown,
}

/// How [`gate_quorum_after_removal`] counts the voters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// As the cluster is now.
    AsItIs,
    /// As if the incoming host were already a healthy voter: the preflight's
    /// look ahead to the removal after the promotion.
    IncomingPromoted,
}

/// Gate: the outgoing host is a voter (or, with
/// [`Outgoing::VotingOrSteppedDown`], a voter this swap stepped down).
pub fn gate_outgoing_voter(v: &FleetView, out: &str, may_be: Outgoing) -> Gate {
    let name = GateName::OutgoingVoter;
    match v.node(out) {
        None => Gate::fail(name, format!("no Node {out}")),
        Some(n) => match classify(n) {
            Class::Voter => Gate::pass(name, format!("{out} is a voter")),
            Class::EtcdOnly if may_be == Outgoing::VotingOrSteppedDown => {
                Gate::pass(name, format!("{out} is a voter at the etcd-only level"))
            }
            c => Gate::fail(name, format!("{out} is {}, not a voter", c.as_str())),
        },
    }
}

/// Gate: the incoming host may vote.
pub fn gate_incoming_eligible(v: &FleetView, incoming: &str) -> Gate {
    let name = GateName::IncomingEligible;
    let label = v.settings.names.eligible();
    match v.node(incoming) {
        None => Gate::fail(name, format!("no Node {incoming}")),
        Some(n) if n.eligible => match n.host.as_ref().and_then(|h| h.promotion.as_ref()) {
            Some(protocol::report::Eligibility::Ineligible { reasons }) => Gate::fail(
                name,
                format!(
                    "{incoming} carries {label}=true but reports it could not join as a server: {}",
                    reasons
                        .iter()
                        .map(|r| one_line(r))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            ),
            Some(protocol::report::Eligibility::Unknown) => Gate::fail(
                name,
                format!(
                    "{incoming} reports a promotion verdict this build does not know; upgrade fleet-role"
                ),
            ),
            Some(protocol::report::Eligibility::Ok) => Gate::pass(
                name,
                format!("{incoming} carries {label}=true and reports it could join"),
            ),
            // An actuator older than the preflight reports none: the label
            // decides, as it did before.
            None => Gate::pass(name, format!("{incoming} carries {label}=true")),
        },
        // The old label is one the host's own kubelet can set: it counts for
        // nothing, but the operator who set it should learn why.
        Some(n) if n.legacy_eligible => Gate::fail(
            name,
            format!(
                "{incoming} does not carry {label}=true (its {}=true no longer counts, as its own kubelet could set it; a cluster admin relabels it: `kubectl label node {incoming} {label}=true`)",
                v.settings.names.legacy_eligible()
            ),
        ),
        Some(_) => Gate::fail(name, format!("{incoming} does not carry {label}=true")),
    }
}

/// Gate: the incoming host's Node is Ready.
pub fn gate_incoming_ready(v: &FleetView, incoming: &str) -> Gate {
    let name = GateName::IncomingReady;
    match v.node(incoming) {
        None => Gate::fail(name, format!("no Node {incoming}")),
        Some(n) if n.ready => Gate::pass(name, format!("{incoming} is Ready")),
        Some(_) => Gate::fail(name, format!("{incoming} is not Ready")),
    }
}

/// Gate: the incoming host is an agent (and not the outgoing host).
pub fn gate_incoming_agent(v: &FleetView, out: &str, incoming: &str) -> Gate {
    let name = GateName::IncomingAgent;
    if out == incoming {
        return Gate::fail(name, "the incoming and outgoing hosts are the same Node");
    }
    match v.node(incoming) {
        None => Gate::fail(name, format!("no Node {incoming}")),
        Some(n) => match classify(n) {
            Class::Agent if !n.has_server_labels() => {
                Gate::pass(name, format!("{incoming} is an agent"))
            }
            Class::Agent => Gate::fail(
                name,
                format!("{incoming} still carries k3s's server labels"),
            ),
            c => Gate::fail(name, format!("{incoming} is {}, not an agent", c.as_str())),
        },
    }
}

/// Gate: the incoming host is a healthy voter.
pub fn gate_incoming_voter(v: &FleetView, incoming: &str) -> Gate {
    let name = GateName::IncomingVoter;
    match v.node(incoming) {
        None => Gate::fail(name, format!("no Node {incoming}")),
        Some(n) if is_healthy_voter(n) => {
            Gate::pass(name, format!("{incoming} is a healthy voter"))
        }
        Some(n) => Gate::fail(
            name,
            format!(
                "{incoming} is {}{}, not a healthy voter",
                classify(n).as_str(),
                if n.ready { "" } else { " and NotReady" }
            ),
        ),
    }
}

/// Gate: every voting member other than `out` is healthy (Node Ready,
/// `EtcdIsVoter` true, its host not known to have left).
pub fn gate_voters_healthy(v: &FleetView, out: &str) -> Gate {
    let name = GateName::VotersHealthy;
    let sick: Vec<String> = v
        .sorted()
        .into_iter()
        .filter(|n| n.name != out && is_voting(n) && !is_healthy_voter(n))
        .map(|n| {
            let mut why = Vec::new();
            if !n.ready {
                why.push("NotReady");
            }
            if !n.etcd_is_voter {
                why.push("not EtcdIsVoter");
            }
            if classify(n) == Class::RolledBack {
                why.push("its host left");
            }
            format!("{} ({})", n.name, why.join(", "))
        })
        .collect();
    if sick.is_empty() {
        Gate::pass(name, "every voter is Ready and EtcdIsVoter")
    } else {
        Gate::fail(name, format!("unhealthy voter: {}", sick.join(", ")))
    }
}

/// The learners pending, other than `except`'s: the Nodes' (by their
/// classes) and then etcd's own (by its member list, as the servers report
/// it: a learner's Node shows nothing of it on k3s), each named once. What
/// the `no-learner` gate refuses on, and what `run`'s metrics count.
pub fn pending_learners(v: &FleetView, except: Option<&str>) -> Vec<String> {
    let mut learners: Vec<String> = v
        .sorted()
        .into_iter()
        .filter(|n| classify(n) == Class::Learner && Some(n.name.as_str()) != except)
        .map(|n| n.name.clone())
        .collect();
    for l in etcd_learners(&v.etcd(), except) {
        if !learners.contains(&l) {
            learners.push(l);
        }
    }
    learners
}

/// Gate: no learner is pending (other than `except`, the swap's own
/// incoming host while it joins), by the Nodes and by etcd's member list
/// (a learner's Node shows nothing of it on k3s).
pub fn gate_no_learner(v: &FleetView, except: Option<&str>) -> Gate {
    let name = GateName::NoLearner;
    let learners = pending_learners(v, except);
    if learners.is_empty() {
        Gate::pass(name, "no learner")
    } else {
        Gate::fail(
            name,
            format!("a learner is pending: {}", learners.join(", ")),
        )
    }
}

/// Gate: removing `out`'s member keeps quorum, counting as `count` says.
pub fn gate_quorum_after_removal(v: &FleetView, out: &str, incoming: &str, count: Count) -> Gate {
    let name = GateName::QuorumAfterRemoval;
    let Some(o) = v.node(out) else {
        return Gate::fail(name, format!("no Node {out}"));
    };
    let mut voters = count_voters(v, Some(incoming));
    let promoting = count == Count::IncomingPromoted;
    if promoting && v.node(incoming).is_none_or(|n| !is_healthy_voter(n)) {
        voters.seen += 1;
        voters.healthy += 1;
    }
    let by_etcd = etcd_after_removal(&v.etcd(), out, promoting.then_some(incoming));
    check_removal(name, voters, removing(o), out, by_etcd)
}

/// Gate: removing `node`'s member (a rolled-back incoming host) keeps quorum.
pub fn gate_quorum_for(v: &FleetView, node: &str, incoming: Option<&str>) -> Gate {
    let name = GateName::QuorumAfterRemoval;
    let Some(n) = v.node(node) else {
        return Gate::fail(name, format!("no Node {node}"));
    };
    let by_etcd = etcd_after_removal(&v.etcd(), node, None);
    check_removal(name, count_voters(v, incoming), removing(n), node, by_etcd)
}

/// A removal's verdict: the Nodes' count, and etcd's own count of its
/// members where a view is known (`by_etcd`); both must keep quorum.
pub(super) fn check_removal(
    name: GateName,
    count: VoterCount,
    what: Removing,
    node: &str,
    by_etcd: Option<(usize, usize)>,
) -> Gate {
    let (m, h) = count.after_removal(what);
    let missing = if count.missing > 0 {
        format!(
            " ({} voter Node(s) missing, counted as down)",
            count.missing
        )
    } else {
        String::new()
    };
    let how = match what {
        Removing::HealthyVoter => "a healthy voter",
        Removing::DownVoter => "a down voter",
        Removing::NonVoter => "a non-voting member",
    };
    let (etcd_ok, etcd_text) = etcd_quorum_text(by_etcd);
    let text = format!(
        "removing {node} ({how}) leaves {h} healthy of {m} voting members, quorum {}{missing}{etcd_text}",
        quorum(m)
    );
    Gate::check(name, keeps_quorum(m, h) && etcd_ok, text)
}

/// Gate: stopping `node` while its member still votes (a rollback stops
/// the host first, and its member is removed only after) leaves a quorum
/// of healthy voters, by the Nodes and by etcd's members. A host that does
/// not vote by either passes.
pub fn gate_quorum_at_host_stop(v: &FleetView, node: &str) -> Gate {
    let name = GateName::QuorumAtHostStop;
    #[cfg(feature = "plant")]
    if plants::active(plants::Plant::SkipQuorumAtHostStop) {
        return Gate::pass(name, "not checked (a planted defect)");
    }
    let p = v.etcd();
    let by_node = v.node(node).is_some_and(is_voting);
    let member = p.of_node(node).filter(|m| !m.member.learner);
    if !by_node && member.is_none() {
        return Gate::pass(name, format!("{node} does not vote"));
    }
    let count = count_voters(v, Some(node));
    let m = count.members();
    let h = count
        .healthy
        .saturating_sub(usize::from(v.node(node).is_some_and(is_healthy_voter)));
    let mut text = format!(
        "stopping {node} before its member is removed leaves {h} healthy of {m} voting members, quorum {}",
        quorum(m)
    );
    let mut ok = keeps_quorum(m, h);
    if p.known() {
        let (em, eh) = p.voters_after(None);
        let eh = eh.saturating_sub(usize::from(member.is_some_and(|x| x.healthy)));
        text.push_str(&format!(
            "; by etcd's members: {eh} healthy of {em} voting, quorum {}",
            quorum(em)
        ));
        ok = ok && keeps_quorum(em, eh);
    }
    Gate::check(name, ok, text)
}

/// The preflight gates of a new swap, in the order they are printed.
pub fn preflight(v: &FleetView, out: &str, incoming: &str) -> Vec<Gate> {
    vec![
        gate_not_paused(v),
        gate_no_other_swap(v, out, incoming),
        gate_known_protocol(v, out, incoming),
        gate_outgoing_voter(v, out, Outgoing::Voting),
        gate_incoming_eligible(v, incoming),
        gate_incoming_ready(v, incoming),
        gate_incoming_agent(v, out, incoming),
        gate_voters_healthy(v, out),
        gate_no_learner(v, None),
        gate_quorum_after_removal(v, out, incoming, Count::IncomingPromoted),
        gate_outgoing_demotable(v, out),
        gate_actuators_alive(v, Some(out), Some(incoming)),
        gate_supported_release(v, Some(out), Some(incoming)),
    ]
    .into_iter()
    .chain(etcd_view_gates(v))
    .collect()
}

/// The gates re-checked right before the snapshot request and the promotion.
/// A grow has no outgoing voter (`out` is `None`): no removal follows, so
/// only the incoming host and the voters as they are are checked.
pub(super) fn promote_gates(v: &FleetView, out: Option<&str>, incoming: &str) -> Vec<Gate> {
    let o = out.unwrap_or_default();
    let mut gates = vec![gate_known_protocol(v, o, incoming)];
    gates.extend(out.map(|out| gate_outgoing_voter(v, out, Outgoing::Voting)));
    gates.extend([
        gate_incoming_eligible(v, incoming),
        gate_incoming_ready(v, incoming),
        gate_incoming_agent(v, o, incoming),
        gate_voters_healthy(v, o),
        gate_no_learner(v, None),
    ]);
    if let Some(out) = out {
        gates.extend([
            gate_quorum_after_removal(v, out, incoming, Count::IncomingPromoted),
            gate_outgoing_demotable(v, out),
        ]);
    }
    gates.push(gate_actuators_alive(v, out, Some(incoming)));
    gates.push(gate_supported_release(v, out, Some(incoming)));
    gates.extend(etcd_view_gates(v));
    gates
}

/// The gates re-checked right before the cordon, the step-down and the
/// removal of the outgoing host's member. A shrink has no incoming host
/// (`incoming` is `None`): the removal is counted over the voters as they
/// are.
pub(super) fn removal_gates(v: &FleetView, out: &str, incoming: Option<&str>) -> Vec<Gate> {
    let i = incoming.unwrap_or_default();
    let mut gates = vec![
        gate_known_protocol(v, out, i),
        gate_outgoing_voter(v, out, Outgoing::VotingOrSteppedDown),
    ];
    gates.extend(incoming.map(|i| gate_incoming_voter(v, i)));
    gates.extend([
        gate_voters_healthy(v, out),
        gate_no_learner(v, None),
        gate_quorum_after_removal(v, out, i, Count::AsItIs),
        gate_outgoing_demotable(v, out),
        gate_actuators_alive(v, Some(out), incoming),
        gate_supported_release(v, Some(out), incoming),
    ]);
    gates.extend(etcd_view_gates(v));
    gates
}

/// The gates before a down outgoing voter's member is removed ahead of the
/// promotion: those of the promotion that still apply once it is gone, and
/// `incoming-ready` until the incoming host is asked.
pub(super) fn down_removal_gates(v: &FleetView, out: &str, incoming: &str) -> Vec<Gate> {
    let mut gates = vec![
        gate_known_protocol(v, out, incoming),
        gate_outgoing_voter(v, out, Outgoing::Voting),
        gate_incoming_eligible(v, incoming),
        gate_voters_healthy(v, out),
        gate_no_learner(v, Some(incoming)),
        gate_quorum_after_removal(v, out, incoming, Count::AsItIs),
        gate_actuators_alive(v, None, Some(incoming)),
        gate_supported_release(v, None, Some(incoming)),
    ];
    gates.extend(etcd_view_gates(v));
    gates.extend(incoming_ready_until_asked(v, incoming));
    gates
}

/// The gates of a promotion after the outgoing voter's member is gone.
pub(super) fn late_promote_gates(v: &FleetView, out: &str, incoming: &str) -> Vec<Gate> {
    let mut gates = vec![
        gate_known_protocol(v, out, incoming),
        gate_incoming_eligible(v, incoming),
        gate_voters_healthy(v, out),
        gate_no_learner(v, Some(incoming)),
        gate_actuators_alive(v, None, Some(incoming)),
        gate_supported_release(v, None, Some(incoming)),
    ];
    gates.extend(etcd_view_gates(v));
    gates.extend(incoming_ready_until_asked(v, incoming));
    gates
}

/// `incoming-ready`, until the host is asked to promote: from then on its
/// agent is stopped and its server's kubelet starts only once etcd took the
/// member, so its Node is NotReady while it joins (the promotion's own
/// timeout bounds that).
pub(super) fn incoming_ready_until_asked(v: &FleetView, incoming: &str) -> Option<Gate> {
    let asked = v
        .node(incoming)
        .is_some_and(|i| i.marks.step_kind() == Some(StepKind::Promote));
    (!asked).then(|| gate_incoming_ready(v, incoming))
}

#[cfg(test)]
mod tests;
