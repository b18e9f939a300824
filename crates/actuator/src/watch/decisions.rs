//! What the watcher's decisions came to, and how many it has made: a
//! caller that must know a change was decided on waits on these.

/// What a decision was ([`hostdecide::Decision`]'s kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// Nothing to do.
    Nothing,
    /// A step waits (for its Lease, a server, ...).
    Wait,
    /// A step refused.
    Refuse,
    /// A step taken (or its running host part kept).
    Take,
}

impl Decided {
    /// The kind of `d`.
    pub fn of(d: &hostdecide::Decision) -> Self {
        match d {
            hostdecide::Decision::Nothing => Decided::Nothing,
            hostdecide::Decision::Wait { .. } => Decided::Wait,
            hostdecide::Decision::Refuse { .. } => Decided::Refuse,
            hostdecide::Decision::Take { .. } => Decided::Take,
        }
    }

    /// Its name in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Decided::Nothing => "nothing",
            Decided::Wait => "wait",
            Decided::Refuse => "refuse",
            Decided::Take => "take",
        }
    }
}

/// The decisions a watcher has made so far
/// ([`Watcher::decisions`](crate::watch::Watcher::decisions)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decisions {
    /// How many: each counted once all it led to was sent.
    pub made: u64,
    /// What the last one was (none: it was cut short before deciding, by
    /// a failed request or a Node not seen yet).
    pub last: Option<Decided>,
}
