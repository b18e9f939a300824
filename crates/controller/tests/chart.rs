//! The Helm chart (deploy/chart/fleet-role), with the real helm that
//! scripts/build-helm.sh builds (`FLEET_ROLE_HELM`): its generated
//! templates are the manifests' templates, `helm lint` passes, `helm
//! template` renders what `fleet-role manifests all` renders for the same
//! config file (the defaults and another), and `helm install`, `helm
//! upgrade` and `helm uninstall` against a real kube-apiserver leave the
//! objects the chart says, an uninstall keeping the namespaces and the
//! regrade Lease.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use controller::manifests;
use k8s_openapi::api::{
    apps::v1::Deployment,
    coordination::v1::Lease,
    core::v1::{ConfigMap, Namespace, Service},
    rbac::v1::ClusterRole,
};
use kube::Api;
use serde_json::Value;
use testcp::ControlPlane;

/// Where a run of the suite names helm.
const HELM_ENV: &str = "FLEET_ROLE_HELM";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chart() -> PathBuf {
    workspace().join("deploy/chart/fleet-role")
}

/// The helm binary: `$FLEET_ROLE_HELM`, else the newest build in
/// `.cache/helm/`. None is a failure with the command to run, never a skip.
fn helm_binary() -> PathBuf {
    if let Some(p) = std::env::var_os(HELM_ENV) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "{HELM_ENV}={} is not a file: run scripts/build-helm.sh",
            p.display()
        );
        return p;
    }
    let newest = std::fs::read_dir(workspace().join(".cache/helm"))
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let bin = e.ok()?.path().join("helm");
            let modified = bin.metadata().ok()?.modified().ok()?;
            Some((modified, bin))
        })
        .max();
    match newest {
        Some((_, bin)) => bin,
        None => panic!(
            "no helm: run scripts/build-helm.sh (a few minutes, once) or set {HELM_ENV} to the helm it built"
        ),
    }
}

