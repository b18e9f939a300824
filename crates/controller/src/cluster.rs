//! The client: `--kubeconfig FILE`, else kube's inference (KUBECONFIG,
//! `~/.kube/config`, then the in-cluster ServiceAccount).
//!
//! The token is never held by this code: kube keeps it in a `SecretString`
//! (and re-reads a token file at least once a minute), so nothing here can
//! print it, and errors are kube's, which name URLs and status codes only.

use std::{path::Path, time::Duration};

use kube::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig file could not be read or used.
    #[error("cannot use the kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No configuration could be inferred.
    #[error("no cluster configuration (give --kubeconfig, set KUBECONFIG, or run in a Pod): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// kube could not build a client.
    #[error("cannot build a client: {0}")]
    Client(#[source] kube::Error),
}

/// A client for the cluster, for requests (each bounded).
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClusterError> {
    Ok(clients(kubeconfig).await?.0)
}

/// Two clients: one for requests, each bounded by a short read timeout, and
/// one for watches, whose read timeout outlasts the API server's own watch
/// timeout (kube's watcher asks for 290 s and bookmarks arrive about once a
/// minute): with the short one, every quiet watch would break and be
/// restarted every 20 s, which is exactly the polling the watches replace.
pub async fn clients(kubeconfig: Option<&Path>) -> Result<(Client, Client), ClusterError> {
    let mut config = match kubeconfig {
        Some(path) => {
            let err = |source| ClusterError::Kubeconfig {
                path: path.into(),
                source,
            };
            let kc = Kubeconfig::read_from(path).map_err(err)?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(err)?
        }
        None => Config::infer().await.map_err(ClusterError::Infer)?,
    };
    // Bounded requests: a controller waiting on a dead API server must come
    // back to its loop (and its Lease) rather than hang.
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(20));
    config.write_timeout = Some(Duration::from_secs(10));
    // kube retries 429, 503 and 504 by itself (up to 15 times, backing off
    // to 1,000 s): an eviction refused by a PodDisruptionBudget (429) would
    // hang the loop, and no retry would be bounded by a step's timeout.
    // The loop retries at its own pace instead.
    config.default_retry = false;
    let mut watching = config.clone();
    watching.read_timeout = Some(Duration::from_secs(330));
    Ok((
        Client::try_from(config).map_err(ClusterError::Client)?,
        Client::try_from(watching).map_err(ClusterError::Client)?,
    ))
}
