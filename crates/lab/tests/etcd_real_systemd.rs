//! The k3s stand-in's etcd on real systemd, as unkind as k3s's: a learner
//! invisible on its Node, `EtcdIsVoter` written by the etcd leader's loop
//! only, a stalled learner removed by the leader, `RemovePeer` matching a
//! member's name and peer host, a removal that waits out the `k3s-etcd`
//! Lease of a holder cut off, a removed server's API server kept over its
//! closed etcd, and a join refused for its token. Fails (never skips) when
//! containers cannot run here.

use std::{net::Ipv4Addr, time::Duration};

use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use lab::{
    api::Apis,
    etcd_gw::{self, Member},
    spec::LabSpec,
    systemd_lab::SystemdLab,
};
use protocol::names::{
    K3S_ETCD_IS_VOTER, K3S_ETCD_NODE_ADDRESS, K3S_ETCD_NODE_NAME, K3S_ETCD_REMOVE,
    K3S_ETCD_REMOVED_NODE_NAME, K3S_ETCD_ROLE_LABEL,
};
use serde_json::json;

mod common;
use common::{SERIAL, lab_dir, lab_of, last_said};

const QUICK: Duration = Duration::from_secs(60);

/// The member list as the first server that answers has it.
async fn members(spec: &LabSpec) -> Vec<Member> {
    let start = clock::Clock::system().now();
    loop {
        for h in &spec.hosts {
            if let Ok((_, m)) = etcd_gw::member_list(&spec.etcd(h.ip).unwrap()).await {
                return m;
            }
        }
        assert!(start.elapsed() < QUICK, "no etcd member answers");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The member whose peer URL is on `ip`.
fn member_at(members: &[Member], ip: Ipv4Addr) -> Option<Member> {
    let host = format!("//{ip}:");
    members
        .iter()
        .find(|m| m.peer_urls.iter().any(|u| u.contains(&host)))
        .cloned()
}

async fn node(apis: &Apis, name: &str) -> Node {
    apis.any(|c| {
        let n = name.to_string();
        async move { Api::<Node>::all(c).get(&n).await }
    })
    .await
    .unwrap_or_else(|e| panic!("the Node {name}: {e:#}"))
}

fn annotation<'a>(n: &'a Node, key: &str) -> Option<&'a str> {
    n.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// `EtcdIsVoter`'s status and reason, if the Node has the condition.
fn etcd_is_voter(n: &Node) -> Option<(String, String)> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == K3S_ETCD_IS_VOTER)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

fn etcd_label(n: &Node) -> Option<&str> {
    n.metadata
        .labels
        .as_ref()?
        .get(K3S_ETCD_ROLE_LABEL)
        .map(String::as_str)
}

