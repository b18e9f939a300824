//! The HTTP side of fleet-role's metrics and health endpoints, shared by
//! `fleet-role run` and `fleet-role-actuator watch`.
//!
//! A few lines over a `TcpListener` rather than an HTTP framework: GET
//! paths, no body, one response per connection, every read and write
//! bounded, at most [`MAX_CONNECTIONS`] served at once. What each path answers is the caller's [`Route`]; this crate
//! only reads the request line and writes the answer.
#![forbid(unsafe_code)]

use std::{net::SocketAddr, sync::Arc, time::Duration};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
};
use tracing::{debug, warn};

/// The longest a client may take to send its request, or to take the answer.
const IO_BOUND: Duration = Duration::from_secs(5);

/// How many connections are served at once. One more waits, unread, in the
/// kernel's listen backlog until a slot frees, which takes at most
/// [`IO_BOUND`] for the read and as much for the write; so idle or slow
/// clients hold at most this many tasks and sockets, and a scrape behind them
/// is answered within those bounds.
pub const MAX_CONNECTIONS: usize = 16;

/// The content type of plain answers.
pub const PLAIN: &str = "text/plain; charset=utf-8";

/// The content type of `prometheus-client`'s text encoding (OpenMetrics
/// text, which Prometheus reads).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of Prometheus's classic text format (0.0.4), which a
/// client that does not ask for OpenMetrics gets ([`negotiate`]).
pub const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Why the endpoints could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot serve metrics on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// One answer: status line, content type, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status, e.g. `200 OK`.
    pub status: &'static str,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl Answer {
    /// `200 OK` with a plain body.
    pub fn ok(body: impl Into<String>) -> Self {
        Self {
            status: "200 OK",
            content_type: PLAIN,
            body: body.into(),
        }
    }

    /// `200 OK` with exposition text.
    pub fn metrics(body: String) -> Self {
        Self {
            status: "200 OK",
            content_type: OPENMETRICS,
            body,
        }
    }

    /// `503 Service Unavailable` with a plain reason.
    pub fn unavailable(body: impl Into<String>) -> Self {
        Self {
            status: "503 Service Unavailable",
            content_type: PLAIN,
            body: body.into(),
        }
    }

    /// `404 Not Found`, with a hint of the paths there are.
    pub fn not_found(hint: impl Into<String>) -> Self {
        Self {
            status: "404 Not Found",
            content_type: PLAIN,
            body: hint.into(),
        }
    }
}

/// What each path answers (the path without its query).
pub trait Route: Send + Sync + 'static {
    /// The answer to a GET of `path`.
    fn route(&self, path: &str) -> Answer;
}

/// The answer to a request line (`GET /metrics HTTP/1.1`): anything but a
/// GET is refused, the query is dropped, the rest is `route`'s.
pub fn answer(line: &str, route: &dyn Route) -> Answer {
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next(), parts.next());
    if method != Some("GET") {
        return Answer {
            status: "405 Method Not Allowed",
            content_type: PLAIN,
            body: "GET only\n".into(),
        };
    }
    let path = path.unwrap_or_default();
    route.route(path.split('?').next().unwrap_or(path))
}

/// The answer in the form the request's head asks for: OpenMetrics text
/// to a client whose `Accept` names it (Prometheus does), else the classic
/// text format ([`classic_text`]), which `promtool check metrics`, `curl`
/// and older scrapers read. Answers of other types are left as they are.
pub fn negotiate(head: &str, a: Answer) -> Answer {
    let wants_openmetrics = head.lines().skip(1).any(|l| {
        l.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("accept")
                && value.contains("application/openmetrics-text")
        })
    });
    if a.content_type != OPENMETRICS || wants_openmetrics {
        return a;
    }
    Answer {
        content_type: CLASSIC,
        body: classic_text(&a.body),
        ..a
    }
}

