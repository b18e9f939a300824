//! The wire format held to a golden file per protocol version: the
//! report's fields and their types (every optional one set), the words its
//! step, phase and detail take, the Node marks' and the regrade Lease's
//! keys. A field renamed, removed or retyped, a word changed, with
//! `PROTOCOL_VERSION` left as it was, fails here: a host and a controller of
//! different releases would read each other wrong without either refusing.
//!
//! An addition a reader before it ignores (a new optional field, a new
//! key) fails too, until the golden file says it: `FLEET_ROLE_BLESS=1`
//! rewrites the file, and its diff is the change to review (docs/upgrade.md
//! says which changes are compatible).

use std::{collections::BTreeSet, path::PathBuf};

use protocol::{
    Names, PROTOCOL_VERSION,
    report::{Detail, Phase, Report, ReportStep},
};
use serde_json::Value;

/// A report with every field set, as an actuator of this release writes
/// one (read in, then written out: a field the struct lost or renamed is
/// gone from what it writes).
const FULL_REPORT: &str = r#"{
  "protocol": 1,
  "swap": "swap-20261205-092147-463d",
  "step": "promote",
  "phase": "progress",
  "detail": "learner",
  "reason": "a reason",
  "startedAt": 1796462507,
  "updatedAt": 1796462510,
  "seq": 4,
  "snapshotFile": "/var/lib/rancher/k3s/server/db/snapshots/swap-20261205-092147-463d-n1-1796462507",
  "settled": [{"swap": "swap-20261205-092147-463d", "step": "snapshot", "phase": "done"}],
  "host": {
    "heartbeatAt": 1796462510,
    "demotion": {"verdict": "ineligible", "reasons": ["a reason"]},
    "promotion": {"verdict": "ok"},
    "release": "0.2.0",
    "credentialExpiresAt": 1827998507,
    "etcd": {
      "readAt": 1796462510,
      "member": "0000000000000001",
      "members": [{"id": "0000000000000001", "name": "n1-0123abcd", "peerUrls": ["https://10.0.0.1:2380"], "clientUrls": ["https://10.0.0.1:2379"], "learner": false}],
      "leader": "0000000000000001",
      "raftTerm": 2,
      "raftIndex": 100,
      "dbSize": 1048576,
      "alarms": [{"member": "0000000000000001", "kind": "NOSPACE"}],
      "healthy": true
    }
  }
}"#;

/// Each leaf of `v` as `path: type`, arrays as `[]`.
fn shape(path: &str, v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                shape(&format!("{path}.{k}"), v, out);
            }
        }
        Value::Array(a) => {
            for v in a {
                shape(&format!("{path}[]"), v, out);
            }
        }
        Value::String(_) => drop(out.insert(format!("{path}: string"))),
        Value::Number(_) => drop(out.insert(format!("{path}: number"))),
        Value::Bool(_) => drop(out.insert(format!("{path}: bool"))),
        Value::Null => drop(out.insert(format!("{path}: null"))),
    }
}

/// Every word a report's step takes (the match fails to build when a step
/// is added, so the list cannot fall behind).
fn steps() -> Vec<ReportStep> {
    let all = vec![
        ReportStep::Promote,
        ReportStep::StepDown,
        ReportStep::Rollback,
        ReportStep::Finish,
        ReportStep::Snapshot,
        ReportStep::Unknown,
        ReportStep::None,
    ];
    for s in &all {
        match s {
            ReportStep::Promote
            | ReportStep::StepDown
            | ReportStep::Rollback
            | ReportStep::Finish
            | ReportStep::Snapshot
            | ReportStep::Unknown
            | ReportStep::None => {}
        }
    }
    all
}

fn phases() -> Vec<Phase> {
    let all = vec![
        Phase::Started,
        Phase::Progress,
        Phase::Done,
        Phase::Refused,
        Phase::Failed,
    ];
    for p in &all {
        match p {
            Phase::Started | Phase::Progress | Phase::Done | Phase::Refused | Phase::Failed => {}
        }
    }
    all
}

