//! Settings files, as both fleet-role programs read them: a TOML file whose
//! every key is optional, a flag (or its environment variable) over each
//! key that has one, then the default; and errors of one line that name the
//! file or the key, so an operator knows what to fix.
//!
//! The precedence is flag, then environment variable, then file, then
//! default. The first two are clap's (a flag declared with `env = ...`
//! reads the variable only when the flag is absent); [`layer`] puts the
//! result over the file's value.
//!
//! Each program keeps its own file struct, with
//! `#[serde(deny_unknown_fields)]` so that a misspelt key is an error rather
//! than a setting silently left at its default, and turns it into validated
//! settings in one function, reporting a bad value with [`Error::invalid`].

#![forbid(unsafe_code)]

use std::{
    fmt::Display,
    io,
    path::{Path, PathBuf},
};

use serde::de::DeserializeOwned;

/// A settings error: one line that names the file or the key.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config file could not be read.
    #[error("cannot read the config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The config file is not valid TOML for these keys.
    #[error("invalid config file {}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said (an unknown key is named here).
        message: String,
    },
    /// A value is not valid.
    #[error("invalid {key}: {why}")]
    Invalid {
        /// The key, flag or variable.
        key: &'static str,
        /// Why.
        why: String,
    },
}

/// The result of reading settings.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A value of `key` (as the file, flag or variable names it) is refused
    /// for `why`.
    pub fn invalid(key: &'static str, why: impl Display) -> Self {
        Error::Invalid {
            key,
            why: why.to_string(),
        }
    }
}

