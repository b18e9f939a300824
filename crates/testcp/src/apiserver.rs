//! One kube-apiserver over etcd, serving HTTPS on a loopback address.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    Pki, TokenAuthFile, binaries,
    process::{Guarded, free_port},
};

/// How long [`ApiServer::start`] waits for `/readyz`. A cold start on 2 cores
/// takes a few seconds; the margin covers a loaded CI machine.
pub const START_TIMEOUT: Duration = Duration::from_secs(90);

/// The service-account issuer every API server of a plane shares, so a token
/// minted by one is accepted by the others.
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Errors starting a kube-apiserver.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kube-apiserver binary was not found.
    #[error(transparent)]
    Binary(#[from] binaries::Error),
    /// Picking a port or spawning failed.
    #[error("starting kube-apiserver on {bind}: {source}")]
    Spawn {
        /// The bind address.
        bind: IpAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// kube-apiserver exited while we waited for it; the log usually says why.
    #[error("kube-apiserver on {url} exited with {status} while starting; log tail:\n{log_tail}")]
    Exited {
        /// Its URL.
        url: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The last lines of its log.
        log_tail: String,
    },
    /// `/readyz` did not answer `ok` in time.
    #[error(
        "kube-apiserver on {url} not ready after {after:?} (last: {last}); log tail:\n{log_tail}"
    )]
    Timeout {
        /// Its URL.
        url: String,
        /// How long we waited.
        after: Duration,
        /// The last probe result.
        last: String,
        /// The last lines of its log.
        log_tail: String,
    },
    /// The readiness client could not be built.
    #[error("building a client for {url}: {source}")]
    Client {
        /// Its URL.
        url: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Whether the cause was a port taken between choosing it and binding it.
    pub fn is_address_in_use(&self) -> bool {
        match self {
            Self::Exited { log_tail, .. } | Self::Timeout { log_tail, .. } => {
                log_tail.contains("address already in use")
            }
            _ => false,
        }
    }
}

/// The settings of one kube-apiserver. Fields are public so a lab can adjust them.
#[derive(Debug, Clone)]
pub struct ApiServerOptions {
    /// `--bind-address` and `--advertise-address`; must be in the serving certificate.
    pub bind_address: IpAddr,
    /// `--secure-port`; `None` picks a free port at start (retrying once if it
    /// is taken before kube-apiserver binds it). Restarts keep the port.
    pub port: Option<u16>,
    /// `--etcd-servers`, client URLs of etcd members.
    pub etcd_servers: Vec<String>,
    /// `--etcd-prefix`; planes sharing one etcd need distinct prefixes.
    pub etcd_prefix: String,
    /// Serving certificate and service-account key.
    pub pki: Pki,
    /// `--token-auth-file`.
    pub token_auth_file: PathBuf,
    /// `--service-account-issuer`.
    pub service_account_issuer: String,
    /// Where stdout and stderr go (appended across restarts).
    pub log_file: PathBuf,
    /// More flags, appended last (a repeated flag overrides an earlier one).
    pub extra_args: Vec<String>,
}

impl ApiServerOptions {
    /// Options for an API server on `bind_address`, a free port, over
    /// `etcd_servers` with the default prefix `/registry`.
    pub fn new(
        bind_address: IpAddr,
        etcd_servers: Vec<String>,
        pki: &Pki,
        tokens: &TokenAuthFile,
        log_file: PathBuf,
    ) -> Self {
        Self {
            bind_address,
            port: None,
            etcd_servers,
            etcd_prefix: "/registry".to_owned(),
            pki: pki.clone(),
            token_auth_file: tokens.path().to_owned(),
            service_account_issuer: SERVICE_ACCOUNT_ISSUER.to_owned(),
            log_file,
            extra_args: Vec::new(),
        }
    }

