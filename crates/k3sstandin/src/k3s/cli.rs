//! `k3s ARGS` on a lab host: `server` (with `--cluster-reset`), `agent`,
//! `etcd-snapshot save`, `prune` and `ls`, and `--version`, as k3s's CLI answers them
//! (`pkg/cli/cmds/`), over the lab's real etcd members.

use std::process::ExitCode;

use super::{Ctx, VERSION, agent, server, snapshot_ls, snapshot_prune, snapshot_save};

/// Answers `k3s ARGS` on a lab host (`FLEET_ROLE_ROOT` and `FLEET_ROLE_LAB`
/// set by the host's `/usr/local/bin/k3s`).
///
/// # Errors
/// What k3s would fail with: a bad config, an unreachable member, or
/// arguments the stand-in does not answer.
pub async fn run(args: Vec<String>) -> anyhow::Result<ExitCode> {
    if args.as_slice() == ["--version"] {
        // The release whose source the stand-in follows (docs/lab.md).
        println!("k3s version {VERSION} (fleet-role-lab stand-in)\ngo version go1.24.11");
        return Ok(ExitCode::SUCCESS);
    }
    let ctx = Ctx::load(args.get(1..).unwrap_or_default())?;
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["server", ..] => server::run(ctx).await?,
        ["agent", ..] => agent::run(ctx).await?,
        [
            "etcd-snapshot",
            "prune",
            "--name",
            prefix,
            "--snapshot-retention",
            keep,
        ] => {
            for file in snapshot_prune(&ctx, prefix, keep.parse()?).await? {
                eprintln!("Removing local snapshot {}", file.display());
            }
        }
        ["etcd-snapshot", "ls" | "list"] => {
            for line in snapshot_ls(&ctx).await? {
                println!("{line}");
            }
        }
        ["etcd-snapshot", "save", "--name", name] => {
            let file = snapshot_save(&ctx, name).await?;
            eprintln!(
                "Snapshot {} saved.",
                file.file_name()
                    .map(|f| f.to_string_lossy())
                    .unwrap_or_default()
            );
        }
        _ => anyhow::bail!("k3s (lab stand-in): unsupported arguments"),
    }
    Ok(ExitCode::SUCCESS)
}
