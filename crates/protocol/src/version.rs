//! The protocol's version: which meaning the report and the controller's
//! marks carry, so that a side meeting a newer one refuses rather than
//! guesses.
//!
//! Each side writes [`PROTOCOL_VERSION`] with what it writes: the actuator in
//! its report (`protocol`), the controller in the regrade Lease and on every
//! Node it asks a step of (the `<prefix>/protocol` annotation). A value
//! without it was written before versions were marked, and reads as version
//! 1, which is what it is: existing fleets keep working. A version this side
//! does not know ([`check`]) stops any swap involving the host (the
//! controller's `known-protocol` gate), or any step the marks ask (the host
//! refuses it and changes nothing).

use crate::validate::shown;

/// The version this build writes.
pub const PROTOCOL_VERSION: u32 = 1;

/// This build's release (the workspace's version): what the actuator
/// reports of itself and both programs show as `build_info`, so that an
/// operator sees which hosts run which release without reaching each.
pub const RELEASE: &str = env!("CARGO_PKG_VERSION");

/// The longest release a report may name.
pub const RELEASE_MAX: usize = 64;

/// Whether `release` reads as a release: 1 to [`RELEASE_MAX`] characters
/// of letters, digits and `.+-~_` (Debian's and SemVer's). A host's report
/// is that host's to write, so anything else is not shown.
pub fn release_valid(release: &str) -> bool {
    !release.is_empty()
        && release.len() <= RELEASE_MAX
        && release
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-~".contains(&b))
}

/// The oldest actuator release this build's controller drives. An actuator
/// of an older release speaks a known protocol version yet behaves in ways
/// this controller no longer plans for (docs/upgrade.md lists them), so a
/// swap, grow or shrink whose hosts run one is refused until they are
/// upgraded, as the upgrade order has it. Raise it with each release that
/// drops support for an older actuator.
pub const OLDEST_HOST_RELEASE: &str = "0.2.0";

/// Why a host's release is not one this build's controller drives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnsupportedRelease {
    /// The actuator names no release: it is older than the releases that
    /// report one, all of them before [`OLDEST_HOST_RELEASE`].
    #[error(
        "its actuator reports no release (an actuator before {OLDEST_HOST_RELEASE}, the oldest this controller drives)"
    )]
    None,
    /// The release does not read as `MAJOR.MINOR.PATCH`, so its age is
    /// unknown.
    #[error(
        "its actuator's release {shown} does not read as MAJOR.MINOR.PATCH, so its age is unknown"
    )]
    Unreadable {
        /// The release as found, escaped and quoted.
        shown: String,
    },
    /// The release is older than [`OLDEST_HOST_RELEASE`].
    #[error(
        "its actuator's release {release} is older than {OLDEST_HOST_RELEASE}, the oldest this controller drives"
    )]
    TooOld {
        /// The release as found.
        release: String,
    },
}

/// A release's `MAJOR.MINOR.PATCH`, read from its start; what follows a
/// `-`, `+` or `~` (a Debian revision, a pre-release, build metadata) is not
/// part of its age. `None` when it does not read so.
pub fn release_order(release: &str) -> Option<(u64, u64, u64)> {
    let core = release.split(['-', '+', '~']).next()?;
    let mut parts = core.split('.');
    let mut next = || -> Option<u64> {
        let p = parts.next()?;
        // Digits only: `parse` alone would take a leading `+`.
        p.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| p.parse().ok())
            .flatten()
    };
    let order = (next()?, next()?, next()?);
    parts.next().is_none().then_some(order)
}

/// Whether this build's controller drives a host whose actuator reports
/// `release` (`None`: it reports none): a release at least
/// [`OLDEST_HOST_RELEASE`]. A newer one than this build's is driven (the
/// actuators are upgraded first); its protocol version is checked apart.
pub fn host_release_supported(release: Option<&str>) -> Result<(), UnsupportedRelease> {
    let release = release.ok_or(UnsupportedRelease::None)?;
    let order = release_order(release).ok_or_else(|| UnsupportedRelease::Unreadable {
        shown: shown(release),
    })?;
    let oldest =
        release_order(OLDEST_HOST_RELEASE).expect("OLDEST_HOST_RELEASE reads as a release");
    if order < oldest {
        return Err(UnsupportedRelease::TooOld {
            release: release.to_string(),
        });
    }
    Ok(())
}

/// The oldest version this build still reads. Versions run from here to
/// [`PROTOCOL_VERSION`]; anything outside is unknown.
pub const OLDEST_KNOWN: u32 = 1;

/// The version a value without one was written in.
pub const UNMARKED: u32 = 1;

/// A version this build does not know, as found (escaped; safe in one line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "protocol version {shown} is not one this build knows ({OLDEST_KNOWN} to {PROTOCOL_VERSION})"
)]
pub struct UnknownVersion {
    /// The value found, escaped and quoted.
    pub shown: String,
}

