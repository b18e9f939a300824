//! k3s's leader election for its `k3s-etcd` controllers, where the
//! member-removal controller runs.
//!
//! More in docs/internals.md, "k3sstandin: k3s::election".

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, api::PostParams};
use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{info, warn};

use crate::{api::Apis, stamps};

/// The Lease's name (`version.Program + "-etcd"`).
pub const LEASE: &str = "k3s-etcd";
/// Its namespace (wrangler's default).
pub const NAMESPACE: &str = "kube-system";
/// wrangler's `defaultLeaseDuration`.
pub const LEASE_DURATION: Duration = Duration::from_secs(45);
/// wrangler's `defaultRenewDeadline`.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(30);
/// wrangler's `defaultRetryPeriod`.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

/// The Lease as a candidate read it: its holder and how long it says it
/// lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `spec.holderIdentity` (empty once released).
    pub holder: String,
    /// `spec.leaseDurationSeconds`.
    pub duration: Duration,
    /// `spec.renewTime`, as written (a change of it is a renewal).
    pub renewed: String,
}

/// What one try does (client-go's `tryAcquireOrRenew`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Try {
    /// No Lease yet: create it, holding it.
    Create,
    /// Ours: renew it.
    Renew,
    /// Released, or not renewed for a whole lease duration since this
    /// candidate last saw it change: take it over.
    Acquire,
    /// Another holder's, still valid: wait.
    Wait,
}

/// client-go's decision: `me` holds what is ours, takes what is free or
/// expired by its own observation (`observed_for`: how long the record has
/// been unchanged as this candidate saw it), and waits otherwise.
pub fn decide(record: Option<&Record>, me: &str, observed_for: Duration) -> Try {
    match record {
        None => Try::Create,
        Some(r) if r.holder == me => Try::Renew,
        Some(r) if r.holder.is_empty() || observed_for > r.duration => Try::Acquire,
        Some(_) => Try::Wait,
    }
}

/// One server's candidacy.
pub struct Election {
    me: String,
    /// The server's own API server only (k3s's `sc.K8s` is its local one).
    own: Apis,
    clock: clock::Clock,
    /// The record last read and when it was first seen as it is.
    observed: Option<(Record, Instant)>,
    /// When this candidate last wrote the Lease as its holder.
    renewed_at: Option<Instant>,
}

impl Election {
    /// A candidate named `me` (the Lease's holder when it leads), reaching
    /// the Lease through `own`.
    pub fn new(me: String, own: Apis, clock: clock::Clock) -> Election {
        Election {
            me,
            own,
            clock,
            observed: None,
            renewed_at: None,
        }
    }

    /// Whether it holds the Lease now (renewed within the renew deadline).
    pub fn leading(&self) -> bool {
        self.renewed_at
            .is_some_and(|t| self.clock.since(t) < RENEW_DEADLINE)
    }

