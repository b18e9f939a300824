//! The regrade Lease: read into [`LeaseFacts`], and written back from its
//! before and after.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
};
use protocol::{LeaseFacts, Names, names::LEASE_NAMESPACE};
use serde_json::{Map, Value, json};

/// The regrade Lease as the decisions see it. An empty holder reads as none.
pub fn lease_facts(names: &Names, lease: &Lease) -> LeaseFacts {
    let spec = lease.spec.as_ref();
    let annotations = lease.metadata.annotations.as_ref();
    let annotation = |k: String| annotations.and_then(|a| a.get(&k)).cloned();
    LeaseFacts {
        holder: spec
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty()),
        instance: annotation(names.lease_instance()),
        renew_time: spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.as_second()),
        duration_secs: spec.and_then(|s| s.lease_duration_seconds).map(i64::from),
        swap: annotation(names.lease_swap()),
        swap_out: annotation(names.lease_swap_out()),
        swap_in: annotation(names.lease_swap_in()),
        snapshot_from: annotation(names.lease_swap_snapshot()),
        join_address: annotation(names.lease_swap_join()),
        asked: annotation(names.lease_swap_asked()),
        step: annotation(names.lease_step()),
        step_since: annotation(names.lease_step_since()).and_then(|s| s.parse().ok()),
        stopping: annotation(names.lease_stopping()),
        stopped: annotation(names.lease_stopped()),
        paused: annotation(names.lease_paused()).as_deref() == Some("true"),
        last_swap: annotation(names.lease_last_swap()),
        endings: annotation(names.lease_endings()),
        protocol: annotation(names.lease_protocol()),
    }
}

/// The Lease object to write so that it reads as `after`: `base` (the
/// object as read, `None` to create it) with fleet-role's annotations and
/// the spec set from `after`. Annotations fleet-role does not own are kept.
/// A renewal is stamped `stamp` (the precise time, where the views keep
/// seconds); a new holder gets `stamp` as its acquire time and counts a
/// transition, as Kubernetes' own leader election does.
pub fn lease_object(
    names: &Names,
    base: Option<&Lease>,
    before: &LeaseFacts,
    after: &LeaseFacts,
    stamp: MicroTime,
) -> Lease {
    let mut lease = base.cloned().unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: Some(names.lease_name.clone()),
            namespace: Some(LEASE_NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec::default()),
    });
    let annotations = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (key, value) in lease_annotations(names, after) {
        match value {
            Some(v) => annotations.insert(key, v),
            None => annotations.remove(&key),
        };
    }
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let new_holder = after.holder.is_some()
        && (after.holder != before.holder || after.instance != before.instance);
    if after.holder.is_some() && after.holder != before.holder {
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    spec.holder_identity = after.holder.clone();
    spec.lease_duration_seconds = after
        .duration_secs
        .map(|d| i32::try_from(d).unwrap_or(i32::MAX));
    if after.holder.is_none() {
        spec.acquire_time = None;
    } else if new_holder {
        spec.acquire_time = Some(stamp.clone());
    }
    if after.renew_time.is_none() {
        spec.renew_time = None;
    } else if after.renew_time != before.renew_time || new_holder {
        spec.renew_time = Some(stamp);
    }
    lease
}

/// fleet-role's annotations on the regrade Lease as `l` has them
/// (`None`: absent), in one list for every write of them.
fn lease_annotations(names: &Names, l: &LeaseFacts) -> [(String, Option<String>); 15] {
    let text = |v: &Option<String>| v.clone();
    [
        (names.lease_swap(), text(&l.swap)),
        (names.lease_swap_out(), text(&l.swap_out)),
        (names.lease_swap_in(), text(&l.swap_in)),
        (names.lease_swap_snapshot(), text(&l.snapshot_from)),
        (names.lease_swap_join(), text(&l.join_address)),
        (names.lease_swap_asked(), text(&l.asked)),
        (names.lease_instance(), text(&l.instance)),
        (names.lease_step(), text(&l.step)),
        (
            names.lease_step_since(),
            l.step_since.map(|s| s.to_string()),
        ),
        (names.lease_stopping(), text(&l.stopping)),
        (names.lease_stopped(), text(&l.stopped)),
        (names.lease_paused(), l.paused.then(|| "true".to_string())),
        (names.lease_last_swap(), text(&l.last_swap)),
        (names.lease_endings(), text(&l.endings)),
        (names.lease_protocol(), text(&l.protocol)),
    ]
}

