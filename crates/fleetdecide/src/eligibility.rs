//! `run`'s operator settings around the pure policy
//! ([`crate::run::run_decision`]): replacing a voter only for
//! being ineligible happens when asked (`replace_ineligible`), never as a
//! surprise, and `run` will not start over a fleet whose labels would have
//! it churn.
//!
//! Why: labelling only the standbys eligible (an easy mistake: "these
//! may become voters") and starting `run` would otherwise swap out every
//! current server, one after another.

use std::borrow::Cow;

use fleetfacts::{Class, classify};

use crate::view::FleetView;

/// The view `run_decision` is asked about: unless `replace_ineligible`, a
/// voter's missing eligibility is not a reason to replace it (it still is
/// replaced when it is down past the grace period). The swap itself is
/// always driven on the real view.
pub fn run_view(v: &FleetView, replace_ineligible: bool) -> Cow<'_, FleetView> {
    if replace_ineligible
        || !v
            .nodes
            .iter()
            .any(|n| !n.eligible && classify(n) == Class::Voter)
    {
        return Cow::Borrowed(v);
    }
    let mut masked = v.clone();
    for n in &mut masked.nodes {
        if classify(n) == Class::Voter {
            n.eligible = true;
        }
    }
    Cow::Owned(masked)
}

/// Why `run` must not start over `v`, naming the Nodes to label; `None`
/// when it may. Without `replace_ineligible`, every voter must be eligible
/// already (run would otherwise leave it be, and a swap started by hand
/// could be undone); in both modes at least `voters` Nodes must be
/// eligible at all, voters and standbys, else the configured count could
/// never be reached and swaps could never end. Fewer voters than
/// configured, with standbys enough, is the voter set's grow to make.
pub fn eligibility_shortfall(v: &FleetView, replace_ineligible: bool) -> Option<String> {
    let want = v.settings.voters;
    let label = v.settings.names.eligible();
    let mut unlabelled: Vec<&str> = Vec::new();
    let mut eligible = 0;
    for n in &v.nodes {
        if n.eligible {
            eligible += 1;
        }
        if classify(n) == Class::Voter && !n.eligible {
            unlabelled.push(&n.name);
        }
    }
    unlabelled.sort_unstable();
    if !replace_ineligible && !unlabelled.is_empty() {
        return Some(format!(
            "the voters {} are not eligible; label them: `kubectl label node NODE {label}=true` (or set replace_ineligible = true to have run replace them by eligible standbys)",
            unlabelled.join(", ")
        ));
    }
    if eligible < want {
        return Some(format!(
            "only {eligible} Nodes carry {label}=true, fewer than the {want} voters configured: label {} more (`kubectl label node NODE {label}=true`)",
            want - eligible
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RunDecision, Settings, run_decision};
    use protocol::NodeFacts;

    fn voter(name: &str, eligible: bool) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            ready: true,
            etcd_is_voter: true,
            etcd_label: true,
            control_plane_label: true,
            eligible,
            k3s: protocol::K3sEtcd {
                node_name: Some(format!("{name}-0a1b2c3d")),
                ..Default::default()
            },
            ..NodeFacts::default()
        }
    }

    fn agent(name: &str, eligible: bool) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            ready: true,
            eligible,
            ..NodeFacts::default()
        }
    }

    /// The mistake: only the standbys labelled.
    fn only_standbys_labelled() -> FleetView {
        FleetView {
            now: 1000,
            settings: Settings::default(),
            nodes: vec![
                voter("n1", false),
                voter("n2", false),
                voter("n3", false),
                agent("n4", true),
                agent("n5", true),
            ],
            lease: None,
            pods: vec![],
        }
    }

    #[test]
    fn the_fixture_voters_are_voters() {
        let v = only_standbys_labelled();
        assert!(v.nodes[..3].iter().all(|n| classify(n) == Class::Voter));
    }

    #[test]
    fn run_starts_no_swap_for_an_ineligible_voter_unless_asked() {
        let v = only_standbys_labelled();
        assert!(matches!(
            run_decision(&run_view(&v, false)),
            RunDecision::Idle { .. }
        ));
        assert!(matches!(
            run_decision(&run_view(&v, true)),
            RunDecision::Swap { .. }
        ));
    }

    #[test]
    fn a_voter_down_past_its_grace_is_still_replaced_when_ineligible_ones_are_left_alone() {
        use crate::fixtures::{etcd_view, member};
        let mut v = only_standbys_labelled();
        // n1 and n3 report etcd's three members; n2 is down (NotReady, no
        // node Lease, no view of its own).
        let members: Vec<_> = (1..=3)
            .map(|i| member(i, &format!("n{i}"), false))
            .collect();
        for i in [0, 2] {
            v.nodes[i].host = Some(protocol::report::HostPart {
                heartbeat_at: 1000,
                demotion: None,
                promotion: None,
                etcd: Some(etcd_view(i as u64 + 1, 1000, 1, members.clone())),
                release: Some(protocol::version::RELEASE.into()),
                credential_expires_at: None,
            });
        }
        v.nodes[1].ready = false;
        v.nodes[1].ready_since = Some(0);
        let RunDecision::Swap { out, .. } = run_decision(&run_view(&v, false)) else {
            panic!("a down voter is replaced")
        };
        assert_eq!(out.as_str(), "n2");
    }

    #[test]
    fn run_refuses_to_start_naming_the_voters_to_label() {
        let v = only_standbys_labelled();
        let why = eligibility_shortfall(&v, false).expect("refused");
        assert!(
            why.contains("the voters n1, n2, n3 are not eligible"),
            "{why}"
        );
        let mut ok = v.clone();
        for n in &mut ok.nodes[..3] {
            n.eligible = true;
        }
        assert_eq!(eligibility_shortfall(&ok, false), None);
    }

    #[test]
    fn run_starts_below_the_configured_count_only_with_standbys_enough_to_grow_to_it() {
        let mut v = only_standbys_labelled();
        for n in &mut v.nodes[..3] {
            n.eligible = true;
        }
        v.settings.voters = 5;
        assert_eq!(eligibility_shortfall(&v, false), None, "two standbys");
        v.nodes[4].eligible = false;
        let why = eligibility_shortfall(&v, false).expect("one standby short");
        assert!(why.contains("label 1 more"), "{why}");
    }

    #[test]
    fn with_replacement_asked_run_needs_only_enough_eligible_nodes() {
        let mut v = only_standbys_labelled();
        assert!(
            eligibility_shortfall(&v, true).is_some(),
            "two eligible Nodes for three voters"
        );
        v.nodes[0].eligible = true;
        assert_eq!(eligibility_shortfall(&v, true), None);
    }
}
