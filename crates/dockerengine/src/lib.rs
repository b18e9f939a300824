//! The Docker Engine API over the daemon's unix socket, for the hosts
//! where k3s runs as containers (the seed's Colima hosts, k3d-style
//! set-ups): a container's state, its creation, start, stop and removal,
//! an image imported from a local tar, and Docker's own event stream.
//!
//! Every call is one HTTP/1.1 request on a fresh connection, bounded as a
//! whole (connect, request, the whole answer) by the engine's timeout
//! ([`Engine::with_timeout`]); a daemon that does not answer is
//! [`Error::Timeout`] naming the call, never a wait for ever. Docker's
//! own refusals keep its message ([`Error::Refused`]), cut to one line.
//!
//! The API version is pinned ([`API_VERSION`], Docker 20.10's, which
//! Debian 12 ships); later daemons still serve it.

mod container;
#[cfg(feature = "private-daemon")]
mod daemon;
mod engine;
mod error;
mod events;
mod logs;
mod transport;

pub use container::{Container, ContainerSpec, RestartPolicy, RunSettings, Status};
#[cfg(feature = "private-daemon")]
pub use daemon::PrivateDaemon;
pub use engine::{API_VERSION, DEFAULT_TIMEOUT, Engine, Version};
pub use error::Error;
pub use events::{Event, ran_together};
pub use logs::Output;
