//! `run`'s failover between API servers (`api_servers` in the settings).
//!
//! More in docs/internals.md, "kubeaccess: failover".

use std::time::Duration;

use kube::Client;
use tokio::{sync::watch, task::JoinHandle};
use tracing::warn;

/// How often the server in use is asked whether it still serves the API.
pub const PROBE_EVERY: Duration = Duration::from_secs(5);
/// How long one probe may take.
pub const PROBE_BOUND: Duration = Duration::from_secs(5);
/// How many failed probes in a row end the session.
pub const PROBE_FAILURES: u32 = 3;

/// The servers `run` goes through, in order; `None` is the kubeconfig's
/// own (when `api_servers` is empty).
#[derive(Debug, Clone)]
pub struct Servers {
    list: Vec<Option<http::Uri>>,
    at: usize,
}

impl Servers {
    /// `configured` (the settings' `api_servers`), or the kubeconfig's
    /// server alone when there are none.
    pub fn new(configured: &[http::Uri]) -> Self {
        let list = if configured.is_empty() {
            vec![None]
        } else {
            configured.iter().cloned().map(Some).collect()
        };
        Self { list, at: 0 }
    }

    /// The server in use (`None`: the kubeconfig's).
    pub fn current(&self) -> Option<&http::Uri> {
        self.list[self.at].as_ref()
    }

    /// How many there are to go through.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there is none (never: the kubeconfig's is the fallback).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Moves to the next server, round and round; returns it, shown.
    pub fn rotate(&mut self) -> String {
        self.at = (self.at + 1) % self.list.len();
        self.shown()
    }

    /// The server in use, shown.
    pub fn shown(&self) -> String {
        self.current()
            .map_or_else(|| "the kubeconfig's server".into(), ToString::to_string)
    }
}

/// One session's stop signal: set by SIGTERM, or by the probe when the
/// server in use stops serving.
pub struct Session {
    stop: watch::Receiver<bool>,
    probe: JoinHandle<bool>,
    relay: JoinHandle<()>,
}

impl Session {
    /// Starts the session's stop signal, fed by `shutdown`, and, when
    /// `probing` (more than one server to go to), the probe of `client`'s
    /// server.
    pub fn start(client: Client, shutdown: watch::Receiver<bool>, probing: bool) -> Self {
        let (tx, stop) = watch::channel(*shutdown.borrow());
        let tx = std::sync::Arc::new(tx);
        let relay = {
            let (tx, mut shutdown) = (tx.clone(), shutdown);
            tokio::spawn(async move {
                while shutdown.changed().await.is_ok() {
                    if *shutdown.borrow() {
                        let _ = tx.send(true);
                        return;
                    }
                }
            })
        };
        let probe = tokio::spawn(async move {
            if !probing {
                std::future::pending::<()>().await;
            }
            let mut failed = 0;
            loop {
                tokio::time::sleep(PROBE_EVERY).await;
                match tokio::time::timeout(PROBE_BOUND, client.apiserver_version()).await {
                    Ok(Ok(_)) => failed = 0,
                    Ok(Err(e)) => {
                        failed += 1;
                        warn!(
                            "the API server in use did not answer its version ({failed} of {PROBE_FAILURES}): {e}"
                        );
                    }
                    Err(_) => {
                        failed += 1;
                        warn!(
                            "the API server in use did not answer its version within {PROBE_BOUND:?} ({failed} of {PROBE_FAILURES})"
                        );
                    }
                }
                if failed >= PROBE_FAILURES {
                    let _ = tx.send(true);
                    return true;
                }
            }
        });
        Self { stop, probe, relay }
    }

    /// The stop signal the session's driver and election watch.
    pub fn stop(&self) -> watch::Receiver<bool> {
        self.stop.clone()
    }

    /// Ends the session; returns whether its server had stopped serving.
    pub async fn end(self) -> bool {
        self.relay.abort();
        if self.probe.is_finished() {
            self.probe.await.unwrap_or(false)
        } else {
            self.probe.abort();
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_are_gone_through_in_order_round_and_round_and_none_means_the_kubeconfigs() {
        let own = Servers::new(&[]);
        assert_eq!((own.len(), own.current()), (1, None));
        assert_eq!(own.shown(), "the kubeconfig's server");
        let a: http::Uri = "https://10.0.0.1:6443".parse().unwrap();
        let b: http::Uri = "https://10.0.0.2:6443".parse().unwrap();
        let mut s = Servers::new(&[a.clone(), b.clone()]);
        assert_eq!(s.current(), Some(&a));
        assert_eq!(s.rotate(), "https://10.0.0.2:6443/");
        assert_eq!(s.current(), Some(&b));
        s.rotate();
        assert_eq!(s.current(), Some(&a));
    }
}
