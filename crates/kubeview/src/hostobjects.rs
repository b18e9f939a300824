//! A host's own objects in the hosts' namespace: its heartbeat Lease and
//! its report ConfigMap, both named for its Node. The actuator writes them
//! through these functions and the controller reads them through them, so
//! a field is never read one way and written another.
//!
//! The heartbeat is renewed every heartbeat period and costs etcd a few
//! hundred bytes; the report is written only when it changes. Neither
//! grows with the fleet.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        coordination::v1::{Lease, LeaseSpec},
        core::v1::ConfigMap,
    },
    apimachinery::pkg::apis::meta::v1::MicroTime,
};
use protocol::{
    Names,
    names::{HOST_REPORT_KEY, MAX_REFUSAL_CHARS},
};

/// A host's heartbeat as its Lease shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heartbeat {
    /// When the host last renewed it (unix seconds, its clock).
    pub renewed_at: Option<i64>,
    /// Why the API refused the host's last report, while that stands.
    pub report_refused: Option<String>,
}

/// The report value a host's ConfigMap holds (none: no report yet).
pub fn report_value(cm: &ConfigMap) -> Option<&str> {
    cm.data.as_ref()?.get(HOST_REPORT_KEY).map(String::as_str)
}

/// Of a host's report in its own ConfigMap (`own`) and under its key of the
/// shared ConfigMap of earlier releases (`shared`), the one to read: the
/// higher `seq` (a host's actuator starts from the copy of its report it
/// kept, so its `seq` counts on across the move), its own on a tie; a value
/// that does not parse loses to one that does.
pub fn newer_report<'a>(own: Option<&'a str>, shared: Option<&'a str>) -> Option<&'a str> {
    let seq = |raw: Option<&str>| raw.and_then(protocol::Report::from_json).map(|r| r.seq);
    match (seq(own), seq(shared)) {
        (Some(a), Some(b)) if b > a => shared,
        (Some(_), _) => own,
        (None, Some(_)) => shared,
        (None, None) => own.or(shared),
    }
}

/// The reports `cms` (hosts' report ConfigMaps) hold, raw, by Node.
pub fn reports_by_node<'a>(
    cms: impl IntoIterator<Item = &'a ConfigMap>,
) -> BTreeMap<String, String> {
    cms.into_iter()
        .filter_map(|cm| Some((cm.metadata.name.clone()?, report_value(cm)?.to_string())))
        .collect()
}

/// Puts `value` as the report of `cm`, the one key it holds.
pub fn set_report(cm: &mut ConfigMap, value: String) {
    cm.data = Some(BTreeMap::from([(HOST_REPORT_KEY.to_string(), value)]));
}

/// The heartbeat a host's Lease carries. A holder other than `node` is no
/// heartbeat of that host's (the hosts' policy refuses one, so only an
/// admin could write it).
pub fn heartbeat(names: &Names, node: &str, lease: &Lease) -> Heartbeat {
    let spec = lease.spec.as_ref();
    let held = spec
        .and_then(|s| s.holder_identity.as_deref())
        .is_some_and(|h| h == node);
    Heartbeat {
        renewed_at: spec
            .filter(|_| held)
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.as_second()),
        report_refused: lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(&names.report_refused()))
            .map(|r| protocol::text::one_line_within(r, MAX_REFUSAL_CHARS)),
    }
}

/// Renews `lease` as `node`'s heartbeat at `stamp`, valid `duration_secs`,
/// with the refusal of its last report set (cut to [`MAX_REFUSAL_CHARS`],
/// which the hosts' policy allows) or cleared.
pub fn renew(
    names: &Names,
    lease: &mut Lease,
    node: &str,
    stamp: MicroTime,
    duration_secs: i32,
    refused: Option<&str>,
) {
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(node.to_string());
    spec.lease_duration_seconds = Some(duration_secs);
    spec.renew_time = Some(stamp);
    let key = names.report_refused();
    let annotations = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
    match refused {
        Some(r) => {
            // One character left for the `…` of a cut refusal.
            let cut = protocol::text::one_line_within(r, MAX_REFUSAL_CHARS - 1);
            annotations.insert(key, cut);
        }
        None => {
            annotations.remove(&key);
        }
    }
    if annotations.is_empty() {
        lease.metadata.annotations = None;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn stamp(secs: i64) -> MicroTime {
        MicroTime(Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn a_renewal_is_read_back_as_the_hosts_heartbeat_with_its_refusal() {
        let names = Names::default();
        let mut lease = Lease::default();
        renew(
            &names,
            &mut lease,
            "n1",
            stamp(100),
            60,
            Some("403 Forbidden: too big"),
        );
        let hb = heartbeat(&names, "n1", &lease);
        assert_eq!(hb.renewed_at, Some(100));
        assert_eq!(hb.report_refused.as_deref(), Some("403 Forbidden: too big"));
        renew(&names, &mut lease, "n1", stamp(160), 60, None);
        let hb = heartbeat(&names, "n1", &lease);
        assert_eq!((hb.renewed_at, hb.report_refused), (Some(160), None));
        assert_eq!(lease.metadata.annotations, None);
    }

    #[test]
    fn a_lease_held_by_another_name_is_no_heartbeat_of_the_host() {
        let names = Names::default();
        let mut lease = Lease::default();
        renew(&names, &mut lease, "n2", stamp(100), 60, None);
        assert_eq!(heartbeat(&names, "n1", &lease).renewed_at, None);
    }

    #[test]
    fn a_long_refusal_is_cut_to_what_the_policy_allows_on_one_line() {
        let names = Names::default();
        let mut lease = Lease::default();
        let long = format!("line one\n{}", "x".repeat(2 * MAX_REFUSAL_CHARS));
        renew(&names, &mut lease, "n1", stamp(1), 60, Some(&long));
        let kept = &lease.metadata.annotations.as_ref().unwrap()[&names.report_refused()];
        assert_eq!(kept.chars().count(), MAX_REFUSAL_CHARS);
        assert!(!kept.contains('\n'));
    }

    #[test]
    fn of_a_hosts_own_and_shared_reports_the_higher_seq_is_read_its_own_on_a_tie() {
        let report = |seq: u64| {
            let mut r = protocol::Report::next(
                None,
                None,
                protocol::report::ReportStep::None,
                protocol::Phase::Done,
                1,
            );
            r.seq = seq;
            r.to_json()
        };
        let (three, five, five_too) = (report(3), report(5), report(5));
        assert_eq!(newer_report(Some(&five), Some(&three)), Some(five.as_str()));
        assert_eq!(newer_report(Some(&three), Some(&five)), Some(five.as_str()));
        assert!(std::ptr::eq(
            newer_report(Some(&five), Some(&five_too)).unwrap(),
            five.as_str()
        ));
        assert_eq!(
            newer_report(Some("bad"), Some(&three)),
            Some(three.as_str())
        );
        assert_eq!(newer_report(None, Some(&three)), Some(three.as_str()));
        assert_eq!(newer_report(Some("bad"), None), Some("bad"));
        assert_eq!(newer_report(None, None), None);
    }

    #[test]
    fn the_report_is_the_one_key_of_its_config_map() {
        let mut cm = ConfigMap::default();
        assert_eq!(report_value(&cm), None);
        cm.data = Some(BTreeMap::from([("other".into(), "x".into())]));
        set_report(&mut cm, "{}".into());
        assert_eq!(report_value(&cm), Some("{}"));
        assert_eq!(cm.data.as_ref().unwrap().len(), 1);
    }
}
