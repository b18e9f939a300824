//! The API servers a host's actuator is given: found once, when its bundle
//! is made, from the Nodes (a pure function over them, so every rule here
//! is tested without a cluster).
//!
//! A Node counts when k3s's control-plane label is on it (it serves the
//! API now) or [`protocol::names::ELIGIBLE_LABEL`] is `"true"` (it may be
//! promoted, and then serves it): the static list names every host that
//! may serve the API during the fleet's swaps, as the actuator's failover
//! needs. Neither label can be set by a host's own kubelet (NodeRestriction
//! keeps `node-role.kubernetes.io/*` and `node-restriction.kubernetes.io/*`
//! from kubelets), so an agent cannot put itself in the list; a Node's
//! addresses are its own kubelet's, which is why each URL is only ever
//! reached with TLS verified against the cluster's CA (docs/security.md).
//!
//! The list is written once: the actuator does not follow the Nodes to
//! keep it current (docs/install.md says when to make the bundle again).

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Node;
use protocol::Names;

/// At most this many URLs: the actuator tries them in turn, each bounded,
/// so a list grown by mislabelled Nodes stays a bounded wait.
pub const MAX_API_SERVERS: usize = 16;

/// The API servers found, and the Nodes that counted but gave no address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// `https://ADDRESS:PORT`, in the order the actuator tries them.
    pub urls: Vec<String>,
    /// Nodes that count but have no InternalIP that is an IP address.
    pub no_address: Vec<String>,
}

/// The URLs of the API servers `own`'s actuator is given: the servers
/// (control-plane label) first, then the eligible hosts that are not
/// servers yet, each by Node name; `own` last of all (its own API server
/// goes away while it is switched); each at its first InternalIP and
/// `port`, duplicates dropped, at most [`MAX_API_SERVERS`].
pub fn api_servers(names: &Names, nodes: &[Node], own: &str, port: u16) -> Found {
    let mut counted: Vec<(bool, bool, &str, Option<IpAddr>)> = nodes
        .iter()
        .filter_map(|n| {
            let name = n.metadata.name.as_deref()?;
            let facts = kubeview::node_facts(names, n);
            if !facts.control_plane_label && !facts.eligible {
                return None;
            }
            Some((
                name == own,
                !facts.control_plane_label,
                name,
                internal_ip(n),
            ))
        })
        .collect();
    counted.sort();
    let mut found = Found::default();
    for (_, _, name, ip) in counted {
        match ip {
            None => found.no_address.push(name.to_string()),
            Some(ip) => {
                let url = match ip {
                    IpAddr::V4(a) => format!("https://{a}:{port}"),
                    IpAddr::V6(a) => format!("https://[{a}]:{port}"),
                };
                if !found.urls.contains(&url) && found.urls.len() < MAX_API_SERVERS {
                    found.urls.push(url);
                }
            }
        }
    }
    found
}

/// The Node's first `InternalIP`, if it is an IP address (anything else a
/// kubelet wrote is not used: it could carry text into the file).
fn internal_ip(n: &Node) -> Option<IpAddr> {
    n.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .and_then(|a| a.address.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::names::{ELIGIBLE_LABEL, K3S_CONTROL_PLANE_LABEL, K3S_ETCD_ROLE_LABEL};
    use serde_json::json;

    fn node(name: &str, labels: &[&str], ip: Option<&str>) -> Node {
        let labels: serde_json::Map<_, _> = labels
            .iter()
            .map(|l| (l.to_string(), json!("true")))
            .collect();
        let addresses: Vec<_> = ip
            .into_iter()
            .map(|a| json!({"type": "InternalIP", "address": a}))
            .chain([json!({"type": "Hostname", "address": name})])
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "status": {"addresses": addresses},
        }))
        .unwrap()
    }

    fn urls(nodes: &[Node], own: &str) -> Vec<String> {
        api_servers(&Names::default(), nodes, own, 6443).urls
    }

    #[test]
    fn servers_come_first_then_eligible_hosts_and_the_host_itself_last() {
        let nodes = [
            node("a-agent", &[ELIGIBLE_LABEL], Some("10.0.0.4")),
            node(
                "z-server",
                &[K3S_CONTROL_PLANE_LABEL, K3S_ETCD_ROLE_LABEL],
                Some("10.0.0.2"),
            ),
            node("b-server", &[K3S_CONTROL_PLANE_LABEL], Some("10.0.0.1")),
            node("me", &[ELIGIBLE_LABEL], Some("10.0.0.9")),
            node("c-agent", &[ELIGIBLE_LABEL], Some("10.0.0.3")),
        ];
        assert_eq!(
            urls(&nodes, "me"),
            [
                "https://10.0.0.1:6443",
                "https://10.0.0.2:6443",
                "https://10.0.0.4:6443",
                "https://10.0.0.3:6443",
                "https://10.0.0.9:6443",
            ]
        );
    }

    #[test]
    fn an_agent_that_is_not_eligible_and_an_etcd_only_server_serve_no_api_and_are_left_out() {
        let nodes = [
            node("agent", &[], Some("10.0.0.5")),
            node("etcd-only", &[K3S_ETCD_ROLE_LABEL], Some("10.0.0.6")),
            node(
                "legacy",
                &["github-runner.exadev.com/voter-eligible"],
                Some("10.0.0.7"),
            ),
            node("server", &[K3S_CONTROL_PLANE_LABEL], Some("10.0.0.1")),
        ];
        assert_eq!(urls(&nodes, "agent"), ["https://10.0.0.1:6443"]);
    }

    #[test]
    fn an_address_that_is_no_ip_is_never_written_and_its_node_is_named() {
        let nodes = [
            node("odd", &[K3S_CONTROL_PLANE_LABEL], Some("10.0.0.1\"\nx = 1")),
            node("none", &[K3S_CONTROL_PLANE_LABEL], None),
            node("v6", &[K3S_CONTROL_PLANE_LABEL], Some("fd00::1")),
        ];
        let found = api_servers(&Names::default(), &nodes, "x", 7443);
        assert_eq!(found.urls, ["https://[fd00::1]:7443"]);
        assert_eq!(found.no_address, ["none", "odd"]);
    }

    #[test]
    fn the_list_is_bounded_and_holds_each_address_once() {
        let mut nodes: Vec<Node> = (0..40)
            .map(|i| {
                node(
                    &format!("s{i:02}"),
                    &[K3S_CONTROL_PLANE_LABEL],
                    Some(&format!("10.0.1.{i}")),
                )
            })
            .collect();
        nodes.push(node("twin", &[K3S_CONTROL_PLANE_LABEL], Some("10.0.1.0")));
        let found = urls(&nodes, "x");
        assert_eq!(found.len(), MAX_API_SERVERS);
        assert_eq!(found[0], "https://10.0.1.0:6443");
        assert_eq!(
            found
                .iter()
                .filter(|u| *u == "https://10.0.1.0:6443")
                .count(),
            1
        );
    }
}
