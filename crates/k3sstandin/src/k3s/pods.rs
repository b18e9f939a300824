//! The pods the embedded kubelet runs, as k3s's kubelet runs them: the Pods
//! in the API bound to this Node (`spec.nodeName`), one shim process each.
//!
//! More in docs/internals.md, "k3sstandin: k3s::pods".

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams, Preconditions},
};
use serde_json::json;
use tracing::{info, warn};

use super::node::Kubelet;

/// The shim's environment variable naming its pod's uid.
pub const POD_ENV: &str = "FLEET_ROLE_LAB_POD";

/// How often the kubelet syncs its pods.
pub const SYNC_EVERY: Duration = Duration::from_secs(1);

/// A pod, as the kubelet names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid (what a shim carries).
    pub uid: String,
}

/// What one sync does.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PodPlan {
    /// Pods to start a shim for.
    pub start: Vec<PodRef>,
    /// Shims to kill: those of pods being deleted, and orphans.
    pub kill: Vec<u32>,
    /// Pods being deleted whose termination to confirm (grace 0), once
    /// their shims are killed.
    pub confirm: Vec<PodRef>,
}

fn pod_ref(p: &Pod) -> Option<PodRef> {
    Some(PodRef {
        namespace: p.metadata.namespace.clone()?,
        name: p.metadata.name.clone()?,
        uid: p.metadata.uid.clone()?,
    })
}

/// The sync's decision: `pods` are the Pods bound to this Node, `running`
/// this host's shims by the uid they carry. A shim that carries no uid is
/// not the kubelet's and is left alone.
pub fn plan(pods: &[Pod], running: &BTreeMap<String, Vec<u32>>) -> PodPlan {
    let mut plan = PodPlan::default();
    let mut known = BTreeSet::new();
    for p in pods {
        let Some(r) = pod_ref(p) else { continue };
        known.insert(r.uid.clone());
        let shims = running.get(&r.uid).cloned().unwrap_or_default();
        if p.metadata.deletion_timestamp.is_some() {
            plan.kill.extend(shims);
            plan.confirm.push(r);
            continue;
        }
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        // A pod that ended is not run again (bare lab pods never end).
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        if shims.is_empty() {
            plan.start.push(r);
        }
    }
    for (uid, pids) in running {
        if !uid.is_empty() && !known.contains(uid) {
            plan.kill.extend(pids);
        }
    }
    plan
}

/// This host's shims, by the pod uid each carries (`""`: none).
pub fn running(root: &Path) -> BTreeMap<String, Vec<u32>> {
    let mut by_pod: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for pid in host::shims::find(&host::HostPaths::new(root)) {
        let uid = fs::read(format!("/proc/{pid}/environ"))
            .ok()
            .and_then(|env| {
                env.split(|b| *b == 0).find_map(|kv| {
                    let kv = String::from_utf8_lossy(kv);
                    kv.strip_prefix(&format!("{POD_ENV}=")).map(str::to_string)
                })
            })
            .unwrap_or_default();
        by_pod.entry(uid).or_default().push(pid);
    }
    by_pod
}

/// Starts one detached shim for pod `uid`.
fn start_shim(root: &Path, uid: &str) -> anyhow::Result<()> {
    let bin = root.join("var/lib/rancher/k3s/data/lab0001/bin");
    let shim = bin.join("containerd-shim-runc-v2");
    if !shim.exists() {
        fs::create_dir_all(&bin)?;
        fs::copy("/bin/sleep", &shim).context("a shim (a copy of sleep)")?;
    }
    // `sh` exits at once and leaves the shim to init, which reaps it when
    // it is killed (no zombie of the kubelet's, which would still count).
    let status = Command::new("sh")
        .arg("-c")
        .arg("\"$0\" infinity >/dev/null 2>&1 &")
        .arg(&shim)
        .env(POD_ENV, uid)
        .stdin(Stdio::null())
        .status()
        .context("starting a pod's shim")?;
    anyhow::ensure!(status.success(), "starting a pod's shim: sh {status}");
    Ok(())
}

fn kill(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let ids: Vec<String> = pids.iter().map(u32::to_string).collect();
    // kill(1) returns at once; a shim it missed is found again next sync.
    let _ = Command::new("kill")
        .arg("-9")
        .args(&ids)
        .stderr(Stdio::null())
        .status();
}

/// The Pods bound to this Node.
async fn bound_pods(kubelet: &Kubelet) -> anyhow::Result<Vec<Pod>> {
    let selector = format!("spec.nodeName={}", kubelet.name);
    let list = kubelet
        .apis
        .any(|c| {
            let lp = ListParams::default().fields(&selector);
            async move { Api::<Pod>::all(c).list(&lp).await }
        })
        .await
        .context("listing the Node's pods")?;
    Ok(list.items)
}

