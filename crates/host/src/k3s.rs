//! k3s, driven through its `k3s` command ([`K3sCli`]: on `PATH`, or
//! beside a Docker host's server container), and the parts of its
//! configuration the actuator reads.

use std::{
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use protocol::SwapId;

use crate::{
    HostPaths,
    error::{Error, Result},
    k3s_cli::K3sCli,
    k3s_config,
    systemd::describe,
};

/// How long `k3s etcd-snapshot save` may take by default: k3s's own client
/// waits on the supervisor's `/db/snapshot`, which answers once etcd has
/// written the whole snapshot.
pub const DEFAULT_SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(300);

/// The name prefix of every snapshot a swap takes: a swap id is
/// `swap-<date>-<time>-<hex>` ([`SwapId`]), and k3s names the file
/// `<name>-<node>-<unix>`.
pub const SWAP_SNAPSHOT_PREFIX: &str = "swap-";

/// How many swap snapshots a host keeps by default (k3s's own default
/// retention for its scheduled snapshots).
pub const DEFAULT_SNAPSHOT_RETENTION: u32 = 5;

/// Where k3s writes its snapshots and whether it compresses them, as its
/// own configuration says: `etcd-snapshot-dir` and `etcd-snapshot-compress`
/// in `/etc/rancher/k3s/config.yaml`, then `config.yaml.d/*.yaml|*.yml` in
/// name order, a later file winning (k3s's `configfilearg` rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotConfig {
    /// The snapshot directory, under the host root.
    pub dir: PathBuf,
    /// Whether snapshots are `.zip` files.
    pub compress: bool,
}

/// A k3s config value of a boolean flag: YAML's `true`, or a string k3s
/// would pass on as the flag's value.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum Flag {
    Bool(bool),
    Text(String),
}

/// The two keys read from each config file; every other key is k3s's own.
#[derive(Debug, Default, serde::Deserialize)]
struct SnapshotKeys {
    #[serde(rename = "etcd-snapshot-dir")]
    dir: Option<String>,
    #[serde(rename = "etcd-snapshot-compress")]
    compress: Option<Flag>,
}

impl SnapshotConfig {
    /// Reads k3s's configuration under the host root. A file k3s would
    /// read but that is not valid YAML, or a value of these keys that k3s
    /// would not take, is an error (k3s itself would not start with it).
    pub fn read(paths: &HostPaths) -> Result<SnapshotConfig> {
        let mut config = SnapshotConfig {
            dir: paths.snapshots(),
            compress: false,
        };
        // A file that cannot be used is an error (`crate::k3s_config`'s
        // policy): the snapshot would be looked for in a guessed place.
        for file in k3s_config::read(paths) {
            let bad = |why: String| Error::K3sConfig {
                path: file.path.clone(),
                why,
            };
            let keys: SnapshotKeys = file
                .content
                .as_ref()
                .map_err(Clone::clone)
                .and_then(k3s_config::Mapping::get)
                .map_err(|e| bad(e.why))?;
            if let Some(dir) = keys.dir {
                if !dir.starts_with('/') || dir.chars().any(char::is_control) {
                    return Err(bad(format!(
                        "etcd-snapshot-dir must be an absolute path, not {dir:?}"
                    )));
                }
                config.dir = paths.at(&dir);
            }
            match keys.compress {
                None => {}
                Some(Flag::Bool(b)) => config.compress = b,
                Some(Flag::Text(t)) => {
                    config.compress = match t.to_ascii_lowercase().as_str() {
                        "true" | "1" | "t" => true,
                        "false" | "0" | "f" => false,
                        _ => {
                            return Err(bad(format!(
                                "etcd-snapshot-compress must be true or false, not {t:?}"
                            )));
                        }
                    }
                }
            }
        }
        // Flags on the server unit's command line win over the files (k3s
        // places the files' flags before them): where a host that changes
        // role must keep server-only keys such as these.
        let args = server_exec_args(paths);
        let mut i = 0;
        while i < args.len() {
            let (flag, inline) = match args[i].split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (args[i].as_str(), None),
            };
            match flag {
                "--etcd-snapshot-dir" => {
                    let value = inline.or_else(|| {
                        i += 1;
                        args.get(i).cloned()
                    });
                    if let Some(dir) = value.filter(|d| d.starts_with('/')) {
                        config.dir = paths.at(&dir);
                    }
                }
                "--etcd-snapshot-compress" => {
                    config.compress = inline.is_none_or(|v| v.eq_ignore_ascii_case("true"));
                }
                _ => {}
            }
            i += 1;
        }
        Ok(config)
    }
}