    fn args(&self, port: u16) -> Vec<String> {
        let pki = &self.pki;
        let mut args = vec![
            format!("--bind-address={}", self.bind_address),
            format!("--secure-port={port}"),
            // A loopback advertise address is only accepted with no endpoint
            // reconciler: nothing may publish 127.x as the `kubernetes` Service's endpoint.
            format!("--advertise-address={}", self.bind_address),
            "--endpoint-reconciler-type=none".to_owned(),
            format!("--etcd-servers={}", self.etcd_servers.join(",")),
            format!("--etcd-prefix={}", self.etcd_prefix),
            format!("--tls-cert-file={}", pki.serving_cert_file().display()),
            format!(
                "--tls-private-key-file={}",
                pki.serving_key_file().display()
            ),
            format!("--token-auth-file={}", self.token_auth_file.display()),
            // The Node authorizer and NodeRestriction, as on k3s and every
            // kubeadm cluster: a kubelet's identity (`crate::kubelet`) may then
            // do what a real kubelet may, and no more, so tests can show what
            // a compromised host can and cannot write.
            "--authorization-mode=Node,RBAC".to_owned(),
            "--enable-admission-plugins=NodeRestriction".to_owned(),
            format!("--service-account-issuer={}", self.service_account_issuer),
            format!(
                "--service-account-key-file={}",
                pki.service_account_key_file().display()
            ),
            format!(
                "--service-account-signing-key-file={}",
                pki.service_account_key_file().display()
            ),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            // No controller-manager creates `default` ServiceAccounts, so pods would be refused.
            "--disable-admission-plugins=ServiceAccount".to_owned(),
            // Saves start time and a dozen objects; tests don't need fairness.
            "--enable-priority-and-fairness=false".to_owned(),
        ];
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

/// A running (or stopped) kube-apiserver. Dropping it kills the process.
#[derive(Debug)]
pub struct ApiServer {
    options: ApiServerOptions,
    port: u16,
    process: Option<Guarded>,
}

impl ApiServer {
    /// Starts kube-apiserver and waits until anonymous `/readyz` answers `ok`
    /// over TLS verified with the plane's CA.
    ///
    /// # Errors
    /// If the binary is missing, the process exits, or it is not ready within
    /// [`START_TIMEOUT`]; errors carry the log tail.
    pub async fn start(options: ApiServerOptions) -> Result<Self, Error> {
        let bind = options.bind_address;
        let spawn_error = |source| Error::Spawn { bind, source };
        let port = match options.port {
            Some(port) => port,
            None => free_port(options.bind_address).map_err(spawn_error)?,
        };
        let mut server = Self {
            options,
            port,
            process: None,
        };
        match server.run().await {
            Err(e) if e.is_address_in_use() && server.options.port.is_none() => {
                server.port = free_port(bind).map_err(spawn_error)?;
                server.run().await?;
            }
            result => result?,
        }
        Ok(server)
    }

    async fn run(&mut self) -> Result<(), Error> {
        let binary = binaries::kube_apiserver()?;
        let args = self.options.args(self.port);
        let process = Guarded::spawn(&binary, &args, &self.options.log_file).map_err(|source| {
            Error::Spawn {
                bind: self.options.bind_address,
                source,
            }
        })?;
        self.process = Some(process);
        let ready = self.wait_ready(START_TIMEOUT).await;
        if ready.is_err() {
            self.kill();
        }
        ready
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<(), Error> {
        let clock = clock::Clock::system();
        let url = self.url();
        let mut config = self.options.pki.client_config(&url, None);
        config.default_retry = false;
        config.connect_timeout = Some(Duration::from_secs(2));
        config.read_timeout = Some(Duration::from_secs(5));
        let client = kube::Client::try_from(config).map_err(|source| Error::Client {
            url: url.clone(),
            source,
        })?;
        let started = clock.now();
        let mut last;
        loop {
            let Some(process) = self.process.as_mut() else {
                unreachable!("wait_ready runs right after a spawn")
            };
            if let Some(status) = process.exited() {
                self.process = None;
                let log_tail = crate::process::log_tail(&self.options.log_file, 40);
                return Err(Error::Exited {
                    url,
                    status,
                    log_tail,
                });
            }
            let probe = http::Request::get("/readyz")
                .body(Vec::new())
                .expect("a static request is valid");
            match client.request_text(probe).await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                Ok(body) => last = body,
                Err(e) => last = e.to_string(),
            }
            if clock.since(started) > timeout {
                let log_tail = process.log_tail(40);
                return Err(Error::Timeout {
                    url,
                    after: timeout,
                    last,
                    log_tail,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `https://<bind address>:<port>`.
    pub fn url(&self) -> String {
        format!(
            "https://{}:{}",
            crate::host(self.options.bind_address),
            self.port
        )
    }

    /// The port it serves on (kept across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The options it runs with.
    pub fn options(&self) -> &ApiServerOptions {
        &self.options
    }

    /// Its log file.
    pub fn log_file(&self) -> &Path {
        &self.options.log_file
    }

    /// Whether it was stopped or killed through this handle (or failed to restart).
    pub fn is_stopped(&self) -> bool {
        self.process.is_none()
    }

    /// Whether the process is running (as far as its guard knows).
    pub fn is_running(&mut self) -> bool {
        self.process.as_mut().is_some_and(|p| p.exited().is_none())
    }

    /// The guard's process id, while running; kube-apiserver is its child.
    pub fn guard_pid(&self) -> Option<u32> {
        self.process.as_ref().map(Guarded::guard_pid)
    }

    /// Stops it with SIGTERM (a graceful shutdown) and waits for it to exit.
    pub async fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.stop().await;
        }
    }

    /// Kills it with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Stops it if it runs, then starts it again on the same address and port.
    ///
    /// # Errors
    /// As for [`ApiServer::start`]; there is no retry on another port.
    pub async fn restart(&mut self) -> Result<(), Error> {
        self.stop().await;
        self.run().await
    }
}
