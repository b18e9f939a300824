//! Test only: the workspace's house rules live in `tests/house.rs`, read
//! from the sources of every crate (docs/architecture.md says why each
//! rule matters).
#![forbid(unsafe_code)]
