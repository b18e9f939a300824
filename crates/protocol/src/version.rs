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
}
