//! The report each host writes under its own key of the `fleet-role-actuators`
//! ConfigMap. It is the controller's view of the host, and the actuator's memory
//! across restarts: a started step is resumed, a settled one never repeated.

use serde::{Deserialize, Serialize};

use crate::{etcd::EtcdView, validate::SwapId};

/// How many settled steps a report remembers. A swap settles at most four
/// steps on one host (snapshot, promote or step-down, rollback, finish), so
/// this covers the running swap and the ones before it.
pub const SETTLED_MEMORY: usize = 16;

/// The most one host's report may hold, in bytes (its ConfigMap value as
/// UTF-8). Every host's report shares one ConfigMap, which holds at most
/// 1 MiB in all: the report's admission policy (`fleet-role manifests`)
/// refuses a larger key, so no host can fill it and stop the others'
/// heartbeats, and the actuator never writes one ([`Report::to_json_within`]).
pub const MAX_REPORT_BYTES: usize = 16 * 1024;

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Taken; the host is working on it.
    Started,
    /// A milestone within the step (see [`Detail`]).
    Progress,
    /// Finished as asked.
    Done,
    /// Not taken, with a reason; nothing changed on the host.
    Refused,
    /// Taken and failed, with a reason and the state the host was left in.
    Failed,
}

impl Phase {
    /// Whether the step is over (done, refused or failed).
    pub fn is_settled(self) -> bool {
        matches!(self, Phase::Done | Phase::Refused | Phase::Failed)
    }
}

/// A milestone of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Detail {
    /// The server unit runs and its member is an etcd learner.
    Learner,
    /// The member is an etcd voter (k3s's `EtcdIsVoter`).
    Voter,
    /// The server runs etcd only, with no pod left; the role file says agent.
    EtcdOnly,
    /// The member is gone (tombstone, or no etcd label on the Node).
    MemberGone,
    /// The agent unit runs in place of the server.
    AgentReady,
    /// The snapshot file is written.
    Snapshot,
}

/// The steps a report can speak of: the controller's three, plus the finish
/// of a demotion and a snapshot request, plus `unknown` for a refused step
/// whose name was not valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportStep {
    /// See [`crate::StepKind::Promote`].
    Promote,
    /// See [`crate::StepKind::StepDown`].
    StepDown,
    /// See [`crate::StepKind::Rollback`].
    Rollback,
    /// The end of a demotion once the member is gone.
    Finish,
    /// A snapshot named for the swap.
    Snapshot,
    /// A step annotation that named no known step.
    Unknown,
    /// No step yet: the report of a host that has taken none, written for its
    /// [`HostPart`] alone (always with [`Phase::Done`]).
    None,
}

impl ReportStep {
    /// The name used in reports and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportStep::Promote => "promote",
            ReportStep::StepDown => "step-down",
            ReportStep::Rollback => "rollback",
            ReportStep::Finish => "finish",
            ReportStep::Snapshot => "snapshot",
            ReportStep::Unknown => "unknown",
            ReportStep::None => "none",
        }
    }
}

impl From<crate::StepKind> for ReportStep {
    fn from(k: crate::StepKind) -> Self {
        match k {
            crate::StepKind::Promote => ReportStep::Promote,
            crate::StepKind::StepDown => ReportStep::StepDown,
            crate::StepKind::Rollback => ReportStep::Rollback,
        }
    }
}

/// A step that is over, remembered so that it is never taken again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settled {
    /// The swap it belonged to.
    pub swap: Option<SwapId>,
    /// The step.
    pub step: ReportStep,
    /// How it ended.
    pub phase: Phase,
}

/// How many reasons a [`HostPart`] keeps, and how long each may be: what an
/// actuator writes is read by the controller, which trusts no more.
pub const MAX_REASONS: usize = 8;
/// See [`MAX_REASONS`].
pub const MAX_REASON_CHARS: usize = 400;

