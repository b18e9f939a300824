//! `fleet-role-lab chaos`: many swaps under overlapping faults on the
//! real-systemd lab, with every client operation recorded and checked for
//! linearizability, and the fleet's invariants watched throughout and
//! checked at the end (docs/testing.md, "The chaos campaign").
//!
//! The pure parts: [`schedule`] (the seeded fault schedule and the
//! operator's budget), [`linear`] (the history and its check), [`verdict`]
//! (a done swap against etcd, and liveness) and [`summary`]; the shells:
//! [`clients`], [`clocks`], [`controllers`], [`faults`], [`watch`], [`end`] and
//! [`campaign`].

pub mod campaign;
pub mod clients;
pub mod clocks;
pub mod controllers;
pub mod end;
pub mod faults;
pub mod linear;
pub mod schedule;
pub mod summary;
pub mod verdict;
pub mod watch;
