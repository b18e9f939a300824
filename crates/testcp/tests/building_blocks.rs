//! The building blocks a multi-host lab assembles: one PKI for several API
//! servers on their own loopback addresses, and multi-member etcd with learners.

use std::{net::IpAddr, time::Duration};

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};
use testcp::{
    ApiServer, ApiServerOptions, ClusterState, Etcd, EtcdOptions, Pki, Probe, TokenAuthFile,
    plain_http,
};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

async fn gateway(etcd: &Etcd, path: &str, body: &str) -> serde_json::Value {
    let response = plain_http::request(&format!("{}{path}", etcd.client_url()), Some(body))
        .await
        .unwrap();
    assert_eq!(response.status, 200, "{path}: {}", response.body);
    serde_json::from_str(&response.body).unwrap()
}

/// (name, is learner) of every member, from etcd's gRPC gateway.
async fn members(etcd: &Etcd) -> Vec<(String, bool)> {
    let list = gateway(etcd, "/v3/cluster/member/list", "{}").await;
    let mut members: Vec<_> = list["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap_or_default().to_owned(),
                m["isLearner"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    members.sort();
    members
}

#[tokio::test]
async fn api_servers_on_other_loopback_addresses_are_verified_by_the_one_ca() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::generate(&dir.path().join("pki"), &[ip("127.0.1.2"), ip("127.0.1.3")]).unwrap();
    let tokens = TokenAuthFile::generate(dir.path()).unwrap();
    let etcd = Etcd::start(EtcdOptions::new("host-2", ip("127.0.1.2"), dir.path()).unwrap())
        .await
        .unwrap();
    let options = |host: &str| {
        let log = dir.path().join(format!("apiserver-{host}.log"));
        ApiServerOptions::new(
            ip(host),
            vec![etcd.client_url().to_owned()],
            &pki,
            &tokens,
            log,
        )
    };
    let (a, b) = tokio::join!(
        ApiServer::start(options("127.0.1.2")),
        ApiServer::start(options("127.0.1.3"))
    );
    let servers = [a.unwrap(), b.unwrap()];

    for server in &servers {
        assert!(
            server.url().starts_with("https://127.0.1."),
            "{}",
            server.url()
        );
        let client =
            Client::try_from(pki.client_config(&server.url(), Some(tokens.admin_token()))).unwrap();
        Api::<Namespace>::all(client).get("default").await.unwrap();
    }
    // The check is real: a name the certificate does not carry is refused.
    let mut config = pki.client_config(&servers[0].url(), Some(tokens.admin_token()));
    config.tls_server_name = Some("127.0.1.9".to_owned());
    let refused = Api::<Namespace>::all(Client::try_from(config).unwrap())
        .get("default")
        .await
        .unwrap_err();
    assert!(
        format!("{refused:?}").contains("NotValidForName"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn etcd_members_form_a_cluster_that_a_learner_joins_and_a_killed_member_rejoins() {
    let dir = tempfile::tempdir().unwrap();
    let mut options: Vec<EtcdOptions> = (1..=3)
        .map(|n| {
            EtcdOptions::new(
                &format!("host-{n}"),
                ip(&format!("127.0.1.{}", 10 + n)),
                dir.path(),
            )
            .unwrap()
        })
        .collect();
    let initial_cluster = options
        .iter()
        .map(EtcdOptions::peer_entry)
        .collect::<Vec<_>>()
        .join(",");
    for member in &mut options {
        member.initial_cluster = initial_cluster.clone();
    }
    // A member of a new cluster is healthy only once a quorum runs: spawn all, then wait.
    let mut cluster: Vec<Etcd> = options
        .into_iter()
        .map(|o| Etcd::spawn(o).unwrap())
        .collect();
    for member in &mut cluster {
        member
            .wait_healthy(Probe::Linearizable, Duration::from_secs(30))
            .await
            .unwrap();
    }
    let voters = [
        ("host-1".to_owned(), false),
        ("host-2".to_owned(), false),
        ("host-3".to_owned(), false),
    ];
    assert_eq!(members(&cluster[0]).await, voters);

    // A learner: announced with `member add`, then started with state `existing`.
    let mut learner = EtcdOptions::new("host-4", ip("127.0.1.14"), dir.path()).unwrap();
    let add = format!(
        r#"{{"peerURLs":["{}"],"isLearner":true}}"#,
        learner.peer_url
    );
    // etcd refuses reconfiguration ("unhealthy cluster", 503) until every voter
    // has been connected for 5 s, so a fresh cluster needs a few tries.
    let url = format!("{}/v3/cluster/member/add", cluster[0].client_url());
    let mut added = plain_http::request(&url, Some(&add)).await.unwrap();
    for _ in 0..100 {
        if added.status != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        added = plain_http::request(&url, Some(&add)).await.unwrap();
    }
    assert_eq!(added.status, 200, "{}", added.body);
    learner.initial_cluster = format!("{initial_cluster},{}", learner.peer_entry());
    learner.initial_cluster_state = ClusterState::Existing;
    let mut learner = Etcd::spawn(learner).unwrap();
    learner
        .wait_healthy(Probe::Serializable, Duration::from_secs(30))
        .await
        .unwrap();
    let mut with_learner = voters.to_vec();
    with_learner.push(("host-4".to_owned(), true));
    assert_eq!(members(&cluster[1]).await, with_learner);

    // A crashed voter restarts from its data dir and the cluster is whole again.
    cluster[0].kill();
    assert!(!cluster[0].is_running());
    cluster[1]
        .wait_healthy(Probe::Linearizable, Duration::from_secs(10))
        .await
        .unwrap();
    cluster[0].restart(Probe::Linearizable).await.unwrap();
    assert_eq!(members(&cluster[0]).await, with_learner);
}
