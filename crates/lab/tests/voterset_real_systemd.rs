//! The voter count changed in place on real systemd, as a home lab grows
//! and an edge fleet shrinks: one server grows to three and then five
//! voters with `fleet-role grow`, and shrinks back to three with
//! `fleet-role shrink`, while a writer puts to etcd through the server that
//! keeps its vote; a change that would leave an even count standing is
//! refused with the reason. Fails, never skips, when nspawn cannot run.
//!
//! On the way, k3s's auto-deploy folder: a `fleet-role.yaml` an earlier
//! install left on a server is applied again when that server restarts
//! (the stand-in does as k3s's deploy controller), so the test puts one on
//! agent-1 once it is a server; the shrink's finish removes it, and when
//! agent-1 is promoted again an edit made through the API in the meantime
//! stands, while an operator's own file there is applied again.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use lab::{
    api::Apis,
    resize::{Resized, fleet_role_with_writer},
    systemd_lab::SystemdLab,
};

mod common;
use common::{etcd_members as members, fleet_role, lab_dir, lab_of, until_gates_pass};

/// Runs `fleet-role ARGS` through server-1 with the writer on, and checks
/// its exit code.
async fn run(lab: &SystemdLab, args: &[&str], code: i32) -> Resized {
    let r = fleet_role_with_writer(&lab.spec, &fleet_role(), "server-1", args, &|l: &str| {
        eprintln!("{l}")
    })
    .await
    .unwrap_or_else(|e| panic!("fleet-role {}: {e:#}", args.join(" ")));
    assert_eq!(
        r.code,
        Some(code),
        "fleet-role {}:\n{}\n{}",
        args.join(" "),
        r.output,
        r.log
    );
    r
}

