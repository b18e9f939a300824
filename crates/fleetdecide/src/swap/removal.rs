//! The removal of the outgoing host's member through k3s, and the wait for
//! the host to finish as an agent.

use super::{
    clean_up::{clean_up, finished},
    guard::{guarded, shut},
    step::{
        Progress, enter, outgoing, overdue, progress, promoted_clause, resume_hint, stop, wait,
    },
};
use crate::action::Action;
use crate::gates::removal_gates;
use crate::record::SwapStep;
use crate::view::{FleetView, Recorded};
use fleetfacts::reasons::{Awaiting, Reason, Write};
use protocol::text::one_line;
use protocol::view::{LeaseFacts, NodeFacts};
use protocol::{
    names::K3S_ETCD_REMOVE,
    report::{Detail, Phase, ReportStep},
    validate::{NodeName, SwapId},
};

pub(super) fn removal(v: &FleetView, l: &LeaseFacts, rec: &Recorded) -> Action {
    let out_node = match outgoing(rec) {
        Ok(n) => n.clone(),
        Err(a) => return a,
    };
    let out = out_node.as_str();
    let promoted = promoted_clause(rec);
    let o = v.node(out);
    // k3s writes `removed-node-name` even when `RemovePeer` matched no
    // member (its `node-address` not the member's peer host): the member
    // then still votes. The Node's word is taken only once no server's
    // view of etcd lists the member any more.
    let still_listed = v
        .etcd()
        .of_node(out)
        .map(|m| format!("{} ({})", one_line(&m.member.name), m.member.id));
    let node_says_gone = o.is_some_and(NodeFacts::member_gone);
    if o.is_some() && !v.member_gone(out) {
        if let Some(a) = enter(v, l, SwapStep::Removal) {
            return a;
        }
        let Some(o) = o else {
            return wait(
                v,
                l,
                SwapStep::Removal,
                Awaiting::NoNode {
                    node: out.to_string(),
                },
            );
        };
        let left = format!(
            "{promoted}{out} is cordoned, {}; k3s was {}asked to remove its member",
            if stepped_down(o, &rec.id) {
                "stepped down to the etcd-only level"
            } else {
                "down"
            },
            if o.k3s.remove_requested() {
                ""
            } else {
                "not yet "
            }
        );
        if overdue(v, l, SwapStep::Removal) {
            let next = match (&still_listed, node_says_gone) {
                (Some(member), true) => format!(
                    "k3s marked {out}'s member removed, but etcd still lists {member}: k3s matched no member (its node-address is not the member's peer address); remove it with `etcdctl member remove` on a voter; then {}",
                    resume_hint(rec)
                ),
                _ => format!(
                    "check k3s's managed-etcd-controller on the voters (it drops {K3S_ETCD_REMOVE} when etcd refuses for quorum); then {}",
                    resume_hint(rec)
                ),
            };
            return stop(
                SwapStep::Removal,
                Reason::MemberNotRemoved {
                    node: out.to_string(),
                    secs: v.settings.timeouts.removal,
                },
                left,
                next,
            );
        }
        if o.k3s.remove_requested() || node_says_gone {
            return wait(
                v,
                l,
                SwapStep::Removal,
                Awaiting::MemberRemoval {
                    node: out.to_string(),
                },
            );
        }
        let gates = removal_gates(v, out, rec.incoming.as_ref().map(NodeName::as_str));
        let on_shut = |failures| {
            wait(
                v,
                l,
                SwapStep::Removal,
                Awaiting::Gates {
                    before: Write::Removal,
                    failures,
                },
            )
        };
        return guarded(v, l, SwapStep::Removal, shut(&gates), on_shut, || {
            Action::RemoveMember {
                node: out_node.clone(),
            }
        });
    }
    // The member is gone. A host that stepped down finishes by itself; one
    // that was down (never stepped down) cannot, and is left to the operator.
    if let Some(o) = o
        && stepped_down(o, &rec.id)
        && !finished(o)
    {
        if let Some(a) = enter(v, l, SwapStep::Finish) {
            return a;
        }
        let left = format!(
            "{promoted}{out}'s member is removed; {out} is cordoned and has not finished as an agent"
        );
        if let Some(r) = &o.report
            && r.step == ReportStep::Finish
            && r.phase == Phase::Failed
        {
            return stop(
                SwapStep::Finish,
                Reason::HostReported {
                    node: out.to_string(),
                    step: ReportStep::Finish,
                    phase: Phase::Failed,
                    reason: r
                        .reason
                        .as_deref()
                        .map_or_else(|| "no reason given".into(), one_line),
                },
                left,
                format!(
                    "run `fleet-role-actuator demote-local --force` on {out} (idempotent; see docs/recovery.md); then {}",
                    resume_hint(rec)
                ),
            );
        }
        if overdue(v, l, SwapStep::Finish) {
            return stop(
                SwapStep::Finish,
                Reason::AgentNotReady {
                    node: out.to_string(),
                    secs: v.settings.timeouts.finish,
                },
                left,
                format!(
                    "check {out} (`fleet-role-actuator status`, `journalctl -u k3s-agent`); `fleet-role-actuator demote-local --force` finishes it; then {}",
                    resume_hint(rec)
                ),
            );
        }
        return wait(
            v,
            l,
            SwapStep::Finish,
            Awaiting::Finish {
                node: out.to_string(),
            },
        );
    }
    clean_up(v, l, rec)
}

/// The host stepped down (so it finishes by itself once its member is
/// gone): its report says it stands at the etcd-only level or finishes, or
/// this swap's step-down reached the etcd-only level or ended done, even if
/// the report has moved on to another step since (its settled history).
/// The one reading of the step-down for every decision: the swap's order
/// and the step-down's wait once read it two ways, and a report that moved
/// on flipped the Lease between the promotion and the removal without end.
pub(super) fn stepped_down(o: &NodeFacts, swap: &SwapId) -> bool {
    o.reports_etcd_only()
        || o.report
            .as_ref()
            .is_some_and(|r| r.step == ReportStep::Finish)
        || matches!(
            progress(o, swap, ReportStep::StepDown),
            Progress::Running(Some(Detail::EtcdOnly)) | Progress::Done(_)
        )
}