/// Reads the config file: `named` (from a flag) if given, which must exist;
/// else `default` if the program has a default file, which may be absent
/// (a host configured by flags alone); else no file. A file that is absent
/// or not given means every key takes its default.
pub fn load<T: DeserializeOwned + Default>(
    named: Option<&Path>,
    default: Option<&Path>,
) -> Result<T> {
    let (path, must_exist) = match (named, default) {
        (Some(p), _) => (p, true),
        (None, Some(p)) => (p, false),
        (None, None) => return Ok(T::default()),
    };
    match std::fs::read_to_string(path) {
        Ok(text) => parse(path, &text),
        Err(e) if !must_exist && e.kind() == io::ErrorKind::NotFound => Ok(T::default()),
        Err(source) => Err(Error::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Parses `text`, the contents of the config file `path` (named in the
/// error).
pub fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T> {
    toml::from_str(text).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        message: e.message().to_string(),
    })
}

/// One setting's value: `over` (the flag, or its environment variable) if
/// given, else the file's.
pub fn layer<T>(over: Option<T>, file: Option<T>) -> Option<T> {
    over.or(file)
}

/// The most a `*_secs` setting may be: a week. Every wait and bound of
/// either program is seconds to minutes; far more is a mistake, and past
/// `i64` or added to another bound it would overflow (a panic, or a wait
/// that never ends).
pub const MAX_SECS: u64 = 7 * 24 * 60 * 60;

/// A `*_secs` setting `key` as a duration: `value`, else `default`; a value
/// over [`MAX_SECS`] is refused with an error naming the key.
pub fn seconds(key: &'static str, value: Option<u64>, default: u64) -> Result<std::time::Duration> {
    match value.unwrap_or(default) {
        v if v > MAX_SECS => Err(Error::invalid(
            key,
            format!("must be at most {MAX_SECS} seconds (a week), not {v}"),
        )),
        v => Ok(std::time::Duration::from_secs(v)),
    }
}

/// A listen address (`metrics_address`): `HOST:PORT`, the host an IP
/// address (no name to resolve), or `None` when not set.
pub fn listen_address(
    key: &'static str,
    value: Option<&str>,
) -> Result<Option<std::net::SocketAddr>> {
    value
        .map(|a| {
            a.parse()
                .map_err(|_| Error::invalid(key, "must be HOST:PORT, e.g. 127.0.0.1:9464"))
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use std::fs;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        port: Option<u16>,
    }

    #[test]
    fn a_named_file_is_read_and_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        fs::write(&path, "port = 7").unwrap();
        let f: File = load(Some(&path), None).unwrap();
        assert_eq!(f.port, Some(7));
    }

    #[test]
    fn a_missing_named_file_is_an_error_naming_it_even_with_a_default() {
        let dir = tempfile::tempdir().unwrap();
        let named = dir.path().join("missing.toml");
        let default = dir.path().join("default.toml");
        fs::write(&default, "port = 7").unwrap();
        let err = load::<File>(Some(&named), Some(&default)).unwrap_err();
        assert!(matches!(err, Error::Read { .. }), "{err}");
        assert!(err.to_string().contains(&*named.to_string_lossy()), "{err}");
    }

    #[test]
    fn a_missing_default_file_or_none_at_all_means_every_default() {
        let dir = tempfile::tempdir().unwrap();
        let default = dir.path().join("absent.toml");
        assert_eq!(load::<File>(None, Some(&default)).unwrap(), File::default());
        assert_eq!(load::<File>(None, None).unwrap(), File::default());
    }

    #[test]
    fn a_default_file_that_exists_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let default = dir.path().join("default.toml");
        fs::write(&default, "port = 9").unwrap();
        assert_eq!(load::<File>(None, Some(&default)).unwrap().port, Some(9));
    }

    #[test]
    fn a_default_file_that_cannot_be_read_is_an_error() {
        // A directory where the file should be: not "absent", so not ignored.
        let dir = tempfile::tempdir().unwrap();
        let err = load::<File>(None, Some(dir.path())).unwrap_err();
        assert!(matches!(err, Error::Read { .. }), "{err}");
    }

    #[test]
    fn an_unknown_key_or_a_bad_type_is_a_parse_error_naming_the_file_and_the_key() {
        let path = Path::new("/etc/x.toml");
        let err = parse::<File>(path, "prot = 7").unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Parse { .. }));
        assert!(
            text.contains("/etc/x.toml") && text.contains("prot"),
            "{text}"
        );
        let err = parse::<File>(path, "port = \"x\"").unwrap_err();
        assert!(matches!(err, Error::Parse { .. }), "{err}");
    }

    #[test]
    fn a_flag_wins_over_the_file_and_the_file_over_nothing() {
        assert_eq!(layer(Some(1), Some(2)), Some(1));
        assert_eq!(layer(None, Some(2)), Some(2));
        assert_eq!(layer::<u8>(None, None), None);
    }

    #[test]
    fn an_invalid_value_names_its_key() {
        assert_eq!(
            Error::invalid("join_port", "must be 1-65535").to_string(),
            "invalid join_port: must be 1-65535"
        );
    }

    #[test]
    fn a_seconds_setting_past_a_week_is_an_error_naming_its_key() {
        use std::time::Duration;
        assert_eq!(
            seconds("k_secs", None, 60).unwrap(),
            Duration::from_secs(60)
        );
        assert_eq!(
            seconds("k_secs", Some(MAX_SECS), 60).unwrap(),
            Duration::from_secs(MAX_SECS)
        );
        for v in [MAX_SECS + 1, u64::MAX] {
            let err = seconds("k_secs", Some(v), 60).unwrap_err().to_string();
            assert!(err.starts_with("invalid k_secs: "), "{err}");
        }
    }

    #[test]
    fn a_listen_address_is_an_ip_and_port_or_a_clear_error() {
        assert_eq!(listen_address("k", None).unwrap(), None);
        assert_eq!(
            listen_address("k", Some("127.0.0.1:9464")).unwrap(),
            Some("127.0.0.1:9464".parse().unwrap())
        );
        let err = listen_address("k", Some("nowhere")).unwrap_err();
        assert!(err.to_string().contains("k"), "{err}");
    }
}
