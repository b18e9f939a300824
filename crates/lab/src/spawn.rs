//! `fleet-role` run against a lab with both of its pipes read as they
//! come: a pipe nobody reads fills (64 KiB of warnings on a bad day) and
//! would block the controller on a write.

use std::path::Path;

use anyhow::Context;
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, BufReader, Lines},
    process::{Child, ChildStdout},
    task::JoinHandle,
};

/// A running `fleet-role`: the process, its output line by line, and its
/// log (standard error) gathered until it exits.
pub struct Running {
    /// The process (killed when dropped).
    pub child: Child,
    /// Its standard output, line by line.
    pub lines: Lines<BufReader<ChildStdout>>,
    /// Its standard error, whole once it exits.
    pub log: JoinHandle<String>,
}

/// Starts `fleet_role --kubeconfig KUBECONFIG ARGS`.
pub fn fleet_role(fleet_role: &Path, kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Running> {
    let mut child = tokio::process::Command::new(fleet_role)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("running {}", fleet_role.display()))?;
    let log = tokio::spawn({
        let mut e = child.stderr.take().expect("piped");
        async move {
            let mut err = String::new();
            let _ = e.read_to_string(&mut err).await;
            err
        }
    });
    let lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    Ok(Running { child, lines, log })
}
