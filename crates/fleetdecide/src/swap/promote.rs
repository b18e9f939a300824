//! The promotion of the incoming host: the gates before it, the request,
//! and the wait for a healthy voter that reported `voter`.

use super::guard::{guarded, refused, shut};
use super::step::{
    Progress, detail_word, enter, incoming, overdue, progress, resume_hint, stop, wait,
};
use crate::action::Action;
use crate::gates::{
    Count, etcd_view_gates, gate_incoming_eligible, gate_no_learner, gate_quorum_after_removal,
    gate_voters_healthy, incoming_ready_until_asked, late_promote_gates, promote_gates,
};
use crate::record::{StopKind, StopNote, SwapStep};
use crate::view::{FleetView, Recorded};
use fleetfacts::reasons::{Awaiting, Reached, Reason, VoterFor, Write};
use fleetfacts::{Class, classify, is_healthy_voter};
use protocol::view::{LeaseFacts, NodeFacts};
use protocol::{
    report::{Detail, Phase, ReportStep},
    validate::{NodeName, StepKind},
};

/// Where the promotion stands against the outgoing voter's removal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Order {
    /// The usual order: promote, then remove the outgoing voter. A failure
    /// winds the swap down to the cluster as it was.
    BeforeRemoval,
    /// The outgoing voter was down and its member is removed already (etcd
    /// adds no member while a voter is unreachable). A failure stops.
    AfterDownRemoval,
}

/// The incoming host is a healthy voter and reported `voter`.
pub(super) fn promoted(i: &NodeFacts) -> bool {
    let reported = i.report.as_ref().is_some_and(|r| {
        r.step == ReportStep::Promote
            && r.detail == Some(Detail::Voter)
            && matches!(r.phase, Phase::Progress | Phase::Done)
    });
    i.marks.step_kind() == Some(StepKind::Promote) && is_healthy_voter(i) && reported
}

/// The voter a promotion joins: a healthy voter other than the outgoing one,
/// preferring one whose address k3s has published.
pub fn join_voter(v: &FleetView, out: &str) -> Option<NodeName> {
    let candidates: Vec<&NodeFacts> = v
        .sorted()
        .into_iter()
        .filter(|n| n.name != out && classify(n) == Class::Voter && is_healthy_voter(n))
        .collect();
    candidates
        .iter()
        .find(|n| n.k3s.node_address.is_some())
        .or(candidates.first())
        .and_then(|n| NodeName::parse(&n.name).ok())
}

/// The address of `join`'s member as etcd's agreed view lists it (its
/// peer URL's host), recorded on the Lease with the promote ask.
fn join_address(v: &FleetView, join: &NodeName) -> Option<String> {
    v.etcd()
        .of_node(join.as_str())
        .and_then(|m| m.member.peer_host())
        .map(str::to_string)
}

pub(super) fn before_promote(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    if let Some(a) = enter(v, l, SwapStep::Promote) {
        return a;
    }
    let node = match incoming(rec) {
        Ok(n) => n.clone(),
        Err(a) => return a,
    };
    let gates = promote_gates(v, rec.out.as_ref().map(NodeName::as_str), node.as_str());
    guarded(
        v,
        l,
        SwapStep::Promote,
        shut(&gates),
        refused,
        || match join_voter(v, rec.out_name()) {
            Some(join) => Action::Promote {
                node,
                join_address: join_address(v, &join),
                join,
                swap: rec.id.clone(),
            },
            None => Action::BeginStop {
                note: StopNote {
                    kind: StopKind::Refused,
                    reason: Reason::NoHealthyVoter {
                        to: VoterFor::Join,
                        other_than: rec.out.as_ref().map(ToString::to_string),
                    },
                },
            },
        },
    )
}

