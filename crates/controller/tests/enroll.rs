//! `fleet-role enroll NODE` and `fleet-role unenroll NODE` against a real
//! kube-apiserver: the credential written where it should be (mode 0600,
//! never on stdout unless asked), working for its own host's report only,
//! and revoked by `unenroll`.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Output,
    time::Duration,
};

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::{Api, api::PostParams};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use testcp::ControlPlane;

/// The hosts' namespace of the default settings.
const HOSTS: &str = "fleet-role-hosts";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A plane with deploy/rbac applied, and kubeconfigs for the admin and for
/// the controller's own ServiceAccount.
struct World {
    plane: ControlPlane,
    dir: tempfile::TempDir,
    admin_kubeconfig: PathBuf,
    controller_kubeconfig: PathBuf,
    controller_token: SecretString,
}

fn kubeconfig(plane: &ControlPlane, path: &Path, token: &SecretString) {
    plane.write_kubeconfig(path, token).unwrap();
}

impl World {
    async fn start() -> World {
        let plane = ControlPlane::start().await.expect("a control plane starts");
        for f in ["deploy/rbac/actuator.yaml", "deploy/rbac/controller.yaml"] {
            plane
                .apply_yaml_file(&workspace().join(f))
                .await
                .unwrap_or_else(|e| panic!("{f} applies: {e}"));
        }
        let dir = tempfile::tempdir().unwrap();
        let admin_kubeconfig = dir.path().join("admin.kubeconfig");
        kubeconfig(&plane, &admin_kubeconfig, plane.admin_token());
        let controller_token = plane
            .service_account_token("platform", "fleet-role")
            .await
            .unwrap();
        let controller_kubeconfig = dir.path().join("controller.kubeconfig");
        kubeconfig(&plane, &controller_kubeconfig, &controller_token);
        World {
            plane,
            dir,
            admin_kubeconfig,
            controller_kubeconfig,
            controller_token,
        }
    }