/// The merge patch that takes the regrade Lease's annotations from
/// `before` to `after` (only those that differ, a removed one as `null`);
/// `None` when none differ. With `resource_version`, the patch carries it
/// as its precondition (a 409 if the Lease changed since it was read).
/// For the writes of one annotation by a process that does not hold the
/// Lease (`abort`, `pause`): the holder's spec is never touched.
pub fn lease_patch(
    names: &Names,
    before: &LeaseFacts,
    after: &LeaseFacts,
    resource_version: Option<&str>,
) -> Option<Value> {
    let mut annotations = Map::new();
    for ((key, b), (_, a)) in lease_annotations(names, before)
        .into_iter()
        .zip(lease_annotations(names, after))
    {
        if a != b {
            annotations.insert(key, a.map_or(Value::Null, Value::String));
        }
    }
    if annotations.is_empty() {
        return None;
    }
    let mut meta = Map::new();
    if let Some(rv) = resource_version {
        meta.insert("resourceVersion".into(), json!(rv));
    }
    meta.insert("annotations".into(), Value::Object(annotations));
    Some(json!({ "metadata": meta }))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn stamp(secs: i64) -> MicroTime {
        MicroTime(Timestamp::from_second(secs).unwrap())
    }

    fn held() -> LeaseFacts {
        LeaseFacts {
            holder: Some("fleet-role".into()),
            instance: Some("ctl-a".into()),
            renew_time: Some(1_000),
            duration_secs: Some(60),
            swap: Some("s1".into()),
            swap_out: Some("n1".into()),
            swap_in: Some("n4".into()),
            snapshot_from: Some("n2".into()),
            asked: Some("promote".into()),
            step: Some("promote".into()),
            step_since: Some(990),
            paused: true,
            protocol: Some("1".into()),
            ..LeaseFacts::default()
        }
    }

    #[test]
    fn a_lease_patch_names_only_the_annotations_that_change_with_its_precondition() {
        let names = Names::default();
        let before = held();
        assert_eq!(lease_patch(&names, &before, &before, Some("7")), None);
        let mut after = before.clone();
        after.paused = false;
        after.stopping = Some("{}".into());
        assert_eq!(
            lease_patch(&names, &before, &after, Some("7")).unwrap(),
            json!({"metadata": {
                "resourceVersion": "7",
                "annotations": {names.lease_paused(): null, names.lease_stopping(): "{}"},
            }})
        );
        assert_eq!(
            lease_patch(&names, &after, &before, None).unwrap(),
            json!({"metadata": {
                "annotations": {names.lease_paused(): "true", names.lease_stopping(): null},
            }})
        );
    }

    #[test]
    fn a_lease_written_from_facts_reads_back_as_the_same_facts() {
        let names = Names::default();
        let l = lease_object(&names, None, &LeaseFacts::default(), &held(), stamp(1_000));
        assert_eq!(lease_facts(&names, &l), held());
        assert_eq!(l.metadata.namespace.as_deref(), Some(LEASE_NAMESPACE));
        let spec = l.spec.unwrap();
        assert_eq!(spec.lease_transitions, Some(1));
        assert_eq!(spec.acquire_time, Some(stamp(1_000)));
    }

    #[test]
    fn a_release_removes_the_holder_and_the_swap_and_keeps_foreign_annotations() {
        let names = Names::default();
        let mut base = lease_object(&names, None, &LeaseFacts::default(), &held(), stamp(1_000));
        base.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert("example.com/other".into(), "kept".into());
        let after = LeaseFacts {
            duration_secs: Some(60),
            last_swap: Some("{}".into()),
            endings: Some("[]".into()),
            ..LeaseFacts::default()
        };
        let l = lease_object(&names, Some(&base), &held(), &after, stamp(1_010));
        assert_eq!(lease_facts(&names, &l), after);
        let spec = l.spec.as_ref().unwrap();
        assert_eq!(
            (&spec.holder_identity, &spec.acquire_time, &spec.renew_time),
            (&None, &None, &None)
        );
        assert_eq!(spec.lease_transitions, Some(1));
        assert_eq!(
            l.metadata
                .annotations
                .unwrap()
                .get("example.com/other")
                .map(String::as_str),
            Some("kept")
        );
    }

    #[test]
    fn a_renewal_is_stamped_precisely_and_keeps_the_acquire_time() {
        let names = Names::default();
        let base = lease_object(&names, None, &LeaseFacts::default(), &held(), stamp(1_000));
        let after = LeaseFacts {
            renew_time: Some(1_020),
            ..held()
        };
        let l = lease_object(&names, Some(&base), &held(), &after, stamp(1_020));
        let spec = l.spec.unwrap();
        assert_eq!(spec.renew_time, Some(stamp(1_020)));
        assert_eq!(spec.acquire_time, Some(stamp(1_000)));
        assert_eq!(spec.lease_transitions, Some(1));
    }

    #[test]
    fn a_duration_beyond_what_the_api_holds_is_written_as_the_largest_it_does() {
        let names = Names::default();
        let after = LeaseFacts {
            duration_secs: Some(i64::MAX),
            ..held()
        };
        let l = lease_object(&names, None, &LeaseFacts::default(), &after, stamp(1));
        assert_eq!(l.spec.unwrap().lease_duration_seconds, Some(i32::MAX));
    }

    #[test]
    fn an_empty_holder_reads_as_no_holder() {
        let l = Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(String::new()),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        assert_eq!(lease_facts(&Names::default(), &l).holder, None);
    }
}
