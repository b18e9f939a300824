//! The watch streams: the own Node and the regrade Lease, each watched by
//! name through kube-runtime's [`watcher::watcher`], which lists, watches,
//! resumes from the last resource version and relists after a 410 Gone.
//!
//! Not kube-runtime's `watch_object`, which is the same stream over
//! [`watcher::Config::default`]: its server-side timeout (290 s) cannot be
//! set, and it must be [`WATCH_TIMEOUT_SECS`], shorter than the client's
//! read timeout ([`crate::cluster::READ_TIMEOUT`]), or a healthy but quiet
//! watch would fail as if its API server had hung. [`watched_by_name`] is
//! `watch_object`'s mapping of events over the config this needs.

use std::fmt::Debug;

use futures::StreamExt;
use kube::{
    Api, Resource,
    runtime::{WatchStreamExt, watcher},
};
use tracing::warn;

use super::context::chain;
use crate::metrics::Metrics;

/// The server ends each watch (the own Node's, the Lease's) after this many
/// seconds, and the watcher resumes it from where it was: an idle actuator's
/// only requests. It must be shorter than the client's read timeout
/// ([`crate::cluster::READ_TIMEOUT`]), or a healthy but quiet watch would
/// fail as if its API server had hung.
pub const WATCH_TIMEOUT_SECS: u32 = 20;

/// How many errors in a row of one watch mean the API server itself is in
/// trouble (the watcher relists by itself after a 410 Gone, and a single
/// dropped connection is resumed).
const ERRORS_IN_A_ROW: u32 = 3;

/// One object watched by name (a field selector on `metadata.name`, which
/// the actuator's role allows for just that name): `Some` when it is listed,
/// added or changed, `None` when it is deleted or missing from a (re)list.
///
/// After an error the stream starts the watch again after kube-runtime's
/// default backoff (jittered, exponential from 800 ms up to 30 s, reset by
/// any event), so several actuators that lost the same API server do not
/// come back to it in step. The loop goes on (steps, the other watch,
/// resyncs, shutdown) while a watch waits.
pub(super) fn watched_by_name<K>(
    api: Api<K>,
    name: &str,
) -> impl futures::Stream<Item = Result<Option<K>, watcher::Error>> + Send + use<K>
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let config = watcher::Config::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(WATCH_TIMEOUT_SECS);
    let mut listed = false;
    watcher::watcher(api, config)
        .default_backoff()
        .filter_map(move |event| {
            let object = match event {
                Ok(watcher::Event::Init) => {
                    listed = false;
                    None
                }
                Ok(watcher::Event::InitApply(o)) => {
                    listed = true;
                    Some(Ok(Some(o)))
                }
                Ok(watcher::Event::Apply(o)) => Some(Ok(Some(o))),
                Ok(watcher::Event::Delete(_)) => Some(Ok(None)),
                // A (re)list without the object: it is gone.
                Ok(watcher::Event::InitDone) => (!listed).then_some(Ok(None)),
                Err(e) => Some(Err(e)),
            };
            futures::future::ready(object)
        })
}

/// A watch failed: counted (into `metrics`) and logged; its stream starts
/// it again after its backoff ([`watched_by_name`]). Returns whether the API
/// server itself is in trouble ([`ERRORS_IN_A_ROW`]).
pub(super) fn watch_failed(
    metrics: &Metrics,
    watch: &str,
    e: &watcher::Error,
    in_a_row: &mut u32,
) -> bool {
    *in_a_row += 1;
    metrics.watch_restarted(watch);
    warn!(watch, error = %chain(e), "watch error");
    *in_a_row >= ERRORS_IN_A_ROW
}
