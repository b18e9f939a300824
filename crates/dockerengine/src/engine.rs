//! The calls a Docker-hosted host's switch makes.

use std::{path::PathBuf, time::Duration};

use http::{Method, StatusCode};
use serde::Deserialize;

use crate::{
    container::{Container, ContainerSpec, Inspected, Policy, RestartPolicy},
    error::Error,
    events::{self, Event},
    transport::{Answer, call, refused},
};

/// The Engine API version asked for: Docker 20.10's (Debian 12's
/// `docker.io`); later daemons still serve it.
pub const API_VERSION: &str = "1.41";

/// How long one call may take by default: every call here returns at once
/// on a healthy daemon except a stop, which waits out its own grace (and
/// is given that on top), and an import, which reads the whole image.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The daemon's version, as `GET /version` gives it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Version {
    /// The daemon's release.
    pub version: String,
    /// The newest API version it serves.
    pub api_version: String,
}

/// A Docker daemon, reached at its unix socket.
#[derive(Debug, Clone)]
pub struct Engine {
    socket: PathBuf,
    timeout: Duration,
}

impl Engine {
    /// The daemon at `socket` (`/var/run/docker.sock` on most hosts).
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Bounds every call to `timeout` (a stop gets its grace on top).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The socket.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<(&'static str, Vec<u8>)>,
        extra: Duration,
    ) -> Result<(String, Answer), Error> {
        let full = format!("/v{API_VERSION}{path}");
        let name = format!("{method} {}", path.split('?').next().unwrap_or(path));
        let a = call(
            &self.socket,
            self.timeout + extra,
            (method, &full, &name),
            body,
        )
        .await?;
        Ok((name, a))
    }

    /// POSTs `body` as JSON to `path`; any answer but `expect` is Docker's
    /// refusal.
    async fn post_json(
        &self,
        path: &str,
        body: &impl serde::Serialize,
        expect: StatusCode,
    ) -> Result<(String, Answer), Error> {
        let body = serde_json::to_vec(body).unwrap_or_default();
        let (call, a) = self
            .send(
                Method::POST,
                path,
                Some(("application/json", body)),
                Duration::ZERO,
            )
            .await?;
        if a.status != expect {
            return Err(refused(&call, &a));
        }
        Ok((call, a))
    }

    /// The daemon's version.
    ///
    /// # Errors
    /// Any [`Error`] of a call.
    pub async fn version(&self) -> Result<Version, Error> {
        let (name, a) = self
            .send(Method::GET, "/version", None, Duration::ZERO)
            .await?;
        if a.status != StatusCode::OK {
            return Err(refused(&name, &a));
        }
        parse(&name, &a.body)
    }

    /// The container named `name`, or `None` when there is none.
    ///
    /// # Errors
    /// Any [`Error`] of a call.
    pub async fn inspect(&self, name: &str) -> Result<Option<Container>, Error> {
        let path = format!("/containers/{}/json", escape(name));
        let (call, a) = self.send(Method::GET, &path, None, Duration::ZERO).await?;
        match a.status {
            StatusCode::OK => parse::<Inspected>(&call, &a.body).map(|i| Some(i.into())),
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(refused(&call, &a)),
        }
    }

    /// Creates the container `name` from `spec` (stopped); returns its id.
    ///
    /// # Errors
    /// [`Error::Refused`] when the name is taken (409) or the image is
    /// missing (404), and any other [`Error`] of a call.
    pub async fn create(&self, name: &str, spec: &ContainerSpec) -> Result<String, Error> {
        #[derive(Deserialize)]
        struct Created {
            #[serde(rename = "Id")]
            id: String,
        }
        let path = format!("/containers/create?name={}", escape(name));
        let (call, a) = self
            .post_json(&path, &spec.body(), StatusCode::CREATED)
            .await?;
        parse::<Created>(&call, &a.body).map(|c| c.id)
    }

    /// Starts `name`; one already running is left as it is. Returns whether
    /// this call started it.
    ///
    /// # Errors
    /// Any [`Error`] of a call.
    pub async fn start(&self, name: &str) -> Result<bool, Error> {
        let path = format!("/containers/{}/start", escape(name));
        let (call, a) = self.send(Method::POST, &path, None, Duration::ZERO).await?;
        changed(&call, &a)
    }

    /// Stops `name`: SIGTERM, then SIGKILL after `grace`; returns once it
    /// has stopped. One already stopped is left as it is. Returns whether
    /// this call stopped it. The call's bound is the engine's timeout plus
    /// `grace`.
    ///
    /// # Errors
    /// Any [`Error`] of a call.
    pub async fn stop(&self, name: &str, grace: Duration) -> Result<bool, Error> {
        let path = format!("/containers/{}/stop?t={}", escape(name), grace.as_secs());
        let (call, a) = self.send(Method::POST, &path, None, grace).await?;
        changed(&call, &a)
    }

    /// Sets `name`'s restart policy (`POST /containers/{name}/update`),
    /// running or not: what enabling or disabling a unit is to systemd.
    ///
    /// # Errors
    /// [`Error::Refused`] when there is no such container (404), and any
    /// other [`Error`] of a call.
    pub async fn set_restart_policy(&self, name: &str, policy: RestartPolicy) -> Result<(), Error> {
        #[derive(serde::Serialize)]
        #[serde(rename_all = "PascalCase")]
        struct Update {
            restart_policy: Policy,
        }
        let path = format!("/containers/{}/update", escape(name));
        let update = Update {
            restart_policy: Policy {
                name: policy.word(),
            },
        };
        self.post_json(&path, &update, StatusCode::OK)
            .await
            .map(drop)
    }