    /// Runs `fleet-role` in the world's directory with `kubeconfig`.
    fn run(&self, kubeconfig: &Path, args: &[&str]) -> Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_fleet-role"))
            .current_dir(self.dir.path())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .env_remove("KUBECONFIG")
            .env_remove("FLEET_ROLE_CONFIG")
            .output()
            .expect("fleet-role runs")
    }

    fn admin(&self, args: &[&str]) -> Output {
        self.run(&self.admin_kubeconfig, args)
    }

    /// `node`'s report written with `token` (a value never written before,
    /// so the write is a change), from its ConfigMap as read: the answer's
    /// code (a read refused is the code too).
    async fn write_key(&self, token: &SecretString, node: &str) -> u16 {
        static WRITES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let client = self.plane.client_for_token(token).unwrap();
        let cms: Api<ConfigMap> = Api::namespaced(client, HOSTS);
        let code = |r: kube::Error| match r {
            kube::Error::Api(s) => s.code,
            e => panic!("{e}"),
        };
        let mut cm = match cms.get(node).await {
            Ok(cm) => cm,
            Err(e) => return code(e),
        };
        cm.data = Some([("report".to_string(), format!("{{\"write\":{n}}}"))].into());
        match cms.replace(node, &PostParams::default(), &cm).await {
            Ok(_) => 200,
            Err(e) => code(e),
        }
    }

    /// Waits until the hosts' admission policy is in force (a dry run,
    /// which changes nothing, by `token` of a second key in its own report
    /// is denied); `node` is the token's.
    async fn wait_policy(&self, token: &SecretString, node: &str) {
        let client = self.plane.client_for_token(token).unwrap();
        let cms: Api<ConfigMap> = Api::namespaced(client, HOSTS);
        let started = clock::Clock::system().now();
        let params = PostParams {
            dry_run: true,
            ..Default::default()
        };
        loop {
            let mut cm = cms.get(node).await.unwrap();
            cm.data = Some(
                [
                    ("report".to_string(), "{}".to_string()),
                    ("x".into(), "y".into()),
                ]
                .into(),
            );
            let r = cms.replace(node, &params, &cm).await;
            if matches!(r, Err(kube::Error::Api(ref s)) if s.code == 403) {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the policy never came into force"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[tokio::test]
async fn enroll_writes_a_private_credential_that_writes_its_own_report_only_and_unenroll_revokes_it()
 {
    let w = World::start().await;
    let out = w.admin(&["enroll", "node-a"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    // The credential, in a file named for the host alone, mode 0600.
    let file = w.dir.path().join("node-a.token");
    let meta = std::fs::metadata(&file).expect("the credential file");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let token = SecretString::from(std::fs::read_to_string(&file).unwrap());
    assert!(!token.expose_secret().is_empty() && !token.expose_secret().contains('\n'));
    // Never printed, nor the admin's token.
    for secret in [token.expose_secret(), w.plane.admin_token().expose_secret()] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "a token was printed"
        );
    }
    assert!(stdout.contains("enrolled node-a"), "{stdout}");
    assert!(stdout.contains("valid until"), "{stdout}");

    // A second host, so that there is another key to protect.
    let out = w.admin(&["enroll", "node-b", "--credential", "b/cred"]);
    assert!(!out.status.success(), "a missing directory is an error");
    std::fs::create_dir(w.dir.path().join("b")).unwrap();
    let out = w.admin(&["enroll", "node-b", "--credential", "b/cred"]);
    assert!(out.status.success(), "{:?}", text(&out));
    let token_b = SecretString::from(std::fs::read_to_string(w.dir.path().join("b/cred")).unwrap());

    w.wait_policy(&token, "node-a").await;
    assert_eq!(w.write_key(&token, "node-a").await, 200, "its own key");
    assert_eq!(w.write_key(&token, "node-b").await, 403, "another's key");
    assert_eq!(w.write_key(&token_b, "node-b").await, 200);
    assert_eq!(w.write_key(&token_b, "node-a").await, 403);

    // Enrolling again rotates: a new token, and the objects unchanged.
    let out = w.admin(&["enroll", "node-a"]);
    assert!(out.status.success(), "{:?}", text(&out));
    let rotated = SecretString::from(std::fs::read_to_string(&file).unwrap());
    assert_ne!(rotated.expose_secret(), token.expose_secret());
    assert_eq!(w.write_key(&rotated, "node-a").await, 200);

    // Unenrolled: every token of node-a is refused; node-b works on.
    let out = w.admin(&["unenroll", "node-a"]);
    let (stdout, _) = text(&out);
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(stdout.contains("unenrolled node-a"), "{stdout}");
    let accounts: Api<ServiceAccount> = Api::namespaced(w.plane.admin_client().unwrap(), HOSTS);
    assert!(
        accounts
            .get_opt("fleet-role-actuator-node-a")
            .await
            .unwrap()
            .is_none()
    );
    let started = clock::Clock::system().now();
    for t in [&token, &rotated] {
        while w.write_key(t, "node-a").await != 401 {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "a token of node-a still works"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    assert_eq!(w.write_key(&token_b, "node-b").await, 200);
    // Again: nothing to remove, no error.
    let out = w.admin(&["unenroll", "node-a"]);
    assert!(out.status.success());
    assert!(text(&out).0.contains("was not enrolled"));
}

#[tokio::test]
async fn enroll_prints_its_objects_as_yaml_and_changes_nothing_and_prints_the_token_only_when_asked()
 {
    let w = World::start().await;
    let out = w.admin(&["enroll", "node-a", "--output", "yaml"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&stdout).expect("YAML documents");
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "Lease",
            "ConfigMap"
        ]
    );
    assert!(!w.dir.path().join("node-a.token").exists());
    let accounts: Api<ServiceAccount> = Api::namespaced(w.plane.admin_client().unwrap(), HOSTS);
    assert!(
        accounts
            .get_opt("fleet-role-actuator-node-a")
            .await
            .unwrap()
            .is_none()
    );
    // The YAML applies as it is, and makes the identity.
    w.plane.apply_yaml(&stdout).await.expect("the YAML applies");
    assert!(
        accounts
            .get_opt("fleet-role-actuator-node-a")
            .await
            .unwrap()
            .is_some()
    );

    // Asked for on stdout: the token alone there, the summary on stderr,
    // and no file.
    let out = w.admin(&["enroll", "node-c", "--credential", "-"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let token = SecretString::from(stdout.trim_end().to_string());
    assert_eq!(stdout.lines().count(), 1);
    assert!(!stderr.contains(token.expose_secret()));
    assert!(stderr.contains("enrolled node-c"), "{stderr}");
    assert!(!w.dir.path().join("node-c.token").exists());
    w.wait_policy(&token, "node-c").await;
    assert_eq!(w.write_key(&token, "node-c").await, 200);
}

#[tokio::test]
async fn enroll_refuses_a_bad_node_name_and_a_credential_that_may_not_make_identities_and_changes_nothing()
 {
    let w = World::start().await;
    for bad in ["Node_A", "a/../b", "x..y", ""] {
        let out = w.admin(&["enroll", bad]);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("node name"), "{bad}: {stderr}");
    }
    // The controller's own credential cannot make an identity.
    let out = w.run(&w.controller_kubeconfig, &["enroll", "node-a"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        stderr.contains("403") || stderr.contains("forbidden"),
        "{stderr}"
    );
    assert!(!stderr.contains(w.controller_token.expose_secret()));
    assert!(!w.dir.path().join("node-a.token").exists());
    let accounts: Api<ServiceAccount> = Api::namespaced(w.plane.admin_client().unwrap(), HOSTS);
    let list = accounts.list(&Default::default()).await.unwrap();
    let names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|a| a.metadata.name)
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with("fleet-role-actuator-")),
        "{names:?}"
    );
}

#[tokio::test]
async fn uninstall_refuses_during_a_swap_then_removes_every_object_fleet_role_made_and_revokes_each_host()
 {
    use k8s_openapi::api::{
        apps::v1::Deployment, coordination::v1::Lease, core::v1::Node, rbac::v1::ClusterRole,
    };
    let w = World::start().await;
    w.plane
        .apply_yaml_file(&workspace().join("deploy/kubernetes/fleet-role.yaml"))
        .await
        .expect("the controller's workload applies");
    let token_file = w.dir.path().join("host-a.token");
    let out = w.admin(&[
        "enroll",
        "host-a",
        "--credential",
        token_file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{:?}", text(&out));
    let out = w.admin(&["enroll", "host-b", "--credential", "host-b.token"]);
    assert!(out.status.success(), "{:?}", text(&out));
    let host_a = SecretString::from(std::fs::read_to_string(&token_file).unwrap());
    w.wait_policy(&host_a, "host-a").await;
    assert_eq!(w.write_key(&host_a, "host-a").await, 200);

    let admin = w.plane.admin_client().unwrap();
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), "platform");
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), HOSTS);
    let there = || async {
        (
            deployments.get_opt("fleet-role").await.unwrap().is_some(),
            accounts
                .get_opt("fleet-role-actuator-host-a")
                .await
                .unwrap()
                .is_some(),
        )
    };

    // A Node marked by a swap: refused, nothing removed.
    let names = protocol::Names::default();
    let nodes: Api<Node> = Api::all(admin.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1", "annotations": {names.role_swap(): "swap-1"}},
    }))
    .unwrap();
    nodes.create(&Default::default(), &node).await.unwrap();
    let out = w.admin(&["uninstall"]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
    assert!(
        err.contains("n1") && err.contains("nothing was removed"),
        "{err}"
    );
    assert_eq!(there().await, (true, true));
    nodes.delete("n1", &Default::default()).await.unwrap();

    // The dry run lists, and removes nothing.
    let out = w.admin(&["uninstall", "--dry-run"]);
    let (said, _) = text(&out);
    assert!(out.status.success(), "{:?}", text(&out));
    for line in [
        "would remove Deployment platform/fleet-role",
        "would unenroll host-a",
        "would unenroll host-b",
        "would remove Lease kube-system/fleet-regrade",
        "would remove ClusterRole fleet-role",
        "would remove ValidatingAdmissionPolicy fleet-role-actuator-report",
    ] {
        assert!(said.lines().any(|l| l == line), "no {line:?} in:\n{said}");
    }
    assert_eq!(there().await, (true, true));

    // The uninstall: every object gone, each host's token revoked, the
    // namespace kept.
    let out = w.admin(&["uninstall"]);
    let (said, _) = text(&out);
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(there().await, (false, false));
    assert!(
        said.contains("removed ServiceAccount fleet-role-hosts/fleet-role-actuator-host-b"),
        "{said}"
    );
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "kube-system");
    assert!(leases.get_opt("fleet-regrade").await.unwrap().is_none());
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    for r in ["fleet-role", "fleet-role-actuator"] {
        assert!(roles.get_opt(r).await.unwrap().is_none(), "{r} is left");
    }
    assert_ne!(
        w.write_key(&host_a, "host-a").await,
        200,
        "host-a's token still writes"
    );
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    assert!(namespaces.get_opt("platform").await.unwrap().is_some());
    // Again: nothing left to remove, and it says so.
    let out = w.admin(&["uninstall"]);
    let (said, _) = text(&out);
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(
        said.contains("fleet-role's objects are removed (0)"),
        "{said}"
    );
}

