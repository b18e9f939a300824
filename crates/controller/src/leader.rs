//! `run`'s leader election: several instances run (two Pods, or one per
//! server under systemd), one leads and drives swaps, the others stand by.
//!
//! It uses its own Lease (`leader_lease_namespace/leader_lease_name`,
//! default `platform/fleet-role-leader`), never the regrade Lease: the
//! regrade Lease is held only while a swap runs and names the swap, and the
//! actuators read it; leadership is held for as long as an instance lives.
//!
//! **Why kube-lease-manager** (0.13.1, the one lease crate on kube 5): it
//! takes and renews the Lease with server-side apply, so two instances
//! racing for a free Lease cannot both win (the loser's apply conflicts),
//! it tolerates clock skew through its grace (renewal a third of the
//! duration before the end), and it releases the Lease when its channel
//! closes, which is how a SIGTERM steps down at once. It is used with
//! [`LeaseCreateMode::UseExistent`]: the Lease is created by
//! `deploy/rbac/controller.yaml`, so the controller needs no `create` on
//! Leases (RBAC cannot limit `create` to one name). Hand-rolling it with
//! resourceVersion preconditions (as `kubert` does) would be as safe and
//! about 200 lines more to test.
//!
//! **A Lease is not a fence.** A leader that was partitioned away may
//! believe it still leads for a while. What keeps two instances from ever
//! driving a swap at once is the regrade Lease: every write to it carries
//! the resourceVersion read, it names the instance holding the swap, and it
//! is read again right before every Node write
//! ([`crate::act::Actor::recheck_lease`]). A new leader finding a swap held
//! by another instance waits for that Lease to lapse before taking it over.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerBuilder, LeaseParams};
use tokio::{sync::watch, task::JoinHandle};
use tracing::warn;

use crate::config::LeaderSettings;

/// How long stepping down may take on SIGTERM (one API write).
const RELEASE_BOUND: Duration = Duration::from_secs(10);

/// Why leader election could not start.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The leader Lease does not exist or cannot be read.
    #[error(
        "cannot use the leader Lease {namespace}/{name} (apply deploy/rbac/controller.yaml, or deploy/kubernetes/): {source}"
    )]
    Lease {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The cause.
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },
}

/// A running election: whether this instance leads, until it steps down.
pub struct Election {
    leading: watch::Receiver<bool>,
    task: JoinHandle<kube_lease_manager::Result<LeaseManager>>,
}

impl Election {
    /// Joins the election as `identity` (this process's instance id, so
    /// two processes are never taken for one).
    pub async fn join(
        client: Client,
        settings: &LeaderSettings,
        identity: &str,
    ) -> Result<Self, LeaderError> {
        let grace = (settings.duration / 3).max(1);
        let manager = LeaseManagerBuilder::new(client, &settings.name)
            .with_namespace(&settings.namespace)
            .with_create_mode(LeaseCreateMode::UseExistent)
            .with_parameters(
                LeaseParams::new(identity, settings.duration, grace)
                    .with_field_manager(format!("fleet-role-leader-{}", field_suffix(identity))),
            )
            .build()
            .await
            .map_err(|source| LeaderError::Lease {
                namespace: settings.namespace.clone(),
                name: settings.name.clone(),
                source,
            })?;
        let (leading, task) = manager.watch().await;
        Ok(Self { leading, task })
    }

    /// Whether this instance leads now.
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Steps down: the Lease is released (when held) so that a standby
    /// takes over without waiting for it to lapse. Bounded.
    pub async fn step_down(self) {
        let Self { leading, task } = self;
        // Closing the channel is what makes the manager release and end.
        drop(leading);
        match tokio::time::timeout(RELEASE_BOUND, task).await {
            Ok(Ok(Ok(_))) => {}
            Ok(Ok(Err(e))) => warn!("releasing the leader Lease: {e}"),
            Ok(Err(e)) => warn!("the leader election task failed: {e}"),
            Err(_) => warn!(
                "the leader Lease was not released within {} s; it lapses by itself",
                RELEASE_BOUND.as_secs()
            ),
        }
    }
}

/// A field manager name is at most 128 characters; the instance id is
/// mostly unique in its tail.
fn field_suffix(identity: &str) -> String {
    let chars: Vec<char> = identity
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let start = chars.len().saturating_sub(100);
    chars[start..].iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_manager_name_stays_short_and_plain_whatever_the_identity() {
        let long = format!("fleet-role@{}-12-abcdef", "h".repeat(300));
        let s = field_suffix(&long);
        assert!(s.len() <= 100, "{}", s.len());
        assert!(s.ends_with("-12-abcdef"));
        assert_eq!(field_suffix("a@b c"), "a-b-c");
    }
}