/// Checks a version as found: `None` (no version written) is [`UNMARKED`];
/// otherwise a whole decimal number from [`OLDEST_KNOWN`] to
/// [`PROTOCOL_VERSION`], digits only.
pub fn check(raw: Option<&str>) -> Result<u32, UnknownVersion> {
    let Some(raw) = raw else {
        return Ok(UNMARKED);
    };
    let unknown = || UnknownVersion { shown: shown(raw) };
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(unknown());
    }
    match raw.parse::<u32>() {
        Ok(v) if (OLDEST_KNOWN..=PROTOCOL_VERSION).contains(&v) => Ok(v),
        _ => Err(unknown()),
    }
}

/// The version a report value claims, raw, for [`check`]: its `protocol`
/// field as JSON text (`"2"`, `"\"x\""`), `None` when the field is absent or
/// the value is no JSON object (then it is no report of any version, and
/// is read as none).
pub fn of_report(raw: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(raw).ok()?;
    Some(value.as_object()?.get("protocol")?.to_string())
}

/// The version as written into a mark.
pub fn mark() -> String {
    PROTOCOL_VERSION.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_without_a_version_reads_as_version_one() {
        assert_eq!(UNMARKED, 1);
        assert_eq!(check(None), Ok(1));
    }

    #[test]
    fn only_the_versions_this_build_knows_pass() {
        assert_eq!(check(Some("1")), Ok(1));
        assert_eq!(check(Some(&mark())), Ok(PROTOCOL_VERSION));
        let next = (PROTOCOL_VERSION + 1).to_string();
        let before = (OLDEST_KNOWN - 1).to_string();
        for bad in [
            next.as_str(),
            before.as_str(),
            "",
            "01x",
            "+1",
            "-1",
            " 1",
            "1.0",
            "\"1\"",
            "99999999999",
            "v1",
        ] {
            let err = check(Some(bad)).unwrap_err();
            assert_eq!(err.shown, shown(bad), "{bad:?}");
        }
        let msg = check(Some("2\n")).unwrap_err().to_string();
        assert_eq!(
            msg,
            "protocol version \"2\\n\" is not one this build knows (1 to 1)"
        );
    }

    #[test]
    fn a_reports_version_is_its_protocol_field_as_json_text() {
        assert_eq!(
            of_report("{\"protocol\":2,\"step\":\"x\"}"),
            Some("2".into())
        );
        assert_eq!(of_report("{\"protocol\":\"1\"}"), Some("\"1\"".into()));
        assert_eq!(of_report("{\"step\":\"promote\"}"), None);
        assert_eq!(of_report("[1]"), None);
        assert_eq!(of_report("not json"), None);
        assert!(check(of_report("{\"protocol\":\"1\"}").as_deref()).is_err());
        assert_eq!(check(of_report("{\"protocol\":1}").as_deref()), Ok(1));
    }

    #[test]
    fn a_release_is_ordered_by_its_major_minor_and_patch_alone() {
        assert_eq!(release_order("0.2.0"), Some((0, 2, 0)));
        assert_eq!(release_order("1.10.3-1"), Some((1, 10, 3)));
        assert_eq!(release_order("0.3.0~rc1"), Some((0, 3, 0)));
        assert_eq!(release_order("0.3.0+git5"), Some((0, 3, 0)));
        assert!(release_order("1.10.3") > release_order("1.9.12"));
        for bad in [
            "", "0.2", "0.2.0.1", "v0.2.0", "0..2", "0.2.x", "-0.2.0", "0.2.+1", "0.+2.0",
        ] {
            assert_eq!(release_order(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_controller_drives_hosts_of_its_oldest_supported_release_and_newer_only() {
        assert_eq!(host_release_supported(Some(OLDEST_HOST_RELEASE)), Ok(()));
        assert_eq!(host_release_supported(Some(RELEASE)), Ok(()));
        assert_eq!(host_release_supported(Some("0.2.0-1")), Ok(()));
        assert_eq!(host_release_supported(Some("9.0.0")), Ok(()));
        assert_eq!(
            host_release_supported(Some("0.1.9")),
            Err(UnsupportedRelease::TooOld {
                release: "0.1.9".into()
            })
        );
        assert_eq!(
            host_release_supported(Some("0.2.0~rc1")),
            Ok(()),
            "a pre-release of the oldest supported is its release"
        );
        assert_eq!(host_release_supported(None), Err(UnsupportedRelease::None));
        let e = host_release_supported(Some("banana\n")).unwrap_err();
        assert!(matches!(e, UnsupportedRelease::Unreadable { .. }), "{e:?}");
        assert_eq!(
            host_release_supported(Some("0.1.0"))
                .unwrap_err()
                .to_string(),
            "its actuator's release 0.1.0 is older than 0.2.0, the oldest this controller drives"
        );
    }
}
