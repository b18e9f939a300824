//! `fleet-role-actuator`'s commands, one file each, and what they share:
//! the settings of a command (any error in them the caller's) and the
//! outcome an error stands for.
//!
//! `main` parses the flags, calls one command, and turns its outcome into
//! the exit code; nothing here prints an error (the edge does, once).

mod demote_local;
mod hand_over;
mod is;
mod promote_local;
mod remove_ghost;
mod remove_learner;
mod snapshot;
mod status;
mod wait_join;
mod watch;

pub(crate) use self::{
    demote_local::demote_local, hand_over::hand_over, is::is, promote_local::promote_local,
    remove_ghost::remove_ghost, remove_learner::remove_learner, snapshot::snapshot, status::status,
    wait_join::wait_join, watch::watch,
};

use actuator::{
    cli::{ApiArgs, Cli},
    config::Settings,
};
use protocol::exit::{Exit, Marked};

/// The outcome an error stands for: its mark; a damaged role file is a
/// refusal (nothing is changed while it names no role); anything else a
/// failure that left the host safe (every call out is bounded, and a
/// switch that stops part-way is marked).
pub(crate) fn exit_of(e: &anyhow::Error) -> Exit {
    if let Some(m) = e.downcast_ref::<Marked>() {
        return m.0;
    }
    match e.downcast_ref::<host::Error>() {
        Some(host::Error::BadRoleFile { .. }) => Exit::Refused,
        _ => Exit::FailedSafe,
    }
}

/// Marks an error as the caller's: a flag, a value or a file it names.
fn usage(e: impl Into<anyhow::Error>) -> anyhow::Error {
    e.into().context(Marked(Exit::Usage))
}

/// The settings of a command, any error in them the caller's.
fn settings(
    cli: &Cli,
    api: Option<&ApiArgs>,
    lock_timeout: Option<u64>,
) -> anyhow::Result<Settings> {
    Settings::from_flags(cli, api, lock_timeout).map_err(usage)
}
