//! The campaign's history and its check. Several clients read and write a
//! sequence of etcd keys (registers) through different members; every
//! operation is recorded with when it was asked and answered, in one order
//! shared by all clients, and its outcome:
//!
//! More in docs/internals.md, "lab: chaos::linear".

use std::collections::BTreeMap;

use stateright::semantics::{
    ConsistencyTester, LinearizabilityTester,
    register::{Register, RegisterOp, RegisterRet},
};

/// What an operation asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// Put this value (every value is written once, never 0).
    Write(u64),
    /// Read the key (0: unset).
    Read,
}

/// How it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered: for a read, the value read.
    Ok(Option<u64>),
    /// It never reached etcd.
    Failed,
    /// It may or may not have taken effect.
    Unknown,
}

/// One operation of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// The client's identity (a new one after an unknown outcome).
    pub client: u64,
    /// The key.
    pub key: String,
    /// What it asked.
    pub ask: Ask,
    /// Its place in the shared order when asked.
    pub asked: u64,
    /// Its place when answered (ok only).
    pub answered: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// When it was answered or given up, in milliseconds since the start.
    pub at_ms: u64,
}

/// What the check found: one line per key that breaks linearizability or
/// reads a value no client wrote; empty when none.
pub fn check(history: &[Op]) -> Vec<String> {
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in history {
        by_key.entry(&op.key).or_default().push(op);
    }
    let mut broken = Vec::new();
    for (key, ops) in by_key {
        broken.extend(check_key(key, &ops));
    }
    broken
}

enum Event<'a> {
    Asked(&'a Op),
    Answered(&'a Op),
}

fn check_key(key: &str, ops: &[&Op]) -> Option<String> {
    let written: Vec<u64> = ops
        .iter()
        .filter_map(|o| match o.ask {
            Ask::Write(v) if o.outcome != Outcome::Failed => Some(v),
            _ => None,
        })
        .collect();
    for o in ops {
        if let (Ask::Read, Outcome::Ok(Some(v))) = (o.ask, o.outcome)
            && v != 0
            && !written.contains(&v)
        {
            return Some(format!(
                "{key}: read {v}, which no client wrote (or whose put was refused)"
            ));
        }
    }
    let mut events: Vec<(u64, Event)> = Vec::new();
    for o in ops {
        match (o.ask, o.outcome) {
            (_, Outcome::Failed) | (Ask::Read, Outcome::Unknown) => {}
            (_, Outcome::Ok(_)) => {
                events.push((o.asked, Event::Asked(o)));
                events.push((o.answered, Event::Answered(o)));
            }
            (Ask::Write(_), Outcome::Unknown) => events.push((o.asked, Event::Asked(o))),
        }
    }
    events.sort_by_key(|(at, _)| *at);
    let mut tester = LinearizabilityTester::new(Register(0u64));
    for (_, e) in &events {
        let fed = match e {
            Event::Asked(o) => tester.on_invoke(
                o.client,
                match o.ask {
                    Ask::Write(v) => RegisterOp::Write(v),
                    Ask::Read => RegisterOp::Read,
                },
            ),
            Event::Answered(o) => tester.on_return(
                o.client,
                match (o.ask, o.outcome) {
                    (Ask::Read, Outcome::Ok(v)) => RegisterRet::ReadOk(v.unwrap_or(0)),
                    _ => RegisterRet::WriteOk,
                },
            ),
        };
        if let Err(e) = fed {
            return Some(format!("{key}: the history is malformed: {e}"));
        }
    }
    (!tester.is_consistent()).then(|| {
        let unknown = ops.iter().filter(|o| o.outcome == Outcome::Unknown).count();
        format!(
            "{key}: not linearizable ({} operations, {unknown} of unknown outcome): {}",
            ops.len(),
            shown(ops)
        )
    })
}

/// The key's operations, compactly, for the violation's line.
fn shown(ops: &[&Op]) -> String {
    ops.iter()
        .take(40)
        .map(|o| {
            let what = match (o.ask, o.outcome) {
                (Ask::Write(v), Outcome::Ok(_)) => format!("w{v}"),
                (Ask::Write(v), Outcome::Unknown) => format!("w{v}?"),
                (Ask::Write(v), Outcome::Failed) => format!("w{v}x"),
                (Ask::Read, Outcome::Ok(v)) => format!("r{}", v.unwrap_or(0)),
                (Ask::Read, _) => "r?".into(),
            };
            format!("c{}[{}..{}]{what}", o.client, o.asked, o.answered)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The counts of a history, for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Answered.
    pub ok: u64,
    /// Never reached etcd.
    pub failed: u64,
    /// Of unknown outcome.
    pub unknown: u64,
    /// The longest time between two acknowledged writes, in milliseconds.
    pub longest_write_stall_ms: u64,
}

/// Counts a history.
pub fn counts(history: &[Op]) -> Counts {
    let mut c = Counts::default();
    let mut acked: Vec<u64> = Vec::new();
    for o in history {
        match o.outcome {
            Outcome::Ok(_) => {
                c.ok += 1;
                if matches!(o.ask, Ask::Write(_)) {
                    acked.push(o.at_ms);
                }
            }
            Outcome::Failed => c.failed += 1,
            Outcome::Unknown => c.unknown += 1,
        }
    }
    acked.sort_unstable();
    c.longest_write_stall_ms = acked.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    c
}

#[cfg(test)]
mod tests;
