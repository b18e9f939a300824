//! `fleet-role status`: the fleet at a glance.

use protocol::{
    controller::{
        self, Class, FleetView, LeaseFacts, NodeFacts, classify, count_voters, is_healthy_voter,
        quorum,
    },
    report::{Phase, Report},
    version,
};
use serde_json::{Value, json};

use crate::config::Settings;
use kubeview::time::{rfc3339, with_times};

fn age(now: i64, t: i64) -> String {
    // `t` may come from a Lease annotation anyone with write access set.
    let d = now.saturating_sub(t);
    match d {
        d if d < 0 => "in the future".into(),
        d if d < 120 => format!("{d}s ago"),
        d if d < 7200 => format!("{}m ago", d / 60),
        d => format!("{}h ago", d / 3600),
    }
}

/// The protocol version a host's report is in, for the table: `-` with no
/// report, the version, or the raw value marked unknown.
fn protocol_cell(n: &NodeFacts) -> String {
    if n.report.is_none() && n.report_protocol.is_none() {
        return "-".into();
    }
    match version::check(n.report_protocol.as_deref()) {
        Ok(v) => v.to_string(),
        Err(e) => format!("{} (unknown)", e.shown),
    }
}

/// The demotion verdict of a host's report: `yes`, `NO` (the reasons are
/// in `swap --dry-run`'s `outgoing-demotable` and in `--output json`),
/// `unknown` (a newer actuator's), `-` (none reported: an agent, or an
/// actuator older than this controller).
fn demotable_cell(n: &protocol::NodeFacts) -> String {
    use protocol::report::Eligibility;
    match n.host.as_ref().and_then(|h| h.demotion.as_ref()) {
        Some(Eligibility::Ok) => "yes".into(),
        Some(Eligibility::Ineligible { .. }) => "NO".into(),
        Some(Eligibility::Unknown) => "unknown".into(),
        None => "-".into(),
    }
}

/// A report in one line.
pub fn report_line(now: i64, r: &Report) -> String {
    let phase = match r.phase {
        Phase::Started => "started",
        Phase::Progress => "in progress",
        Phase::Done => "done",
        Phase::Refused => "refused",
        Phase::Failed => "failed",
    };
    let mut s = format!(
        "{} {} {phase}",
        r.step.as_str(),
        r.swap.as_ref().map_or("-", |s| s.as_str())
    );
    if let Some(d) = r.detail {
        s.push_str(&format!(
            " ({})",
            serde_json::to_value(d)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default()
        ));
    }
    s.push_str(&format!(" {}", age(now, r.updated_at)));
    if let Some(f) = &r.snapshot_file {
        s.push_str(&format!(", file {}", controller::one_line(f)));
    }
    if let Some(why) = &r.reason {
        s.push_str(&format!(": {}", controller::one_line(why)));
    }
    s
}

