//! What the exit code of `fleet-role` and `fleet-role-actuator` tells a
//! script: one definition for both programs, so that a runbook or an
//! Ansible task reads them alike.

/// The outcome of a command, as its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exit {
    /// 0: done as asked.
    Done,
    /// 1: refused (a gate, a check, a damaged role file) with nothing
    /// changed; `fleet-role-actuator is` answering no.
    Refused,
    /// 2: a usage error: a flag, a value or a config file is wrong; nothing
    /// was read from the cluster or changed.
    Usage,
    /// 3: failed, and left the cluster and the host safe: as they were, or
    /// at a safe point from which the same command resumes.
    FailedSafe,
    /// 4: stopped part-way where fleet-role will not go on by itself; a
    /// person must look (the message says the state left and what to do).
    NeedsHuman,
    /// 5: `status` found something degraded.
    Degraded,
}

impl Exit {
    /// Every outcome, in the order of its code.
    pub const ALL: [Exit; 6] = [
        Exit::Done,
        Exit::Refused,
        Exit::Usage,
        Exit::FailedSafe,
        Exit::NeedsHuman,
        Exit::Degraded,
    ];

    /// The exit code.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Done => 0,
            Exit::Refused => 1,
            Exit::Usage => 2,
            Exit::FailedSafe => 3,
            Exit::NeedsHuman => 4,
            Exit::Degraded => 5,
        }
    }

    /// The meaning, in one line, as the help and the man pages give it.
    pub const fn meaning(self) -> &'static str {
        match self {
            Exit::Done => "done as asked",
            Exit::Refused => "refused, nothing changed (a gate or a check said no)",
            Exit::Usage => "usage error: a flag, value or config file is wrong; nothing changed",
            Exit::FailedSafe => {
                "failed, cluster and host left safe: as they were, or at a safe point the same command resumes from"
            }
            Exit::NeedsHuman => {
                "stopped part-way and needs a human: the message says the state left and what to do"
            }
            Exit::Degraded => "status only: something is degraded",
        }
    }
}

/// An error marked with the outcome it stands for (an `anyhow` context at
/// the point that knows: a flag's parse is [`Exit::Usage`], a switch that
/// stopped part-way [`Exit::NeedsHuman`]); the programs' edges read it back.
/// An error without one is [`Exit::FailedSafe`]: every call out is bounded
/// and an unmarked failure happens between two safe points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.label())]
pub struct Marked(pub Exit);

impl Exit {
    /// The word a marked error's message starts with.
    pub const fn label(self) -> &'static str {
        match self {
            Exit::Done => "done",
            Exit::Refused => "refused",
            Exit::Usage => "usage error",
            Exit::FailedSafe => "failed",
            Exit::NeedsHuman => "needs a human",
            Exit::Degraded => "degraded",
        }
    }
}

/// An error's chain of causes as one line, each said once: a cause whose
/// words its parent already carries (a library's error that prints its
/// source as well as returning it) is left out, so nothing is said twice.
pub fn said_once<I>(chain: I) -> String
where
    I: IntoIterator,
    I::Item: std::fmt::Display,
{
    let mut out: Vec<String> = Vec::new();
    let mut parent = String::new();
    for cause in chain {
        // A library's line breaks are layout (a multi-line status), read
        // best as spaces; any other control character goes through the one
        // rule, unbounded, since a cut cause would lose what went wrong.
        let text = crate::text::one_line_within(&cause.to_string().replace('\n', " "), usize::MAX);
        if !text.is_empty() && !parent.contains(&text) {
            out.push(text.clone());
        }
        parent = text;
    }
    out.join(": ")
}

/// The exit codes as the help's closing section (clap's `after_help`, which
/// the man pages carry too). Kept as one literal so that clap can take it as
/// is; a test holds it to [`Exit::meaning`].
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  done as asked
  1  refused, nothing changed (a gate or a check said no)
  2  usage error: a flag, value or config file is wrong; nothing changed
  3  failed, cluster and host left safe: as they were, or at a safe point the same command resumes from
  4  stopped part-way and needs a human: the message says the state left and what to do
  5  status only: something is degraded";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_has_its_own_code_in_order() {
        for (i, e) in Exit::ALL.iter().enumerate() {
            assert_eq!(usize::from(e.code()), i, "{e:?}");
        }
    }

    #[test]
    fn a_marked_error_says_its_outcome_in_a_word() {
        assert_eq!(Marked(Exit::Usage).to_string(), "usage error");
        assert_eq!(Marked(Exit::NeedsHuman).to_string(), "needs a human");
        let words: std::collections::HashSet<_> = Exit::ALL.iter().map(|e| e.label()).collect();
        assert_eq!(words.len(), Exit::ALL.len());
    }

    #[test]
    fn a_cause_its_parent_already_says_is_said_once() {
        let chain = [
            "cannot use the kubeconfig /x: failed to read /x: No such file",
            "failed to read /x: No such file",
            "No such file",
        ];
        assert_eq!(
            said_once(chain),
            "cannot use the kubeconfig /x: failed to read /x: No such file"
        );
        assert_eq!(
            said_once(["reading the cluster", "401 Unauthorized"]),
            "reading the cluster: 401 Unauthorized"
        );
        assert_eq!(said_once(["a\nb"]), "a b");
        assert_eq!(said_once(["a\u{1b}[31mb"]), "a\\u{1b}[31mb");
        assert_eq!(said_once(Vec::<String>::new()), "");
    }

    #[test]
    fn the_help_lists_every_code_with_its_meaning() {
        let mut want = String::from("Exit codes:");
        for e in Exit::ALL {
            want.push_str(&format!("\n  {}  {}", e.code(), e.meaning()));
        }
        assert_eq!(EXIT_CODES_HELP, want);
    }
}
