//! One etcd member: the real binary from `etcd-bin-vendored`, plain HTTP on
//! loopback, or (with [`EtcdOptions::tls`]) TLS with client certificates on
//! its client and peer URLs, as k3s runs it; `/health` is then asked of the
//! plain-HTTP metrics URL, as k3s's own probes do.
//!
//! A single-member plane uses [`EtcdOptions::new`] as it is. A multi-member
//! cluster gives every member the same `initial_cluster` (built from
//! [`EtcdOptions::peer_entry`]), or starts a member added with `member add`
//! (e.g. as a learner) with [`ClusterState::Existing`].

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    binaries,
    process::{Guarded, free_port},
};

/// How long [`Etcd::start`] waits for the member to report healthy.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Errors starting or probing an etcd member.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The etcd binary was not found.
    #[error(transparent)]
    Binary(#[from] binaries::Error),
    /// Picking a port, creating the data dir or spawning failed.
    #[error("starting etcd {name}: {source}")]
    Spawn {
        /// The member name.
        name: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// etcd exited while we waited for it; the log usually says why.
    #[error("etcd {name} exited with {status} while starting; log tail:\n{log_tail}")]
    Exited {
        /// The member name.
        name: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The last lines of its log.
        log_tail: String,
    },
    /// etcd did not report healthy in time.
    #[error(
        "etcd {name} not healthy at {url} after {after:?} (last: {last}); log tail:\n{log_tail}"
    )]
    Timeout {
        /// The member name.
        name: String,
        /// The health URL probed.
        url: String,
        /// How long we waited.
        after: Duration,
        /// The last probe result.
        last: String,
        /// The last lines of its log.
        log_tail: String,
    },
    /// The member is stopped.
    #[error("etcd {0} is not running")]
    NotRunning(String),
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

/// `--initial-cluster-state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterState {
    /// Bootstrapping a new cluster together with the other `initial_cluster` members.
    New,
    /// Joining a cluster that already lists this member (after `member add`).
    Existing,
}

/// What [`Etcd::wait_healthy`] asks `/health` for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// `/health`: a leader and a linearizable read, so a quorum of voters. In
    /// etcd 3.7 a caught-up learner passes it too.
    Linearizable,
    /// `/health?serializable=true`: a leader and a local read, no quorum round
    /// trip; the first sign a new member (or learner) has joined.
    Serializable,
}

/// TLS for a member's client and peer URLs (`https://` URLs then), every
/// side required to present a certificate of the CA it trusts, as k3s sets
/// etcd up (`--client-cert-auth`, `--peer-client-cert-auth`).
#[derive(Debug, Clone)]
pub struct EtcdTls {
    /// `--trusted-ca-file`: the CA of clients' certificates.
    pub client_ca: PathBuf,
    /// `--cert-file` (serving clients).
    pub cert: PathBuf,
    /// `--key-file`.
    pub key: PathBuf,
    /// `--peer-trusted-ca-file`.
    pub peer_ca: PathBuf,
    /// `--peer-cert-file` (serving and dialling peers).
    pub peer_cert: PathBuf,
    /// `--peer-key-file`.
    pub peer_key: PathBuf,
}

/// The settings of one member. Fields are public so a lab can assemble a cluster.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// `--name`.
    pub name: String,
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// `--listen-client-urls` and `--advertise-client-urls`, e.g. `http://127.0.0.1:2379`.
    pub client_url: String,
    /// More `--listen-client-urls` beside `client_url`, not advertised (k3s
    /// also listens on `https://127.0.0.1:2379`, where an operator's
    /// `etcdctl` on the server finds it).
    pub also_listen_client_urls: Vec<String>,
    /// `--listen-peer-urls` and `--initial-advertise-peer-urls`.
    pub peer_url: String,
    /// `--listen-metrics-urls`.
    pub metrics_url: String,
    /// `--initial-cluster`, `name=peer_url,…`.
    pub initial_cluster: String,
    /// `--initial-cluster-state`.
    pub initial_cluster_state: ClusterState,
    /// TLS on the client and peer URLs; `None`: plain HTTP.
    pub tls: Option<EtcdTls>,
    /// Where stdout and stderr go (appended across restarts).
    pub log_file: PathBuf,
    /// More flags. [`EtcdOptions::new`] puts `--unsafe-no-fsync` here: a test
    /// cluster's data need not survive a power cut, and fsync dominates etcd's
    /// latency on slow disks.
    pub extra_args: Vec<String>,
}