/// Waits for the promotion. After a down voter's removal a failure stops
/// the swap instead of winding it down: the cluster cannot be put back.
pub(super) fn promote_wait(
    v: &FleetView,
    l: &LeaseFacts,
    rec: &Recorded,
    i: &NodeFacts,
    order: Order,
) -> Action {
    if let Some(a) = enter(v, l, SwapStep::Promote) {
        return a;
    }
    if i.marks.swap.as_deref() != Some(rec.id.as_str()) {
        // A promotion asked under an earlier id of this swap (it stopped
        // since): ask again under this id, the host's steps are idempotent.
        return promote_request(v, l, rec, order);
    }
    let (out, inc) = (rec.out_name(), rec.in_name());
    let fail = |why: Reason| {
        if order == Order::AfterDownRemoval {
            stop(
                SwapStep::Promote,
                why,
                format!(
                    "{out} was down and its member is removed; {inc} was asked to promote: the fleet has one voter fewer than configured"
                ),
                format!(
                    "see {inc}'s report (`fleet-role status`) and docs/recovery.md; once it can join, {} (it asks {inc} to promote again)",
                    resume_hint(rec)
                ),
            )
        } else {
            Action::BeginStop {
                note: StopNote {
                    kind: StopKind::Failed,
                    reason: why,
                },
            }
        }
    };
    match progress(i, &rec.id, ReportStep::Promote) {
        Progress::Failed(phase, reason) => fail(Reason::HostReported {
            node: i.name.clone(),
            step: ReportStep::Promote,
            phase,
            reason,
        }),
        state if overdue(v, l, SwapStep::Promote) => {
            let votes_in_etcd = v.etcd().of_node(&i.name).is_some_and(|m| !m.member.learner);
            let reached = match state {
                _ if votes_in_etcd && !i.etcd_is_voter => Reached::VoterInEtcdOnly,
                Progress::Running(Some(Detail::Learner)) => Reached::Learner,
                Progress::Running(Some(Detail::Voter)) | Progress::Done(_) => {
                    Reached::VoterNotHealthy
                }
                Progress::Running(_) => Reached::Started,
                _ => Reached::NoReport,
            };
            fail(Reason::NotVoter {
                node: i.name.clone(),
                secs: v.settings.timeouts.promote,
                reached,
            })
        }
        Progress::Running(milestone) => wait(
            v,
            l,
            SwapStep::Promote,
            Awaiting::Promotion {
                node: i.name.clone(),
                milestone: milestone.map(detail_word),
            },
        ),
        _ => wait(
            v,
            l,
            SwapStep::Promote,
            Awaiting::Promotion {
                node: i.name.clone(),
                milestone: None,
            },
        ),
    }
}

/// Asks (again) for the promotion under this swap's id: after a resume, or
/// once a down outgoing voter's member is gone.
pub(super) fn promote_request(
    v: &FleetView,
    l: &LeaseFacts,
    rec: &Recorded,
    order: Order,
) -> Action {
    if let Some(a) = enter(v, l, SwapStep::Promote) {
        return a;
    }
    let (out, inc) = (rec.out_name(), rec.in_name());
    let late = order == Order::AfterDownRemoval;
    let gates = if late {
        late_promote_gates(v, out, inc)
    } else {
        let mut gates = vec![
            gate_incoming_eligible(v, inc),
            gate_voters_healthy(v, out),
            gate_no_learner(v, Some(inc)),
        ];
        // A grow removes no member after its promotion.
        gates.extend(
            (!out.is_empty())
                .then(|| gate_quorum_after_removal(v, out, inc, Count::IncomingPromoted)),
        );
        gates.extend(etcd_view_gates(v));
        gates.extend(incoming_ready_until_asked(v, inc));
        gates
    };
    let join = join_voter(v, out);
    let blocked = if let Some(failures) = shut(&gates) {
        Some(Reason::GatesShut { failures })
    } else if join.is_none() {
        Some(Reason::NoHealthyVoter {
            to: VoterFor::Join,
            other_than: rec.out.as_ref().map(ToString::to_string),
        })
    } else {
        None
    };
    let on_blocked = |why: Reason| {
        if !late {
            return Action::BeginStop {
                note: StopNote {
                    kind: StopKind::Failed,
                    reason: why,
                },
            };
        }
        let (before, failures) = (Write::Promotion, why.to_string());
        if overdue(v, l, SwapStep::Promote) {
            return stop(
                SwapStep::Promote,
                Reason::GatesStayedShut { before, failures },
                format!(
                    "{out} was down and its member is removed; {inc} is not promoted: the fleet has one voter fewer than configured"
                ),
                format!("restore the voters' health, then {}", resume_hint(rec)),
            );
        }
        wait(
            v,
            l,
            SwapStep::Promote,
            Awaiting::Gates { before, failures },
        )
    };
    let node = match incoming(rec) {
        Ok(n) => n.clone(),
        Err(a) => return a,
    };
    guarded(v, l, SwapStep::Promote, blocked, on_blocked, || {
        let join = join.expect("checked above");
        Action::Promote {
            node,
            join_address: join_address(v, &join),
            join,
            swap: rec.id.clone(),
        }
    })
}