/// Polls `what` on `name`'s Node until `ok`, within `bound`; past it,
/// fails with the Node and the last words of the host's k3s units.
async fn wait_node(
    lab: &SystemdLab,
    apis: &Apis,
    name: &str,
    what: &str,
    bound: Duration,
    ok: impl Fn(&Node) -> bool,
) -> Node {
    let start = clock::Clock::system().now();
    loop {
        let n = node(apis, name).await;
        if ok(&n) {
            return n;
        }
        assert!(
            start.elapsed() < bound,
            "{name}: {what} not seen in {}s; the Node: labels {:?}, annotations {:?}, EtcdIsVoter {:?}; its k3s said:\n{}",
            bound.as_secs(),
            n.metadata.labels,
            n.metadata.annotations,
            etcd_is_voter(&n),
            common::last_said(lab, name, &["k3s", "k3s-agent"], 40)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// An agent turned into a joining server by hand, as a promotion's host
/// part does: its role file names the server, and `k3s` is started (its
/// `Conflicts=` stops the agent first). Its config's `server:` names
/// server-1, so it joins as a learner.
///
/// The host's actuator is stopped first. With no swap naming the host, a
/// server whose datastore's member etcd no longer lists comes home as an
/// agent by the actuator's own rule; between the leader's removal of a
/// stalled learner and k3s's next add (a second under load), this host is
/// such a server, and its actuator would rightly stop the k3s these tests
/// watch.
fn start_server_on(lab: &SystemdLab, host: &str) {
    lab.systemctl(host, &["stop", "fleet-role-actuator"])
        .unwrap();
    let root = lab.spec.root(host);
    std::fs::write(root.join("var/lib/rancher/k3s/fleet-role"), "server\n").unwrap();
    lab.machine(host)
        .unwrap()
        .exec_ok(&["systemctl", "start", "--no-block", "k3s"], QUICK)
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_is_invisible_on_its_node_etcd_is_voter_comes_from_the_leader_and_remove_peer_matches_name_and_address()
 {
    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = lab_of(2, 1, dir.path()).await;
    let spec = lab.spec.clone();
    let apis = Apis::for_lab(&spec).unwrap();
    let agent = spec.host("agent-1").unwrap().clone();
    let root = spec.root(&agent.name);

    // 1. A learner that never starts (its etcd fails, injected) makes no
    // raft progress: the leader removes it once it has stalled (20 s here,
    // k3s's 5 minutes shortened for this part only).
    let short_stall = spec.short_stall_file();
    std::fs::create_dir_all(short_stall.parent().unwrap()).unwrap();
    std::fs::write(&short_stall, "20000").unwrap();
    let fails = root.join("var/lib/rancher/fleet-role-lab-etcd-fails");
    std::fs::write(&fails, "once").unwrap();
    start_server_on(&lab, &agent.name);
    let start = clock::Clock::system().now();
    let stalled = loop {
        if let Some(m) = member_at(&members(&spec).await, agent.ip) {
            break m;
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "agent-1 was never added as a learner"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(stalled.is_learner, "{stalled:?}");
    // The fault fails that one start (the stand-in lifts it as it trips):
    // the next learner, added once this one is gone, runs but is held back.
    // A learner added while the fault stood would stall too, for k3s's
    // whole 5 minutes.
    let hold = spec.hold_promotions_file();
    std::fs::create_dir_all(hold.parent().unwrap()).unwrap();
    std::fs::write(&hold, "").unwrap();
    let start = clock::Clock::system().now();
    while fails.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "agent-1's k3s never failed its etcd's start"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let start = clock::Clock::system().now();
    while members(&spec).await.iter().any(|m| m.id == stalled.id) {
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "the stalled learner {} was never removed by the leader; server-1's k3s said:\n{}",
            stalled.id,
            last_said(&lab, "server-1", &["k3s"], 30),
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "the stalled learner was removed after {:.0}s",
        start.elapsed().as_secs_f32()
    );
    // The next learner is given k3s's own 5 minutes: on a loaded machine its
    // etcd may take longer than 20 s to start and publish its name, and a
    // learner removed before it starts leaves a tombstone that fleet-role's
    // drop-in keeps k3s from starting over.
    std::fs::remove_file(&short_stall).unwrap();

    // 2. A learner that runs but is held back (the lab's injection makes
    // the leader skip the promotion, as etcd refuses one not caught up):
    // its Node, the agent's until now, shows nothing of etcd.
    let start = clock::Clock::system().now();
    let learner = loop {
        if let Some(m) = member_at(&members(&spec).await, agent.ip)
            && m.name.starts_with("agent-1-")
        {
            break m;
        }
        assert!(
            start.elapsed() < Duration::from_secs(240),
            "agent-1's learner never started; the members: {:?}\nagent-1's k3s said:\n{}\nserver-1's k3s said:\n{}",
            members(&spec).await,
            last_said(
                &lab,
                &agent.name,
                &["k3s", "k3s-agent", "fleet-role-actuator"],
                60
            ),
            last_said(&lab, "server-1", &["k3s"], 30),
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // Long enough for several rounds of the leader's loop (every 2 s here).
    let start = clock::Clock::system().now();
    while start.elapsed() < Duration::from_secs(15) {
        let n = node(&apis, &agent.name).await;
        assert_eq!(etcd_label(&n), None, "a learner's Node has the etcd label");
        assert_eq!(annotation(&n, K3S_ETCD_NODE_NAME), None, "node-name");
        assert_eq!(annotation(&n, K3S_ETCD_NODE_ADDRESS), None, "node-address");
        assert_eq!(etcd_is_voter(&n), None, "a learner's Node has EtcdIsVoter");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let now = member_at(&members(&spec).await, agent.ip).expect("the learner is still a member");
    assert!(
        now.is_learner && now.id == learner.id,
        "the join was not held back: {now:?}"
    );
    assert_ne!(
        lab.machine(&agent.name)
            .unwrap()
            .active_state("k3s")
            .unwrap(),
        "active",
        "a learner sends no READY=1"
    );

    // 3. Promoted: the host's metadata (its own kubelet, once its API
    // server is up) and EtcdIsVoter (the leader's loop).
    std::fs::remove_file(&hold).unwrap();
    let ip = agent.ip.to_string();
    wait_node(
        &lab,
        &apis,
        &agent.name,
        "the etcd label, annotations and EtcdIsVoter=True",
        // The promoted member's kube-apiserver starts before its kubelet
        // writes the labels: 168 s for the whole test alone here, and past
        // 180 s for this wait once with two other labs beside it.
        Duration::from_secs(360),
        |n| {
            etcd_label(n) == Some("true")
                && annotation(n, K3S_ETCD_NODE_NAME) == Some(learner.name.as_str())
                && annotation(n, K3S_ETCD_NODE_ADDRESS) == Some(ip.as_str())
                && etcd_is_voter(n) == Some(("True".into(), "MemberNotLearner".into()))
        },
    )
    .await;
    lab.wait_active(&agent.name, "k3s", Duration::from_secs(120))
        .await
        .unwrap();

    // 4. A voter whose k3s stopped writes nothing any more; the leader's loop
    // finds its member unhealthy and says so on its Node.
    let s2 = spec.host("server-2").unwrap().clone();
    let s2_member = annotation(&node(&apis, &s2.name).await, K3S_ETCD_NODE_NAME)
        .expect("server-2's node-name")
        .to_string();
    lab.machine(&s2.name)
        .unwrap()
        .exec_ok(&["systemctl", "stop", "k3s"], QUICK)
        .unwrap();
    wait_node(
        &lab,
        &apis,
        &s2.name,
        "EtcdIsVoter=False (Unhealthy)",
        Duration::from_secs(120),
        |n| etcd_is_voter(n) == Some(("False".into(), "Unhealthy".into())),
    )
    .await;

    // 5. RemovePeer matches the name and the peer host: with the address
    // annotation wrong, no member goes, yet removed-node-name is written.
    let o = spec.hosts[0].ip.octets();
    let wrong = Ipv4Addr::new(o[0], o[1], o[2], 250).to_string();
    let patch = json!({"metadata": {"annotations": {
        K3S_ETCD_NODE_ADDRESS: wrong, K3S_ETCD_REMOVE: "true",
    }}});
    apis.any(|c| {
        let p = patch.clone();
        async move {
            Api::<Node>::all(c)
                .patch("server-2", &PatchParams::default(), &Patch::Merge(&p))
                .await
        }
    })
    .await
    .unwrap();
    wait_node(
        &lab,
        &apis,
        &s2.name,
        "removed-node-name, without node-name/node-address",
        Duration::from_secs(120),
        |n| {
            annotation(n, K3S_ETCD_REMOVED_NODE_NAME) == Some(s2_member.as_str())
                && annotation(n, K3S_ETCD_NODE_NAME).is_none()
                && annotation(n, K3S_ETCD_NODE_ADDRESS).is_none()
        },
    )
    .await;
    let left = members(&spec).await;
    assert!(
        left.iter().any(|m| m.name == s2_member),
        "RemovePeer removed {s2_member} though its address did not match: {left:?}"
    );
    // With no node-name, the Node matches no member: the leader says so.
    wait_node(
        &lab,
        &apis,
        &s2.name,
        "EtcdIsVoter=False (NotAMember)",
        Duration::from_secs(120),
        |n| etcd_is_voter(n) == Some(("False".into(), "NotAMember".into())),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_refuses_a_client_without_the_certificate_and_serves_health_in_plain_http_on_loopback_only()
 {
    use std::sync::Arc;
    use tokio_rustls::rustls::{ClientConfig, RootCertStore, crypto::ring};

    let _turn = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = common::lab_of(1, 0, dir.path()).await;
    let spec = &lab.spec;
    let s1 = spec.hosts[0].clone();

    // The lab's tools, with the client certificate: answered.
    let (_, listed) = etcd_gw::member_list(&spec.etcd(s1.ip).unwrap())
        .await
        .expect("the lab's client certificate is accepted");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed[0]
            .peer_urls
            .iter()
            .all(|u| u.starts_with("https://"))
            && listed[0]
                .client_urls
                .iter()
                .all(|u| u.starts_with("https://")),
        "TLS on the client and peer URLs: {listed:?}"
    );

    // A client that trusts etcd's CA but presents no certificate: refused.
    let mut roots = RootCertStore::empty();
    use rustls_pki_types::{CertificateDer, pem::PemObject};
    let ca = lab::lab_pki::etcd_client_dir(&spec.pki_dir()).join("server-ca.crt");
    for c in CertificateDer::pem_file_iter(&ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let anonymous = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let url = LabSpec::etcd_url(s1.ip);
    let refused = etcd_gw::member_list(&etcd_gw::Endpoint::tls(&url, Arc::new(anonymous))).await;
    assert!(
        refused.is_err(),
        "etcd answered a client without a certificate: {refused:?}"
    );
    // Nor does it speak plain HTTP on its client port.
    let plain = etcd_gw::member_list(&etcd_gw::Endpoint::plain(url.replace("https", "http"))).await;
    assert!(
        plain.is_err(),
        "etcd answered plain HTTP on 2379: {plain:?}"
    );

    // /health in plain HTTP on the host's own loopback (the actuator's
    // health URL), and not on its address.
    let m = lab.machine(&s1.name).unwrap();
    let health = m
        .exec_ok(
            &[
                "curl",
                "-sS",
                "--max-time",
                "5",
                "http://127.0.0.1:2381/health",
            ],
            QUICK,
        )
        .unwrap();
    assert!(
        health.text().contains(r#""health":"true""#),
        "{}",
        health.text()
    );
    let outside = testcp::plain_http::request(&format!("http://{}:2381/health", s1.ip), None).await;
    assert!(
        outside.is_err(),
        "the metrics port answers on the host's address: {outside:?}"
    );
}

/// The holder of k3s's `kube-system/k3s-etcd` Lease, once there is one.
async fn k3s_etcd_holder(apis: &Apis) -> String {
    use k8s_openapi::api::coordination::v1::Lease;
    let start = clock::Clock::system().now();
    loop {
        let lease = apis
            .any(|c| async move {
                Api::<Lease>::namespaced(c, "kube-system")
                    .get_opt("k3s-etcd")
                    .await
            })
            .await
            .ok()
            .flatten();
        if let Some(h) = lease
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty())
        {
            return h;
        }
        assert!(
            start.elapsed() < QUICK,
            "no server holds the k3s-etcd Lease"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_waits_out_the_k3s_etcd_lease_of_a_holder_cut_off_and_a_removed_server_keeps_its_api_server_over_the_closed_etcd()
 {
    let _serial = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = common::lab_of(3, 0, dir.path()).await;
    let spec = lab.spec.clone();
    let apis = Apis::for_lab(&spec).unwrap();

    // Only the holder of k3s's leader-elected `k3s-etcd` controllers runs the
    // member-removal controller. Cut off, it renews no more, and nobody else
    // takes the Lease until it has gone unchanged for its whole duration
    // (45 s); meanwhile a removal asked for on its Node waits.
    let holder = k3s_etcd_holder(&apis).await;
    let h = spec.host(&holder).unwrap().clone();
    let member = annotation(&node(&apis, &holder).await, K3S_ETCD_NODE_NAME)
        .expect("the holder's node-name")
        .to_string();
    let cut = clock::Clock::system().now();
    lab.net().cut_off(&holder).unwrap();
    apis.patch_node(
        &holder,
        &json!({"metadata": {"annotations": { K3S_ETCD_REMOVE: "true" }}}),
    )
    .await
    .unwrap();
    wait_node(
        &lab,
        &apis,
        &holder,
        "removed-node-name",
        Duration::from_secs(180),
        |n| annotation(n, K3S_ETCD_REMOVED_NODE_NAME) == Some(member.as_str()),
    )
    .await;
    let waited = cut.elapsed();
    eprintln!(
        "removed {:.0}s after its holder was cut off",
        waited.as_secs_f64()
    );
    assert!(
        waited >= Duration::from_secs(35),
        "the removal went through {}s after the Lease's holder was cut off: no one waited out its Lease",
        waited.as_secs()
    );
    let next = k3s_etcd_holder(&apis).await;
    assert_ne!(next, holder, "the cut-off server still holds the Lease");
    assert!(
        member_at(&members(&spec).await, h.ip).is_none(),
        "{holder}'s member is still listed"
    );

    // A server removed while its API server runs keeps that API server, over
    // its closed etcd, as k3s keeps its in-process one: its supervisor still
    // hands it every request, so `/version` answers and a Node list is held
    // (no quick 503 that would send a client on at once).
    let other = spec
        .hosts
        .iter()
        .find(|o| o.name != holder && o.name != next)
        .unwrap()
        .clone();
    let other_member = annotation(&node(&apis, &other.name).await, K3S_ETCD_NODE_NAME)
        .expect("its node-name")
        .to_string();
    // Its actuator is stopped first: on a reading of its member gone it
    // would finish the host as an agent (the replaced host coming home),
    // stopping the very k3s this part watches.
    lab.systemctl(&other.name, &["stop", "fleet-role-actuator"])
        .unwrap();
    apis.patch_node(
        &other.name,
        &json!({"metadata": {"annotations": { K3S_ETCD_REMOVE: "true" }}}),
    )
    .await
    .unwrap();
    wait_node(
        &lab,
        &apis,
        &other.name,
        "removed-node-name",
        Duration::from_secs(120),
        |n| annotation(n, K3S_ETCD_REMOVED_NODE_NAME) == Some(other_member.as_str()),
    )
    .await;
    let tombstone = spec
        .root(&other.name)
        .join("var/lib/rancher/k3s/server/db/etcd/tombstone");
    let start = clock::Clock::system().now();
    while !tombstone.exists() {
        if start.elapsed() > QUICK {
            // What its k3s said, for the next reader of a failure.
            panic!(
                "{} wrote no tombstone; its k3s said:\n{}",
                other.name,
                common::last_said(&lab, &other.name, &["k3s"], 40)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "the tombstone was written within {:.1}s of removed-node-name",
        start.elapsed().as_secs_f64()
    );
    let tokens = testcp::TokenAuthFile::load(&spec.tokens_file()).unwrap();
    let removed = Apis::new(
        &spec.pki_dir(),
        &spec.ips(),
        tokens.admin_token(),
        vec![LabSpec::api_url(other.ip)],
    )
    .unwrap();
    let version = removed
        .any(|c| async move { c.apiserver_version().await })
        .await;
    assert!(
        version.is_ok(),
        "the removed server's API server is gone: {version:?}"
    );
    let asked = clock::Clock::system().now();
    let list = removed
        .any(|c| async move { Api::<Node>::all(c).list(&Default::default()).await })
        .await;
    let took = asked.elapsed();
    let err = list.expect_err("a Node list answered over a closed etcd");
    // k3s's quick 503 is what the stand-in used to answer; a held request
    // (measured: 60 s, then closed unanswered) or a connection closed with no
    // answer is what a removed k3s gives. Once, on a loaded machine, the
    // connection closed after 0.7 s: the time is printed, not asserted.
    eprintln!(
        "the removed server's Node list failed after {:.1}s: {err:#}",
        took.as_secs_f64()
    );
    assert!(
        !format!("{err:#}").contains("503"),
        "the removed server answered a 503 in {:.1}s: {err:#}",
        took.as_secs_f64()
    );
    assert!(
        lab.is_active(&other.name, "k3s").unwrap(),
        "k3s exited on its removal"
    );
}

/// Whether `host`'s k3s journal has a message containing `text`.
fn k3s_logged(lab: &SystemdLab, host: &str, text: &str) -> bool {
    lab.machine(host)
        .unwrap()
        .journal(&["k3s"], QUICK)
        .unwrap()
        .iter()
        .any(|e| e["MESSAGE"].as_str().is_some_and(|m| m.contains(text)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_joining_with_an_agent_token_or_a_wrong_one_is_refused_by_the_supervisor_adds_no_member_and_restarts()
 {
    let _serial = SERIAL.lock().await;
    let dir = lab_dir();
    let lab = common::lab_of(2, 1, dir.path()).await;
    let spec = lab.spec.clone();
    let agent = spec.host("agent-1").unwrap().clone();
    let config = spec.root("agent-1").join("etc/rancher/k3s/config.yaml");
    let laid_out = std::fs::read_to_string(&config).unwrap();
    let server_token = lab::lab_setup::K3S_TOKEN;
    let (ca_hash, password) = server_token.split_once("::server:").unwrap();
    let m = lab.machine("agent-1").unwrap();
    let restarts = || -> u32 {
        m.systemctl(&["show", "-p", "NRestarts", "--value", "k3s"], QUICK)
            .unwrap()
            .stdout
            .trim()
            .parse()
            .unwrap_or(0)
    };

    // k3s reads the join server's bootstrap data through its supervisor
    // with the server token before it adds a member: the agent token (user
    // `node`, the same password, as when no agent-token is set) is
    // forbidden, a wrong password not authorized, and k3s exits each time.
    let mut started = false;
    for (token, status) in [
        (format!("{ca_hash}::node:{password}"), "403 Forbidden"),
        (
            format!("{ca_hash}::server:not-the-token"),
            "401 Unauthorized",
        ),
    ] {
        std::fs::write(&config, laid_out.replace(server_token, &token)).unwrap();
        let before = restarts();
        if !started {
            start_server_on(&lab, "agent-1");
            started = true;
        }
        let start = clock::Clock::system().now();
        while !(k3s_logged(&lab, "agent-1", status) && restarts() > before) {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "no refused bootstrap ({status}) and restart seen on agent-1"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert!(
            member_at(&members(&spec).await, agent.ip).is_none(),
            "a member was added with a refused token"
        );
    }
    assert!(
        k3s_logged(&lab, "agent-1", "failed to get bootstrap data from"),
        "k3s's message"
    );
    assert!(
        !k3s_logged(&lab, "agent-1", password),
        "the token is in the journal"
    );

    // With the server token, the next restart joins as a learner.
    std::fs::write(&config, &laid_out).unwrap();
    let start = clock::Clock::system().now();
    while member_at(&members(&spec).await, agent.ip).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "agent-1 did not join with the server token"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
