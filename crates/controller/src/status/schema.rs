//! `fleet-role status --output json`: the schema as types. [`json`] is
//! [`Status`] serialized; docs/reference.md documents each field.
//!
//! Serialized through [`serde_json::Value`], whose map keeps its keys in
//! order, so the printed object has its keys sorted, as it always had.
//! Times are RFC 3339 in UTC, or null.

use fleetdecide::SwapRecord;
use fleetdecide::{
    self, Class, FleetView, LastSwap, Recorded, RunDecision, StopNote, classify, count_voters,
    is_healthy_voter, members::Picture, quorum, voterset::Path,
};
use protocol::{report::Eligibility, version};
use serde::Serialize;
use serde_json::{Value, json};

use crate::config::Settings;
use kubeview::time::with_times;

use super::{legacy_eligible_only, run_now, view_rows};

/// The whole status: the Lease, what is degraded, what `run` would do,
/// the voters, the Nodes and etcd's membership.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The regrade Lease; null when it does not exist.
    pub lease: Option<LeaseStatus>,
    /// Each degraded state, in words (empty: nothing; the exit is 5 when
    /// there is one).
    pub degraded: Vec<String>,
    /// What `run` would decide now, and until when it holds.
    pub run: RunDecision,
    /// Nodes meant eligible by the old label only, to relabel.
    pub legacy_eligible_only: Vec<String>,
    /// The protocol versions this build writes and reads.
    pub protocol: ProtocolVersions,
    /// The voters counted.
    pub voters: Voters,
    /// The voter set as policy: tolerance, spread and the path to the
    /// configured set.
    pub voter_set: VoterSet,
    /// Every Node seen.
    pub nodes: Vec<NodeStatus>,
    /// etcd's membership as the servers report it.
    pub etcd: EtcdStatus,
}

/// The regrade Lease as read.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseStatus {
    /// `namespace/name`.
    pub name: String,
    /// The holder identity.
    pub holder: Option<String>,
    /// The holding process's instance id.
    pub instance: Option<String>,
    /// Held by someone and not lapsed now.
    pub held: bool,
    /// When it lapses unless renewed.
    pub expires_at: Option<String>,
    /// The swap it records; null when none (or none valid).
    pub swap: Option<Recorded>,
    /// The swap's step, as written.
    pub step: Option<String>,
    /// Since when the step runs.
    pub step_since: Option<String>,
    /// Why the swap stopped, if it did.
    pub stopped: Option<String>,
    /// Why and how the swap winds down, if it does.
    pub winding_down: Option<StopNote>,
    /// The pause flag.
    pub paused: bool,
    /// The last swap's end (its `at` a time).
    pub last_swap: Option<Value>,
    /// The protocol version it was written in, as written.
    pub protocol: Option<String>,
}

/// The protocol versions of this build.
#[derive(Debug, Clone, Serialize)]
pub struct ProtocolVersions {
    /// The version written.
    pub writes: u32,
    /// The oldest and the newest version read.
    pub reads: [u32; 2],
}

/// The voters counted.
#[derive(Debug, Clone, Serialize)]
pub struct Voters {
    /// Voting members whose Nodes are seen.
    pub seen: usize,
    /// Healthy voting members.
    pub healthy: usize,
    /// Voting members with no Node seen (each counted as down).
    pub missing: usize,
    /// The configured voter count.
    pub configured: usize,
    /// The quorum of the members counted.
    pub quorum: usize,
}

/// The voter set as policy.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VoterSet {
    /// The Node label voters are spread over; null for none.
    pub spread_label: Option<String>,
    /// The path from the voter set as it stands to the configured one.
    pub path: Path,
}

/// One Node.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// The Node's name.
    pub name: String,
    /// How the controller counts the host.
    pub class: Class,
    /// The Node is Ready.
    pub ready: bool,
    /// Why its readiness is in doubt, if it is.
    pub ready_disputed: Option<String>,
    /// A voter, Ready, and a voting member of etcd.
    pub healthy_voter: bool,
    /// Labelled eligible.
    pub eligible: bool,
    /// Cordoned.
    pub cordoned: bool,
    /// fleet-role's marks on it.
    pub marks: fleetdecide::FleetMarks,
    /// The report's protocol version (1 for none written): a number, or
    /// the raw value as a string where this build does not know it.
    pub protocol: Value,
    /// The host's report (its `startedAt` and `updatedAt` times); null for
    /// none.
    pub report: Option<Value>,
    /// The actuator's heartbeat and verdicts; null for none.
    pub host: Option<HostStatus>,
}

/// The actuator's heartbeat and the two verdicts.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostStatus {
    /// When the actuator last beat.
    pub heartbeat_at: Option<String>,
    /// The heartbeat's age by this controller's clock, in seconds.
    pub heartbeat_age_secs: i64,
    /// Whether the host could be demoted, and why not.
    pub demotion: Option<Eligibility>,
    /// Whether the host could be promoted, and why not.
    pub promotion: Option<Eligibility>,
    /// The actuator's release, as it reports it; null for none.
    pub release: Option<String>,
}

