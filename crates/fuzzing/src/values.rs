//! Values that travel as text between the principals: a host's report and
//! the etcd view in it, and the checked values (`protocol::validate`) every
//! name, id, URL and address from the API goes through.

use fleetdecide::SwapStep;
use protocol::{
    HolderIdentity, JoinUrl, NodeName, Phase, Report, Role, StepKind, SwapId,
    etcd::EtcdView,
    report::{Eligibility, MAX_REASON_CHARS, MAX_REASONS, MAX_REPORT_BYTES},
    validate::{InvalidValue, LabelKey, label_value, parse_address, shown},
};

use crate::{one_line, text};

/// Now, for the reports' ages (see `kube::NOW`).
const NOW: i64 = 1_796_124_731;

/// A host's report, as its report ConfigMap (or its key of the shared one) holds
/// it, read as the actuator reads its own ([`Report::parse`]) and as the
/// controller reads every host's ([`Report::from_json`], the two agreeing),
/// with the etcd view and the verdicts in its host part. A report read must
/// hold to the bounds the reader promises (the verdicts' reasons, the etcd
/// view that checks) and read back the same once written again, also when
/// cut to [`MAX_REPORT_BYTES`]; what is said of one that does not read
/// stays on one line.
///
/// Who writes it: each host's actuator, for its own key (the admission
/// policy keeps it there); a compromised host writes anything there, and
/// the controller weighs it. Whoever can update the ConfigMap writes any.
pub fn report(data: &[u8]) {
    let Some(raw) = text(data) else {
        return;
    };
    let parsed = Report::parse(raw);
    assert_eq!(Report::from_json(raw), parsed.as_ref().ok().cloned());
    let _ = protocol::version::of_report(raw);
    let r = match parsed {
        Ok(r) => r,
        Err(e) => {
            // The actuator logs why its report does not read: the value is
            // another principal's, so what is said of it stays on one line.
            let said = e.to_string();
            assert!(one_line(&said), "{said:?}");
            return;
        }
    };
    if let Some(h) = &r.host {
        assert!(h.heartbeat_at > 0, "{h:?}");
        for verdict in [&h.demotion, &h.promotion].into_iter().flatten() {
            if let Eligibility::Ineligible { reasons } = verdict {
                assert!(reasons.len() <= MAX_REASONS, "{reasons:?}");
                for reason in reasons {
                    assert!(
                        reason.chars().count() <= MAX_REASON_CHARS + 1 && one_line(reason),
                        "{reason:?}"
                    );
                }
            }
        }
        if let Some(view) = &h.etcd {
            assert_eq!(view.check(), Ok(()));
        }
    }

    // Written again, it reads back the same.
    let again = r.to_json();
    assert_eq!(Report::parse(&again).ok().as_ref(), Some(&r), "{again}");
    let (within, _dropped) = r.to_json_within(MAX_REPORT_BYTES);
    let cut = Report::parse(&within).expect("a report cut to its bound reads back");
    assert_eq!(
        (cut.step, cut.phase, &cut.settled, cut.seq),
        (r.step, r.phase, &r.settled, r.seq)
    );

    // What the host and the controller compute from it.
    let _ = r.heartbeat_age(NOW);
    let _ = r.has_settled(r.swap.as_ref(), r.step);
    let _ = r.is_running(r.swap.as_ref(), r.step);
    let next = Report::next(Some(&r), r.swap.clone(), r.step, Phase::Done, NOW);
    assert_eq!(next.seq, r.seq.saturating_add(1));
    assert!(next.settled.len() <= protocol::report::SETTLED_MEMORY.max(r.settled.len()));
    let _ = Report::newer(Some(r.clone()), Some(next));
}