/// Runs helm with `args`, its state in `home`, for at most two minutes
/// (`timeout`): its output, which must be a success.
fn helm(home: &Path, args: &[&str]) -> Output {
    let out = Command::new("timeout")
        .arg("120")
        .arg(helm_binary())
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("helm runs");
    assert!(
        out.status.success(),
        "helm {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `fleet-role manifests all`, with the config file `config` if any.
fn manifests_all(dir: &Path, config: Option<&Path>) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleet-role"));
    cmd.current_dir(dir)
        .env_remove("KUBECONFIG")
        .env_remove("FLEET_ROLE_CONFIG");
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    let out = cmd
        .args(["manifests", "all"])
        .output()
        .expect("fleet-role runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The documents of `yaml` by kind, namespace and name (a repeated one
/// once); helm's own
/// annotation (`helm.sh/resource-policy`, which `kubectl apply` has no use
/// for) taken off, empty documents left out.
fn objects(yaml: &str) -> BTreeMap<(String, String, String), Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("the YAML parses");
    let mut out = BTreeMap::new();
    for mut d in docs.into_iter().filter(|d| !d.is_null()) {
        if let Some(a) = d["metadata"]
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            a.remove("helm.sh/resource-policy");
            if a.is_empty() {
                d["metadata"].as_object_mut().unwrap().remove("annotations");
            }
        }
        let key = (
            d["kind"].as_str().unwrap_or_default().to_string(),
            d["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            d["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        // A Namespace comes in each rendering that uses it (`manifests
        // all` holds two): once more, it must be the same.
        if let Some(before) = out.insert(key.clone(), d.clone()) {
            assert_eq!(before, d, "{key:?} twice, not the same");
        }
    }
    out
}

/// Asserts that the chart's objects are the manifests' plus the chart's
/// own metrics Service.
fn assert_same(chart: &str, manifests: &str) {
    let mut chart = objects(chart);
    let manifests = objects(manifests);
    let service = ("Service".into(), "platform".into(), "fleet-role".into());
    assert!(
        chart.remove(&service).is_some(),
        "the chart's metrics Service"
    );
    let chart_keys: Vec<_> = chart.keys().collect();
    let manifest_keys: Vec<_> = manifests.keys().collect();
    assert_eq!(chart_keys, manifest_keys, "the same objects");
    for (key, object) in &manifests {
        assert_eq!(
            &chart[key], object,
            "{key:?}: the chart's (left) differs from the manifests' (right)"
        );
    }
}

const OTHER: &str = "# another fleet's settings\nprefix = \"fleet.example.org\"\nreport_namespace = \"fleet-ops\"\nhosts_namespace = \"fleet-hosts\"\nlease_name = \"regrade-x\"\nleader_lease_namespace = \"ops\"\nleader_lease_name = \"lead\"\nadmin_group = \"fleet:admins\"\napi_servers = [\"https://10.0.0.1:6443\", \"https://10.0.0.2:6443\"]\nvoters = 5\nmetrics_address = \"0.0.0.0:9464\"\n";

#[test]
fn the_charts_generated_templates_are_the_manifests_templates_and_its_version_is_the_workspaces() {
    let write = std::env::var_os("FLEET_ROLE_WRITE_CHART").is_some();
    for (file, text) in manifests::chart_templates() {
        let path = chart().join("templates").join(file);
        if write {
            std::fs::write(&path, &text).unwrap();
        }
        let kept = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            kept == text,
            "{} is not the rendering of crates/controller/src/manifests/: run FLEET_ROLE_WRITE_CHART=1 cargo test -p controller --test chart",
            path.display()
        );
    }
    let meta: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart().join("Chart.yaml")).unwrap())
            .unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(meta["version"], version, "Chart.yaml's version");
    assert_eq!(meta["appVersion"], version, "Chart.yaml's appVersion");
    let values: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(chart().join("values.yaml")).unwrap())
            .unwrap();
    assert_eq!(values["config"], manifests::WORKLOAD_CONFIG);
    assert_eq!(values["image"]["pullPolicy"], "IfNotPresent");
    assert_eq!(
        std::fs::read_to_string(chart().join("files/fleet-role.rules.yaml")).unwrap(),
        std::fs::read_to_string(workspace().join("deploy/prometheus/fleet-role.rules.yaml"))
            .unwrap(),
        "the chart's copy of the alert rules is deploy/prometheus/'s: copy it again"
    );
}

#[test]
fn helm_lints_the_chart_and_renders_what_fleet_role_manifests_all_renders_for_the_same_config() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let chart = chart();
    let chart = chart.to_str().unwrap();
    helm(home, &["lint", "--strict", chart]);
    let defaults = helm(home, &["template", "fleet-role", chart]);
    assert_same(
        &String::from_utf8(defaults.stdout).unwrap(),
        &manifests_all(home, None),
    );

    let other = home.join("other.toml");
    std::fs::write(&other, OTHER).unwrap();
    let rendered = helm(
        home,
        &[
            "template",
            "fleet-role",
            chart,
            "--set-file",
            &format!("config={}", other.display()),
        ],
    );
    let rendered = String::from_utf8(rendered.stdout).unwrap();
    assert!(rendered.contains("fleet-hosts") && !rendered.contains("fleet-regrade"));
    assert_same(&rendered, &manifests_all(home, Some(&other)));

    // The names as values, written before config's text: the same as a
    // file that holds them so.
    let values = helm(
        home,
        &[
            "template",
            "fleet-role",
            chart,
            "--set",
            "settings.prefix=fleet.example.org,settings.hosts_namespace=fleet-hosts,settings.lease_name=regrade-x",
            "--set-json",
            "settings.api_servers=[\"https://10.0.0.1:6443\"]",
        ],
    );
    let file = home.join("values.toml");
    std::fs::write(
        &file,
        format!(
            "api_servers = [\"https://10.0.0.1:6443\"]\nhosts_namespace = \"fleet-hosts\"\nlease_name = \"regrade-x\"\nprefix = \"fleet.example.org\"\n{}",
            manifests::WORKLOAD_CONFIG
        ),
    )
    .unwrap();
    assert_same(
        &String::from_utf8(values.stdout).unwrap(),
        &manifests_all(home, Some(&file)),
    );

    // The controller under systemd: no workload, the rest alike.
    let off = helm(
        home,
        &[
            "template",
            "fleet-role",
            chart,
            "--set",
            "controller.enabled=false",
        ],
    );
    let off = objects(&String::from_utf8(off.stdout).unwrap());
    let mut expected = objects(&manifests_all(home, None));
    for kind in ["Deployment", "ConfigMap"] {
        let key = (
            kind.to_string(),
            "platform".to_string(),
            "fleet-role".to_string(),
        );
        assert!(expected.remove(&key).is_some(), "the manifests' {kind}");
    }
    assert_eq!(off, expected, "with controller.enabled=false");
}

