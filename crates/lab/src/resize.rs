//! `fleet-role grow` and `fleet-role shrink` run against a lab while a
//! writer puts to etcd: the voter count changed in place, with the writes
//! it cost counted.

use std::{path::Path, time::Duration};

use anyhow::Context;

use crate::{
    lab_setup,
    scenario::{Writer, WriterStats},
    spawn,
    spec::LabSpec,
};

/// How long one `fleet-role grow` or `shrink` may take before it is killed:
/// each host's change has its own timeouts (a promotion's is 5 minutes),
/// and a lab beside others is slow.
pub const RESIZE_BOUND: Duration = Duration::from_secs(900);

/// What one `fleet-role` command did, and what the writer saw meanwhile.
#[derive(Debug)]
pub struct Resized {
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Its standard output.
    pub output: String,
    /// Its standard error (the log).
    pub log: String,
    /// How long it took.
    pub took: Duration,
    /// The writer's figures over that time.
    pub writes: WriterStats,
}

/// Runs `fleet-role ARGS` with the lab's kubeconfig through `through` (a
/// server that keeps its vote throughout), while a writer puts a key every
/// 50 ms through the same server's etcd member; each output line is passed
/// to `say`. Bounded by [`RESIZE_BOUND`]: past it the command is killed,
/// and the error says so.
pub async fn fleet_role_with_writer(
    spec: &LabSpec,
    fleet_role: &Path,
    through: &str,
    args: &[&str],
    say: &dyn Fn(&str),
) -> anyhow::Result<Resized> {
    let clock = clock::Clock::system();
    let host = spec
        .host(through)
        .with_context(|| format!("no host {through} in this lab"))?;
    let writer = Writer::start(spec.etcd(host.ip)?, Duration::from_millis(50));
    let kubeconfig = lab_setup::kubeconfig_for(spec, through)?;
    let t0 = clock.now();
    let spawn::Running {
        mut child,
        mut lines,
        log,
    } = spawn::fleet_role(fleet_role, &kubeconfig, args)?;
    let mut output = String::new();
    let run = async {
        while let Some(line) = lines.next_line().await? {
            say(&format!("   fleet-role: {line}"));
            output.push_str(&line);
            output.push('\n');
        }
        anyhow::Ok(child.wait().await?)
    };
    let status = match tokio::time::timeout(RESIZE_BOUND, run).await {
        Ok(r) => r?,
        Err(_) => {
            let _ = writer.finish().await;
            anyhow::bail!(
                "fleet-role {} did not end within {} s; it is killed, and the lab is left as it was then",
                args.join(" "),
                RESIZE_BOUND.as_secs()
            );
        }
    };
    let took = clock.since(t0);
    let writes = writer.finish().await;
    Ok(Resized {
        code: status.code(),
        output,
        log: log.await.unwrap_or_default(),
        took,
        writes,
    })
}
