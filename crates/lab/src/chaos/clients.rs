//! The campaign's clients: several, each reading and writing through its
//! own member (moving to the next host when its member refuses the
//! connection or gives no answer), all on the same key at a time, the key
//! moving on every [`KEY_SPAN`] operations so that each register's history
//! stays short enough to check. Every operation goes in the shared
//! history (`linear.rs`).

use std::{
    io,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use super::linear::{Ask, Op, Outcome};
use crate::etcd_gw;

/// How many operations one key takes before the clients move to the next.
pub const KEY_SPAN: u64 = 40;
/// How long one operation may take: past etcd's own request timeout (7 s),
/// so that an operation given up is one etcd never answered.
pub const OP_BOUND: Duration = Duration::from_secs(10);

/// Clients running until [`Clients::finish`].
pub struct Clients {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    shared: Arc<Shared>,
    prefix: String,
}

struct Shared {
    history: Mutex<Vec<Op>>,
    /// The order shared by every client: taken when asked and answered.
    seq: AtomicU64,
    /// Operations asked so far: which key is in use.
    asked: AtomicU64,
    /// Every value written is new.
    value: AtomicU64,
    clock: clock::Clock,
    started: std::time::Instant,
}

impl Shared {
    fn ms(&self) -> u64 {
        u64::try_from(self.clock.since(self.started).as_millis()).unwrap_or(u64::MAX)
    }
}

impl Clients {
    /// Starts `n` clients under key prefix `prefix`, over the members at
    /// `endpoints` (every host's, in order: client `i` starts at the
    /// `i`-th), each asking every `every`; `seed` draws reads and writes.
    pub fn start(
        prefix: &str,
        endpoints: Vec<etcd_gw::Endpoint>,
        n: usize,
        every: Duration,
        seed: u64,
    ) -> Clients {
        let clock = clock::Clock::system();
        let shared = Arc::new(Shared {
            history: Mutex::new(Vec::new()),
            seq: AtomicU64::new(1),
            asked: AtomicU64::new(0),
            value: AtomicU64::new(1),
            started: clock.now(),
            clock,
        });
        let stop = Arc::new(AtomicBool::new(false));
        let endpoints = Arc::new(endpoints);
        let tasks = (0..n)
            .map(|i| {
                let (shared, stop, endpoints) = (shared.clone(), stop.clone(), endpoints.clone());
                let prefix = prefix.to_string();
                tokio::spawn(async move {
                    client(i as u64, prefix, endpoints, every, seed, shared, stop).await
                })
            })
            .collect();
        Clients {
            stop,
            tasks,
            shared,
            prefix: prefix.to_string(),
        }
    }

    /// Stops the clients, reads every key once more through the first of
    /// `members` that answers (the last read of each register, after every
    /// other operation), and returns the whole history.
    pub async fn finish(self, members: &[etcd_gw::Endpoint]) -> Vec<Op> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            let _ = t.await;
        }
        let last = self.shared.asked.load(Ordering::Relaxed) / KEY_SPAN;
        for k in 0..=last {
            let key = format!("{}/k{k}", self.prefix);
            // A fresh client per key: its read comes after everything.
            let me = 1_000_000_000 + k;
            for ep in members {
                let op = one(&self.shared, me, &key, Ask::Read, ep).await;
                let answered = matches!(op.outcome, Outcome::Ok(_));
                self.shared.history.lock().expect("history").push(op);
                if answered {
                    break;
                }
            }
        }
        std::mem::take(&mut *self.shared.history.lock().expect("history"))
    }
}

async fn client(
    i: u64,
    prefix: String,
    endpoints: Arc<Vec<etcd_gw::Endpoint>>,
    every: Duration,
    seed: u64,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
) {
    let mut at = i as usize;
    let mut generation = 0u64;
    let mut draw = seed ^ (i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut tick = tokio::time::interval(every);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let n = shared.asked.fetch_add(1, Ordering::Relaxed);
        let key = format!("{prefix}/k{}", n / KEY_SPAN);
        draw = draw
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let ask = if (draw >> 33).is_multiple_of(2) {
            Ask::Write(shared.value.fetch_add(1, Ordering::Relaxed))
        } else {
            Ask::Read
        };
        let me = i * 1_000_000 + generation;
        let ep = &endpoints[at % endpoints.len()];
        let op = one(&shared, me, &key, ask, ep).await;
        match op.outcome {
            Outcome::Ok(_) => {}
            Outcome::Failed => at += 1,
            // The tester allows one operation in flight per client: one
            // that may still land makes this client someone new.
            Outcome::Unknown => {
                at += 1;
                generation += 1;
            }
        }
        shared.history.lock().expect("history").push(op);
    }
}

/// One operation, recorded.
async fn one(shared: &Shared, client: u64, key: &str, ask: Ask, ep: &etcd_gw::Endpoint) -> Op {
    let asked = shared.seq.fetch_add(1, Ordering::SeqCst);
    let result = match ask {
        Ask::Write(v) => etcd_gw::put_within(ep, key, &v.to_string(), OP_BOUND)
            .await
            .map(|()| None),
        Ask::Read => etcd_gw::get_within(ep, key, OP_BOUND).await.map(|v| {
            // A value that is no number is kept as one no client wrote.
            Some(v.map_or(0, |s| s.parse().unwrap_or(u64::MAX)))
        }),
    };
    let answered = shared.seq.fetch_add(1, Ordering::SeqCst);
    let outcome = match result {
        Ok(v) => Outcome::Ok(v),
        Err(e) if never_sent(&e) => Outcome::Failed,
        Err(_) => Outcome::Unknown,
    };
    Op {
        client,
        key: key.to_string(),
        ask,
        asked,
        answered,
        outcome,
        at_ms: shared.ms(),
    }
}

/// Whether the request certainly never reached etcd: the connection was
/// refused or the host is unreachable (nothing listens: a member stopped,
/// a host that is no member; a host cut off),
/// or a learner turned it away (it serves no writes or linearizable reads).
fn never_sent(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                io::ErrorKind::ConnectionRefused
                    | io::ErrorKind::HostUnreachable
                    | io::ErrorKind::NetworkUnreachable
            )
        })
    }) || format!("{e:#}").contains("rpc not supported for learner")
}
