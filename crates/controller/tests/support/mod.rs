//! Shared by the controller's tests against the real API: a control plane
//! with `deploy/rbac/actuator.yaml` and `deploy/rbac/controller.yaml`
//! applied, a kubeconfig holding the controller's ServiceAccount token (so
//! every test also proves its least-privilege RBAC is enough), the
//! `fleet-role` binary run as a child process, and a scripted fleet double.
//!
//! # The scripted fleet
//!
//! [`Fleet`] plays the hosts and k3s through the admin client, reacting to
//! what the controller writes as the real actuator and k3s would:
//!
//! - each host's actuator: the real [`hostdecide::decide`] on its Node, the
//!   regrade Lease, its report and a simulated disk (role file, datastore,
//!   tombstone, member name); reports as `protocol::Report` JSON under the
//!   host's key, applied with the host's own field manager;
//! - on a promotion: report started/learner, then k3s's etcd label, server
//!   labels, `node-name`/`node-address` annotations and `EtcdIsVoter=False`;
//!   the leader's loop sets `EtcdIsVoter=True` a moment later, and the host
//!   reports voter/done;
//! - on a step-down: report etcd-only/done (the role file names the agent);
//! - k3s's member controller: on `etcd.k3s.cattle.io/remove=true` it checks
//!   quorum like etcd does (refusing by deleting `remove`, and recording a
//!   violation), else sets `removed-node-name` and deletes `node-name` and
//!   `node-address`; the host's datastore gets its tombstone;
//! - the finish: report member-gone/agent-ready/done;
//! - a snapshot request: report done with a snapshot file;
//! - each kubelet: Ready=True and a node Lease renewed every second while
//!   its host is up; Ready=False once it goes down.
//!
//! Failures are injected through [`Faults`]: a promotion that never reaches
//! voter, a host going down, the whole fleet frozen (nothing written at all,
//! for the tests that compare resourceVersions), a step held (nobody reacts
//! to it until the test lets go, so the controller is caught in it).
//!
//! Everything waits by polling against generous deadlines and asserts no
//! timing: the tests run on a loaded 2-core machine.

