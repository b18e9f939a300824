//! The plain facts and words the controller's decisions are made of,
//! before any decision: what a Node is ([`class`]: voter, learner, agent,
//! on its way out), which etcd member is which Node and whether its host
//! vouches for it ([`members`]), which of a Node's Pods a drain must move
//! ([`drain`]), when `run`'s window is open ([`window`]), and the reasons a
//! decision gives ([`reasons`]).
//!
//! Each is a function of one Node, one etcd picture or one Pod, over the
//! contract's values ([`protocol`]); the fleet-wide decisions that use them
//! are the `fleetdecide` crate's.
#![forbid(unsafe_code)]

pub mod class;
pub mod drain;
pub mod members;
pub mod reasons;
pub mod window;

pub use class::{Class, classify, is_healthy_voter, is_voting};
pub use drain::{PodFacts, PodRef};
