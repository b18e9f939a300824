//! A k3s server's local etcd member, through etcd's client API.
//!
//! k3s runs etcd with TLS on `https://127.0.0.1:2379` and gives its own
//! components a client certificate under `server/tls/etcd/` (`server-ca.crt`,
//! `client.crt`, `client.key`); the actuator reads with the same files, as
//! root, on the host itself. What it reads is etcd's own truth, which the
//! Nodes do not carry: learners (a learner's Node has no etcd metadata),
//! members whose Node is gone, the leader, alarms.
//!
//! Every call is bounded: the connection and each request by
//! [`Endpoint::timeout`], and [`read`] as a whole by twice that. A failure
//! says what was being asked; nothing here changes etcd except
//! [`move_leader`] and [`remove_learner`], each asked for by name.
#![forbid(unsafe_code)]

use std::{path::PathBuf, time::Duration};

use etcd_client::{
    AlarmAction, AlarmOptions, AlarmType, Certificate, Client, ConnectOptions, GetOptions,
    Identity, TlsOptions,
};
use protocol::etcd::{Alarm, EtcdView, Member, MemberId};

/// Where the local member is, and the files to reach it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Its client URL.
    pub url: String,
    /// The CA and the client certificate; `None` for plain HTTP (tests).
    pub tls: Option<TlsFiles>,
    /// The bound of the connection and of each request.
    pub timeout: Duration,
}

/// k3s's client certificate files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA etcd's serving certificate is signed by.
    pub ca: PathBuf,
    /// The client certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

impl Endpoint {
    /// k3s's own: `https://127.0.0.1:2379` with the client certificate under
    /// `<data_dir>/server/tls/etcd/`.
    pub fn k3s(data_dir: &std::path::Path, timeout: Duration) -> Self {
        let tls = data_dir.join("server/tls/etcd");
        Self {
            url: "https://127.0.0.1:2379".into(),
            tls: Some(TlsFiles {
                ca: tls.join("server-ca.crt"),
                cert: tls.join("client.crt"),
                key: tls.join("client.key"),
            }),
            timeout,
        }
    }
}

/// Why etcd could not be read or asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A certificate file could not be read.
    #[error("reading {path}: {source}")]
    Files {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// etcd refused or failed a request.
    #[error("etcd at {url}: {what}: {source}")]
    Etcd {
        /// The endpoint.
        url: String,
        /// What was asked.
        what: &'static str,
        /// The cause.
        #[source]
        source: Box<etcd_client::Error>,
    },
    /// No answer within the bound.
    #[error("etcd at {url}: {what}: no answer within {secs} s")]
    Timeout {
        /// The endpoint.
        url: String,
        /// What was asked.
        what: &'static str,
        /// The bound.
        secs: u64,
    },
    /// The answer was not a view a report may carry.
    #[error("etcd at {url} answered a view that does not check: {source}")]
    Invalid {
        /// The endpoint.
        url: String,
        /// Why.
        #[source]
        source: protocol::etcd::ViewError,
    },
    /// A change asked for does not apply (the target is not a voter, the
    /// member is not a learner).
    #[error("{0}")]
    Refused(String),
}

async fn bounded<T>(
    ep: &Endpoint,
    what: &'static str,
    f: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(ep.timeout, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(source)) => Err(Error::Etcd {
            url: ep.url.clone(),
            what,
            source: Box::new(source),
        }),
        Err(_) => Err(Error::Timeout {
            url: ep.url.clone(),
            what,
            secs: ep.timeout.as_secs(),
        }),
    }
}

async fn connect(ep: &Endpoint) -> Result<Client, Error> {
    let mut opts = ConnectOptions::new()
        .with_connect_timeout(ep.timeout)
        .with_timeout(ep.timeout);
    if let Some(t) = &ep.tls {
        let read = |p: &PathBuf| {
            std::fs::read(p).map_err(|source| Error::Files {
                path: p.clone(),
                source,
            })
        };
        opts = opts.with_tls(
            TlsOptions::new()
                .ca_certificate(Certificate::from_pem(read(&t.ca)?))
                .identity(Identity::from_pem(read(&t.cert)?, read(&t.key)?)),
        );
    }
    bounded(
        ep,
        "connecting",
        Client::connect([ep.url.as_str()], Some(opts)),
    )
    .await
}

/// Reads the local member's view of the cluster at `now` (unix seconds).
/// The health is a linearizable read (what `etcdctl endpoint health` asks):
/// a member that is cut off, has no leader, or is a learner does not serve
/// one, and its view says so rather than failing.
pub async fn read(ep: &Endpoint, now: i64) -> Result<EtcdView, Error> {
    let whole = ep.timeout.saturating_mul(2);
    let url = ep.url.clone();
    match tokio::time::timeout(whole, read_unbounded(ep, now)).await {
        Ok(r) => r,
        Err(_) => Err(Error::Timeout {
            url,
            what: "reading the member's view",
            secs: whole.as_secs(),
        }),
    }
}

