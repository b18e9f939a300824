//! A host cut from the API (`Chaos::cut`): up, its k3s running and its
//! etcd member serving its peers (its datastore and its vote are what they
//! were in etcd's truth), but neither its actuator nor its kubelet reaches
//! the API server. What the real processes do then, and so the simulation:
//!
//! - the actuator's watches deliver nothing: it decides on its views as
//!   they were when the cut began (a resync decides again on them);
//! - every decision that would write fails at its first request
//!   (`crates/actuator/src/watch`): a refusal is decided on the Lease read
//!   again, which fails, so none is written; a step's start is written
//!   before anything changes, so a new step is not taken, but the report
//!   in memory moves on to `started` (`Memory::record`) and, once one write
//!   failed, every later decision begins by sending it again and fails
//!   before deciding; a resumed step reads the Lease again under the host
//!   lock, which fails, and stops with nothing changed; only a resumed
//!   finish needs no Lease, so it is carried out, and its first milestone
//!   is the report in memory;
//! - the report the API holds stays as it was until the cut ends, when the
//!   report in memory (also kept on the host's disk, so a reboot keeps it)
//!   is written first thing;
//! - its etcd view in the report goes stale (the heartbeat cannot write
//!   it), so after `actuator_heartbeat_max_age` the controller no longer
//!   takes the host's word that its member is healthy;
//! - its kubelet cannot renew its node Lease, so the Node controller marks
//!   it NotReady after its grace ([`NODE_MONITOR_GRACE`]), while in truth
//!   it is up and its member votes.
//!
//! So the controller may take the cut voter for down and replace it: its
//! member's removal must keep etcd's quorum counting that member healthy,
//! as it is. Not modelled: a cut between the host and its etcd peers
//! (etcd's own truth then loses the member), and the k3s agent's own
//! tunnel (a cut host's kubelet stays as it was).

use super::{Host, World};
use fleetdecide::{LeaseFacts, NodeFacts};
use hostdecide::{
    decide::{Decision, JoinTarget, Step},
    milestones::after_host_part,
};
use protocol::{
    clock_offset::ClockOffset,
    report::{Phase, Report, ReportStep},
    validate::StepKind,
};

/// Seconds without a node Lease renewal before the Node controller marks
/// a Node NotReady (`node-monitor-grace-period`, 40 s by default).
pub(super) const NODE_MONITOR_GRACE: i64 = 40;

/// The host cut from the API, and what its actuator holds meanwhile.
#[derive(Debug, Clone)]
pub(super) struct Cut {
    /// The host.
    pub name: String,
    /// Its actuator's views as the cut froze them: its Node, the Lease,
    /// and the tick of the Lease seen (writes before it are in it).
    pub view: Option<(NodeFacts, Option<LeaseFacts>, usize)>,
    /// The report in memory, ahead of the API's copy.
    pub unsent: Option<Report>,
    /// A write failed (or the actuator restarted and could not load its
    /// report): every decision now fails before it is made.
    pub stuck: bool,
}

/// At the start of `tick` (`rel` ticks into the change): begins or ends
/// the drawn cut, and counts it.
pub(super) fn at_tick(w: &mut World, rel: usize, tick: usize) {
    let want = w
        .faults
        .chaos
        .cut_at(rel)
        .map(|i| w.v.nodes[i % w.v.nodes.len()].name.clone());
    if w.cut.as_ref().map(|c| &c.name) != want.as_ref() {
        if let Some(c) = w.cut.take() {
            heal(w, c);
        }
        if let Some(name) = want {
            let stuck = !w.hosts[&name].up;
            w.cut = Some(Cut {
                name,
                view: None,
                unsent: None,
                stuck,
            });
        }
    }
    if let Some(c) = &w.cut {
        let name = c.name.clone();
        w.cut_seen.insert(name.clone(), tick);
        w.counts.cut_ticks += u64::from(w.hosts[&name].up);
        if looks_down(w, &name) {
            w.unreachable.insert(name, tick);
        }
    }
}

/// Whether `name` was cut from the API within the controller's lag and
/// looks down now ([`looks_down`]): the cut may have just ended, and the
/// host has written nothing yet.
pub(super) fn lately_cut_and_looking_down(w: &World, name: &str) -> bool {
    let lag = usize::from(super::views::MAX_LAG) + 1;
    w.cut_seen.get(name).is_some_and(|t| t + lag >= w.tick) && looks_down(w, name)
}

/// Whether the cut host `name` looks down by what no other principal
/// wrote: its Node marked NotReady (by the Node controller, its node Lease
/// unrenewed) and its own last view of etcd older than the controller
/// trusts (`actuator_heartbeat_max_age`), so its word no longer vouches
/// for its member. Only then may the controller replace it.
fn looks_down(w: &World, name: &str) -> bool {
    let Some(n) = w.v.node(name) else {
        return false;
    };
    let max_age = w.v.settings.actuator_heartbeat_max_age;
    let read_at = n
        .host
        .as_ref()
        .and_then(|h| h.etcd.as_ref())
        .map(|e| e.read_at);
    !n.ready && read_at.is_none_or(|t| w.v.now.saturating_sub(t) > max_age)
}

/// The cut ends: the report in memory is written first thing.
fn heal(w: &mut World, c: Cut) {
    if let Some(r) = c.unsent {
        w.node(&c.name).report = Some(r);
        w.counts.cut_reports += 1;
    }
}

