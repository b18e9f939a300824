//! Behaviour of `ControlPlane` against the real etcd and kube-apiserver.

use std::time::Duration;

use k8s_openapi::api::{
    authentication::v1::SelfSubjectReview,
    core::v1::{ConfigMap, Namespace, Node, ServiceAccount},
};
use kube::{
    Api, Client,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};
use testcp::ControlPlane;

/// Who the API server says the client is: (username, groups).
async fn whoami(client: Client) -> (String, Vec<String>) {
    let review = Api::<SelfSubjectReview>::all(client)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("every authenticated user may review itself");
    let user = review
        .status
        .and_then(|s| s.user_info)
        .expect("the review names the user");
    (
        user.username.unwrap_or_default(),
        user.groups.unwrap_or_default(),
    )
}

/// The HTTP status code of a refused request.
fn status_code(result: Result<impl std::fmt::Debug, kube::Error>) -> u16 {
    match result {
        Err(kube::Error::Api(status)) => status.code,
        other => panic!("expected an API error status, got {other:?}"),
    }
}

fn config_map(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some([("key".to_owned(), value.to_owned())].into()),
        ..ConfigMap::default()
    }
}

async fn create_service_account(plane: &ControlPlane, name: &str) {
    let accounts: Api<ServiceAccount> = Api::namespaced(plane.admin_client().unwrap(), "default");
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_control_plane_serves_readyz_and_authenticates_the_admin_token() {
    let plane = ControlPlane::start().await.unwrap();

    let anonymous = Client::try_from(plane.client_config(0, None).unwrap()).unwrap();
    let readyz = http::Request::get("/readyz").body(Vec::new()).unwrap();
    assert_eq!(anonymous.request_text(readyz).await.unwrap(), "ok");

    let (user, groups) = whoami(plane.admin_client().unwrap()).await;
    assert_eq!(user, testcp::tokens::ADMIN_USER);
    assert!(groups.iter().any(|g| g == "system:masters"), "{groups:?}");
    let namespaces = Api::<Namespace>::all(plane.admin_client().unwrap())
        .list(&Default::default())
        .await
        .unwrap();
    assert!(
        namespaces
            .items
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some("kube-system"))
    );
}

#[tokio::test]
async fn an_unknown_token_is_rejected() {
    let plane = ControlPlane::start().await.unwrap();

    let stranger = plane
        .client_for_token(&testcp::pki::random_token())
        .unwrap();
    assert_eq!(
        status_code(
            Api::<Namespace>::all(stranger)
                .list(&Default::default())
                .await
        ),
        401
    );
    // Anonymous requests are authenticated as system:anonymous and then denied by
    // RBAC (403), so the 401 above is the token check, not a blanket refusal.
    let anonymous = Client::try_from(plane.client_config(0, None).unwrap()).unwrap();
    assert_eq!(
        status_code(
            Api::<Namespace>::all(anonymous)
                .list(&Default::default())
                .await
        ),
        403
    );
}