#![allow(dead_code)]

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    process::Output,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use hostdecide::decide::{Decision, HostState, JoinTarget, Observation, Step, decide};
use k8s_openapi::{
    api::{
        coordination::v1::{Lease, LeaseSpec},
        core::v1::{ConfigMap, Node},
        events::v1::Event,
        rbac::v1::ClusterRole,
    },
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use protocol::{
    LeaseFacts, Names, Report, StepKind, SwapId,
    etcd::{EtcdView, Member, MemberId},
    names::{
        ELIGIBLE_LABEL, K3S_CONTROL_PLANE_LABEL, K3S_ETCD_IS_VOTER, K3S_ETCD_NODE_ADDRESS,
        K3S_ETCD_NODE_NAME, K3S_ETCD_REMOVE, K3S_ETCD_REMOVED_NODE_NAME, K3S_ETCD_ROLE_LABEL,
        K3S_MASTER_LABEL,
    },
    report::{Detail, Phase, ReportStep},
    validate::Role,
};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use testcp::ControlPlane;
use tokio::process::{Child, Command};

/// The default prefix.
pub const P: &str = "github-runner.exadev.com";

/// The namespace of the hosts' own objects (the default).
pub const HOSTS: &str = "fleet-role-hosts";
/// How long any wait lasts before the test fails. Generous: a loaded
/// machine is slow, and a passing test never waits this long.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// The workspace's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A host of the fleet, as the test sets it up.
#[derive(Debug, Clone)]
pub struct HostSpec {
    /// The Node's name.
    pub name: &'static str,
    /// An etcd voter (else an agent).
    pub voter: bool,
    /// Carries [`ELIGIBLE_LABEL`]`=true`.
    pub eligible: bool,
}

pub use testcp::runbook::kubectl;

/// `n1`, `n2`, `n3` voters; `n4` an eligible standby; `n5` an agent that
/// may not vote.
pub fn three_voters() -> Vec<HostSpec> {
    vec![
        HostSpec {
            name: "n1",
            voter: true,
            eligible: true,
        },
        HostSpec {
            name: "n2",
            voter: true,
            eligible: true,
        },
        HostSpec {
            name: "n3",
            voter: true,
            eligible: true,
        },
        HostSpec {
            name: "n4",
            voter: false,
            eligible: true,
        },
        HostSpec {
            name: "n5",
            voter: false,
            eligible: false,
        },
    ]
}

/// `three_voters`, and n6 a second eligible standby beside n4.
pub fn three_voters_and_a_second_standby() -> Vec<HostSpec> {
    let mut hosts = three_voters();
    hosts.push(HostSpec {
        name: "n6",
        voter: false,
        eligible: true,
    });
    hosts
}

/// The controller's settings in the tests: short, so the tests are quick,
/// yet generous enough for a loaded machine.
pub const CONFIG: &str = r#"
voters = 3
lease_duration_secs = 12
skew_margin_secs = 2
poll_millis = 200
grace_period_secs = 3
settle_secs = 2
heartbeat_grace_secs = 6
actuator_heartbeat_max_age_secs = 20
leader_lease_duration_secs = 6

[timeouts]
snapshot = 90
promote = 90
rollback = 90
remove_incoming = 90
step_down = 90
removal = 90
finish = 90
"#;

/// One test's world: a control plane, the RBAC, the fleet double, and the
/// files the binary is run with.
pub struct Harness {
    /// The control plane (dropped last).
    pub plane: ControlPlane,
    /// The admin client.
    pub admin: Client,
    /// The scripted fleet.
    pub fleet: Fleet,
    /// The controller's kubeconfig (its ServiceAccount token).
    pub kubeconfig: PathBuf,
    /// The controller's config file.
    pub config: PathBuf,
    /// The controller's token, to check it never appears in any output.
    pub token: SecretString,
    dir: tempfile::TempDir,
}

impl Harness {
    /// Starts a control plane, applies the RBAC, creates the hosts' Nodes
    /// and starts the fleet double; `config` is the controller's TOML.
    pub async fn start(hosts: &[HostSpec], config: &str) -> Self {
        let plane = ControlPlane::start().await.expect("a control plane starts");
        for f in ["deploy/rbac/actuator.yaml", "deploy/rbac/controller.yaml"] {
            plane
                .apply_yaml_file(&workspace().join(f))
                .await
                .unwrap_or_else(|e| panic!("{f} applies: {e}"));
        }
        let admin = plane.admin_client().unwrap();
        let token = plane
            .service_account_token("platform", "fleet-role")
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        write_private(&token_file, token.expose_secret());
        let url = plane.urls()[0].clone();
        let kubeconfig = dir.path().join("kubeconfig");
        write_private(
            &kubeconfig,
            &format!(
                "apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {url}
    certificate-authority: {ca}
users:
- name: fleet-role
  user:
    tokenFile: {token}
contexts:
- name: test
  context:
    cluster: test
    user: fleet-role
current-context: test
",
                ca = plane.ca_file().display(),
                token = token_file.display()
            ),
        );
        let config_file = dir.path().join("controller.toml");
        fs::write(&config_file, config).unwrap();
        let fleet = Fleet::start(admin.clone(), hosts).await;
        Self {
            plane,
            admin,
            fleet,
            kubeconfig,
            config: config_file,
            token,
            dir,
        }
    }

    /// A `fleet-role` command with this world's kubeconfig and config.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_fleet-role"));
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env_remove("KUBECONFIG")
            .env("FLEET_ROLE_LOG", "info")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        c
    }

    /// Runs `fleet-role ARGS` to its end (failing the test past the deadline).
    pub async fn run(&self, args: &[&str]) -> Run {
        self.run_with_env(args, &[]).await
    }

    /// [`Harness::run`] with `env` set in the command's environment.
    pub async fn run_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let started = clock::Clock::system().now();
        let child = self
            .command(args)
            .envs(env.iter().copied())
            .spawn()
            .expect("fleet-role starts");
        let out = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
            .await
            .expect("fleet-role ends within 300 s")
            .unwrap();
        Run::new(out, started.elapsed(), self)
    }

    /// Runs the `fleet-role` commands of the runbook block marked `mark` in
    /// docs/recovery.md, as written, with its placeholders filled in from
    /// `fill` (`("OUT", "n1")`); each run in turn, all returned. A block
    /// holding any other program fails the test: this harness runs only
    /// `fleet-role`.
    pub async fn run_runbook(&self, mark: &str, fill: &[(&str, &str)]) -> Vec<Run> {
        let mut runs = Vec::new();
        for command in testcp::runbook::commands(mark) {
            let command = fill
                .iter()
                .fold(command, |c, (from, to)| c.replace(from, to));
            let args: Vec<&str> = command.split_whitespace().collect();
            assert_eq!(args.first(), Some(&"fleet-role"), "{mark}: {command}");
            eprintln!("runbook {mark}: {command}");
            runs.push(self.run(&args[1..]).await);
        }
        runs
    }

    /// The block of docs/recovery.md marked `mark`, each line run as
    /// written through `sh -c` (pipes and all), as an administrator runs
    /// it: `fleet-role` and kubectl ([`kubectl`]) first on `PATH`, an
    /// administrator's kubeconfig in `KUBECONFIG`, the controller's config
    /// in `FLEET_ROLE_CONFIG`; `fill` replaces the placeholders, and the
    /// doc's config path is this harness's. Each line is bounded (120 s)
    /// and must exit 0 unless it is a `fleet-role status`, whose exit code
    /// is the test's to check; returns each line's output.
    pub async fn run_runbook_as_admin(
        &self,
        mark: &str,
        fill: &[(&str, &str)],
    ) -> Vec<(String, std::process::Output)> {
        let kubeconfig = self.dir.path().join("admin.kubeconfig");
        self.plane
            .write_kubeconfig(&kubeconfig, self.plane.admin_token())
            .unwrap();
        let config = self.config.display().to_string();
        let kubectl = kubectl();
        let fill: Vec<(&str, &str)> = fill
            .iter()
            .copied()
            .chain([("/etc/fleet-role/controller.toml", config.as_str())])
            .collect();
        let shell = testcp::runbook::Shell {
            home: self.dir.path(),
            programs: &[
                ("fleet-role", Path::new(env!("CARGO_BIN_EXE_fleet-role"))),
                ("kubectl", &kubectl),
            ],
            env: &[
                ("KUBECONFIG", &kubeconfig),
                ("FLEET_ROLE_CONFIG", &self.config),
            ],
            secret: self.plane.admin_token().expose_secret(),
        };
        testcp::runbook::run(&shell, mark, &fill).await
    }

    /// Starts `fleet-role ARGS` and returns the child.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).spawn().expect("fleet-role starts")
    }

    /// Reads a running `fleet-role`'s output until a line containing
    /// `needle` (failing the test if it ends first or past 120 s); returns
    /// the output read. The controller prints each decision as it takes it,
    /// so this waits for a decision rather than for time to pass.
    pub async fn read_until(child: &mut Child, needle: &str) -> String {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let stdout = child.stdout.take().expect("stdout piped and not taken");
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = String::new();
        let found = tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains(needle) {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(found, Ok(true), "no line with {needle:?} in:\n{seen}");
        // Keep draining, so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        seen
    }

    /// The Nodes.
    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.admin.clone())
    }

    /// A Node.
    pub async fn node(&self, name: &str) -> Node {
        self.nodes().get(name).await.unwrap()
    }

    /// The regrade Lease.
    pub async fn lease(&self) -> Lease {
        Api::<Lease>::namespaced(self.admin.clone(), "kube-system")
            .get("fleet-regrade")
            .await
            .unwrap()
    }

    /// An annotation of the regrade Lease.
    pub async fn lease_annotation(&self, key: &str) -> Option<String> {
        self.lease()
            .await
            .metadata
            .annotations
            .and_then(|a| a.get(&format!("{P}/{key}")).cloned())
    }

    /// Writes `node`'s heartbeat as if its actuator had gone silent `secs`
    /// ago (freeze the fleet first, or the double writes a fresh one).
    pub async fn age_heartbeat(&self, node: &str, secs: i64) {
        let mut report = self.report(node).await.expect("a report");
        let host = report.host.as_mut().expect("a host part");
        host.heartbeat_at = host.heartbeat_at.saturating_sub(secs);
        write_report(&self.admin, node, &report).await.unwrap();
    }

    /// A host's report, from its own ConfigMap.
    pub async fn report(&self, node: &str) -> Option<Report> {
        Api::<ConfigMap>::namespaced(self.admin.clone(), HOSTS)
            .get_opt(node)
            .await
            .ok()
            .flatten()
            .as_ref()
            .and_then(kubeview::hostobjects::report_value)
            .and_then(Report::from_json)
    }

    /// The resourceVersion of every object the controller could write or
    /// read: every Node, the regrade Lease, the report ConfigMap, every node
    /// Lease, and the number of Events.
    pub async fn versions(&self) -> BTreeMap<String, String> {
        let mut v = BTreeMap::new();
        for n in self.nodes().list(&ListParams::default()).await.unwrap() {
            v.insert(
                format!("node/{}", n.metadata.name.unwrap()),
                n.metadata.resource_version.unwrap(),
            );
        }
        for l in Api::<Lease>::namespaced(self.admin.clone(), "kube-node-lease")
            .list(&ListParams::default())
            .await
            .unwrap()
        {
            v.insert(
                format!("node-lease/{}", l.metadata.name.unwrap()),
                l.metadata.resource_version.unwrap(),
            );
        }
        v.insert(
            "lease".into(),
            self.lease().await.metadata.resource_version.unwrap(),
        );
        for cm in Api::<ConfigMap>::namespaced(self.admin.clone(), HOSTS)
            .list(&ListParams::default())
            .await
            .unwrap()
        {
            v.insert(
                format!("report/{}", cm.metadata.name.unwrap()),
                cm.metadata.resource_version.unwrap(),
            );
        }
        v.insert("events".into(), self.events().await.len().to_string());
        v
    }

    /// The Events fleet-role recorded: (Node, reason).
    pub async fn events(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String, String)> =
            Api::<Event>::namespaced(self.admin.clone(), "default")
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|e| e.reporting_controller.as_deref() == Some("fleet-role"))
                .map(|e| {
                    (
                        e.metadata.name.clone().unwrap_or_default(),
                        e.regarding.and_then(|r| r.name).unwrap_or_default(),
                        e.reason.unwrap_or_default(),
                    )
                })
                .collect();
        out.sort();
        out.into_iter().map(|(_, n, r)| (n, r)).collect()
    }

    /// Gives `node` its own actuator identity, as `fleet-role enroll` does
    /// (the objects of `kubeview::Identity`), and returns a token of it: a
    /// host's own credential, to play a compromised host.
    pub async fn enroll(&self, node: &str) -> SecretString {
        let id = kubeview::Identity::of(&protocol::NodeName::parse(node).unwrap()).unwrap();
        for object in id.objects(&Names::default()) {
            self.plane
                .apply_yaml(&object.to_string())
                .await
                .unwrap_or_else(|e| panic!("the identity of {node} applies: {e}"));
        }
        self.plane
            .service_account_token(HOSTS, id.name())
            .await
            .unwrap_or_else(|e| panic!("a token of {node}'s identity: {e}"))
    }

    /// Takes the regrade Lease for someone else (an intruder holding it for
    /// its own swap), as another controller would.
    pub async fn steal_lease(&self) {
        let api = Api::<Lease>::namespaced(self.admin.clone(), "kube-system");
        let mut lease = api.get("fleet-regrade").await.unwrap();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some("intruder".into());
        spec.renew_time = Some(MicroTime(
            Timestamp::try_from(clock::Clock::system().wall()).unwrap(),
        ));
        spec.lease_duration_seconds = Some(600);
        let a = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
        a.insert(format!("{P}/swap-instance"), "intruder-1".into());
        a.insert(format!("{P}/role-swap"), "swap-intruder".into());
        api.replace("fleet-regrade", &PostParams::default(), &lease)
            .await
            .unwrap();
    }

    /// Checks the fleet after a completed swap of `out` for `incoming`.
    pub async fn assert_swapped(&self, out: &str, incoming: &str) {
        self.assert_demoted(out).await;
        self.assert_promoted(incoming).await;
        self.assert_clean().await;
    }

    /// Checks `out` finished as an agent: no server labels, no k3s etcd
    /// annotations, no fleet-role marks, uncordoned, not a voter.
    pub async fn assert_demoted(&self, out: &str) {
        let o = self.node(out).await;
        let labels = o.metadata.labels.clone().unwrap_or_default();
        let annotations = o.metadata.annotations.clone().unwrap_or_default();
        for l in [
            K3S_ETCD_ROLE_LABEL,
            K3S_CONTROL_PLANE_LABEL,
            K3S_MASTER_LABEL,
        ] {
            assert!(!labels.contains_key(l), "{out} still has {l}: {labels:?}");
        }
        for a in [
            K3S_ETCD_NODE_NAME,
            K3S_ETCD_NODE_ADDRESS,
            K3S_ETCD_REMOVE,
            K3S_ETCD_REMOVED_NODE_NAME,
        ] {
            assert!(!annotations.contains_key(a), "{out} still has {a}");
        }
        assert!(
            !annotations.keys().any(|k| k.starts_with(P)),
            "{out} still has fleet-role annotations: {annotations:?}"
        );
        assert_eq!(
            labels.get(&format!("{P}/desired-role")).map(String::as_str),
            Some("agent")
        );
        assert_ne!(
            o.spec.as_ref().and_then(|s| s.unschedulable),
            Some(true),
            "{out} is still cordoned"
        );
        assert!(
            !condition(&o, K3S_ETCD_IS_VOTER),
            "{out} still claims a voter"
        );
    }

    /// Checks `incoming` is a voter that wants to stay one, with no marks.
    pub async fn assert_promoted(&self, incoming: &str) {
        let i = self.node(incoming).await;
        let labels = i.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(K3S_ETCD_ROLE_LABEL).map(String::as_str),
            Some("true")
        );
        assert!(condition(&i, K3S_ETCD_IS_VOTER));
        assert_eq!(
            labels.get(&format!("{P}/desired-role")).map(String::as_str),
            Some("server"),
            "{incoming}: {labels:?}"
        );
        let annotations = i.metadata.annotations.clone().unwrap_or_default();
        assert!(
            !annotations.keys().any(|k| k.starts_with(P)),
            "{annotations:?}"
        );
    }

    /// Checks no Node keeps a fleet-role annotation, the Lease is free, and
    /// the fleet double saw no violation.
    pub async fn assert_clean(&self) {
        for n in self.nodes().list(&ListParams::default()).await.unwrap() {
            let a = n.metadata.annotations.unwrap_or_default();
            assert!(
                !a.keys().any(|k| k.starts_with(P)),
                "{:?} keeps fleet-role annotations: {a:?}",
                n.metadata.name
            );
        }
        self.assert_lease_released().await;
        assert!(
            self.fleet.violations().is_empty(),
            "{:?}",
            self.fleet.violations()
        );
    }

    /// Checks the regrade Lease is free with no swap on it.
    pub async fn assert_lease_released(&self) {
        let lease = self.lease().await;
        assert!(
            lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.clone())
                .is_none(),
            "{lease:?}"
        );
        let a = lease.metadata.annotations.unwrap_or_default();
        for k in [
            "role-swap",
            "swap-out",
            "swap-in",
            "swap-instance",
            "swap-step",
            "swap-stopping",
        ] {
            assert!(!a.contains_key(&format!("{P}/{k}")), "{k} left: {a:?}");
        }
        assert!(a.contains_key(&format!("{P}/last-swap")));
    }

    /// Takes the controller's right to patch Nodes away (`false`) or gives
    /// it back (`true`), by rewriting its ClusterRole, and returns once the
    /// API server enforces the change: a dry-run patch of `n2` under the
    /// controller's own token is refused, or allowed. While it is away, each
    /// Node write the controller tries fails and is retried, so it stays
    /// where it is.
    pub async fn allow_node_patches(&self, allow: bool) {
        let verbs = if allow {
            json!(["get", "list", "patch"])
        } else {
            json!(["get", "list"])
        };
        Api::<ClusterRole>::all(self.admin.clone())
            .patch(
                "fleet-role",
                &PatchParams::default(),
                &Patch::Json::<()>(
                    serde_json::from_value(json!([
                        {"op": "test", "path": "/rules/0/resources", "value": ["nodes"]},
                        {"op": "replace", "path": "/rules/0/verbs", "value": verbs},
                    ]))
                    .unwrap(),
                ),
            )
            .await
            .unwrap();
        let controller: Api<Node> = Api::all(self.plane.client_for_token(&self.token).unwrap());
        let dry_run = PatchParams {
            dry_run: true,
            ..PatchParams::default()
        };
        self.wait_for(
            if allow {
                "Node patches allowed"
            } else {
                "Node patches refused"
            },
            || async {
                let r = controller
                    .patch("n2", &dry_run, &Patch::Merge(json!({})))
                    .await;
                match r {
                    Ok(_) => allow,
                    Err(kube::Error::Api(s)) if s.is_forbidden() => !allow,
                    Err(_) => false,
                }
            },
        )
        .await;
    }

    /// Waits until `check` holds.
    /// Runs `args` until a run exits 0 and returns that run. For commands
    /// whose exit follows the fleet's health (`status`): the servers' views
    /// of etcd take in a change one heartbeat at a time, and until they all
    /// have, `status` rightly exits 5. Past [`DEADLINE`] the test fails with
    /// the last run's whole output.
    pub async fn run_until_done(&self, args: &[&str]) -> Run {
        let started = clock::Clock::system().now();
        loop {
            let run = self.run(args).await;
            if run.code == Some(0) || started.elapsed() >= DEADLINE {
                run.expect(0);
                return run;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn wait_for<F, Fut>(&self, what: &str, check: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let started = clock::Clock::system().now();
        while !check().await {
            assert!(started.elapsed() < DEADLINE, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

pub use kubeview::condition_true as condition;

fn write_private(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// A finished `fleet-role` run.
#[derive(Debug)]
pub struct Run {
    /// The exit code.
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// How long it took.
    pub took: Duration,
}

impl Run {
    fn new(out: Output, took: Duration, h: &Harness) -> Self {
        let run = Self {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            took,
        };
        run.assert_no_token(h);
        run
    }

    /// The token appears in no output.
    pub fn assert_no_token(&self, h: &Harness) {
        let token = h.token.expose_secret();
        assert!(token.len() > 20);
        assert!(!self.stdout.contains(token), "the token was printed");
        assert!(!self.stderr.contains(token), "the token was logged");
    }

    /// Fails the test with the output unless the exit code is `code`.
    pub fn expect(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Fails the test unless each of `lines` is printed, in this order.
    pub fn assert_in_order(&self, lines: &[&str]) {
        let mut at = 0;
        for step in lines {
            let found = self.stdout[at..]
                .find(step)
                .unwrap_or_else(|| panic!("{step:?} missing or out of order in:\n{}", self.stdout));
            at += found;
        }
    }
}

/// What the fleet double does wrong, and how fast it reacts.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Hosts whose promotion never reaches voter (a learner forever).
    pub stall_promotion: BTreeSet<String>,
    /// Hosts that are down (their Node NotReady, nothing reacts).
    pub down: BTreeSet<String>,
    /// Hosts whose step-down fails (etcd does not serve again).
    pub fail_step_down: BTreeSet<String>,
    /// Nothing at all is written by the fleet (no heartbeat either).
    pub frozen: bool,
    /// Servers whose actuators report that their agent could not start.
    pub ineligible: BTreeSet<String>,
    /// A host acts on a step only after seeing it this long.
    pub react_after: Duration,
    /// Steps nobody reacts to while named here, so a test can hold the
    /// controller in one for as long as it needs: an actuator's step by its
    /// report name (`snapshot`, `promote`, `step-down`, `rollback`,
    /// `finish`), or `removal` for k3s's member controller. What was held
    /// is recorded ([`Fleet::has_held`]).
    pub hold: BTreeSet<String>,
    /// Members no Node shows (ghosts) that every server's view lists.
    pub ghosts: Vec<Member>,
    /// Hosts whose actuator the test plays (a compromised host writing its
    /// own report key): the double writes no report for them.
    pub compromised: BTreeSet<String>,
}

/// A host as the double keeps it.
#[derive(Debug, Clone, Default)]
struct SimHost {
    role: Option<Role>,
    datastore: bool,
    tombstone: bool,
    member: Option<String>,
    address: String,
    /// When the learner joined.
    learner_since: Option<Instant>,
    /// When each step was first seen (for `react_after`).
    seen: BTreeMap<String, Instant>,
    /// When the kubelet last renewed the node Lease.
    renewed: Option<Instant>,
    /// What the double last set as the Ready condition.
    ready: Option<bool>,
}

#[derive(Debug, Default)]
struct World {
    hosts: BTreeMap<String, SimHost>,
    faults: Faults,
    violations: Vec<String>,
    log: Vec<String>,
    /// The steps of [`Faults::hold`] something was asked for and held back.
    held: BTreeSet<String>,
    /// How many rounds the double has finished (frozen or not).
    ticks: u64,
}

/// The scripted fleet: hosts and k3s, through the admin client.
pub struct Fleet {
    world: Arc<Mutex<World>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn k3s() -> PatchParams {
    PatchParams {
        field_manager: Some("k3s".into()),
        ..PatchParams::default()
    }
}

fn now_time() -> Value {
    serde_json::to_value(Time(
        Timestamp::try_from(clock::Clock::system().wall()).unwrap(),
    ))
    .unwrap()
}

impl Fleet {
    async fn start(admin: Client, hosts: &[HostSpec]) -> Self {
        let nodes: Api<Node> = Api::all(admin.clone());
        let node_leases: Api<Lease> = Api::namespaced(admin.clone(), "kube-node-lease");
        let mut world = World::default();
        for (i, h) in hosts.iter().enumerate() {
            let address = format!("127.0.1.{}", i + 1);
            let member = h
                .voter
                .then(|| format!("{}-{:08x}", h.name, 0x1000_0000 + i));
            let mut labels = BTreeMap::new();
            let mut annotations = BTreeMap::new();
            if h.eligible {
                labels.insert(ELIGIBLE_LABEL.to_string(), "true".to_string());
            }
            if h.voter {
                for l in [
                    K3S_ETCD_ROLE_LABEL,
                    K3S_CONTROL_PLANE_LABEL,
                    K3S_MASTER_LABEL,
                ] {
                    labels.insert(l.to_string(), "true".to_string());
                }
                annotations.insert(K3S_ETCD_NODE_NAME.to_string(), member.clone().unwrap());
                annotations.insert(K3S_ETCD_NODE_ADDRESS.to_string(), address.clone());
            }
            let node = Node {
                metadata: ObjectMeta {
                    name: Some(h.name.into()),
                    labels: Some(labels),
                    annotations: Some(annotations),
                    ..ObjectMeta::default()
                },
                ..Node::default()
            };
            nodes.create(&PostParams::default(), &node).await.unwrap();
            let mut conditions = vec![json!({
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastTransitionTime": now_time(), "lastHeartbeatTime": now_time(),
            })];
            if h.voter {
                conditions.push(json!({
                    "type": K3S_ETCD_IS_VOTER, "status": "True", "reason": "MemberIsVoter",
                    "lastTransitionTime": now_time(),
                }));
            }
            nodes
                .patch_status(
                    h.name,
                    &k3s(),
                    &Patch::Strategic(json!({"status": {
                        "conditions": conditions,
                        "addresses": [{"type": "InternalIP", "address": address}],
                    }})),
                )
                .await
                .unwrap();
            node_leases
                .create(
                    &PostParams::default(),
                    &Lease {
                        metadata: ObjectMeta {
                            name: Some(h.name.into()),
                            ..ObjectMeta::default()
                        },
                        spec: Some(LeaseSpec {
                            holder_identity: Some(h.name.into()),
                            lease_duration_seconds: Some(40),
                            renew_time: Some(MicroTime(
                                Timestamp::try_from(clock::Clock::system().wall()).unwrap(),
                            )),
                            ..LeaseSpec::default()
                        }),
                    },
                )
                .await
                .unwrap();
            world.hosts.insert(
                h.name.to_string(),
                SimHost {
                    role: Some(if h.voter { Role::Server } else { Role::Agent }),
                    datastore: h.voter,
                    member,
                    address,
                    ready: Some(true),
                    renewed: Some(clock::Clock::system().now()),
                    ..SimHost::default()
                },
            );
        }
        // Running actuators have written their heartbeat (and the servers
        // their view of etcd) before any swap is asked; the double goes on
        // writing them every few seconds.
        let now = Timestamp::try_from(clock::Clock::system().wall())
            .unwrap()
            .as_second();
        let nodes: BTreeMap<String, Node> = Api::<Node>::all(admin.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|n| (n.metadata.name.clone().unwrap(), n))
            .collect();
        for (name, h) in &world.hosts {
            let part = protocol::report::HostPart {
                heartbeat_at: now,
                promotion: None,
                demotion: (h.role == Some(Role::Server) || h.datastore)
                    .then_some(protocol::report::Eligibility::Ok),
                etcd: etcd_view(&Names::default(), h, &nodes, now, &[]),
                release: Some(protocol::version::RELEASE.into()),
                credential_expires_at: None,
            };
            write_report(&admin, name, &Report::with_host_part(None, part, now))
                .await
                .unwrap();
        }
        let world = Arc::new(Mutex::new(world));
        let task = tokio::spawn(run_fleet(admin, world.clone()));
        Self { world, task }
    }

    /// Changes the faults.
    pub fn set(&self, f: impl FnOnce(&mut Faults)) {
        f(&mut self.world.lock().unwrap().faults);
    }

    /// Waits until the double has finished `rounds` more rounds.
    async fn rounds(&self, rounds: u64) {
        let until = self.world.lock().unwrap().ticks + rounds;
        while self.world.lock().unwrap().ticks < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the fleet has acted on everything as it stands now (a
    /// whole round of the double begun after this call).
    pub async fn settle(&self) {
        self.rounds(2).await;
    }

    /// Waits until the fleet has acted on everything as it stands now (a
    /// whole round of the double begun after this call: the faults set so
    /// far applied, every host's heartbeat written), then freezes it and
    /// waits for the round in flight to end, so that from the return on
    /// nothing but the controller writes.
    pub async fn settle_and_freeze(&self) {
        self.rounds(2).await;
        self.set(|f| f.frozen = true);
        self.rounds(1).await;
    }

    /// Quorum violations k3s's removal saw (must stay empty).
    pub fn violations(&self) -> Vec<String> {
        self.world.lock().unwrap().violations.clone()
    }

    /// What the fleet did, in order.
    pub fn log(&self) -> Vec<String> {
        self.world.lock().unwrap().log.clone()
    }

    /// Whether a host (or k3s, for `removal`) was asked for `step` while it
    /// was held, and so did not react.
    pub fn has_held(&self, step: &str) -> bool {
        self.world.lock().unwrap().held.contains(step)
    }
}

/// Whether `step` is held; if so, records that it was asked for.
fn held(world: &Arc<Mutex<World>>, step: &str) -> bool {
    let mut w = world.lock().unwrap();
    if !w.faults.hold.contains(step) {
        return false;
    }
    w.held.insert(step.to_string());
    true
}

async fn run_fleet(admin: Client, world: Arc<Mutex<World>>) {
    loop {
        if let Err(e) = tick(&admin, &world).await {
            // A transient API error: the next tick tries again.
            eprintln!("fleet double: {e}");
        }
        world.lock().unwrap().ticks += 1;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

fn label(n: &Node, k: &str) -> Option<String> {
    n.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned()
}

fn annotation(n: &Node, k: &str) -> Option<String> {
    n.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(k))
        .cloned()
}

async fn tick(admin: &Client, world: &Arc<Mutex<World>>) -> Result<(), kube::Error> {
    if world.lock().unwrap().faults.frozen {
        return Ok(());
    }
    let names = Names::default();
    let nodes_api: Api<Node> = Api::all(admin.clone());
    let nodes: BTreeMap<String, Node> = nodes_api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|n| (n.metadata.name.clone().unwrap(), n))
        .collect();
    let lease = Api::<Lease>::namespaced(admin.clone(), "kube-system")
        .get_opt(&names.lease_name)
        .await?;
    let reports = kubeview::hostobjects::reports_by_node(
        &Api::<ConfigMap>::namespaced(admin.clone(), HOSTS)
            .list(&ListParams::default())
            .await?
            .items,
    );
    let lease_view = lease.as_ref().map(|l| kubeview::lease_facts(&names, l));
    let host_names: Vec<String> = world.lock().unwrap().hosts.keys().cloned().collect();
    for name in &host_names {
        kubelet(admin, world, name).await?;
    }
    for name in &host_names {
        let Some(node) = nodes.get(name) else {
            continue;
        };
        let report = reports.get(name).and_then(|v| Report::from_json(v));
        actuator(
            admin,
            world,
            &names,
            node,
            &nodes,
            lease_view.as_ref(),
            report,
        )
        .await?;
    }
    leader_loop(admin, world, &nodes).await?;
    member_controller(admin, world, &nodes).await?;
    Ok(())
}

/// The kubelet: Ready and a renewed node Lease while the host is up.
async fn kubelet(admin: &Client, world: &Arc<Mutex<World>>, name: &str) -> Result<(), kube::Error> {
    let (up, renew_due, ready_was) = {
        let w = world.lock().unwrap();
        let h = &w.hosts[name];
        (
            !w.faults.down.contains(name),
            h.renewed
                .is_none_or(|t| t.elapsed() > Duration::from_millis(900)),
            h.ready,
        )
    };
    if ready_was != Some(up) {
        let status = if up { "True" } else { "False" };
        Api::<Node>::all(admin.clone())
            .patch_status(
                name,
                &k3s(),
                &Patch::Strategic(json!({"status": {"conditions": [{
                    "type": "Ready", "status": status,
                    "reason": if up { "KubeletReady" } else { "NodeStatusUnknown" },
                    "lastTransitionTime": now_time(), "lastHeartbeatTime": now_time(),
                }]}})),
            )
            .await?;
        world.lock().unwrap().hosts.get_mut(name).unwrap().ready = Some(up);
    }
    if up && renew_due {
        Api::<Lease>::namespaced(admin.clone(), "kube-node-lease")
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"renewTime": MicroTime(Timestamp::try_from(clock::Clock::system().wall()).unwrap())}})),
            )
            .await?;
        world.lock().unwrap().hosts.get_mut(name).unwrap().renewed =
            Some(clock::Clock::system().now());
    }
    Ok(())
}

/// etcd's view as a host's actuator reads it from its own member: the members
/// etcd has are those the Nodes show (k3s's names and addresses; a learner
/// until `EtcdIsVoter`) and `ghosts`, the first voter the leader. None on a
/// host with no member of its own running.
fn etcd_view(
    names: &Names,
    host: &SimHost,
    nodes: &BTreeMap<String, Node>,
    now: i64,
    ghosts: &[Member],
) -> Option<EtcdView> {
    if !host.datastore || host.tombstone {
        return None;
    }
    let id_of = |member: &str| {
        MemberId(member.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        }))
    };
    let members: Vec<Member> = nodes
        .values()
        .map(|n| kubeview::node_facts(names, n))
        .filter(|f| f.has_member())
        .filter_map(|f| {
            let name = f.k3s.node_name.clone()?;
            Some(Member {
                id: id_of(&name),
                peer_urls: vec![format!(
                    "https://{}:2380",
                    f.k3s.node_address.as_deref().unwrap_or("10.0.9.9")
                )],
                client_urls: vec![],
                learner: !f.etcd_is_voter,
                name,
            })
        })
        .chain(ghosts.iter().cloned())
        .collect();
    let mine = host.member.as_deref().map(id_of)?;
    members.iter().any(|m| m.id == mine).then(|| EtcdView {
        read_at: now,
        member: mine,
        leader: members.iter().find(|m| !m.learner).map(|m| m.id),
        members: members.clone(),
        raft_term: 2,
        raft_index: 100,
        db_size: 1 << 20,
        alarms: vec![],
        healthy: true,
    })
}

/// Writes `node`'s report into its own ConfigMap as its actuator does (an
/// update of the object read), through `admin` or the host's own client;
/// the admin makes the ConfigMap first when it is missing, as enroll does.
pub async fn write_report(client: &Client, node: &str, report: &Report) -> Result<(), kube::Error> {
    let api = Api::<ConfigMap>::namespaced(client.clone(), HOSTS);
    let Some(mut cm) = api.get_opt(node).await? else {
        let cm: ConfigMap = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": node, "namespace": HOSTS},
            "data": {"report": report.to_json()},
        }))
        .expect("a ConfigMap");
        return api.create(&PostParams::default(), &cm).await.map(drop);
    };
    kubeview::hostobjects::set_report(&mut cm, report.to_json());
    api.replace(node, &PostParams::default(), &cm)
        .await
        .map(drop)
}

