//! [`ControlPlane`]: one etcd and one or more kube-apiservers over it, on 127.0.0.1.

use std::{
    net::{IpAddr, Ipv4Addr},
    path::Path,
    time::Duration,
};

use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::{Namespace, ServiceAccount},
};
use kube::{
    Api, Client,
    api::{DynamicObject, Patch, PatchParams, PostParams},
    core::GroupVersionKind,
    discovery::Scope,
};
use secrecy::SecretString;

use crate::{
    ApiServer, ApiServerOptions, Etcd, EtcdOptions, Pki, TokenAuthFile, apiserver, etcd, pki,
};

/// The field manager of [`ControlPlane::apply_yaml`].
pub const FIELD_MANAGER: &str = "testcp";

/// Errors of [`ControlPlane`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating the temp dir, the token file or a port failed.
    #[error("preparing the plane: {0}")]
    Io(#[from] std::io::Error),
    /// A server binary is missing.
    #[error(transparent)]
    Binary(#[from] crate::binaries::Error),
    /// Generating the PKI failed.
    #[error(transparent)]
    Pki(#[from] pki::Error),
    /// etcd did not start.
    #[error(transparent)]
    Etcd(#[from] etcd::Error),
    /// A kube-apiserver did not start.
    #[error(transparent)]
    ApiServer(#[from] apiserver::Error),
    /// No API server has that index.
    #[error("no API server {0}; the plane has {1}")]
    NoSuchApiServer(usize, usize),
    /// Namespace `default` did not appear within 30 s of the first API server being ready.
    #[error("namespace default was not created within 30 s")]
    NoDefaultNamespace,
    /// Every API server is stopped.
    #[error("no API server is running")]
    NoneRunning,
    /// A request to the API failed.
    #[error("{context}: {source}")]
    Kube {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A manifest could not be read or parsed.
    #[error("manifest {context}: {message}")]
    Manifest {
        /// The file or document.
        context: String,
        /// What is wrong.
        message: String,
    },
}

/// A real control plane for one test: etcd and kube-apiserver on 127.0.0.1
/// with free ports, a fresh PKI and admin token, all in a temp dir. Dropping it
/// kills every process and deletes the dir.
#[derive(Debug)]
pub struct ControlPlane {
    // Field order is drop order: API servers, then etcd, then the dir they use.
    apiservers: Vec<ApiServer>,
    etcd: Etcd,
    tokens: TokenAuthFile,
    pki: Pki,
    /// Appended to every API server's flags ([`ControlPlane::start_with_apiserver_args`]).
    apiserver_args: Vec<String>,
    dir: tempfile::TempDir,
}

impl ControlPlane {
    /// Starts etcd and one kube-apiserver and waits until both serve.
    ///
    /// # Errors
    /// If a binary is missing (the error says to run
    /// `scripts/build-kube-apiserver.sh`) or a server does not start.
    pub async fn start() -> Result<Self, Error> {
        Self::start_with_apiserver_args(Vec::new()).await
    }

    /// As [`ControlPlane::start`], with `args` appended to the flags of
    /// every kube-apiserver of the plane (e.g. an audit policy and log, for
    /// a benchmark that counts a client's requests).
    ///
    /// # Errors
    /// As for [`ControlPlane::start`].
    pub async fn start_with_apiserver_args(args: Vec<String>) -> Result<Self, Error> {
        // Fail before starting anything when the binary has not been built.
        crate::binaries::kube_apiserver()?;
        let dir = tempfile::Builder::new().prefix("testcp-").tempdir()?;
        let tokens = TokenAuthFile::generate(dir.path())?;
        // RSA key generation takes 0.2-3 s in a debug build: overlap it with etcd's start.
        let pki_dir = dir.path().join("pki");
        let pki = tokio::task::spawn_blocking(move || Pki::generate(&pki_dir, &[]));
        let etcd = match Etcd::start(EtcdOptions::new("etcd", LOCALHOST, dir.path())?).await {
            // Another process took a port between our choosing and etcd binding it.
            Err(e) if e.is_address_in_use() => {
                Etcd::start(EtcdOptions::new("etcd-retry", LOCALHOST, dir.path())?).await?
            }
            result => result?,
        };
        let pki = pki.await.expect("PKI generation does not panic")?;
        let mut plane = Self {
            apiservers: Vec::new(),
            etcd,
            tokens,
            pki,
            apiserver_args: args,
            dir,
        };
        plane.add_apiserver().await?;
        plane.wait_for_default_namespace().await?;
        Ok(plane)
    }

    /// `/readyz` can pass a moment before the system-namespaces controller has
    /// created `default`; tests create objects there first thing.
    async fn wait_for_default_namespace(&self) -> Result<(), Error> {
        let clock = clock::Clock::system();
        let namespaces: Api<Namespace> = Api::all(self.admin_client()?);
        let started = clock.now();
        loop {
            match namespaces.get_opt("default").await {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if clock.since(started) < Duration::from_secs(30) => {}
                Ok(None) => return Err(Error::NoDefaultNamespace),
                Err(source) => {
                    return Err(Error::Kube {
                        context: "reading namespace default".into(),
                        source,
                    });
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Starts one more kube-apiserver on 127.0.0.1 over the same etcd and
    /// returns its index. It shares the CA, serving certificate, admin token
    /// and service-account key with the others.
    ///
    /// # Errors
    /// If it does not start.
    pub async fn add_apiserver(&mut self) -> Result<usize, Error> {
        let index = self.apiservers.len();
        let log = self.dir.path().join(format!("apiserver-{index}.log"));
        let mut options = ApiServerOptions::new(
            LOCALHOST,
            vec![self.etcd.client_url().to_owned()],
            &self.pki,
            &self.tokens,
            log,
        );
        options.extra_args.clone_from(&self.apiserver_args);
        self.apiservers.push(ApiServer::start(options).await?);
        Ok(index)
    }

    /// Stops API server `index` with SIGTERM; its port then refuses connections.
    ///
    /// # Errors
    /// [`Error::NoSuchApiServer`].
    pub async fn stop_apiserver(&mut self, index: usize) -> Result<(), Error> {
        self.apiserver_mut(index)?.stop().await;
        Ok(())
    }

    /// Starts API server `index` again on its old port (stopping it first if it runs).
    ///
    /// # Errors
    /// [`Error::NoSuchApiServer`], or if it does not start.
    pub async fn start_apiserver(&mut self, index: usize) -> Result<(), Error> {
        self.apiserver_mut(index)?.restart().await?;
        Ok(())
    }

    /// The API servers, in the order they were added.
    pub fn apiservers(&self) -> &[ApiServer] {
        &self.apiservers
    }

    /// API server `index`, for stopping, killing or reading its log.
    ///
    /// # Errors
    /// [`Error::NoSuchApiServer`].
    pub fn apiserver_mut(&mut self, index: usize) -> Result<&mut ApiServer, Error> {
        let count = self.apiservers.len();
        self.apiservers
            .get_mut(index)
            .ok_or(Error::NoSuchApiServer(index, count))
    }

    /// The URLs of all API servers, running or not, in order.
    pub fn urls(&self) -> Vec<String> {
        self.apiservers.iter().map(ApiServer::url).collect()
    }

    /// Writes a kubeconfig at `path` (mode 0600: it holds the token) for
    /// the plane's first API server, trusting its CA file and sending
    /// `token` inline.
    pub fn write_kubeconfig(
        &self,
        path: &std::path::Path,
        token: &SecretString,
    ) -> std::io::Result<()> {
        use secrecy::ExposeSecret;
        use std::{io::Write, os::unix::fs::OpenOptionsExt};
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: t\n  context: {{cluster: t, user: u}}\ncurrent-context: t\n",
            self.urls()[0],
            self.ca_file().display(),
            token.expose_secret()
        );
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(path)?;
        f.write_all(text.as_bytes())
    }

    /// The CA file that verifies every API server of the plane.
    pub fn ca_file(&self) -> std::path::PathBuf {
        self.pki.ca_file()
    }

    /// The PKI.
    pub fn pki(&self) -> &Pki {
        &self.pki
    }

    /// The etcd member, e.g. to kill it or read its URL.
    pub fn etcd(&mut self) -> &mut Etcd {
        &mut self.etcd
    }

    /// The temp dir holding PKI, token file, etcd data and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The admin token (user `testcp-admin` in `system:masters`).
    pub fn admin_token(&self) -> &SecretString {
        self.tokens.admin_token()
    }

    /// A client configuration for API server `index`, trusting the plane's CA,
    /// authenticating with `token` (anonymous if `None`).
    ///
    /// # Errors
    /// [`Error::NoSuchApiServer`].
    pub fn client_config(
        &self,
        index: usize,
        token: Option<&SecretString>,
    ) -> Result<kube::Config, Error> {
        let server = self
            .apiservers
            .get(index)
            .ok_or(Error::NoSuchApiServer(index, self.apiservers.len()))?;
        Ok(self.pki.client_config(&server.url(), token))
    }

    /// A client of the first API server not stopped, as the admin.
    ///
    /// # Errors
    /// [`Error::NoneRunning`], or if the client cannot be built.
    pub fn admin_client(&self) -> Result<Client, Error> {
        let token = self.tokens.admin_token().clone();
        self.client_for_token(&token)
    }

    /// A client of the first API server not stopped, as the kubelet of Node
    /// `node` (user `system:node:<node>` in `system:nodes`, see
    /// [`crate::kubelet`]): what the Node authorizer and NodeRestriction let
    /// a real kubelet do, and no more. The Node need not exist.
    ///
    /// # Errors
    /// [`Error::NoneRunning`], or if the client cannot be built.
    pub fn kubelet_client(&self, node: &str) -> Result<Client, Error> {
        let server = self
            .apiservers
            .iter()
            .find(|s| !s.is_stopped())
            .ok_or(Error::NoneRunning)?;
        let mut config = self
            .pki
            .client_config(&server.url(), Some(self.tokens.admin_token()));
        crate::kubelet::impersonate(&mut config, node);
        Client::try_from(config).map_err(|source| Error::Kube {
            context: "building a client".into(),
            source,
        })
    }

    /// A client of the first API server not stopped, authenticating with `token`.
    ///
    /// # Errors
    /// [`Error::NoneRunning`], or if the client cannot be built.
    pub fn client_for_token(&self, token: &SecretString) -> Result<Client, Error> {
        let server = self
            .apiservers
            .iter()
            .find(|s| !s.is_stopped())
            .ok_or(Error::NoneRunning)?;
        let config = self.pki.client_config(&server.url(), Some(token));
        Client::try_from(config).map_err(|source| Error::Kube {
            context: "building a client".into(),
            source,
        })
    }

    /// A token for ServiceAccount `namespace/name` from the TokenRequest API
    /// (the ServiceAccount must exist), valid for the API's default of one hour.
    ///
    /// # Errors
    /// If the request fails, e.g. with 404 for a missing ServiceAccount.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<SecretString, Error> {
        let api: Api<ServiceAccount> = Api::namespaced(self.admin_client()?, namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec::default(),
            ..TokenRequest::default()
        };
        let response = api
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|source| Error::Kube {
                context: format!("requesting a token for serviceaccount {namespace}/{name}"),
                source,
            })?;
        let token = response.status.map(|s| s.token).unwrap_or_default();
        Ok(SecretString::from(token))
    }

    /// Server-side applies every document of the YAML (or JSON) file at `path`
    /// as the admin; see [`ControlPlane::apply_yaml`].
    ///
    /// # Errors
    /// As for [`ControlPlane::apply_yaml`], or if the file cannot be read.
    pub async fn apply_yaml_file(&self, path: &Path) -> Result<Vec<DynamicObject>, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Manifest {
            context: path.display().to_string(),
            message: e.to_string(),
        })?;
        self.apply_yaml(&text).await
    }

    /// Server-side applies every document of a multi-document YAML manifest
    /// in order, as field manager [`FIELD_MANAGER`] with `force`, and returns
    /// the objects as stored. Namespaced objects without a namespace go to
    /// `default`. Each document's kind is resolved by discovery, so any
    /// built-in kind works; a CRD must be established before its objects.
    ///
    /// # Errors
    /// [`Error::Manifest`] for a document that is not an object with
    /// `apiVersion`, `kind` and `metadata.name`; [`Error::Kube`] for a refused apply.
    pub async fn apply_yaml(&self, yaml: &str) -> Result<Vec<DynamicObject>, Error> {
        apply_manifest(&self.admin_client()?, yaml).await
    }

    /// Server-side applies every document of `yaml` as a dry run (the API
    /// server admits, validates and defaults each, and stores nothing),
    /// but for its Namespaces, which are applied for real first: a dry
    /// run of an object in a namespace that does not exist is refused.
    /// Returns the objects as the API server would store them.
    ///
    /// # Errors
    /// As [`ControlPlane::apply_yaml`].
    pub async fn dry_run_yaml(&self, yaml: &str) -> Result<Vec<DynamicObject>, Error> {
        let client = self.admin_client()?;
        let documents = documents(yaml)?;
        for (index, d) in documents.iter().enumerate() {
            if d["kind"] == "Namespace" {
                apply_one(&client, index, d.clone(), false).await?;
            }
        }
        let mut applied = Vec::with_capacity(documents.len());
        for (index, document) in documents.into_iter().enumerate() {
            applied.push(apply_one(&client, index, document, true).await?);
        }
        Ok(applied)
    }
}

/// The documents of a multi-document YAML manifest.
fn documents(yaml: &str) -> Result<Vec<serde_json::Value>, Error> {
    serde_saphyr::from_multiple(yaml).map_err(|e| Error::Manifest {
        context: "parsing YAML".into(),
        message: e.to_string(),
    })
}

/// Server-side applies one manifest document.
/// Server-side applies every document of a multi-document YAML manifest
/// with `client`, as [`ControlPlane::apply_yaml`] does (a lab applies its
/// manifests to API servers it runs itself).
///
/// # Errors
/// A document that does not parse or resolve, or the API's refusal.
pub async fn apply_manifest(client: &Client, yaml: &str) -> Result<Vec<DynamicObject>, Error> {
    let documents = documents(yaml)?;
    let mut applied = Vec::with_capacity(documents.len());
    for (index, document) in documents.into_iter().enumerate() {
        applied.push(apply_one(client, index, document, false).await?);
    }
    Ok(applied)
}

async fn apply_one(
    client: &Client,
    index: usize,
    document: serde_json::Value,
    dry_run: bool,
) -> Result<DynamicObject, Error> {
    let bad = |message: &str| Error::Manifest {
        context: format!("document {index}"),
        message: message.to_owned(),
    };
    let object: DynamicObject =
        serde_json::from_value(document).map_err(|e| bad(&e.to_string()))?;
    let types = object
        .types
        .as_ref()
        .ok_or_else(|| bad("no apiVersion or kind"))?;
    let name = object
        .metadata
        .name
        .clone()
        .ok_or_else(|| bad("no metadata.name"))?;
    let (group, version) = types
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", &types.api_version));
    let gvk = GroupVersionKind::gvk(group, version, &types.kind);
    let context = || format!("applying {} {name} (document {index})", types.kind);
    let (resource, capabilities) =
        kube::discovery::pinned_kind(client, &gvk)
            .await
            .map_err(|source| Error::Kube {
                context: context(),
                source,
            })?;
    let api: Api<DynamicObject> = match capabilities.scope {
        Scope::Namespaced => {
            let namespace = object.metadata.namespace.as_deref().unwrap_or("default");
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    params.dry_run = dry_run;
    api.patch(&name, &params, &Patch::Apply(&object))
        .await
        .map_err(|source| Error::Kube {
            context: context(),
            source,
        })
}

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
