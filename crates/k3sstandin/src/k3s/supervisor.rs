//! k3s's supervisor: the listener on 6443 (every address) that a server
//! starts before anything else, in front of a kube-apiserver that listens on
//! `127.0.0.1:6444` only.
//!
//! More in docs/internals.md, "k3sstandin: k3s::supervisor".

use std::{net::Ipv4Addr, path::Path, sync::Arc, time::Duration};

use anyhow::Context;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::watch,
};
use tokio_rustls::{
    TlsAcceptor, TlsConnector,
    rustls::{ClientConfig, RootCertStore, ServerConfig, crypto::ring},
};
use tracing::{debug, info, warn};

use crate::lab_pki;

use super::token;
use crate::spec::{API_PORT, APISERVER_PORT};

/// The longest a client may take to finish its TLS handshake and send its
/// first request's head; the longest the backend may take to accept.
const IO_BOUND: Duration = Duration::from_secs(10);

/// The largest request head read (kube's are well under 4 KiB).
const MAX_HEAD: usize = 64 * 1024;

/// The largest request body drained before a 503 (so the client reads the
/// answer rather than a reset); a larger one is left, and the reset taken.
const MAX_DRAIN: usize = 1024 * 1024;

/// What stands behind the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// kube-apiserver is not up (yet, or any more): `503` "apiserver not ready".
    NotReady,
    /// kube-apiserver answers on `127.0.0.1:6444`.
    Up,
    /// `disable-apiserver`: `503` "apiserver disabled", for as long as k3s runs.
    Disabled,
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Answered by the supervisor itself.
    Answer {
        /// The status line's code and reason, e.g. `200 OK`.
        status: &'static str,
        /// The `Content-Type`.
        content_type: &'static str,
        /// The body.
        body: String,
    },
    /// To kube-apiserver, the connection spliced.
    ToApiServer,
}

/// k3s's error answer: a `Status` as `apierrors.NewServiceUnavailable(msg)`
/// makes it, which clients (kube, client-go) read as an API error of code 503.
pub fn unavailable(message: &str) -> Route {
    failure("503 Service Unavailable", "ServiceUnavailable", message)
}

/// A `Status` of failure with `status` (`<code> <text>`), `reason` and
/// `message` (`pkg/util/apierrors.go` `SendError`).
fn failure(status: &'static str, reason: &str, message: &str) -> Route {
    let code: u16 = status
        .split(' ')
        .next()
        .and_then(|c| c.parse().ok())
        .unwrap_or(500);
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    Route::Answer {
        status,
        content_type: "application/json",
        body: body.to_string(),
    }
}

/// k3s's bootstrap path, what a joining server reads first with the server
/// token (`pkg/cluster/bootstrap.go` `httpBootstrap`).
pub const BOOTSTRAP_PATH: &str = "/v1-k3s/server-bootstrap";

/// The etcd CAs' fields of k3s's bootstrap data (`ControlRuntimeBootstrap`
/// in `pkg/daemons/config/types.go`), in [`lab_pki::CA_FILES`]'s order.
const ETCD_FIELDS: [(&str, &str); 2] = [
    ("ETCDServerCA", "ETCDServerCAKey"),
    ("ETCDPeerCA", "ETCDPeerCAKey"),
];

/// The answer to [`BOOTSTRAP_PATH`] (role `k3s:server` required, whatever
/// stands behind the supervisor): the bootstrap data for the server user
/// (the stand-in's holds the cluster CA and, as k3s's, etcd's CAs with
/// their keys: `etcd`'s files, each `(name, content)`, when this server
/// has them), `403` "forbidden" for the agent's, `401` "not authorized"
/// for anyone else.
pub fn bootstrap(auth: token::Auth, ca_pem: &str, etcd: &[(String, String)]) -> Route {
    match auth {
        token::Auth::Server => {
            let mut data = serde_json::json!({ "ServerCA": { "Content": ca_pem } });
            let files = lab_pki::CA_FILES.iter().zip(ETCD_FIELDS);
            for ((cert, key), (cert_field, key_field)) in files {
                for (file, field) in [(cert, cert_field), (key, key_field)] {
                    if let Some((_, content)) = etcd.iter().find(|(f, _)| f == file) {
                        data[field] = serde_json::json!({ "Content": content });
                    }
                }
            }
            Route::Answer {
                status: "200 OK",
                content_type: "application/json",
                body: data.to_string(),
            }
        }
        token::Auth::Agent => failure("403 Forbidden", "Forbidden", "forbidden"),
        token::Auth::Refused => failure("401 Unauthorized", "Unauthorized", "not authorized"),
    }
}

