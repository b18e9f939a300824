//! The controller's part of a swap, done by hand through the API: the
//! regrade Lease taken and renewed, each step asked of a host, its report
//! read back.
//!
//! Every write to a Node or the Lease is made as the controller makes it
//! (`controller/src/act.rs`): the object read into its view
//! ([`kubeview::node_facts`], [`kubeview::lease_facts`]), the view after the
//! action from protocol's effects ([`fleetdecide::node_after`],
//! [`fleetdecide::lease_after`]), and the write from both through
//! kubeview ([`kubeview::node_patch`], [`kubeview::lease_object`]). So the
//! lab tests the actuator on exactly the marks the controller writes (the
//! `protocol` mark included), not on a copy of them.

use std::time::Duration;

use anyhow::{Context, bail};
use clock::Clock;
use fleetdecide::{Action, Outcome, Start, Writer, lease_after, node_after};
use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{ConfigMap, Node},
    },
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{Api, api::PostParams};
use protocol::{
    LeaseFacts, Names, NodeName, Phase, Report, SwapId,
    names::LEASE_NAMESPACE,
    report::{Detail, ReportStep},
};
use serde_json::Value;

use crate::{api::Apis, spec::LabSpec};

/// The Lease's duration the hand writes, in seconds (renewed every 5 s by
/// the callers that hold it through a step).
const LEASE_SECS: i64 = 30;

/// The hand's instance id on the Lease (a controller writes its own).
const INSTANCE: &str = "fleet-role-lab";

/// How often a write is tried again after a conflict (another writer, a
/// renewer, between the read and the write).
const CONFLICT_TRIES: usize = 5;

/// A step asked of a host by hand, written as the controller writes it.
#[derive(Debug, Clone, Copy)]
pub enum Ask<'a> {
    /// Promote to a voter under `swap`, joining the server `join`.
    Promote {
        /// The swap id.
        swap: &'a str,
        /// The voter to join.
        join: &'a str,
    },
    /// Step down to etcd-only under `swap`, cordoned first when `cordon`
    /// (the controller cordons before it drains).
    StepDown {
        /// The swap id.
        swap: &'a str,
        /// Cordon the Node in the same write.
        cordon: bool,
    },
    /// Roll a promotion back, under the swap the Node is marked with (the
    /// swap's mark stays as it was).
    Rollback,
    /// Take an etcd snapshot named for `swap`.
    Snapshot {
        /// The swap id.
        swap: &'a str,
    },
}

/// The fleet-role side of the API, by hand.
pub struct Hand {
    /// Admin access.
    pub apis: Apis,
    /// The protocol's names.
    pub names: Names,
    /// The clock the Lease's times and the waits are read on.
    clock: Clock,
}

/// A name checked as the protocol checks it.
fn node_name(raw: &str) -> anyhow::Result<NodeName> {
    NodeName::parse(raw).with_context(|| format!("node {raw:?}"))
}

/// A swap id checked as the protocol checks it.
fn swap_id(raw: &str) -> anyhow::Result<SwapId> {
    SwapId::parse(raw).with_context(|| format!("swap {raw:?}"))
}

impl Hand {
    /// A hand on the lab.
    pub fn new(spec: &LabSpec) -> anyhow::Result<Hand> {
        Ok(Hand {
            apis: Apis::for_lab(spec)?,
            names: Names::default(),
            clock: Clock::system(),
        })
    }

    /// A hand through `apis`, reading `clock`.
    pub fn with_apis(apis: Apis, clock: Clock) -> Hand {
        Hand {
            apis,
            names: Names::default(),
            clock,
        }
    }

