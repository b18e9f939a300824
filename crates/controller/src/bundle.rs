//! `fleet-role enroll NODE --bundle DIR`: everything a host needs, in one
//! directory, with the one command that installs it there.
//!
//! The bundle holds the host's token (as `enroll` writes it), the cluster's
//! CA ([`crate::cluster_ca`]), the host's `actuator.toml`
//! ([`render::actuator_toml`], its `api` list from [`servers`]) and
//! `install.sh` ([`render::install_script`]). It is made in a new directory
//! beside DIR and renamed to DIR at the end, so a failure at any step
//! leaves no bundle at all; the checks that need no API (DIR absent, its
//! parent writable, the Node name) come before anything is written to the
//! cluster, and the Node must exist before the host is enrolled.

pub mod render;
pub mod servers;

use std::{
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

use fleetdecide::one_line;
use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client, Config, api::ListParams};
use protocol::{Names, NodeName};

use crate::{
    cluster_ca::{self, CaError, CaSource},
    enroll::{self, EnrollArgs, EnrollError, Enrolled},
};

/// Why no bundle was made.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The Node name is not one.
    #[error(transparent)]
    Node(#[from] protocol::InvalidValue),
    /// DIR exists already: a bundle is never written over.
    #[error("{} exists already: remove it, or name a new directory", .0.display())]
    Exists(PathBuf),
    /// DIR's parent is no directory this user can write to.
    #[error("cannot make the bundle beside {}: {source}", path.display())]
    Parent {
        /// The bundle's directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The cluster has no such Node.
    #[error("the cluster has no Node {0}: give the Node's name as `kubectl get nodes` shows it")]
    UnknownNode(String),
    /// `--api` names no `https://HOST:PORT`.
    #[error("--api {0}")]
    Url(String),
    /// No Node serves (or may serve) the API at an address.
    #[error(
        "no API server found for {0}: no Node with k3s's control-plane label or the eligible label has an InternalIP; name them with --api"
    )]
    NoServers(String),
    /// The Nodes could not be listed.
    #[error("listing the Nodes: {0}")]
    Nodes(#[source] kube::Error),
    /// No CA.
    #[error(transparent)]
    Ca(#[from] CaError),
    /// The host could not be enrolled.
    #[error(transparent)]
    Enroll(#[from] EnrollError),
    /// A file of the bundle could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl BundleError {
    /// Whether it is the caller's input that is wrong (exit 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            BundleError::Node(_)
                | BundleError::Exists(_)
                | BundleError::Parent { .. }
                | BundleError::UnknownNode(_)
                | BundleError::Url(_)
                | BundleError::NoServers(_)
                | BundleError::Ca(CaError::Unverified)
        )
    }
}

/// What a bundle holds, for the summary.
#[derive(Debug)]
pub struct Made {
    /// The bundle's directory.
    pub dir: PathBuf,
    /// The enrolment (the token's expiry).
    pub enrolled: Enrolled,
    /// The API servers written.
    pub api: Vec<String>,
    /// Nodes that counted but had no address.
    pub no_address: Vec<String>,
    /// Where the CA came from.
    pub ca: CaSource,
}

/// A directory being made, removed unless [`Partial::keep`] renames it.
struct Partial(Option<PathBuf>);