/// Where a request for `path` goes with `api` behind: `/ping` and
/// `/cacerts` are the supervisor's (unauthenticated in k3s too); every
/// other path, `/v1-k3s/…` included (the stand-in serves none of those, and
/// k3s's router passes what it does not match to the API server), is the
/// API server's, or k3s's 503 when there is none.
pub fn route(path: &str, api: Api, ca_pem: &str) -> Route {
    let path = path.split('?').next().unwrap_or_default();
    match path {
        "/ping" => Route::Answer {
            status: "200 OK",
            content_type: "text/plain",
            body: "pong".into(),
        },
        "/cacerts" => Route::Answer {
            status: "200 OK",
            content_type: "text/plain",
            body: ca_pem.into(),
        },
        _ => match api {
            Api::Up => Route::ToApiServer,
            Api::NotReady => unavailable("apiserver not ready"),
            Api::Disabled => unavailable("apiserver disabled"),
        },
    }
}

/// The first request's head: its method, path, `Content-Length` and
/// `Authorization` (never shown: `Debug` hides it).
#[derive(Clone, PartialEq, Eq)]
pub struct Head {
    /// `GET`, `POST`…
    pub method: String,
    /// The request target.
    pub path: String,
    /// The body's length, when given.
    pub content_length: Option<usize>,
    /// The `Authorization` header, when given (never logged).
    pub authorization: Option<String>,
}

impl std::fmt::Debug for Head {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Head")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("content_length", &self.content_length)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<hidden>"),
            )
            .finish()
    }
}

/// Reads `head` (up to and without its blank line), or `None` when it is
/// no HTTP/1 request line.
pub fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path, version) = (first.next()?, first.next()?, first.next()?);
    if !version.starts_with("HTTP/1.") || method.is_empty() || !path.starts_with('/') {
        return None;
    }
    let headers: Vec<(&str, &str)> = lines.filter_map(|l| l.split_once(':')).collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    };
    Some(Head {
        method: method.into(),
        path: path.into(),
        content_length: header("content-length").and_then(|v| v.parse().ok()),
        authorization: header("authorization").map(str::to_string),
    })
}

/// The supervisor's TLS: the lab's serving certificate (k3s's own is
/// signed by the same server CA, so a client trusts both alike), and the
/// client side of its connections to kube-apiserver, trusting that CA.
struct Tls {
    acceptor: TlsAcceptor,
    connector: TlsConnector,
    ca_pem: String,
    /// The server's own tokens, for its authenticated paths.
    passwd: token::Passwd,
    /// Where this server keeps etcd's certificates (the CAs' files are
    /// read from it at each bootstrap request: a joining server has them
    /// only once its own bootstrap wrote them).
    etcd_tls: Option<std::path::PathBuf>,
}

impl Tls {
    fn load(pki: &testcp::Pki) -> anyhow::Result<Tls> {
        let provider = Arc::new(ring::default_provider());
        let certs = CertificateDer::pem_file_iter(pki.serving_cert_file())
            .context("the serving certificate")?
            .collect::<Result<Vec<_>, _>>()?;
        let key =
            PrivateKeyDer::from_pem_file(pki.serving_key_file()).context("the serving key")?;
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let ca_file = pki.ca_file();
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(&ca_file).context("the lab's CA")? {
            roots.add(c?)?;
        }
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
            ca_pem: std::fs::read_to_string(&ca_file)
                .with_context(|| ca_file.display().to_string())?,
            passwd: token::Passwd::default(),
            etcd_tls: None,
        })
    }
}