/// Whether a server host may be demoted: its agent could start
/// (see `host::eligibility`). Read by the controller's `outgoing-demotable`
/// gate. A verdict this build does not know reads as [`Eligibility::Unknown`],
/// never as an unreadable report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Eligibility {
    /// Nothing stands in the way: for a demotion, its agent could start
    /// (`server:` names another live server, and k3s's config files hold no
    /// key `k3s agent` does not define); for a promotion, it could join.
    Ok,
    /// It could not, and why (one line each).
    Ineligible {
        /// The reasons, at most [`MAX_REASONS`] of [`MAX_REASON_CHARS`].
        #[serde(default)]
        reasons: Vec<String>,
    },
    /// A verdict of a newer actuator.
    #[serde(other)]
    Unknown,
}

impl Eligibility {
    /// The verdict on `reasons` (none: eligible), each made one line and cut
    /// to the bounds.
    pub fn of(reasons: &[String]) -> Eligibility {
        if reasons.is_empty() {
            return Eligibility::Ok;
        }
        Eligibility::Ineligible {
            reasons: reasons
                .iter()
                .take(MAX_REASONS)
                .map(|r| bounded_line(r))
                .collect(),
        }
    }
}

/// `raw` as one line (control characters escaped), at most
/// [`MAX_REASON_CHARS`] characters: the crate's one rule with this bound.
fn bounded_line(raw: &str) -> String {
    crate::text::one_line_within(raw, MAX_REASON_CHARS)
}

/// What the host says of itself, apart from any step: that its actuator is
/// alive (the heartbeat) and whether it may be demoted. Written at most once
/// per heartbeat period, and at once on a change. Fields a newer actuator
/// adds are ignored; a part that does not read is taken as absent (no
/// heartbeat, no verdict), never as an unreadable report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostPart {
    /// When the actuator last wrote it (unix seconds, by its clock).
    pub heartbeat_at: i64,
    /// The demotion verdict of a server host (none on an agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demotion: Option<Eligibility>,
    /// The promotion verdict of an agent host (none on a server): whether
    /// it could join as a server (`host::preflight`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<Eligibility>,
    /// etcd's view, as this server's local member gave it (none on an agent,
    /// or when etcd could not be read). A view that does not read or does
    /// not [`EtcdView::check`] is dropped on reading, the rest of the part
    /// kept: it counts as no view, never as an unreadable report.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_view"
    )]
    pub etcd: Option<EtcdView>,
    /// The actuator's release ([`crate::version::RELEASE`]). One that is
    /// not [`crate::version::release_valid`] reads as none. Added without
    /// a version change: a reader before it ignores it, and an actuator
    /// before it writes none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_release"
    )]
    pub release: Option<String>,
    /// When the actuator's own credential (its token's `exp`) lapses, unix
    /// seconds, if it says. A host's claim about itself, shown and alerted
    /// on, never decided on; one that is no positive time reads as none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_time"
    )]
    pub credential_expires_at: Option<i64>,
}

/// Reads a time leniently: anything but a positive number of seconds is
/// none.
fn lenient_time<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let value = Option::<serde_json::Value>::deserialize(d)?;
    Ok(value.and_then(|v| v.as_i64()).filter(|t| *t > 0))
}

/// Reads the release leniently: one that is not a release is none.
fn lenient_release<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let value = Option::<serde_json::Value>::deserialize(d)?;
    Ok(value
        .and_then(|v| v.as_str().map(str::to_string))
        .filter(|r| crate::version::release_valid(r)))
}

/// Reads the etcd view leniently: one that does not read or does not pass
/// [`EtcdView::check`] is none.
fn lenient_view<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<EtcdView>, D::Error> {
    let value = Option::<serde_json::Value>::deserialize(d)?;
    Ok(value
        .and_then(|v| serde_json::from_value::<EtcdView>(v).ok())
        .filter(|v| v.check().is_ok()))
}

/// Reads the host part leniently: a part that does not read, or whose
/// heartbeat is no positive time, is none.
fn lenient_host<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<HostPart>, D::Error> {
    let value = Option::<serde_json::Value>::deserialize(d)?;
    Ok(value
        .and_then(|v| serde_json::from_value::<HostPart>(v).ok())
        .filter(|h| h.heartbeat_at > 0)
        .map(|mut h| {
            for verdict in [&mut h.demotion, &mut h.promotion] {
                if let Some(Eligibility::Ineligible { reasons }) = verdict {
                    let bounded: Vec<String> = reasons
                        .iter()
                        .take(MAX_REASONS)
                        .map(|r| bounded_line(r))
                        .collect();
                    *reasons = bounded;
                }
            }
            h
        }))
}