#[tokio::test]
async fn context_picks_the_kubeconfigs_context_and_an_unknown_one_is_a_usage_error() {
    let w = World::start().await;
    // Two contexts: the current one with a token the API server does not
    // know, and `admin` with the admin's.
    let file = w.dir.path().join("two.kubeconfig");
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {url}\n    certificate-authority: {ca}\nusers:\n- name: nobody\n  user:\n    token: not-a-token-anyone-issued\n- name: admin\n  user:\n    token: {token}\ncontexts:\n- name: nobody\n  context: {{cluster: t, user: nobody}}\n- name: admin\n  context: {{cluster: t, user: admin}}\ncurrent-context: nobody\n",
        url = w.plane.urls()[0],
        ca = w.plane.ca_file().display(),
        token = w.plane.admin_token().expose_secret(),
    );
    std::fs::write(&file, config).unwrap();
    let refused = w.run(&file, &["status"]);
    assert_eq!(refused.status.code(), Some(3), "{:?}", text(&refused));
    let picked = w.run(&file, &["--context", "admin", "status"]);
    let (out, err) = text(&picked);
    assert!(matches!(picked.status.code(), Some(0 | 5)), "{out}{err}");
    assert!(
        out.contains("Lease kube-system/fleet-regrade"),
        "{out}{err}"
    );
    let unknown = w.run(&file, &["--context", "elsewhere", "status"]);
    let (_, err) = text(&unknown);
    assert_eq!(unknown.status.code(), Some(2), "{err}");
    assert!(err.contains("elsewhere"), "{err}");
    for o in [&refused, &picked, &unknown] {
        let (out, err) = text(o);
        let token = w.plane.admin_token().expose_secret();
        assert!(!out.contains(token) && !err.contains(token));
    }
}
