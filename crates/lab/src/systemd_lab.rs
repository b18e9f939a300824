//! A lab on real systemd: every host a [`Machine`] in the [`LabNet`], its
//! k3s units as install.sh writes them with fleet-role's drop-ins and the
//! actuator unit from `deploy/`, the k3s stand-in as `/usr/local/bin/k3s`
//! (sending `READY=1` when k3s would), the actuator as the real unit.
//!
//! It lives in the process that brought it up (a test, the demo, or
//! `fleet-role-lab up`, which holds it for other commands: [`crate::held_lab`]);
//! dropping it powers the hosts off and removes the network.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, bail};
use protocol::Role;
use secrecy::ExposeSecret;
use testcp::TokenAuthFile;

use crate::{
    api::Apis,
    docker_host::{self, DockerHost},
    lab_pki,
    lab_setup::{self, Bins},
    machine::{Bind, Machine, MachineSpec, UpWhen},
    net::LabNet,
    spec::{HostSpec, LabSpec, Timings},
    units,
};

/// How long a host may take to boot (about 2 s here when idle).
const BOOT: Duration = Duration::from_secs(180);
/// The bound of a quick `systemctl` call inside a host.
const QUICK: Duration = Duration::from_secs(30);

/// How to bring a real-systemd lab up.
#[derive(Debug, Clone)]
pub struct Options {
    /// The lab's directory (emptied first).
    pub dir: PathBuf,
    /// How many servers (etcd voters).
    pub servers: usize,
    /// How many agents.
    pub agents: usize,
    /// How many more agents on Docker hosts (`docker-1`…): k3s in two
    /// containers of a private dockerd, the actuator beside them
    /// ([`DockerHost`]).
    pub docker_agents: usize,
    /// The lab's k3s timings.
    pub timings: Timings,
    /// The programs (`fleet-role-lab`, `fleet-role-actuator`), built.
    pub bins: Bins,
}

/// How fleet-role gets onto a lab's hosts.
#[derive(Debug, Clone, Default)]
pub enum FleetRole {
    /// Laid out from the checkout: its units and drop-ins from `deploy/`,
    /// the built actuator where the package puts it, its settings and role
    /// file, the actuator enabled. A lab to run swaps on.
    #[default]
    Laid,
    /// Not at all: each host runs k3s only, with `/usr` and dpkg's database
    /// writable ([`MachineSpec::with_writable_usr`]) and no role file, so a
    /// test installs the package as an operator does. Each host's CA and
    /// token are written ([`SystemdLab::token_file`]) but not put in place.
    FromPackage {
        /// More directories bound into every host (what the installer reads).
        binds: Vec<Bind>,
    },
}

/// A running lab on real systemd. Fields drop in order: the hosts are
/// powered off before their network goes.
pub struct SystemdLab {
    machines: BTreeMap<String, Machine>,
    docker: BTreeMap<String, DockerHost>,
    net: LabNet,
    /// The lab's description (hosts at `198.18.K.N`).
    pub spec: LabSpec,
    fleet_role: FleetRole,
}

fn block<T>(f: impl FnOnce() -> T) -> T {
    // Machines are driven by blocking calls, each bounded; the runtime's
    // other tasks keep running on its other threads meanwhile.
    tokio::task::block_in_place(f)
}

/// The directory of `path` after links are followed, bound read-only at its
/// own path so the same path works inside a host.
fn ro_dir_of(path: &Path) -> anyhow::Result<Bind> {
    let real = fs::canonicalize(path).with_context(|| path.display().to_string())?;
    let dir = real
        .parent()
        .context("a binary in a directory")?
        .to_path_buf();
    Ok(Bind {
        outside: dir.clone(),
        inside: dir,
        read_only: true,
    })
}

impl SystemdLab {
    /// Brings a lab up: the network, every host booted with nothing enabled,
    /// then the first server (`cluster-init`), the joining servers one at a
    /// time (each a learner, then a voter), the agents, and the actuators.
    pub async fn up(o: Options, say: &dyn Fn(&str)) -> anyhow::Result<SystemdLab> {
        SystemdLab::up_with(o, FleetRole::Laid, say).await
    }

