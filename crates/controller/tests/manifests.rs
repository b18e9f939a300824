//! `fleet-role manifests`: `deploy/rbac/` is its rendering of the defaults,
//! and, rendered for another report namespace and Lease name and applied to
//! a real kube-apiserver, its admission policy keeps each enrolled host to
//! its own key of the report, of at most 16 KiB, and no host identity of
//! another namespace writes there.

use std::{
    path::{Path, PathBuf},
    process::Output,
    time::Duration,
};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::ConfigMap};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use protocol::report::MAX_REPORT_BYTES;
use secrecy::SecretString;
use serde_json::json;
use testcp::ControlPlane;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `fleet-role` in `dir`, with no config but the one `args` names.
fn fleet_role(dir: &Path, args: &[&str]) -> Output {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fleet-role"))
        .current_dir(dir)
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("FLEET_ROLE_CONFIG")
        .output()
        .expect("fleet-role runs");
    assert!(
        out.status.success(),
        "fleet-role {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_manifests_in_deploy_rbac_are_the_rendering_of_the_default_settings() {
    let dir = tempfile::tempdir().unwrap();
    for (args, file) in [
        (&["manifests"][..], "deploy/rbac/actuator.yaml"),
        (
            &["manifests", "controller"][..],
            "deploy/rbac/controller.yaml",
        ),
        (&["manifests", "k3s"][..], "deploy/k3s/fleet-role.yaml"),
    ] {
        let out = fleet_role(dir.path(), args);
        let kept = std::fs::read(workspace().join(file)).unwrap();
        assert!(
            out.stdout == kept,
            "{file} is not `fleet-role {}`: regenerate it as its first lines say",
            args.join(" ")
        );
    }
}

const CONFIG: &str = "report_namespace = \"fleet-ops\"\nlease_name = \"regrade-x\"\n";
const NS: &str = "fleet-ops";

/// Writes `value` under `key` of the report with `token` by server-side
/// apply, as an actuator does: Ok, or the code and message of the refusal.
async fn write(
    plane: &ControlPlane,
    token: &SecretString,
    params: PatchParams,
    key: &str,
    value: &str,
) -> Result<(), (u16, String)> {
    let client = plane.client_for_token(token).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, NS);
    let body = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "fleet-role-actuators", "namespace": NS},
        "data": {key: value},
    });
    match cms
        .patch("fleet-role-actuators", &params, &Patch::Apply(&body))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) => Err((s.code, s.message)),
        Err(e) => panic!("{e}"),
    }
}

fn token(dir: &Path, node: &str) -> SecretString {
    SecretString::from(std::fs::read_to_string(dir.join(format!("{node}.token"))).unwrap())
}