/// The running supervisor: tell it what stands behind it.
pub struct Supervisor {
    api: watch::Sender<Api>,
}

impl Supervisor {
    /// Binds `0.0.0.0:6443` (k3s's `bind-address` default) and serves
    /// until the process exits; `api` is what stands behind it at first.
    ///
    /// # Errors
    /// When the port cannot be bound (k3s fails too, and the unit restarts)
    /// or the lab's certificates cannot be read.
    pub async fn start(
        pki_dir: &Path,
        ips: &[std::net::IpAddr],
        api: Api,
        passwd: token::Passwd,
        etcd_tls: &Path,
    ) -> anyhow::Result<Self> {
        let tls = Arc::new(Tls {
            passwd,
            etcd_tls: Some(etcd_tls.to_owned()),
            ..Tls::load(&testcp::Pki::load(pki_dir, ips))?
        });
        let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, API_PORT))
            .await
            .with_context(|| format!("the supervisor cannot listen on :{API_PORT}"))?;
        info!(
            "supervisor listening on :{API_PORT} (kube-apiserver behind it on 127.0.0.1:{APISERVER_PORT}): {api:?}"
        );
        let (tx, rx) = watch::channel(api);
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        warn!("supervisor: accept: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (tls, api) = (tls.clone(), *rx.borrow());
                tokio::spawn(async move {
                    if let Err(e) = connection(tcp, &tls, api).await {
                        debug!("supervisor: {peer}: {e:#}");
                    }
                });
            }
        });
        Ok(Supervisor { api: tx })
    }

    /// Says what stands behind it now (logged when it changes).
    pub fn set(&self, api: Api) {
        let old = self.api.send_replace(api);
        if old != api {
            info!("supervisor: the API behind it is now {api:?} (was {old:?})");
        }
    }
}

/// One client connection.
async fn connection(tcp: TcpStream, tls: &Tls, api: Api) -> anyhow::Result<()> {
    let mut client = tokio::time::timeout(IO_BOUND, tls.acceptor.accept(tcp))
        .await
        .context("TLS handshake timed out")??;
    let (head, read) = tokio::time::timeout(IO_BOUND, read_head(&mut client))
        .await
        .context("no request head in time")??;
    let Some(parsed) = parse_head(&read[..head]) else {
        return answer(&mut client, &unavailable("bad request")).await;
    };
    let mut r = if parsed.path.split('?').next() == Some(BOOTSTRAP_PATH) {
        let auth = token::authenticate(&tls.passwd, parsed.authorization.as_deref());
        // The CAs' keys are read only for a request the server token
        // authenticated.
        let etcd = match (&auth, &tls.etcd_tls) {
            (token::Auth::Server, Some(dir)) => etcd_ca_files(dir),
            _ => Vec::new(),
        };
        bootstrap(auth, &tls.ca_pem, &etcd)
    } else {
        route(&parsed.path, api, &tls.ca_pem)
    };
    if r == Route::ToApiServer {
        match backend(tls).await {
            Ok(mut up) => {
                up.write_all(&read).await?;
                tokio::io::copy_bidirectional(&mut client, &mut up).await?;
                return Ok(());
            }
            // Gone between the state and the connection (it is being
            // stopped): what k3s answers while it has none.
            Err(e) => {
                warn!("supervisor: kube-apiserver: {e:#}");
                r = unavailable("apiserver not ready");
            }
        }
    }
    // The body, so the client reads the answer rather than a reset.
    let body_read = read.len() - head - 4;
    if let Some(len) = parsed.content_length.filter(|&l| l <= MAX_DRAIN)
        && len > body_read
    {
        let mut rest = vec![0; len - body_read];
        let _ = tokio::time::timeout(IO_BOUND, client.read_exact(&mut rest)).await;
    }
    answer(&mut client, &r).await
}

/// Reads until the first request's head is complete: its length (without
/// the blank line) and everything read so far.
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> anyhow::Result<(usize, Vec<u8>)> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok((i, buf));
        }
        anyhow::ensure!(buf.len() <= MAX_HEAD, "request head over {MAX_HEAD} bytes");
        let n = s.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "closed before a request head");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A TLS connection to kube-apiserver on `127.0.0.1:6444`.
