//! The host-local moves of a switch, each as a plan of [`Change`]s computed
//! from what the host is now, then applied in order and checked after.
//!
//! Planning first gives `--check` for free (print the plan, apply nothing),
//! and makes every move idempotent: a plan computed on a host that is already
//! where it should be is empty, so a resumed step only does what is left.

use std::{ffi::OsString, fmt, path::PathBuf, sync::Arc, time::Duration};

use protocol::{JoinUrl, Role, SwapId};

use crate::{
    Budget, HostPaths, datastore,
    error::{Error, Result},
    etcd,
    fsutil::{holds, remove_durably, sync_dir, write_atomic},
    k3s,
    lock::HostLock,
    paths::{ETCD_ONLY_DROPIN, JOIN_DROPIN, JOIN_UNIT_DROPIN},
    role, shims,
    systemd::{ActiveState, Systemctl},
    units::Units,
};

/// How long a start waits for its unit to be active by default. A joining
/// server's k3s sends `READY=1` only once its etcd member serves a
/// linearizable read, that is once it has been promoted from learner to
/// voter, which k3s's leader does every 15 s once the learner caught up.
pub const DEFAULT_START_WAIT: Duration = Duration::from_secs(600);

/// How long a stop waits for its unit to be stopped by default: systemd's
/// own stop timeout (90 s, k3s's units set none) and a margin.
pub const DEFAULT_STOP_WAIT: Duration = Duration::from_secs(120);