/// A part of a report left out of the value sent so that it fits
/// [`MAX_REPORT_BYTES`] ([`Report::to_json_within`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The etcd view of the host part (the controller then sees no view
    /// of this host's member, as when etcd could not be read).
    EtcdView,
    /// The reasons of an `ineligible` demotion verdict (the verdict stays).
    DemotionReasons,
    /// Most of the step's reason (its first [`MAX_REASON_CHARS`] stay).
    Reason,
}

impl Dropped {
    /// What was left out, as a log line names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Dropped::EtcdView => "the etcd view",
            Dropped::DemotionReasons => "the demotion verdict's reasons",
            Dropped::Reason => "the step's reason past its start",
        }
    }
}

/// Why a report value is not a report.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// It is no report's JSON. serde's message quotes the value it could
    /// not take (an unknown step, say) as it was written, so it is said on
    /// one line ([`crate::text::one_line`]): the value is the report
    /// writer's, and the actuator logs this. Not a `source`, so that no
    /// printer of the error's chain shows serde's own message after it.
    #[error("{}", crate::text::one_line(&.0.to_string()))]
    Json(serde_json::Error),
    /// It is of a protocol version this build does not know.
    #[error(transparent)]
    Version(#[from] crate::version::UnknownVersion),
}

impl From<serde_json::Error> for ParseError {
    fn from(e: serde_json::Error) -> Self {
        ParseError::Json(e)
    }
}

/// One host's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The protocol version the report is written in
    /// ([`crate::version::PROTOCOL_VERSION`]; a report without one was
    /// written before versions were marked, and is version 1).
    #[serde(default = "unmarked")]
    pub protocol: u32,
    /// The swap of the current step (none for a refusal of an invalid id, or a
    /// finish with no swap to name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapId>,
    /// The current step.
    pub step: ReportStep,
    /// Where it stands.
    pub phase: Phase,
    /// The last milestone reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Detail>,
    /// Why it was refused or failed (already escaped; safe in one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the step started (unix seconds).
    pub started_at: i64,
    /// When this report was written (unix seconds).
    pub updated_at: i64,
    /// How many reports this host has written before this one: each report
    /// is its predecessor's `seq` plus one. Of two copies of a host's report
    /// (the one kept on the host and the API's), the higher `seq` is the
    /// newer; the times cannot say, several reports being written within a
    /// second. A report from before this field reads as 0. The count stops
    /// at `u64::MAX` (only a corrupt report holds it): the reports after it
    /// hold `u64::MAX` too, and of two copies alike the host's is kept (see
    /// [`Report::newer`]), which is the one written first.
    #[serde(default)]
    pub seq: u64,
    /// The snapshot file a snapshot step wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_file: Option<String>,
    /// The steps that are over, newest last, at most [`SETTLED_MEMORY`].
    #[serde(default)]
    pub settled: Vec<Settled>,
    /// What the host says of itself apart from any step (heartbeat,
    /// demotion verdict); none in a report of an older actuator.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_host"
    )]
    pub host: Option<HostPart>,
}

fn unmarked() -> u32 {
    crate::version::UNMARKED
}

impl Report {
    /// Whether this report shows `step` of `swap` as over.
    pub fn has_settled(&self, swap: Option<&SwapId>, step: ReportStep) -> bool {
        let here = self.swap.as_ref() == swap && self.step == step && self.phase.is_settled();
        here || self
            .settled
            .iter()
            .any(|s| s.swap.as_ref() == swap && s.step == step)
    }

    /// Whether this report shows `step` of `swap` started and not yet over.
    pub fn is_running(&self, swap: Option<&SwapId>, step: ReportStep) -> bool {
        self.swap.as_ref() == swap && self.step == step && !self.phase.is_settled()
    }