/// One sync of the Node's pods (see the module's documentation). With no
/// API to answer, nothing is changed: the pods run on as they are.
pub async fn sync(kubelet: &Kubelet, root: &Path) -> anyhow::Result<()> {
    let pods = bound_pods(kubelet).await?;
    let plan = plan(&pods, &running(root));
    kill(&plan.kill);
    for p in &plan.confirm {
        // Termination confirmed only once no shim of it runs.
        if running(root).get(&p.uid).is_some_and(|s| !s.is_empty()) {
            continue;
        }
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(p.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match kubelet
            .apis
            .any(|c| {
                let (ns, name, dp) = (p.namespace.clone(), p.name.clone(), dp.clone());
                async move { Api::<Pod>::namespaced(c, &ns).delete(&name, &dp).await }
            })
            .await
        {
            Ok(_) => info!("pod {}/{} terminated and deleted", p.namespace, p.name),
            Err(e) => warn!(
                "confirming pod {}/{}'s deletion: {e:#}",
                p.namespace, p.name
            ),
        }
    }
    for p in &plan.start {
        start_shim(root, &p.uid)?;
        let pod = pods
            .iter()
            .find(|x| x.metadata.uid.as_deref() == Some(&p.uid));
        let status = running_status(pod);
        info!(
            "pod {}/{} started (restarts: {})",
            p.namespace, p.name, status["status"]["containerStatuses"][0]["restartCount"]
        );
        if let Err(e) = kubelet
            .apis
            .any(|c| {
                let (ns, name, s) = (p.namespace.clone(), p.name.clone(), status.clone());
                async move {
                    Api::<Pod>::namespaced(c, &ns)
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&s))
                        .await
                }
            })
            .await
        {
            warn!("pod {}/{}'s status: {e:#}", p.namespace, p.name);
        }
    }
    Ok(())
}

/// A started pod's status: `Running` and Ready, its container's restart
/// count one more than before if it ran before (a killed shim brought back
/// shows in `kubectl get pods` as a restart, as a kubelet's does).
fn running_status(pod: Option<&Pod>) -> serde_json::Value {
    let clock = clock::Clock::system();
    let now = crate::stamps::rfc3339(&clock);
    let status = pod.and_then(|p| p.status.as_ref());
    let ran = status.and_then(|s| s.phase.as_deref()) == Some("Running");
    let before = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map_or(0, |c| c.restart_count);
    let (name, image) = pod
        .and_then(|p| p.spec.as_ref())
        .and_then(|s| s.containers.first())
        .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
        .unwrap_or_default();
    json!({"status": {
        "phase": "Running",
        "startTime": status.and_then(|s| s.start_time.clone()).map_or(json!(now), |t| json!(t)),
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        "containerStatuses": [{
            "name": name, "image": image, "imageID": "", "ready": true, "started": true,
            "restartCount": if ran { before + 1 } else { before },
            "state": {"running": {"startedAt": now}},
        }],
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
        }))
        .unwrap()
    }

    fn running_of(pairs: &[(&str, u32)]) -> BTreeMap<String, Vec<u32>> {
        let mut m: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for (uid, pid) in pairs {
            m.entry(uid.to_string()).or_default().push(*pid);
        }
        m
    }

    #[test]
    fn a_bound_pod_without_a_shim_is_started_and_one_with_a_shim_is_left_running() {
        let p = plan(&[pod("a", "u1"), pod("b", "u2")], &running_of(&[("u2", 7)]));
        assert_eq!(
            p.start.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
        assert!(p.kill.is_empty() && p.confirm.is_empty(), "{p:?}");
    }

    #[test]
    fn a_pod_being_deleted_has_its_shim_killed_and_its_termination_confirmed() {
        let mut evicted = pod("a", "u1");
        evicted.metadata.deletion_timestamp =
            Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
        let p = plan(&[evicted], &running_of(&[("u1", 7)]));
        assert_eq!(p.kill, [7]);
        assert_eq!(p.confirm.len(), 1);
        assert!(
            p.start.is_empty(),
            "a pod being deleted is not started again"
        );
    }

    #[test]
    fn a_pod_that_ran_before_is_started_again_as_a_restart() {
        let mut p = pod("a", "u1");
        assert_eq!(
            running_status(Some(&p))["status"]["containerStatuses"][0]["restartCount"],
            0
        );
        p.status = serde_json::from_value(running_status(Some(&p))["status"].clone()).unwrap();
        assert_eq!(
            running_status(Some(&p))["status"]["containerStatuses"][0]["restartCount"],
            1
        );
    }

    #[test]
    fn a_shim_whose_pod_is_gone_is_killed_and_one_of_no_pod_is_left_alone() {
        let p = plan(&[], &running_of(&[("u9", 9), ("", 3)]));
        assert_eq!(p.kill, [9]);
    }
}
