//! Admin access to the lab's API servers, trying each in order: a server that
//! is stepping down serves no API, so every client of the lab fails over.
//! A host's 6443 is k3s's supervisor (`k3s/supervisor.rs`): a server with no
//! API server behind it (etcd-only, a learner, one still starting) answers
//! 503 rather than refusing the connection, and that moves on too.

use std::{future::Future, net::IpAddr, path::Path};

use kube::Client;
use secrecy::SecretString;
use testcp::{Pki, TokenAuthFile};

use crate::spec::LabSpec;

/// Admin clients for a list of API URLs.
#[derive(Clone)]
pub struct Apis {
    urls: Vec<String>,
    clients: Vec<Client>,
}

impl Apis {
    /// Clients for `urls`, trusting the lab's CA, with the lab's admin token.
    pub fn new(
        pki_dir: &Path,
        ips: &[IpAddr],
        token: &SecretString,
        urls: Vec<String>,
    ) -> anyhow::Result<Apis> {
        let pki = Pki::load(pki_dir, ips);
        let mut clients = vec![];
        for url in &urls {
            let mut cfg = pki.client_config(url, Some(token));
            cfg.connect_timeout = Some(std::time::Duration::from_secs(2));
            cfg.read_timeout = Some(std::time::Duration::from_secs(15));
            // kube's own retry of 503 backs off for minutes: the next server
            // is asked at once instead.
            cfg.default_retry = false;
            clients.push(Client::try_from(cfg)?);
        }
        Ok(Apis { urls, clients })
    }

    /// Clients made elsewhere (a test's control plane), one per URL.
    pub fn from_clients(urls: Vec<String>, clients: Vec<Client>) -> Apis {
        Apis { urls, clients }
    }

    /// Admin clients for every host of the lab, servers first.
    pub fn for_lab(spec: &LabSpec) -> anyhow::Result<Apis> {
        let tokens = TokenAuthFile::load(&spec.tokens_file())?;
        Apis::for_lab_as(spec, tokens.admin_token())
    }

    /// Clients for every host of the lab, servers first, with `token` (a
    /// host's actuator token, a restricted ServiceAccount's) in place of
    /// the admin's.
    pub fn for_lab_as(spec: &LabSpec, token: &SecretString) -> anyhow::Result<Apis> {
        Apis::new(&spec.pki_dir(), &spec.ips(), token, spec.all_api_urls())
    }

    /// The URLs, in order.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// Runs `op` on each API server in turn until one succeeds; the last
    /// error when none does.
    pub async fn any<T, F, Fut>(&self, op: F) -> anyhow::Result<T>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        let mut last = None;
        for (c, url) in self.clients.iter().zip(&self.urls) {
            match op(c.clone()).await {
                Ok(v) => return Ok(v),
                // The actuator's own rule: no answer, or k3s's 503.
                Err(e) if kubeaccess::candidates::moves_on(&e) => {
                    tracing::debug!("{url}: {e}; asking the next API server");
                    last = Some(e);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(last.map_or_else(|| anyhow::anyhow!("no API server"), Into::into))
    }

    /// Merges labels, annotations and `spec` into a Node (`null` removes),
    /// with this access's credential.
    pub async fn patch_node(&self, node: &str, patch: &serde_json::Value) -> anyhow::Result<()> {
        self.any(|c| {
            let (n, p) = (node.to_string(), patch.clone());
            async move {
                kube::Api::<k8s_openapi::api::core::v1::Node>::all(c)
                    .patch(
                        &n,
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(&p),
                    )
                    .await
            }
        })
        .await
        .map(drop)
    }
}
