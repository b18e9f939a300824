//! The report as the watcher holds it: its memory of steps, read once per
//! run and kept here after, and how it stands against the API's copy.

use protocol::Report;

/// The report as the watcher holds it: its memory of steps.
#[derive(Debug, Default)]
pub(super) struct Memory {
    /// The last report written (or read).
    pub(super) report: Option<Report>,
    /// How it stands against the API's copy.
    pub(super) copy: Copy,
    /// The host's objects in the API as last read or written.
    pub(super) published: crate::report::Published,
    /// The API's refusal of the last report sent, while it stands, and
    /// when it was said: the same report is sent again at most once a
    /// heartbeat period (a new one at once), and the refusal rides on the
    /// heartbeat, where `status` shows it.
    pub(super) refused: Option<(std::time::Instant, crate::report::Refusal)>,
}

impl Memory {
    /// Whether `refusal` is not the one the last report met (a new one is
    /// said; the same one again is not).
    pub(super) fn is_new(&self, refusal: &crate::report::Refusal) -> bool {
        self.refused.as_ref().is_none_or(|(_, r)| r != refusal)
    }
}

/// How the report in memory stands against the API's copy.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Copy {
    /// Not read yet: the next session reads it (the host's copy and the
    /// API's) before anything else.
    #[default]
    NotRead,
    /// The API holds what memory holds.
    Written,
    /// Memory is ahead of the API (a write that failed, or the API's copy
    /// found behind the host's): written first thing at the next decision.
    Unwritten,
}
