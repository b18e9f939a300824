//! Reaching a member's client URL as k3s's own clients do: over TLS, trusting
//! etcd's server CA and presenting a client certificate (k3s's
//! `server/tls/etcd/{server-ca.crt,client.crt,client.key}`); or in plain HTTP
//! for a member that serves it (testcp's own).

use std::{io, path::Path, sync::Arc, time::Duration};

use anyhow::Context;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject};
use testcp::plain_http::{self, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::{
    TlsConnector,
    rustls::{ClientConfig, RootCertStore, crypto::ring},
};

/// A member's client URL and how to reach it.
#[derive(Clone)]
pub struct Endpoint {
    url: String,
    tls: Option<Arc<ClientConfig>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

/// The TLS client of an etcd identity directory: `server-ca.crt` trusted,
/// `client.crt`/`client.key` presented.
pub fn client_config(dir: &Path) -> anyhow::Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join("server-ca.crt"))
        .with_context(|| format!("etcd's server CA in {}", dir.display()))?
    {
        roots.add(c?)?;
    }
    let certs = CertificateDer::pem_file_iter(dir.join("client.crt"))
        .with_context(|| format!("the etcd client certificate in {}", dir.display()))?
        .collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(dir.join("client.key"))
        .with_context(|| format!("the etcd client key in {}", dir.display()))?;
    let config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)?;
    Ok(Arc::new(config))
}

impl Endpoint {
    /// A plain-HTTP member (`http://…`).
    pub fn plain(url: impl Into<String>) -> Endpoint {
        Endpoint {
            url: url.into(),
            tls: None,
        }
    }

    /// A TLS member (`https://…`) reached with `tls`.
    pub fn tls(url: impl Into<String>, tls: Arc<ClientConfig>) -> Endpoint {
        Endpoint {
            url: url.into(),
            tls: Some(tls),
        }
    }

    /// The same identity for another member's URL.
    pub fn at(&self, url: impl Into<String>) -> Endpoint {
        Endpoint {
            url: url.into(),
            tls: self.tls.clone(),
        }
    }

    /// The client URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One HTTP/1.0 request for `path` (a JSON POST of `body`, or a GET),
    /// within 5 s (the snapshot's within 60 s).
    ///
    /// # Errors
    /// Connection and TLS errors (a member that refuses the certificate
    /// included), the timeout, or a malformed response.
    pub async fn request(&self, path: &str, body: Option<&str>) -> io::Result<Response> {
        self.request_within(path, body, Self::bound_for(path)).await
    }

    /// How long a request for `path` is given: 60 s for a snapshot, 5 s
    /// for anything else.
    pub fn bound_for(path: &str) -> Duration {
        if path.contains("snapshot") {
            Duration::from_secs(60)
        } else {
            Duration::from_secs(5)
        }
    }

    /// [`Endpoint::request`] with its own bound (a TLS member's; a plain
    /// one keeps its 5 s).
    ///
    /// # Errors
    /// As [`Endpoint::request`].
    pub async fn request_within(
        &self,
        path: &str,
        body: Option<&str>,
        bound: Duration,
    ) -> io::Result<Response> {
        let url = format!("{}{path}", self.url);
        let Some(tls) = &self.tls else {
            return plain_http::request(&url, body).await;
        };
        let rest = self.url.strip_prefix("https://").ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not an https:// URL: {}", self.url),
            )
        })?;
        let (authority, _) = plain_http::split(rest);
        let host = authority
            .rsplit_once(':')
            .map_or(authority, |(h, _)| h)
            .to_string();
        let name = ServerName::try_from(host)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let request = plain_http::request_text(authority, path, body);
        let exchange = async {
            let tcp = tokio::net::TcpStream::connect(authority).await?;
            let mut stream = TlsConnector::from(tls.clone()).connect(name, tcp).await?;
            stream.write_all(request.as_bytes()).await?;
            let mut response = Vec::new();
            match stream.read_to_end(&mut response).await {
                Ok(_) => {}
                // A server that closes without close_notify after the whole
                // response (HTTP/1.0: the close ends the body).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !response.is_empty() => {}
                Err(e) => return Err(e),
            }
            Ok::<_, io::Error>(response)
        };
        let response = tokio::time::timeout(bound, exchange).await.map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no response from {url} in {} s", bound.as_secs()),
            )
        })??;
        plain_http::parse_response(&url, &response)
    }
}