/// Whether `name` is the host cut from the API now.
pub(super) fn is_cut(w: &World, name: &str) -> bool {
    w.cut.as_ref().is_some_and(|c| c.name == name)
}

/// The host went down (its actuator restarts with it): the report kept on
/// its disk stays, but a restarted actuator cannot load the API's copy,
/// and decides nothing until the cut ends.
pub(super) fn went_down(w: &mut World, name: &str) {
    if let Some(c) = w.cut.as_mut().filter(|c| c.name == name) {
        c.stuck = true;
    }
}

/// The cut host's kubelet: no renewal of its node Lease; the Node
/// controller marks it NotReady once the grace has passed.
pub(super) fn kubelet(n: &mut NodeFacts, now: i64) {
    let renewed = n.lease_renewed_at.unwrap_or(now);
    if n.ready && now.saturating_sub(renewed) > NODE_MONITOR_GRACE {
        n.ready = false;
        n.ready_since = Some(now);
    }
}

/// One decision of the cut host's actuator, on its frozen views, and what
/// comes of it (see the module's header).
pub(super) fn react(w: &mut World, name: &str, host: &Host, now: i64, clock: Option<ClockOffset>) {
    let Some(c) = w.cut.clone() else {
        return;
    };
    if c.stuck {
        return;
    }
    let (seen, lease, lease_tick) = match c.view {
        Some(v) => v,
        None => {
            let (n, l, t) = super::views::host_view(w, name);
            // A Lease seen with no lag holds every write made so far.
            let t = if t == usize::MAX { w.tick + 1 } else { t };
            let v = (n, l, t);
            if let Some(c) = w.cut.as_mut() {
                c.view = Some(v.clone());
            }
            v
        }
    };
    // A promotion's decision looks its join Node up first: that fails.
    if seen.marks.step_kind() == Some(StepKind::Promote) && seen.marks.join_node.is_some() {
        return;
    }
    let api_report = w.v.node(name).and_then(|n| n.report.clone());
    let memory = c.unsent.clone().or(api_report);
    w.counts.cut_decisions += 1;
    let decision = w.decide_on(
        name,
        host,
        now,
        clock,
        &seen,
        lease.as_ref(),
        memory.as_ref(),
        &JoinTarget::NotLooked,
    );
    let Decision::Take { swap, step, resume } = decision else {
        // A wait changes nothing; a refusal is decided on the Lease read
        // again, which fails.
        return;
    };
    let rstep = step.report_step();
    if !resume {
        w.check_take(name, host, swap.as_ref(), rstep, lease_tick, now);
        // The start is written before anything changes: its write fails,
        // the step is not taken, and the report in memory says `started`.
        let r = Report::next(memory.as_ref(), swap, rstep, Phase::Started, now);
        if let Some(c) = w.cut.as_mut() {
            c.unsent = Some(r);
            c.stuck = true;
        }
        return;
    }
    if rstep != ReportStep::Finish {
        // The Lease read again under the host lock fails: stopped,
        // nothing changed, nothing reported.
        return;
    }
    // A resumed finish needs no Lease: the host part is done, and the
    // first milestone's write fails.
    let h = w.hosts.get_mut(name).expect("a host");
    h.role = Some(protocol::validate::Role::Agent);
    h.datastore = false;
    let last = memory.as_ref().and_then(|r| r.detail);
    let first = after_host_part(&Step::Finish, last, seen.etcd_is_voter)
        .into_iter()
        .next();
    if let Some((phase, milestone)) = first {
        let r = Report::next(memory.as_ref(), swap, rstep, phase, now).with_detail(milestone);
        if let Some(c) = w.cut.as_mut() {
            c.unsent = Some(r);
            c.stuck = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Faults, World};
    use fleetdecide::{
        Action, SwapStep,
        fixtures::{fleet, request},
    };
    use protocol::{report::ReportStep, validate::Role};

    #[test]
    fn a_voter_cut_from_the_api_takes_no_step_turns_not_ready_after_the_grace_and_still_votes() {
        let mut faults = Faults {
            tick_secs: 5,
            ..Faults::default()
        };
        // n1, the outgoing voter, cut from the first tick for 150 s.
        faults.chaos.cut = Some((0, 30, 0));
        let mut w = World::new(fleet(), faults);
        let mut s = request("n1", "n4");
        let end = w.run_checked(
            &mut s,
            200,
            |w, _, _| {
                if w.tick >= 29 { Err(()) } else { Ok(()) }
            },
        );
        // Unreported, the step-down stops at its timeout, resumable.
        if let Ok(a) = &end {
            assert!(
                matches!(
                    a,
                    Action::Stop {
                        step: SwapStep::StepDown,
                        ..
                    }
                ),
                "{a:?}"
            );
        }
        let asked = w
            .writes
            .iter()
            .any(|a| matches!(a, fleetdecide::Action::StepDown { .. }));
        assert!(asked, "{:?}", w.writes);
        let n1 = w.v.node("n1").unwrap();
        assert!(!n1.ready, "the Node controller marks n1 NotReady");
        let stepped = n1
            .report
            .as_ref()
            .is_some_and(|r| r.step == ReportStep::StepDown);
        assert!(!stepped, "n1 wrote a report while cut: {:?}", n1.report);
        let h = &w.hosts["n1"];
        assert!(h.up && h.votes && h.role == Some(Role::Server), "{h:?}");
        assert!(w.violations.is_empty(), "{:?}", w.violations);
    }
}
