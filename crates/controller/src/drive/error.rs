//! Why a drive ended without an [`Ending`](crate::ending::Ending), and
//! the exit code each cause stands for: the program's edge asks
//! [`Error::exit`] instead of searching the error's causes for a mark.

use protocol::exit::Exit;

use crate::act::ActError;

/// Why [`Driver`](super::Driver) stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Listing the cluster failed (a command without watches: `status`,
    /// a dry run, `abort`'s first look).
    #[error("reading the cluster")]
    Read(#[source] kube::Error),
    /// A write, or a read that a write depends on (the regrade Lease read
    /// again, the outgoing Node's pods), failed.
    #[error(transparent)]
    Act(#[from] ActError),
    /// Another controller process kept the regrade Lease past twice its
    /// duration: it renews, so it is alive, and this one gives way.
    #[error(
        "the regrade Lease stayed held by another controller process for {secs} s: it is alive; see `fleet-role status`"
    )]
    LeaseHeld {
        /// How long it waited, in seconds.
        secs: u64,
    },
    /// The API failed on every try for longer than the patience; the swap
    /// is at a safe point, and the same command resumes it.
    #[error("the API failed for over {secs} s; run the same command again to resume")]
    ApiPatience {
        /// The patience, in seconds.
        secs: u64,
        /// The last failure.
        #[source]
        last: Box<Error>,
    },
    /// `run` refused to start: its labels would have it churn (see
    /// [`fleetdecide::eligibility_shortfall`]).
    #[error("run will not start: {why}")]
    WillNotStart {
        /// The shortfall.
        why: String,
    },
}

/// A drive's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The exit code this error stands for: a refusal to start changed
    /// nothing; every other error comes between two safe points (every
    /// call out is bounded, and a swap left part-way resumes when the
    /// same command runs again).
    pub fn exit(&self) -> Exit {
        match self {
            Error::WillNotStart { .. } => Exit::Refused,
            Error::Read(_)
            | Error::Act(_)
            | Error::LeaseHeld { .. }
            | Error::ApiPatience { .. } => Exit::FailedSafe,
        }
    }

    /// The error and its causes on one line, each joined by `: ` (as a
    /// log says it), a refusal's outcome word first (as the edge prints
    /// it): what `run --dry-run` says of a refusal and a failover logs.
    pub fn said(&self) -> String {
        let chain = chain(self);
        match self.exit() {
            Exit::Refused => format!("{}: {chain}", Exit::Refused.label()),
            _ => chain,
        }
    }
}

/// `e` and each of its causes, joined by `: `.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_to_start_exits_1_and_says_so_first() {
        let e = Error::WillNotStart {
            why: "n1 is unlabelled".into(),
        };
        assert_eq!(e.exit(), Exit::Refused);
        assert_eq!(e.said(), "refused: run will not start: n1 is unlabelled");
    }

    #[test]
    fn an_api_given_up_on_exits_3_and_names_its_last_failure() {
        let e = Error::ApiPatience {
            secs: 300,
            last: Box::new(Error::Act(ActError::Lost("gone".into()))),
        };
        assert_eq!(e.exit(), Exit::FailedSafe);
        assert_eq!(
            e.said(),
            "the API failed for over 300 s; run the same command again to resume: lost the regrade Lease: gone"
        );
        assert_eq!(Error::LeaseHeld { secs: 130 }.exit(), Exit::FailedSafe);
    }
}
