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

/// Makes Node `name` with `labels` (each `"true"`) and, if given, its
/// InternalIP (status, patched as its kubelet would).
async fn make_node(w: &World, name: &str, labels: &[&str], ip: Option<&str>) {
    use k8s_openapi::api::core::v1::Node;
    let nodes: Api<Node> = Api::all(w.plane.admin_client().unwrap());
    let labels: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|l| (l.to_string(), json!("true")))
        .collect();
    let node: Node =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    if let Some(ip) = ip {
        nodes
            .patch_status(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Strategic(json!({"status": {
                    "addresses": [{"type": "InternalIP", "address": ip}],
                }})),
            )
            .await
            .unwrap();
    }
}

/// The base64 of every certificate of a PEM text, in order: two texts
/// name the same certificates when these are equal, however each is
/// wrapped.
fn pem_bodies(pem: &str) -> Vec<String> {
    pem.split("-----BEGIN CERTIFICATE-----")
        .skip(1)
        .map(|b| {
            b.split("-----END CERTIFICATE-----")
                .next()
                .unwrap()
                .split_whitespace()
                .collect()
        })
        .collect()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// What is in `dir` (names), for a check that nothing was left behind.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn enroll_bundle_writes_a_private_directory_whose_token_ca_and_settings_reach_the_api_as_the_actuator_reads_them()
 {
    use protocol::names::{ELIGIBLE_LABEL, K3S_CONTROL_PLANE_LABEL, K3S_ETCD_ROLE_LABEL};
    let w = World::start().await;
    make_node(
        &w,
        "srv-1",
        &[K3S_CONTROL_PLANE_LABEL, K3S_ETCD_ROLE_LABEL],
        Some("10.0.0.1"),
    )
    .await;
    make_node(&w, "standby", &[ELIGIBLE_LABEL], Some("10.0.0.2")).await;
    make_node(&w, "node-a", &[], Some("10.0.0.3")).await;
    make_node(&w, "runner", &[], Some("10.0.0.4")).await;

    let out = w.admin(&["enroll", "node-a", "--bundle", "node-a.bundle"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let dir = w.dir.path().join("node-a.bundle");
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(
        listing(&dir),
        ["actuator.toml", "ca.crt", "install.sh", "token"]
    );
    assert_eq!(mode(&dir.join("token")), 0o600);
    assert_eq!(mode(&dir.join("install.sh")), 0o700);
    // Nothing else beside it: the partial directory was renamed.
    assert_eq!(
        listing(w.dir.path()),
        ["admin.kubeconfig", "controller.kubeconfig", "node-a.bundle"]
    );
    let token = SecretString::from(std::fs::read_to_string(dir.join("token")).unwrap());
    assert!(!token.expose_secret().is_empty() && !token.expose_secret().contains('\n'));
    assert!(!stdout.contains(token.expose_secret()) && !stderr.contains(token.expose_secret()));
    assert!(stdout.contains("install.sh"), "{stdout}");

    // The CA is the one the admin's kubeconfig verified the API with.
    let ca = std::fs::read_to_string(dir.join("ca.crt")).unwrap();
    let want = std::fs::read_to_string(w.plane.ca_file()).unwrap();
    assert!(!pem_bodies(&ca).is_empty());
    assert_eq!(pem_bodies(&ca), pem_bodies(&want));

    // actuator.toml, as the actuator reads it: the servers, then the
    // eligible hosts, at their InternalIP; neither agent.
    let toml_text = std::fs::read_to_string(dir.join("actuator.toml")).unwrap();
    let file: actuator::config::FileConfig = toml::from_str(&toml_text).expect(&toml_text);
    let s = actuator::config::Settings::resolve(file, Default::default()).unwrap();
    assert_eq!(s.node.as_str(), "node-a");
    assert_eq!(s.api, ["https://10.0.0.1:6443", "https://10.0.0.2:6443"]);
    assert_eq!(
        s.ca_file.as_deref(),
        Some(Path::new("/etc/fleet-role/ca.crt"))
    );
    assert_eq!(
        s.token_file.as_deref(),
        Some(Path::new("/etc/fleet-role/token"))
    );

    // The bundle's token and CA, through the actuator's own client (the
    // test's API server stands in for the host's list): it reads and
    // writes the host's own report.
    let candidates = actuator::cluster::Candidates::new(
        vec![w.plane.urls()[0].clone()],
        Some(dir.join("ca.crt")),
        Some(dir.join("token")),
    )
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(candidates.client().unwrap(), HOSTS);
    cms.get("node-a")
        .await
        .expect("the bundle's token and CA read the host's report");
    w.wait_policy(&token, "node-a").await;
    assert_eq!(w.write_key(&token, "node-a").await, 200);

    // install.sh is a shell script that parses, and refuses (nothing
    // changed) when run for another host.
    let sh = |args: &[&str]| {
        std::process::Command::new("sh")
            .args(args)
            .output()
            .expect("sh runs")
    };
    let script = dir.join("install.sh");
    assert!(sh(&["-n", script.to_str().unwrap()]).status.success());
    let other = sh(&[script.to_str().unwrap(), "--node", "runner"]);
    assert_eq!(other.status.code(), Some(1));
    assert!(
        text(&other)
            .1
            .contains("refused, nothing changed: this bundle is for node-a")
    );

    // `--api` in place of the Nodes' addresses.
    let out = w.admin(&[
        "enroll",
        "runner",
        "--bundle",
        "runner.bundle",
        "--api",
        "https://192.0.2.7:7443",
    ]);
    assert!(out.status.success(), "{:?}", text(&out));
    let toml_text =
        std::fs::read_to_string(w.dir.path().join("runner.bundle/actuator.toml")).unwrap();
    assert!(
        toml_text.contains("api = [\"https://192.0.2.7:7443\"]"),
        "{toml_text}"
    );
}

#[tokio::test]
async fn enroll_bundle_refuses_an_existing_bundle_an_unknown_node_and_a_missing_directory_and_leaves_nothing()
 {
    use protocol::names::K3S_CONTROL_PLANE_LABEL;
    let w = World::start().await;
    make_node(&w, "srv-1", &[K3S_CONTROL_PLANE_LABEL], Some("10.0.0.1")).await;
    make_node(&w, "node-a", &[], Some("10.0.0.3")).await;
    let before = listing(w.dir.path());
    let accounts: Api<ServiceAccount> = Api::namespaced(w.plane.admin_client().unwrap(), HOSTS);

    // An unknown Node: nothing written, here or in the cluster.
    let out = w.admin(&["enroll", "ghost", "--bundle", "ghost.bundle"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no Node ghost"), "{stderr}");
    assert_eq!(listing(w.dir.path()), before);
    assert!(
        accounts
            .get_opt("fleet-role-actuator-ghost")
            .await
            .unwrap()
            .is_none()
    );

    // A directory that cannot be made.
    let out = w.admin(&["enroll", "node-a", "--bundle", "no/such/dir"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot make the bundle beside"), "{stderr}");
    assert!(
        accounts
            .get_opt("fleet-role-actuator-node-a")
            .await
            .unwrap()
            .is_none()
    );

    // An existing one (even empty) is never written over.
    std::fs::create_dir(w.dir.path().join("old.bundle")).unwrap();
    let out = w.admin(&["enroll", "node-a", "--bundle", "old.bundle"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("exists already"), "{stderr}");
    assert!(listing(&w.dir.path().join("old.bundle")).is_empty());
    assert!(
        accounts
            .get_opt("fleet-role-actuator-node-a")
            .await
            .unwrap()
            .is_none()
    );

    // --bundle with --credential or --output is a usage error.
    let out = w.admin(&["enroll", "node-a", "--bundle", "x", "--credential", "-"]);
    assert_eq!(out.status.code(), Some(2));
    let out = w.admin(&[
        "enroll",
        "node-a",
        "--bundle",
        "x",
        "--api",
        "http://10.0.0.1:6443",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let mut after = listing(w.dir.path());
    after.retain(|n| n != "old.bundle");
    assert_eq!(after, before);
}

#[tokio::test]
async fn kubeconfig_writes_the_controllers_own_private_credential_and_prints_it_only_when_asked() {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let w = World::start().await;
    let out = w.admin(&["kubeconfig", "--output", "controller.new"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let file = w.dir.path().join("controller.new");
    assert_eq!(mode(&file), 0o600);
    let kc = kube::config::Kubeconfig::read_from(&file).unwrap();
    let token = kc.auth_infos[0]
        .auth_info
        .as_ref()
        .unwrap()
        .token
        .clone()
        .unwrap();
    assert!(!stdout.contains(token.expose_secret()) && !stderr.contains(token.expose_secret()));
    assert!(stdout.contains("platform/fleet-role"), "{stdout}");

    // It is the controller's ServiceAccount, reached with the file alone
    // (its server and embedded CA).
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let review: SelfSubjectReview = serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
    }))
    .unwrap();
    let reviews: Api<SelfSubjectReview> = Api::all(client);
    let who = reviews
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    assert_eq!(
        who.status.unwrap().user_info.unwrap().username.as_deref(),
        Some("system:serviceaccount:platform:fleet-role")
    );

    // Asked for: on stdout, and no file.
    let out = w.admin(&["kubeconfig", "--output", "-"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("current-context: fleet-role"), "{stdout}");
    assert!(!stderr.contains("token:"));
    // A server in clear: refused.
    let out = w.admin(&[
        "kubeconfig",
        "--output",
        "x",
        "--server",
        "http://10.0.0.1:6443",
    ]);
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    assert!(!w.dir.path().join("x").exists());
}
