//! Bringing a lab up and down: host roots, the shared PKI, the first server
//! initialising the cluster, the others joining one at a time, the agents, the
//! actuators' credentials and units; a host's reboot; the whole lab's end.

use std::{
    fs,
    net::{Ipv4Addr, SocketAddr, TcpListener},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use k8s_openapi::api::{
    authentication::v1::TokenRequest,
    core::v1::{Namespace, Node, ServiceAccount},
};
use kube::{Api, api::PostParams};
use protocol::Role;
use secrecy::ExposeSecret;
use testcp::{Pki, TokenAuthFile};

use crate::{
    api::Apis,
    spec::{HostSpec, LabSpec, Timings},
};

/// The programs a lab runs.
#[derive(Debug, Clone)]
pub struct Bins {
    /// `fleet-role-lab` (it is also every host's `k3s`).
    pub lab: PathBuf,
    /// `fleet-role-actuator`.
    pub actuator: PathBuf,
    /// The directory of the `systemctl` stand-in.
    pub standin_dir: PathBuf,
}

impl Bins {
    /// The programs beside each other in one directory (cargo's target dir).
    pub fn beside(dir: &Path) -> anyhow::Result<Bins> {
        for b in ["fleet-role-lab", "fleet-role-actuator", "systemctl"] {
            if !dir.join(b).is_file() {
                bail!(
                    "{} is missing: build the workspace's binaries (cargo build --workspace --bins)",
                    dir.join(b).display()
                );
            }
        }
        Ok(Bins {
            lab: dir.join("fleet-role-lab"),
            actuator: dir.join("fleet-role-actuator"),
            standin_dir: dir.to_path_buf(),
        })
    }
}

/// How to bring a lab up.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The lab's directory (emptied first).
    pub dir: PathBuf,
    /// How many servers (etcd voters).
    pub servers: usize,
    /// How many agents.
    pub agents: usize,
    /// The lab's k3s timings.
    pub timings: Timings,
    /// The programs.
    pub bins: Bins,
}

