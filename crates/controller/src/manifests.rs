//! `fleet-role manifests`: the cluster-side objects of the actuators (and,
//! asked for, of the controller) rendered from the settings, so that the
//! roles and the report's admission policy name the namespace, the Leases
//! and the user names the controller and the actuators use, whatever the
//! config file says.
//!
//! The templates (`src/manifests/*.yaml`) carry the objects and the
//! comments that explain them; every name in them is filled in here from
//! the one place that defines it ([`protocol::Names`], [`kubeview::identity`],
//! [`crate::config::Settings`]). `deploy/rbac/` holds the rendering of the
//! defaults, which a test keeps identical to this.

use clap::ValueEnum;
use kubeview::identity::{
    LEASE_ROLE, NODES_CLUSTER_ROLE, REPORT_ROLE, SERVICE_ACCOUNT_PREFIX, SHARED_BINDING,
    hosts_group, legacy_username_prefix, username_prefix,
};
use protocol::{
    names::{HOST_REPORT_KEY, LEASE_NAMESPACE, MAX_REFUSAL_CHARS, REPORT_CONFIGMAP},
    report::MAX_REPORT_BYTES,
};

use crate::config::Settings;

mod chart;
pub use chart::chart_templates;

/// The namespace of the controller's own ServiceAccount `fleet-role`, where
/// `deploy/kubernetes/` runs it.
pub const CONTROLLER_NAMESPACE: &str = "platform";
/// The controller's own ServiceAccount, in [`CONTROLLER_NAMESPACE`], as the
/// rendered controller objects name it (`fleet-role kubeconfig` issues its
/// credential).
pub const CONTROLLER_SERVICE_ACCOUNT: &str = "fleet-role";

const ACTUATORS: &str = include_str!("manifests/actuators.yaml");
const CONTROLLER: &str = include_str!("manifests/controller.yaml");

/// Which objects `fleet-role manifests` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Which {
    /// What every host's actuator shares: the report's namespace and
    /// ConfigMap, the roles enroll binds each host to, and the report's
    /// admission policy (`deploy/rbac/actuator.yaml` with the defaults).
    #[default]
    Actuators,
    /// The controller's ServiceAccount, its roles and the Leases it uses
    /// (`deploy/rbac/controller.yaml` with the defaults).
    Controller,
    /// All of fleet-role's cluster side in one file, for `kubectl apply -f`:
    /// `controller`, `actuators`, then the controller's workload
    /// (`deploy/kubernetes/fleet-role.yaml`); `deploy/fleet-role.yaml` with
    /// the defaults, and the release's `fleet-role.yaml`.
    All,
}

/// The objects of `which` as YAML documents, rendered from `settings`,
/// the workload's ConfigMap holding the default settings.
pub fn render(which: Which, settings: &Settings) -> String {
    render_with_config(which, settings, None)
}

/// The objects of `which` as YAML documents, rendered from `settings`; the
/// workload's ConfigMap (`all`) holds `config`, the text of the config file
/// `settings` were read from, so that the controller runs with the settings
/// its roles were rendered for (none: the defaults the file ships).
pub fn render_with_config(which: Which, settings: &Settings, config: Option<&str>) -> String {
    match which {
        Which::Actuators => actuators(settings),
        Which::Controller => controller(settings),
        Which::All => format!(
            "{ALL_HEADER}{}---\n{}---\n{}",
            controller(settings),
            actuators(settings),
            workload(config)
        ),
    }
}

/// The controller's workload, as `deploy/kubernetes/fleet-role.yaml` ships it.
pub const WORKLOAD: &str = include_str!("../../../deploy/kubernetes/fleet-role.yaml");

/// The settings the workload's ConfigMap ships (`controller.toml`), and the
/// chart's default `config` (deploy/chart/fleet-role/values.yaml).
pub const WORKLOAD_CONFIG: &str = "\
# Every key is optional; see docs/controller.md.
voters = 3
metrics_address = \"0.0.0.0:9464\"
";

/// `text` as the body of a YAML block scalar four spaces in, as the
/// ConfigMap's `controller.toml: |` holds it (and as helm's `indent 4`
/// writes it in the chart).
fn indented(text: &str) -> String {
    let mut out: String = text.lines().map(|l| format!("    {l}\n")).collect();
    if text.is_empty() {
        out.push('\n');
    }
    out
}

/// The workload with `config` (none: the defaults) in its ConfigMap.
pub fn workload(config: Option<&str>) -> String {
    match config {
        None => WORKLOAD.to_string(),
        Some(text) => WORKLOAD.replacen(&indented(WORKLOAD_CONFIG), &indented(text), 1),
    }
}

