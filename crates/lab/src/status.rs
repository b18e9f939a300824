//! `fleet-role-lab status`: one line per host (its role file, its active
//! units, its Node's readiness and etcd voter condition) and etcd's members,
//! as the operator of the lab checks it between steps.

use crate::systemd_lab::SystemdLab;
use std::fmt::Write as _;

use protocol::names::K3S_ETCD_IS_VOTER;

use crate::{hand_controller::Hand, scenario::members};

/// The lines of `status`: the hosts, their units and etcd's members.
pub async fn status_lines(hosts: &SystemdLab) -> Vec<String> {
    let spec = hosts.spec();
    let mut out = vec![format!("lab {}", spec.dir.display())];
    let hand = Hand::new(spec).ok();
    for h in &spec.hosts {
        let root = spec.root(&h.name);
        let role = std::fs::read_to_string(root.join("var/lib/rancher/k3s/fleet-role"))
            .unwrap_or_default();
        let active: Vec<&str> = ["k3s", "k3s-agent", "fleet-role-actuator"]
            .into_iter()
            .filter(|u| hosts.is_active(&h.name, u).unwrap_or(false))
            .collect();
        let mut line = format!(
            "{:<10} {:<15} role file {:<7} active: {}",
            h.name,
            h.ip,
            role.trim(),
            active.join(",")
        );
        if let Some(hand) = &hand
            && let Ok(node) = hand.node(&h.name).await
        {
            let _ = write!(
                line,
                "  Ready={} EtcdIsVoter={}",
                kubeview::condition_true(&node, "Ready"),
                kubeview::condition_true(&node, K3S_ETCD_IS_VOTER)
            );
        }
        out.push(line);
    }
    match members(spec).await {
        Ok(ms) => {
            for m in ms {
                out.push(format!(
                    "etcd member {:<22} {}",
                    m.name,
                    if m.is_learner { "learner" } else { "voter" }
                ));
            }
        }
        Err(e) => out.push(format!("etcd: {e:#}")),
    }
    out
}