impl Partial {
    /// A new directory of mode 0700 beside `dir`, which must not exist.
    fn beside(dir: &Path) -> Result<Partial, BundleError> {
        if dir.symlink_metadata().is_ok() {
            return Err(BundleError::Exists(dir.to_path_buf()));
        }
        let parent_err = |source| BundleError::Parent {
            path: dir.to_path_buf(),
            source,
        };
        let name = dir
            .file_name()
            .ok_or_else(|| parent_err(std::io::Error::other("the path names no directory")))?;
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = parent.join(format!(
            ".{}.partial-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&tmp)
            .map_err(parent_err)?;
        let made = Partial(Some(tmp));
        // A umask narrows the mode, never widens it; an odd filesystem
        // could: set it, and fail rather than leave a token readable.
        std::fs::set_permissions(made.path(), std::fs::Permissions::from_mode(0o700))
            .map_err(parent_err)?;
        Ok(made)
    }

    fn path(&self) -> &Path {
        self.0.as_deref().expect("a partial bundle not yet kept")
    }

    /// Writes `name` in the directory with `mode`, synced.
    fn write(&self, name: &str, text: &str, mode: u32) -> Result<(), BundleError> {
        let path = self.path().join(name);
        let err = |source| BundleError::Write {
            path: path.clone(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)
            .map_err(err)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(err)?;
        f.write_all(text.as_bytes()).map_err(err)?;
        f.sync_all().map_err(err)
    }

    /// Renames the directory to `dir` (refused if `dir` appeared since).
    fn keep(mut self, dir: &Path) -> Result<(), BundleError> {
        let tmp = self.0.take().expect("kept once");
        let err = |source| BundleError::Write {
            path: dir.to_path_buf(),
            source,
        };
        let result = (|| {
            std::fs::File::open(&tmp)
                .and_then(|d| d.sync_all())
                .map_err(err)?;
            if dir.symlink_metadata().is_ok() {
                return Err(BundleError::Exists(dir.to_path_buf()));
            }
            std::fs::rename(&tmp, dir).map_err(err)?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::File::open(parent)
                    .and_then(|d| d.sync_all())
                    .map_err(err)?;
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        result
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if let Some(tmp) = self.0.take() {
            let _ = std::fs::remove_dir_all(tmp);
        }
    }
}

/// `--api` as given: each `https://HOST:PORT`, as the actuator checks it.
fn given_urls(raw: &[String]) -> Result<Vec<String>, BundleError> {
    raw.iter()
        .map(|u| {
            protocol::JoinUrl::parse(u)
                .map(|_| u.clone())
                .map_err(|e| BundleError::Url(format!("{}: {e}", one_line(u))))
        })
        .collect()
}

/// Makes `args.node`'s bundle in `dir`: enrolls the host (its token into
/// the bundle), and writes its CA, `actuator.toml` and `install.sh`.
pub async fn make(
    config: &Config,
    client: &Client,
    names: &Names,
    args: &EnrollArgs,
    dir: &Path,
) -> Result<Made, BundleError> {
    let node = NodeName::parse(&args.node)?;
    let given = given_urls(&args.api)?;
    let partial = Partial::beside(dir)?;
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(BundleError::Nodes)?
        .items;
    if !nodes
        .iter()
        .any(|n| n.metadata.name.as_deref() == Some(node.as_str()))
    {
        return Err(BundleError::UnknownNode(one_line(node.as_str())));
    }
    let found = servers::api_servers(names, &nodes, node.as_str(), args.api_port);
    let (api, no_address) = if given.is_empty() {
        (found.urls, found.no_address)
    } else {
        (given, Vec::new())
    };
    if api.is_empty() {
        return Err(BundleError::NoServers(one_line(node.as_str())));
    }
    let (ca, ca_source) = cluster_ca::cluster_ca(config, client, &names.hosts_namespace).await?;
    let token = partial.path().join("token");
    let one = EnrollArgs {
        node: args.node.clone(),
        credential: Some(token),
        valid_days: args.valid_days,
        output: enroll::EnrollOutput::Text,
        container: args.container.clone(),
        bundle: None,
        api: Vec::new(),
        api_port: args.api_port,
    };
    let (mut enrolled, _) = enroll::enroll(client, names, &one).await?;
    // The token is in the bundle, and the summary says so.
    enrolled.credential = None;
    partial.write("ca.crt", &ca, 0o600)?;
    partial.write(
        "actuator.toml",
        &render::actuator_toml(names, &node, &api),
        0o600,
    )?;
    partial.write("install.sh", &render::install_script(&node), 0o700)?;
    partial.keep(dir)?;
    Ok(Made {
        dir: dir.to_path_buf(),
        enrolled,
        api,
        no_address,
        ca: ca_source,
    })
}

/// What `enroll --bundle` prints (never the token).
pub fn summary(names: &Names, m: &Made) -> String {
    let node = one_line(m.enrolled.identity.node().as_str());
    let dir = one_line(&m.dir.display().to_string());
    let mut out = enroll::summary(names, &m.enrolled);
    out.push_str(&format!(
        "\nbundle written to {dir} (mode 0700): token (mode 0600), ca.crt (from {}), actuator.toml (api: {}), install.sh\n",
        m.ca,
        m.api.join(", ")
    ));
    if !m.no_address.is_empty() {
        out.push_str(&format!(
            "left out of api, no InternalIP: {}\n",
            m.no_address
                .iter()
                .map(|n| one_line(n))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out.push_str(&format!(
        "next: copy {dir} to {node} and run there, as root: sh {dir}/install.sh"
    ));
    out
}