/// One change to the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Write a file (atomically).
    Write {
        /// The file.
        path: PathBuf,
        /// Its new contents.
        contents: String,
    },
    /// Remove one of fleet-role's own drop-ins.
    Remove {
        /// The file.
        path: PathBuf,
    },
    /// Reload systemd after a unit drop-in changed.
    DaemonReload,
    /// Name a role in the role file.
    Role(Role),
    /// Stop a unit.
    Stop(&'static str),
    /// Disable a unit.
    Disable(&'static str),
    /// Enable and start a unit in one call.
    EnableNow(&'static str),
    /// Restart a unit.
    Restart(&'static str),
    /// Move `server/db/etcd` aside to `server/db.demoted/etcd`.
    MoveDatastoreAside,
    /// Kill every pod's shim, and check none runs again for
    /// [`SHIM_SETTLE`] (an error naming them if one does).
    KillShims,
    /// Wait for the local etcd to serve again.
    WaitEtcd,
    /// Remove the server's secrets an agent does not need
    /// ([`HostPaths::server_secrets`]).
    RemoveServerSecrets,
}

/// A change as one line, with paths shown as they are on the host, and
/// units as what runs them (systemd, or Docker's containers).
pub struct Shown<'a>(&'a Change, &'a Host);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let paths = &self.1.paths;
        let on_host =
            |p: &PathBuf| format!("/{}", p.strip_prefix(paths.root()).unwrap_or(p).display());
        let docker = match self.1.units() {
            Units::Docker(d) => Some(d),
            Units::Systemd(_) => None,
        };
        // The container a unit stands for, on a Docker host.
        let container = |u: &str| docker.and_then(|d| d.container(u)).unwrap_or(u).to_string();
        match (self.0, docker.is_some()) {
            (Change::Write { path, .. }, _) => write!(f, "write {}", on_host(path)),
            (Change::Remove { path }, _) => write!(f, "remove {}", on_host(path)),
            (Change::DaemonReload, _) => f.write_str("systemctl daemon-reload"),
            (Change::Role(r), _) => write!(f, "name {r} in {}", on_host(&paths.role_file())),
            (Change::Stop(u), false) => write!(f, "systemctl stop {u} (queued, then confirmed)"),
            (Change::Stop(u), true) => write!(f, "docker stop {} (then confirmed)", container(u)),
            (Change::Disable(u), false) => write!(f, "systemctl disable {u}"),
            (Change::Disable(u), true) => {
                write!(f, "docker update --restart no {}", container(u))
            }
            (Change::EnableNow(u), false) => {
                write!(f, "systemctl enable --now {u} (queued, then waited for)")
            }
            (Change::EnableNow(u), true) => write!(
                f,
                "docker update --restart unless-stopped {0}, docker start {0} (then waited for)",
                container(u)
            ),
            (Change::Restart(u), false) => {
                write!(f, "systemctl restart {u} (queued, then waited for)")
            }
            (Change::Restart(u), true) => {
                write!(f, "docker restart {} (then waited for)", container(u))
            }
            (Change::MoveDatastoreAside, _) => write!(
                f,
                "move {} to {}",
                on_host(&paths.etcd_dir()),
                on_host(&paths.db_demoted().join("etcd"))
            ),
            (Change::KillShims, _) => write!(
                f,
                "kill every pod's shim; none may run again within {} s",
                SHIM_SETTLE.as_secs()
            ),
            (Change::WaitEtcd, _) => f.write_str("wait for etcd to serve again"),
            (Change::RemoveServerSecrets, _) => write!(
                f,
                "remove the server's secrets: {}",
                paths
                    .server_secrets()
                    .iter()
                    .map(on_host)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The host, under its root.
#[derive(Debug, Clone)]
pub struct Host {
    /// Its paths.
    pub paths: HostPaths,
    /// Its Node name (snapshot files carry it).
    pub node: String,
    /// The local etcd's health URL.
    pub etcd_health_url: String,
    /// How long a step-down waits for etcd to serve again.
    pub etcd_wait: Duration,
    /// How long `k3s etcd-snapshot save` may take before it is killed.
    pub snapshot_timeout: Duration,
    /// How many swap snapshots [`Host::prune_snapshots`] keeps; 0 keeps
    /// every one.
    pub snapshot_retention: u32,
    /// How long a queued start waits for its unit to be active.
    pub start_wait: Duration,
    /// How long a queued stop waits for its unit to be stopped.
    pub stop_wait: Duration,
    budget: Budget,
    units: Units,
    search_path: Option<OsString>,
    after_change: Option<AfterChange>,
}

/// What [`Host::apply`] calls after each change it applied (see
/// [`Host::with_after_change`]).
#[derive(Clone)]
struct AfterChange(Arc<AfterChangeFn>);

type AfterChangeFn = dyn Fn(&Host, &Change) + Send + Sync;

impl fmt::Debug for AfterChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AfterChange")
    }
}

const SERVER: &str = "k3s";
const AGENT: &str = "k3s-agent";
/// The regrade watcher's unit (the seed's `fleet-regrade`): it moves a
/// server between levels, so it must not run once the host steps down.
pub const REGRADE: &str = "fleet-regrade";

/// The config drop-in that takes a server to the etcd-only level: k3s's own
/// (experimental) component flags, the same level an operator's regrade uses.
///
/// `disable-agent` (a hidden server flag, `pkg/cli/cmds/server.go`) makes
/// k3s run `agent.RunStandalone` instead of its embedded agent
/// (`pkg/cli/server/server.go`): no containerd and no kubelet, so no pod
/// runs on the host and none is restarted once its shim is killed. Its cost:
/// the host's Node is not heartbeated while it serves etcd only. Its keys
/// are [`crate::etcd_only::KEYS`], each `true`.
pub const ETCD_ONLY_CONFIG: &str = "# Written by fleet-role-actuator: this server is stepping down (etcd only).\ndisable-apiserver: true\ndisable-controller-manager: true\ndisable-scheduler: true\ndisable-agent: true\n";

/// How long a step-down watches for shims after killing them: a kubelet
/// restarts a killed pod within seconds (it relists every second).
pub const SHIM_SETTLE: Duration = Duration::from_secs(5);

impl Host {
    /// The host under `root`, known to the cluster as `node`, every wait of
    /// it on `clock` (a [`Budget`] given by [`Host::with_budget`] brings its
    /// own: make it on [`Host::clock`]).
    pub fn new(root: impl Into<PathBuf>, node: impl Into<String>, clock: clock::Clock) -> Self {
        let root = root.into();
        Self {
            paths: HostPaths::new(&root),
            node: node.into(),
            etcd_health_url: etcd::DEFAULT_HEALTH_URL.to_string(),
            etcd_wait: Duration::from_secs(120),
            snapshot_timeout: k3s::DEFAULT_SNAPSHOT_TIMEOUT,
            snapshot_retention: k3s::DEFAULT_SNAPSHOT_RETENTION,
            start_wait: DEFAULT_START_WAIT,
            stop_wait: DEFAULT_STOP_WAIT,
            budget: Budget::unbounded(&clock),
            units: Units::Systemd(Systemctl::new(root, &clock)),
            search_path: None,
            after_change: None,
        }
    }

    /// Calls `f` after each change [`Host::apply`] applied, once it succeeded
    /// and before the next. The actuator's failpoint (a testing aid, see
    /// docs/testing.md) is the one caller: the host itself stays free of it.
    pub fn with_after_change(mut self, f: impl Fn(&Host, &Change) + Send + Sync + 'static) -> Self {
        self.after_change = Some(AfterChange(Arc::new(f)));
        self
    }

    /// Looks `systemctl` and `k3s` up on `path` instead of this process's
    /// `PATH` (tests put their stand-ins there).
    pub fn with_search_path(mut self, path: impl Into<OsString>) -> Self {
        let path = path.into();
        self.units = self.units.with_search_path(Some(path.clone()));
        self.search_path = Some(path);
        self
    }

    /// Bounds every `systemctl` call to `timeout`.
    pub fn with_systemctl_timeout(mut self, timeout: Duration) -> Self {
        self.units = self.units.with_timeout(timeout);
        self
    }

    /// The same host with k3s in Docker containers instead of systemd
    /// units (see [`crate::docker`]); its waits run under this host's
    /// budget.
    pub fn with_docker(mut self, docker: crate::docker::DockerUnits) -> Self {
        self.units = Units::Docker(docker.with_budget(self.budget.clone()));
        self
    }

    /// The same host, with every call and wait under `budget`: its deadline
    /// cuts them short and its cancellation ends them at once.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.units = self.units.with_budget(budget.clone());
        self.budget = budget;
        self
    }

    /// The clock the host's waits read (its budget's).
    pub fn clock(&self) -> &clock::Clock {
        self.budget.clock()
    }

    /// Where the host's k3s units run (systemd, or Docker).
    pub fn units(&self) -> &Units {
        &self.units
    }

    /// Takes the host lock, waiting up to `timeout`.
    pub fn lock(&self, timeout: Duration) -> Result<HostLock> {
        HostLock::acquire_within(&self.paths.lock_file(), timeout, &self.budget)
    }

    /// Takes the host lock as [`Host::lock`] does, waiting on the runtime's
    /// timer: for a caller on an async task.
    pub async fn lock_async(&self, timeout: Duration) -> Result<HostLock> {
        HostLock::acquire_within_async(&self.paths.lock_file(), timeout, &self.budget).await
    }

    /// A change as one line for a person.
    pub fn show<'a>(&'a self, c: &'a Change) -> Shown<'a> {
        Shown(c, self)
    }

    /// The current role file (missing → `None`). An unreadable or invalid
    /// one is an error, and every plan refuses on it: such a host may be a
    /// server or an agent, and a guess could move a live datastore aside.
    pub fn role(&self) -> Result<Option<Role>> {
        role::read(&self.paths)
    }

    fn write_if_differs(&self, plan: &mut Vec<Change>, path: PathBuf, contents: String) -> bool {
        if holds(&path, contents.as_bytes()) {
            return false;
        }
        plan.push(Change::Write { path, contents });
        true
    }

    fn remove_if_there(&self, plan: &mut Vec<Change>, path: PathBuf) -> bool {
        if !path.exists() {
            return false;
        }
        plan.push(Change::Remove { path });
        true
    }

    /// A `daemon-reload` when this plan changes the server's unit drop-in,
    /// or when systemd has not loaded it as it is on disk: a crash between
    /// an earlier run's change and its reload leaves the file as planned,
    /// so only systemd can tell the reload is still owed.
    fn reload_if(&self, plan: &mut Vec<Change>, changed: bool) -> Result<()> {
        if changed || self.units.needs_daemon_reload(SERVER)? {
            plan.push(Change::DaemonReload);
        }
        Ok(())
    }

    fn stop_and_disable(&self, plan: &mut Vec<Change>, unit: &'static str) -> Result<()> {
        // Anything but inactive or failed may be running, or about to be:
        // activating (a start, its condition, an auto-restart's wait) and
        // deactivating included.
        if !self.units.state(unit)?.is_stopped() {
            plan.push(Change::Stop(unit));
        }
        if self.units.is_enabled(unit)? {
            plan.push(Change::Disable(unit));
        }
        Ok(())
    }

    fn enable_now(&self, plan: &mut Vec<Change>, unit: &'static str) -> Result<()> {
        if self.units.state(unit)?.active != ActiveState::Active || !self.units.is_enabled(unit)? {
            plan.push(Change::EnableNow(unit));
        }
        Ok(())
    }

    /// The server the host's join drop-in names (`server:` in
    /// `config.yaml.d/90-fleet-role-join.yaml`), while there is one: the
    /// voter a promotion joined. `None` without a drop-in, or with a value
    /// that is not a join URL.
    pub fn join_server(&self) -> Option<JoinUrl> {
        #[derive(Default, serde::Deserialize)]
        struct ServerKey {
            server: Option<String>,
        }
        // A drop-in that cannot be used names no server (`crate::k3s_config`'s
        // policy): the caller then has no join to act on, and guesses none.
        let file = crate::k3s_config::read_file(&self.paths.k3s_dropins().join(JOIN_DROPIN))?;
        let value = file.content.ok()?.get::<ServerKey>().ok()?.server?;
        JoinUrl::parse(value.trim()).ok()
    }

    /// The plan of `promote-local`: join drop-ins for the server's config and
    /// its unit naming `join`, `server` in the role file, the agent stopped
    /// and disabled, then the server enabled and started. The agent stops
    /// before the server starts, so the two are never active together.
    ///
    /// The order on disk, and what a crash or power cut after each leaves
    /// (every file change is durable before the next, see [`Host::apply`]):
    /// 1. the datastore moved aside, the join drop-ins written (the unit's
    ///    loaded), the etcd-only drop-in removed: the role file
    ///    still names the agent (or nothing), so the server's `ExecCondition`
    ///    refuses it whatever the drop-ins say; the step run again plans
    ///    what is left;
    /// 2. `server` in the role file, only once every drop-in the server
    ///    starts with is on disk: a server started from here on (by this
    ///    plan, or by systemd after a reboot) never has the etcd-only level
    ///    or lacks the join;
    /// 3. the agent stopped and disabled, the server enabled and started: the
    ///    agent's `ExecCondition` already refuses it, so after a reboot in
    ///    between nothing runs until the step is run again.
    pub fn plan_promote(&self, join: &JoinUrl) -> Result<Vec<Change>> {
        self.units.refuse_missing()?;
        let mut plan = vec![];
        let role = self.role()?;
        if (role != Some(Role::Server) || self.has_tombstone())
            && (self.paths.etcd_dir().exists() || self.paths.db_demoted_new().exists())
        {
            // A datastore left from an earlier life (or a removed member's,
            // with its tombstone, which keeps the unit from starting) would
            // make k3s start a removed member or a new cluster: k3s's own
            // advice is to move it, with the server confirmed stopped first.
            if !self.units.state(SERVER)?.is_stopped() {
                plan.push(Change::Stop(SERVER));
            }
            plan.push(Change::MoveDatastoreAside);
        }
        self.plan_join(&mut plan, join)?;
        self.remove_if_there(&mut plan, self.paths.k3s_dropins().join(ETCD_ONLY_DROPIN));
        if role != Some(Role::Server) {
            plan.push(Change::Role(Role::Server));
        }
        self.stop_and_disable(&mut plan, AGENT)?;
        self.enable_now(&mut plan, SERVER)?;
        Ok(plan)
    }

    /// The join drop-ins naming `join`, each written only where it differs:
    /// `server:` in k3s's config, and `FLEET_ROLE_JOIN_URL` in the server
    /// unit's environment, with systemd reloaded when that changed.
    fn plan_join(&self, plan: &mut Vec<Change>, join: &JoinUrl) -> Result<()> {
        let config = format!(
            "# Written by fleet-role-actuator: the voter this server joins.\nserver: \"{join}\"\n"
        );
        self.write_if_differs(plan, self.paths.k3s_dropins().join(JOIN_DROPIN), config);
        // The unit drop-in lets a network wrapper (Tailscale's, say) wait for
        // the voter this server joins rather than the inventory's join host
        // (`fleet-role-actuator wait-join`).
        let unit = format!(
            "# Written by fleet-role-actuator.\n[Service]\nEnvironment=\"FLEET_ROLE_JOIN_URL={join}\"\n"
        );
        // A container has no unit drop-ins: its k3s reads the join from
        // the config drop-in above, through the same bind mount.
        let wrote = self.units.has_unit_dropins()
            && self.write_if_differs(
                plan,
                self.paths.unit_dropins(SERVER).join(JOIN_UNIT_DROPIN),
                unit,
            );
        self.reload_if(plan, wrote)
    }

    /// The plan of `demote-local` (and of a finish, [`Host::plan_finish`];
    /// a rollback removes more, [`Host::plan_rollback`]): the server
    /// stopped and disabled, the datastore moved aside, fleet-role's
    /// etcd-only and unit drop-ins removed, `agent` in the role file, the
    /// agent enabled and started, then the server's secrets removed. The
    /// node password is never touched.
    ///
    /// The order on disk, and what a crash or power cut after each leaves:
    /// 1. the server stopped and disabled, its datastore moved aside: no
    ///    unit is enabled to start after a reboot (the agent was disabled by
    ///    the promotion);
    /// 2. fleet-role's drop-ins removed, each removal synced: the agent reads
    ///    `config.yaml.d` too, and fails on the etcd-only drop-in's
    ///    `disable-apiserver`, so none may come back once it can start;
    /// 3. `agent` in the role file, then the agent enabled and started: both
    ///    after the removals are on disk.
    ///
    /// fleet-role's join drop-in stays: the server it names (the voter the
    /// promotion joined, or the one the step-down named) is the one the
    /// agent bootstraps from, and the eligibility check judged that.
    pub fn plan_demote(&self) -> Result<Vec<Change>> {
        self.plan_demote_keeping(true)
    }

    /// The plan of a rollback: [`Host::plan_demote`]'s, the join drop-in
    /// removed too, so the host goes back to the agent it was, with the
    /// server its own configuration names.
    pub fn plan_rollback(&self) -> Result<Vec<Change>> {
        self.plan_demote_keeping(false)
    }

    fn plan_demote_keeping(&self, keep_join: bool) -> Result<Vec<Change>> {
        self.units.refuse_missing()?;
        let mut plan = vec![];
        self.stop_and_disable(&mut plan, SERVER)?;
        if self.paths.etcd_dir().exists() || self.paths.db_demoted_new().exists() {
            plan.push(Change::MoveDatastoreAside);
        }
        if !keep_join {
            self.remove_if_there(&mut plan, self.paths.k3s_dropins().join(JOIN_DROPIN));
        }
        self.remove_if_there(&mut plan, self.paths.k3s_dropins().join(ETCD_ONLY_DROPIN));
        let removed = self.remove_if_there(
            &mut plan,
            self.paths.unit_dropins(SERVER).join(JOIN_UNIT_DROPIN),
        );
        self.reload_if(&mut plan, removed)?;
        if self.role()? != Some(Role::Agent) {
            plan.push(Change::Role(Role::Agent));
        }
        self.enable_now(&mut plan, AGENT)?;
        // Once the agent runs, the server's secrets an agent does not need
        // (see [`crate::secrets`]): whichever way the host became an agent
        // (a finish, a rollback, `demote-local`), none of them stays on
        // it. The CA keys, the cluster's admin key and the cloud
        // controller's credential (which alone can write any Lease and any
        // Node) would otherwise be one agent's disk away.
        if !crate::secrets::present(&self.paths).is_empty() {
            plan.push(Change::RemoveServerSecrets);
        }
        Ok(plan)
    }

    /// The plan of a finish: [`Host::plan_demote`]'s (the server's secrets
    /// removed with it, as every way to the agent removes them).
    pub fn plan_finish(&self) -> Result<Vec<Change>> {
        self.plan_demote()
    }

    /// The plan of a step-down: the regrade watcher stopped if it runs, the
    /// etcd-only drop-in, the server restarted at
    /// that level, every shim killed, etcd serving again, and only then
    /// `agent` in the role file. If etcd does not come back the plan stops
    /// there, with the role file still naming the server.
    ///
    /// The drop-in is on disk before the restart that reads it, and the role
    /// file changes last: a power cut before it restarts the server at the
    /// etcd-only level (the drop-in is durable), one after it leaves the
    /// server refused by its `ExecCondition` until the finish, the agent
    /// still disabled.
    ///
    /// `join`, when given, is the voter the host's `server:` must name from
    /// now on ([`hostdecide::join::for_step_down`]): at the etcd-only level
    /// k3s bootstraps from `server:`, so one naming a host that left keeps
    /// the restart from coming up. Its drop-ins come first; a config file
    /// sorting after them that sets `server:` refuses the plan, since k3s
    /// would read that one instead.
    pub fn plan_step_down(&self, join: Option<&JoinUrl>) -> Result<Vec<Change>> {
        self.units.refuse_missing()?;
        let mut plan = vec![];
        if let Some((path, key)) = crate::etcd_only::overridden_by(&self.paths) {
            return Err(Error::K3sConfig {
                path,
                why: format!(
                    "sets {key}, which k3s reads instead of fleet-role's etcd-only drop-in (it sorts later); the step-down was not begun"
                ),
            });
        }
        // A running regrade watcher would move the server's level back while
        // it steps down; its `ExecCondition` keeps it from starting again
        // once the role file names the agent.
        if !self.units.state(REGRADE)?.is_stopped() {
            plan.push(Change::Stop(REGRADE));
        }
        if let Some(join) = join {
            if let Some(path) = crate::join::overridden_by(&self.paths) {
                return Err(Error::K3sConfig {
                    path,
                    why: format!(
                        "sets server:, which k3s reads instead of fleet-role's join drop-in; the step-down must name {join}, a voter that is there, and was not begun"
                    ),
                });
            }
            self.plan_join(&mut plan, join)?;
        }
        let dropin = self.paths.k3s_dropins().join(ETCD_ONLY_DROPIN);
        self.write_if_differs(&mut plan, dropin, ETCD_ONLY_CONFIG.to_string());
        let role = self.role()?;
        if role != Some(Role::Agent) {
            // Restart even when the drop-in was already written: a crash may
            // have come between the write and the restart.
            plan.push(Change::Restart(SERVER));
        }
        plan.push(Change::KillShims);
        plan.push(Change::WaitEtcd);
        if role != Some(Role::Agent) {
            plan.push(Change::Role(Role::Agent));
        }
        Ok(plan)
    }

    /// Applies a plan in order, checking each move; stops at the first error.
    ///
    /// Every file change is durable before the next change runs (writes and
    /// removals sync their directory), so the order of each plan is the order
    /// on disk after a power cut. A plan is computed from the files as this
    /// process sees them, which may hold an earlier, crashed run's rename or
    /// removal not yet on disk; their directories are synced first, so a plan
    /// that skips a change as done builds on it durably done.
    pub fn apply(&self, plan: &[Change]) -> Result<()> {
        if !plan.is_empty() {
            self.sync_planned_dirs()?;
        }
        for change in plan {
            self.apply_one(change)?;
            if let Some(AfterChange(f)) = &self.after_change {
                f(self, change);
            }
        }
        Ok(())
    }

    /// Syncs the directories plans write into and remove from (k3s's
    /// drop-ins, the server unit's drop-ins, the role file's), those that
    /// exist.
    fn sync_planned_dirs(&self) -> Result<()> {
        let role_file = self.paths.role_file();
        let dirs = [
            self.paths.k3s_dropins(),
            self.paths.unit_dropins(SERVER),
            role_file.parent().map(PathBuf::from).unwrap_or_default(),
        ];
        for dir in dirs.iter().filter(|d| d.is_dir()) {
            sync_dir(dir)?;
        }
        Ok(())
    }

    fn apply_one(&self, change: &Change) -> Result<()> {
        let sc = &self.units;
        self.budget
            .check(&format!("about to {}", self.show(change)))?;
        match change {
            Change::Write { path, contents } => write_atomic(path, contents.as_bytes(), 0o644),
            Change::Remove { path } => remove_durably(path).map(drop),
            Change::DaemonReload => sc.daemon_reload(),
            Change::Role(r) => role::write(&self.paths, *r),
            Change::Stop(u) => self.stop_confirmed(u),
            Change::Disable(u) => sc.disable(u),
            Change::EnableNow(u) => {
                self.stop_confirmed(other(u))?;
                let before = sc.state(u)?;
                sc.queue_enable_now(u)?;
                sc.wait_active(u, &before, false, self.start_wait)
            }
            Change::Restart(u) => {
                self.stop_confirmed(other(u))?;
                let before = sc.state(u)?;
                sc.queue_restart(u)?;
                sc.wait_active(u, &before, true, self.start_wait)
            }
            Change::MoveDatastoreAside => {
                // Never under a running server: k3s would write into the
                // directory being moved, or start over an empty one.
                self.stop_confirmed(SERVER)?;
                datastore::move_aside(&self.paths, self.clock()).map(drop)
            }
            Change::KillShims => shims::kill_and_settle(
                &self.paths,
                Duration::from_secs(10),
                SHIM_SETTLE,
                self.clock(),
            )
            .map(drop)
            .map_err(|pids| Error::ShimsRunAgain {
                pids,
                settle: SHIM_SETTLE,
            }),
            Change::WaitEtcd => self.wait_etcd(),
            Change::RemoveServerSecrets => {
                // Never under a running server, which would write them again.
                self.stop_confirmed(SERVER)?;
                crate::secrets::remove(&self.paths).map(drop)
            }
        }
    }

    /// Stops the server (`k3s`) and confirms it stopped, leaving it enabled:
    /// a rollback's first move, so that the learner it removes next is one
    /// whose etcd no longer runs (see the actuator's `learner` module).
    pub fn stop_server(&self) -> Result<()> {
        self.budget.check("about to stop k3s")?;
        self.stop_confirmed(SERVER)
    }

    /// Issues a stop of `unit` and confirms it (`inactive` or `failed`).
    /// A stop of a stopped unit changes nothing, and issuing it also
    /// cancels a start systemd may have queued meanwhile.
    fn stop_confirmed(&self, unit: &str) -> Result<()> {
        self.units.queue_stop(unit)?;
        self.units.wait_stopped(unit, self.stop_wait).map(drop)
    }

    fn wait_etcd(&self) -> Result<()> {
        let clock = self.clock();
        let start = clock.now();
        let every = Duration::from_millis(500);
        loop {
            if etcd::is_healthy(&self.etcd_health_url, every.max(Duration::from_millis(200))) {
                return Ok(());
            }
            if clock.since(start) >= self.etcd_wait {
                return Err(Error::EtcdNotBack {
                    url: self.etcd_health_url.clone(),
                    waited: self.etcd_wait,
                });
            }
            self.budget.check("waiting for etcd to serve again")?;
            self.budget.sleep(every);
        }
    }

    /// Takes the on-demand snapshot named for `swap`; returns its file as a
    /// path on the host.
    pub fn snapshot(&self, swap: &SwapId) -> Result<String> {
        let file = k3s::snapshot_save(
            &self.paths,
            &self.node,
            swap,
            &self.k3s_cli(),
            self.snapshot_timeout,
            &self.budget,
        )?;
        Ok(format!(
            "/{}",
            file.strip_prefix(self.paths.root())
                .unwrap_or(&file)
                .display()
        ))
    }

    /// Deletes all but the newest [`Host::snapshot_retention`] swap
    /// snapshots ([`k3s::snapshot_prune`]); returns how many are left, or
    /// `None` when retention is off (0). Housekeeping after a swap's
    /// snapshot: its failure leaves every snapshot in place.
    pub fn prune_snapshots(&self) -> Result<Option<usize>> {
        if self.snapshot_retention == 0 {
            return Ok(None);
        }
        k3s::snapshot_prune(
            &self.paths,
            self.snapshot_retention,
            &self.k3s_cli(),
            self.snapshot_timeout,
            &self.budget,
        )
        .map(Some)
    }

    /// Where this host's `k3s` command runs.
    fn k3s_cli(&self) -> crate::k3s_cli::K3sCli<'_> {
        match &self.units {
            Units::Docker(d) => crate::k3s_cli::K3sCli::Docker(d),
            Units::Systemd(_) => crate::k3s_cli::K3sCli::Native(self.search_path.as_ref()),
        }
    }

    /// The k3s release this host runs (`k3s --version`, bounded).
    pub fn k3s_version(&self) -> Result<crate::k3s_version::K3sVersion> {
        crate::k3s_version::read(&self.paths, &self.k3s_cli(), &self.budget)
    }

    /// Whether the datastore holds k3s's tombstone.
    pub fn has_tombstone(&self) -> bool {
        self.paths.tombstone().exists()
    }

    /// The host's etcd member name (k3s keeps it in `server/db/etcd/name`).
    pub fn member_name(&self) -> Option<String> {
        std::fs::read_to_string(self.paths.etcd_dir().join("name"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// Whether the host holds an etcd datastore (`server/db/etcd`; the
    /// snapshots beside it are no datastore).
    pub fn has_datastore(&self) -> bool {
        self.paths.etcd_dir().exists()
    }

    /// Whether this host's etcd member may still be in the cluster: it holds
    /// a datastore and no tombstone. k3s writes the tombstone when it sees its
    /// member removed, so only a tombstone proves the member gone from here;
    /// a member removed while k3s was down leaves none, and only etcd's
    /// member list can tell (`demote-local --force` is for that case).
    pub fn member_may_vote(&self) -> bool {
        self.has_datastore() && !self.has_tombstone()
    }

    /// What the eligibility check judges on this host: a server whose member
    /// votes steps down before it finishes, and the step-down names the
    /// server its agent bootstraps from, so only its keys are judged; any
    /// other host is judged on its keys and its server.
    pub fn eligibility_judged(&self) -> crate::eligibility::Judged {
        if self.role().ok().flatten() == Some(Role::Server) && self.member_may_vote() {
            crate::eligibility::Judged::KeysOnly
        } else {
            crate::eligibility::Judged::All
        }
    }
}

/// The other k3s unit: the one that must be stopped before `unit` starts.
fn other(unit: &str) -> &'static str {
    if unit == SERVER { AGENT } else { SERVER }
}

#[cfg(test)]
mod tests;