/// etcd's membership: the picture of the fresh reports, and every
/// server's view.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EtcdStatus {
    /// The members, the leader, the alarms, who reported and who
    /// disagrees.
    #[serde(flatten)]
    pub picture: Picture,
    /// How old a view may be and still count, in seconds.
    pub max_age_secs: i64,
    /// Each server's view.
    pub views: Vec<EtcdViewStatus>,
}

/// One server's view of etcd's membership.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EtcdViewStatus {
    /// The Node.
    pub host: String,
    /// Fresh by the controller's bound: the picture took it.
    pub fresh: bool,
    /// Fresh, yet left out as a view its host cannot know.
    pub ignored: bool,
    /// The view as reported (its `readAt` a time); null for none.
    pub view: Option<Value>,
    /// The view's age, in seconds; null for none.
    pub age_secs: Option<i64>,
}

/// The unix second `secs` as RFC 3339 in UTC; none for none, or for a
/// second no calendar holds.
fn time(secs: Option<i64>) -> Option<String> {
    kubeview::time::rfc3339(secs).as_str().map(String::from)
}

/// etcd's membership as [`EtcdStatus`].
pub fn etcd_status(v: &FleetView) -> EtcdStatus {
    let picture = v.etcd();
    let views = view_rows(v, &picture)
        .iter()
        .map(|r| EtcdViewStatus {
            host: r.host.to_string(),
            fresh: r.fresh,
            ignored: r.ignored,
            view: r.view.map(|view| with_times(json!(view), &["readAt"])),
            age_secs: r.view.map(|view| v.now.saturating_sub(view.read_at)),
        })
        .collect();
    EtcdStatus {
        picture,
        max_age_secs: v.settings.actuator_heartbeat_max_age,
        views,
    }
}

/// etcd as the servers read it, as JSON (the `etcd` field of [`json`]):
/// the picture (members with their Node, `null` for a ghost; the leader;
/// alarms; disagreeing hosts; the hosts whose fresh view was taken; the
/// views ignored, and why) and each server's view with its age.
pub fn etcd_json(v: &FleetView) -> Value {
    json!(etcd_status(v))
}

/// The status as [`Status`].
pub fn status(v: &FleetView, settings: &Settings) -> Status {
    let count = count_voters(v, v.lease.as_ref().and_then(|l| l.swap_in.as_deref()));
    let nodes = v
        .nodes
        .iter()
        .map(|n| NodeStatus {
            name: n.name.clone(),
            class: classify(n),
            ready: n.ready,
            ready_disputed: n.ready_disputed.clone(),
            healthy_voter: is_healthy_voter(n),
            eligible: n.eligible,
            cordoned: n.cordoned,
            marks: n.marks.clone(),
            protocol: match version::check(n.report_protocol.as_deref()) {
                Ok(v) => json!(v),
                Err(e) => json!(e.shown),
            },
            report: n
                .report
                .as_ref()
                .map(|r| with_times(json!(r), &["startedAt", "updatedAt"])),
            host: n.host.as_ref().map(|h| HostStatus {
                heartbeat_at: time(Some(h.heartbeat_at)),
                heartbeat_age_secs: v.now.saturating_sub(h.heartbeat_at),
                demotion: h.demotion.clone(),
                promotion: h.promotion.clone(),
                release: h.release.clone(),
            }),
        })
        .collect();
    Status {
        lease: v.lease.as_ref().map(|l| LeaseStatus {
            name: settings.lease_ref(),
            holder: l.holder.clone(),
            instance: l.instance.clone(),
            held: l.is_held(v.now),
            expires_at: time(l.expiry()),
            swap: l.recorded_swap(),
            step: l.step.clone(),
            step_since: time(l.step_since),
            stopped: l.stopped.clone(),
            winding_down: l.stop_note(),
            paused: l.paused,
            last_swap: l.last().map(|s: LastSwap| with_times(json!(s), &["at"])),
            protocol: l.protocol.clone(),
        }),
        degraded: fleetdecide::degraded(v),
        run: run_now(v, settings),
        legacy_eligible_only: legacy_eligible_only(v)
            .into_iter()
            .map(String::from)
            .collect(),
        protocol: ProtocolVersions {
            writes: version::PROTOCOL_VERSION,
            reads: [version::OLDEST_KNOWN, version::PROTOCOL_VERSION],
        },
        voters: Voters {
            seen: count.seen,
            healthy: count.healthy,
            missing: count.missing,
            configured: settings.core.voters,
            quorum: quorum(count.members()),
        },
        voter_set: VoterSet {
            spread_label: settings
                .core
                .spread_label
                .as_ref()
                .map(|k| k.as_str().to_string()),
            path: fleetdecide::voterset::path_of(v),
        },
        nodes,
        etcd: etcd_status(v),
    }
}

/// The status as one JSON object: [`status`] serialized, keys sorted.
pub fn json(v: &FleetView, settings: &Settings) -> Value {
    json!(status(v, settings))
}