/// What the whole rendering says of itself.
const ALL_HEADER: &str = "\
# fleet-role's whole cluster side in one file: `kubectl apply -f` it once
# per cluster (a cluster admin's kubeconfig). Rendered by
# `fleet-role manifests all [--config FILE]`; deploy/fleet-role.yaml is the
# rendering of the defaults (a test fails while it differs). Each host's
# identity is still `fleet-role enroll NODE`'s. The controller's settings
# are the ConfigMap `platform/fleet-role` at the end: edit them there.
#
# Not for k3s's auto-deploy folder (server/manifests/): k3s applies each
# server's copy again at every start of that server, putting back any edit
# made through the API since (docs/install.md says why and what instead).
#
";

/// What every host's actuator shares, for `settings`.
pub fn actuators(settings: &Settings) -> String {
    let names = settings.names();
    let prefix = username_prefix(names);
    let legacy = legacy_username_prefix(names);
    fill(
        ACTUATORS,
        &[
            ("hosts_namespace", names.hosts_namespace.clone()),
            ("hosts_group", hosts_group(names)),
            ("shared_binding", SHARED_BINDING.into()),
            ("host_report_key", HOST_REPORT_KEY.into()),
            ("report_refused", names.report_refused()),
            ("max_refusal_chars", MAX_REFUSAL_CHARS.to_string()),
            ("legacy_username_prefix_len", legacy.len().to_string()),
            ("legacy_username_prefix", legacy),
            ("report_namespace", names.report_namespace.clone()),
            ("report_configmap", REPORT_CONFIGMAP.into()),
            ("lease_namespace", LEASE_NAMESPACE.into()),
            ("lease_name", names.lease_name.clone()),
            ("nodes_cluster_role", NODES_CLUSTER_ROLE.into()),
            ("lease_role", LEASE_ROLE.into()),
            ("report_role", REPORT_ROLE.into()),
            ("service_account_prefix", SERVICE_ACCOUNT_PREFIX.into()),
            // Every part is ASCII (a DNS label, a fixed prefix): its length
            // in bytes is its length in characters, as CEL's substring counts.
            ("username_prefix_len", prefix.len().to_string()),
            ("username_prefix", prefix),
            ("report_max_bytes", MAX_REPORT_BYTES.to_string()),
            ("report_max_kib", (MAX_REPORT_BYTES / 1024).to_string()),
            ("admin_group", settings.admin_group.clone()),
        ],
    )
}