/// The arguments of the server unit's `ExecStart` after `server`
/// (`/etc/systemd/system/k3s.service`, a drop-in's `ExecStart=` replacing
/// it), backslash continuations joined, words split on white space with
/// simple quotes removed, as install.sh writes them.
pub fn server_exec_args(paths: &HostPaths) -> Vec<String> {
    let mut files = vec![paths.at("etc/systemd/system/k3s.service")];
    if let Ok(entries) = fs::read_dir(paths.unit_dropins("k3s")) {
        let mut more: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "conf"))
            .collect();
        more.sort();
        files.extend(more);
    }
    let mut exec = None;
    for f in files {
        let Ok(text) = fs::read_to_string(&f) else {
            continue;
        };
        let joined = text.replace("\\\n", " ");
        for line in joined.lines().map(str::trim) {
            if let Some(v) = line.strip_prefix("ExecStart=") {
                exec = (!v.trim().is_empty()).then(|| v.to_string());
            }
        }
    }
    let Some(exec) = exec else {
        return vec![];
    };
    let words: Vec<String> = exec
        .split_whitespace()
        .map(|w| w.trim_matches(['\'', '"']).to_string())
        .collect();
    match words.iter().position(|w| w == "server") {
        Some(i) => words[i + 1..].to_vec(),
        None => vec![],
    }
}

/// Runs `k3s etcd-snapshot ARGS` through `cli`, bounded by `timeout`; a
/// failure names the command and what a kill past the deadline leaves
/// (`left`).
fn etcd_snapshot(
    paths: &HostPaths,
    args: &[&str],
    cli: &K3sCli,
    timeout: Duration,
    left: &str,
    budget: &crate::Budget,
) -> Result<()> {
    let mut full = vec!["etcd-snapshot"];
    full.extend_from_slice(args);
    let out = cli.run(paths, &full, timeout, left, budget)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            command: format!("k3s {}", full.join(" ")),
            detail: describe(&out),
        })
    }
}

/// Takes an on-demand etcd snapshot named `name` and returns its file.
///
/// k3s names the file `<name>-<node>-<unix time>` in its snapshot directory
/// (`.zip` when compressed) and prints no path we can rely on, so the newest
/// file with that prefix is the one. The name is a checked [`SwapId`], so it
/// is a safe argument and file name.
pub fn snapshot_save(
    paths: &HostPaths,
    node: &str,
    name: &SwapId,
    cli: &K3sCli,
    timeout: Duration,
    budget: &crate::Budget,
) -> Result<PathBuf> {
    etcd_snapshot(
        paths,
        &["save", "--name", name.as_str()],
        cli,
        timeout,
        "the server may still write the snapshot, but none is reported: the step can be asked again",
        budget,
    )?;
    let config = SnapshotConfig::read(paths)?;
    find_snapshot(&config, node, name).ok_or_else(|| Error::SnapshotMissing {
        name: name.to_string(),
        dir: config.dir.clone(),
    })
}

/// Keeps the newest `keep` swap snapshots on this host and deletes the
/// older ones, through k3s itself: `k3s etcd-snapshot prune --name swap-
/// --snapshot-retention KEEP` (k3s sorts the files whose name starts with
/// the prefix by the unix time in their name, newest first, and removes
/// those past `keep`, in its snapshot directory, and reconciles its own
/// record of them). k3s prunes only snapshots of the same `--name` after
/// a save, and every swap has its own, so without this they pile up.
/// Returns the snapshot files left with the prefix.
pub fn snapshot_prune(
    paths: &HostPaths,
    keep: u32,
    cli: &K3sCli,
    timeout: Duration,
    budget: &crate::Budget,
) -> Result<usize> {
    etcd_snapshot(
        paths,
        &[
            "prune",
            "--name",
            SWAP_SNAPSHOT_PREFIX,
            "--snapshot-retention",
            &keep.to_string(),
        ],
        cli,
        timeout,
        "k3s may still remove old snapshots; the newest are never removed, and the next swap prunes again",
        budget,
    )?;
    let config = SnapshotConfig::read(paths)?;
    Ok(fs::read_dir(&config.dir)
        .map(|es| {
            es.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(SWAP_SNAPSHOT_PREFIX)
                })
                .count()
        })
        .unwrap_or(0))
}