    /// The report that follows `prev` when `step` of `swap` reaches `phase`.
    ///
    /// The start time carries over within a step; a step that settles joins
    /// the settled list, which keeps only the newest [`SETTLED_MEMORY`].
    pub fn next(
        prev: Option<&Report>,
        swap: Option<SwapId>,
        step: ReportStep,
        phase: Phase,
        now: i64,
    ) -> Report {
        let same_step =
            prev.is_some_and(|p| p.swap == swap && p.step == step && !p.phase.is_settled());
        let mut settled = prev.map(|p| p.settled.clone()).unwrap_or_default();
        if phase.is_settled() && !settled.iter().any(|s| s.swap == swap && s.step == step) {
            settled.push(Settled {
                swap: swap.clone(),
                step,
                phase,
            });
            let excess = settled.len().saturating_sub(SETTLED_MEMORY);
            settled.drain(..excess);
        }
        Report {
            protocol: crate::version::PROTOCOL_VERSION,
            swap,
            step,
            phase,
            detail: if same_step {
                prev.and_then(|p| p.detail)
            } else {
                None
            },
            reason: None,
            started_at: if same_step {
                prev.map_or(now, |p| p.started_at)
            } else {
                now
            },
            updated_at: now,
            seq: prev.map_or(1, |p| p.seq.saturating_add(1)),
            snapshot_file: None,
            settled,
            host: prev.and_then(|p| p.host.clone()),
        }
    }

    /// The report that follows `prev` with `host` as its host part, the step
    /// untouched (a host with no report yet gets one of step
    /// [`ReportStep::None`]).
    pub fn with_host_part(prev: Option<&Report>, host: HostPart, now: i64) -> Report {
        let mut r = match prev {
            Some(p) => Report {
                updated_at: now,
                seq: p.seq.saturating_add(1),
                ..p.clone()
            },
            None => Report {
                protocol: crate::version::PROTOCOL_VERSION,
                swap: None,
                step: ReportStep::None,
                phase: Phase::Done,
                detail: None,
                reason: None,
                started_at: now,
                updated_at: now,
                seq: 1,
                snapshot_file: None,
                settled: vec![],
                host: None,
            },
        };
        r.protocol = crate::version::PROTOCOL_VERSION;
        r.host = Some(host);
        r
    }

    /// How old the heartbeat is at `now` (seconds), if there is one.
    pub fn heartbeat_age(&self, now: i64) -> Option<i64> {
        self.host
            .as_ref()
            .map(|h| now.saturating_sub(h.heartbeat_at))
    }

    /// The actuator's memory at start, from the host's own copy (`local`,
    /// written on the host before every write to the API) and the API's
    /// (`remote`). The host's copy is the memory: the API's is anyone's
    /// with a write on ConfigMaps in the hosts' namespace to plant (a
    /// `started` rollback with a high `seq` would resume with no ask of
    /// the Lease behind it), so it never grants a resume. It lends only
    /// its number, so that the next report written is the newer, and,
    /// where the host has no copy at all (its disk was replaced), its
    /// settled steps, which can only hold a step back, never start one.
    pub fn remembered(local: Option<Report>, remote: Option<Report>) -> Option<Report> {
        match (local, remote) {
            (Some(l), Some(r)) if r.seq > l.seq => Some(Report { seq: r.seq, ..l }),
            (Some(l), _) => Some(l),
            (None, Some(r)) if !r.phase.is_settled() => {
                // The running step dropped: a host step of nothing.
                let mut r = r;
                r.swap = None;
                r.step = ReportStep::None;
                r.phase = Phase::Done;
                r.detail = None;
                r.reason = None;
                Some(r)
            }
            (None, r) => r,
        }
    }

