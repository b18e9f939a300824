//! A lab host whose k3s runs in Docker containers, as on the seed's Colima
//! hosts: a network namespace of its own at `198.18.K.N` on the lab's
//! bridge (as a real-systemd host has), a private `dockerd` inside it
//! (Debian's, [`PrivateDaemon`]), and in that daemon the two containers of
//! a Docker host, `k3s-server` and `k3s-agent`, on the host network, with
//! the host's data at k3s's paths. The actuator runs beside them as a
//! service of the Docker host would: a process of the lab's, restarted
//! when it exits (the unit's `Restart=always`), with the Docker settings.
//!
//! The image is made here from local files (`docker import`, no registry):
//! a root of links into this machine's `/usr`, bound in read-only, and the
//! host's `/usr/local/bin/k3s` (the stand-in) bound over it, so the same
//! k3s stand-in runs as on the other hosts.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, bail};
use dockerengine::{ContainerSpec, Engine, PrivateDaemon, RestartPolicy, Status};
use host::docker::{Containers, DockerUnits};

use k3sstandin::spec::{HostSpec, LabSpec};

use crate::{machine::Bind, units::K3sUnit};

/// The image of every Docker host's k3s containers.
const IMAGE: (&str, &str) = ("fleet-role-lab-k3s", "1");
/// How long a private daemon may take to answer.
const DAEMON_START: Duration = Duration::from_secs(120);
/// How long a stop of a k3s container waits for it before killing it (the
/// actuator's `stop_grace_secs` default).
const STOP_GRACE: Duration = Duration::from_secs(90);
/// How soon an actuator that exited is started again (the unit's
/// `RestartSec=5`, shortened as the lab's other timings are).
const RESTART_AFTER: Duration = Duration::from_secs(1);

/// One Docker host of the lab.
pub struct DockerHost {
    name: String,
    daemon: PrivateDaemon,
    /// Its units as the actuator sees them (the unit-to-container mapping).
    units: DockerUnits,
    /// Unix milliseconds (the daemon's clock is this machine's) when its
    /// containers were made: Docker's events are read from here.
    since: u64,
    actuator: Supervised,
    clock: clock::Clock,
}

/// The lab's `[docker]` settings and paths for a Docker host's actuator.
pub fn actuator_settings(spec: &LabSpec, h: &HostSpec) -> String {
    let root = spec.root(&h.name);
    format!(
        "node = \"{}\"\nroot = \"{}\"\napi = {}\nca_file = \"{}\"\ntoken_file = \"{}\"\netcd_health_url = \"{}/health\"\netcd_url = \"{}\"\netcd_wait_secs = 60\nresync_secs = 2\nlock_timeout_secs = 30\n\n[docker]\nsocket = \"{}\"\n",
        h.name,
        root.display(),
        spec.all_api_urls_toml(),
        root.join("etc/fleet-role/ca.crt").display(),
        root.join("etc/fleet-role/token").display(),
        LabSpec::etcd_metrics_url(),
        LabSpec::etcd_url(h.ip),
        socket(spec, &h.name).display(),
    )
}

/// A Docker host's daemon folder: short, as containerd's socket paths
/// under it must be.
fn daemon_dir(spec: &LabSpec, host: &str) -> PathBuf {
    spec.dir.join("d").join(host)
}

fn socket(spec: &LabSpec, host: &str) -> PathBuf {
    daemon_dir(spec, host).join("docker.sock")
}

