//! The checks at a campaign's end, once every fault has healed and the
//! fleet is clean: etcd's members are exactly the voter Nodes and none is
//! a learner; `HashKV` is the same on every member; every actuator's report
//! is settled; the two k3s units were never active together on any host
//! (each host's journal holds the whole campaign).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use super::watch;
use crate::{etcd_gw, spec::LabSpec, systemd_lab::SystemdLab};

/// The checks once every fault has healed and the fleet is clean.
pub async fn checks(spec: &LabSpec, lab: &SystemdLab) -> Vec<String> {
    let mut out = Vec::new();
    // etcd's members are exactly the voter Nodes, with no learner.
    let apis = crate::api::Apis::for_lab(spec);
    let mut agree = Err(String::from("not checked"));
    let clock = clock::Clock::system();
    let start = clock.now();
    while clock.since(start) < Duration::from_secs(180) {
        agree = members_match_nodes(spec, apis.as_ref().ok()).await;
        if agree.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    if let Err(e) = agree {
        out.push(e);
    }
    // HashKV equal on every member, at one revision.
    if let Err(e) = hashes_agree(spec).await {
        out.push(e);
    }
    // Every actuator's report settled.
    if let Ok(hand) = crate::hand_controller::Hand::new(spec) {
        for h in &spec.hosts {
            match hand.report(&h.name).await {
                Ok(Some(r)) if !r.phase.is_settled() => out.push(format!(
                    "{}'s report is not settled: {:?} {:?}",
                    h.name, r.step, r.phase
                )),
                Err(e) => out.push(format!("{}'s report could not be read: {e:#}", h.name)),
                _ => {}
            }
        }
    }
    // The two k3s units never active together, from each host's journal.
    for h in &spec.hosts {
        let found = lab.machine(&h.name).and_then(|m| {
            tokio::task::block_in_place(|| crate::overlap::of_k3s_units(m, Duration::from_secs(60)))
        });
        match found {
            Ok(o) if o.is_empty() => {}
            Ok(o) => out.push(format!(
                "{}: the k3s units were active together: {o:?}",
                h.name
            )),
            Err(e) => out.push(format!("{}'s journal could not be read: {e:#}", h.name)),
        }
    }
    out
}

async fn members_match_nodes(
    spec: &LabSpec,
    apis: Option<&crate::api::Apis>,
) -> Result<(), String> {
    use k8s_openapi::api::core::v1::Node;
    let members = watch::members(spec).await.ok_or("no member answered")?;
    if let Some(l) = members.iter().find(|m| m.is_learner) {
        return Err(format!("a learner is left: {}", l.name));
    }
    let apis = apis.ok_or("no API client")?;
    let nodes = apis
        .any(|c| async move { kube::Api::<Node>::all(c).list(&Default::default()).await })
        .await
        .map_err(|e| format!("the Nodes could not be listed: {e:#}"))?;
    let voters: BTreeSet<String> = nodes
        .items
        .iter()
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(protocol::names::K3S_ETCD_ROLE_LABEL))
                .is_some_and(|v| v == "true")
        })
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let hosts: BTreeSet<String> = members
        .iter()
        .map(|m| watch::host_of(&m.name).to_string())
        .collect();
    if hosts != voters {
        return Err(format!(
            "etcd's members {hosts:?} are not the voter Nodes {voters:?}"
        ));
    }
    Ok(())
}

/// Every member's HashKV at one revision (the lowest current one: the
/// API servers write on, so the members' current revisions differ by a
/// moment) is the same.
async fn hashes_agree(spec: &LabSpec) -> Result<(), String> {
    let clock = clock::Clock::system();
    let start = clock.now();
    let mut last = String::new();
    while clock.since(start) < Duration::from_secs(60) {
        let members = watch::members(spec).await.unwrap_or_default();
        let eps: Vec<(String, etcd_gw::Endpoint)> = members
            .iter()
            .filter_map(|m| {
                let h = spec
                    .hosts
                    .iter()
                    .find(|h| h.name == watch::host_of(&m.name))?;
                Some((m.name.clone(), spec.etcd(h.ip).ok()?))
            })
            .collect();
        let mut current = Vec::new();
        for (_, ep) in &eps {
            if let Ok((_, rev)) = etcd_gw::hash_kv(ep, 0).await {
                current.push(rev);
            }
        }
        if let Some(&at) = current
            .iter()
            .min()
            .filter(|_| current.len() == members.len())
        {
            let mut seen = BTreeMap::new();
            for (name, ep) in &eps {
                if let Ok((hash, _)) = etcd_gw::hash_kv(ep, at).await {
                    seen.insert(name.clone(), hash);
                }
            }
            let distinct: BTreeSet<&u64> = seen.values().collect();
            if seen.len() == members.len() && !members.is_empty() && distinct.len() == 1 {
                return Ok(());
            }
            last = format!("at revision {at}: {seen:?}");
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    Err(format!("HashKV differs between the members: {last}"))
}
