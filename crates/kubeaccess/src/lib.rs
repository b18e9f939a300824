//! fleet-role's one access layer to the Kubernetes API.
//!
//! - [`candidates`]: a host's clients, from its settings (a list of API
//!   servers tried in order, one CA, one token file), moving to the next
//!   server per request when one does not answer ([`candidates::moves_on`]).
//! - [`kubeconfig`]: the controller's clients, from a kubeconfig or kube's
//!   inference, with a short read bound for requests and a long one for
//!   watches; it refuses an `http://` server before sending a credential.
//! - [`failover`]: `run`'s session failover, probing the API server in use
//!   and moving the whole session to the next one after repeated failures.
//! - [`token`]: the one reader of a credential's expiry.
//!
//! No code here ever holds or prints a token: kube keeps it as a secret and
//! re-reads a token file; only its `exp` claim is read.
#![forbid(unsafe_code)]

pub mod candidates;
pub mod failover;
pub mod kubeconfig;
pub mod server_clock;
pub mod token;
