//! The local etcd's health, read from its plain-HTTP metrics listener.
//!
//! k3s runs etcd with `listen-metrics-urls` on `http://127.0.0.1:2381`, where
//! etcd also serves `/health`: no client certificate is needed to ask it, and
//! the actuator holds none.

use std::{
    io::{Read, Write},
    net::{TcpStream, ToSocketAddrs},
    thread,
    time::Duration,
};

/// The default health URL of k3s's embedded etcd.
pub const DEFAULT_HEALTH_URL: &str = "http://127.0.0.1:2381/health";

/// Asks `url` (`http://HOST:PORT/PATH`) once: healthy when it answers 200 with
/// `"health":"true"`.
pub fn is_healthy(url: &str, timeout: Duration) -> bool {
    probe(url, timeout).unwrap_or(false)
}

fn probe(url: &str, timeout: Duration) -> Option<bool> {
    let rest = url.strip_prefix("http://")?;
    let (hostport, path) = rest.split_once('/').map_or((rest, "/"), |(h, p)| (h, p));
    let addr = hostport.to_socket_addrs().ok()?.next()?;
    let mut s = TcpStream::connect_timeout(&addr, timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.set_write_timeout(Some(timeout)).ok()?;
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {hostport}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    // Read what arrives until the server closes: a reset after the answer
    // (a server closing with unread bytes) still leaves the answer usable.
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if raw.len() + n <= 64 * 1024 => raw.extend_from_slice(&buf[..n]),
            Ok(_) => break,
            Err(_) if !raw.is_empty() => break,
            Err(_) => return None,
        }
    }
    Some(healthy_answer(&raw))
}

/// Whether etcd's answer to `GET /health` (the raw HTTP response, at most
/// what [`is_healthy`] reads) says healthy: status 200 and
/// `"health":"true"` in it. Whatever listens on the health port writes
/// these bytes (etcd, or any local process that took the port), so they
/// are read as text and searched, nothing more.
pub fn healthy_answer(raw: &[u8]) -> bool {
    let body = String::from_utf8_lossy(raw);
    let ok = body.starts_with("HTTP/1.1 200") || body.starts_with("HTTP/1.0 200");
    ok && body.replace(' ', "").contains("\"health\":\"true\"")
}

/// Waits up to `timeout` on `clock` for `url` to report healthy, asking
/// every `every`.
pub fn wait_healthy(url: &str, timeout: Duration, every: Duration, clock: &clock::Clock) -> bool {
    let start = clock.now();
    loop {
        if is_healthy(url, every.max(Duration::from_millis(200))) {
            return true;
        }
        if clock.since(start) >= timeout {
            return false;
        }
        thread::sleep(every);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn serve_once(reply: &'static str) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/health", l.local_addr().unwrap());
        thread::spawn(move || {
            if let Ok((mut c, _)) = l.accept() {
                // Read the whole request before answering, as an HTTP server does.
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = c.write_all(reply.as_bytes());
                let _ = c.shutdown(std::net::Shutdown::Write);
            }
        });
        url
    }

    #[test]
    fn health_is_read_from_the_answer() {
        let ok = serve_once(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"health\":\"true\",\"reason\":\"\"}",
        );
        assert!(is_healthy(&ok, Duration::from_secs(2)));
        let bad = serve_once(
            "HTTP/1.1 503 Service Unavailable\r\n\r\n{\"health\":\"false\",\"reason\":\"RAFT NO LEADER\"}",
        );
        assert!(!is_healthy(&bad, Duration::from_secs(2)));
        let closed = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/health", l.local_addr().unwrap())
        };
        assert!(!wait_healthy(
            &closed,
            Duration::from_millis(300),
            Duration::from_millis(100),
            &clock::Clock::system()
        ));
        assert!(!is_healthy(
            "https://127.0.0.1:1/health",
            Duration::from_millis(100)
        ));
    }
}