impl EtcdOptions {
    /// A single-member cluster named `name` on `ip`, with three free ports and
    /// its data dir and log under `dir`.
    ///
    /// # Errors
    /// If no port can be bound on `ip`.
    pub fn new(name: &str, ip: IpAddr, dir: &Path) -> std::io::Result<Self> {
        let url = |port: u16| format!("http://{}:{port}", crate::host(ip));
        let peer_url = url(free_port(ip)?);
        Ok(Self {
            name: name.to_owned(),
            data_dir: dir.join(format!("etcd-{name}")),
            client_url: url(free_port(ip)?),
            also_listen_client_urls: Vec::new(),
            initial_cluster: format!("{name}={peer_url}"),
            peer_url,
            metrics_url: url(free_port(ip)?),
            initial_cluster_state: ClusterState::New,
            tls: None,
            log_file: dir.join(format!("etcd-{name}.log")),
            extra_args: vec!["--unsafe-no-fsync".to_owned()],
        })
    }

    /// This member's `name=peer_url` entry for `initial_cluster`.
    pub fn peer_entry(&self) -> String {
        format!("{}={}", self.name, self.peer_url)
    }

    fn args(&self) -> Vec<String> {
        let state = match self.initial_cluster_state {
            ClusterState::New => "new",
            ClusterState::Existing => "existing",
        };
        let mut args = vec![
            format!("--name={}", self.name),
            format!("--data-dir={}", self.data_dir.display()),
            format!(
                "--listen-client-urls={}",
                std::iter::once(&self.client_url)
                    .chain(&self.also_listen_client_urls)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            format!("--advertise-client-urls={}", self.client_url),
            format!("--listen-peer-urls={}", self.peer_url),
            format!("--initial-advertise-peer-urls={}", self.peer_url),
            format!("--listen-metrics-urls={}", self.metrics_url),
            format!("--initial-cluster={}", self.initial_cluster),
            format!("--initial-cluster-state={state}"),
        ];
        if let Some(t) = &self.tls {
            args.extend([
                "--client-cert-auth".to_owned(),
                format!("--trusted-ca-file={}", t.client_ca.display()),
                format!("--cert-file={}", t.cert.display()),
                format!("--key-file={}", t.key.display()),
                "--peer-client-cert-auth".to_owned(),
                format!("--peer-trusted-ca-file={}", t.peer_ca.display()),
                format!("--peer-cert-file={}", t.peer_cert.display()),
                format!("--peer-key-file={}", t.peer_key.display()),
            ]);
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

/// A running (or stopped) etcd member. Dropping it kills the process.
#[derive(Debug)]
pub struct Etcd {
    options: EtcdOptions,
    process: Option<Guarded>,
}

impl Etcd {
    /// Starts the member and waits until `/health` passes ([`Probe::Linearizable`]).
    ///
    /// # Errors
    /// If etcd cannot be spawned, exits, or is not healthy within [`START_TIMEOUT`].
    pub async fn start(options: EtcdOptions) -> Result<Self, Error> {
        let mut etcd = Self::spawn(options)?;
        etcd.wait_healthy(Probe::Linearizable, START_TIMEOUT)
            .await?;
        Ok(etcd)
    }

    /// Starts the member without waiting: members of a new multi-member cluster
    /// only become healthy once a quorum of them runs.
    ///
    /// # Errors
    /// If etcd cannot be found or spawned.
    pub fn spawn(options: EtcdOptions) -> Result<Self, Error> {
        let mut etcd = Self {
            options,
            process: None,
        };
        etcd.spawn_process()?;
        Ok(etcd)
    }

    fn spawn_process(&mut self) -> Result<(), Error> {
        let spawn_error = |source| Error::Spawn {
            name: self.options.name.clone(),
            source,
        };
        std::fs::create_dir_all(&self.options.data_dir).map_err(spawn_error)?;
        // etcd refuses a data dir that others can read.
        std::fs::set_permissions(
            &self.options.data_dir,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .map_err(spawn_error)?;
        let process = Guarded::spawn(
            &binaries::etcd()?,
            self.options.args(),
            &self.options.log_file,
        )
        .map_err(spawn_error)?;
        self.process = Some(process);
        Ok(())
    }

    /// Polls `/health` until it reports healthy, the process exits, or `timeout` passes.
    ///
    /// # Errors
    /// [`Error::Exited`] or [`Error::Timeout`], both with the log tail.
    pub async fn wait_healthy(&mut self, probe: Probe, timeout: Duration) -> Result<(), Error> {
        let clock = clock::Clock::system();
        // Over TLS the client URL wants a certificate; the metrics URL
        // answers `/health` in plain HTTP.
        let base = match self.options.tls {
            Some(_) => &self.options.metrics_url,
            None => &self.options.client_url,
        };
        let url = match probe {
            Probe::Linearizable => format!("{base}/health"),
            Probe::Serializable => format!("{base}/health?serializable=true"),
        };
        let name = &self.options.name;
        let started = clock.now();
        let mut last;
        loop {
            let process = self
                .process
                .as_mut()
                .ok_or_else(|| Error::NotRunning(name.clone()))?;
            // The guard exits when etcd does (bad flag, port taken, data dir refused).
            if let Some(status) = process.exited() {
                return Err(Error::Exited {
                    name: name.clone(),
                    status,
                    log_tail: process.log_tail(30),
                });
            }
            match crate::plain_http::request(&url, None).await {
                Ok(r) if r.status == 200 && r.body.contains(r#""health":"true""#) => return Ok(()),
                Ok(r) => last = format!("{} {}", r.status, r.body.trim()),
                Err(e) => last = e.to_string(),
            }
            if clock.since(started) > timeout {
                let log_tail = process.log_tail(30);
                return Err(Error::Timeout {
                    name: name.clone(),
                    url,
                    after: timeout,
                    last,
                    log_tail,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The options it runs with.
    pub fn options(&self) -> &EtcdOptions {
        &self.options
    }

    /// The client URL, for `--etcd-servers` and etcd clients.
    pub fn client_url(&self) -> &str {
        &self.options.client_url
    }

    /// Whether the process is running (as far as its guard knows).
    pub fn is_running(&mut self) -> bool {
        self.process.as_mut().is_some_and(|p| p.exited().is_none())
    }

    /// The guard's process id, while running; the etcd process is its child.
    pub fn guard_pid(&self) -> Option<u32> {
        self.process.as_ref().map(Guarded::guard_pid)
    }

    /// Stops the member with SIGTERM and waits for it to exit.
    pub async fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.stop().await;
        }
    }

    /// Kills the member with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Stops the member if it runs, starts it again with the same options and
    /// data dir, and waits for `probe`. A restarted member rejoins by its data
    /// dir; the initial-cluster flags are then ignored by etcd.
    ///
    /// # Errors
    /// As for [`Etcd::start`].
    pub async fn restart(&mut self, probe: Probe) -> Result<(), Error> {
        self.stop().await;
        self.spawn_process()?;
        self.wait_healthy(probe, START_TIMEOUT).await
    }
}

/// A cluster of voters named `names` on `ip` (plain HTTP), each on ports
/// picked free, under `dir`, once every member serves a linearizable read.
/// A port taken meanwhile by another test is tried again with new ports
/// (up to three times).
///
/// # Errors
/// A member that does not start, or does not serve within 120 s.
pub async fn cluster(dir: &Path, ip: IpAddr, names: &[&str]) -> Result<Vec<Etcd>, Error> {
    let mut attempt = 0;
    loop {
        let sub = dir.join(format!("try-{attempt}"));
        let mut opts = Vec::new();
        for n in names {
            opts.push(
                EtcdOptions::new(n, ip, &sub).map_err(|source| Error::Spawn {
                    name: (*n).to_owned(),
                    source,
                })?,
            );
        }
        let initial: Vec<String> = opts.iter().map(EtcdOptions::peer_entry).collect();
        for o in &mut opts {
            o.initial_cluster = initial.join(",");
            o.initial_cluster_state = ClusterState::New;
        }
        let mut members = Vec::new();
        for o in opts {
            members.push(Etcd::spawn(o)?);
        }
        let mut retry = false;
        for m in &mut members {
            match m
                .wait_healthy(Probe::Linearizable, Duration::from_secs(120))
                .await
            {
                Ok(()) => {}
                Err(e) if e.is_address_in_use() && attempt < 3 => retry = true,
                Err(e) => return Err(e),
            }
        }
        if !retry {
            return Ok(members);
        }
        attempt += 1;
    }
}

/// Adds a learner with `peer_url` through the member at `client_url` (plain
/// HTTP), and returns its id. etcd adds no member until every voter has
/// been connected a while ("unhealthy cluster"), so it is asked again, as
/// k3s asks, every 500 ms for up to a minute.
///
/// # Panics
/// When etcd cannot be reached or keeps refusing past the minute: a test
/// helper, whose failure is the test's.
pub async fn add_learner(client_url: &str, peer_url: &str) -> u64 {
    let mut c = etcd_client::Client::connect([client_url], None)
        .await
        .expect("etcd reached");
    let mut tries = 0;
    loop {
        match c
            .member_add(
                [peer_url],
                Some(etcd_client::MemberAddOptions::new().with_is_learner()),
            )
            .await
        {
            Ok(a) => return a.member().expect("the member added").id(),
            Err(e) if tries < 120 => {
                tries += 1;
                eprintln!("adding the learner: {e}; again");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("the learner is added: {e}"),
        }
    }
}