/// OpenMetrics text, as `prometheus-client` writes it, in the classic
/// text format: a counter's `# HELP` and `# TYPE` name its `_total`
/// series (OpenMetrics names the family without it, which a classic
/// parser reads as an untyped series with no help), and the `# EOF` and
/// `# UNIT` lines, which the classic format has not, are dropped.
pub fn classic_text(openmetrics: &str) -> String {
    let counters: Vec<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| Some((p, line.strip_prefix(p)?)));
        match meta {
            Some((p, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let name = if counters.contains(&name) {
                    format!("{name}_total")
                } else {
                    name.to_string()
                };
                out.push_str(format!("{p}{name} {tail}").trim_end());
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Serves `route` on `addr` until the process ends. Returns once bound,
/// with the address bound (a port 0 is chosen by the kernel).
pub async fn serve(addr: SocketAddr, route: Arc<dyn Route>) -> Result<SocketAddr, ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            // A slot first, then the accept: past the bound a connection
            // waits in the backlog rather than as a task of its own.
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            match listener.accept().await {
                Ok((stream, _)) => {
                    let route = route.clone();
                    tokio::spawn(async move {
                        if let Err(e) = respond(stream, route.as_ref()).await {
                            debug!("a metrics request: {e}");
                        }
                        drop(slot);
                    });
                }
                Err(e) => {
                    drop(slot);
                    // Out of descriptors, say: try again shortly rather than spin.
                    warn!("accepting a metrics connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(bound)
}

async fn respond(mut stream: TcpStream, route: &dyn Route) -> std::io::Result<()> {
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    // The request's head is all that is read; a client too slow or too
    // long is cut off.
    let read = tokio::time::timeout(IO_BOUND, async {
        while len < buf.len() {
            let n = stream.read(&mut buf[len..]).await?;
            if n == 0 {
                break;
            }
            len += n;
            if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
    if !matches!(read, Ok(Ok(()))) {
        return Ok(());
    }
    let head = String::from_utf8_lossy(&buf[..len]);
    let a = negotiate(
        &head,
        answer(head.lines().next().unwrap_or_default(), route),
    );
    let response = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        a.status,
        a.content_type,
        a.body.len(),
        a.body
    );
    tokio::time::timeout(IO_BOUND, stream.write_all(response.as_bytes()))
        .await
        .map_err(|_| std::io::Error::other("write timed out"))??;
    let _ = stream.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;
    impl Route for Echo {
        fn route(&self, path: &str) -> Answer {
            Answer::ok(path.to_string())
        }
    }

    #[test]
    fn only_a_get_is_routed_and_its_query_is_dropped() {
        assert_eq!(
            answer("GET /metrics?x=1 HTTP/1.1", &Echo),
            Answer::ok("/metrics")
        );
        assert!(
            answer("POST /metrics HTTP/1.1", &Echo)
                .status
                .starts_with("405")
        );
        assert!(answer("", &Echo).status.starts_with("405"));
    }

    const SCRAPE: &str = "# HELP x_swaps Swaps.\n# TYPE x_swaps counter\nx_swaps_total{outcome=\"done\"} 1\n# HELP x_up Up.\n# TYPE x_up gauge\n# UNIT x_up seconds\nx_up 1\n# EOF\n";

    #[test]
    fn a_scrape_that_asks_for_openmetrics_gets_it_and_any_other_gets_the_classic_text() {
        let om = Answer::metrics(SCRAPE.into());
        let asked = "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n";
        assert_eq!(negotiate(asked, om.clone()), om);
        let classic = negotiate("GET /metrics HTTP/1.1\r\nAccept: */*\r\n", om);
        assert_eq!(classic.content_type, CLASSIC);
        assert_eq!(
            classic.body,
            "# HELP x_swaps_total Swaps.\n# TYPE x_swaps_total counter\nx_swaps_total{outcome=\"done\"} 1\n# HELP x_up Up.\n# TYPE x_up gauge\nx_up 1\n"
        );
        // A plain answer is left as it is.
        assert_eq!(
            negotiate("GET /healthz HTTP/1.1\r\n", Answer::ok("ok")),
            Answer::ok("ok")
        );
    }

    #[tokio::test]
    async fn a_served_route_answers_over_tcp_and_the_connection_closes() {
        let addr = serve("127.0.0.1:0".parse().unwrap(), Arc::new(Echo))
            .await
            .unwrap();
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(30), s.read_to_string(&mut out))
            .await
            .unwrap()
            .unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.ends_with("\r\n\r\n/healthz"), "{out}");
    }

    /// Whether the server has closed `s` (its read gives end of file now).
    fn closed(s: &TcpStream) -> bool {
        let mut b = [0u8; 1];
        matches!(s.try_read(&mut b), Ok(0))
    }

    #[tokio::test]
    async fn idle_connections_past_the_bound_wait_and_a_scrape_is_answered_once_one_is_cut_off() {
        let addr = serve("127.0.0.1:0".parse().unwrap(), Arc::new(Echo))
            .await
            .unwrap();
        // More idle connections than are served at once: they send nothing.
        let mut idle = vec![];
        for _ in 0..MAX_CONNECTIONS + 4 {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
        let mut out = String::new();
        // The scrape waits for a slot, which an idle connection gives up at
        // its read bound; then it is answered within its own bounds.
        tokio::time::timeout(IO_BOUND * 4, s.read_to_string(&mut out))
            .await
            .expect("the scrape is answered within the bounds")
            .unwrap();
        assert!(out.ends_with("\r\n\r\n/metrics"), "{out}");
        // It was not served beside all the idle ones: at least one of them
        // had been cut off before its answer.
        assert!(
            idle.iter().any(closed),
            "the scrape was answered while every idle connection was still served"
        );
        // Every idle connection is cut off after its read bound, those that
        // waited for a slot included.
        for c in &mut idle {
            let mut rest = vec![];
            let n = tokio::time::timeout(IO_BOUND * 4, c.read_to_end(&mut rest))
                .await
                .expect("an idle connection is dropped after the read bound");
            assert!(matches!(n, Ok(0) | Err(_)), "{n:?} {rest:?}");
        }
    }
}