impl DockerHost {
    /// Starts the host's daemon in `netns`, imports the image and creates
    /// both k3s containers, neither started nor enabled (a fresh install
    /// leaves each to the operator, as install.sh leaves a unit disabled).
    /// `binds` are the lab's folders every host sees at their own paths.
    pub async fn start(
        spec: &LabSpec,
        h: &HostSpec,
        netns: &Path,
        binds: &[Bind],
    ) -> anyhow::Result<DockerHost> {
        let clock = clock::Clock::system();
        let dir = daemon_dir(spec, &h.name);
        let daemon = PrivateDaemon::start_in(&dir, Some(netns), DAEMON_START, &clock)
            .await
            .map_err(|e| anyhow::anyhow!("{}'s dockerd: {e}", h.name))?;
        import_image(daemon.engine(), &dir).await?;
        let units = DockerUnits::new(
            daemon.engine().clone(),
            Containers::default(),
            STOP_GRACE,
            tokio::runtime::Handle::current(),
            &clock,
        );
        let root = spec.root(&h.name);
        let since = clock.unix_millis();
        for unit in K3sUnit::BOTH {
            let name = units
                .container(unit.name())
                .context("a k3s unit's container")?;
            daemon
                .engine()
                .create(name, &container(&root, unit, binds)?)
                .await
                .with_context(|| format!("creating {name} on {}", h.name))?;
        }
        let actuator = Supervised::new(
            netns,
            &spec.actuator,
            &root.join("etc/fleet-role/actuator.toml"),
            &root.join("var/log/fleet-role-actuator.log"),
        );
        Ok(DockerHost {
            name: h.name.clone(),
            daemon,
            units,
            since,
            actuator,
            clock,
        })
    }

    /// The container that runs `unit` (`k3s`, `k3s-agent`).
    fn container_of(&self, unit: &str) -> anyhow::Result<&str> {
        self.units
            .container(unit)
            .with_context(|| format!("{} is a Docker host: it runs no unit {unit}", self.name))
    }

    /// `systemctl enable --now UNIT`'s counterpart: the restart policy that
    /// starts it with the daemon, and a start; the actuator is started.
    pub async fn enable_now(&self, unit: &str) -> anyhow::Result<()> {
        if unit == "fleet-role-actuator" {
            self.actuator.start();
            return Ok(());
        }
        let c = self.container_of(unit)?;
        let e = self.daemon.engine();
        e.set_restart_policy(c, RestartPolicy::UnlessStopped)
            .await
            .with_context(|| format!("enabling {c} on {}", self.name))?;
        e.start(c)
            .await
            .with_context(|| format!("starting {c} on {}", self.name))?;
        Ok(())
    }

    /// Whether `unit` runs: its container's status is `running` (the
    /// actuator: its process lives).
    pub async fn is_active(&self, unit: &str) -> anyhow::Result<bool> {
        if unit == "fleet-role-actuator" {
            return Ok(self.actuator.is_running());
        }
        let c = self.container_of(unit)?;
        let found = self
            .daemon
            .engine()
            .inspect(c)
            .await?
            .with_context(|| format!("{c} is gone from {}", self.name))?;
        Ok(found.status == Status::Running)
    }

    /// The actuator's `systemctl start|stop|restart`.
    pub fn actuator(&self, verb: &str) -> anyhow::Result<()> {
        match verb {
            "start" => self.actuator.start(),
            "stop" => self.actuator.stop(),
            "restart" => {
                self.actuator.stop();
                self.actuator.start();
            }
            _ => bail!("{}: no `{verb}` for the actuator", self.name),
        }
        Ok(())
    }

    /// 2 when Docker's own events show the two k3s containers running
    /// together at any time since they were made, else 1.
    pub async fn most_k3s_at_once(&self) -> anyhow::Result<usize> {
        let events = self
            .daemon
            .engine()
            .events(self.since, self.clock.unix_millis())
            .await?;
        let c = self.units.containers();
        let among = [c.server.as_str(), c.agent.as_str()];
        // The lab started one of them at bring-up: events with no start of
        // either are a reading gone wrong, never "not together".
        if !events
            .iter()
            .any(|e| e.action == "start" && among.contains(&e.name.as_str()))
        {
            bail!(
                "{}: Docker's events show no start of {} or {}",
                self.name,
                among[0],
                among[1]
            );
        }
        Ok(match dockerengine::ran_together(&events, &among) {
            Some(what) => {
                tracing::warn!("{}: {what}", self.name);
                2
            }
            None => 1,
        })
    }

