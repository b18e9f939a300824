//! k3s's auto-deploy folder, `server/manifests/`: every server with an API
//! server applies each manifest file there once its API server is ready,
//! then again whenever a file's modification time changes.
//!
//! k3s (`pkg/server/server.go`: `runControllers` calls `stageFiles` on
//! every server, not only the leader, and skips it with
//! `disable-apiserver`; `pkg/deploy/controller.go`: `WatchFiles`, whose
//! first pass has `force` set, so the checksum kept on the file's `Addon`
//! is not compared and every file is applied again at each start, then a
//! pass every 15 s applying the files whose modification time changed):
//! so whatever was changed through the API since in an object such a file
//! names is put back at each start of a server that holds it.
//!
//! Imitated: the force pass at start (retried until a pass succeeds, as
//! k3s keeps `force` until then), the 15 s rescan by modification time,
//! and which files count (`.yaml`, `.yml` and `.json`, no dotfiles, none
//! with a `NAME.skip` beside it). Each object is applied server-side with
//! force (k3s uses wrangler's apply, a three-way merge that likewise puts
//! back every field the file sets). Not imitated: the `Addon` objects
//! that record each file (the lab has no k3s CRDs), the pruning of
//! objects a file no longer names, the files of subfolders, and k3s's own
//! files staged into the folder at start.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use anyhow::Context;
use kube::Client;
use tracing::{info, warn};

/// k3s's rescan period (`WatchFiles`'s `time.After(15 * time.Second)`).
pub const RESCAN: Duration = Duration::from_secs(15);

/// The folder's state as this server last applied it.
#[derive(Debug, Default)]
pub struct Folder {
    /// Until a pass succeeds, every file is applied whatever its time.
    applied_once: bool,
    /// Each file's modification time when it was last applied.
    applied: BTreeMap<PathBuf, SystemTime>,
}

impl Folder {
    /// One pass over `dir` with `client` (this server's own API server):
    /// the first successful pass applies every file, later ones the files
    /// whose modification time changed. Returns how many files it applied;
    /// the first failure, after trying the others.
    pub async fn pass(&mut self, client: &Client, dir: &Path) -> anyhow::Result<usize> {
        let files = manifest_files(dir)?;
        let force = !self.applied_once;
        let mut count = 0;
        let mut failed = None;
        for (path, mtime) in files {
            if !force && self.applied.get(&path) == Some(&mtime) {
                continue;
            }
            match apply_file(client, &path).await {
                Ok(n) => {
                    info!("deploy: applied {} ({n} objects)", path.display());
                    self.applied.insert(path, mtime);
                    count += 1;
                }
                Err(e) => {
                    warn!("deploy: {}: {e:#}", path.display());
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => {
                self.applied_once = true;
                Ok(count)
            }
        }
    }
}

/// k3s's `WatchFiles` loop over `dir` through `client`: a pass, then one
/// every [`RESCAN`], for as long as the process runs.
pub async fn watch(client: Client, dir: PathBuf, clock: clock::Clock) {
    let mut folder = Folder::default();
    loop {
        let started = clock.now();
        if let Err(e) = folder.pass(&client, &dir).await {
            warn!("deploy: {e:#}");
        }
        tokio::time::sleep(RESCAN.saturating_sub(clock.since(started))).await;
    }
}

/// The files of `dir` k3s applies, with their modification times, in name
/// order (k3s sorts the paths). A folder that does not exist holds none.
pub fn manifest_files(dir: &Path) -> anyhow::Result<Vec<(PathBuf, SystemTime)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    let mut files = Vec::new();
    for name in &names {
        if !counts(name, &names) {
            continue;
        }
        let path = dir.join(name);
        let mtime = std::fs::metadata(&path)?.modified()?;
        files.push((path, mtime));
    }
    Ok(files)
}

/// Whether k3s applies the file `name` of a folder holding `names`
/// (`shouldSkipFile`): a manifest's extension, not hidden, no `.skip`.
fn counts(name: &str, names: &[String]) -> bool {
    let manifest = [".yaml", ".yml", ".json"]
        .iter()
        .any(|ext| name.ends_with(ext));
    manifest && !name.starts_with('.') && !names.iter().any(|n| *n == format!("{name}.skip"))
}

async fn apply_file(client: &Client, path: &Path) -> anyhow::Result<usize> {
    let yaml = std::fs::read_to_string(path)?;
    let applied = testcp::plane::apply_manifest(client, &yaml).await?;
    Ok(applied.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_manifests_neither_hidden_nor_skipped_are_applied_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "b.yaml",
            "a.json",
            "c.yml",
            "d.yaml",
            "d.yaml.skip",
            ".e.yaml",
            "f.txt",
        ] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        std::fs::create_dir(dir.path().join("g.yaml")).unwrap();
        let names: Vec<String> = manifest_files(dir.path())
            .unwrap()
            .into_iter()
            .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.json", "b.yaml", "c.yml"]);
        assert!(manifest_files(&dir.path().join("none")).unwrap().is_empty());
    }
}