    /// Asks `node` for a step as the controller does: first the regrade
    /// Lease records the ask (`swap-asked`, and the snapshot voter for a
    /// snapshot), then the Node gets its marks (desired role, swap, step,
    /// the join target, the protocol mark; or the snapshot request) in one
    /// write, with the cordon when asked. A host takes a step only once the
    /// Lease asks for it and names it, so the Lease must be held for a swap
    /// naming `node` on the right side ([`Hand::hold_lease`]).
    pub async fn ask(&self, node: &str, ask: Ask<'_>) -> anyhow::Result<()> {
        let name = node_name(node)?;
        let before = self.node_facts(node).await?;
        let action =
            match ask {
                // The hand reads no view of etcd: it records no join
                // address, and the host checks none (as for a Lease of an
                // earlier controller).
                Ask::Promote { swap, join } => Action::Promote {
                    node: name.clone(),
                    join: node_name(join)?,
                    join_address: None,
                    swap: swap_id(swap)?,
                },
                Ask::StepDown { swap, .. } => Action::StepDown {
                    node: name.clone(),
                    swap: swap_id(swap)?,
                },
                Ask::Rollback => {
                    Action::Rollback {
                        node: name.clone(),
                        swap: swap_id(before.marks.swap.as_deref().with_context(|| {
                            format!("{node} is marked with no swap to roll back")
                        })?)?,
                    }
                }
                Ask::Snapshot { swap } => Action::RequestSnapshot {
                    node: name.clone(),
                    swap: swap_id(swap)?,
                },
            };
        self.write_lease(&action).await?;
        let mut after = node_after(&before, &action).context("an ask writes the Node")?;
        if let Ask::StepDown { cordon: true, .. } = ask {
            // The controller cordons in a write of its own before it
            // drains; here in the same one, as the step is asked at once.
            after = node_after(&after, &Action::Cordon { node: name })
                .context("a cordon writes the Node")?;
        }
        match kubeview::node_patch(&self.names, &before, &after) {
            Some(patch) => self.patch_node(node, patch).await,
            None => Ok(()),
        }
    }

    /// `node` as fleet-role sees it.
    async fn node_facts(&self, node: &str) -> anyhow::Result<protocol::NodeFacts> {
        Ok(kubeview::node_facts(&self.names, &self.node(node).await?))
    }

    /// Takes the regrade Lease for `swap` of `out` for `incoming`, as
    /// `holder`, as a controller starting the swap does (or renews it when
    /// `holder` already holds it for that swap).
    pub async fn hold_lease(
        &self,
        swap: &str,
        out: &str,
        incoming: &str,
        holder: &str,
    ) -> anyhow::Result<()> {
        let take = Action::TakeLease {
            swap: swap_id(swap)?,
            out: Some(node_name(out)?),
            incoming: Some(node_name(incoming)?),
            start: Start::Fresh,
        };
        self.write_lease_as(holder, |before| {
            let held = before.holder.as_deref() == Some(holder)
                && before.swap.as_deref() == Some(swap)
                && before.swap_out.as_deref() == Some(out)
                && before.swap_in.as_deref() == Some(incoming);
            if held {
                Action::RenewLease
            } else {
                take.clone()
            }
        })
        .await
    }

    /// Renews the regrade Lease as it stands (the controller's renewal:
    /// only its renew time moves).
    pub async fn renew_lease(&self) -> anyhow::Result<()> {
        let holder = self.names.controller_identity.clone();
        self.write_lease_as(&holder, |_| Action::RenewLease).await
    }

    /// Writes the Lease after `action`, as the controller's identity.
    async fn write_lease(&self, action: &Action) -> anyhow::Result<()> {
        let holder = self.names.controller_identity.clone();
        self.write_lease_as(&holder, |_| action.clone()).await
    }

    /// Reads the Lease, takes the action `pick` chooses from it, and writes
    /// the Lease after it as the controller does (created when missing,
    /// else replaced at the version read: a conflict is read again).
    async fn write_lease_as(
        &self,
        holder: &str,
        pick: impl Fn(&LeaseFacts) -> Action,
    ) -> anyhow::Result<()> {
        for _ in 0..CONFLICT_TRIES {
            let read = self.lease().await?;
            let before = read.as_ref().map(|l| kubeview::lease_facts(&self.names, l));
            let action = pick(&before.clone().unwrap_or_default());
            let writer = Writer {
                identity: holder,
                instance: INSTANCE,
                lease_duration: LEASE_SECS,
                now: self.clock.unix_secs(),
            };
            let Some(after) = lease_after(before.as_ref(), &action, writer) else {
                bail!("{action:?} does not write the Lease");
            };
            let stamp = Timestamp::from_millisecond(
                i64::try_from(self.clock.unix_millis()).unwrap_or(i64::MAX),
            )
            .context("the clock is past any calendar")?;
            let lease = kubeview::lease_object(
                &self.names,
                read.as_ref(),
                &before.unwrap_or_default(),
                &after,
                MicroTime(stamp),
            );
            let creating = read.is_none();
            let written = self
                .apis
                .any(|c| {
                    let (l, name) = (lease.clone(), self.names.lease_name.clone());
                    async move {
                        let api = Api::<Lease>::namespaced(c, LEASE_NAMESPACE);
                        let r = if creating {
                            api.create(&PostParams::default(), &l).await
                        } else {
                            api.replace(&name, &PostParams::default(), &l).await
                        };
                        match r {
                            Ok(_) => Ok(true),
                            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                            Err(e) => Err(e),
                        }
                    }
                })
                .await?;
            if written {
                return Ok(());
            }
        }
        bail!("the regrade Lease kept changing under {CONFLICT_TRIES} writes")
    }

