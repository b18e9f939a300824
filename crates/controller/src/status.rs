//! `fleet-role status`: the fleet at a glance.

use fleetdecide::SwapRecord;
use fleetdecide::{
    self, Class, FleetView, LeaseFacts, NodeFacts, classify, count_voters, is_healthy_voter,
    members::Picture, quorum,
};
use protocol::{
    etcd::EtcdView,
    report::{Phase, Report},
    version,
};

use crate::config::Settings;

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

/// The release a host's actuator reports of itself, if it does (an
/// actuator before releases were reported names none).
fn release_of(n: &NodeFacts) -> Option<&str> {
    n.host.as_ref().and_then(|h| h.release.as_deref())
}

/// The hosts' releases beside this controller's: each release with the
/// hosts that report it, those that report none, whether they differ from
/// this controller's (an upgrade half done: docs/upgrade.md), and which
/// hosts run an actuator older than this controller drives (no swap
/// involving them runs: `supported-release`).
pub fn releases_line(v: &FleetView) -> String {
    let mut by: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    let mut too_old: Vec<&str> = Vec::new();
    for n in &v.nodes {
        by.entry(release_of(n).unwrap_or("none reported"))
            .or_default()
            .push(&n.name);
        if n.host
            .as_ref()
            .is_some_and(|h| version::host_release_supported(h.release.as_deref()).is_err())
        {
            too_old.push(&n.name);
        }
    }
    too_old.sort_unstable();
    let groups: Vec<String> = by
        .iter()
        .map(|(r, hosts)| {
            let mut hosts = hosts.clone();
            hosts.sort_unstable();
            format!("{r} on {}", hosts.join(", "))
        })
        .collect();
    let mixed = by.keys().any(|r| *r != version::RELEASE);
    let mut notes = Vec::new();
    if mixed {
        notes.push("not every host runs this controller's release: upgrade the hosts first, docs/upgrade.md".to_string());
    }
    if !too_old.is_empty() {
        notes.push(format!(
            "older than {} (the oldest this controller drives, no swap involving them runs): {}",
            version::OLDEST_HOST_RELEASE,
            too_old.join(", ")
        ));
    }
    format!(
        "Releases: this controller {}; hosts: {}{}",
        version::RELEASE,
        if groups.is_empty() {
            "-".to_string()
        } else {
            groups.join("; ")
        },
        if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        }
    )
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