#[tokio::test]
async fn rbac_denies_a_service_account_without_bindings() {
    let plane = ControlPlane::start().await.unwrap();
    create_service_account(&plane, "lonely").await;
    let token = plane
        .service_account_token("default", "lonely")
        .await
        .unwrap();
    let client = plane.client_for_token(&token).unwrap();

    let (user, _) = whoami(client.clone()).await;
    assert_eq!(user, "system:serviceaccount:default:lonely");
    let config_maps: Api<ConfigMap> = Api::namespaced(client, "default");
    assert_eq!(
        status_code(config_maps.list(&Default::default()).await),
        403
    );

    // The same request passes once RBAC grants it: the 403 was authorization.
    plane
        .apply_yaml(
            // Not the built-in `view`: it is aggregated, and without a
            // controller-manager its rules stay empty.
            "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: list-config-maps, namespace: default}
rules: [{apiGroups: [''], resources: [configmaps], verbs: [list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: lonely-lists-config-maps, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: list-config-maps}
subjects: [{kind: ServiceAccount, name: lonely, namespace: default}]
",
        )
        .await
        .unwrap();
    let allowed = wait_for(|| async { config_maps.list(&Default::default()).await.is_ok() }).await;
    assert!(allowed, "the binding never took effect");
}

#[tokio::test]
async fn a_kubelet_client_may_label_only_its_own_node_and_never_under_node_restriction() {
    let plane = ControlPlane::start().await.unwrap();
    let admin = Api::<Node>::all(plane.admin_client().unwrap());
    for name in ["n1", "n2"] {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        admin.create(&PostParams::default(), &node).await.unwrap();
    }
    let kubelet = plane.kubelet_client("n1").unwrap();
    let (user, groups) = whoami(kubelet.clone()).await;
    assert_eq!(user, "system:node:n1");
    assert!(groups.iter().any(|g| g == "system:nodes"), "{groups:?}");

    let nodes = Api::<Node>::all(kubelet);
    let label = |k: &str| Patch::Merge(serde_json::json!({"metadata": {"labels": {k: "true"}}}));
    let p = PatchParams::default();
    // Its own Node, a label of any other domain: as a real kubelet may.
    nodes
        .patch("n1", &p, &label("example.com/x"))
        .await
        .unwrap();
    // The reserved domain: NodeRestriction refuses it.
    let reserved = "node-restriction.kubernetes.io/x";
    assert_eq!(
        status_code(nodes.patch("n1", &p, &label(reserved)).await),
        403
    );
    // Another Node: the Node authorizer and NodeRestriction refuse it.
    assert_eq!(
        status_code(nodes.patch("n2", &p, &label("example.com/x")).await),
        403
    );
    // The admin may set what the kubelet may not.
    admin.patch("n1", &p, &label(reserved)).await.unwrap();
}

#[tokio::test]
async fn a_token_for_a_missing_service_account_is_refused() {
    let plane = ControlPlane::start().await.unwrap();
    let error = plane
        .service_account_token("default", "nobody")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, testcp::plane::Error::Kube { source: kube::Error::Api(s), .. } if s.code == 404),
        "{error}"
    );
}

#[tokio::test]
async fn a_second_api_server_over_the_same_etcd_sees_the_same_objects() {
    let mut plane = ControlPlane::start().await.unwrap();
    let second = plane.add_apiserver().await.unwrap();
    let urls = plane.urls();
    assert_eq!(urls.len(), 2);
    assert_ne!(urls[0], urls[1]);

    let first_api: Api<ConfigMap> = Api::default_namespaced(plane.admin_client().unwrap());
    first_api
        .create(
            &PostParams::default(),
            &config_map("shared", "written-via-0"),
        )
        .await
        .unwrap();

    let admin = plane.admin_token().clone();
    let second_client =
        Client::try_from(plane.client_config(second, Some(&admin)).unwrap()).unwrap();
    let read = Api::<ConfigMap>::default_namespaced(second_client)
        .get("shared")
        .await
        .unwrap();
    assert_eq!(read.data.unwrap()["key"], "written-via-0");

    // The service-account key is shared: a token minted through server 0 works on server 1.
    create_service_account(&plane, "roaming").await;
    let token = plane
        .service_account_token("default", "roaming")
        .await
        .unwrap();
    let roaming = Client::try_from(plane.client_config(second, Some(&token)).unwrap()).unwrap();
    assert_eq!(
        whoami(roaming).await.0,
        "system:serviceaccount:default:roaming"
    );
}