    /// [`SystemdLab::up`], with fleet-role put on the hosts as `fleet_role` says.
    pub async fn up_with(
        o: Options,
        fleet_role: FleetRole,
        say: &dyn Fn(&str),
    ) -> anyhow::Result<SystemdLab> {
        let clock = clock::Clock::system();
        if o.servers == 0 {
            bail!("a lab needs at least one server");
        }
        let _ = fs::remove_dir_all(&o.dir);
        fs::create_dir_all(&o.dir)?;
        let dir = fs::canonicalize(&o.dir)?;
        let mut net = block(labrig::machine::lab_net)?;
        let mut hosts = vec![];
        for i in 0..o.servers + o.agents + o.docker_agents {
            let (name, role) = if i < o.servers {
                (format!("server-{}", i + 1), Role::Server)
            } else if i < o.servers + o.agents {
                (format!("agent-{}", i - o.servers + 1), Role::Agent)
            } else {
                (
                    format!("{DOCKER_PREFIX}{}", i - o.servers - o.agents + 1),
                    Role::Agent,
                )
            };
            let h = block(|| net.add_host(&name, (i + 1) as u8))?;
            hosts.push(HostSpec {
                name,
                ip: h.addr,
                role,
            });
        }
        let spec = LabSpec {
            dir: dir.clone(),
            hosts,
            kube_apiserver: testcp::binaries::kube_apiserver()?,
            etcd: testcp::binaries::etcd()?,
            etcdutl: testcp::binaries::etcdutl(),
            actuator: o.bins.actuator.clone(),
            standin_dir: o.bins.standin_dir.clone(),
            lab_bin: o.bins.lab.clone(),
            timings: o.timings,
        };
        lab_pki::generate(&spec.pki_dir(), &spec.ips())?;
        // The servers' etcd certificates; an agent has none, as a k3s agent
        // has none: promoted, it makes them from the join server's
        // bootstrap data (`k3s/bootstrap.rs`, `member_certs`).
        crate::lab_pki::generate_etcd(
            &spec.pki_dir(),
            &spec
                .hosts
                .iter()
                .filter(|h| h.role == Role::Server)
                .map(|h| (spec.root(&h.name), std::net::IpAddr::V4(h.ip)))
                .collect::<Vec<_>>(),
        )?;
        TokenAuthFile::generate(&spec.pki_dir())?;
        lab_setup::write(
            &spec.pki_dir().join("audit-policy.yaml"),
            lab_setup::AUDIT_POLICY,
            0o644,
        )?;
        spec.save()?;
        let first = spec.hosts[0].clone();
        let laid = matches!(fleet_role, FleetRole::Laid);
        for h in &spec.hosts {
            lay_out_host(&spec, h, &first, laid)?;
        }
        let mut lab = SystemdLab {
            machines: BTreeMap::new(),
            docker: BTreeMap::new(),
            net,
            spec,
            fleet_role,
        };
        // On an error from here `lab` is dropped: hosts off, network gone.
        let bin_dir = o.bins.lab.parent().context("a bin dir")?.to_path_buf();
        let mut extra = vec![
            // The lab's description, PKI and tokens, where the k3s stand-in
            // and the actuator's settings name them.
            Bind {
                outside: dir.clone(),
                inside: dir.clone(),
                read_only: false,
            },
        ];
        for bin in [&lab.spec.kube_apiserver, &lab.spec.etcd]
            .into_iter()
            .chain(lab.spec.etcdutl.as_ref())
        {
            let b = ro_dir_of(bin)?;
            // etcd is unpacked under cargo's target dir, bound already.
            if !b.outside.starts_with(&bin_dir) {
                extra.push(b);
            }
        }
        for h in lab.spec.hosts.clone() {
            let root = lab.spec.root(&h.name);
            let hn = lab.net.host(&h.name)?.clone();
            let start = clock.now();
            let done = if is_docker_host(&h.name) {
                let mut binds = extra.clone();
                binds.push(Bind {
                    outside: bin_dir.clone(),
                    inside: bin_dir.clone(),
                    read_only: true,
                });
                let d = DockerHost::start(&lab.spec, &h, &hn.netns_path(), &binds).await?;
                lab.docker.insert(h.name.clone(), d);
                "(a Docker host) ready"
            } else {
                let mut ms = MachineSpec::lab_host(&hn, &root, &bin_dir, &o.bins.lab);
                ms.binds.push(Bind {
                    outside: root.join("var/log/k3s"),
                    inside: "/var/log/k3s".into(),
                    read_only: false,
                });
                ms.binds.extend(extra.iter().cloned());
                if let FleetRole::FromPackage { binds } = &lab.fleet_role {
                    ms.binds.extend(binds.iter().cloned());
                    ms = ms.with_writable_usr();
                }
                ms.up_when = UpWhen::Running;
                let m = block(|| Machine::boot(ms, BOOT))?;
                lab.machines.insert(h.name.clone(), m);
                "booted"
            };
            say(&format!(
                "{} {done} at {} ({:.1}s)",
                h.name,
                h.ip,
                clock.since(start).as_secs_f32()
            ));
        }
        lab.bring_up_k3s(say).await?;
        Ok(lab)
    }

