//! fleet-role's parsers of untrusted input, one entry point per fuzz target.
//!
//! More in docs/internals.md, "fuzzing".
#![forbid(unsafe_code)]

mod files;
mod kube;
mod values;

pub use files::{
    env_file, etcd_health, k3s_config, k3s_version, local_addresses, role_file, unit_state,
};
pub use kube::{fleet_view, host_decision, lease_annotations, node_marks};
pub use values::{etcd_view, report, validated_values};

/// A fuzz target: what it is called (its `fuzz/fuzz_targets/<name>.rs` and
/// `fuzz/seeds/<name>/`) and its entry point.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by name, in the order `scripts/fuzz.sh` runs them.
pub const TARGETS: &[Target] = &[
    ("node_marks", node_marks),
    ("lease_annotations", lease_annotations),
    ("host_decision", host_decision),
    ("fleet_view", fleet_view),
    ("report", report),
    ("etcd_view", etcd_view),
    ("validated_values", validated_values),
    ("role_file", role_file),
    ("unit_state", unit_state),
    ("k3s_config", k3s_config),
    ("k3s_version", k3s_version),
    ("local_addresses", local_addresses),
    ("env_file", env_file),
    ("etcd_health", etcd_health),
];

/// Whether `text` is safe on one line of output: no control character
/// (the rule of `protocol::text`).
fn one_line(text: &str) -> bool {
    !text.chars().any(char::is_control)
}

/// The bytes as the product would have them as text, when it reads a file
/// or a ConfigMap value with `read_to_string` / as a JSON string: valid
/// UTF-8 only (anything else is refused before a parser sees it).
fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}