/// The lab's kube-apiservers log the actuators' requests (and nothing else),
/// so the benchmark can count what an idle actuator asks.
pub(crate) const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n- level: Metadata\n  users: [\"system:serviceaccount:platform:fleet-role-actuator\"]\n- level: None\n";

/// A k3s server token for the lab (fake, but shaped as k3s's: the tests check
/// it never appears in anything fleet-role prints).
pub const K3S_TOKEN: &str = "K10labca5e11b0a7::server:lab-k3s-token-SECRETMARK";

fn free(ip: Ipv4Addr, port: u16) -> bool {
    TcpListener::bind(SocketAddr::from((ip, port))).is_ok()
}

/// A block of loopback addresses no other lab on this machine uses now.
fn pick_block(hosts: usize) -> anyhow::Result<u8> {
    let seed = (std::process::id() as usize).wrapping_mul(7);
    for i in 0..200 {
        let k = ((seed + i) % 200 + 20) as u8;
        if (1..=hosts as u8).all(|n| {
            let ip = Ipv4Addr::new(127, 77, k, n);
            free(ip, crate::spec::API_PORT)
                && free(ip, crate::spec::ETCD_CLIENT_PORT)
                && free(ip, crate::spec::ETCD_PEER_PORT)
        }) {
            return Ok(k);
        }
    }
    bail!("no free block of loopback addresses under 127.77.0.0/16")
}

pub(crate) fn write(path: &Path, text: &str, mode: u32) -> anyhow::Result<()> {
    fs::create_dir_all(path.parent().expect("a parent"))?;
    fs::write(path, text).with_context(|| path.display().to_string())?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Runs the `systemctl` stand-in on a host.
pub fn systemctl(spec: &LabSpec, host: &str, args: &[&str]) -> anyhow::Result<()> {
    let root = spec.root(host);
    let status = Command::new(spec.standin_dir.join("systemctl"))
        .args(args)
        .env("FLEET_ROLE_ROOT", &root)
        .env("PATH", host_path(spec, &root))
        .status()?;
    if !status.success() {
        bail!("systemctl {} on {host} failed: {status}", args.join(" "));
    }
    Ok(())
}

/// A lab host's k3s configuration, laid out so that either role starts
/// (k3s's `agent` fails on a server-only key in `config.yaml`): the keys both
/// roles take in `config.yaml` (node name, address, token); what only the
/// server reads in `k3s.service.env` (`K3S_CLUSTER_INIT` on the first
/// server, `K3S_URL` naming it on the others); what only the agent reads in
/// `k3s-agent.service.env` (`K3S_URL`: a server other than the host itself,
/// so that a server's agent, once it is demoted, has a live server to
/// bootstrap from). These are the files install.sh writes.
pub(crate) fn write_k3s_config(
    spec: &LabSpec,
    h: &HostSpec,
    first: &HostSpec,
) -> anyhow::Result<()> {
    let root = spec.root(&h.name);
    let config = format!(
        "node-name: {}\nnode-ip: {}\ntoken: \"{K3S_TOKEN}\"\n",
        h.name, h.ip
    );
    write(&root.join("etc/rancher/k3s/config.yaml"), &config, 0o600)?;
    let sys = root.join("etc/systemd/system");
    let server_env = if h.name == first.name {
        "K3S_CLUSTER_INIT=true\n".to_string()
    } else {
        format!("K3S_URL={}\n", LabSpec::api_url(first.ip))
    };
    write(&sys.join("k3s.service.env"), &server_env, 0o600)?;
    let registration = spec
        .hosts
        .iter()
        .find(|o| o.role == Role::Server && o.name != h.name);
    let agent_env = registration.map_or_else(String::new, |o| {
        format!("K3S_URL={}\n", LabSpec::api_url(o.ip))
    });
    write(&sys.join("k3s-agent.service.env"), &agent_env, 0o600)?;
    Ok(())
}

fn host_path(spec: &LabSpec, root: &Path) -> String {
    format!(
        "{}:{}:/usr/local/bin:/usr/bin:/bin",
        root.join("usr/local/bin").display(),
        spec.standin_dir.display()
    )
}

fn lay_out_host(spec: &LabSpec, h: &HostSpec, first: &HostSpec) -> anyhow::Result<()> {
    let root = spec.root(&h.name);
    let path = host_path(spec, &root);
    let unit = |what: &str, name: &str, exec: &str| {
        format!(
            "[Unit]\nDescription={what} (fleet-role lab)\n[Service]\nKillMode=process\nRestart=always\nRestartSec=1\n\
             EnvironmentFile=-/etc/systemd/system/{name}.service.env\n\
             Environment=FLEET_ROLE_LAB={}\nEnvironment=PATH={path}\nEnvironment=FLEET_ROLE_LOG=info\nExecStart={exec}\n\
             [Install]\nWantedBy=multi-user.target\n",
            spec.dir.display()
        )
    };
    let sys = root.join("etc/systemd/system");
    write(
        &sys.join("k3s.service"),
        &unit("Lightweight Kubernetes", "k3s", "/usr/local/bin/k3s server"),
        0o644,
    )?;
    write(
        &sys.join("k3s-agent.service"),
        &unit(
            "Lightweight Kubernetes agent",
            "k3s-agent",
            "/usr/local/bin/k3s agent",
        ),
        0o644,
    )?;
    let actuator_unit = unit(
        "fleet-role actuator",
        "fleet-role-actuator",
        "/usr/local/bin/fleet-role-actuator watch",
    )
    .replace(
        "[Install]",
        &format!(
            "Environment=FLEET_ROLE_CONFIG={}\n[Install]",
            root.join("etc/fleet-role/actuator.toml").display()
        ),
    );
    write(
        &sys.join("fleet-role-actuator.service"),
        &actuator_unit,
        0o644,
    )?;
    let deploy = standins::fixture::workspace().join("deploy/systemd");
    for u in ["k3s", "k3s-agent"] {
        let text = fs::read_to_string(deploy.join(format!("{u}.service.d/50-fleet-role.conf")))?;
        // The drop-in pins the condition's root to `/`; a lab host's root is
        // its directory, pinned the same way.
        let text = text.replace("--root / ", &format!("--root {} ", root.display()));
        write(
            &sys.join(format!("{u}.service.d/50-fleet-role.conf")),
            &text,
            0o644,
        )?;
    }
    write(
        &root.join("usr/local/bin/k3s"),
        &format!(
            "#!/bin/sh\nexec \"{}\" k3s \"$@\"\n",
            spec.lab_bin.display()
        ),
        0o755,
    )?;
    let link = root.join("usr/local/bin/fleet-role-actuator");
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(&spec.actuator, &link)?;
    write_k3s_config(spec, h, first)?;
    let api: Vec<String> = spec
        .all_api_urls()
        .iter()
        .map(|u| format!("\"{u}\""))
        .collect();
    let actuator = format!(
        "node = \"{}\"\napi = [{}]\nca_file = \"{}\"\ntoken_file = \"{}\"\netcd_health_url = \"http://{}:{}/health\"\netcd_wait_secs = 60\nresync_secs = 2\nlock_timeout_secs = 30\n",
        h.name,
        api.join(", "),
        spec.pki_dir().join("ca.crt").display(),
        root.join("etc/fleet-role/token").display(),
        h.ip,
        crate::spec::ETCD_METRICS_PORT,
    );
    write(&root.join("etc/fleet-role/actuator.toml"), &actuator, 0o644)?;
    write(
        &root.join("var/lib/rancher/k3s/fleet-role"),
        &format!("{}\n", h.role),
        0o644,
    )?;
    Ok(())
}

async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        if start.elapsed() > timeout {
            bail!("timed out after {}s waiting for {what}", timeout.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(())
}

/// Waits for a Node's condition to be True.
pub async fn wait_condition(
    apis: &Apis,
    node: &str,
    kind: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    wait_for(&format!("{node} {kind}"), timeout, || async {
        let n = node.to_string();
        matches!(apis.any(|c| { let n = n.clone(); async move { Api::<Node>::all(c).get_opt(&n).await } }).await, Ok(Some(ref x)) if kubeview::condition_true(x, kind))
    })
    .await
}

/// Waits until every actuator of the lab has written its heartbeat (the
/// report's host part): a swap asked before would be refused by the
/// controller's `actuators-alive` gate, a server's by `outgoing-demotable`
/// too until its verdict is in.
pub(crate) async fn wait_heartbeats(
    apis: &Apis,
    spec: &LabSpec,
    timeout: Duration,
) -> anyhow::Result<()> {
    let names = protocol::Names::default();
    let hosts: Vec<(String, bool)> = spec
        .hosts
        .iter()
        .map(|h| (h.name.clone(), h.role == Role::Server))
        .collect();
    wait_for("every actuator's heartbeat", timeout, || async {
        let ns = names.report_namespace.clone();
        let Ok(cm) = apis
            .any(|c| {
                let ns = ns.clone();
                async move {
                    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(c, &ns)
                        .get(protocol::names::REPORT_CONFIGMAP)
                        .await
                }
            })
            .await
        else {
            return false;
        };
        let data = cm.data.unwrap_or_default();
        hosts.iter().all(|(h, server)| {
            data.get(h)
                .and_then(|v| protocol::Report::from_json(v))
                .and_then(|r| r.host)
                .is_some_and(|p| !server || p.demotion.is_some())
        })
    })
    .await
}

/// Brings a lab up and returns its spec (also saved as `<dir>/lab.json`).
pub async fn up(o: UpOptions, say: &dyn Fn(&str)) -> anyhow::Result<LabSpec> {
    if o.servers == 0 {
        bail!("a lab needs at least one server");
    }
    if o.dir.join("lab.json").exists()
        && let Ok(old) = LabSpec::load(&o.dir)
    {
        down(&old);
    }
    let _ = fs::remove_dir_all(&o.dir);
    fs::create_dir_all(&o.dir)?;
    let dir = fs::canonicalize(&o.dir)?;
    let k = pick_block(o.servers + o.agents)?;
    let mut hosts = vec![];
    for i in 0..o.servers {
        hosts.push(HostSpec {
            name: format!("server-{}", i + 1),
            ip: Ipv4Addr::new(127, 77, k, (i + 1) as u8),
            role: Role::Server,
        });
    }
    for i in 0..o.agents {
        hosts.push(HostSpec {
            name: format!("agent-{}", i + 1),
            ip: Ipv4Addr::new(127, 77, k, (o.servers + i + 1) as u8),
            role: Role::Agent,
        });
    }
    let spec = LabSpec {
        dir: dir.clone(),
        hosts,
        kube_apiserver: testcp::binaries::kube_apiserver()?,
        etcd: testcp::binaries::etcd()?,
        actuator: o.bins.actuator.clone(),
        standin_dir: o.bins.standin_dir.clone(),
        lab_bin: o.bins.lab.clone(),
        timings: o.timings,
    };
    Pki::generate(&spec.pki_dir(), &spec.ips())?;
    TokenAuthFile::generate(&spec.pki_dir())?;
    write(
        &spec.pki_dir().join("audit-policy.yaml"),
        AUDIT_POLICY,
        0o644,
    )?;
    spec.save()?;
    let first = spec.hosts[0].clone();
    for h in &spec.hosts {
        lay_out_host(&spec, h, &first)?;
    }
    let apis = Apis::for_lab(&spec)?;
    say(&format!(
        "starting {} (etcd cluster-init, kube-apiserver) at {}",
        first.name, first.ip
    ));
    systemctl(&spec, &first.name, &["enable", "--now", "k3s"])?;
    wait_condition(&apis, &first.name, "Ready", Duration::from_secs(120)).await?;
    // The actuators' and the controller's credentials, and the regrade Lease,
    // as an operator installs them.
    apply_deploy(&apis, "deploy/rbac/actuator.yaml").await?;
    apply_deploy(&apis, "deploy/rbac/controller.yaml").await?;
    // Each host its own identity, as `fleet-role enroll` makes it.
    for h in &spec.hosts {
        let token = actuator_token(&apis, &h.name).await?;
        write(
            &spec.root(&h.name).join("etc/fleet-role/token"),
            token.expose_secret(),
            0o600,
        )?;
    }
    for h in spec.hosts.iter().skip(1) {
        match h.role {
            Role::Server => {
                say(&format!(
                    "joining {} at {} (a learner, then a voter)",
                    h.name, h.ip
                ));
                systemctl(&spec, &h.name, &["enable", "--now", "k3s"])?;
                wait_condition(
                    &apis,
                    &h.name,
                    protocol::names::K3S_ETCD_IS_VOTER,
                    Duration::from_secs(180),
                )
                .await?;
            }
            Role::Agent => {
                say(&format!("starting agent {} at {}", h.name, h.ip));
                systemctl(&spec, &h.name, &["enable", "--now", "k3s-agent"])?;
            }
        }
    }
    for h in spec.hosts.iter().filter(|h| h.role == Role::Agent) {
        wait_condition(&apis, &h.name, "Ready", Duration::from_secs(120)).await?;
    }
    for h in &spec.hosts {
        mark_eligible(&apis, &h.name).await?;
        systemctl(&spec, &h.name, &["enable", "--now", "fleet-role-actuator"])?;
    }
    wait_heartbeats(&apis, &spec, Duration::from_secs(120)).await?;
    write_kubeconfig(&spec)?;
    say(&format!(
        "lab up in {}: {} servers, {} agents, actuators watching",
        dir.display(),
        o.servers,
        o.agents
    ));
    Ok(spec)
}

/// The lab's admin kubeconfig, `<dir>/kubeconfig` (mode 0600), naming the
/// first server's API (the one the demo keeps).
pub fn kubeconfig(spec: &LabSpec) -> PathBuf {
    spec.dir.join("kubeconfig")
}

pub(crate) fn write_kubeconfig(spec: &LabSpec) -> anyhow::Result<()> {
    let tokens = TokenAuthFile::load(&spec.tokens_file())?;
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: admin\n  user:\n    token: {}\ncontexts:\n- name: lab\n  context:\n    cluster: lab\n    user: admin\ncurrent-context: lab\n",
        LabSpec::api_url(spec.hosts[0].ip),
        spec.pki_dir().join("ca.crt").display(),
        tokens.admin_token().expose_secret(),
    );
    write(&kubeconfig(spec), &text, 0o600)
}

/// Server-side applies a manifest of this checkout's `deploy/` folder.
pub(crate) async fn apply_deploy(apis: &Apis, rel: &str) -> anyhow::Result<()> {
    let manifest = fs::read_to_string(standins::fixture::workspace().join(rel))
        .with_context(|| rel.to_string())?;
    apis.any(|c| {
        let m = manifest.clone();
        async move {
            testcp::apply_manifest(&c, &m)
                .await
                .map_err(|e| kube::Error::Service(Box::new(std::io::Error::other(e.to_string()))))
        }
    })
    .await
    .with_context(|| format!("applying {rel}"))
    .map(drop)
}

/// Labels `node` eligible to vote (every lab host may be swapped in).
pub(crate) async fn mark_eligible(apis: &Apis, node: &str) -> anyhow::Result<()> {
    let eligible = protocol::Names::default().eligible();
    let patch = serde_json::json!({"metadata": {"labels": { eligible: "true" }}});
    apis.any(|c| {
        let (n, p) = (node.to_string(), patch.clone());
        async move {
            Api::<Node>::all(c)
                .patch(
                    &n,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&p),
                )
                .await
        }
    })
    .await?;
    Ok(())
}

/// Makes host `node`'s identity (the objects `fleet-role enroll` makes) and
/// returns a token of it.
pub(crate) async fn actuator_token(
    apis: &Apis,
    node: &str,
) -> anyhow::Result<secrecy::SecretString> {
    let req: TokenRequest = serde_json::from_value(
        serde_json::json!({"spec": {"audiences": [], "expirationSeconds": 86400}}),
    )?;
    let _ = apis
        .any(|c| async move { Api::<Namespace>::all(c).get("platform").await })
        .await?;
    let id = kubeview::Identity::of(&protocol::NodeName::parse(node)?)?;
    let objects = id.objects(&protocol::Names::default());
    for object in &objects {
        let manifest = object.to_string();
        apis.any(|c| {
            let m = manifest.clone();
            async move {
                testcp::apply_manifest(&c, &m).await.map_err(|e| {
                    kube::Error::Service(Box::new(std::io::Error::other(e.to_string())))
                })
            }
        })
        .await
        .with_context(|| format!("applying the identity of {node}"))?;
    }
    let account = id.name().to_string();
    let t = apis
        .any(|c| {
            let req = req.clone();
            let account = account.clone();
            async move {
                Api::<ServiceAccount>::namespaced(c, "platform")
                    .create_token_request(&account, &PostParams::default(), &req)
                    .await
            }
        })
        .await?;
    let token = t
        .status
        .map(|s| s.token)
        .context("no token in the TokenRequest's answer")?;
    Ok(token.into())
}

/// Processes that belong to `marker` (a lab or a host root): by their command
/// line or their environment.
fn processes_of(marker: &str) -> Vec<u32> {
    let me = std::process::id();
    let Ok(procs) = fs::read_dir("/proc") else {
        return vec![];
    };
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            [
                format!("/proc/{pid}/cmdline"),
                format!("/proc/{pid}/environ"),
            ]
            .iter()
            .any(|f| fs::read(f).is_ok_and(|b| String::from_utf8_lossy(&b).contains(marker)))
        })
        .collect()
}