/// The controller's credential and Leases, for `settings`.
pub fn controller(settings: &Settings) -> String {
    let names = settings.names();
    // The hosts' namespace and the shared report's too: the controller's
    // Roles to read them live there, whichever file is applied first.
    let mut namespaces: Vec<&str> = Vec::new();
    for n in [
        CONTROLLER_NAMESPACE,
        settings.leader.namespace.as_str(),
        names.hosts_namespace.as_str(),
        names.report_namespace.as_str(),
    ] {
        if !namespaces.contains(&n) {
            namespaces.push(n);
        }
    }
    // The marks the controller alone writes (the maintenance annotation is
    // every `patch nodes` holder's, by design).
    let marks = [
        names.desired_role(),
        names.role_swap(),
        names.role_step(),
        names.role_join_node(),
        names.snapshot_request(),
        names.protocol(),
    ];
    let namespaces: String = namespaces
        .iter()
        .map(|n| format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {n}\n---\n"))
        .collect();
    fill(
        CONTROLLER,
        &[
            ("namespaces", namespaces),
            ("controller_namespace", CONTROLLER_NAMESPACE.into()),
            ("lease_namespace", LEASE_NAMESPACE.into()),
            ("lease_name", names.lease_name.clone()),
            ("leader_namespace", settings.leader.namespace.clone()),
            ("leader_name", settings.leader.name.clone()),
            ("report_namespace", names.report_namespace.clone()),
            ("report_configmap", REPORT_CONFIGMAP.into()),
            ("hosts_namespace", names.hosts_namespace.clone()),
            ("event_namespace", protocol::names::EVENT_NAMESPACE.into()),
            ("admin_group", settings.admin_group.clone()),
            ("marks", marks.join(", ")),
            (
                "marks_cel",
                marks
                    .iter()
                    .map(|k| format!("'{k}'"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            (
                "node_lease_namespace",
                protocol::names::NODE_LEASE_NAMESPACE.into(),
            ),
        ],
    )
}

/// `template` with every `{{key}}` replaced by its value. The values are
/// validated names (DNS labels and subdomains) and numbers, so none can
/// break out of the YAML or CEL string it lands in.
fn fill(template: &str, values: &[(&str, String)]) -> String {
    let mut out = template.to_string();
    for (key, value) in values {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    fn settings(toml: &str) -> Settings {
        Settings::resolve(toml::from_str::<FileConfig>(toml).unwrap(), None).unwrap()
    }

    const OTHER: &str = "report_namespace = \"fleet-ops\"\nhosts_namespace = \"fleet-hosts\"\nlease_name = \"regrade-x\"\nleader_lease_namespace = \"ops\"\nleader_lease_name = \"lead\"\n";

    #[test]
    fn every_placeholder_is_filled_and_every_document_parses() {
        for s in [settings(""), settings(OTHER)] {
            for which in [Which::Actuators, Which::Controller] {
                let y = render(which, &s);
                assert!(!y.contains("{{") && !y.contains("}}"), "{y}");
                let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&y).unwrap();
                assert!(docs.iter().all(|d| d["metadata"]["name"].is_string()));
            }
        }
    }

    #[test]
    fn a_config_file_whose_first_line_is_indented_lands_whole_in_the_configmap() {
        let text = "  voters = 5 # indented\nlease_name = \"regrade-x\"\n";
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(&workload(Some(text))).unwrap();
        let cm = docs.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
        assert_eq!(cm["data"]["controller.toml"], text);
    }

    #[test]
    fn the_controller_objects_make_the_service_account_kubeconfig_issues_a_token_for() {
        let y = controller(&settings(OTHER));
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&y).unwrap();
        let accounts: Vec<_> = docs
            .iter()
            .filter(|d| d["kind"] == "ServiceAccount")
            .map(|d| (&d["metadata"]["namespace"], &d["metadata"]["name"]))
            .collect();
        assert_eq!(
            accounts,
            [(
                &serde_json::json!(CONTROLLER_NAMESPACE),
                &serde_json::json!(CONTROLLER_SERVICE_ACCOUNT)
            )]
        );
    }

    #[test]
    fn the_policy_and_roles_follow_the_report_namespace_and_the_lease_name() {
        let s = settings(OTHER);
        let y = actuators(&s);
        assert!(!y.contains("platform"), "{y}");
        assert!(!y.contains("fleet-regrade"), "{y}");
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&y).unwrap();
        assert!(!y.contains("fleet-role-hosts"), "{y}");
        for (policy, prefix) in [
            (
                "fleet-role-actuator-report",
                "system:serviceaccount:fleet-ops:fleet-role-actuator-",
            ),
            (
                "fleet-role-actuator-hosts",
                "system:serviceaccount:fleet-hosts:fleet-role-actuator-",
            ),
        ] {
            let policy = docs
                .iter()
                .find(|d| {
                    d["kind"] == "ValidatingAdmissionPolicy" && d["metadata"]["name"] == policy
                })
                .unwrap();
            let vars = policy["spec"]["variables"].to_string();
            assert!(vars.contains(&format!("startsWith('{prefix}')")), "{vars}");
            assert!(
                vars.contains(&format!("substring({})", prefix.len())),
                "{vars}"
            );
        }
        let shared: Vec<&serde_json::Value> = docs
            .iter()
            .filter(|d| {
                d["metadata"]["name"] == SHARED_BINDING
                    && d["kind"].as_str().is_some_and(|k| k.ends_with("Binding"))
            })
            .collect();
        assert_eq!(shared.len(), 2, "the two shared roles, bound once each");
        for b in shared {
            assert_eq!(
                b["subjects"],
                serde_json::json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:serviceaccounts:fleet-hosts"}])
            );
        }
        let lease_role = docs
            .iter()
            .find(|d| d["metadata"]["name"] == LEASE_ROLE)
            .unwrap();
        assert_eq!(lease_role["rules"][0]["resourceNames"][0], "regrade-x");
        let c = controller(&s);
        assert!(c.contains("resourceNames: [\"regrade-x\"]"), "{c}");
        assert!(c.contains("resourceNames: [\"lead\"]"), "{c}");
        assert!(c.contains("  name: ops\n"), "{c}");
    }

    #[test]
    fn the_policies_cap_a_hosts_report_at_the_reports_cap() {
        let y = actuators(&settings(""));
        assert!(
            y.contains(&format!(
                "size(bytes(object.?data.orValue({{}}).?report.orValue(''))) <= {MAX_REPORT_BYTES}"
            )),
            "{y}"
        );
        assert!(
            y.contains(&format!(
                "size(bytes(variables.after[variables.node])) <= {MAX_REPORT_BYTES}"
            )),
            "{y}"
        );
        assert!(y.contains("at most 16384 bytes (16 KiB)"), "{y}");
    }
}
