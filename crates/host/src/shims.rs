//! Stopping every pod's shim, as `k3s-killall.sh` does: a plain
//! `systemctl stop` (or restart) of k3s leaves pods running, since the units
//! use `KillMode=process`, and a host leaving the voters must run none.

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
        .filter(|pid| {
            let Ok(cmd) = fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let arg0 = cmd.split(|b| *b == 0).next().unwrap_or_default();
            is_shim(&data, Path::new(&*String::from_utf8_lossy(arg0)))
        })
        .collect()
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
/// shims there were. Waits up to `timeout` for them to be gone.
pub fn kill_all(paths: &HostPaths, timeout: Duration) -> usize {
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
            budget: &crate::Budget::unbounded(),
        }
        .run();
    }
    let start = std::time::Instant::now();
    while !find(paths).is_empty() && start.elapsed() < timeout {
        thread::sleep(Duration::from_millis(50));
    }
    shims.len()
}

#[cfg(test)]
mod tests {
    use super::*;

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
