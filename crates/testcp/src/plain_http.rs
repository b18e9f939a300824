//! A minimal plain-HTTP client for etcd's `/health` and gRPC-gateway endpoints,
//! so the crate needs no HTTP client crate of its own.

use std::{io, time::Duration};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A response: status code and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The body, lossily decoded as UTF-8.
    pub body: String,
}

/// Sends one HTTP/1.0 request to `url` (`http://host:port/path`) and reads the
/// whole response. `body`, if any, is sent as JSON with POST; otherwise GET.
///
/// # Errors
/// Connection errors, a 5 s timeout, or a malformed URL or response.
pub async fn request(url: &str, body: Option<&str>) -> io::Result<Response> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| invalid(url, "not an http:// URL"))?;
    let (authority, path) = split(rest);
    let request = request_text(authority, path, body);
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(authority).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, io::Error>(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no response from {url} in 5 s"),
            )
        })??;
    parse_response(url, &response)
}

fn invalid(url: &str, what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{what}: {url}"))
}

/// `host:port/path` split into the authority and the path (`/` if none).
pub fn split(rest: &str) -> (&str, &str) {
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    (authority, if path.is_empty() { "/" } else { path })
}

/// The HTTP/1.0 request for `path` on `authority`: a JSON POST of `body`,
/// or a GET. (For a caller with a transport of its own, such as TLS.)
pub fn request_text(authority: &str, path: &str, body: Option<&str>) -> String {
    match body {
        Some(body) => format!(
            "POST {path} HTTP/1.0\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
        None => format!("GET {path} HTTP/1.0\r\nHost: {authority}\r\n\r\n"),
    }
}

/// The status and body of a whole HTTP/1.0 response read from `url`.
///
/// # Errors
/// A response without headers or a status code.
pub fn parse_response(url: &str, response: &[u8]) -> io::Result<Response> {
    let text = String::from_utf8_lossy(response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| invalid(url, "a response without headers"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid(url, "a response without a status code"))?;
    Ok(Response {
        status,
        body: body.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn a_get_sends_the_path_and_parses_status_and_body() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/health?serializable=true",
            listener.local_addr().unwrap()
        );
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = vec![0; 1024];
            let n = socket.read(&mut buf).await.unwrap();
            socket
                .write_all(
                    b"HTTP/1.0 503 Service Unavailable\r\nX: y\r\n\r\n{\"health\":\"false\"}",
                )
                .await
                .unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        let response = request(&url, None).await.unwrap();
        assert_eq!(
            response,
            Response {
                status: 503,
                body: r#"{"health":"false"}"#.into()
            }
        );
        assert!(
            server
                .await
                .unwrap()
                .starts_with("GET /health?serializable=true HTTP/1.0\r\n")
        );
    }

    #[tokio::test]
    async fn a_url_that_is_not_http_is_refused() {
        assert!(request("https://127.0.0.1:1/", None).await.is_err());
    }
}
