//! Stopping every pod's shim, as `k3s-killall.sh` does: a plain
//! `systemctl stop` (or restart) of k3s leaves pods running, since the units
//! use `KillMode=process`, and a host leaving the voters must run none.
//!
//! A kubelet restarts a pod whose shim was killed within seconds, and k3s
//! runs one in every server unless its agent is disabled (`disable-agent`,
//! which the etcd-only level sets). So killing is not enough: the shims must
//! stay gone, which [`kill_and_settle`] checks.

use std::{fs, path::Path, process::Command, thread, time::Duration};

use crate::{HostPaths, process::Bounded};

/// Process ids whose command line starts with a shim under this host's
/// `<data-dir>/data/<id>/bin/containerd-shim*`.
pub fn find(paths: &HostPaths) -> Vec<u32> {
    let data = paths.data_dir().join("data");
    let Ok(procs) = fs::read_dir("/proc") else {
        return vec![];
    };
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| is_shim_process(&data, *pid))
        .collect()
}

/// Whether process `pid`'s command line starts with a shim under `data`
/// (`<data>/<id>/bin/containerd-shim*`), as the process itself names it.
pub fn is_shim_process(data: &Path, pid: u32) -> bool {
    let Ok(cmd) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let arg0 = cmd.split(|b| *b == 0).next().unwrap_or_default();
    is_shim(data, Path::new(&*String::from_utf8_lossy(arg0)))
}

fn is_shim(data: &Path, exe: &Path) -> bool {
    let Ok(rest) = exe.strip_prefix(data) else {
        return false;
    };
    let parts: Vec<_> = rest.iter().map(|p| p.to_string_lossy()).collect();
    parts.len() == 3 && parts[1] == "bin" && parts[2].starts_with("containerd-shim")
}

fn children(pid: u32) -> Vec<u32> {
    let Ok(procs) = fs::read_dir("/proc") else {
        return vec![];
    };
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    // The command name may hold spaces and parentheses: read past the last ')'.
                    let after = s
                        .rsplit_once(')')?
                        .1
                        .split_whitespace()
                        .nth(1)?
                        .parse::<u32>()
                        .ok()?;
                    Some(after == pid)
                })
                == Some(true)
        })
        .collect()
}

/// Kills every shim and its process tree with SIGKILL, and returns how many
/// shims there were. Waits up to `timeout` on `clock` for them to be gone.
pub fn kill_all(paths: &HostPaths, timeout: Duration, clock: &clock::Clock) -> usize {
    let shims = find(paths);
    for &pid in &shims {
        let mut tree = vec![pid];
        let mut i = 0;
        while i < tree.len() {
            tree.extend(children(tree[i]));
            i += 1;
        }
        let ids: Vec<String> = tree.iter().map(u32::to_string).collect();
        let mut kill = Command::new("kill");
        kill.arg("-9").args(&ids);
        // kill(1) returns at once; the bound is for a machine too loaded to
        // run it. A shim it missed is found again below.
        let _ = Bounded {
            command: kill,
            line: "kill -9 (pod shims)",
            timeout: Duration::from_secs(10),
            left: "some shims may still run",
            budget: &crate::Budget::unbounded(clock),
        }
        .run();
    }
    let start = clock.now();
    while !find(paths).is_empty() && clock.since(start) < timeout {
        thread::sleep(Duration::from_millis(50));
    }
    shims.len()
}

/// [`kill_all`], then a watch for `settle`: shims that survive the kill or
/// run again meanwhile (a kubelet restarting its pods) are returned as an
/// error, by pid. `Ok`: how many shims were killed, none seen since.
pub fn kill_and_settle(
    paths: &HostPaths,
    timeout: Duration,
    settle: Duration,
    clock: &clock::Clock,
) -> Result<usize, Vec<u32>> {
    let killed = kill_all(paths, timeout, clock);
    let start = clock.now();
    loop {
        let left = find(paths);
        if !left.is_empty() {
            return Err(left);
        }
        if clock.since(start) >= settle {
            return Ok(killed);
        }
        thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// A shim of `root`: `sleep` with the shim's path as its argv[0].
    fn shim(root: &Path) -> std::process::Child {
        let exe = root.join("var/lib/rancher/k3s/data/abc/bin/containerd-shim-runc-v2");
        Command::new("sleep").arg0(&exe).arg("600").spawn().unwrap()
    }

    #[test]
    fn shims_that_come_back_after_the_kill_are_named_and_none_that_stay_gone_are() {
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths::new(dir.path());
        // Killed and gone: settled.
        let mut first = shim(dir.path());
        while find(&paths).is_empty() {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            kill_and_settle(
                &paths,
                Duration::from_secs(10),
                Duration::from_millis(300),
                &clock::Clock::system()
            ),
            Ok(1)
        );
        let _ = first.wait();
        // A "kubelet" that starts the shim again once it is killed.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let kubelet = {
            let (root, stop) = (dir.path().to_path_buf(), stop.clone());
            thread::spawn(move || {
                let paths = HostPaths::new(&root);
                let mut children = vec![];
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    if find(&paths).is_empty() {
                        children.push(shim(&root));
                    }
                    thread::sleep(Duration::from_millis(50));
                    for c in &mut children {
                        let _ = c.try_wait();
                    }
                }
                for mut c in children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            })
        };
        while find(&paths).is_empty() {
            thread::sleep(Duration::from_millis(10));
        }
        let back = kill_and_settle(
            &paths,
            Duration::from_secs(10),
            Duration::from_secs(5),
            &clock::Clock::system(),
        );
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        kubelet.join().unwrap();
        assert!(matches!(&back, Err(pids) if !pids.is_empty()), "{back:?}");
    }

    #[test]
    fn only_a_shim_under_this_hosts_data_dir_counts() {
        let data = Path::new("/r/var/lib/rancher/k3s/data");
        assert!(is_shim(
            data,
            Path::new("/r/var/lib/rancher/k3s/data/abc/bin/containerd-shim-runc-v2")
        ));
        assert!(!is_shim(
            data,
            Path::new("/other/var/lib/rancher/k3s/data/abc/bin/containerd-shim-runc-v2")
        ));
        assert!(!is_shim(
            data,
            Path::new("/r/var/lib/rancher/k3s/data/abc/bin/containerd")
        ));
        assert!(!is_shim(
            data,
            Path::new("/r/var/lib/rancher/k3s/data/abc/x/bin/containerd-shim")
        ));
    }
}
