//! The campaign's controllers: two `fleet-role run` instances electing a
//! leader, and the `fleet-role swap` that drives each planned swap. Their
//! output goes to files under the campaign's directory, line by line as it
//! comes (a pipe nobody reads would block them).

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// `fleet-role` with the campaign's settings, through one server's API.
#[derive(Debug, Clone)]
pub struct FleetRole {
    /// The program.
    pub program: PathBuf,
    /// The settings file (`--config`).
    pub config: PathBuf,
    /// Where the logs go.
    pub logs: PathBuf,
    /// The offset file of the controllers' clock (`clocks`): the swaps
    /// and `run` read their wall clock through it; `status` and `abort`,
    /// the campaign's own reading, keep the true one.
    pub clock: Option<PathBuf>,
}

impl FleetRole {
    fn command(&self, kubeconfig: &Path) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.program);
        c.arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--config")
            .arg(&self.config)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        c
    }

    /// Starts `fleet-role ARGS` (a controller: its clock is the
    /// controllers'), its output appended to `log` under the logs;
    /// `on_line` sees each line of its standard output.
    pub fn spawn(
        &self,
        kubeconfig: &Path,
        args: &[&str],
        log: &str,
        on_line: impl Fn(&str) + Send + 'static,
    ) -> anyhow::Result<tokio::process::Child> {
        let mut command = self.command(kubeconfig);
        if let Some(file) = &self.clock {
            command.envs(super::clocks::environment(file));
        }
        let mut child = command
            .args(args)
            .spawn()
            .with_context(|| format!("running {}", self.program.display()))?;
        let path = self.logs.join(log);
        let out = child.stdout.take().context("piped")?;
        let err = child.stderr.take().context("piped")?;
        tokio::spawn(copy_lines(out, path.clone(), Some(Box::new(on_line))));
        tokio::spawn(copy_lines(err, path, None));
        Ok(child)
    }

    /// `fleet-role ARGS` to its end within `bound`: its exit code (none
    /// when killed or past the bound) and standard output.
    pub async fn output(
        &self,
        kubeconfig: &Path,
        args: &[&str],
        bound: Duration,
    ) -> (Option<i32>, String) {
        let run = self.command(kubeconfig).args(args).output();
        match tokio::time::timeout(bound, run).await {
            Ok(Ok(o)) => (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
            ),
            _ => (None, String::new()),
        }
    }
}

type OnLine = Box<dyn Fn(&str) + Send>;

async fn copy_lines(from: impl tokio::io::AsyncRead + Unpin, to: PathBuf, on_line: Option<OnLine>) {
    let mut lines = tokio::io::BufReader::new(from).lines();
    let file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&to)
        .await;
    let Ok(mut file) = file else { return };
    while let Ok(Some(l)) = lines.next_line().await {
        if let Some(f) = &on_line {
            f(&l);
        }
        let _ = file.write_all(format!("{l}\n").as_bytes()).await;
    }
}

/// One `fleet-role run` instance.
struct Instance {
    kubeconfig: PathBuf,
    log: String,
    child: Option<tokio::process::Child>,
    leading: Arc<AtomicBool>,
}

/// The `run` instances, electing a leader.
pub struct Runs {
    fleet_role: FleetRole,
    instances: Vec<Instance>,
}

impl Runs {
    /// Starts one `run` through each of `kubeconfigs`.
    pub fn start(fleet_role: FleetRole, kubeconfigs: Vec<PathBuf>) -> anyhow::Result<Runs> {
        let mut runs = Runs {
            fleet_role,
            instances: kubeconfigs
                .into_iter()
                .enumerate()
                .map(|(i, kubeconfig)| Instance {
                    kubeconfig,
                    log: format!("run-{}.log", i + 1),
                    child: None,
                    leading: Arc::new(AtomicBool::new(false)),
                })
                .collect(),
        };
        for i in 0..runs.instances.len() {
            runs.restart(i)?;
        }
        Ok(runs)
    }

    /// Starts instance `i` again if it is not running.
    pub fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        let fleet_role = self.fleet_role.clone();
        let inst = &mut self.instances[i];
        if inst.child.is_some() {
            return Ok(());
        }
        inst.leading.store(false, Ordering::Relaxed);
        let leading = inst.leading.clone();
        inst.child = Some(
            fleet_role.spawn(&inst.kubeconfig, &["run"], &inst.log, move |l| {
                if l.contains(" leading: ") {
                    leading.store(true, Ordering::Relaxed);
                } else if l.contains(" lost the leadership") {
                    leading.store(false, Ordering::Relaxed);
                }
            })?,
        );
        Ok(())
    }

    /// SIGKILLs the instance that said last it leads; which one (none when
    /// no instance leads now).
    pub async fn kill_leader(&mut self) -> Option<usize> {
        let i = self
            .instances
            .iter()
            .position(|x| x.child.is_some() && x.leading.load(Ordering::Relaxed))?;
        let mut child = self.instances[i].child.take()?;
        let _ = child.kill().await;
        Some(i)
    }

    /// Whether any instance says it leads.
    pub fn any_leading(&self) -> bool {
        self.instances
            .iter()
            .any(|x| x.child.is_some() && x.leading.load(Ordering::Relaxed))
    }

    /// Stops every instance (SIGKILL: the campaign is over).
    pub async fn stop(&mut self) {
        for inst in &mut self.instances {
            if let Some(mut c) = inst.child.take() {
                let _ = c.kill().await;
            }
        }
    }
}
