//! The milestones a host's step reports once its host part is done: the
//! one list the actuator writes and the simulations and test doubles
//! replay, so they cannot tell the controller a different story.

use protocol::report::{Detail, Phase};

use crate::decide::Step;

/// The reports a step makes after its host part succeeded, in order, each
/// a phase and its milestone. `last` is the milestone the host reported
/// before (a resumed step does not repeat one); `voter` is whether the
/// Node shows k3s's `EtcdIsVoter` (a promotion is done only then).
pub fn after_host_part(step: &Step, last: Option<Detail>, voter: bool) -> Vec<(Phase, Detail)> {
    match step {
        Step::Promote { .. } => {
            let mut m = Vec::new();
            if last.is_none() {
                m.push((Phase::Progress, Detail::Learner));
            }
            // k3s promotes a caught-up learner; EtcdIsVoter says so.
            if voter {
                if last != Some(Detail::Voter) {
                    m.push((Phase::Progress, Detail::Voter));
                }
                m.push((Phase::Done, Detail::Voter));
            }
            m
        }
        Step::StepDown => vec![
            (Phase::Progress, Detail::EtcdOnly),
            (Phase::Done, Detail::EtcdOnly),
        ],
        Step::Rollback => vec![
            (Phase::Progress, Detail::AgentReady),
            (Phase::Done, Detail::AgentReady),
        ],
        Step::Finish => vec![
            (Phase::Progress, Detail::MemberGone),
            (Phase::Progress, Detail::AgentReady),
            (Phase::Done, Detail::AgentReady),
        ],
        Step::Snapshot => vec![(Phase::Done, Detail::Snapshot)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::validate::{JoinUrl, NodeName};

    fn promote() -> Step {
        Step::Promote {
            join_node: NodeName::parse("n2").unwrap(),
            join: JoinUrl::parse("https://10.0.0.2:6443").unwrap(),
        }
    }

    #[test]
    fn a_promotion_reports_learner_first_and_is_done_only_as_a_voter() {
        assert_eq!(
            after_host_part(&promote(), None, false),
            vec![(Phase::Progress, Detail::Learner)]
        );
        assert_eq!(
            after_host_part(&promote(), Some(Detail::Learner), false),
            vec![]
        );
        assert_eq!(
            after_host_part(&promote(), Some(Detail::Learner), true),
            vec![
                (Phase::Progress, Detail::Voter),
                (Phase::Done, Detail::Voter)
            ]
        );
        assert_eq!(
            after_host_part(&promote(), Some(Detail::Voter), true),
            vec![(Phase::Done, Detail::Voter)]
        );
        assert_eq!(
            after_host_part(&promote(), None, true),
            vec![
                (Phase::Progress, Detail::Learner),
                (Phase::Progress, Detail::Voter),
                (Phase::Done, Detail::Voter)
            ]
        );
    }

    #[test]
    fn every_other_step_ends_done_with_its_own_milestone() {
        for (step, last, n) in [
            (Step::StepDown, Detail::EtcdOnly, 2),
            (Step::Rollback, Detail::AgentReady, 2),
            (Step::Finish, Detail::AgentReady, 3),
            (Step::Snapshot, Detail::Snapshot, 1),
        ] {
            let m = after_host_part(&step, None, false);
            assert_eq!(m.len(), n, "{step:?}");
            assert_eq!(m.last(), Some(&(Phase::Done, last)), "{step:?}");
        }
        assert_eq!(
            after_host_part(&Step::Finish, None, false)[0],
            (Phase::Progress, Detail::MemberGone)
        );
    }
}
