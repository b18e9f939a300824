//! One HTTP/1.1 request on a fresh connection to the daemon's socket,
//! bounded as a whole.

use std::{path::Path, time::Duration};

use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;

use crate::error::{Error, one_line};

/// The largest answer read: far past any inspect, version or event span a
/// switch asks for, and a bound on what a daemon can make this process
/// hold.
pub(crate) const MAX_ANSWER: usize = 16 << 20;

/// An answer: its status and its whole body.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

/// The connection's task, aborted when the call ends or is dropped (a
/// timed-out call leaves nothing running).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sends `method path` with `body` (JSON, or a tar for an import) and reads
/// the whole answer, within `bound`; `name` is the call as errors show it.
pub(crate) async fn call(
    socket: &Path,
    bound: Duration,
    (method, path, name): (Method, &str, &str),
    body: Option<(&'static str, Vec<u8>)>,
) -> Result<Answer, Error> {
    let work = async {
        let unreachable = |reason: String| Error::Unreachable {
            socket: socket.to_path_buf(),
            call: name.to_string(),
            reason: one_line(&reason),
        };
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let _conn = AbortOnDrop(tokio::spawn(async move {
            // The connection's own error shows in the request's result.
            let _ = conn.await;
        }));
        let mut req = Request::builder()
            .method(method.clone())
            .uri(path)
            // HTTP/1.1 needs a Host; the daemon ignores its value.
            .header(header::HOST, "docker");
        let bytes = match body {
            Some((kind, bytes)) => {
                req = req.header(header::CONTENT_TYPE, kind);
                Bytes::from(bytes)
            }
            None => Bytes::new(),
        };
        let req = req.body(Full::new(bytes)).map_err(|e| Error::Unreadable {
            call: name.to_string(),
            reason: e.to_string(),
        })?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| Error::Unreadable {
                call: name.to_string(),
                reason: one_line(&format!(
                    "the answer's body: {e} (at most {MAX_ANSWER} bytes are read)"
                )),
            })?
            .to_bytes();
        Ok(Answer { status, body })
    };
    tokio::time::timeout(bound, work).await.unwrap_or_else(|_| {
        Err(Error::Timeout {
            socket: socket.to_path_buf(),
            call: name.to_string(),
            secs: bound.as_secs_f64(),
        })
    })
}

/// The daemon's refusal of `call`: its `{"message": …}`, else the body.
pub(crate) fn refused(call: &str, a: &Answer) -> Error {
    let text = String::from_utf8_lossy(&a.body);
    let message = serde_json::from_slice::<serde_json::Value>(&a.body)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| text.into_owned());
    Error::Refused {
        call: call.to_string(),
        status: a.status.as_u16(),
        message: one_line(&message),
    }
}
