//! Cluster access for one host (the actuator's, from its settings): a list of API server candidates tried in
//! order, one CA bundle, one token file. A candidate is a k3s server's
//! supervisor (6443), which answers `503` while no kube-apiserver stands
//! behind it: the watcher moves on from that as from a refused connection.
//!
//! The token is never held by this code: kube reads the file itself, keeps
//! it in a `SecretString` and re-reads it at least once a minute, so a
//! rotated token is picked up without a restart, and nothing here can print it.

use std::{path::PathBuf, time::Duration};

use kube::{Client, Config, client::ClientBuilder};

use crate::server_clock::ServerClock;

/// How long a request may wait for the API server's next bytes. Without it, a
/// request sent on a pooled connection to an API server that stopped
/// answering (a hung machine, a network that drops packets rather than
/// refusing them) waits forever, and the watcher with it, never moving to the
/// next candidate. A watch is ended by the server sooner than this
/// (the actuator's watch asks for less), so an idle watch never trips it.
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

/// How long before its credential lapses the actuator starts to say so:
/// time enough for an operator to run `fleet-role enroll NODE` again.
pub const EXPIRY_WARNING_SECS: i64 = 30 * 86_400;

/// When the token in `path` lapses, in seconds since the epoch, if it says
/// ([`crate::token::file_expiry`]).
pub fn token_expiry(path: &std::path::Path) -> Option<i64> {
    crate::token::file_expiry(path)
}

/// What to say about a credential lapsing at `expiry`, seen at `now`:
/// nothing while it has more than [`EXPIRY_WARNING_SECS`] left.
pub fn expiry_warning(expiry: i64, now: i64) -> Option<String> {
    if !crate::token::lapses_within(expiry, now, EXPIRY_WARNING_SECS) {
        return None;
    }
    let left = expiry - now;
    Some(if left <= 0 {
        format!(
            "the credential lapsed {} h ago: every request fails; enroll the host again (fleet-role enroll NODE)",
            -left / 3600
        )
    } else {
        format!(
            "the credential lapses in {} days {} h: enroll the host again before then (fleet-role enroll NODE)",
            left / 86_400,
            left % 86_400 / 3600
        )
    })
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
    /// Where each client's answers show the API server's clock, if asked.
    server_clock: Option<ServerClock>,
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
            server_clock: None,
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

    /// Every client made from here on reads the API server's clock from
    /// its answers into `seen`.
    pub fn with_server_clock(mut self, seen: ServerClock) -> Self {
        self.server_clock = Some(seen);
        self
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
        // kube's own retry of 429, 503 and 504 backs off up to 1,000 s:
        // unbounded for a step. The watcher's loop retries at its pace. And
        // a k3s server with no API server behind its supervisor (etcd-only,
        // a learner, one starting) answers every request 503 rather than
        // refusing the connection: the watcher takes that as any failure
        // and moves to the next candidate, where kube's retry would keep it
        // on that host.
        config.default_retry = false;
        let client = |source| ClusterError::Client {
            url: url.clone(),
            source,
        };
        let builder = ClientBuilder::try_from(config).map_err(client)?;
        Ok(match &self.server_clock {
            Some(seen) => builder.with_layer(seen).build(),
            None => builder.build(),
        })
    }

    /// Runs `op` once against each candidate in order, from the first,
    /// until one gives an answer that `moves_on` does not turn away: at
    /// most one request per candidate, each within the client's bounds.
    /// Each move is said on stderr (a one-shot command such as `status`
    /// has no log), with the candidate and its error. The last error when
    /// none answers.
    ///
    /// # Errors
    /// A client that cannot be built, or the last candidate's error.
    pub async fn first_answer<T, E, F, Fut>(
        &self,
        mut op: F,
        moves_on: impl Fn(&E) -> bool,
    ) -> anyhow::Result<T>
    where
        F: FnMut(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let mut at = self.clone();
        for i in 0..self.len() {
            match op(at.client()?).await {
                Ok(v) => return Ok(v),
                Err(e) if moves_on(&e) && i + 1 < self.len() => {
                    let next = at.rotate().to_string();
                    eprintln!(
                        "API server {} failed ({e}); asking the next candidate, {next}",
                        self.urls[i]
                    );
                }
                Err(e) => return Err(e.into()),
            }
        }
        unreachable!("a candidate list is never empty")
    }
}

