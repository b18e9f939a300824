//! What a call to the Docker daemon can end in.

use std::path::PathBuf;

/// A call that did not do what was asked, and why.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nothing listens at the socket, or the connection broke.
    #[error("the Docker daemon at {socket} could not be reached for {call}: {reason}")]
    Unreachable {
        /// The daemon's socket.
        socket: PathBuf,
        /// The call, as `METHOD /path`.
        call: String,
        /// What the connection said.
        reason: String,
    },
    /// The daemon did not answer the whole call within the bound; what the
    /// call asked may or may not have happened.
    #[error(
        "the Docker daemon at {socket} did not answer {call} within {secs} s; the call may or may not have taken effect"
    )]
    Timeout {
        /// The daemon's socket.
        socket: PathBuf,
        /// The call, as `METHOD /path`.
        call: String,
        /// The bound, in seconds.
        secs: f64,
    },
    /// The daemon refused the call, with its message.
    #[error("the Docker daemon refused {call} ({status}): {message}")]
    Refused {
        /// The call, as `METHOD /path`.
        call: String,
        /// The HTTP status.
        status: u16,
        /// Docker's message, on one line and cut short.
        message: String,
    },
    /// The answer is not what the API documents.
    #[error("the Docker daemon's answer to {call} does not parse: {reason}")]
    Unreadable {
        /// The call, as `METHOD /path`.
        call: String,
        /// Why.
        reason: String,
    },
}

/// The longest piece of the daemon's text quoted in an error.
pub(crate) const QUOTE: usize = 200;

/// `text` on one line, cut to [`QUOTE`] characters.
pub(crate) fn one_line(text: &str) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(QUOTE)
        .collect();
    if text.chars().count() > QUOTE {
        out.push('…');
    }
    out.trim().to_string()
}
