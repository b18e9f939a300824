//! Where the `k3s` command (`etcd-snapshot save`, `prune`, `--version`)
//! runs: on a native host, the binary found on the search path; on a
//! Docker host, which has no k3s of its own, a one-off container of the
//! server container's image, with its entry point, binds, network and
//! privilege, so the command sees the same files, the same loopback etcd
//! and the same k3s release the server runs.

use std::{ffi::OsString, process::Output, time::Duration};

use crate::{
    Budget, HostPaths,
    docker::DockerUnits,
    error::{Error, Result},
    process::Bounded,
    systemd::command,
};

/// How the host runs `k3s`.
#[derive(Debug, Clone, Copy)]
pub enum K3sCli<'a> {
    /// The `k3s` on the search path (`None`: this process's `PATH`).
    Native(Option<&'a OsString>),
    /// A one-off container beside the server's.
    Docker(&'a DockerUnits),
}

impl K3sCli<'_> {
    /// Runs `k3s ARGS` within `timeout`; `left` says what a kill past it
    /// leaves. A non-zero exit is an `Ok` output: the caller reads it.
    pub fn run(
        &self,
        paths: &HostPaths,
        args: &[&str],
        timeout: Duration,
        left: &str,
        budget: &Budget,
    ) -> Result<Output> {
        let line = format!("k3s {}", args.join(" "));
        match self {
            K3sCli::Native(search_path) => {
                let mut c = command("k3s", *search_path);
                c.args(args);
                // The stand-in keeps its state per host under
                // FLEET_ROLE_ROOT; k3s has no use for it (docs/testing.md,
                // `test-hooks`).
                #[cfg(feature = "test-hooks")]
                c.env("FLEET_ROLE_ROOT", paths.root());
                #[cfg(not(feature = "test-hooks"))]
                let _ = paths;
                Bounded {
                    command: c,
                    line: &line,
                    timeout,
                    left,
                    budget,
                }
                .run()
            }
            K3sCli::Docker(d) => {
                let _ = paths;
                budget.check(&format!("about to run {line}"))?;
                d.run_k3s(args, timeout).map_err(|detail| Error::Command {
                    command: line,
                    detail,
                })
            }
        }
    }
}
