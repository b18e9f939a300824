//! Every path the actuator touches, under one root.

use std::path::{Path, PathBuf};

/// The name of fleet-role's own k3s config drop-in for a promotion's join.
pub const JOIN_DROPIN: &str = "90-fleet-role-join.yaml";
/// The name of fleet-role's own k3s config drop-in for the etcd-only level.
pub const ETCD_ONLY_DROPIN: &str = "90-fleet-role-etcd-only.yaml";
/// The name of fleet-role's own unit drop-in naming the voter joined.
pub const JOIN_UNIT_DROPIN: &str = "90-fleet-role-join.conf";

/// The host's paths, all under `root`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPaths {
    root: PathBuf,
}

impl HostPaths {
    /// Paths under `root` (`/` on a real host).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }
    /// The root itself.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// `rel` under the root (`rel` is relative, without a leading `/`).
    pub fn at(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }
    /// k3s's data dir.
    pub fn data_dir(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s")
    }
    /// The role file: `server` or `agent`.
    pub fn role_file(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/fleet-role")
    }
    /// The report kept on the host: a copy of the host's own key of the
    /// report ConfigMap, written before each write to the API, so a report
    /// lost on its way to the API (a crash, an API down) is still known.
    pub fn report(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/fleet-role.report")
    }
    /// The host lock.
    pub fn lock_file(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/fleet-role.lock")
    }
    /// k3s's `server/db`: the etcd datastore, and beside it the snapshots
    /// and their metadata, which stay there whatever the host's role.
    pub fn db(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/server/db")
    }
    /// The etcd datastore itself (`server/db/etcd`): the only part a
    /// demotion moves, as k3s's own `backupDirWithRetention` does.
    pub fn etcd_dir(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/server/db/etcd")
    }
    /// k3s's tombstone, written when the member was removed.
    pub fn tombstone(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/server/db/etcd/tombstone")
    }
    /// Where a demoted host's etcd datastore is kept, as `db.demoted/etcd`
    /// (the newest copy only).
    pub fn db_demoted(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/server/db.demoted")
    }
    /// The newer copy while it is being put in place of the older one.
    pub fn db_demoted_new(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/server/db.demoted.new")
    }
    /// The older copy between the newer one taking its place and its removal.
    pub fn db_demoted_old(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/server/db.demoted.old")
    }
    /// k3s's default snapshot directory (`etcd-snapshot-dir` may name
    /// another: see [`crate::k3s::SnapshotConfig`]).
    pub fn snapshots(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/server/db/snapshots")
    }
    /// k3s's config file.
    pub fn k3s_config(&self) -> PathBuf {
        self.at("etc/rancher/k3s/config.yaml")
    }
    /// k3s's config drop-in directory.
    pub fn k3s_dropins(&self) -> PathBuf {
        self.at("etc/rancher/k3s/config.yaml.d")
    }
    /// A unit's drop-in directory.
    pub fn unit_dropins(&self, unit: &str) -> PathBuf {
        self.at(&format!("etc/systemd/system/{unit}.service.d"))
    }
    /// What a finished host removes of the server's secrets (see
    /// [`crate::secrets`]): `server/tls` (the cluster's CAs and their keys,
    /// the server's keys), `server/cred` (the Secrets' encryption key, the
    /// node passwords) and the admin kubeconfig k3s wrote at the server's
    /// start; and, not a secret but as stale, the `fleet-role.yaml` an
    /// earlier install put in k3s's auto-deploy folder: k3s applies every
    /// file there again at each start of a server (`pkg/deploy/controller.go`,
    /// `force` on the first pass), so a host promoted again later would put
    /// back the controller and settings of that install.
    pub fn server_secrets(&self) -> [PathBuf; 4] {
        [
            self.at("var/lib/rancher/k3s/server/tls"),
            self.at("var/lib/rancher/k3s/server/cred"),
            self.at("etc/rancher/k3s/k3s.yaml"),
            self.at("var/lib/rancher/k3s/server/manifests/fleet-role.yaml"),
        ]
    }
}
