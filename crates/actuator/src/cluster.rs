//! Cluster access for one host: a list of API server candidates tried in
//! order, one CA bundle, one token file.
//!
//! The token is never held by this code: kube reads the file itself, keeps
//! it in a `SecretString` and re-reads it at least once a minute, so a
//! rotated token is picked up without a restart, and nothing here can print it.

use std::{path::PathBuf, time::Duration};

use kube::{Client, Config};

/// How long a request may wait for the API server's next bytes. Without it, a
/// request sent on a pooled connection to an API server that stopped
/// answering (a hung machine, a network that drops packets rather than
/// refusing them) waits forever, and the watcher with it, never moving to the
/// next candidate. A watch is ended by the server sooner than this
/// ([`crate::watch::WATCH_TIMEOUT_SECS`]), so an idle watch never trips it.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Checks the token file without ever showing its contents: kube sends the
/// file as it is, so a trailing newline (which `kubectl create token > FILE`
/// writes) makes every request fail with 401.
pub fn check_token_file(path: &std::path::Path) -> Result<(), ClusterError> {
    let bytes = std::fs::read(path).map_err(|e| ClusterError::TokenFile {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    let bad = |why: &str| ClusterError::TokenFile {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    if bytes.is_empty() {
        return Err(bad("it is empty"));
    }
    if bytes
        .iter()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(bad(
            "it holds a newline, a space or a control character, which kube would send as part of the token; \
             write the token alone (kubectl create token ... | tr -d '\\n' > FILE)",
        ));
    }
    Ok(())
}

/// Why a client could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No API URL was given.
    #[error(
        "no API server URL: give --api (repeatable), FLEET_ROLE_API or `api` in the config file"
    )]
    NoCandidates,
    /// The token file is unreadable or malformed (its contents are never shown).
    #[error("unusable token file {}: {why}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A candidate URL did not parse.
    #[error("invalid API URL {0}")]
    BadUrl(String),
    /// kube could not build a client (bad CA file, unreadable token file).
    #[error("cannot build a client for {url}: {source}")]
    Client {
        /// The candidate.
        url: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

/// The API candidates, and which one is in use.
#[derive(Debug, Clone)]
pub struct Candidates {
    urls: Vec<String>,
    ca_file: Option<PathBuf>,
    token_file: Option<PathBuf>,
    current: usize,
}

impl Candidates {
    /// Candidates in the order given.
    pub fn new(
        urls: Vec<String>,
        ca_file: Option<PathBuf>,
        token_file: Option<PathBuf>,
    ) -> Result<Self, ClusterError> {
        if urls.is_empty() {
            return Err(ClusterError::NoCandidates);
        }
        if let Some(path) = &token_file {
            check_token_file(path)?;
        }
        Ok(Self {
            urls,
            ca_file,
            token_file,
            current: 0,
        })
    }

    /// The URL in use.
    pub fn current(&self) -> &str {
        &self.urls[self.current]
    }

    /// Moves to the next candidate (wrapping), and returns its URL.
    pub fn rotate(&mut self) -> &str {
        self.current = (self.current + 1) % self.urls.len();
        self.current()
    }

    /// How many candidates there are.
    pub fn len(&self) -> usize {
        self.urls.len()
    }

    /// Whether there are none (never, once constructed).
    pub fn is_empty(&self) -> bool {
        self.urls.is_empty()
    }

    /// A client for the current candidate.
    pub fn client(&self) -> Result<Client, ClusterError> {
        let url = self.current().to_string();
        let uri = url.parse().map_err(|_| ClusterError::BadUrl(url.clone()))?;
        let mut config = Config::new(uri);
        config.default_namespace = "default".into();
        config.root_cert_file = self.ca_file.clone();
        config.auth_info.token_file = self.token_file.as_ref().map(|p| p.display().to_string());
        config.connect_timeout = Some(Duration::from_secs(5));
        config.write_timeout = Some(Duration::from_secs(10));
        config.read_timeout = Some(READ_TIMEOUT);
        // Counted from when the request was sent, not from when its pooled
        // connection went idle.
        config.reset_reader_on_write = true;
        Client::try_from(config).map_err(|source| ClusterError::Client { url, source })
    }
}
