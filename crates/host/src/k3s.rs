//! k3s, driven through the `k3s` found on `PATH`.

use std::{ffi::OsString, fs, path::PathBuf, time::Duration};

use protocol::SwapId;

use crate::{
    HostPaths,
    error::{Error, Result},
    process::Bounded,
    systemd::{command, describe},
};

/// How long `k3s etcd-snapshot save` may take by default: k3s's own client
/// waits on the supervisor's `/db/snapshot`, which answers once etcd has
/// written the whole snapshot.
pub const DEFAULT_SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(300);

/// Takes an on-demand etcd snapshot named `name` and returns its file.
///
/// k3s names the file `<name>-<node>-<unix time>` in `server/db/snapshots`
/// (`.zip` when compressed) and prints no path we can rely on, so the newest
/// file with that prefix is the one. The name is a checked [`SwapId`], so it
/// is a safe argument and file name.
pub fn snapshot_save(
    paths: &HostPaths,
    node: &str,
    name: &SwapId,
    search_path: Option<&OsString>,
    timeout: Duration,
    budget: &crate::Budget,
) -> Result<PathBuf> {
    let line = format!("k3s etcd-snapshot save --name {name}");
    let mut c = command("k3s", search_path);
    c.args(["etcd-snapshot", "save", "--name", name.as_str()])
        .env("FLEET_ROLE_ROOT", paths.root());
    let out = Bounded {
        command: c,
        line: &line,
        timeout,
        left: "the server may still write the snapshot, but none is reported: the step can be asked again",
        budget,
    }
    .run()?;
    if !out.status.success() {
        return Err(Error::Command {
            command: line,
            detail: describe(&out),
        });
    }
    find_snapshot(paths, node, name).ok_or_else(|| Error::SnapshotMissing {
        name: name.to_string(),
        dir: paths.snapshots(),
    })
}

/// The newest snapshot file of `name` taken on `node`, if any.
pub fn find_snapshot(paths: &HostPaths, node: &str, name: &SwapId) -> Option<PathBuf> {
    let prefix = format!("{name}-{node}-");
    fs::read_dir(paths.snapshots())
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max()
        .map(|(_, p)| p)
}