    /// Waits for `name`'s process to end and returns its exit code, within
    /// the engine's timeout and `within` (the process's own bound).
    ///
    /// # Errors
    /// [`Error::Timeout`] when it runs past that (it is left running), and
    /// any other [`Error`] of a call.
    pub async fn wait(&self, name: &str, within: Duration) -> Result<i64, Error> {
        #[derive(Deserialize)]
        struct Waited {
            #[serde(rename = "StatusCode")]
            status_code: i64,
        }
        let path = format!("/containers/{}/wait", escape(name));
        let (call, a) = self.send(Method::POST, &path, None, within).await?;
        if a.status != StatusCode::OK {
            return Err(refused(&call, &a));
        }
        parse::<Waited>(&call, &a.body).map(|w| w.status_code)
    }

    /// What `name` (a container without a terminal) wrote, both streams.
    ///
    /// # Errors
    /// Any [`Error`] of a call; a stream that does not split is
    /// [`Error::Unreadable`].
    pub async fn logs(&self, name: &str) -> Result<crate::Output, Error> {
        let path = format!("/containers/{}/logs?stdout=1&stderr=1", escape(name));
        let (call, a) = self.send(Method::GET, &path, None, Duration::ZERO).await?;
        if a.status != StatusCode::OK {
            return Err(refused(&call, &a));
        }
        crate::logs::demux(&a.body).map_err(|reason| Error::Unreadable { call, reason })
    }

    /// Removes `name` (with `force`, a running one is killed first; its
    /// volumes are kept). One already gone is not an error.
    ///
    /// # Errors
    /// Any [`Error`] of a call.
    pub async fn remove(&self, name: &str, force: bool) -> Result<(), Error> {
        let path = format!("/containers/{}?force={force}&v=false", escape(name));
        let (call, a) = self
            .send(Method::DELETE, &path, None, Duration::ZERO)
            .await?;
        match a.status {
            StatusCode::NO_CONTENT | StatusCode::NOT_FOUND => Ok(()),
            _ => Err(refused(&call, &a)),
        }
    }

    /// Imports the root file system in `tar` as the image `repo:tag` (what
    /// `docker import` does): images come from local files, no registry.
    ///
    /// # Errors
    /// [`Error::Refused`] when the daemon does not take the tar (it says
    /// so in its progress stream, with a 200), and any other [`Error`].
    pub async fn import(&self, repo: &str, tag: &str, tar: Vec<u8>) -> Result<(), Error> {
        let path = format!(
            "/images/create?fromSrc=-&repo={}&tag={}",
            escape(repo),
            escape(tag)
        );
        let (call, a) = self
            .send(
                Method::POST,
                &path,
                Some(("application/x-tar", tar)),
                self.timeout,
            )
            .await?;
        if a.status != StatusCode::OK {
            return Err(refused(&call, &a));
        }
        // A failed import is a 200 whose stream carries an error.
        for v in serde_json::Deserializer::from_slice(&a.body).into_iter::<serde_json::Value>() {
            let v = v.map_err(|e| Error::Unreadable {
                call: call.clone(),
                reason: e.to_string(),
            })?;
            if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
                return Err(Error::Refused {
                    call,
                    status: 200,
                    message: crate::error::one_line(e),
                });
            }
        }
        Ok(())
    }

    /// The container events from `since` to `until` (Unix milliseconds,
    /// the daemon's clock), in the daemon's order. `until` must not be in
    /// the daemon's future: the daemon would hold the answer open until
    /// then.
    ///
    /// # Errors
    /// Any [`Error`] of a call.
    pub async fn events(&self, since: u64, until: u64) -> Result<Vec<Event>, Error> {
        let filters = escape(r#"{"type":["container"]}"#);
        let at = |ms: u64| format!("{}.{:03}", ms / 1000, ms % 1000);
        let path = format!(
            "/events?since={}&until={}&filters={filters}",
            at(since),
            at(until)
        );
        let (call, a) = self.send(Method::GET, &path, None, Duration::ZERO).await?;
        if a.status != StatusCode::OK {
            return Err(refused(&call, &a));
        }
        events::parse(&a.body).map_err(|reason| Error::Unreadable { call, reason })
    }
}

/// A start's or a stop's answer: whether it changed the container (204),
/// or found it so already (304).
fn changed(call: &str, a: &Answer) -> Result<bool, Error> {
    match a.status {
        StatusCode::NO_CONTENT => Ok(true),
        StatusCode::NOT_MODIFIED => Ok(false),
        _ => Err(refused(call, a)),
    }
}

/// `text` as one URL path segment or query value: everything but
/// unreserved characters percent-encoded.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn parse<T: for<'de> Deserialize<'de>>(call: &str, body: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| Error::Unreadable {
        call: call.to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_or_filter_is_escaped_so_it_stays_one_segment() {
        assert_eq!(escape("k3s-agent_1.x"), "k3s-agent_1.x");
        assert_eq!(escape("a/../b?c"), "a%2F..%2Fb%3Fc");
        assert_eq!(escape(r#"{"a":1}"#), "%7B%22a%22%3A1%7D");
    }
}