    /// The report that follows `prev` once the host was switched to `role`
    /// by hand (`promote-local`, `demote-local`), or `None` when `prev`
    /// already says as much. The last step a host reported tells the fleet
    /// what the host is where its Node cannot (k3s leaves its etcd label on
    /// a finished host): a host promoted by hand after a finish or a
    /// rollback would read as rolled back for ever, one demoted by hand
    /// after a promotion as a learner. So a promotion by hand moves the
    /// report on to no step (the host is read by its Node again), a
    /// demotion by hand to a finish of no swap, settled, as a server that
    /// comes home by itself reports it. Settled steps are kept.
    pub fn after_hand_switch(prev: Option<&Report>, role: crate::Role, now: i64) -> Option<Report> {
        let (step, already) = match role {
            crate::Role::Server => (
                ReportStep::None,
                prev.is_none_or(|p| p.step == ReportStep::None && p.phase.is_settled()),
            ),
            crate::Role::Agent => (
                ReportStep::Finish,
                prev.is_some_and(|p| {
                    matches!(p.step, ReportStep::Finish | ReportStep::Rollback)
                        && p.phase == Phase::Done
                }),
            ),
        };
        (!already).then(|| Report::next(prev, None, step, Phase::Done, now))
    }

    /// The newer of two copies of one host's report: the higher
    /// [`Report::seq`], the first (`a`) when both are as new.
    pub fn newer(a: Option<Report>, b: Option<Report>) -> Option<Report> {
        match (a, b) {
            (Some(a), Some(b)) if b.seq > a.seq => Some(b),
            (Some(a), _) => Some(a),
            (None, b) => b,
        }
    }

    /// Sets the milestone.
    pub fn with_detail(mut self, detail: Detail) -> Self {
        self.detail = Some(detail);
        self
    }

    /// Sets the reason of a refusal or failure.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// The report as the ConfigMap value (one JSON line).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a report always serializes")
    }

    /// The report as the ConfigMap value, within `max` bytes: the optional
    /// bulky parts are left out, in this order, until it fits: the etcd
    /// view, then the demotion verdict's reasons, then all but the start of
    /// the step's reason. What a step's memory needs (the step, its phase,
    /// the settled steps) is never left out. Returns the value and what was
    /// left out (nothing, for a report that fits as it is). A value that
    /// still does not fit is returned as it is: the API refuses it, and the
    /// write's error says so.
    pub fn to_json_within(&self, max: usize) -> (String, Vec<Dropped>) {
        let mut value = self.to_json();
        let mut dropped = Vec::new();
        let mut r = self.clone();
        for part in [Dropped::EtcdView, Dropped::DemotionReasons, Dropped::Reason] {
            if value.len() <= max {
                break;
            }
            let changed = match part {
                Dropped::EtcdView => r.host.as_mut().and_then(|h| h.etcd.take()).is_some(),
                Dropped::DemotionReasons => r.host.as_mut().is_some_and(|h| {
                    let mut cleared = false;
                    for verdict in [&mut h.demotion, &mut h.promotion] {
                        if let Some(Eligibility::Ineligible { reasons }) = verdict
                            && !reasons.is_empty()
                        {
                            reasons.clear();
                            cleared = true;
                        }
                    }
                    cleared
                }),
                Dropped::Reason => match &mut r.reason {
                    Some(reason) if reason.chars().count() > MAX_REASON_CHARS => {
                        *reason = bounded_line(reason);
                        true
                    }
                    _ => false,
                },
            };
            if changed {
                dropped.push(part);
                value = r.to_json();
            }
        }
        (value, dropped)
    }

    /// Reads a ConfigMap value; a value that does not parse is no report
    /// (for a reader that only shows or weighs reports; the actuator, whose
    /// memory the report is, uses [`Report::parse`] and refuses instead),
    /// and neither is one of a protocol version this build does not know
    /// (its fields may mean something else: the controller's
    /// `known-protocol` gate refuses a swap involving such a host instead).
    pub fn from_json(raw: &str) -> Option<Report> {
        Self::parse(raw).ok()
    }

    /// Reads a report, saying why a value is none: it does not parse, or it
    /// is of a protocol version this build does not know.
    pub fn parse(raw: &str) -> Result<Report, ParseError> {
        crate::version::check(crate::version::of_report(raw).as_deref())?;
        Ok(serde_json::from_str(raw)?)
    }
}

#[cfg(test)]
mod tests;