fn details() -> Vec<Detail> {
    let all = vec![
        Detail::Learner,
        Detail::Voter,
        Detail::EtcdOnly,
        Detail::MemberGone,
        Detail::AgentReady,
        Detail::Snapshot,
    ];
    for d in &all {
        match d {
            Detail::Learner
            | Detail::Voter
            | Detail::EtcdOnly
            | Detail::MemberGone
            | Detail::AgentReady
            | Detail::Snapshot => {}
        }
    }
    all
}

/// The wire format of this build, one line each, sorted.
fn wire() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let report = Report::from_json(FULL_REPORT).expect("the full report reads");
    let written: Value = serde_json::from_str(&report.to_json()).unwrap();
    shape("report", &written, &mut out);
    let word = |v: Value| v.as_str().unwrap().to_string();
    for s in steps() {
        out.insert(format!(
            "report.step = {}",
            word(serde_json::to_value(s).unwrap())
        ));
    }
    for p in phases() {
        out.insert(format!(
            "report.phase = {}",
            word(serde_json::to_value(p).unwrap())
        ));
    }
    for d in details() {
        out.insert(format!(
            "report.detail = {}",
            word(serde_json::to_value(d).unwrap())
        ));
    }
    let n = Names::default();
    let unprefixed = |k: String| k.replace(&n.prefix, "<prefix>");
    for k in [
        n.desired_role(),
        n.eligible(),
        n.role_swap(),
        n.role_step(),
        n.role_join_node(),
        n.protocol(),
        n.snapshot_request(),
        n.maintenance(),
    ] {
        out.insert(format!("node mark {}", unprefixed(k)));
    }
    for k in [
        n.lease_swap(),
        n.lease_swap_out(),
        n.lease_swap_in(),
        n.lease_swap_snapshot(),
        n.lease_swap_asked(),
        n.lease_swap_join(),
        n.lease_instance(),
        n.lease_step(),
        n.lease_step_since(),
        n.lease_stopping(),
        n.lease_stopped(),
        n.lease_paused(),
        n.lease_protocol(),
        n.lease_last_swap(),
        n.lease_endings(),
        n.report_refused(),
    ] {
        out.insert(format!("lease key {}", unprefixed(k)));
    }
    out
}

fn golden(version: u32) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/wire-v{version}.txt"))
}

#[test]
fn the_wire_format_is_the_golden_one_of_its_protocol_version() {
    let now = wire();
    let file = golden(PROTOCOL_VERSION);
    if std::env::var_os("FLEET_ROLE_BLESS").is_some() {
        let text: String = now.iter().map(|l| format!("{l}\n")).collect();
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, text).unwrap();
    }
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: a new protocol version needs its golden file (FLEET_ROLE_BLESS=1 writes it)",
            file.display()
        )
    });
    let was: BTreeSet<String> = text.lines().map(str::to_string).collect();
    let gone: Vec<&String> = was.difference(&now).collect();
    let new: Vec<&String> = now.difference(&was).collect();
    assert!(
        gone.is_empty(),
        "the wire format of protocol version {PROTOCOL_VERSION} lost or changed {gone:?}: \
         a release reading the old one would misread this one; raise PROTOCOL_VERSION \
         (crates/protocol/src/version.rs) and write its golden file, or put it back"
    );
    assert!(
        new.is_empty(),
        "new in the wire format: {new:?}; if a reader before it ignores it (an optional \
         field, a new key), add it to {} (FLEET_ROLE_BLESS=1); if not, raise PROTOCOL_VERSION",
        file.display()
    );
}

#[test]
fn every_older_protocol_version_keeps_its_golden_file() {
    for v in protocol::version::OLDEST_KNOWN..=PROTOCOL_VERSION {
        assert!(golden(v).is_file(), "{} is missing", golden(v).display());
    }
}