    /// The pod shims running in either k3s container: processes of the
    /// container's cgroup whose command is a shim under k3s's data folder,
    /// as the host sees them from inside.
    pub async fn shims(&self) -> anyhow::Result<usize> {
        let mut ids = vec![];
        let c = self.units.containers();
        for c in [&c.server, &c.agent] {
            if let Some(found) = self.daemon.engine().inspect(c).await? {
                ids.push(found.id);
            }
        }
        Ok(shims_in(&ids))
    }
}

/// Pod shims (`/var/lib/rancher/k3s/data/<id>/bin/containerd-shim*`, the
/// path inside the container) in the cgroups of containers `ids`.
fn shims_in(ids: &[String]) -> usize {
    let Ok(procs) = fs::read_dir("/proc") else {
        return 0;
    };
    let data = Path::new("/var/lib/rancher/k3s/data");
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cgroup = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
            ids.iter().any(|id| !id.is_empty() && cgroup.contains(id))
                && host::shims::is_shim_process(data, *pid)
        })
        .count()
}

/// k3s's container for `unit`: the stand-in's `k3s server|agent` under
/// `tini` (k3s reaps its children itself when it is PID 1; the stand-in
/// does not), on the host network, with
/// the host's `/var/lib/rancher` (k3s's data, the role file), `/etc/rancher`
/// (config and node password) and logs bound in, and the unit's
/// environment file's variables as its environment.
fn container(root: &Path, unit: K3sUnit, binds: &[Bind]) -> anyhow::Result<ContainerSpec> {
    let env_file = unit.env_file();
    let env = fs::read_to_string(root.join(env_file.strip_prefix("/")?))
        .with_context(|| format!("{} under {}", env_file.display(), root.display()))?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let bind = |outside: &Path, inside: &str, ro: bool| {
        format!(
            "{}:{inside}{}",
            outside.display(),
            if ro { ":ro" } else { "" }
        )
    };
    let mut all = vec![
        bind(Path::new("/usr"), "/usr", true),
        bind(&root.join("usr/local/bin"), "/usr/local/bin", true),
        bind(Path::new("/etc/ssl"), "/etc/ssl", true),
        bind(&root.join("var/lib/rancher"), "/var/lib/rancher", false),
        bind(&root.join("etc/rancher"), "/etc/rancher", false),
        bind(&root.join("var/log/k3s"), "/var/log/k3s", false),
    ];
    all.extend(
        binds
            .iter()
            .map(|b| bind(&b.outside, &b.inside.display().to_string(), b.read_only)),
    );
    Ok(ContainerSpec {
        image: format!("{}:{}", IMAGE.0, IMAGE.1),
        entrypoint: Some(vec![
            "/usr/bin/tini".into(),
            "--".into(),
            "/usr/local/bin/k3s".into(),
        ]),
        cmd: vec![unit.command().into()],
        env,
        binds: all,
        network_mode: "host".into(),
        // k3s in Docker runs privileged (its containerd, cgroups and
        // mounts); the stand-in needs none of it, and this machine's
        // capability bounding set cannot grant a privileged container.
        privileged: false,
        restart: RestartPolicy::No,
        ..ContainerSpec::default()
    })
}

