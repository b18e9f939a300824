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
    /// The host lock.
    pub fn lock_file(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/fleet-role.lock")
    }
    /// The datastore.
    pub fn db(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/server/db")
    }
    /// k3s's tombstone, written when the member was removed.
    pub fn tombstone(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/server/db/etcd/tombstone")
    }
    /// Where a demoted host's datastore is kept (the newest copy only).
    pub fn db_demoted(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/server/db.demoted")
    }
    /// The newer copy while it is being put in place of the older one.
    pub fn db_demoted_new(&self) -> PathBuf {
        self.at("var/lib/rancher/k3s/server/db.demoted.new")
    }
    /// k3s's snapshot directory.
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
    /// The agent's node password (never touched; checked unchanged).
    pub fn node_password(&self) -> PathBuf {
        self.at("etc/rancher/node/password")
    }
}