    /// The regrade Lease, if it exists.
    async fn lease(&self) -> anyhow::Result<Option<Lease>> {
        self.apis
            .any(|c| {
                let name = self.names.lease_name.clone();
                async move {
                    Api::<Lease>::namespaced(c, LEASE_NAMESPACE)
                        .get_opt(&name)
                        .await
                }
            })
            .await
    }

    /// Merges labels, annotations and `spec` into a Node (`null` removes).
    pub async fn patch_node(&self, node: &str, patch: Value) -> anyhow::Result<()> {
        self.apis.patch_node(node, &patch).await
    }

    /// A Node.
    pub async fn node(&self, node: &str) -> anyhow::Result<Node> {
        self.apis
            .any(|c| {
                let n = node.to_string();
                async move { Api::<Node>::all(c).get(&n).await }
            })
            .await
    }

    /// Releases the Lease as the controller does at a swap's end (its
    /// `ReleaseLease` effect: the holder and the swap's names cleared, the
    /// swap recorded as done).
    pub async fn release_lease(&self) -> anyhow::Result<()> {
        self.write_lease(&Action::ReleaseLease {
            outcome: Outcome::Done { warning: None },
        })
        .await
    }

    /// A host's report: from its own ConfigMap, or from its key of the
    /// shared ConfigMap that the previous release's actuators write, where
    /// that is newer (as the controller reads it).
    pub async fn report(&self, node: &str) -> anyhow::Result<Option<Report>> {
        let own = self.own_report(node).await?;
        let shared = self.shared_report_raw(node).await?;
        Ok(
            kubeview::hostobjects::newer_report(own.as_deref(), shared.as_deref())
                .and_then(Report::from_json),
        )
    }

    /// A host's report under its key of the shared ConfigMap that the
    /// previous release's actuators write.
    pub async fn shared_report(&self, node: &str) -> anyhow::Result<Option<Report>> {
        Ok(self
            .shared_report_raw(node)
            .await?
            .as_deref()
            .and_then(Report::from_json))
    }

    /// A host's report, raw, from its own ConfigMap.
    async fn own_report(&self, node: &str) -> anyhow::Result<Option<String>> {
        let ns = self.names.hosts_namespace.clone();
        let cm = self
            .apis
            .any(|c| {
                let (ns, node) = (ns.clone(), node.to_string());
                async move { Api::<ConfigMap>::namespaced(c, &ns).get_opt(&node).await }
            })
            .await?;
        Ok(cm
            .as_ref()
            .and_then(kubeview::hostobjects::report_value)
            .map(String::from))
    }

    /// A host's report, raw, under its key of the shared ConfigMap.
    async fn shared_report_raw(&self, node: &str) -> anyhow::Result<Option<String>> {
        let ns = self.names.report_namespace.clone();
        let cm = self
            .apis
            .any(|c| {
                let ns = ns.clone();
                async move {
                    Api::<ConfigMap>::namespaced(c, &ns)
                        .get_opt(protocol::names::REPORT_CONFIGMAP)
                        .await
                }
            })
            .await?;
        Ok(cm.and_then(|c| c.data).and_then(|mut d| d.remove(node)))
    }