    async fn bring_up_k3s(&self, say: &dyn Fn(&str)) -> anyhow::Result<()> {
        let spec = &self.spec;
        let apis = Apis::for_lab(spec)?;
        let first = spec.hosts[0].clone();
        // The servers join one by one, each promoted by the leader's loop:
        // at a faster pace while the lab is made, k3s's once it is.
        let pace = spec.bring_up_pace_file();
        lab_setup::write(&pace, "", 0o644)?;
        say(&format!(
            "starting {} (etcd cluster-init, kube-apiserver)",
            first.name
        ));
        self.enable_now(&first.name, "k3s").await?;
        lab_setup::wait_condition(&apis, &first.name, "Ready", Duration::from_secs(180)).await?;
        // EtcdIsVoter comes from the etcd leader's loop a moment after the
        // Node has the etcd label: an actuator asked for a snapshot before it
        // refuses (the host is not yet known as a voter).
        lab_setup::wait_condition(
            &apis,
            &first.name,
            protocol::names::K3S_ETCD_IS_VOTER,
            Duration::from_secs(120),
        )
        .await?;
        self.wait_active(&first.name, "k3s", Duration::from_secs(120))
            .await?;
        lab_setup::apply_deploy(&apis, "deploy/rbac/actuator.yaml").await?;
        lab_setup::apply_deploy(&apis, "deploy/rbac/controller.yaml").await?;
        // Each host its own identity, as `fleet-role enroll` makes it.
        for h in &spec.hosts {
            let token = lab_setup::actuator_token(&apis, &h.name).await?;
            lab_setup::write(&self.token_file(&h.name), token.expose_secret(), 0o600)?;
        }
        for h in spec.hosts.iter().skip(1) {
            match h.role {
                Role::Server => {
                    say(&format!("joining {} (a learner, then a voter)", h.name));
                    self.enable_now(&h.name, "k3s").await?;
                    lab_setup::wait_condition(
                        &apis,
                        &h.name,
                        protocol::names::K3S_ETCD_IS_VOTER,
                        Duration::from_secs(180),
                    )
                    .await?;
                    self.wait_active(&h.name, "k3s", Duration::from_secs(120))
                        .await?;
                }
                Role::Agent => {
                    say(&format!("starting agent {}", h.name));
                    self.enable_now(&h.name, "k3s-agent").await?;
                }
            }
        }
        fs::remove_file(&pace)?;
        for h in spec.hosts.iter().filter(|h| h.role == Role::Agent) {
            lab_setup::wait_condition(&apis, &h.name, "Ready", Duration::from_secs(180)).await?;
            self.wait_active(&h.name, "k3s-agent", Duration::from_secs(120))
                .await?;
        }
        lab_setup::create_pods(&apis, spec, Duration::from_secs(120)).await?;
        for h in &spec.hosts {
            lab_setup::mark_eligible(&apis, &h.name).await?;
            if matches!(self.fleet_role, FleetRole::Laid) {
                self.enable_now(&h.name, "fleet-role-actuator").await?;
                if is_docker_host(&h.name) {
                    // No systemd: no hand-over units, no regrade watcher.
                    continue;
                }
                // The leadership hand-overs, as the package enables them
                // (the one for sleep runs only when the host goes to sleep).
                let m = self.machine(&h.name)?;
                block(|| {
                    m.exec_ok(
                        &["systemctl", "enable", "fleet-role-handover.service"],
                        QUICK,
                    )
                })?;
                self.enable_now(&h.name, "fleet-role-handover-shutdown.service")
                    .await?;
                // The regrade watcher on the servers, as the seed runs it
                // (its drop-in's condition keeps it off the agents).
                if h.role == Role::Server {
                    self.enable_now(&h.name, "fleet-regrade.service").await?;
                }
            }
        }
        if matches!(self.fleet_role, FleetRole::Laid) {
            lab_setup::wait_heartbeats(&apis, spec, Duration::from_secs(180)).await?;
        }
        lab_setup::write_kubeconfig(spec)?;
        say(&format!(
            "lab up on real systemd in {}: hosts at 198.18.{}.0/24",
            spec.dir.display(),
            self.net.number()
        ));
        Ok(())
    }