/// Each host named runs its server and not its agent (`true`), or the
/// other way round.
fn runs_server(lab: &SystemdLab, hosts: &[&str], server: bool) {
    for h in hosts {
        let (k3s, agent) = (
            lab.is_active(h, "k3s").unwrap(),
            lab.is_active(h, "k3s-agent").unwrap(),
        );
        assert_eq!((k3s, agent), (server, !server), "{h}: k3s, k3s-agent");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_voter_grows_to_three_and_five_and_shrinks_back_to_three_with_no_failed_write_and_an_even_count_is_refused()
 {
    let dir = lab_dir();
    let lab = lab_of(1, 4, dir.path()).await;
    let mut figures = Vec::new();

    // 1 → 2 would leave an even count: refused, nothing changed.
    let even = run(&lab, &["grow", "--in", "agent-1"], 1).await;
    assert!(
        even.output.contains("odd-voter-count") && even.output.contains("queue a second --in"),
        "{}",
        even.output
    );
    assert_eq!(members(&lab).await.0.len(), 1);

    let grow_1_2 = &["grow", "--in", "agent-1", "--in", "agent-2"][..];
    for (args, voters, promoted) in [
        (grow_1_2, 3, &["agent-1", "agent-2"][..]),
        (
            &["grow", "--in", "agent-3", "--in", "agent-4"][..],
            5,
            &["agent-3", "agent-4"][..],
        ),
    ] {
        until_gates_pass(&lab, args).await;
        let r = run(&lab, args, 0).await;
        assert_eq!(r.writes.failed, 0, "{:?}", r.writes.errors);
        let (v, learners) = members(&lab).await;
        assert_eq!((v.len(), learners.len()), (voters, 0), "{v:?} {learners:?}");
        runs_server(&lab, promoted, true);
        figures.push(line(args, &r));
        if voters == 3 {
            an_earlier_installs_auto_deploy_file_is_applied_at_a_restart(&lab).await;
        }
    }

    // 5 → 4 would leave an even count: refused with the reason.
    let even = run(&lab, &["shrink", "--out", "agent-1"], 1).await;
    assert!(
        even.output.contains("odd-voter-count") && even.output.contains("queue a second --out"),
        "{}",
        even.output
    );

    let args = &["shrink", "--out", "agent-1", "--out", "agent-2"];
    until_gates_pass(&lab, args).await;
    let r = run(&lab, args, 0).await;
    assert_eq!(r.writes.failed, 0, "{:?}", r.writes.errors);
    let (v, learners) = members(&lab).await;
    assert_eq!(
        (v.len(), learners.len()),
        (3, 0),
        "etcd's members: {v:?} {learners:?}"
    );
    // The two stepped down and came home as agents.
    runs_server(&lab, &["agent-1", "agent-2"], false);
    runs_server(&lab, &["server-1", "agent-3", "agent-4"], true);
    figures.push(line(args, &r));

    // agent-1's finish removed fleet-role's file from the auto-deploy
    // folder and kept the operator's; promoted again, it puts back the
    // operator's object and leaves the edit made through the API.
    let folder = manifests(&lab, "agent-1");
    assert!(!folder.join("fleet-role.yaml").exists());
    assert!(folder.join("lab-addon.yaml").exists());
    until_gates_pass(&lab, grow_1_2).await;
    let r = run(&lab, grow_1_2, 0).await;
    runs_server(&lab, &["agent-1", "agent-2"], true);
    figures.push(line(grow_1_2, &r));
    let apis = Apis::for_lab(&lab.spec).unwrap();
    let addon = until_data(&apis, "default", "lab-addon", "from", |v| v == "a file").await;
    assert_eq!(addon, "a file");
    let settings = config_map(&apis, "platform", "fleet-role").await.unwrap();
    assert_eq!(
        settings["controller.toml"], EDITED,
        "agent-1's promotion put back an earlier install's settings over the API's"
    );
    for f in &figures {
        println!("{f}");
    }
}

/// A figure line: the command, its time, the writer's puts.
fn line(args: &[&str], r: &Resized) -> String {
    format!(
        "fleet-role {}: {:.0} s; writer: {} puts ok, {} failed, {:.1}/s, longest {} ms",
        args.join(" "),
        r.took.as_secs_f64(),
        r.writes.ok,
        r.writes.failed,
        r.writes.rate,
        r.writes.longest.as_millis()
    )
}

/// fleet-role's cluster side as an earlier install put it in k3s's
/// auto-deploy folder: its settings ConfigMap, as that install rendered it.
const EARLIER: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: platform
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: fleet-role
  namespace: platform
data:
  controller.toml: \"# an earlier install's settings\\n\"
";

/// The settings as an operator changed them through the API since.
const EDITED: &str = "# edited through the API\n";

/// An operator's own add-on in the same folder, which fleet-role leaves.
const ADDON: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: lab-addon
  namespace: default
data:
  from: a file
";

fn manifests(lab: &SystemdLab, host: &str) -> std::path::PathBuf {
    lab.spec
        .root(host)
        .join("var/lib/rancher/k3s/server/manifests")
}

/// Puts an earlier install's `fleet-role.yaml` and an operator's file in
/// agent-1's auto-deploy folder, restarts its server, and waits for both
/// to be applied (what k3s does at every start of a server); then edits
/// the settings and deletes the add-on through the API.
async fn an_earlier_installs_auto_deploy_file_is_applied_at_a_restart(lab: &SystemdLab) {
    let folder = manifests(lab, "agent-1");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("fleet-role.yaml"), EARLIER).unwrap();
    std::fs::write(folder.join("lab-addon.yaml"), ADDON).unwrap();
    let m = lab.machine("agent-1").unwrap();
    let out =
        tokio::task::block_in_place(|| m.systemctl(&["restart", "k3s"], Duration::from_secs(180)))
            .unwrap();
    assert!(
        out.status.success(),
        "systemctl restart k3s on agent-1: {out:?}"
    );
    let apis = Apis::for_lab(&lab.spec).unwrap();
    until_data(&apis, "platform", "fleet-role", "controller.toml", |v| {
        v.starts_with("# an earlier install")
    })
    .await;
    until_data(&apis, "default", "lab-addon", "from", |v| v == "a file").await;
    let patch = serde_json::json!({ "data": { "controller.toml": EDITED } });
    apis.any(|c| {
        let p = patch.clone();
        async move {
            Api::<ConfigMap>::namespaced(c, "platform")
                .patch("fleet-role", &PatchParams::default(), &Patch::Merge(&p))
                .await
        }
    })
    .await
    .unwrap();
    apis.any(|c| async move {
        Api::<ConfigMap>::namespaced(c, "default")
            .delete("lab-addon", &Default::default())
            .await
    })
    .await
    .unwrap();
}

async fn config_map(
    apis: &Apis,
    namespace: &str,
    name: &str,
) -> Option<std::collections::BTreeMap<String, String>> {
    let (ns, n) = (namespace.to_string(), name.to_string());
    apis.any(|c| {
        let (ns, n) = (ns.clone(), n.clone());
        async move { Api::<ConfigMap>::namespaced(c, &ns).get_opt(&n).await }
    })
    .await
    .unwrap()
    .map(|cm| cm.data.unwrap_or_default())
}

/// Waits, up to 2 minutes, until the ConfigMap's `key` satisfies `ok`;
/// returns its value.
async fn until_data(
    apis: &Apis,
    namespace: &str,
    name: &str,
    key: &str,
    ok: impl Fn(&str) -> bool,
) -> String {
    let clock = clock::Clock::system();
    let t0 = clock.now();
    loop {
        let v = config_map(apis, namespace, name)
            .await
            .and_then(|d| d.get(key).cloned());
        if let Some(v) = v.as_deref().filter(|v| ok(v)) {
            return v.to_string();
        }
        assert!(
            clock.since(t0) < Duration::from_secs(120),
            "{namespace}/{name} {key} is {v:?} after 2 minutes"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