#[tokio::test]
async fn under_another_namespace_the_rendered_policy_keeps_each_host_to_its_own_key_of_at_most_16_kib()
 {
    let plane = ControlPlane::start().await.expect("a control plane starts");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("fleet-ops.toml"), CONFIG).unwrap();
    for which in ["actuators", "controller"] {
        let out = fleet_role(d, &["manifests", which, "--config", "fleet-ops.toml"]);
        let yaml = String::from_utf8(out.stdout).unwrap();
        assert!(!yaml.contains("fleet-regrade"), "{yaml}");
        plane
            .apply_yaml(&yaml)
            .await
            .unwrap_or_else(|e| panic!("the {which} manifests apply: {e}"));
    }
    let kubeconfig = d.join("admin.kubeconfig");
    plane
        .write_kubeconfig(&kubeconfig, plane.admin_token())
        .unwrap();
    let admin = |args: &[&str]| {
        let mut all = vec!["--kubeconfig", "admin.kubeconfig"];
        all.extend_from_slice(args);
        fleet_role(d, &all)
    };
    // Two hosts of this fleet, and one identity left from an install with
    // the default namespace, whose name past that namespace's prefix would
    // read as node-a here (`platform` is one character shorter), bound by
    // mistake to this report's Role: the worst a leftover could be.
    admin(&["--config", "fleet-ops.toml", "enroll", "node-a"]);
    admin(&["--config", "fleet-ops.toml", "enroll", "node-b"]);
    admin(&["enroll", "xnode-a"]);
    plane
        .apply_yaml(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: leftover, namespace: fleet-ops}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: fleet-role-actuator-report}\nsubjects: [{kind: ServiceAccount, name: fleet-role-actuator-xnode-a, namespace: platform}]\n",
        )
        .await
        .unwrap();
    let (a, b, leftover) = (token(d, "node-a"), token(d, "node-b"), token(d, "xnode-a"));
    // A host's own field manager, as its actuator applies with.
    let manager = |node: &str| PatchParams::apply(&format!("fleet-role-actuator-{node}"));

    // The policy is in force once a dry run (which changes nothing) on
    // another host's key is denied by it.
    let started = clock::Clock::system().now();
    loop {
        match write(&plane, &a, manager("node-a").dry_run(), "node-b", "{}").await {
            Err((403, m)) if m.contains("only its own key") => break,
            other => assert!(
                started.elapsed() < Duration::from_secs(60),
                "the policy never came into force: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Its own key: up to the cap, counted in bytes (two-byte characters:
    // a count of characters would take one more).
    let at_cap = "é".repeat(MAX_REPORT_BYTES / 2);
    assert_eq!(at_cap.len(), MAX_REPORT_BYTES);
    assert_eq!(
        write(&plane, &a, manager("node-a"), "node-a", &at_cap).await,
        Ok(())
    );
    let over = format!("{at_cap}x");
    let refused = write(&plane, &a, manager("node-a"), "node-a", &over).await;
    let Err((403, m)) = refused else {
        panic!("16 KiB + 1 byte was not refused: {refused:?}")
    };
    assert!(
        m.contains("at most 16384 bytes (16 KiB)") && m.contains("not 16385"),
        "{m}"
    );
    assert_eq!(
        write(&plane, &b, manager("node-b"), "node-b", "{\"b\":1}").await,
        Ok(())
    );

    // Another host's key, even at a size that would fit, even forced under
    // that host's own field manager (unforced, the apply conflicts first).
    let refused = write(&plane, &b, manager("node-a").force(), "node-a", "{}").await;
    assert!(
        matches!(&refused, Err((403, m)) if m.contains("may change only its own key")),
        "{refused:?}"
    );

    // The leftover of the default namespace writes nothing here.
    for key in ["node-a", "xnode-a"] {
        let refused = write(&plane, &leftover, manager("xnode-a").force(), key, "{}").await;
        assert!(
            matches!(&refused, Err((403, m)) if m.contains("only a host identity of namespace fleet-ops")),
            "{key}: {refused:?}"
        );
    }

    // What stands is what the hosts wrote, each its own.
    let cms: Api<ConfigMap> = Api::namespaced(plane.admin_client().unwrap(), NS);
    let data = cms
        .get("fleet-role-actuators")
        .await
        .unwrap()
        .data
        .unwrap_or_default();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["node-a", "node-b"]);
    assert_eq!(data["node-a"], at_cap);

    // The Lease role names the configured Lease and no other.
    let leases: Api<Lease> = Api::namespaced(plane.client_for_token(&a).unwrap(), "kube-system");
    leases.get("regrade-x").await.expect("its own Lease");
    let other = leases.get("fleet-regrade").await;
    assert!(
        matches!(&other, Err(kube::Error::Api(s)) if s.code == 403),
        "{other:?}"
    );
}

#[tokio::test]
async fn the_k3s_auto_deploy_file_applies_server_side_as_a_dry_run_with_every_part_of_fleet_role() {
    let plane = ControlPlane::start().await.expect("a control plane starts");
    let yaml = std::fs::read_to_string(workspace().join("deploy/k3s/fleet-role.yaml")).unwrap();
    let applied = plane
        .dry_run_yaml(&yaml)
        .await
        .unwrap_or_else(|e| panic!("deploy/k3s/fleet-role.yaml applies: {e}"));
    let kinds: std::collections::BTreeSet<String> = applied
        .iter()
        .filter_map(|o| o.types.as_ref().map(|t| t.kind.clone()))
        .collect();
    for kind in [
        "Namespace",
        "ServiceAccount",
        "Lease",
        "ClusterRole",
        "RoleBinding",
        "ConfigMap",
        "ValidatingAdmissionPolicy",
        "Deployment",
    ] {
        assert!(kinds.contains(kind), "no {kind} in {kinds:?}");
    }
    // A dry run: nothing but the namespaces was stored.
    let admin = plane.admin_client().unwrap();
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(admin, "platform");
    assert!(deployments.get_opt("fleet-role").await.unwrap().is_none());
}