/// The image: links into `/usr` (bound in), and the folders k3s's binds
/// land on.
async fn import_image(engine: &Engine, dir: &Path) -> anyhow::Result<()> {
    let rootfs = dir.join("rootfs");
    let _ = fs::remove_dir_all(&rootfs);
    for d in [
        "usr",
        "etc/rancher",
        "etc/ssl",
        "var/lib/rancher",
        "var/log/k3s",
        "tmp",
        "run",
        "proc",
        "sys",
        "dev",
    ] {
        fs::create_dir_all(rootfs.join(d))?;
    }
    for (link, to) in [
        ("bin", "usr/bin"),
        ("sbin", "usr/sbin"),
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
    ] {
        std::os::unix::fs::symlink(to, rootfs.join(link))?;
    }
    let tar = dir.join("rootfs.tar");
    crate::bounded::run_ok(
        Command::new("tar")
            .arg("-C")
            .arg(&rootfs)
            .args(["--owner=0", "--group=0", "-cf"])
            .arg(&tar)
            .arg("."),
        Duration::from_secs(60),
    )?;
    engine
        .import(IMAGE.0, IMAGE.1, fs::read(&tar)?)
        .await
        .context("importing the lab's k3s image")
}

/// The actuator as `Restart=always` keeps it: started again a moment after
/// it exits, until stopped.
struct Supervised {
    command: Vec<String>,
    log: PathBuf,
    child: Arc<Mutex<Option<Child>>>,
    wanted: Arc<AtomicBool>,
    /// Which start the watching thread serves: a thread of an earlier start
    /// (stopped, then started again) ends rather than start a second one.
    generation: Arc<AtomicU64>,
}

impl Supervised {
    fn new(netns: &Path, actuator: &Path, settings: &Path, log: &Path) -> Supervised {
        Supervised {
            command: vec![
                format!("--net={}", netns.display()),
                actuator.display().to_string(),
                "--config".into(),
                settings.display().to_string(),
                "watch".into(),
            ],
            log: log.to_path_buf(),
            child: Arc::default(),
            wanted: Arc::default(),
            generation: Arc::default(),
        }
    }

    fn spawn(command: &[String], log: &Path) -> Option<Child> {
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .ok()?;
        let err = out.try_clone().ok()?;
        Command::new("nsenter")
            .args(command)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| tracing::warn!("starting the actuator: {e}"))
            .ok()
    }

    fn start(&self) {
        if self.wanted.swap(true, Ordering::SeqCst) {
            return;
        }
        let mine = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        *self.child.lock().unwrap() = Supervised::spawn(&self.command, &self.log);
        let (child, wanted, generation, command, log) = (
            self.child.clone(),
            self.wanted.clone(),
            self.generation.clone(),
            self.command.clone(),
            self.log.clone(),
        );
        let wanted =
            move || wanted.load(Ordering::SeqCst) && generation.load(Ordering::SeqCst) == mine;
        std::thread::spawn(move || {
            let clock = clock::Clock::system();
            while wanted() {
                std::thread::sleep(Duration::from_millis(200));
                let mut c = child.lock().unwrap();
                let exited = c.as_mut().is_none_or(|c| !matches!(c.try_wait(), Ok(None)));
                if exited && wanted() {
                    drop(c);
                    let at = clock.now();
                    while clock.since(at) < RESTART_AFTER {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    let mut c = child.lock().unwrap();
                    if wanted() {
                        *c = Supervised::spawn(&command, &log);
                    }
                }
            }
        });
    }

    fn stop(&self) {
        self.wanted.store(false, Ordering::SeqCst);
        if let Some(mut c) = self.child.lock().unwrap().take() {
            // SIGTERM, as systemd stops it; then a bounded wait.
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let clock = clock::Clock::system();
            let at = clock.now();
            while matches!(c.try_wait(), Ok(None)) {
                if clock.since(at) > Duration::from_secs(30) {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    fn is_running(&self) -> bool {
        self.child
            .lock()
            .unwrap()
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for DockerHost {
    fn drop(&mut self) {
        self.actuator.stop();
        // The containers are stopped before the daemon: k3s's SIGTERM
        // handler stops its etcd and API server (the daemon's own stop
        // would too, less patiently).
        let engine = self.daemon.engine().clone();
        let c = self.units.containers();
        let names = [c.server.clone(), c.agent.clone()];
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            for n in names {
                let _ = rt.block_on(engine.stop(&n, Duration::from_secs(20)));
            }
            Some(())
        })
        .join();
    }
}