/// One host's actuator: the real decision on a simulated disk.
async fn actuator(
    admin: &Client,
    world: &Arc<Mutex<World>>,
    names: &Names,
    node: &Node,
    nodes: &BTreeMap<String, Node>,
    lease: Option<&LeaseFacts>,
    report: Option<Report>,
) -> Result<(), kube::Error> {
    let name = node.metadata.name.clone().unwrap();
    let (host, faults) = {
        let w = world.lock().unwrap();
        (w.hosts[&name].clone(), w.faults.clone())
    };
    if faults.down.contains(&name) || faults.compromised.contains(&name) {
        return Ok(());
    }
    // The heartbeat: the report's host part, every few seconds, with the
    // verdict a server whose agent could start gives.
    let now = Timestamp::try_from(clock::Clock::system().wall())
        .unwrap()
        .as_second();
    let mut report = report;
    let demotion = (host.role == Some(protocol::Role::Server) || host.datastore).then(|| {
        if faults.ineligible.contains(&name) {
            protocol::report::Eligibility::of(&[
                "/etc/rancher/k3s/config.yaml sets cluster-init, a server-only key".to_string(),
            ])
        } else {
            protocol::report::Eligibility::Ok
        }
    });
    let etcd = etcd_view(names, &host, nodes, now, &faults.ghosts);
    if report
        .as_ref()
        .and_then(|r| r.host.as_ref())
        .is_none_or(|h| {
            now - h.heartbeat_at >= 5
                || h.demotion != demotion
                || h.etcd.as_ref().map(EtcdView::membership)
                    != etcd.as_ref().map(EtcdView::membership)
        })
    {
        let part = protocol::report::HostPart {
            heartbeat_at: now,
            promotion: None,
            demotion,
            etcd,
            release: Some(protocol::version::RELEASE.into()),
            credential_expires_at: None,
        };
        let r = Report::with_host_part(report.as_ref(), part, now);
        write_report(admin, &name, &r).await?;
        report = Some(r);
    }
    let view = kubeview::node_facts(names, node);
    let join = match (view.marks.step_kind(), view.marks.join_node.as_deref()) {
        (Some(StepKind::Promote), Some(j)) => kubeview::join_target(nodes.get(j)),
        _ => JoinTarget::NotLooked,
    };
    let decision = decide(&Observation {
        now,
        node: &view,
        lease,
        report: report.as_ref(),
        host: HostState {
            role: host.role,
            datastore: host.datastore,
            tombstone: host.tombstone,
            member: host.member.clone(),
            // etcd read as the actuator reads it: the members the Nodes show.
            etcd_lists_member: host.member.as_deref().map(|m| {
                nodes.values().any(|n| {
                    let f = kubeview::node_facts(names, n);
                    f.has_member() && f.k3s.node_name.as_deref() == Some(m)
                })
            }),
        },
        join: &join,
        identity: &names.controller_identity,
        skew_margin: 2,
        clock: None,
        join_port: 6443,
    });
    if let Decision::Take { step, .. } = &decision
        && held(world, step.report_step().as_str())
    {
        return Ok(());
    }
    // A host acts on a step only once it has seen it for `react_after`.
    let key = match &decision {
        Decision::Take { swap, step, .. } => format!("{swap:?}/{}", step.report_step().as_str()),
        Decision::Refuse { swap, step, .. } => format!("{swap:?}/{}/refuse", step.as_str()),
        _ => return Ok(()),
    };
    {
        let mut w = world.lock().unwrap();
        let first = *w
            .hosts
            .get_mut(&name)
            .unwrap()
            .seen
            .entry(key.clone())
            .or_insert_with(|| clock::Clock::system().now());
        if first.elapsed() < faults.react_after {
            return Ok(());
        }
    }
    let next =
        |prev: Option<&Report>, swap: &Option<SwapId>, step, phase, detail: Option<Detail>| {
            let mut r = Report::next(
                prev,
                swap.clone(),
                step,
                phase,
                Timestamp::try_from(clock::Clock::system().wall())
                    .unwrap()
                    .as_second(),
            );
            if detail.is_some() {
                r.detail = detail;
            }
            r
        };
    let log = |w: &Arc<Mutex<World>>, s: String| w.lock().unwrap().log.push(s);
    match decision {
        Decision::Refuse { swap, step, reason } => {
            log(
                world,
                format!("{name}: refused {} ({reason})", step.as_str()),
            );
            let r = next(report.as_ref(), &swap, step, Phase::Refused, None).with_reason(reason);
            write_report(admin, &name, &r).await?;
        }
        Decision::Take { swap, step, resume } => match step {
            Step::Snapshot => {
                log(world, format!("{name}: snapshot"));
                let file = format!(
                    "/var/lib/rancher/k3s/server/db/snapshots/{}-{name}-{now}",
                    swap.as_ref().map_or("none", SwapId::as_str)
                );
                milestones(admin, &name, report, &swap, &step, false, Some(file)).await?;
            }
            Step::Promote { .. } if !resume => {
                log(world, format!("{name}: promote"));
                let started = next(
                    report.as_ref(),
                    &swap,
                    ReportStep::Promote,
                    Phase::Started,
                    None,
                );
                write_report(admin, &name, &started).await?;
                let member = format!("{name}-5eed{:04x}", now % 0xffff);
                {
                    let mut w = world.lock().unwrap();
                    let h = w.hosts.get_mut(&name).unwrap();
                    h.role = Some(Role::Server);
                    h.datastore = true;
                    h.tombstone = false;
                    h.member = Some(member.clone());
                    h.learner_since = Some(clock::Clock::system().now());
                }
                // k3s joins etcd as a learner and labels its own Node.
                let mut labels = serde_json::Map::new();
                for l in [
                    K3S_ETCD_ROLE_LABEL,
                    K3S_CONTROL_PLANE_LABEL,
                    K3S_MASTER_LABEL,
                ] {
                    labels.insert(l.into(), json!("true"));
                }
                Api::<Node>::all(admin.clone())
                    .patch(
                        &name,
                        &k3s(),
                        &Patch::Merge(json!({"metadata": {
                            "labels": labels,
                            "annotations": {
                                K3S_ETCD_NODE_NAME: member,
                                K3S_ETCD_NODE_ADDRESS: host.address,
                                K3S_ETCD_REMOVED_NODE_NAME: null,
                                K3S_ETCD_REMOVE: null,
                            },
                        }})),
                    )
                    .await?;
                set_voter(admin, &name, false).await?;
                milestones(admin, &name, Some(started), &swap, &step, false, None).await?;
            }
            Step::Promote { .. } => {
                if view.etcd_is_voter {
                    log(world, format!("{name}: voter"));
                    milestones(admin, &name, report, &swap, &step, true, None).await?;
                }
            }
            Step::StepDown => {
                log(world, format!("{name}: step-down"));
                let started = if resume {
                    report.clone().unwrap()
                } else {
                    let r = next(
                        report.as_ref(),
                        &swap,
                        ReportStep::StepDown,
                        Phase::Started,
                        None,
                    );
                    write_report(admin, &name, &r).await?;
                    r
                };
                if faults.fail_step_down.contains(&name) {
                    let r = next(Some(&started), &swap, ReportStep::StepDown, Phase::Failed, None)
                        .with_reason("etcd did not serve again within 120 s; host left with role file server, k3s active");
                    write_report(admin, &name, &r).await?;
                    return Ok(());
                }
                world.lock().unwrap().hosts.get_mut(&name).unwrap().role = Some(Role::Agent);
                milestones(admin, &name, Some(started), &swap, &step, false, None).await?;
            }
            Step::Rollback | Step::Finish => {
                let rstep = step.report_step();
                log(world, format!("{name}: {}", rstep.as_str()));
                let r = if resume {
                    report.clone().unwrap()
                } else {
                    let r = next(report.as_ref(), &swap, rstep, Phase::Started, None);
                    write_report(admin, &name, &r).await?;
                    r
                };
                {
                    let mut w = world.lock().unwrap();
                    let h = w.hosts.get_mut(&name).unwrap();
                    h.role = Some(Role::Agent);
                    h.datastore = false;
                    h.tombstone = false;
                    h.learner_since = None;
                    if matches!(step, Step::Finish) {
                        h.member = None;
                    }
                }
                milestones(admin, &name, Some(r), &swap, &step, false, None).await?;
            }
        },
        _ => {}
    }
    Ok(())
}