fn kill_all(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let ids: Vec<String> = pids.iter().map(u32::to_string).collect();
    let _ = Command::new("kill")
        .arg("-9")
        .args(&ids)
        .stderr(std::process::Stdio::null())
        .status();
}

/// Kills every process of one host (its units, their children, its pods, its
/// actuator) and empties its `run/`, as a power cut would; then boots it:
/// every enabled unit starts again, conditions checked.
pub fn reboot(spec: &LabSpec, host: &str) -> anyhow::Result<()> {
    let root = spec.root(host);
    let marker = format!("{}/", root.display());
    for _ in 0..3 {
        kill_all(&processes_of(&marker));
        kill_all(&processes_of(&format!(
            "FLEET_ROLE_ROOT={}",
            root.display()
        )));
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = fs::remove_dir_all(root.join("run"));
    systemctl(spec, host, &["__boot"])
}

/// Stops everything of the lab.
pub fn down(spec: &LabSpec) {
    for h in &spec.hosts {
        for u in ["fleet-role-actuator", "k3s", "k3s-agent"] {
            let _ = systemctl(spec, &h.name, &["stop", u]);
        }
        host::shims::kill_all(
            &host::HostPaths::new(spec.root(&h.name)),
            Duration::from_secs(2),
        );
    }
    let marker = spec.dir.display().to_string();
    for _ in 0..3 {
        let left = processes_of(&marker);
        if left.is_empty() {
            break;
        }
        kill_all(&left);
        std::thread::sleep(Duration::from_millis(200));
    }
}