#[test]
fn the_chart_adds_a_service_monitor_and_the_alert_rules_when_asked_and_refuses_a_bad_name() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let chart = chart();
    let chart = chart.to_str().unwrap();
    let out = helm(
        home,
        &[
            "template",
            "fleet-role",
            chart,
            "--set",
            "serviceMonitor.enabled=true,prometheusRule.enabled=true",
        ],
    );
    let objs = objects(&String::from_utf8(out.stdout).unwrap());
    let key = |kind: &str| {
        (
            kind.to_string(),
            "platform".to_string(),
            "fleet-role".to_string(),
        )
    };
    let monitor = &objs[&key("ServiceMonitor")];
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    let service = &objs[&key("Service")];
    assert_eq!(service["spec"]["ports"][0]["name"], "metrics");
    assert_eq!(
        service["spec"]["selector"],
        objs[&key("Deployment")]["spec"]["selector"]["matchLabels"]
    );
    let rules: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(workspace().join("deploy/prometheus/fleet-role.rules.yaml"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        objs[&key("PrometheusRule")]["spec"]["groups"],
        rules["groups"]
    );

    // Off by default: they need the Prometheus Operator's CRDs.
    let out = helm(home, &["template", "fleet-role", chart]);
    let objs = objects(&String::from_utf8(out.stdout).unwrap());
    assert!(
        !objs.contains_key(&key("ServiceMonitor")) && !objs.contains_key(&key("PrometheusRule"))
    );

    // A name the controller would refuse fails the rendering, named.
    for (bad, named) in [
        ("hosts_namespace = \"Fleet Hosts\"\n", "hosts_namespace"),
        ("admin_group = \"x') || true || ('\"\n", "admin_group"),
        ("prefix = [\n", "not TOML"),
    ] {
        helm_fails(
            home,
            chart,
            &["--set-file", &format!("config={}", write(home, bad))],
            named,
        );
    }
    // A key both as a value and in config; a number as a value.
    let both = write(home, "hosts_namespace = \"b\"\n");
    helm_fails(
        home,
        chart,
        &[
            "--set",
            "settings.hosts_namespace=a",
            "--set-file",
            &format!("config={both}"),
        ],
        "already been defined",
    );
    helm_fails(
        home,
        chart,
        &["--set", "settings.voters=3"],
        "numbers and tables go in config",
    );
}

/// Writes `text` to a config file in `home`; its path.
fn write(home: &Path, text: &str) -> String {
    let file = home.join("bad.toml");
    std::fs::write(&file, text).unwrap();
    file.display().to_string()
}

/// `helm template` of `chart` with `args`, which must fail saying `named`.
fn helm_fails(home: &Path, chart: &str, args: &[&str], named: &str) {
    let out = Command::new("timeout")
        .arg("120")
        .arg(helm_binary())
        .args(["template", "fleet-role", chart])
        .args(args)
        .env("HOME", home)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(named),
        "{args:?}: {err}"
    );
}