/// Writes the milestones of `step` after its host part, one report each,
/// as the actuator does (the one list in `hostdecide::milestones`).
async fn milestones(
    admin: &Client,
    name: &str,
    mut last: Option<Report>,
    swap: &Option<SwapId>,
    step: &Step,
    voter: bool,
    snapshot_file: Option<String>,
) -> Result<(), kube::Error> {
    let detail = last.as_ref().and_then(|r| r.detail);
    for (phase, milestone) in hostdecide::milestones::after_host_part(step, detail, voter) {
        let mut r = Report::next(
            last.as_ref(),
            swap.clone(),
            step.report_step(),
            phase,
            Timestamp::try_from(clock::Clock::system().wall())
                .unwrap()
                .as_second(),
        )
        .with_detail(milestone);
        r.snapshot_file.clone_from(&snapshot_file);
        write_report(admin, name, &r).await?;
        last = Some(r);
    }
    Ok(())
}

async fn set_voter(admin: &Client, name: &str, voter: bool) -> Result<(), kube::Error> {
    Api::<Node>::all(admin.clone())
        .patch_status(
            name,
            &k3s(),
            &Patch::Strategic(json!({"status": {"conditions": [{
                "type": K3S_ETCD_IS_VOTER,
                "status": if voter { "True" } else { "False" },
                "reason": if voter { "MemberIsVoter" } else { "MemberIsLearner" },
                "lastTransitionTime": now_time(),
            }]}})),
        )
        .await
        .map(drop)
}