async fn backend(tls: &Tls) -> anyhow::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = tokio::time::timeout(
        IO_BOUND,
        TcpStream::connect((Ipv4Addr::LOCALHOST, APISERVER_PORT)),
    )
    .await
    .context("connecting timed out")??;
    let name = ServerName::IpAddress(Ipv4Addr::LOCALHOST.into());
    Ok(
        tokio::time::timeout(IO_BOUND, tls.connector.connect(name, tcp))
            .await
            .context("TLS handshake timed out")??,
    )
}

/// Writes the supervisor's own answer and closes the connection.
async fn answer<S: AsyncWrite + Unpin>(s: &mut S, r: &Route) -> anyhow::Result<()> {
    let Route::Answer {
        status,
        content_type,
        body,
    } = r
    else {
        unreachable!("only answers are written here");
    };
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tokio::time::timeout(IO_BOUND, async {
        s.write_all(text.as_bytes()).await?;
        s.shutdown().await
    })
    .await
    .context("writing the answer timed out")??;
    Ok(())
}

/// `GET path` from the supervisor at `server` (a join URL naming an
/// address), with `authorization` if given: the whole answer, within
/// [`IO_BOUND`]. An address with no k3s server on it (an agent's: it runs no
/// supervisor) refuses the connection.
async fn get(
    pki_dir: &Path,
    ips: &[std::net::IpAddr],
    server: &protocol::JoinUrl,
    path: &str,
    authorization: Option<&str>,
) -> anyhow::Result<String> {
    let get = async {
        let tls = Tls::load(&testcp::Pki::load(pki_dir, ips))?;
        let ip: std::net::IpAddr = server.host().parse().context("the join URL's address")?;
        let port: u16 = server
            .as_str()
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or(API_PORT);
        let tcp = TcpStream::connect((ip, port)).await?;
        let mut s = tls
            .connector
            .connect(ServerName::IpAddress(ip.into()), tcp)
            .await?;
        let auth = authorization
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {ip}\r\n{auth}Connection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).await?;
        anyhow::Ok(answer)
    };
    tokio::time::timeout(IO_BOUND, get)
        .await
        .context("no answer in time")?
}

/// Whether the supervisor at `server` answers `/ping` with `pong` within
/// [`IO_BOUND`]: what a host's embedded agent needs before it can bootstrap
/// from that server.
pub async fn answers_ping(
    pki_dir: &Path,
    ips: &[std::net::IpAddr],
    server: &protocol::JoinUrl,
) -> bool {
    get(pki_dir, ips, server, "/ping", None)
        .await
        .is_ok_and(|a| a.starts_with("HTTP/1.1 200") && a.ends_with("pong"))
}

/// The etcd CAs' files this server has in `dir`, each `(name, content)`.
fn etcd_ca_files(dir: &Path) -> Vec<(String, String)> {
    lab_pki::CA_FILES
        .iter()
        .flat_map(|(c, k)| [c, k])
        .filter_map(|f| Some((f.to_string(), std::fs::read_to_string(dir.join(f)).ok()?)))
        .collect()
}

/// The etcd CAs in a bootstrap answer's body, or `None` when it carries
/// not all of them.
pub fn etcd_cas(body: &str) -> Option<lab_pki::EtcdCas> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let field = |name: &str| v[name]["Content"].as_str();
    let [(sc, sk), (pc, pk)] = ETCD_FIELDS;
    lab_pki::EtcdCas::from_pem((field(sc)?, field(sk)?), (field(pc)?, field(pk)?)).ok()
}