/// The demotion verdict of a server's report: `yes`, `NO` (the reasons are
/// in `swap --dry-run`'s `outgoing-demotable` and in `--output json`),
/// `unknown` (a newer actuator's); an agent's promotion verdict the same
/// way, prefixed `join ` (the reasons in `incoming-eligible`); `-` (none
/// reported: an actuator older than this controller).
fn demotable_cell(n: &protocol::NodeFacts) -> String {
    use protocol::report::Eligibility;
    let word = |e: &Eligibility| match e {
        Eligibility::Ok => "yes",
        Eligibility::Ineligible { .. } => "NO",
        Eligibility::Unknown => "unknown",
    };
    let host = n.host.as_ref();
    match (
        host.and_then(|h| h.demotion.as_ref()),
        host.and_then(|h| h.promotion.as_ref()),
    ) {
        (Some(d), _) => word(d).into(),
        (None, Some(p)) => format!("join {}", word(p)),
        (None, None) => "-".into(),
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
        s.push_str(&format!(", file {}", fleetdecide::one_line(f)));
    }
    if let Some(why) = &r.reason {
        s.push_str(&format!(": {}", fleetdecide::one_line(why)));
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
            fleetdecide::one_line(h),
            fleetdecide::one_line(l.instance.as_deref().unwrap_or("-")),
            l.renew_time.map_or("never".into(), |t| age(v.now, t)),
            l.expiry().unwrap_or(v.now).saturating_sub(v.now)
        ),
        (Some(h), false) => format!("lapsed (last held by {})", fleetdecide::one_line(h)),
        (None, _) => "free".into(),
    };
    out.push(format!("Lease {name}: {holder}"));
    if let Some(r) = l.recorded_swap() {
        out.push(format!(
            "  {} {}: {}",
            r.change().as_str(),
            r.id,
            fleetdecide::halves(r.out.as_ref(), r.incoming.as_ref())
        ));
        if let (Some(step), Some(since)) = (l.current_step(), l.step_since) {
            let deadline = l
                .step_deadline(&settings.core.timeouts)
                .map(|d| format!(", times out in {} s", d.saturating_sub(v.now)))
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
                "  STOPPED: {}; resume with `{}`",
                fleetdecide::one_line(s),
                r.resume_command()
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
            fleetdecide::Outcome::Done { warning: None } => "done".to_string(),
            fleetdecide::Outcome::Done { warning: Some(w) } => format!("done; {w}"),
            fleetdecide::Outcome::WoundDown { reason, .. } => format!("wound down: {reason}"),
        };
        // A grow's or a shrink's ending has one half empty.
        let kind = fleetdecide::VoterChange::of(!last.out.is_empty(), !last.incoming.is_empty());
        let halves: Vec<String> = [("out", &last.out), ("in", &last.incoming)]
            .into_iter()
            .filter(|(_, n)| !n.is_empty())
            .map(|(w, n)| format!("{w} {}", fleetdecide::one_line(n)))
            .collect();
        out.push(format!(
            "  last {} {} ({}) {}: {how}",
            kind.as_str(),
            fleetdecide::one_line(&last.swap),
            halves.join(", "),
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
                notes.push(if n.ready_disputed.is_some() {
                    "NotReady, disputed by its own view of etcd"
                } else {
                    "NotReady"
                });
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

/// The Nodes that carry the old `<prefix>/voter-eligible=true` but not
/// [`protocol::names::ELIGIBLE_LABEL`], by name: their operator meant them
/// eligible, but the old label no longer counts (the host's own kubelet can
/// set it), so they are not.
pub fn legacy_eligible_only(v: &FleetView) -> Vec<&str> {
    let mut names: Vec<&str> = v
        .nodes
        .iter()
        .filter(|n| n.legacy_eligible && !n.eligible)
        .map(|n| n.name.as_str())
        .collect();
    names.sort_unstable();
    names
}

/// A warning naming [`legacy_eligible_only`]'s Nodes, with the command that
/// relabels each (a cluster admin's: the label is one no kubelet may set);
/// nothing when there are none. A warning, not a degraded state: the fleet
/// is as healthy as before, it has fewer eligible hosts than meant.
pub fn relabel_lines(v: &FleetView) -> Vec<String> {
    let names = legacy_eligible_only(v);
    if names.is_empty() {
        return Vec::new();
    }
    let label = v.settings.names.eligible();
    let mut out = vec![format!(
        "WARNING: not eligible, labelled only with the old {}=true, which no longer counts (a host's own kubelet can set it): {}; a cluster admin relabels each:",
        v.settings.names.legacy_eligible(),
        names.join(", ")
    )];
    out.extend(
        names
            .iter()
            .map(|n| format!("  kubectl label node {n} {label}=true")),
    );
    out
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// The status as text lines.
pub fn text(v: &FleetView, settings: &Settings) -> String {
    let mut lines = lease_lines(v, settings, v.lease.as_ref());
    let degraded = fleetdecide::degraded(v);
    if degraded.is_empty() {
        lines.push("Health: nothing degraded".into());
    } else {
        lines.extend(degraded.iter().map(|d| format!("DEGRADED: {d}")));
    }
    lines.extend(relabel_lines(v));
    lines.push(format!("Run: {}", run_line(&run_now(v, settings))));
    lines.push(format!(
        "Protocol: this controller writes version {} and reads {} to {}",
        version::PROTOCOL_VERSION,
        version::OLDEST_KNOWN,
        version::PROTOCOL_VERSION
    ));
    lines.push(releases_line(v));
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
    lines.extend(voter_set_lines(
        &fleetdecide::voterset::path_of(v),
        settings,
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
    let rows: Vec<[String; 12]> = nodes
        .iter()
        .map(|n| {
            let step = match (&n.marks.step, &n.marks.snapshot_request) {
                (Some(s), _) => fleetdecide::one_line(s),
                (None, Some(_)) => "snapshot".into(),
                (None, None) => "-".into(),
            };
            [
                n.name.clone(),
                classify(n).as_str().into(),
                yes(n.ready).into(),
                if fleetdecide::is_voting(n) {
                    yes(is_healthy_voter(n)).into()
                } else {
                    "-".into()
                },
                if !n.eligible && n.legacy_eligible {
                    "no (old label)".into()
                } else {
                    yes(n.eligible).into()
                },
                yes(n.cordoned).into(),
                step,
                protocol_cell(n),
                release_of(n).unwrap_or("-").to_string(),
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
        "RELEASE",
        "HEARTBEAT",
        "DEMOTABLE",
        "LAST REPORT",
    ];
    lines.push(String::new());
    lines.extend(table("", &header, &rows));
    lines.push(String::new());
    lines.extend(etcd_lines(v));
    lines.join("\n")
}

/// The voter set as policy ([`fleetdecide::voterset`]): the tolerance now,
/// the spread over the zones, and the path `p` to the configured set.
pub fn voter_set_lines(p: &fleetdecide::voterset::Path, settings: &Settings) -> Vec<String> {
    let mut lines = vec![format!("Voter set: {}", p.start.describe())];
    lines.push(match &settings.core.spread_label {
        Some(label) => format!("  spread by {label}: {}", p.spread.describe()),
        None => "  spread: off (spread_label is empty)".into(),
    });
    if p.stages.is_empty() {
        lines.push("  path: none, the configured set stands".into());
    }
    for (i, st) in p.stages.iter().enumerate() {
        lines.push(format!(
            "  path {}. {}: {}; lowest {}",
            i + 1,
            st.change.describe(),
            st.why,
            st.lowest.describe()
        ));
    }
    if let Some(short) = &p.short {
        lines.push(format!("  path stops short: {short}"));
    }
    lines
}

/// A table: the header, then each row, every column but the last padded to
/// its widest cell, each line after `indent`.
fn table<R: AsRef<[String]>>(indent: &str, header: &[&str], rows: &[R]) -> Vec<String> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.as_ref().iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let fmt_row = |cells: Vec<&str>| {
        let mut s = indent.to_string();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        s
    };
    let mut out = vec![fmt_row(header.to_vec())];
    for r in rows {
        out.push(fmt_row(r.as_ref().iter().map(String::as_str).collect()));
    }
    out
}

/// One server's view as status shows it: the host, and its view if it
/// reported one.
struct ViewRow<'a> {
    host: &'a str,
    view: Option<&'a EtcdView>,
    /// Whether the picture took it (fresh by the controller's bound).
    fresh: bool,
    /// Whether the picture left it out as a view its host cannot know
    /// ([`Picture::ignored`]): fresh, yet counted for nothing.
    ignored: bool,
}

/// The hosts whose view status shows: every host that reported one, and
/// every server that did not (a Node of an etcd class, or a host whose
/// actuator gives a demotion verdict: it holds a server's files), by name.
fn view_rows<'a>(v: &'a FleetView, p: &Picture) -> Vec<ViewRow<'a>> {
    let mut rows: Vec<ViewRow<'a>> = v
        .nodes
        .iter()
        .filter_map(|n| {
            let view = n.host.as_ref().and_then(|h| h.etcd.as_ref());
            let server = matches!(
                classify(n),
                Class::Voter | Class::Learner | Class::EtcdOnly | Class::RolledBack
            ) || n.host.as_ref().is_some_and(|h| h.demotion.is_some());
            (view.is_some() || server).then(|| ViewRow {
                host: n.name.as_str(),
                view,
                fresh: p.reporters.iter().any(|r| r == &n.name),
                ignored: p.ignored.iter().any(|i| {
                    i.strip_prefix(n.name.as_str())
                        .is_some_and(|r| r.starts_with(": "))
                }),
            })
        })
        .collect();
    rows.sort_by(|a, b| a.host.cmp(b.host));
    rows
}

/// A size in bytes, in the unit that reads best.
fn bytes(n: u64) -> String {
    match n {
        n if n < 1 << 10 => format!("{n} B"),
        n if n < 1 << 20 => format!("{:.1} KiB", n as f64 / 1024.0),
        n if n < 1 << 30 => format!("{:.1} MiB", n as f64 / f64::from(1 << 20)),
        n => format!("{:.1} GiB", n as f64 / f64::from(1 << 30)),
    }
}

/// etcd as the servers read it, as text lines: the members (each with its
/// Node, or `ghost` when none matches), the leader, the alarms, the views
/// that disagree, the views ignored, and each server's view with its age.
pub fn etcd_lines(v: &FleetView) -> Vec<String> {
    let p = v.etcd();
    let max = v.settings.actuator_heartbeat_max_age;
    let mut out = Vec::new();
    if p.known() {
        out.push(format!(
            "etcd: {} members, as most of {} fresh server views list them (older than {max} s is stale)",
            p.members.len(),
            p.reporters.len()
        ));
        let rows: Vec<Vec<String>> = p
            .members
            .iter()
            .map(|m| {
                vec![
                    if m.member.name.is_empty() {
                        "(not started)".into()
                    } else {
                        fleetdecide::one_line(&m.member.name)
                    },
                    m.member.id.to_string(),
                    if m.member.learner { "learner" } else { "voter" }.into(),
                    m.node
                        .as_deref()
                        .map_or("ghost".into(), fleetdecide::one_line),
                    yes(m.healthy).into(),
                    m.member
                        .peer_urls
                        .first()
                        .map_or("-".into(), |u| fleetdecide::one_line(u)),
                ]
            })
            .collect();
        out.extend(table(
            "  ",
            &["MEMBER", "ID", "ROLE", "NODE", "HEALTHY", "PEER URL"],
            &rows,
        ));
        out.push(format!(
            "  leader: {}",
            match p.leader {
                Some(id) => p.members.iter().find(|m| m.member.id == id).map_or(
                    id.to_string(),
                    |m| format!("{} ({id})", fleetdecide::one_line(&m.member.name))
                ),
                None => "NONE".into(),
            }
        ));
        out.push(format!(
            "  alarms: {}",
            if p.alarms.is_empty() {
                "none".into()
            } else {
                p.alarms.join(", ")
            }
        ));
        if !p.disagreeing.is_empty() {
            out.push(format!(
                "  DISAGREEING: {} (their views list other members than most)",
                p.disagreeing.join(", ")
            ));
        }
        if !p.ignored.is_empty() {
            out.push(format!(
                "  IGNORED: {} (a view its host cannot know counts for nothing)",
                p.ignored.join("; ")
            ));
        }
    } else {
        out.push(format!(
            "etcd: no fresh view (each server's actuator reports its member's; older than {max} s is stale)"
        ));
    }
    let rows: Vec<Vec<String>> = view_rows(v, &p)
        .iter()
        .map(|r| match r.view {
            Some(view) => vec![
                r.host.to_string(),
                format!(
                    "{}{}",
                    age(v.now, view.read_at),
                    match (r.fresh, r.ignored) {
                        (true, _) => "",
                        (false, true) => " (IGNORED)",
                        (false, false) => " (STALE)",
                    }
                ),
                view.member.to_string(),
                yes(view.healthy).into(),
                bytes(view.db_size),
                format!("{}/{}", view.raft_term, view.raft_index),
            ],
            None => vec![
                r.host.to_string(),
                "none reported".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ],
        })
        .collect();
    if !rows.is_empty() {
        out.extend(table(
            "  ",
            &[
                "VIEW OF",
                "READ",
                "MEMBER",
                "HEALTHY",
                "DB SIZE",
                "TERM/INDEX",
            ],
            &rows,
        ));
    }
    out
}

/// What `run` would decide now over `v` (with its own view of eligibility:
/// see [`fleetdecide::run_view`]): which grace a NotReady voter is in,
/// what holds it back and until when.
pub fn run_now(v: &FleetView, settings: &Settings) -> fleetdecide::RunDecision {
    fleetdecide::run_decision(&fleetdecide::run_view(v, settings.replace_ineligible))
}

/// A decision of `run` in the words `run --dry-run` prints.
pub fn run_line(d: &fleetdecide::RunDecision) -> String {
    match d {
        fleetdecide::RunDecision::Idle { why, .. } => format!("would stay idle: {why}"),
        fleetdecide::RunDecision::Tidy { action, why } => {
            format!("would {}: {why}", action.describe())
        }
        fleetdecide::RunDecision::Swap { why, .. }
        | fleetdecide::RunDecision::Resize { why, .. } => {
            format!("would {}: {why}", d.change_words().unwrap_or_default())
        }
    }
}

mod schema;
pub use schema::*;

#[cfg(test)]
mod tests;
