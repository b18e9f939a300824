//! How k3s's stand-in waits out a peer that does not answer yet (the join
//! server's supervisor, the etcd leader taking a learner, a learner's own
//! etcd catching up): the same ask again, a pause apart, within a bound,
//! as k3s's own retry loops do; past the bound the last error, with what
//! was asked.

use std::{future::Future, time::Duration};

use tracing::warn;

/// `ask` until it succeeds or `bound` has passed, `pause` apart, each
/// failure logged as `what`; past the bound, the last error.
pub(super) async fn retried<T, F, Fut>(
    what: &str,
    bound: Duration,
    pause: Duration,
    mut ask: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let clock = clock::Clock::system();
    let start = clock.now();
    loop {
        match ask().await {
            Ok(v) => return Ok(v),
            Err(e) if clock.since(start) < bound => {
                warn!("{what}: {e:#}; retrying");
                tokio::time::sleep(pause).await;
            }
            Err(e) => return Err(e.context(what.to_string())),
        }
    }
}