/// The etcd leader's loop: a learner that has caught up is promoted.
async fn leader_loop(
    admin: &Client,
    world: &Arc<Mutex<World>>,
    nodes: &BTreeMap<String, Node>,
) -> Result<(), kube::Error> {
    let due: Vec<String> = {
        let w = world.lock().unwrap();
        w.hosts
            .iter()
            .filter(|(name, h)| {
                h.role == Some(Role::Server)
                    && h.learner_since
                        .is_some_and(|t| t.elapsed() > Duration::from_millis(700))
                    && !w.faults.stall_promotion.contains(*name)
                    && !w.faults.down.contains(*name)
                    && nodes
                        .get(*name)
                        .is_some_and(|n| !condition(n, K3S_ETCD_IS_VOTER))
            })
            .map(|(n, _)| n.clone())
            .collect()
    };
    for name in due {
        set_voter(admin, &name, true).await?;
        let mut w = world.lock().unwrap();
        w.hosts.get_mut(&name).unwrap().learner_since = None;
        w.log.push(format!("k3s: promoted {name}"));
    }
    Ok(())
}

/// k3s's managed-etcd-controller: the removal annotation, with etcd's own
/// quorum check (a removal that would leave fewer started voters than a
/// quorum is refused: k3s then deletes `remove`).
async fn member_controller(
    admin: &Client,
    world: &Arc<Mutex<World>>,
    nodes: &BTreeMap<String, Node>,
) -> Result<(), kube::Error> {
    for (name, node) in nodes {
        let remove =
            annotation(node, K3S_ETCD_REMOVE).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let Some(member) = annotation(node, K3S_ETCD_NODE_NAME) else {
            continue;
        };
        if !remove
            || label(node, K3S_ETCD_ROLE_LABEL).as_deref() != Some("true")
            || held(world, "removal")
        {
            continue;
        }
        {
            // k3s acts a moment after the annotation appears.
            let mut w = world.lock().unwrap();
            let wait = w.faults.react_after;
            let first = *w
                .hosts
                .get_mut(name)
                .unwrap()
                .seen
                .entry(format!("remove/{member}"))
                .or_insert_with(|| clock::Clock::system().now());
            if first.elapsed() < wait {
                continue;
            }
        }
        // The truth: voting members and whether each one's etcd runs.
        let (members, started, removing_started) = {
            let w = world.lock().unwrap();
            let mut members = 0;
            let mut started = 0;
            let mut removing_started = false;
            for (n, nd) in nodes {
                if annotation(nd, K3S_ETCD_NODE_NAME).is_none() || !condition(nd, K3S_ETCD_IS_VOTER)
                {
                    continue;
                }
                members += 1;
                let h = &w.hosts[n];
                let runs = !w.faults.down.contains(n) && h.datastore && !h.tombstone;
                if runs {
                    started += 1;
                }
                if n == name {
                    removing_started = runs;
                }
            }
            (members, started, removing_started)
        };
        let voter = condition(node, K3S_ETCD_IS_VOTER);
        let (left, started_left) = if voter {
            (members - 1, started - usize::from(removing_started))
        } else {
            (members, started)
        };
        let api: Api<Node> = Api::all(admin.clone());
        if left == 0 || started_left < left / 2 + 1 {
            let msg = format!("removing {name} would leave {started_left} started of {left}");
            {
                let mut w = world.lock().unwrap();
                w.violations.push(msg.clone());
                w.log.push(format!("k3s: refused: {msg}"));
            }
            api.patch(
                name,
                &k3s(),
                &Patch::Merge(json!({"metadata": {"annotations": {K3S_ETCD_REMOVE: null}}})),
            )
            .await?;
            continue;
        }
        api.patch(
            name,
            &k3s(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                K3S_ETCD_REMOVED_NODE_NAME: member,
                K3S_ETCD_NODE_NAME: null,
                K3S_ETCD_NODE_ADDRESS: null,
            }}})),
        )
        .await?;
        let mut w = world.lock().unwrap();
        w.log.push(format!("k3s: removed {name}'s member"));
        if let Some(h) = w.hosts.get_mut(name)
            && h.datastore
        {
            h.tombstone = true;
        }
    }
    Ok(())
}
