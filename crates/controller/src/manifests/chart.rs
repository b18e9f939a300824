//! The Helm chart's templates of the roles, Leases and admission policies
//! (deploy/chart/fleet-role/templates/), rendered from the manifests' own
//! templates so that the chart and `fleet-role manifests` cannot drift:
//! where the manifests put a name from the settings, the chart calls its
//! helper that reads that name from its `config` value (the same TOML
//! file); the constants are written in as they are.

use kubeview::identity::{
    LEASE_ROLE, NODES_CLUSTER_ROLE, REPORT_ROLE, SERVICE_ACCOUNT_PREFIX, SHARED_BINDING,
};
use protocol::{
    names::{HOST_REPORT_KEY, LEASE_NAMESPACE, MAX_REFUSAL_CHARS, REPORT_CONFIGMAP},
    report::MAX_REPORT_BYTES,
};

use super::{ACTUATORS, CONTROLLER, CONTROLLER_NAMESPACE, fill};

/// The chart's templates rendered from the same templates as the manifests
/// (deploy/chart/fleet-role/templates/, which a test keeps equal to this):
/// each name is a call of the chart's helper that reads it from the
/// chart's `config` (the controller's settings, as TOML), each constant its
/// value. Returns each template's file name and text.
pub fn chart_templates() -> Vec<(&'static str, String)> {
    let inc = |name: &str| format!("{{{{ include \"fleet-role.{name}\" . }}}}");
    let len = |name: &str| format!("{{{{ include \"fleet-role.{name}\" . | len }}}}");
    let names = [
        ("hosts_namespace", inc("hostsNamespace")),
        ("hosts_group", inc("hostsGroup")),
        ("report_refused", inc("reportRefused")),
        ("legacy_username_prefix_len", len("legacyUsernamePrefix")),
        ("legacy_username_prefix", inc("legacyUsernamePrefix")),
        ("report_namespace", inc("reportNamespace")),
        ("lease_name", inc("leaseName")),
        ("username_prefix_len", len("usernamePrefix")),
        ("username_prefix", inc("usernamePrefix")),
        ("admin_group", inc("adminGroup")),
        ("leader_namespace", inc("leaderNamespace")),
        ("leader_name", inc("leaderName")),
        ("marks_cel", inc("marksCel")),
        ("marks", inc("marks")),
    ];
    let constants = [
        ("shared_binding", SHARED_BINDING.to_string()),
        ("host_report_key", HOST_REPORT_KEY.into()),
        ("max_refusal_chars", MAX_REFUSAL_CHARS.to_string()),
        ("report_configmap", REPORT_CONFIGMAP.into()),
        ("lease_namespace", LEASE_NAMESPACE.into()),
        ("nodes_cluster_role", NODES_CLUSTER_ROLE.into()),
        ("lease_role", LEASE_ROLE.into()),
        ("report_role", REPORT_ROLE.into()),
        ("service_account_prefix", SERVICE_ACCOUNT_PREFIX.into()),
        ("report_max_bytes", MAX_REPORT_BYTES.to_string()),
        ("report_max_kib", (MAX_REPORT_BYTES / 1024).to_string()),
        ("controller_namespace", CONTROLLER_NAMESPACE.into()),
        ("event_namespace", protocol::names::EVENT_NAMESPACE.into()),
        (
            "node_lease_namespace",
            protocol::names::NODE_LEASE_NAMESPACE.into(),
        ),
        (
            "namespaces",
            "{{- range (include \"fleet-role.namespaces\" . | fromJsonArray) }}\n\
             apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ . }}\n---\n{{- end }}\n"
                .into(),
        ),
    ];
    let values: Vec<(&str, String)> = names.into_iter().chain(constants).collect();
    // An uninstall keeps the regrade Lease: it may hold a swap in progress,
    // which `fleet-role uninstall` would refuse to cut short and helm
    // cannot; a later install adopts it.
    let lease = "  name: {{lease_name}}\n  namespace: {{lease_namespace}}\nspec: {}\n";
    assert!(
        CONTROLLER.contains(lease),
        "the regrade Lease's metadata moved"
    );
    let controller = CONTROLLER.replacen(
        lease,
        "  name: {{lease_name}}\n  namespace: {{lease_namespace}}\n  annotations:\n    helm.sh/resource-policy: keep\nspec: {}\n",
        1,
    );
    let header = "{{/* Generated from crates/controller/src/manifests/ by `cargo test -p controller --test chart` \
                  (FLEET_ROLE_WRITE_CHART=1 writes it): edit those, not this. */}}\n";
    vec![
        (
            "controller.yaml",
            format!("{header}{}", keep_namespaces(&fill(&controller, &values))),
        ),
        (
            "actuators.yaml",
            format!("{header}{}", keep_namespaces(&fill(ACTUATORS, &values))),
        ),
    ]
}

/// `yaml` with every Namespace kept by an uninstall: they hold what
/// `fleet-role enroll` made for each host, and `platform` may hold more.
/// Every copy of one carries it (a Namespace is in each rendering that
/// uses it), or helm would go by the copy without it.
fn keep_namespaces(yaml: &str) -> String {
    let mut out = String::new();
    let mut lines = yaml.lines().peekable();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        if line == "kind: Namespace" && lines.peek() == Some(&"metadata:") {
            out.push_str(lines.next().unwrap_or_default());
            out.push('\n');
            if let Some(name) = lines.next() {
                out.push_str(name);
                out.push_str("\n  annotations:\n    helm.sh/resource-policy: keep\n");
            }
        }
    }
    out
}
