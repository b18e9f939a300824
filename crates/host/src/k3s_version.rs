//! Which k3s this host runs (`k3s --version`), and whether it is a release
//! fleet-role was checked against.
//!
//! What fleet-role relies on in k3s (the agent's flags, the join, the
//! member removal, the learner loop, the snapshot commands; docs/lab.md
//! names each source file) was read in k3s v1.32 to v1.36. Another release
//! may differ in any of them, so the actuator says so at its start and in
//! `status`; it does not refuse, since a fleet upgrading k3s one host at a
//! time passes through a release newer than the actuator knows, and
//! refusing there would leave hosts without the actuator mid-upgrade.

use std::{ops::RangeInclusive, time::Duration};

use crate::{
    error::{Error, Result},
    systemd::describe,
};

/// The k3s minor releases (of major 1) fleet-role was checked against.
pub const SUPPORTED_MINORS: RangeInclusive<u32> = 32..=36;

/// How long `k3s --version` may take: it reads nothing but its own build.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// A k3s release, as `k3s --version` names it (`v1.34.3+k3s1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct K3sVersion {
    /// The major version (1).
    pub major: u32,
    /// The minor version (34).
    pub minor: u32,
    /// The patch version (3).
    pub patch: u32,
    /// The whole version word, as printed (`v1.34.3+k3s1`).
    pub text: String,
}

impl K3sVersion {
    /// Reads `k3s --version`'s output: its first line is
    /// `k3s version v1.34.3+k3s1 (151ca514)`. Anything else is `None`.
    pub fn parse(output: &str) -> Option<K3sVersion> {
        let line = output.lines().next()?;
        let word = line
            .strip_prefix("k3s version ")?
            .split_whitespace()
            .next()?;
        let core = word.strip_prefix('v')?.split(['+', '-']).next()?;
        let mut parts = core.split('.').map(|p| p.parse::<u32>().ok());
        let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
        Some(K3sVersion {
            major,
            minor,
            patch,
            text: protocol::text::one_line_within(word, 64),
        })
    }

    /// Whether fleet-role was checked against this release.
    pub fn supported(&self) -> bool {
        self.major == 1 && SUPPORTED_MINORS.contains(&self.minor)
    }

    /// What the actuator warns of for this release, if anything.
    pub fn warning(&self) -> Option<String> {
        (!self.supported()).then(|| {
            format!(
                "k3s {} is not a release fleet-role was checked against (v1.{} to v1.{}): what it relies on in k3s may differ; see docs/install.md",
                self.text,
                SUPPORTED_MINORS.start(),
                SUPPORTED_MINORS.end()
            )
        })
    }
}

/// Runs `k3s --version` (bounded) and reads it.
pub fn read(
    paths: &crate::HostPaths,
    cli: &crate::k3s_cli::K3sCli,
    budget: &crate::Budget,
) -> Result<K3sVersion> {
    let line = "k3s --version";
    let out = cli.run(
        paths,
        &["--version"],
        VERSION_TIMEOUT,
        "nothing: it only prints its version",
        budget,
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    match (out.status.success(), K3sVersion::parse(&text)) {
        (true, Some(v)) => Ok(v),
        _ => Err(Error::Command {
            command: line.into(),
            detail: format!("no k3s version in its output: {}", describe(&out)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_k3s_own_first_line_and_checked_against_the_releases_read() {
        let v = K3sVersion::parse("k3s version v1.34.3+k3s1 (151ca514)\ngo version go1.24.11\n")
            .unwrap();
        assert_eq!((v.major, v.minor, v.patch), (1, 34, 3));
        assert_eq!(v.text, "v1.34.3+k3s1");
        assert!(v.supported() && v.warning().is_none());
        for (out, supported) in [
            ("k3s version v1.32.0+k3s1 (x)", true),
            ("k3s version v1.36.9-rc1+k3s2 (x)", true),
            ("k3s version v1.31.12+k3s1 (x)", false),
            ("k3s version v1.37.0+k3s1 (x)", false),
            ("k3s version v2.33.0+k3s1 (x)", false),
        ] {
            let v = K3sVersion::parse(out).unwrap();
            assert_eq!(v.supported(), supported, "{out}");
            assert_eq!(v.warning().is_some(), !supported, "{out}");
        }
        let w = K3sVersion::parse("k3s version v1.37.0+k3s1 (x)")
            .unwrap()
            .warning()
            .unwrap();
        assert!(
            w.contains("v1.37.0+k3s1") && w.contains("v1.32 to v1.36"),
            "{w}"
        );
        for bad in [
            "",
            "k3s version",
            "k3s version 1.34.3",
            "k3s version vX.Y.Z",
            "rke2 version v1.34.3",
        ] {
            assert_eq!(K3sVersion::parse(bad), None, "{bad:?}");
        }
    }
}