/// Whether an error of one API server means the next candidate should be
/// asked: no answer (refused, reset, timed out, TLS), or a `503`, which k3s's
/// supervisor answers while no kube-apiserver stands behind it ("apiserver
/// disabled" at the etcd-only level, "apiserver not ready" on a learner or a
/// server starting). Any other answer (404, 403, 409…) is the answer.
pub fn moves_on(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 503,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering::SeqCst},
    };

    /// A plain-HTTP API server that answers every request with `status` and
    /// `body`, counting the requests.
    async fn canned(status: &'static str, body: &'static str) -> (String, Arc<AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let asked = Arc::new(AtomicUsize::new(0));
        let count = asked.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                count.fetch_add(1, SeqCst);
                let mut buf = vec![0; 8192];
                let _ = s.read(&mut buf).await;
                let text = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(text.as_bytes()).await;
            }
        });
        (url, asked)
    }

    const DISABLED: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"apiserver disabled","reason":"ServiceUnavailable","code":503}"#;
    const NOT_FOUND: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"nope","reason":"NotFound","code":404}"#;
    const VERSION: &str = r#"{"major":"1","minor":"34","gitVersion":"v1.34.0"}"#;

    #[tokio::test]
    async fn an_etcd_only_servers_503_and_a_refused_connection_move_to_the_next_candidate_and_a_404_does_not()
     {
        let version = |c: Client| async move { c.apiserver_version().await };
        let (etcd_only, asked_first) = canned("503 Service Unavailable", DISABLED).await;
        let (live, _) = canned("200 OK", VERSION).await;
        // Nothing listens there: the connection is refused.
        let refused = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}", l.local_addr().unwrap())
        };
        let c = Candidates::new(vec![etcd_only.clone(), refused, live], None, None).unwrap();
        let v = c.first_answer(version, moves_on).await.unwrap();
        assert_eq!(v.git_version, "v1.34.0");
        assert_eq!(asked_first.load(SeqCst), 1, "each candidate is asked once");
        // With the 503 last, it is the error.
        let c = Candidates::new(vec![etcd_only], None, None).unwrap();
        let e = c.first_answer(version, moves_on).await.unwrap_err();
        assert!(format!("{e:#}").contains("apiserver disabled"), "{e:#}");
        // A live API server's other answers are the answer.
        let (not_found, _) = canned("404 Not Found", NOT_FOUND).await;
        let (second, asked_second) = canned("200 OK", VERSION).await;
        let c = Candidates::new(vec![not_found, second], None, None).unwrap();
        let e = c.first_answer(version, moves_on).await.unwrap_err();
        assert!(format!("{e:#}").contains("nope"), "{e:#}");
        assert_eq!(asked_second.load(SeqCst), 0);
    }

    fn jwt(claims: &str) -> String {
        use base64::Engine;
        let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{}.{}.c2lnbmF0dXJl",
            e.encode(r#"{"alg":"RS256"}"#),
            e.encode(claims)
        )
    }

    #[test]
    fn a_token_says_when_it_lapses_and_a_token_that_does_not_say_is_no_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        std::fs::write(&f, jwt(r#"{"exp":1900000000,"sub":"x"}"#)).unwrap();
        assert_eq!(token_expiry(&f), Some(1_900_000_000));
        std::fs::write(&f, "not-a-jwt").unwrap();
        assert_eq!(token_expiry(&f), None);
        std::fs::write(&f, jwt(r#"{"sub":"x"}"#)).unwrap();
        assert_eq!(token_expiry(&f), None);
    }

    #[test]
    fn a_credential_about_to_lapse_is_warned_about_from_thirty_days_before() {
        let now = 1_000_000_000;
        assert_eq!(expiry_warning(now + EXPIRY_WARNING_SECS + 1, now), None);
        let soon = expiry_warning(now + 2 * 86_400 + 3 * 3600, now).unwrap();
        assert!(soon.contains("lapses in 2 days 3 h"), "{soon}");
        let gone = expiry_warning(now - 7200, now).unwrap();
        assert!(gone.contains("lapsed 2 h ago"), "{gone}");
    }
}