/// A joining server's first read (`pkg/cluster/bootstrap.go`
/// `httpBootstrap`): [`BOOTSTRAP_PATH`] from the supervisor at `server`
/// with `creds`. `Ok((status line, body))` when it answers (`200 OK` lets
/// the join go on; k3s stops at any other), `Err` when it does not.
///
/// # Errors
/// No answer: refused, timed out, TLS.
pub async fn server_bootstrap(
    pki_dir: &Path,
    ips: &[std::net::IpAddr],
    server: &protocol::JoinUrl,
    creds: &token::Creds,
) -> anyhow::Result<(String, String)> {
    let answer = get(
        pki_dir,
        ips,
        server,
        BOOTSTRAP_PATH,
        Some(&token::basic(creds)),
    )
    .await?;
    let line = answer.lines().next().unwrap_or_default();
    let status = line
        .strip_prefix("HTTP/1.1 ")
        .unwrap_or(line)
        .trim()
        .to_string();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths_get_k3s_s_503_with_no_api_server_behind_and_go_through_with_one() {
        let status = |r: Route| match r {
            Route::Answer { status, body, .. } => {
                let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                (
                    status,
                    v["reason"].as_str().unwrap().to_string(),
                    v["message"].as_str().unwrap().to_string(),
                )
            }
            Route::ToApiServer => panic!("not an answer"),
        };
        assert_eq!(
            status(route("/api/v1/nodes", Api::Disabled, "")),
            (
                "503 Service Unavailable",
                "ServiceUnavailable".into(),
                "apiserver disabled".into()
            )
        );
        assert_eq!(
            status(route("/version?timeout=5s", Api::NotReady, "")),
            (
                "503 Service Unavailable",
                "ServiceUnavailable".into(),
                "apiserver not ready".into()
            )
        );
        assert_eq!(route("/api/v1/nodes", Api::Up, ""), Route::ToApiServer);
        // The supervisor's own paths answer whatever is behind it.
        for api in [Api::Up, Api::NotReady, Api::Disabled] {
            assert!(
                matches!(route("/ping", api, ""), Route::Answer { status: "200 OK", ref body, .. } if body == "pong")
            );
            assert!(
                matches!(route("/cacerts", api, "PEM"), Route::Answer { ref body, .. } if body == "PEM")
            );
        }
    }

    #[test]
    fn the_bootstrap_path_answers_the_server_token_refuses_a_wrong_one_and_forbids_the_agents() {
        let code = |r: Route| match r {
            Route::Answer { status, .. } => status,
            Route::ToApiServer => panic!("not an answer"),
        };
        assert_eq!(code(bootstrap(token::Auth::Server, "PEM", &[])), "200 OK");
        assert_eq!(
            code(bootstrap(token::Auth::Refused, "PEM", &[])),
            "401 Unauthorized"
        );
        assert_eq!(
            code(bootstrap(token::Auth::Agent, "PEM", &[])),
            "403 Forbidden"
        );
        let Route::Answer { body, .. } = bootstrap(token::Auth::Refused, "PEM", &[]) else {
            unreachable!()
        };
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (v["code"].as_u64(), v["message"].as_str()),
            (Some(401), Some("not authorized"))
        );
    }

    #[test]
    fn a_request_head_gives_its_path_and_body_length() {
        let h = parse_head(
            b"POST /api/v1/namespaces/x/configmaps HTTP/1.1\r\nhost: a\r\ncontent-length: 42",
        )
        .unwrap();
        assert_eq!(h.method, "POST");
        assert_eq!(h.path, "/api/v1/namespaces/x/configmaps");
        assert_eq!(h.content_length, Some(42));
        assert_eq!(h.authorization, None);
        let h = parse_head(
            b"GET /v1-k3s/server-bootstrap HTTP/1.1\r\nAuthorization: Basic c2VjcmV0\r\nhost: a",
        )
        .unwrap();
        assert_eq!(h.authorization.as_deref(), Some("Basic c2VjcmV0"));
        assert!(
            !format!("{h:?}").contains("c2VjcmV0"),
            "the head shows its credentials"
        );
        assert_eq!(
            parse_head(b"GET /ping HTTP/1.1\r\nhost: a")
                .unwrap()
                .content_length,
            None
        );
        assert_eq!(parse_head(b"\x16\x03\x01 garbage"), None);
        assert_eq!(parse_head(b"GET nopath HTTP/1.1"), None);
    }
}
