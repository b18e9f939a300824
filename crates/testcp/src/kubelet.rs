//! A kubelet's identity: user `system:node:<name>` in group `system:nodes`.
//!
//! Every API server of the crate runs the Node authorizer and the
//! NodeRestriction admission plugin, so a client with this identity may do
//! what a real kubelet may and no more: patch its own Node (including any
//! label outside the `kubernetes.io`/`k8s.io` domains), but not another
//! Node, and not a label under `node-restriction.kubernetes.io/`. Tests use
//! it to play a compromised host.
//!
//! The identity is taken by impersonation from the plane's admin
//! (`system:masters` may impersonate anyone): the authorizers and admission
//! plugins see only the impersonated user and groups, exactly as they would
//! for a kubelet's client certificate, and any Node name works without
//! restarting the API server to load another static token.

/// The group every kubelet is in.
pub const NODES_GROUP: &str = "system:nodes";

/// The user name a kubelet authenticates as on Node `node`.
pub fn user(node: &str) -> String {
    format!("system:node:{node}")
}

/// Makes `config` act as the kubelet of Node `node`. Its own credentials
/// must be allowed to impersonate (the plane's admin is).
pub fn impersonate(config: &mut kube::Config, node: &str) {
    config.auth_info.impersonate = Some(user(node));
    config.auth_info.impersonate_groups = Some(vec![NODES_GROUP.to_owned()]);
}