async fn read_unbounded(ep: &Endpoint, now: i64) -> Result<EtcdView, Error> {
    let mut c = connect(ep).await?;
    let status = bounded(ep, "asking its status", c.status()).await?;
    let list = bounded(ep, "listing the members", c.member_list()).await?;
    let alarms = bounded(
        ep,
        "listing the alarms",
        c.alarm(AlarmAction::Get, AlarmType::None, None::<AlarmOptions>),
    )
    .await?;
    // A key nobody writes; any answer, even an empty one, proves the read.
    let healthy = bounded(
        ep,
        "a linearizable read",
        c.get("health", Some(GetOptions::new().with_count_only())),
    )
    .await
    .is_ok();
    let header = status.header();
    let member = MemberId(header.map_or(0, |h| h.member_id()));
    let view = EtcdView {
        read_at: now,
        member,
        members: list
            .members()
            .iter()
            .map(|m| Member {
                id: MemberId(m.id()),
                name: m.name().to_string(),
                peer_urls: m.peer_urls().to_vec(),
                client_urls: m.client_urls().to_vec(),
                learner: m.is_learner(),
            })
            .collect(),
        leader: (status.leader() != 0).then_some(MemberId(status.leader())),
        raft_term: status.raft_term(),
        raft_index: status.raft_index(),
        db_size: u64::try_from(status.db_size()).unwrap_or(0),
        alarms: alarms
            .alarms()
            .iter()
            .map(|a| Alarm {
                member: MemberId(a.member_id()),
                kind: format!("{:?}", a.alarm()).to_uppercase(),
            })
            .collect(),
        healthy,
    };
    view.check().map_err(|source| Error::Invalid {
        url: ep.url.clone(),
        source,
    })?;
    Ok(view)
}

/// The member list as of now, for a change that acts on it. etcd answers a
/// member list from the local member's applied state, which can lag a
/// change the leader has already committed (a promotion asked through
/// another member, as k3s's leader does): a linearizable read first makes
/// the local member apply everything committed before it, membership
/// changes included, so the list cannot be older than the request. Like
/// the change that follows, it needs a quorum.
async fn current_members(
    ep: &Endpoint,
    c: &mut Client,
) -> Result<etcd_client::MemberListResponse, Error> {
    let barrier = GetOptions::new().with_count_only();
    bounded(
        ep,
        "catching up with the leader",
        c.get("health", Some(barrier)),
    )
    .await?;
    bounded(ep, "listing the members", c.member_list()).await
}

/// Moves etcd's leadership from the local member (which must lead) to the
/// voter `to`: what a voter about to step down does first, so the cluster
/// does not lose its leader with it. Asked through the local member, as
/// etcd requires.
pub async fn move_leader(ep: &Endpoint, to: MemberId) -> Result<(), Error> {
    let mut c = connect(ep).await?;
    let list = current_members(ep, &mut c).await?;
    match list.members().iter().find(|m| m.id() == to.0) {
        Some(m) if !m.is_learner() => {}
        Some(_) => return Err(Error::Refused(format!("member {to} is a learner"))),
        None => return Err(Error::Refused(format!("member {to} is not in the cluster"))),
    }
    bounded(ep, "moving the leadership", c.move_leader(to.0))
        .await
        .map(drop)
}

/// Removes the member `id`, voter or learner: the removal of a ghost (a
/// member no host stands for), which the caller decided on
/// (`hostdecide::ghost_removal`). etcd itself refuses a removal that would
/// leave its started members short of a quorum of those left (its strict
/// reconfiguration check). A member already gone is no error.
pub async fn remove_member(ep: &Endpoint, id: MemberId) -> Result<(), Error> {
    let mut c = connect(ep).await?;
    let list = current_members(ep, &mut c).await?;
    if !list.members().iter().any(|m| m.id() == id.0) {
        return Ok(());
    }
    bounded(ep, "removing the member", c.member_remove(id.0))
        .await
        .map(drop)
}

/// Removes the member `id`, only if it is a learner (a rolled-back
/// promotion's, which k3s itself would leave for five minutes). A member
/// seen voting is refused: that is k3s's removal, gated by the controller.
///
/// Not atomic: etcd has no conditional member removal, so the check and the
/// removal are two requests, and a promotion (k3s's leader asks for one
/// every 15 s) can fall between them; the member removed is then a voter,
/// and nothing afterwards can tell. The caller stops the member's etcd
/// first, so that such a voter is a down one, outside the active quorum
/// (see the actuator's `learner` module).
pub async fn remove_learner(ep: &Endpoint, id: MemberId) -> Result<(), Error> {
    let mut c = connect(ep).await?;
    let list = current_members(ep, &mut c).await?;
    match list.members().iter().find(|m| m.id() == id.0) {
        Some(m) if m.is_learner() => {}
        Some(_) => {
            return Err(Error::Refused(format!(
                "member {id} votes: only a learner is removed here"
            )));
        }
        None => return Ok(()),
    }
    bounded(ep, "removing the learner", c.member_remove(id.0))
        .await
        .map(drop)
}