/// etcd's view of the cluster as a server's report carries it (JSON),
/// read and checked as the controller does ([`EtcdView::check`]) before
/// anything decides on it: it round-trips, it is kept in a report's host
/// part exactly when it checks, and a view that checks answers every
/// question the gates ask of it.
///
/// Who writes it: each server's actuator, from what its local etcd member
/// answered (`etcdaccess::read`, over etcd's gRPC API, which checks it the
/// same way before it goes into the report); a compromised host writes any
/// view into its own report.
pub fn etcd_view(data: &[u8]) {
    let Some(raw) = text(data) else {
        return;
    };
    let Ok(view) = serde_json::from_str::<EtcdView>(raw) else {
        return;
    };
    let checked = view.check();
    if let Err(e) = &checked {
        assert!(one_line(&e.to_string()), "{e}");
    }
    let json = serde_json::to_string(&view).expect("a view serializes");
    assert_eq!(
        serde_json::from_str::<EtcdView>(&json).ok().as_ref(),
        Some(&view),
        "{json}"
    );

    // In a report's host part, the view is kept exactly when it checks.
    let report = format!(
        r#"{{"step":"none","phase":"done","startedAt":1,"updatedAt":1,"host":{{"heartbeatAt":1,"etcd":{json}}}}}"#
    );
    let r = Report::parse(&report).expect("a report around any view reads");
    let kept = r.host.and_then(|h| h.etcd);
    assert_eq!(kept.is_some(), checked.is_ok());

    if checked.is_ok() {
        assert!(view.member(view.member).is_some());
        assert_eq!(
            view.voters().count() + view.learners().count(),
            view.members.len()
        );
        assert_eq!(view.membership().len(), view.members.len());
        assert!(EtcdView::same_shape(Some(&view), Some(&view)));
        for m in &view.members {
            if let Some(host) = m.peer_host() {
                assert!(!host.is_empty());
            }
            if let Some(node) = m.node_name() {
                assert!(!node.is_empty() && m.name.starts_with(node));
            }
        }
    }
}

/// Every checked value of `protocol::validate` (and the protocol version
/// and step names), on the same text: a value taken reads back as itself,
/// a join URL's host and port make it again, and what is said of a value
/// refused stays on one short line.
///
/// Who writes it: whoever writes the Node marks, the Lease and the reports
/// (see [`node_marks`](crate::node_marks)): swap ids, Node names, join
/// URLs, addresses, steps and roles all come from there.
pub fn validated_values(data: &[u8]) {
    let Some(raw) = text(data) else {
        return;
    };
    let refused = |e: InvalidValue| {
        assert!(e.shown.chars().count() <= 48 + 3, "{:?}", e.shown);
        let msg = e.to_string();
        assert!(one_line(&msg), "{msg:?}");
    };
    match SwapId::parse(raw) {
        Ok(v) => {
            assert_eq!(v.as_str(), raw);
            let json = serde_json::to_string(&v).expect("serializes");
            assert_eq!(serde_json::from_str::<SwapId>(&json).ok(), Some(v));
        }
        Err(e) => refused(e),
    }
    match NodeName::parse(raw) {
        Ok(v) => {
            assert_eq!(v.as_str(), raw);
            assert!(raw.len() <= 253);
        }
        Err(e) => refused(e),
    }
    match LabelKey::parse(raw) {
        Ok(v) => assert_eq!(v.as_str(), raw),
        Err(e) => refused(e),
    }
    match HolderIdentity::parse(raw) {
        Ok(v) => assert!(v.as_str() == raw && one_line(raw)),
        Err(e) => refused(e),
    }
    match Role::parse(raw) {
        Ok(v) => assert_eq!(v.as_str(), raw),
        Err(e) => refused(e),
    }
    match StepKind::parse(raw) {
        Ok(v) => assert_eq!(v.as_str(), raw),
        Err(e) => refused(e),
    }
    if let Some(s) = SwapStep::parse(raw) {
        assert_eq!(s.as_str(), raw);
    }
    if let Some(v) = label_value(raw) {
        assert_eq!(v, raw);
    }
    match JoinUrl::parse(raw) {
        Ok(url) => {
            assert_eq!(JoinUrl::parse(url.as_str()).as_ref(), Ok(&url));
            assert!(url.port() > 0 && !url.host().is_empty(), "{url}");
            let made = format!("https://{}:{}", url.host(), url.port());
            let again = JoinUrl::parse(&made).expect("a join URL's host and port make one");
            assert_eq!((again.host(), again.port()), (url.host(), url.port()));
        }
        Err(e) => refused(e),
    }
    match parse_address(raw) {
        Ok(ip) => {
            let url = JoinUrl::for_address(ip, 6443);
            assert_eq!(JoinUrl::parse(url.as_str()).as_ref(), Ok(&url));
        }
        Err(e) => refused(e),
    }
    if let Err(e) = protocol::version::check(Some(raw)) {
        assert!(one_line(&e.to_string()), "{e}");
    }
    let s = shown(raw);
    assert!(one_line(&s) && s.chars().count() <= 48 + 3, "{s:?}");
    for max in [0, 1, 48, protocol::text::ONE_LINE_MAX] {
        let line = protocol::text::one_line_within(raw, max);
        assert!(
            one_line(&line) && line.chars().count() <= max + 1,
            "{line:?}"
        );
    }
}
