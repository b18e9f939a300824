use super::*;
use k8s_openapi::api::core::v1::Node;
use kube::api::PostParams;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn a_heartbeat_moves_the_ready_transition_only_when_readiness_changes_and_renews_the_node_lease()
 {
    let plane = testcp::ControlPlane::start().await.unwrap();
    let client = plane.admin_client().unwrap();
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "agent-1"}})).unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    let kubelet = Kubelet {
        name: "agent-1".into(),
        ip: "10.0.0.4".into(),
        apis: Apis::from_clients(plane.urls(), vec![client.clone()]),
    };
    let ready_since = || async {
        let n = Api::<Node>::all(client.clone())
            .get("agent-1")
            .await
            .unwrap();
        let c = n.status.unwrap().conditions.unwrap();
        let r = c.iter().find(|c| c.type_ == "Ready").unwrap().clone();
        (r.status, r.last_transition_time.unwrap().0)
    };
    kubelet.heartbeat(&[]).await.unwrap();
    let (status, first) = ready_since().await;
    assert_eq!(status, "True");
    // A second later (the API keeps whole seconds), still Ready: the same
    // transition time.
    let start = clock::Clock::system().now();
    while start.elapsed() < Duration::from_millis(1100) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    kubelet.heartbeat(&[]).await.unwrap();
    assert_eq!(ready_since().await, ("True".to_string(), first));
    // NotReady, then Ready: the transition moves each time.
    kubelet
        .post_conditions(&[("Ready", false, "KubeletNotReady")], false)
        .await
        .unwrap();
    let (status, down) = ready_since().await;
    assert_eq!(status, "False");
    assert!(down > first, "{down} after {first}");
    let lease = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        client.clone(),
        "kube-node-lease",
    )
    .get("agent-1")
    .await
    .unwrap();
    assert!(lease.spec.unwrap().renew_time.is_some());
}
