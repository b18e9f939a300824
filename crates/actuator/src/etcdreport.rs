//! etcd's view for the report: a server host reads its local member
//! ([`etcdaccess::read`]) and its heartbeat carries what it read, so the
//! controller sees what the Nodes do not show (learners, members whose Node
//! is gone, the leader, alarms, etcd's own health).
//!
//! The read is made from the watcher's loop, so it is bounded short
//! ([`READ_BOUND`]) and paced ([`READ_PACE`], [`FAILED_READ_PACE`]): the loop
//! decides every resync and on every watch event, and a hung member must
//! not hold it for more than a few seconds now and then. It never takes
//! the host lock: it changes nothing.

use std::time::{Duration, Instant};

use clock::Clock;
use protocol::etcd::EtcdView;
use tracing::{info, warn};

/// The bound of one request of a reading (and of connecting to the
/// member); [`etcdaccess::read`] bounds the whole reading by twice this, so a
/// reading takes at most 5 s.
pub const REQUEST_BOUND: Duration = Duration::from_millis(2500);

/// The bound of a whole reading.
pub const READ_BOUND: Duration = Duration::from_secs(5);

/// A view read this recently is used again rather than read anew.
pub const READ_PACE: Duration = Duration::from_secs(5);

/// After a failed reading, the next is this far off: a member that hangs
/// costs the loop at most [`READ_BOUND`] in this long.
pub const FAILED_READ_PACE: Duration = Duration::from_secs(15);

/// The last reading of the local member, and whether it failed.
pub struct ViewReader {
    endpoint: etcdaccess::Endpoint,
    /// What the pace is measured on, and the reading stamped with.
    clock: Clock,
    /// When the last reading was made.
    last: Option<Instant>,
    /// What it gave (`None`: it failed, or none was made).
    view: Option<EtcdView>,
    /// The last reading that succeeded, kept after a failure: the other
    /// servers to ask once the local member stops answering
    /// ([`crate::membership`]).
    last_read: Option<EtcdView>,
    /// The last failure, as logged (logged again only when it changes).
    failing: Option<String>,
}

impl ViewReader {
    /// A reader of the member at `endpoint` (its request bound replaced by
    /// [`REQUEST_BOUND`]), paced on `clock`.
    pub fn new(endpoint: &etcdaccess::Endpoint, clock: Clock) -> Self {
        let mut endpoint = endpoint.clone();
        endpoint.timeout = REQUEST_BOUND;
        Self {
            endpoint,
            clock,
            last: None,
            view: None,
            last_read: None,
            failing: None,
        }
    }

    /// The view to report now: the last one if read within the pace,
    /// otherwise a new reading. A failed reading gives none, and is logged
    /// once until it fails otherwise or succeeds.
    pub async fn current(&mut self) -> Option<EtcdView> {
        let pace = if self.failing.is_some() {
            FAILED_READ_PACE
        } else {
            READ_PACE
        };
        if self.last.is_some_and(|t| self.clock.since(t) < pace) {
            return self.view.clone();
        }
        self.last = Some(self.clock.now());
        match etcdaccess::read(&self.endpoint, self.clock.unix_secs()).await {
            Ok(v) => {
                if self.failing.take().is_some() {
                    info!("etcd's view is read again");
                }
                self.last_read = Some(v.clone());
                self.view = Some(v);
            }
            Err(e) => {
                // The error names the URL, the request and the files, never
                // what they hold.
                let why = e.to_string();
                if self.failing.as_deref() != Some(&why) {
                    warn!("cannot read etcd's view, reporting none: {why}");
                }
                self.failing = Some(why);
                self.view = None;
            }
        }
        self.view.clone()
    }

    /// The last reading's view, without reading again (none: not read, or
    /// it failed).
    pub fn cached(&self) -> Option<&EtcdView> {
        self.view.as_ref()
    }

    /// The last reading that succeeded, however long ago (none: none did
    /// since the actuator started).
    pub fn last_read(&self) -> Option<&EtcdView> {
        self.last_read.as_ref()
    }

    /// No reading is made (the host holds no datastore): the next one, if
    /// any, is made at once and its failure logged afresh.
    pub fn forget(&mut self) {
        self.last = None;
        self.view = None;
        self.failing = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    /// A port that takes connections and closes them at once, counting
    /// them: every reading of it fails, and each one shows.
    fn closing_port() -> (String, Arc<AtomicUsize>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let count = Arc::new(AtomicUsize::new(0));
        let seen = count.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                seen.fetch_add(1, Ordering::SeqCst);
                drop(conn);
            }
        });
        (url, count)
    }

    #[tokio::test]
    async fn a_reading_is_made_again_only_past_its_pace_or_once_forgotten_and_a_failed_one_gives_none()
     {
        let (url, connections) = closing_port();
        let ep = etcdaccess::Endpoint {
            url,
            tls: None,
            timeout: Duration::from_secs(10),
        };
        let clock = Clock::manual(1);
        let mut r = ViewReader::new(&ep, clock.clone());
        assert_eq!(r.endpoint.timeout, REQUEST_BOUND);
        assert_eq!(r.current().await, None);
        let first = connections.load(Ordering::SeqCst);
        assert!(first > 0, "the first call reads");
        // Called again at once (as every resync and watch event may): no
        // new reading.
        for _ in 0..3 {
            assert_eq!(r.current().await, None);
        }
        assert_eq!(connections.load(Ordering::SeqCst), first);
        assert!(r.failing.is_some());
        // Just short of the failed reading's pace: still none.
        clock.advance(FAILED_READ_PACE - Duration::from_secs(1));
        assert_eq!(r.current().await, None);
        assert_eq!(connections.load(Ordering::SeqCst), first);
        // Past it: read again.
        clock.advance(Duration::from_secs(1));
        assert_eq!(r.current().await, None);
        let second = connections.load(Ordering::SeqCst);
        assert!(second > first);
        // Forgotten (no datastore for a while): the next call reads at once.
        r.forget();
        assert_eq!(r.current().await, None);
        assert!(connections.load(Ordering::SeqCst) > second);
    }
}