/// The newest snapshot file of `name` taken on `node`, if any, where
/// `config` says k3s writes them.
pub fn find_snapshot(config: &SnapshotConfig, node: &str, name: &SwapId) -> Option<PathBuf> {
    let prefix = format!("{name}-{node}-");
    let wanted = |file: &Path| {
        let zip = file.extension().is_some_and(|x| x == "zip");
        zip == config.compress
    };
    fs::read_dir(&config.dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix) && wanted(&e.path()))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max()
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, text: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn the_server_units_command_line_flags_win_over_k3s_config_for_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        write(&p.k3s_config(), "etcd-snapshot-dir: /srv/file\n");
        write(
            &p.at("etc/systemd/system/k3s.service"),
            "[Service]\nExecStart=/usr/local/bin/k3s \\\n    server \\\n\t'--etcd-snapshot-dir' '/srv/exec' \\\n\t'--etcd-snapshot-compress' \\\n\n",
        );
        assert_eq!(
            server_exec_args(&p),
            [
                "--etcd-snapshot-dir",
                "/srv/exec",
                "--etcd-snapshot-compress"
            ]
        );
        let c = SnapshotConfig::read(&p).unwrap();
        assert_eq!(c.dir, p.at("srv/exec"));
        assert!(c.compress);
        write(
            &p.unit_dropins("k3s").join("60-x.conf"),
            "[Service]\nExecStart=\nExecStart=/usr/local/bin/k3s server --etcd-snapshot-dir=/srv/dropin\n",
        );
        let c = SnapshotConfig::read(&p).unwrap();
        assert_eq!(c.dir, p.at("srv/dropin"));
        assert!(!c.compress);
    }

    #[test]
    fn snapshots_are_looked_for_where_k3s_config_puts_them_a_later_file_winning() {
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        assert_eq!(
            SnapshotConfig::read(&p).unwrap(),
            SnapshotConfig {
                dir: p.snapshots(),
                compress: false
            }
        );
        write(
            &p.k3s_config(),
            "token: \"secret\"\netcd-snapshot-dir: /srv/first\nnode-label:\n  - a=b\n",
        );
        write(
            &p.k3s_dropins().join("20-snap.yaml"),
            "etcd-snapshot-dir: /srv/snaps\netcd-snapshot-compress: true\n",
        );
        write(
            &p.k3s_dropins().join("10-other.yml"),
            "etcd-snapshot-dir: /srv/early\n",
        );
        write(
            &p.k3s_dropins().join("30-notes.txt"),
            "etcd-snapshot-dir: /ignored\n",
        );
        let c = SnapshotConfig::read(&p).unwrap();
        assert_eq!(c.dir, p.at("srv/snaps"));
        assert!(c.compress);
        let id = SwapId::parse("swap-1").unwrap();
        write(
            &c.dir.join("swap-1-n1-100"),
            "plain, not what k3s writes here",
        );
        assert_eq!(find_snapshot(&c, "n1", &id), None);
        write(&c.dir.join("swap-1-n1-101.zip"), "zip");
        assert_eq!(
            find_snapshot(&c, "n1", &id),
            Some(c.dir.join("swap-1-n1-101.zip"))
        );
    }

    #[test]
    fn a_k3s_config_k3s_would_not_take_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = HostPaths::new(dir.path());
        write(
            &p.k3s_dropins().join("50.yaml"),
            "etcd-snapshot-dir: relative/dir\n",
        );
        let err = SnapshotConfig::read(&p).unwrap_err().to_string();
        assert!(err.contains("50.yaml") && err.contains("absolute"), "{err}");
        write(
            &p.k3s_dropins().join("50.yaml"),
            "etcd-snapshot-compress: maybe\n",
        );
        assert!(SnapshotConfig::read(&p).is_err());
        write(
            &p.k3s_dropins().join("50.yaml"),
            "token: K10secretmark::server:pw\n[not: a mapping\n",
        );
        let err = SnapshotConfig::read(&p).unwrap_err().to_string();
        assert!(
            err.contains("not valid YAML") && !err.contains("secretmark"),
            "{err}"
        );
    }
}
