//! A replaced host's return: the writes `run` makes, outside any swap, to a
//! Node whose host came home as an agent by itself (its member removed while
//! it was down, so the swap that replaced it could not finish it).

use crate::action::Action;
use crate::swap::finished;
use crate::view::FleetView;
use protocol::validate::NodeName;
use protocol::view::NodeFacts;

/// One write `run` makes to tidy a returned host's Node, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tidy {
    /// The write (an uncordon, the swap's stale marks cleared, or the
    /// server labels and k3s's etcd annotations removed).
    pub action: Action,
    /// Why, one line.
    pub why: String,
}

/// The next write that makes a returned host a plain agent again (and so a
/// standby `run` may choose, once it has been healthy for
/// `standby_min_healthy`), or `None` when no Node needs one.
///
/// A host qualifies when it finished as an agent ([`finished`]: its report
/// says so, its Node is Ready and its kubelet renewed the node Lease since)
/// and its member is gone as the controller sees it
/// ([`FleetView::member_gone`]: k3s's mark that no server's view of etcd
/// contradicts), while its Node still shows the server it was (k3s's
/// labels or etcd annotations). The writes come in the order a swap's own
/// clean-up would make them, with the server labels last: they are what
/// marks the host as not yet tidied, so an operator who cordons the agent
/// afterwards is not overruled. Called only with no swap recorded on the
/// Lease and the Lease not held (a swap's own clean-up covers its hosts).
pub fn tidy(v: &FleetView) -> Option<Tidy> {
    let n = v.sorted().into_iter().find(|n| returned(v, n))?;
    let node = NodeName::parse(&n.name).ok()?;
    let why = format!(
        "{} came home as an agent after its member was removed while it was down",
        n.name
    );
    let action = if n.cordoned {
        Action::Uncordon { node }
    } else if n.marks.any_annotation() {
        Action::ClearSwapMarks { node }
    } else {
        Action::CleanUpServer { node }
    };
    Some(Tidy { action, why })
}

/// Whether `n`'s host came home as an agent and its Node still shows the
/// server it was.
fn returned(v: &FleetView, n: &NodeFacts) -> bool {
    (n.has_server_labels() || n.k3s.any()) && finished(n) && v.member_gone(&n.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use protocol::report::{Phase, Report, ReportStep};

    /// A fleet whose `n1` came home: its member removed by k3s, its host
    /// finished as an agent with no swap, Ready, its node Lease renewed
    /// since; still cordoned by the swap that replaced it, and still
    /// showing k3s's labels and annotations.
    fn came_home() -> FleetView {
        let mut v = fleet();
        let n = node_mut(&mut v, "n1");
        n.k3s.removed_node_name = n.k3s.node_name.clone();
        n.etcd_is_voter = false;
        n.cordoned = true;
        n.ready = true;
        n.report = Some(Report::next(
            None,
            None,
            ReportStep::Finish,
            Phase::Done,
            NOW - 60,
        ));
        n.lease_renewed_at = Some(NOW - 5);
        refresh_etcd_views(&mut v, |_| true);
        v
    }

    fn step(v: &mut FleetView) -> Option<Action> {
        let t = tidy(v)?;
        let node = t.action.node().unwrap().to_string();
        let after = crate::node_after(v.node(&node).unwrap(), &t.action).unwrap();
        *node_mut(v, &node) = after;
        Some(t.action)
    }

    #[test]
    fn a_host_that_came_home_is_uncordoned_then_loses_its_server_labels_and_k3s_annotations() {
        let mut v = came_home();
        node_mut(&mut v, "n1").marks.swap = Some("s1".into());
        let n1 = || NodeName::parse("n1").unwrap();
        assert_eq!(step(&mut v), Some(Action::Uncordon { node: n1() }));
        assert_eq!(step(&mut v), Some(Action::ClearSwapMarks { node: n1() }));
        assert_eq!(step(&mut v), Some(Action::CleanUpServer { node: n1() }));
        assert_eq!(step(&mut v), None);
        let n = v.node("n1").unwrap();
        assert!(!n.cordoned && !n.has_server_labels() && !n.k3s.any());
        assert!(tidy(&v).is_none());
        // Cordoned again afterwards by an operator: left alone.
        node_mut(&mut v, "n1").cordoned = true;
        assert_eq!(tidy(&v), None);
    }

    #[test]
    fn a_host_is_tidied_only_once_it_runs_as_an_agent_and_its_member_is_gone() {
        // Not finished: no report, a finish not done, NotReady, or its
        // kubelet silent since the finish began.
        let mut v = came_home();
        node_mut(&mut v, "n1").report = None;
        assert_eq!(tidy(&v), None);
        let mut v = came_home();
        node_mut(&mut v, "n1").report.as_mut().unwrap().phase = Phase::Failed;
        assert_eq!(tidy(&v), None);
        let mut v = came_home();
        node_mut(&mut v, "n1").ready = false;
        assert_eq!(tidy(&v), None);
        let mut v = came_home();
        node_mut(&mut v, "n1").lease_renewed_at = Some(NOW - 100);
        assert_eq!(tidy(&v), None);
        // k3s's removal claimed on its Node, but the servers' views of
        // etcd still list its member: it may still vote.
        let mut v = fleet();
        let home = came_home();
        *node_mut(&mut v, "n1") = home.node("n1").unwrap().clone();
        assert_eq!(tidy(&v), None);
        // No removal on its Node at all.
        let mut v = came_home();
        node_mut(&mut v, "n1").k3s.removed_node_name = None;
        assert_eq!(tidy(&v), None);
        // The whole of it: tidied.
        assert!(tidy(&came_home()).is_some());
        // Either k3s's labels or its annotations left is enough: an
        // operator who removed only the labels by hand.
        let mut v = came_home();
        let n = node_mut(&mut v, "n1");
        (n.etcd_label, n.control_plane_label, n.master_label) = (false, false, false);
        n.cordoned = false;
        assert_eq!(
            tidy(&v).map(|t| t.action),
            Some(Action::CleanUpServer {
                node: NodeName::parse("n1").unwrap()
            })
        );
    }

    #[test]
    fn run_tidies_a_returned_host_before_anything_else_and_never_beside_a_swap() {
        use crate::{LeaseFacts, RunDecision, run_decision};
        // A voter down past its grace too: the tidy comes first.
        let mut v = came_home();
        let n2 = node_mut(&mut v, "n2");
        n2.ready = false;
        n2.ready_since = Some(NOW - 10_000);
        assert!(matches!(
            run_decision(&v),
            RunDecision::Tidy {
                action: Action::Uncordon { .. },
                ..
            }
        ));
        // A swap recorded on the Lease, or the Lease held: the swap's own
        // clean-up covers its hosts; nothing is tidied beside it.
        let mut v = came_home();
        v.lease = Some(LeaseFacts {
            holder: Some(ME.into()),
            renew_time: Some(NOW),
            duration_secs: Some(30),
            ..LeaseFacts::default()
        });
        assert!(!matches!(run_decision(&v), RunDecision::Tidy { .. }));
        let mut v = came_home();
        v.lease = Some(LeaseFacts {
            swap: Some("s1".into()),
            swap_out: Some("n2".into()),
            swap_in: Some("n4".into()),
            ..LeaseFacts::default()
        });
        assert!(!matches!(run_decision(&v), RunDecision::Tidy { .. }));
        // Paused: nothing.
        let mut v = came_home();
        v.lease = Some(LeaseFacts {
            paused: true,
            ..LeaseFacts::default()
        });
        assert!(!matches!(run_decision(&v), RunDecision::Tidy { .. }));
    }
}
