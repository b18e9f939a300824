//! The stand-in on a bare host root (no lab: the actuator's and the
//! controller's tests, with the `systemctl` stand-in's units): `k3s etcd-snapshot save --name NAME` writes a file
//! named as k3s names it (`<name>-<node>-<unix>`, `.zip` with
//! `etcd-snapshot-compress`) in `etcd-snapshot-dir` (default
//! `server/db/snapshots`), read from `config.yaml` then `config.yaml.d/*.yaml`
//! as k3s reads them (top-level `key: value` lines only, a later file
//! winning), and fails as k3s would when the server is not up.
//! `k3s etcd-snapshot prune --name PREFIX --snapshot-retention N` removes
//! the older files of that prefix there, by k3s's rule
//! ([`crate::snapshots::to_prune`]).

use std::{fs, process::ExitCode};

use standins::{log, root, state_dir, units};

use crate::snapshots;

fn node_name(root: &std::path::Path) -> String {
    config_value(root, "node-name")
        .or_else(|| std::env::var("K3S_NODE_NAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// The last value of a top-level `key:` across k3s's config files.
///
/// The stand-in imitates k3s's own reading rather than calling the
/// product's (`host::k3s_config`): the product's tests check that it finds
/// the snapshot where k3s puts it, which a stand-in sharing its reader would
/// confirm whatever the reader's mistakes.
fn config_value(root: &std::path::Path, key: &str) -> Option<String> {
    let mut files = vec![root.join("etc/rancher/k3s/config.yaml")];
    if let Ok(es) = fs::read_dir(root.join("etc/rancher/k3s/config.yaml.d")) {
        let mut more: Vec<_> = es
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        more.sort();
        files.extend(more);
    }
    let mut found = None;
    for text in files.iter().filter_map(|f| fs::read_to_string(f).ok()) {
        for line in text.lines() {
            if let Some(v) = line.strip_prefix(key).and_then(|r| r.strip_prefix(':')) {
                found = Some(v.trim().trim_matches('"').to_string());
            }
        }
    }
    found
}

/// The release `k3s --version` names unless a test says otherwise: one
/// fleet-role was checked against.
const STANDIN_VERSION: &str = "v1.34.3+k3s1";

/// Where the server writes snapshots: `etcd-snapshot-dir`, by default
/// `server/db/snapshots`.
fn snapshot_dir(root: &std::path::Path) -> std::path::PathBuf {
    config_value(root, "etcd-snapshot-dir").map_or_else(
        || root.join("var/lib/rancher/k3s/server/db/snapshots"),
        |d| root.join(d.trim_start_matches('/')),
    )
}

/// Answers `k3s ARGS` on a bare host root (`FLEET_ROLE_ROOT`).
pub fn run(args: &[String]) -> ExitCode {
    let clock = clock::Clock::system();
    let root = match root() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("k3s (stand-in): {e}");
            return ExitCode::from(2);
        }
    };
    if args == ["--version"] {
        // k3s's own two lines, and like k3s it writes nothing (not even
        // the stand-in's log of commands: the tests that check a refused
        // step changed nothing on the host read every file). A test may
        // name another release in the stand-in's state (`k3s/version`).
        let version = fs::read_to_string(state_dir(&root, "k3s").join("version"))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|_| STANDIN_VERSION.to_string());
        println!("k3s version {version} (fleet-role stand-in)\ngo version go1.24.11");
        return ExitCode::SUCCESS;
    }
    log(&root, "k3s", &args.join(" "));
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [
            "etcd-snapshot",
            "prune",
            "--name",
            prefix,
            "--snapshot-retention",
            keep,
        ] => {
            // Like save, prune asks the running server's supervisor.
            if units::state(&root, "k3s").active != "active" {
                eprintln!(
                    "level=fatal msg=\"etcd-snapshot error: dial tcp 127.0.0.1:6443: connect: connection refused\""
                );
                return ExitCode::from(1);
            }
            let Ok(keep) = keep.parse::<usize>() else {
                eprintln!(
                    "level=fatal msg=\"invalid value {keep:?} for flag -snapshot-retention\""
                );
                return ExitCode::from(1);
            };
            let dir = snapshot_dir(&root);
            let names: Vec<String> = fs::read_dir(&dir)
                .map(|es| {
                    es.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            for name in snapshots::to_prune(&names, prefix, keep) {
                eprintln!(
                    "level=info msg=\"Removing local snapshot {}\"",
                    dir.join(&name).display()
                );
                if let Err(e) = fs::remove_file(dir.join(&name)) {
                    eprintln!("level=fatal msg=\"etcd-snapshot error: {e}\"");
                    return ExitCode::from(1);
                }
            }
            ExitCode::SUCCESS
        }
        ["etcd-snapshot", "save", "--name", name] => {
            // The server answers only once it is up (a learner's k3s is
            // still activating: it refuses, as k3s's learner does).
            if units::state(&root, "k3s").active != "active" {
                eprintln!(
                    "level=fatal msg=\"etcd-snapshot error: dial tcp 127.0.0.1:6443: connect: connection refused\""
                );
                return ExitCode::from(1);
            }
            if state_dir(&root, "k3s").join("fail-snapshot").exists() {
                eprintln!("level=fatal msg=\"etcd-snapshot error: snapshot failed (injected)\"");
                return ExitCode::from(1);
            }
            let dir = snapshot_dir(&root);
            let zip = if config_value(&root, "etcd-snapshot-compress").as_deref() == Some("true") {
                ".zip"
            } else {
                ""
            };
            let now = clock.unix_secs();
            let file = dir.join(format!("{name}-{}-{now}{zip}", node_name(&root)));
            if let Err(e) =
                fs::create_dir_all(&dir).and_then(|_| fs::write(&file, b"stand-in etcd snapshot\n"))
            {
                eprintln!("level=fatal msg=\"etcd-snapshot error: {e}\"");
                return ExitCode::from(1);
            }
            eprintln!(
                "level=info msg=\"Snapshot {name}-{}-{now}{zip} saved.\"",
                node_name(&root)
            );
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("k3s (stand-in): unsupported arguments");
            ExitCode::from(1)
        }
    }
}