#[tokio::test]
async fn a_stopped_api_server_refuses_connections_and_restarts_on_its_port() {
    let mut plane = ControlPlane::start().await.unwrap();
    let second = plane.add_apiserver().await.unwrap();
    let url = plane.urls()[second].clone();
    let address = url.trim_start_matches("https://").to_owned();

    plane.stop_apiserver(second).await.unwrap();
    let refused = tokio::net::TcpStream::connect(&address).await.unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    // The other server still answers, and clients are handed the running one.
    let api: Api<ConfigMap> = Api::default_namespaced(plane.admin_client().unwrap());
    api.create(&PostParams::default(), &config_map("during-outage", "x"))
        .await
        .unwrap();

    plane.start_apiserver(second).await.unwrap();
    assert_eq!(
        plane.urls()[second],
        url,
        "same address and port after the restart"
    );
    let admin = plane.admin_token().clone();
    let restarted = Client::try_from(plane.client_config(second, Some(&admin)).unwrap()).unwrap();
    let read = Api::<ConfigMap>::default_namespaced(restarted)
        .get("during-outage")
        .await
        .unwrap();
    assert_eq!(read.data.unwrap()["key"], "x");
}

#[tokio::test]
async fn no_client_is_handed_out_while_every_api_server_is_stopped() {
    let mut plane = ControlPlane::start().await.unwrap();
    plane.stop_apiserver(0).await.unwrap();
    assert!(matches!(
        plane.admin_client(),
        Err(testcp::plane::Error::NoneRunning)
    ));
    assert!(matches!(
        plane.stop_apiserver(7).await,
        Err(testcp::plane::Error::NoSuchApiServer(7, 1))
    ));
}

#[tokio::test]
async fn applying_a_multi_document_manifest_creates_every_object_and_reapplying_updates_them() {
    let plane = ControlPlane::start().await.unwrap();
    let manifest = |value: &str| {
        format!(
            "# a comment
apiVersion: v1
kind: Namespace
metadata:
  name: fleet
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: fleet
data:
  mode: {value}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: fleet-reader
rules:
- apiGroups: ['']
  resources: [configmaps]
  verbs: [get]
---
"
        )
    };
    let file = plane.dir().join("manifest.yaml");
    std::fs::write(&file, manifest("first")).unwrap();
    let applied = plane.apply_yaml_file(&file).await.unwrap();
    let names: Vec<_> = applied
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["fleet", "settings", "fleet-reader"]);

    let config_maps: Api<ConfigMap> = Api::namespaced(plane.admin_client().unwrap(), "fleet");
    assert_eq!(
        config_maps.get("settings").await.unwrap().data.unwrap()["mode"],
        "first"
    );
    plane.apply_yaml(&manifest("second")).await.unwrap();
    assert_eq!(
        config_maps.get("settings").await.unwrap().data.unwrap()["mode"],
        "second"
    );

    let nameless = plane
        .apply_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n")
        .await
        .unwrap_err();
    assert!(
        matches!(nameless, testcp::plane::Error::Manifest { .. }),
        "{nameless}"
    );
}

#[tokio::test]
async fn two_planes_run_side_by_side_without_sharing_anything() {
    let (a, b) = tokio::join!(ControlPlane::start(), ControlPlane::start());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_ne!(a.urls(), b.urls());
    assert_ne!(a.dir(), b.dir());

    Api::<ConfigMap>::default_namespaced(a.admin_client().unwrap())
        .create(&PostParams::default(), &config_map("only-in-a", "a"))
        .await
        .unwrap();
    let in_b = Api::<ConfigMap>::default_namespaced(b.admin_client().unwrap())
        .get_opt("only-in-a")
        .await
        .unwrap();
    assert!(in_b.is_none());
    // Each plane has its own admin token.
    let a_token_on_b = b.client_for_token(a.admin_token()).unwrap();
    assert_eq!(
        status_code(
            Api::<Namespace>::all(a_token_on_b)
                .list(&Default::default())
                .await
        ),
        401
    );
}

/// Polls `check` for up to 10 s; RBAC changes reach the authorizer's cache asynchronously.
async fn wait_for<F, Fut>(check: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}