fn lease_lines(v: &FleetView, settings: &Settings, l: Option<&LeaseFacts>) -> Vec<String> {
    let name = settings.lease_ref();
    let Some(l) = l else {
        return vec![format!(
            "Lease {name}: missing (apply deploy/rbac/controller.yaml)"
        )];
    };
    let mut out = Vec::new();
    let held = l.is_held(v.now);
    let holder = match (&l.holder, held) {
        (Some(h), true) => format!(
            "held by {} (instance {}), renewed {}, lapses in {} s",
            controller::one_line(h),
            controller::one_line(l.instance.as_deref().unwrap_or("-")),
            l.renew_time.map_or("never".into(), |t| age(v.now, t)),
            l.expiry().unwrap_or(v.now).saturating_sub(v.now)
        ),
        (Some(h), false) => format!("lapsed (last held by {})", controller::one_line(h)),
        (None, _) => "free".into(),
    };
    out.push(format!("Lease {name}: {holder}"));
    if let Some(r) = l.recorded_swap() {
        out.push(format!("  swap {}: out {}, in {}", r.id, r.out, r.incoming));
        if let (Some(step), Some(since)) = (l.current_step(), l.step_since) {
            let deadline = settings
                .core
                .timeouts
                .of(step)
                .map(|t| {
                    let left = since.saturating_add(t).saturating_sub(v.now);
                    format!(", times out in {left} s")
                })
                .unwrap_or_default();
            out.push(format!(
                "  step {} since {}{deadline}",
                step.as_str(),
                age(v.now, since)
            ));
        }
        if let Some(note) = l.stop_note() {
            out.push(format!("  winding down: {}", note.reason));
        }
        if let Some(s) = &l.stopped {
            out.push(format!(
                "  STOPPED: {}; resume with `fleet-role swap --out {} --in {}`",
                controller::one_line(s),
                r.out,
                r.incoming
            ));
        }
    }
    out.push(format!(
        "  paused: {}",
        if l.paused {
            "yes (`fleet-role resume` lifts it)"
        } else {
            "no"
        }
    ));
    if let Some(last) = l.last() {
        let how = match &last.outcome {
            controller::Outcome::Done { warning: None } => "done".to_string(),
            controller::Outcome::Done { warning: Some(w) } => format!("done; {w}"),
            controller::Outcome::WoundDown { reason, .. } => format!("wound down: {reason}"),
        };
        out.push(format!(
            "  last swap {} (out {}, in {}) {}: {how}",
            controller::one_line(&last.swap),
            controller::one_line(&last.out),
            controller::one_line(&last.incoming),
            age(v.now, last.at)
        ));
    }
    out
}

