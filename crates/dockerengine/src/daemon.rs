//! A private Docker daemon (the `private-daemon` feature): Debian's
//! `dockerd` with its data, its exec root, its socket and its containerd
//! under one folder, no bridge and no iptables rules, so nothing of it
//! outlives its owner or touches the machine's network. The tests of the
//! Docker host's switch and the lab's Docker hosts run on one each.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::Engine;

/// How long a daemon may take to stop after SIGTERM before it is killed.
const STOP: Duration = Duration::from_secs(30);

/// A private `dockerd`, stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
pub struct PrivateDaemon {
    child: Child,
    engine: Engine,
    dir: PathBuf,
    clock: clock::Clock,
}

impl PrivateDaemon {
    /// Starts `dockerd` over `dir` (created if missing; keep its path
    /// short: containerd's sockets live under it, and a unix socket's path
    /// is at most 108 bytes) and waits up to `bound` for it to answer.
    ///
    /// # Errors
    /// A line saying why, with the daemon's log when it started but did
    /// not answer (the daemon is then stopped).
    pub async fn start(dir: &Path, bound: Duration, clock: &clock::Clock) -> Result<Self, String> {
        Self::start_in(dir, None, bound, clock).await
    }

    /// [`PrivateDaemon::start`], in the network namespace at `netns` when
    /// one is given (`nsenter --net`, which execs `dockerd` in its own
    /// process): a container on the host network then has that namespace's
    /// addresses, as a Docker host's k3s containers have the host's.
    ///
    /// # Errors
    /// As [`PrivateDaemon::start`].
    pub async fn start_in(
        dir: &Path,
        netns: Option<&Path>,
        bound: Duration,
        clock: &clock::Clock,
    ) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let at = |p: &str| dir.join(p).display().to_string();
        let log = std::fs::File::create(dir.join("dockerd.log"))
            .map_err(|e| format!("{}: {e}", at("dockerd.log")))?;
        let mut command = match netns {
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={}", ns.display())).arg("dockerd");
                c
            }
            None => Command::new("dockerd"),
        };
        let child = command
            .args([
                "--data-root",
                &at("data"),
                "--exec-root",
                &at("exec"),
                "--pidfile",
                &at("docker.pid"),
                "-H",
                &format!("unix://{}", at("docker.sock")),
                "--bridge=none",
                "--iptables=false",
                "--ip-masq=false",
                "--log-level=warn",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("dockerd (scripts/prereqs.sh installs docker.io): {e}"))?;
        let engine = Engine::new(dir.join("docker.sock")).with_timeout(Duration::from_secs(60));
        let d = Self {
            child,
            engine,
            dir: dir.to_path_buf(),
            clock: clock.clone(),
        };
        let start = clock.now();
        loop {
            if d.engine.version().await.is_ok() {
                return Ok(d);
            }
            if clock.since(start) >= bound {
                return Err(format!(
                    "dockerd did not answer within {} s; its log:\n{}",
                    bound.as_secs(),
                    d.log()
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The engine at its socket.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("dockerd.log")).unwrap_or_default()
    }

    /// Imports, as `repo:tag`, a root file system of `programs` from this
    /// machine and the libraries `ldd` names for them, at their own paths,
    /// and of `scripts` (a path in the image, its text; mode 0755): an image
    /// made from local files, no registry.
    ///
    /// # Errors
    /// A line saying which file or call failed.
    pub async fn import_programs(
        &self,
        repo: &str,
        tag: &str,
        programs: &[&Path],
        scripts: &[(&str, &str)],
    ) -> Result<(), String> {
        let root = self.dir.join(format!("rootfs-{repo}-{tag}"));
        let out = Command::new("ldd")
            .args(programs)
            .output()
            .map_err(|e| format!("ldd: {e}"))?;
        let libs = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut files: Vec<PathBuf> = programs.iter().map(|p| p.to_path_buf()).collect();
        files.extend(
            libs.split_whitespace()
                .filter(|w| w.starts_with('/') && !w.ends_with(':'))
                .map(PathBuf::from),
        );
        for f in files {
            let rel = f.strip_prefix("/").unwrap_or(&f);
            let to = root.join(rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            let from = std::fs::canonicalize(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            std::fs::copy(&from, &to).map_err(|e| format!("{}: {e}", from.display()))?;
        }
        for (path, text) in scripts {
            use std::os::unix::fs::PermissionsExt;
            let to = root.join(path.trim_start_matches('/'));
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            std::fs::write(&to, text).map_err(|e| format!("{}: {e}", to.display()))?;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| format!("{}: {e}", to.display()))?;
        }
        let tar = Command::new("tar")
            .arg("-C")
            .arg(&root)
            .args(["-c", "."])
            .output()
            .map_err(|e| format!("tar: {e}"))?;
        if !tar.status.success() {
            return Err(format!("tar: {}", String::from_utf8_lossy(&tar.stderr)));
        }
        self.engine
            .import(repo, tag, tar.stdout)
            .await
            .map_err(|e| e.to_string())
    }
}

impl Drop for PrivateDaemon {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let start = self.clock.now();
        let mut exited = false;
        while self.clock.since(start) < STOP {
            if let Ok(Some(_)) = self.child.try_wait() {
                exited = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !exited {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // dockerd binds the network namespace it runs in under its exec
        // root and leaves it mounted at exit: the mount would keep that
        // namespace alive and the folder unremovable. A lazy unmount
        // returns at once.
        let default = self.dir.join("exec/netns/default");
        if default.exists() {
            let _ = Command::new("umount")
                .arg("--lazy")
                .arg(&default)
                .stderr(Stdio::null())
                .status();
        }
    }
}