    /// [`Hand::wait_step`] while renewing the regrade Lease every 5 s as
    /// `holder`, as a controller does through a step: at k3s's pace (a
    /// learner promoted at the leader's next 15 s round) a promotion
    /// outlasts the Lease's 30 s, and an actuator whose Lease expired holds
    /// the step until it is renewed.
    pub async fn wait_step_holding(
        &self,
        node: &str,
        (swap, out, incoming, holder): (&str, &str, &str, &str),
        step: ReportStep,
        timeout: Duration,
        progress: &dyn Fn(&Report),
    ) -> anyhow::Result<Report> {
        let renew = async {
            loop {
                // A failed renewal is tried again at the next round; the
                // wait's own bound ends the whole.
                let _ = self.hold_lease(swap, out, incoming, holder).await;
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        };
        tokio::select! {
            r = self.wait_step(node, swap, step, timeout, progress) => r,
            () = renew => bail!("the Lease's renewal ended"),
        }
    }

    /// Waits for `node`'s report of `step` in `swap` to be done (a refusal or
    /// failure ends the wait with an error); `progress` is told each new detail.
    pub async fn wait_step(
        &self,
        node: &str,
        swap: &str,
        step: ReportStep,
        timeout: Duration,
        progress: &dyn Fn(&Report),
    ) -> anyhow::Result<Report> {
        let start = self.clock.now();
        let mut last: Option<(Phase, Option<Detail>)> = None;
        loop {
            if let Ok(Some(r)) = self.report(node).await
                && r.swap.as_ref().map(|s| s.as_str()) == Some(swap)
                && r.step == step
            {
                if last != Some((r.phase, r.detail)) {
                    last = Some((r.phase, r.detail));
                    progress(&r);
                }
                match r.phase {
                    Phase::Done => return Ok(r),
                    Phase::Refused | Phase::Failed => {
                        bail!(
                            "{node}: {} {:?}: {}",
                            step.as_str(),
                            r.phase,
                            r.reason.unwrap_or_default()
                        )
                    }
                    _ => {}
                }
            }
            if self.clock.since(start) > timeout {
                bail!(
                    "timed out waiting for {node} to finish {} of {swap}",
                    step.as_str()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::{NodeFacts, StepKind};

    /// A hand on a real kube-apiserver, with the Nodes `names` registered.
    async fn hand_on(plane: &testcp::ControlPlane, names: &[&str]) -> Hand {
        let client = plane.admin_client().unwrap();
        for n in names {
            let node: Node =
                serde_json::from_value(serde_json::json!({"metadata": {"name": n}})).unwrap();
            Api::<Node>::all(client.clone())
                .create(&PostParams::default(), &node)
                .await
                .unwrap();
        }
        Hand::with_apis(
            Apis::from_clients(plane.urls(), vec![client]),
            Clock::manual(1_796_124_731),
        )
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_step_asked_by_hand_leaves_the_node_and_the_lease_as_the_controllers_write_does() {
        let plane = testcp::ControlPlane::start().await.unwrap();
        let hand = hand_on(&plane, &["agent-1", "server-1"]).await;
        hand.hold_lease("swap-7", "server-2", "agent-1", "fleet-role-controller")
            .await
            .unwrap();
        let before = hand.node_facts("agent-1").await.unwrap();
        hand.ask(
            "agent-1",
            Ask::Promote {
                swap: "swap-7",
                join: "server-1",
            },
        )
        .await
        .unwrap();

        // The Node reads back as the controller's own effect makes it, the
        // protocol mark included.
        let promote = Action::Promote {
            node: NodeName::parse("agent-1").unwrap(),
            join: NodeName::parse("server-1").unwrap(),
            join_address: None,
            swap: SwapId::parse("swap-7").unwrap(),
        };
        let expected: NodeFacts = node_after(&before, &promote).unwrap();
        let written = hand.node_facts("agent-1").await.unwrap();
        assert_eq!(written.marks, expected.marks);
        assert_eq!(written.marks.protocol, Some(protocol::version::mark()));
        assert_eq!(
            written.marks.step.as_deref(),
            Some(StepKind::Promote.as_str())
        );

        // The Lease names the host on the side the step needs, and asks it.
        let lease = kubeview::lease_facts(&hand.names, &hand.lease().await.unwrap().unwrap());
        assert_eq!(lease.holder.as_deref(), Some("fleet-role-controller"));
        assert_eq!(lease.swap_in.as_deref(), Some("agent-1"));
        assert_eq!(lease.swap_out.as_deref(), Some("server-2"));
        assert_eq!(lease.asked.as_deref(), Some("promote"));
        assert_eq!(lease.protocol, Some(protocol::version::mark()));

        // Held again for the same swap, it is renewed, its ask kept.
        hand.clock.advance(Duration::from_secs(5));
        hand.hold_lease("swap-7", "server-2", "agent-1", "fleet-role-controller")
            .await
            .unwrap();
        let renewed = kubeview::lease_facts(&hand.names, &hand.lease().await.unwrap().unwrap());
        assert_eq!(renewed.asked.as_deref(), Some("promote"));
        assert_eq!(renewed.renew_time, Some(1_796_124_736));
    }
}
