//! The drain of the outgoing voter before its step-down: its pods are
//! evicted through the Eviction API (so PodDisruptionBudgets hold, and each
//! pod gets its own termination grace, or the operator's bound on it),
//! within the drain step's timeout.
//!
//! More in docs/internals.md, "fleetfacts: drain".

use serde::Serialize;

/// How long the shell waits after a round of evictions in which a budget
/// refused one (HTTP 429) before the next decision: refusals are asked
/// again at this pace, never in a tight loop.
pub const EVICTION_RETRY_SECS: u64 = 5;

/// How often the shell looks at the pods again while evicted ones
/// terminate (pods are not watched; one list each time).
pub const DRAIN_RECHECK_SECS: i64 = 1;

/// A pod on the outgoing Node, as the controller reads it (untrusted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodFacts {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Owned by a DaemonSet (left in place).
    pub daemon_set: bool,
    /// Owned by a controller (an ownerReference with `controller: true`: a
    /// ReplicaSet, a Job, a StatefulSet...), which starts it again
    /// elsewhere once it is evicted. A pod without one is gone for good.
    pub controlled: bool,
    /// A static pod's mirror (`kubernetes.io/config.mirror`): the API cannot
    /// evict it; it goes with the kubelet.
    pub mirror: bool,
    /// Its deletion has begun (an eviction or a delete was accepted): it is
    /// within its termination grace.
    pub terminating: bool,
    /// It has finished (`Succeeded` or `Failed`): nothing runs.
    pub finished: bool,
}

impl PodFacts {
    /// `namespace/name`, as the output names it.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether the drain must see it gone before the step-down.
    pub fn blocks_drain(&self) -> bool {
        !self.daemon_set && !self.mirror && !self.finished
    }

    /// Whether the drain refuses to evict it unless forced: it holds the
    /// drain open, no controller owns it, and its deletion has not begun
    /// (one already terminating is going anyway; evicting it ends nothing
    /// more).
    pub fn unmanaged(&self) -> bool {
        self.blocks_drain() && !self.controlled && !self.terminating
    }

    /// Whether its namespace and name are names the API could hold (a
    /// DNS-1123 label and subdomain, the rules of a swap id and a Node
    /// name), so an eviction request built from them addresses that pod
    /// only.
    pub fn addressable(&self) -> bool {
        protocol::validate::SwapId::parse(&self.namespace).is_ok()
            && protocol::validate::NodeName::parse(&self.name).is_ok()
    }
}

/// A pod to evict, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The pods on the outgoing Node the drain waits for, sorted.
pub fn blocking(pods: &[PodFacts]) -> Vec<&PodFacts> {
    let mut left: Vec<&PodFacts> = pods.iter().filter(|p| p.blocks_drain()).collect();
    left.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    left
}

/// The pods on the outgoing Node no controller owns, which the drain
/// evicts only when forced, sorted.
pub fn unmanaged(pods: &[PodFacts]) -> Vec<&PodFacts> {
    let mut left: Vec<&PodFacts> = pods.iter().filter(|p| p.unmanaged()).collect();
    left.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    left
}

/// At most this many pods are named in one line of output.
const NAMED: usize = 5;

/// The pods left, in one line (`a/x, b/y and 3 more`).
pub fn named(pods: &[&PodFacts]) -> String {
    let mut s: Vec<String> = pods
        .iter()
        .take(NAMED)
        .map(|p| protocol::text::one_line(&p.key()))
        .collect();
    if pods.len() > NAMED {
        s.push(format!("{} more", pods.len() - NAMED));
    }
    s.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, name: &str) -> PodFacts {
        PodFacts {
            namespace: ns.into(),
            name: name.into(),
            controlled: true,
            ..PodFacts::default()
        }
    }

    #[test]
    fn only_a_running_pod_no_controller_owns_is_refused_unless_forced() {
        let bare = PodFacts {
            controlled: false,
            ..pod("ci", "bare")
        };
        let ds = PodFacts {
            daemon_set: true,
            ..bare.clone()
        };
        let mirror = PodFacts {
            mirror: true,
            ..bare.clone()
        };
        let done = PodFacts {
            finished: true,
            ..bare.clone()
        };
        let going = PodFacts {
            terminating: true,
            ..bare.clone()
        };
        let a = PodFacts {
            name: "a".into(),
            ..bare.clone()
        };
        let pods = [bare, pod("ci", "owned"), ds, mirror, done, going, a];
        let refused: Vec<String> = unmanaged(&pods).iter().map(|p| p.key()).collect();
        assert_eq!(refused, ["ci/a", "ci/bare"]);
    }

    #[test]
    fn daemonset_mirror_and_finished_pods_do_not_hold_the_drain_open() {
        let ds = PodFacts {
            daemon_set: true,
            ..pod("kube-system", "svclb")
        };
        let mirror = PodFacts {
            mirror: true,
            ..pod("kube-system", "static")
        };
        let done = PodFacts {
            finished: true,
            ..pod("ci", "job-1")
        };
        let terminating = PodFacts {
            terminating: true,
            ..pod("ci", "job-2")
        };
        let pods = [ds, mirror, done, terminating, pod("ci", "job-3")];
        let left: Vec<String> = blocking(&pods).iter().map(|p| p.key()).collect();
        assert_eq!(left, ["ci/job-2", "ci/job-3"]);
    }

    #[test]
    fn a_pod_name_the_api_could_not_hold_is_not_addressable() {
        assert!(pod("ci", "job-1.a").addressable());
        for (ns, n) in [
            ("ci", "../x"),
            ("ci", "a/b"),
            ("ci", "Job"),
            ("", "x"),
            ("ci", ""),
            ("-ci", "x"),
        ] {
            assert!(!pod(ns, n).addressable(), "{ns}/{n}");
        }
        assert!(!pod(&"a".repeat(64), "x").addressable());
        assert!(!pod("ci", &"a".repeat(254)).addressable());
    }

    #[test]
    fn many_pods_left_are_named_five_then_counted() {
        let pods: Vec<PodFacts> = (0..7).map(|i| pod("ci", &format!("p{i}"))).collect();
        let refs: Vec<&PodFacts> = pods.iter().collect();
        assert_eq!(named(&refs), "ci/p0, ci/p1, ci/p2, ci/p3, ci/p4, 2 more");
        assert_eq!(named(&refs[..1]), "ci/p0");
    }
}
