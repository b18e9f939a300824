//! k3s's configuration files, read in one place and in k3s's order.
//!
//! More in docs/internals.md, "host: k3s_config".

use std::{
    collections::BTreeMap,
    fmt, fs,
    path::{Path, PathBuf},
};

use serde::de::{DeserializeOwned, IgnoredAny};

use crate::HostPaths;

/// Why a config file k3s would read cannot be used (see the module's
/// policy): never a value from the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct Unusable {
    /// What is wrong, with the line and column where the parser stopped.
    pub why: String,
}

/// One of k3s's config files, as read.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// The file.
    pub path: PathBuf,
    /// Its keys and values, or why it cannot be used.
    pub content: Result<Mapping, Unusable>,
}

/// A config file that is a YAML mapping.
#[derive(Clone)]
pub struct Mapping {
    text: String,
    keys: Vec<String>,
}

impl fmt::Debug for Mapping {
    // The text holds the join token: only the keys are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapping").field("keys", &self.keys).finish()
    }
}

impl Mapping {
    /// Every key, as written (an append's `+` kept), sorted by name.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The keys `T` names, read from this file (`T`'s default for an empty
    /// file). A value of a type k3s would not take is [`Unusable`].
    pub fn get<T: DeserializeOwned + Default>(&self) -> Result<T, Unusable> {
        if self.keys.is_empty() {
            return Ok(T::default());
        }
        serde_saphyr::from_str(&self.text).map_err(|e| located("a value k3s would not take", &e))
    }
}

/// `what`, with where the parser stopped (never its message).
fn located(what: &str, e: &serde_saphyr::Error) -> Unusable {
    Unusable {
        why: e.location().map_or_else(
            || what.to_string(),
            |l| format!("{what} (line {}, column {})", l.line(), l.column()),
        ),
    }
}

/// The files k3s reads, in its order (a later file wins): `config.yaml`,
/// then `config.yaml.d/*.yaml|*.yml` in name order. Only the names: see
/// [`read`] for their contents.
pub fn files(paths: &HostPaths) -> Vec<PathBuf> {
    let mut files = vec![paths.k3s_config()];
    if let Ok(entries) = fs::read_dir(paths.k3s_dropins()) {
        let mut more: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        more.sort();
        files.extend(more);
    }
    files
}

/// Reads one file k3s would read: `None` when it does not exist.
pub fn read_file(path: &Path) -> Option<ConfigFile> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            return Some(ConfigFile {
                path: path.to_path_buf(),
                content: Err(Unusable {
                    why: format!("cannot be read ({})", e.kind()),
                }),
            });
        }
    };
    Some(ConfigFile {
        path: path.to_path_buf(),
        content: parse(text),
    })
}

/// Reads the text of one file k3s would read (see the module's policy):
/// white space and comments alone are an empty mapping, a YAML mapping is
/// its keys, anything else is [`Unusable`]. Whoever can write under
/// `/etc/rancher/k3s` writes this text (an operator, a provisioning tool,
/// an Ansible role), and it holds the join token: what is said of a text
/// that does not read is where the parser stopped, never a piece of it.
pub fn parse(text: String) -> Result<Mapping, Unusable> {
    if only_comments(&text) {
        Ok(Mapping { text, keys: vec![] })
    } else {
        serde_saphyr::from_str::<BTreeMap<String, IgnoredAny>>(&text)
            .map(|map| Mapping {
                keys: map.into_keys().collect(),
                text,
            })
            .map_err(|e| located("not valid YAML for k3s (a mapping of its flags)", &e))
    }
}

/// Whether `text` holds nothing but white space and comments: a file k3s
/// takes as setting nothing.
fn only_comments(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.starts_with('#') || l == "---")
}

/// Every config file k3s would read under the host root, in its order,
/// each read or [`Unusable`] (see the module's policy).
pub fn read(paths: &HostPaths) -> Vec<ConfigFile> {
    files(paths).iter().filter_map(|f| read_file(f)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> (tempfile::TempDir, HostPaths) {
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths::new(dir.path());
        fs::create_dir_all(paths.k3s_dropins()).unwrap();
        (dir, paths)
    }

    #[derive(Debug, Default, serde::Deserialize, PartialEq)]
    struct Name {
        #[serde(rename = "node-name")]
        node_name: Option<String>,
    }

    #[test]
    fn the_files_are_read_in_k3s_order_and_a_missing_config_yaml_is_no_file() {
        let (_d, p) = host();
        fs::write(p.k3s_dropins().join("20-b.yml"), "node-name: b\n").unwrap();
        fs::write(p.k3s_dropins().join("10-a.yaml"), "node-name: a\n").unwrap();
        fs::write(p.k3s_dropins().join("30-notes.txt"), "node-name: c\n").unwrap();
        let read = read(&p);
        let names: Vec<_> = read
            .iter()
            .map(|f| f.path.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(names, ["10-a.yaml", "20-b.yml"]);
        let last: Name = read[1].content.as_ref().unwrap().get().unwrap();
        assert_eq!(last.node_name.as_deref(), Some("b"));
    }

    #[test]
    fn an_empty_file_is_an_empty_mapping_and_a_list_or_an_unreadable_file_is_unusable() {
        let (_d, p) = host();
        fs::write(p.k3s_config(), "# nothing here\n\n").unwrap();
        let empty = read_file(&p.k3s_config()).unwrap().content.unwrap();
        assert!(empty.keys().is_empty());
        assert_eq!(empty.get::<Name>().unwrap(), Name::default());

        // Comments and blank lines around keys leave the keys read.
        fs::write(p.k3s_config(), "# k3s\n\nnode-name: x\n").unwrap();
        let keys = read_file(&p.k3s_config()).unwrap().content.unwrap();
        assert_eq!(keys.keys(), ["node-name"]);

        fs::write(p.k3s_config(), "- just\n- a list\n").unwrap();
        let list = read_file(&p.k3s_config()).unwrap().content.unwrap_err();
        assert!(list.why.contains("line"), "{list}");

        // A file that is there but cannot be read (a directory so named:
        // root reads a file whatever its mode).
        let dir = p.k3s_dropins().join("50.yaml");
        fs::create_dir(&dir).unwrap();
        let e = read_file(&dir).unwrap().content.unwrap_err();
        assert!(e.why.contains("cannot be read"), "{e}");
        assert_eq!(read(&p).len(), 2, "config.yaml and the unreadable drop-in");
    }

    #[test]
    fn what_is_said_of_a_bad_value_never_shows_the_file() {
        let (_d, p) = host();
        fs::write(p.k3s_config(), "token: s3cret-token\nnode-name: [a, b]\n").unwrap();
        let m = read_file(&p.k3s_config()).unwrap().content.unwrap();
        assert_eq!(m.keys(), ["node-name", "token"]);
        let e = m.get::<Name>().unwrap_err();
        assert!(!e.why.contains("s3cret"), "{e}");
        assert!(!format!("{m:?}").contains("s3cret"));
    }
}
