//! The decision: what the watches hold and the host is, handed to
//! [`hostdecide::decide`], and its answer given to the step runner
//! ([`StepRunner::follow`]). Every report goes through
//! [`Memory::record`](super::memory::Memory::record).

use hostdecide::{Decision, HostState, Observation, Step, decide, decide::JoinTarget};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{Api, Client};
use protocol::{NodeName, names::LEASE_NAMESPACE, text::one_line};

use super::{
    context::{Context, secs_i64},
    heartbeat::Heartbeat,
    memory::{Copy, Memory},
    seen::Seen,
    step::StepRunner,
};
use crate::report;

/// One decision and what follows from it. An `Err` means the API failed.
pub(super) async fn evaluate(
    ctx: &Context,
    memory: &mut Memory,
    heartbeat: &mut Heartbeat,
    seen: &mut Seen,
    steps: &mut StepRunner,
    client: &Client,
) -> Result<(), kube::Error> {
    memory.adopt_host_copy(ctx);
    // A report the API refused is sent again once a heartbeat period
    // has passed; a refusal does not keep the heartbeat from beating.
    let again = memory
        .refused
        .as_ref()
        .is_none_or(|(at, _)| ctx.clock.since(*at) >= ctx.settings.heartbeat);
    if memory.copy == Copy::Unwritten
        && again
        && let Err(e) = memory.send(ctx, client).await
        && report::refusal(&e).is_none()
    {
        return Err(e);
    }
    heartbeat.beat(ctx, memory, client).await?;
    let Some(node) = seen.node.clone() else {
        return Ok(());
    };
    let names = ctx.settings.names.clone();
    let view = kubeview::node_facts(&names, &node);
    let join = match (
        view.marks.step_kind(),
        view.marks.join_node.as_deref().map(NodeName::parse),
    ) {
        (Some(protocol::StepKind::Promote), Some(Ok(name))) => {
            let nodes: Api<Node> = Api::all(client.clone());
            kubeview::join_target(nodes.get_opt(name.as_str()).await?.as_ref())
        }
        _ => JoinTarget::NotLooked,
    };
    heartbeat.read_membership(ctx).await;
    let mut decision = decision_on(ctx, heartbeat, seen, memory, &view, &join);
    if matches!(decision, Decision::Refuse { .. }) {
        // A refusal is written once and stands, and the Lease's watch may
        // not have shown yet the Lease the controller took before it
        // asked for the step (the two watches deliver in no set order):
        // a refusal is decided on the Lease as the API holds it now.
        let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
        let lease = leases.get_opt(&names.lease_name).await?;
        seen.lease_seen(&names, lease);
        decision = decision_on(ctx, heartbeat, seen, memory, &view, &join);
    }
    // A demotion whose agent could not start is refused before it
    // changes anything (resumed steps have changed the host already and
    // go on).
    if let Decision::Take {
        swap,
        step: step @ (Step::StepDown | Step::Finish),
        resume: false,
    } = &decision
    {
        let reasons = heartbeat.ineligibility(ctx, client).await?;
        if !reasons.is_empty() {
            // Each reason one line (they hold what the host's config
            // files hold), by the one rule.
            let reasons: Vec<String> = reasons.iter().map(|r| one_line(r)).collect();
            decision = Decision::Refuse {
                swap: swap.clone(),
                step: step.report_step(),
                reason: format!(
                    "this host is not eligible for demotion, its agent could not start: {}",
                    reasons.join("; ")
                ),
            };
        }
    }
    steps
        .follow(ctx, memory, client, decision, heartbeat.clock_offset())
        .await
}

/// The decision on the Node's `view` and the Lease as held, with the
/// host as it is now.
fn decision_on(
    ctx: &Context,
    heartbeat: &Heartbeat,
    seen: &Seen,
    memory: &Memory,
    view: &protocol::NodeFacts,
    join: &JoinTarget,
) -> Decision {
    // A role file that exists but cannot be read, or names no valid role,
    // is not "no role": every switch is refused until it is fixed.
    let role_file = host::role::read(&ctx.host.paths);
    let role_problem = role_file.as_ref().err().map(ToString::to_string);
    let member = ctx.host.member_name();
    let hs = HostState {
        role: role_file.ok().flatten(),
        datastore: ctx.host.has_datastore(),
        tombstone: ctx.host.has_tombstone(),
        etcd_lists_member: heartbeat.etcd_lists_member(&ctx.addresses, member.as_deref()),
        member,
    };
    let decision = decide(&Observation {
        now: ctx.clock.unix_secs(),
        node: view,
        lease: seen.lease.facts(),
        report: memory.report.as_ref(),
        host: hs,
        join,
        identity: &ctx.settings.names.controller_identity,
        skew_margin: secs_i64(ctx.settings.skew_margin),
        clock: heartbeat.clock_offset(),
        join_port: ctx.settings.join_port,
    });
    let decision = hostdecide::decide::with_role_file(decision, role_problem.as_deref());
    // The disk is read only when a promotion would be taken.
    let short = hostdecide::decide::takes_promotion(&decision)
        .then(|| host::preflight::datastore_short(&ctx.host.paths))
        .flatten();
    hostdecide::decide::with_datastore_room(decision, short.as_deref())
}