    /// `systemctl enable --now --no-block UNIT` on a host: queued, never
    /// waited for here (a `Type=notify` k3s returns only once ready).
    async fn enable_now(&self, host: &str, unit: &str) -> anyhow::Result<()> {
        if let Some(d) = self.docker.get(host) {
            return d.enable_now(unit).await;
        }
        let m = self.machine(host)?;
        block(|| m.exec_ok(&["systemctl", "enable", "--now", "--no-block", unit], QUICK))?;
        Ok(())
    }

    /// Waits until a unit on a host is `active` as systemd reports it (for
    /// k3s: its process sent READY=1).
    pub async fn wait_active(&self, host: &str, unit: &str, bound: Duration) -> anyhow::Result<()> {
        let clock = clock::Clock::system();
        let start = clock.now();
        if let Some(d) = self.docker.get(host) {
            while !d.is_active(unit).await? {
                if clock.since(start) > bound {
                    bail!(
                        "{unit} on {host} (a Docker host) is not running after {}s",
                        bound.as_secs()
                    );
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            return Ok(());
        }
        let m = self.machine(host)?;
        loop {
            let state = block(|| m.active_state(unit))?;
            if state == "active" {
                return Ok(());
            }
            if clock.since(start) > bound {
                // What systemd says about it, for whoever reads the failure.
                let status = block(|| {
                    m.exec(
                        &["systemctl", "status", "--no-pager", "-n", "30", unit],
                        QUICK,
                    )
                })
                .map(|o| o.stdout)
                .unwrap_or_else(|e| e.to_string());
                bail!(
                    "{unit} on {host} is {state} after {}s (not active):\n{status}",
                    bound.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Reboots a host (`systemctl reboot` inside, then a new boot from the
    /// same directories); its enabled units start again as at any boot.
    pub fn reboot(&mut self, host: &str) -> anyhow::Result<()> {
        let m = self.machine_mut(host)?;
        block(|| m.reboot(BOOT))?;
        Ok(())
    }

    /// Powers a host off cleanly (`systemctl poweroff` inside: its units
    /// stop as at any shutdown), as a laptop's lid or an operator would.
    pub fn poweroff(&mut self, host: &str) -> anyhow::Result<()> {
        let m = self.machine_mut(host)?;
        block(|| m.poweroff(BOOT))?;
        Ok(())
    }

    /// Cuts a host's power: every process of it killed at once, nothing
    /// stopped cleanly (no unit's stop runs, nothing is synced); [`boot`]
    /// starts it again from the same directories.
    ///
    /// [`boot`]: SystemdLab::boot
    pub fn hard_reset(&mut self, host: &str) -> anyhow::Result<()> {
        let m = self.machine_mut(host)?;
        block(|| m.kill());
        Ok(())
    }

    /// Boots a host that was powered off; whether it was off (a host
    /// still running is left as it is).
    pub fn boot(&mut self, host: &str) -> anyhow::Result<bool> {
        let m = self.machine_mut(host)?;
        Ok(block(|| m.power_on(BOOT))?)
    }

    fn machine_mut(&mut self, host: &str) -> anyhow::Result<&mut Machine> {
        self.machines
            .get_mut(host)
            .with_context(|| format!("no host {host} in this lab"))
    }

    /// Where host `host`'s actuator token is, on this machine: its
    /// `/etc/fleet-role/token` in a lab that lays fleet-role out; beside its
    /// root (not seen inside) in one that leaves it to the package, as
    /// `fleet-role enroll` leaves `NODE.token` on the admin's machine.
    pub fn token_file(&self, host: &str) -> PathBuf {
        let root = self.spec.root(host);
        match self.fleet_role {
            FleetRole::Laid => root.join("etc/fleet-role/token"),
            FleetRole::FromPackage { .. } => root.join(format!("{host}.token")),
        }
    }

    /// Host `host`'s `/etc/fleet-role/actuator.toml`: its Node, every
    /// server's API, the lab's CA (`/etc/fleet-role/ca.crt`, written on
    /// every host), its token file and the lab's short timings.
    pub fn actuator_settings(&self, host: &str) -> anyhow::Result<String> {
        let h = self
            .spec
            .hosts
            .iter()
            .find(|h| h.name == host)
            .with_context(|| format!("no host {host} in this lab"))?;
        Ok(actuator_settings(&self.spec, h))
    }

    /// A host's machine.
    pub fn machine(&self, host: &str) -> anyhow::Result<&Machine> {
        self.machines
            .get(host)
            .with_context(|| format!("no host {host} in this lab"))
    }

    /// The lab's network.
    pub fn net(&self) -> &LabNet {
        &self.net
    }

    /// A Docker host of the lab.
    pub fn docker_host(&self, host: &str) -> Option<&DockerHost> {
        self.docker.get(host)
    }
}

/// The names of the lab's Docker hosts start so (`docker-1`…).
pub const DOCKER_PREFIX: &str = "docker-";

/// Whether `host` is one of the lab's Docker hosts.
pub fn is_docker_host(host: &str) -> bool {
    host.starts_with(DOCKER_PREFIX)
}

/// A host's root: the units, the k3s stand-in as `/usr/local/bin/k3s`, the
/// actuator, k3s's config, the actuator's settings and the role file.
/// Without `laid`, nothing of fleet-role's but the CA: no units, actuator,
/// settings or role file.
fn lay_out_host(spec: &LabSpec, h: &HostSpec, first: &HostSpec, laid: bool) -> anyhow::Result<()> {
    let root = spec.root(&h.name);
    let sys = root.join("etc/systemd/system");
    units::write_k3s_units(&sys)?;
    if laid {
        units::write_fleet_role_units(&units::deploy_dir(), &sys)?;
        lab_setup::write(
            &sys.join("fleet-regrade.service"),
            units::REGRADE_UNIT,
            0o644,
        )?;
    }
    // The k3s stand-in is built beside fleet-role-lab (Bins::beside checks).
    // exec keeps the pid: the stand-in is the unit's main process, so its
    // READY=1 counts (NotifyAccess=main). The same environment for the
    // actuator's `k3s etcd-snapshot save`.
    lab_setup::write(
        &root.join("usr/local/bin/k3s"),
        &format!(
            "#!/bin/sh\nexport FLEET_ROLE_ROOT=/ FLEET_ROLE_LAB=\"{}\" FLEET_ROLE_KUBE_APISERVER=\"{}\"{}\nexec \"{}\" \"$@\"\n",
            spec.dir.display(),
            fs::canonicalize(&spec.kube_apiserver)?.display(),
            match &spec.etcdutl {
                Some(p) => format!(" FLEET_ROLE_ETCDUTL=\"{}\"", fs::canonicalize(p)?.display()),
                None => String::new(),
            },
            spec.lab_bin.with_file_name("k3s").display()
        ),
        0o755,
    )?;
    if laid {
        // Where the package puts it (the units and drop-ins name /usr/bin).
        let link = root.join("usr/bin/fleet-role-actuator");
        fs::create_dir_all(root.join("usr/bin"))?;
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(&spec.actuator, &link)?;
    }
    lab_setup::write_k3s_config(spec, h, first)?;
    // The CA beside the settings, as an operator installs it: the unit has
    // PrivateTmp=yes, so a lab directory under /tmp is not visible to it.
    fs::create_dir_all(root.join("etc/fleet-role"))?;
    fs::copy(
        spec.pki_dir().join("ca.crt"),
        root.join("etc/fleet-role/ca.crt"),
    )?;
    fs::create_dir_all(root.join("var/log/k3s"))?;
    if !laid {
        return Ok(());
    }
    let settings = if is_docker_host(&h.name) {
        docker_host::actuator_settings(spec, h)
    } else {
        actuator_settings(spec, h)
    };
    lab_setup::write(&root.join("etc/fleet-role/actuator.toml"), &settings, 0o644)?;
    lab_setup::write(
        &root.join("var/lib/rancher/k3s/fleet-role"),
        &format!("{}\n", h.role),
        0o644,
    )?;
    Ok(())
}

/// A host's actuator settings in the lab (see [`SystemdLab::actuator_settings`]).
fn actuator_settings(spec: &LabSpec, h: &HostSpec) -> String {
    format!(
        "node = \"{}\"\napi = {}\nca_file = \"/etc/fleet-role/ca.crt\"\ntoken_file = \"/etc/fleet-role/token\"\netcd_health_url = \"{}/health\"\netcd_url = \"{}\"\netcd_wait_secs = 60\nresync_secs = 2\nlock_timeout_secs = 30\n",
        h.name,
        spec.all_api_urls_toml(),
        LabSpec::etcd_metrics_url(),
        LabSpec::etcd_url(h.ip),
    )
}

// === The hosts as a swap sees them ===

/// How long one question to a real-systemd host may take.
const ASK: std::time::Duration = std::time::Duration::from_secs(60);

/// A Docker host's answer, asked from a blocking call on the runtime.
fn on_docker<T>(f: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// What a swap asks of a lab's hosts, beyond the API and etcd
/// (`scenario.rs` asks only these questions).
impl SystemdLab {
    /// The lab's description (hosts, addresses, roots).
    pub fn spec(&self) -> &LabSpec {
        &self.spec
    }

    /// `systemctl ARGS` on a host; a failure status is an error.
    pub fn systemctl(&self, host: &str, args: &[&str]) -> anyhow::Result<()> {
        if let Some(d) = self.docker_host(host) {
            // Only the actuator is a service there (k3s is its containers).
            return match args {
                [verb, "fleet-role-actuator"] => d.actuator(verb),
                _ => anyhow::bail!("{host} is a Docker host: no systemctl {}", args.join(" ")),
            };
        }
        let m = self.machine(host)?;
        let out = tokio::task::block_in_place(|| m.systemctl(args, ASK))?;
        if !out.status.success() {
            anyhow::bail!(
                "systemctl {} on {host} failed ({}): {}",
                args.join(" "),
                out.status,
                out.stderr.trim()
            );
        }
        Ok(())
    }

    /// Whether a unit runs on a host (`active`, as systemd reports it).
    pub fn is_active(&self, host: &str, unit: &str) -> anyhow::Result<bool> {
        if let Some(d) = self.docker_host(host) {
            return on_docker(d.is_active(unit));
        }
        let m = self.machine(host)?;
        Ok(tokio::task::block_in_place(|| m.active_state(unit))? == "active")
    }

    /// The most k3s units (server and agent) that ran at once on a host,
    /// over the lab's life: 1 (or 0) is the promise kept, 2 broken.
    pub fn most_k3s_at_once(&self, host: &str) -> anyhow::Result<usize> {
        // From systemd's own records of each unit's state (its journal),
        // or Docker's of its containers, never from a counter the lab keeps.
        if let Some(d) = self.docker_host(host) {
            return on_docker(d.most_k3s_at_once());
        }
        let m = self.machine(host)?;
        let overlaps = tokio::task::block_in_place(|| labrig::overlap::of_k3s_units(m, ASK))
            .with_context(|| format!("the k3s units' records on {host}"))?;
        Ok(if overlaps.is_empty() { 1 } else { 2 })
    }

    /// How many pod shims run on a host now.
    pub fn shims(&self, host: &str) -> anyhow::Result<usize> {
        if let Some(d) = self.docker_host(host) {
            return on_docker(d.shims());
        }
        // Inside the host the shims' command lines name its own root (`/`).
        let m = self.machine(host)?;
        let out = tokio::task::block_in_place(|| {
            m.exec(
                &[
                    "pgrep",
                    "-f",
                    "^/var/lib/rancher/k3s/data/[^/]+/bin/containerd-shim",
                ],
                ASK,
            )
        })?;
        Ok(out.stdout.lines().filter(|l| !l.trim().is_empty()).count())
    }
}
