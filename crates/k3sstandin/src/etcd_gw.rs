//! etcd's v3 JSON gateway (`/v3/...` on the client URL): membership, status,
//! puts and snapshots, over the member's TLS with a client certificate
//! ([`Endpoint`]). It is how the k3s stand-in manages real members without a
//! gRPC client (k3s itself links etcd's Go client).

use anyhow::{Context, bail};
use base64::Engine;
use serde_json::{Value, json};
use std::time::Duration;

pub use crate::etcd_tls::Endpoint;

/// One member, as etcd lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member id.
    pub id: u64,
    /// Its name (empty for a learner that has not started yet).
    pub name: String,
    /// Its peer URLs.
    pub peer_urls: Vec<String>,
    /// Its client URLs (empty for a learner that has not started yet).
    pub client_urls: Vec<String>,
    /// Whether it is a learner.
    pub is_learner: bool,
}

fn id_of(v: &Value) -> u64 {
    // The gateway writes uint64 as strings; accept numbers too.
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_u64().unwrap_or(0),
        _ => 0,
    }
}

async fn post(ep: &Endpoint, path: &str, body: Value) -> anyhow::Result<Value> {
    post_within(ep, path, body, Endpoint::bound_for(path)).await
}

/// A POST within `bound`.
async fn post_within(
    ep: &Endpoint,
    path: &str,
    body: Value,
    bound: Duration,
) -> anyhow::Result<Value> {
    let r = ep
        .request_within(path, Some(&body.to_string()), bound)
        .await
        .with_context(|| format!("POST {}{path}", ep.url()))?;
    let v: Value = serde_json::from_str(r.body.trim()).unwrap_or(Value::Null);
    if r.status != 200 {
        let msg = v
            .get("message")
            .or_else(|| v.get("error"))
            .and_then(Value::as_str)
            .unwrap_or(&r.body)
            .to_string();
        bail!("{path}: {} {msg}", r.status);
    }
    Ok(v)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|u| u.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn members_of(v: &Value) -> Vec<Member> {
    v.get("members")
        .and_then(Value::as_array)
        .map(|ms| {
            ms.iter()
                .map(|m| Member {
                    id: id_of(&m["ID"]),
                    name: m["name"].as_str().unwrap_or_default().to_string(),
                    peer_urls: strings(&m["peerURLs"]),
                    client_urls: strings(&m["clientURLs"]),
                    is_learner: m["isLearner"].as_bool().unwrap_or(false),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The member list, and the id of the member that answered.
pub async fn member_list(ep: &Endpoint) -> anyhow::Result<(u64, Vec<Member>)> {
    let v = post(
        ep,
        "/v3/cluster/member/list",
        json!({ "linearizable": true }),
    )
    .await?;
    Ok((id_of(&v["header"]["member_id"]), members_of(&v)))
}

/// The member list as the answering member has applied it (a
/// serializable read: no leader needed, so it answers during an election).
pub async fn member_list_local(ep: &Endpoint) -> anyhow::Result<Vec<Member>> {
    let v = post(
        ep,
        "/v3/cluster/member/list",
        json!({ "linearizable": false }),
    )
    .await?;
    Ok(members_of(&v))
}

/// Adds a learner with `peer_url`; returns its id and the new member list.
pub async fn member_add_learner(
    ep: &Endpoint,
    peer_url: &str,
) -> anyhow::Result<(u64, Vec<Member>)> {
    let v = post(
        ep,
        "/v3/cluster/member/add",
        json!({ "peerURLs": [peer_url], "isLearner": true }),
    )
    .await?;
    Ok((id_of(&v["member"]["ID"]), members_of(&v)))
}

/// Promotes a learner (etcd refuses until it has caught up).
pub async fn member_promote(ep: &Endpoint, id: u64) -> anyhow::Result<()> {
    post(
        ep,
        "/v3/cluster/member/promote",
        json!({ "ID": id.to_string() }),
    )
    .await
    .map(drop)
}

/// Removes a member.
pub async fn member_remove(ep: &Endpoint, id: u64) -> anyhow::Result<()> {
    post(
        ep,
        "/v3/cluster/member/remove",
        json!({ "ID": id.to_string() }),
    )
    .await
    .map(drop)
}

/// A member's own view, as `maintenance/status` answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The answering member's id.
    pub member: u64,
    /// The leader's id (0: none known).
    pub leader: u64,
    /// The raft index the member has applied (a learner's catch-up).
    pub raft_applied_index: u64,
}

/// The answering member's id, the leader's id and its applied raft index.
/// A member that reports errors (etcd's `errors` field, e.g. an alarm)
/// is an error here, as k3s's `getETCDStatus` takes it.
pub async fn status(ep: &Endpoint) -> anyhow::Result<Status> {
    let v = post(ep, "/v3/maintenance/status", json!({})).await?;
    if let Some(errors) = v["errors"].as_array().filter(|e| !e.is_empty()) {
        bail!("etcd member has status errors: {errors:?}");
    }
    Ok(Status {
        member: id_of(&v["header"]["member_id"]),
        leader: id_of(&v["leader"]),
        raft_applied_index: id_of(&v["raftAppliedIndex"]),
    })
}

/// A key's value, if it is set (a linearizable read).
pub async fn get(ep: &Endpoint, key: &str) -> anyhow::Result<Option<String>> {
    get_within(ep, key, Endpoint::bound_for("/v3/kv/range")).await
}

/// [`get`], waiting up to `bound` for the answer.
pub async fn get_within(
    ep: &Endpoint,
    key: &str,
    bound: Duration,
) -> anyhow::Result<Option<String>> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let v = post_within(ep, "/v3/kv/range", json!({ "key": b64.encode(key) }), bound).await?;
    let Some(value) = v["kvs"]
        .as_array()
        .and_then(|kvs| kvs.first())
        .and_then(|kv| kv["value"].as_str())
    else {
        return Ok(None);
    };
    let bytes = b64.decode(value).context("a value's base64")?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// Puts a key (a quorum write), within 5 s.
pub async fn put(ep: &Endpoint, key: &str, value: &str) -> anyhow::Result<()> {
    put_within(ep, key, value, Duration::from_secs(5)).await
}

/// Puts a key, waiting up to `bound` for the answer: a writer that counts
/// slow puts apart from failed ones gives etcd longer than its own request
/// timeout (7 s by default), so that etcd, not the writer, says a put
/// failed.
pub async fn put_within(
    ep: &Endpoint,
    key: &str,
    value: &str,
    bound: Duration,
) -> anyhow::Result<()> {
    let b64 = base64::engine::general_purpose::STANDARD;
    post_within(
        ep,
        "/v3/kv/put",
        json!({ "key": b64.encode(key), "value": b64.encode(value) }),
        bound,
    )
    .await
    .map(drop)
}

/// A member's hash of its key-value store up to `revision` (0: its
/// current one), and its current revision (`maintenance/hashkv`): members
/// that applied the same history give the same hash at the same revision.
pub async fn hash_kv(ep: &Endpoint, revision: u64) -> anyhow::Result<(u64, u64)> {
    let body = json!({ "revision": revision.to_string() });
    let v = post(ep, "/v3/maintenance/hashkv", body).await?;
    Ok((id_of(&v["hash"]), id_of(&v["header"]["revision"])))
}

/// A whole snapshot of the member's database (the gateway streams it as JSON
/// chunks of base64).
pub async fn snapshot(ep: &Endpoint) -> anyhow::Result<Vec<u8>> {
    let path = "/v3/maintenance/snapshot";
    let r = ep
        .request(path, Some("{}"))
        .await
        .with_context(|| format!("POST {}{path}", ep.url()))?;
    if r.status != 200 {
        bail!(
            "snapshot: {} {}",
            r.status,
            protocol::text::one_line(&r.body)
        );
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out = Vec::new();
    let stream = serde_json::Deserializer::from_str(&r.body).into_iter::<Value>();
    for chunk in stream {
        let chunk = chunk.context("a snapshot chunk")?;
        if let Some(err) = chunk.get("error") {
            bail!("snapshot: {err}");
        }
        if let Some(blob) = chunk["result"]["blob"].as_str() {
            out.extend(b64.decode(blob).context("a snapshot chunk's blob")?);
        }
    }
    if out.is_empty() {
        bail!("snapshot: the member sent no data");
    }
    Ok(out)
}