#[tokio::test]
async fn helm_installs_upgrades_and_uninstalls_the_chart_on_a_real_api_server_keeping_the_namespaces_and_the_regrade_lease()
 {
    let plane = ControlPlane::start().await.expect("a control plane starts");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let kubeconfig = home.join("kubeconfig");
    plane
        .write_kubeconfig(&kubeconfig, plane.admin_token())
        .unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap().to_string();
    let chart = chart();
    let chart = chart.to_str().unwrap();
    let client = plane.admin_client().unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "platform");
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "platform");
    let services: Api<Service> = Api::namespaced(client.clone(), "platform");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let leader: Api<Lease> = Api::namespaced(client.clone(), "platform");
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    // The release's record lives in `default`, which the chart does not
    // make (a namespace the chart makes cannot also hold its record).
    let release = ["--kubeconfig", &kubeconfig, "--namespace", "default"];

    let mut args = vec!["install", "fleet-role", chart];
    args.extend(release);
    helm(home, &args);
    let d = deployments.get("fleet-role").await.unwrap();
    let pod = d.spec.unwrap().template.spec.unwrap();
    let c = &pod.containers[0];
    assert_eq!(
        c.image.as_deref(),
        Some(concat!("localhost/fleet-role:", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(pod.service_account_name.as_deref(), Some("fleet-role"));
    let toml = |cm: ConfigMap| cm.data.unwrap()["controller.toml"].clone();
    assert_eq!(
        toml(configmaps.get("fleet-role").await.unwrap()),
        manifests::WORKLOAD_CONFIG
    );
    services.get("fleet-role").await.unwrap();
    leases.get("fleet-regrade").await.unwrap();
    leader.get("fleet-role-leader").await.unwrap();
    roles.get("fleet-role").await.unwrap();
    let policies: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicy",
            ),
            "validatingadmissionpolicies",
        ),
    );
    policies.get("fleet-role-controller-only").await.unwrap();
    policies.get("fleet-role-actuator-hosts").await.unwrap();

    // An upgrade to another image and another setting.
    let config = home.join("controller.toml");
    let five = manifests::WORKLOAD_CONFIG.replace("voters = 3", "voters = 5");
    std::fs::write(&config, &five).unwrap();
    let set_file = format!("config={}", config.display());
    let mut args = vec![
        "upgrade",
        "fleet-role",
        chart,
        "--set",
        "image.tag=9.9.9",
        "--set-file",
        &set_file,
    ];
    args.extend(release);
    helm(home, &args);
    let d = deployments.get("fleet-role").await.unwrap();
    assert_eq!(
        d.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some("localhost/fleet-role:9.9.9")
    );
    assert_eq!(toml(configmaps.get("fleet-role").await.unwrap()), five);

    let mut args = vec!["uninstall", "fleet-role"];
    args.extend(release);
    helm(home, &args);
    assert!(
        deployments.get_opt("fleet-role").await.unwrap().is_none(),
        "the Deployment goes"
    );
    assert!(
        configmaps.get_opt("fleet-role").await.unwrap().is_none(),
        "the ConfigMap goes"
    );
    assert!(
        roles.get_opt("fleet-role").await.unwrap().is_none(),
        "the ClusterRole goes"
    );
    assert!(
        policies
            .get_opt("fleet-role-controller-only")
            .await
            .unwrap()
            .is_none(),
        "the policy goes"
    );
    assert!(
        leader.get_opt("fleet-role-leader").await.unwrap().is_none(),
        "the leader Lease goes"
    );
    // What stays: the regrade Lease (a swap in progress survives) and the
    // namespaces (they hold each host's enrolled objects).
    leases.get("fleet-regrade").await.unwrap();
    for ns in ["platform", "fleet-role-hosts"] {
        let n = namespaces.get(ns).await.unwrap();
        assert!(n.metadata.deletion_timestamp.is_none(), "{ns} stays");
    }

    // A second install adopts what the first one kept.
    let mut args = vec!["install", "fleet-role", chart];
    args.extend(release);
    helm(home, &args);
    deployments.get("fleet-role").await.unwrap();
}
