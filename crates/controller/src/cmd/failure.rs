//! Why a command failed, each cause with the exit code it stands for, so
//! that the edge prints the error once and exits with [`Failure::exit`]
//! without searching the error's causes for a mark.

use controller::{act::ActError, cluster::ClusterError, drive, metrics::MetricsError, watch};
use protocol::exit::{Exit, Marked};

/// A command's outcome: its exit, or why it failed.
pub(crate) type Outcome = Result<Exit, Failure>;

/// Why a command failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The caller's: a flag, a value or a config file is wrong, and
    /// nothing was read from the cluster (exit 2).
    Usage(anyhow::Error),
    /// A check said no before anything was written (exit 1).
    Refused(anyhow::Error),
    /// The drive ended in an error: its own exit.
    Drive(drive::Error),
    /// No client could be made: its own exit (a kubeconfig is the
    /// caller's).
    Cluster(ClusterError),
    /// Any other error, between two safe points (exit 3), unless a
    /// library command (`enroll`, `unenroll`) marked it with its outcome
    /// where it knew ([`Marked`]).
    Other(anyhow::Error),
}

impl Failure {
    /// The exit code this failure stands for.
    pub(crate) fn exit(&self) -> Exit {
        match self {
            Failure::Usage(_) => Exit::Usage,
            Failure::Refused(_) => Exit::Refused,
            Failure::Drive(e) => e.exit(),
            Failure::Cluster(e) => e.exit(),
            // The library commands return `anyhow` errors and mark the
            // caller's mistakes; the kubeconfig's is found as it was
            // returned, from their client closure.
            Failure::Other(e) => {
                match (e.downcast_ref::<Marked>(), e.downcast_ref::<ClusterError>()) {
                    (Some(m), _) => m.0,
                    (None, Some(c)) => c.exit(),
                    (None, None) => Exit::FailedSafe,
                }
            }
        }
    }

    /// The error with its causes, for the edge to print once
    /// ([`controller::output::print_error`] starts it with the word of
    /// [`Failure::exit`] unless a mark already says it).
    pub(crate) fn into_error(self) -> anyhow::Error {
        match self {
            Failure::Usage(e) | Failure::Refused(e) | Failure::Other(e) => e,
            Failure::Drive(e) => e.into(),
            Failure::Cluster(e) => e.into(),
        }
    }

    /// The failure and its causes on one line, its outcome's word first
    /// when it is the caller's or a refusal: what a log says of it.
    pub(crate) fn said(&self) -> String {
        match self {
            Failure::Usage(e) => format!("{}: {e:#}", Exit::Usage.label()),
            Failure::Refused(e) => format!("{}: {e:#}", Exit::Refused.label()),
            Failure::Drive(e) => e.said(),
            Failure::Cluster(e) => drive::chain(e),
            Failure::Other(e) => format!("{e:#}"),
        }
    }
}

impl From<drive::Error> for Failure {
    fn from(e: drive::Error) -> Self {
        Failure::Drive(e)
    }
}

impl From<ClusterError> for Failure {
    fn from(e: ClusterError) -> Self {
        Failure::Cluster(e)
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Other(e)
    }
}

impl From<ActError> for Failure {
    fn from(e: ActError) -> Self {
        Failure::Other(e.into())
    }
}

impl From<watch::WatchError> for Failure {
    fn from(e: watch::WatchError) -> Self {
        Failure::Other(e.into())
    }
}

impl From<MetricsError> for Failure {
    fn from(e: MetricsError) -> Self {
        Failure::Other(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_exits_with_the_code_of_its_cause() {
        let plain = || anyhow::anyhow!("x");
        assert_eq!(Failure::Usage(plain()).exit(), Exit::Usage);
        assert_eq!(Failure::Refused(plain()).exit(), Exit::Refused);
        assert_eq!(Failure::Other(plain()).exit(), Exit::FailedSafe);
        let will_not = drive::Error::WillNotStart { why: "y".into() };
        assert_eq!(Failure::from(will_not).exit(), Exit::Refused);
        let held = drive::Error::LeaseHeld { secs: 130 };
        assert_eq!(Failure::from(held).exit(), Exit::FailedSafe);
        let plain_url = ClusterError::Plain {
            url: "http://a".into(),
        };
        assert_eq!(Failure::from(plain_url).exit(), Exit::FailedSafe);
    }

    #[test]
    fn a_library_commands_mark_and_its_kubeconfig_error_keep_their_codes() {
        let marked = anyhow::anyhow!("bad identity").context(Marked(Exit::Usage));
        assert_eq!(Failure::from(marked).exit(), Exit::Usage);
        let infer = ClusterError::Plain {
            url: "http://a".into(),
        };
        assert_eq!(
            Failure::from(anyhow::Error::new(infer)).exit(),
            Exit::FailedSafe
        );
    }

    #[test]
    fn the_printed_error_starts_with_its_outcome_once() {
        let e = Failure::Refused(anyhow::anyhow!("swap refused: the window is shut"));
        assert_eq!(e.said(), "refused: swap refused: the window is shut");
        let d = Failure::from(drive::Error::WillNotStart { why: "y".into() });
        assert_eq!(d.said(), "refused: run will not start: y");
        assert_eq!(
            d.into_error().to_string(),
            "run will not start: y",
            "the edge adds the word, so the error itself does not"
        );
    }
}