fn names_of(v: &FleetView, class: Class) -> String {
    let mut names: Vec<String> = v
        .nodes
        .iter()
        .filter(|n| classify(n) == class)
        .map(|n| {
            let mut s = n.name.clone();
            let mut notes = Vec::new();
            if !n.ready {
                notes.push("NotReady");
            }
            if class == Class::Agent && n.eligible {
                notes.push("eligible");
            }
            if n.cordoned {
                notes.push("cordoned");
            }
            if !notes.is_empty() {
                s.push_str(&format!(" ({})", notes.join(", ")));
            }
            s
        })
        .collect();
    names.sort();
    if names.is_empty() {
        "-".into()
    } else {
        names.join(", ")
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// The status as text lines.
pub fn text(v: &FleetView, settings: &Settings) -> String {
    let mut lines = lease_lines(v, settings, v.lease.as_ref());
    let degraded = controller::degraded(v);
    if degraded.is_empty() {
        lines.push("Health: nothing degraded".into());
    } else {
        lines.extend(degraded.iter().map(|d| format!("DEGRADED: {d}")));
    }
    lines.push(format!(
        "Protocol: this controller writes version {} and reads {} to {}",
        version::PROTOCOL_VERSION,
        version::OLDEST_KNOWN,
        version::PROTOCOL_VERSION
    ));
    let count = count_voters(v, v.lease.as_ref().and_then(|l| l.swap_in.as_deref()));
    lines.push(format!(
        "Voters: {} seen ({} healthy) of {} configured{}; quorum {}",
        count.seen,
        count.healthy,
        settings.core.voters,
        if count.missing > 0 {
            format!(", {} missing", count.missing)
        } else {
            String::new()
        },
        quorum(count.members())
    ));
    for (label, class) in [
        ("  voters", Class::Voter),
        ("  learners", Class::Learner),
        ("  etcd-only", Class::EtcdOnly),
        ("  rolled back", Class::RolledBack),
        ("  removed", Class::Removed),
        ("  agents", Class::Agent),
    ] {
        let names = names_of(v, class);
        if names != "-"
            || matches!(
                class,
                Class::Voter | Class::Learner | Class::EtcdOnly | Class::Agent
            )
        {
            lines.push(format!("{label:<13} {names}"));
        }
    }
    let mut nodes: Vec<&NodeFacts> = v.nodes.iter().collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let rows: Vec<[String; 11]> = nodes
        .iter()
        .map(|n| {
            let step = match (&n.marks.step, &n.marks.snapshot_request) {
                (Some(s), _) => controller::one_line(s),
                (None, Some(_)) => "snapshot".into(),
                (None, None) => "-".into(),
            };
            [
                n.name.clone(),
                classify(n).as_str().into(),
                yes(n.ready).into(),
                if controller::is_voting(n) {
                    yes(is_healthy_voter(n)).into()
                } else {
                    "-".into()
                },
                yes(n.eligible).into(),
                yes(n.cordoned).into(),
                step,
                protocol_cell(n),
                n.host
                    .as_ref()
                    .map_or("-".into(), |h| age(v.now, h.heartbeat_at)),
                demotable_cell(n),
                n.report
                    .as_ref()
                    .map_or("-".into(), |r| report_line(v.now, r)),
            ]
        })
        .collect();
    let header = [
        "NODE",
        "CLASS",
        "READY",
        "HEALTHY",
        "ELIGIBLE",
        "CORDONED",
        "STEP",
        "PROTOCOL",
        "HEARTBEAT",
        "DEMOTABLE",
        "LAST REPORT",
    ];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let fmt_row = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        s
    };
    lines.push(String::new());
    lines.push(fmt_row(header.to_vec()));
    for r in &rows {
        lines.push(fmt_row(r.iter().map(String::as_str).collect()));
    }
    lines.join("\n")
}

/// The status as one JSON object.
pub fn json(v: &FleetView, settings: &Settings) -> Value {
    let count = count_voters(v, v.lease.as_ref().and_then(|l| l.swap_in.as_deref()));
    let nodes: Vec<Value> = v
        .nodes
        .iter()
        .map(|n| {
            json!({
                "name": n.name,
                "class": classify(n),
                "ready": n.ready,
                "healthyVoter": is_healthy_voter(n),
                "eligible": n.eligible,
                "cordoned": n.cordoned,
                "marks": n.marks,
                // The report's version (1 for none written); the raw value
                // where this build does not know it.
                "protocol": match version::check(n.report_protocol.as_deref()) {
                    Ok(v) => json!(v),
                    Err(e) => json!(e.shown),
                },
                "report": n.report.as_ref().map(|r| with_times(json!(r), &["startedAt", "updatedAt"])),
                // The actuator's heartbeat and the demotion verdict, with
                // the heartbeat's age by this controller's clock.
                "host": n.host.as_ref().map(|h| json!({
                    "heartbeatAt": rfc3339(Some(h.heartbeat_at)),
                    "heartbeatAgeSecs": v.now.saturating_sub(h.heartbeat_at),
                    "demotion": h.demotion,
                })),
            })
        })
        .collect();
    json!({
        "lease": v.lease.as_ref().map(|l| json!({
            "name": settings.lease_ref(),
            "holder": l.holder,
            "instance": l.instance,
            "held": l.is_held(v.now),
            "expiresAt": rfc3339(l.expiry()),
            "swap": l.recorded_swap(),
            "step": l.step,
            "stepSince": rfc3339(l.step_since),
            "stopped": l.stopped,
            "windingDown": l.stop_note(),
            "paused": l.paused,
            "lastSwap": l.last().map(|s| with_times(json!(s), &["at"])),
            "protocol": l.protocol,
        })),
        "degraded": controller::degraded(v),
        "protocol": {"writes": version::PROTOCOL_VERSION, "reads": [version::OLDEST_KNOWN, version::PROTOCOL_VERSION]},
        "voters": {"seen": count.seen, "healthy": count.healthy, "missing": count.missing, "configured": settings.core.voters, "quorum": quorum(count.members())},
        "nodes": nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_age_from_an_extreme_time_on_the_lease_is_shown_not_overflowed() {
        assert_eq!(age(1_000, 1_000 - 90), "90s ago");
        assert_eq!(age(1_000, i64::MAX), "in the future");
        assert_eq!(age(1_000, i64::MIN), format!("{}h ago", i64::MAX / 3600));
    }
}