    /// Runs the candidacy in a task of its own (a try every
    /// [`RETRY_PERIOD`], as client-go's elector runs beside k3s's other
    /// loops, so an API server that holds a request up holds nothing else).
    pub fn spawn(mut self) -> Handle {
        let (state, rx) = watch::channel(State::Candidate);
        let (stop, mut stopped) = mpsc::channel::<oneshot::Sender<()>>(1);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(RETRY_PERIOD) => {}
                    Some(done) = stopped.recv() => {
                        self.release().await;
                        let _ = done.send(());
                        return;
                    }
                }
                match self.tick().await {
                    Ok(()) => {
                        state.send_replace(if self.leading() {
                            State::Leading
                        } else {
                            State::Candidate
                        });
                    }
                    Err(e) => {
                        warn!("{e:#}");
                        state.send_replace(State::Lost);
                        return;
                    }
                }
            }
        });
        Handle { state: rx, stop }
    }

    /// One try; `Err` when the Lease held is lost (not renewed within
    /// [`RENEW_DEADLINE`], or taken): wrangler ends k3s then.
    ///
    /// # Errors
    /// "leaderelection lost for k3s-etcd".
    async fn tick(&mut self) -> anyhow::Result<()> {
        let was_leading = self.renewed_at.is_some();
        match self.try_once().await {
            Ok(true) => {
                if !was_leading {
                    info!("successfully acquired lease {NAMESPACE}/{LEASE}");
                }
                self.renewed_at = Some(self.clock.now());
            }
            // Not renewed this time (taken, or a conflict): client-go keeps
            // trying until the renew deadline.
            Ok(false) => {}
            Err(e) => warn!("error retrieving resource lock {NAMESPACE}/{LEASE}: {e:#}"),
        }
        if was_leading && !self.leading() {
            self.renewed_at = None;
            anyhow::bail!("leaderelection lost for {LEASE}");
        }
        Ok(())
    }

    /// Reads the Lease and creates, renews or takes it if it may: whether
    /// it holds it afterwards.
    async fn try_once(&mut self) -> anyhow::Result<bool> {
        let read = self
            .own
            .any(|c| async move { Api::<Lease>::namespaced(c, NAMESPACE).get_opt(LEASE).await })
            .await?;
        let record = read.as_ref().map(record_of);
        let now = self.clock.now();
        let observed_for = match (&self.observed, &record) {
            (Some((seen, at)), Some(r)) if seen == r => self.clock.since(*at),
            _ => Duration::ZERO,
        };
        if let Some(r) = &record
            && observed_for == Duration::ZERO
        {
            self.observed = Some((r.clone(), now));
        }
        let action = decide(record.as_ref(), &self.me, observed_for);
        if action == Try::Wait {
            return Ok(false);
        }
        let stamp = stamps::micro(&self.clock);
        let old = read.as_ref().map(|l| l.spec.clone().unwrap_or_default());
        let transitions = old.as_ref().and_then(|s| s.lease_transitions).unwrap_or(0);
        let acquired = match (action, &old) {
            (Try::Renew, Some(s)) => s
                .acquire_time
                .as_ref()
                .map(|t| serde_json::to_value(t).unwrap_or_default())
                .unwrap_or_else(|| json!(stamp)),
            _ => json!(stamp),
        };
        let lease: Lease = serde_json::from_value(json!({
            "metadata": {
                "name": LEASE,
                "namespace": NAMESPACE,
                "resourceVersion": read.as_ref().and_then(|l| l.metadata.resource_version.clone()),
            },
            "spec": {
                "holderIdentity": self.me,
                "leaseDurationSeconds": LEASE_DURATION.as_secs(),
                "acquireTime": acquired,
                "renewTime": stamp,
                "leaseTransitions": if action == Try::Acquire { transitions + 1 } else { transitions },
            }
        }))?;
        let wrote = self
            .own
            .any(|c| {
                let l = lease.clone();
                async move {
                    let api = Api::<Lease>::namespaced(c, NAMESPACE);
                    let r = if action == Try::Create {
                        api.create(&PostParams::default(), &l).await
                    } else {
                        api.replace(LEASE, &PostParams::default(), &l).await
                    };
                    match r {
                        Ok(_) => Ok(true),
                        // Another candidate wrote first.
                        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                        Err(e) => Err(e),
                    }
                }
            })
            .await?;
        if wrote && action == Try::Acquire {
            info!("acquired lease {NAMESPACE}/{LEASE} from its last holder");
        }
        Ok(wrote)
    }

    /// `ReleaseOnCancel`: on a graceful stop the leader empties the holder
    /// (with a 1 s duration), so another server takes over at its next try.
    async fn release(&mut self) {
        if self.renewed_at.take().is_none() {
            return;
        }
        let stamp = stamps::micro(&self.clock);
        let patch = json!({"spec": {
            "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": stamp, "acquireTime": stamp,
        }});
        let r = self
            .own
            .any(|c| {
                let p = patch.clone();
                async move {
                    Api::<Lease>::namespaced(c, NAMESPACE)
                        .patch(
                            LEASE,
                            &kube::api::PatchParams::default(),
                            &kube::api::Patch::Merge(&p),
                        )
                        .await
                }
            })
            .await;
        match r {
            Ok(_) => info!("released lease {NAMESPACE}/{LEASE}"),
            Err(e) => warn!("releasing lease {NAMESPACE}/{LEASE}: {e:#}"),
        }
    }
}

/// Where a candidacy stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not holding the Lease.
    Candidate,
    /// Holding it: the `k3s-etcd` controllers run here.
    Leading,
    /// It held the Lease and lost it: k3s exits (wrangler's `Fatalf`).
    Lost,
}

/// A running candidacy ([`Election::spawn`]).
pub struct Handle {
    state: watch::Receiver<State>,
    stop: mpsc::Sender<oneshot::Sender<()>>,
}

impl Handle {
    /// Where it stands now.
    pub fn state(&self) -> State {
        *self.state.borrow()
    }

    /// Ends the candidacy, releasing the Lease if it is held (a graceful
    /// stop's `ReleaseOnCancel`), waiting for the release a few seconds at
    /// most.
    pub async fn release(self) {
        let (done, wait) = oneshot::channel();
        if self.stop.send(done).await.is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(5), wait).await;
        }
    }
}

fn record_of(l: &Lease) -> Record {
    let s = l.spec.clone().unwrap_or_default();
    Record {
        holder: s.holder_identity.unwrap_or_default(),
        duration: Duration::from_secs(
            s.lease_duration_seconds
                .and_then(|d| u64::try_from(d).ok())
                .unwrap_or(0),
        ),
        renewed: s
            .renew_time
            .map(|t| serde_json::to_string(&t).unwrap_or_default())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: &str) -> Record {
        Record {
            holder: holder.into(),
            duration: LEASE_DURATION,
            renewed: "2026-12-01T11:32:11.250000Z".into(),
        }
    }

    #[test]
    fn a_server_creates_the_lease_when_there_is_none_and_renews_its_own() {
        assert_eq!(decide(None, "server-1", Duration::ZERO), Try::Create);
        assert_eq!(
            decide(
                Some(&held_by("server-1")),
                "server-1",
                Duration::from_secs(600)
            ),
            Try::Renew
        );
    }

    #[test]
    fn another_servers_lease_is_taken_only_once_unchanged_for_a_whole_lease_duration() {
        let r = held_by("server-1");
        assert_eq!(decide(Some(&r), "server-2", Duration::ZERO), Try::Wait);
        assert_eq!(decide(Some(&r), "server-2", LEASE_DURATION), Try::Wait);
        assert_eq!(
            decide(
                Some(&r),
                "server-2",
                LEASE_DURATION + Duration::from_millis(1)
            ),
            Try::Acquire
        );
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let r = Record {
            holder: String::new(),
            duration: Duration::from_secs(1),
            renewed: String::new(),
        };
        assert_eq!(decide(Some(&r), "server-2", Duration::ZERO), Try::Acquire);
    }
}
