//! `hand-over --before sleep|shutdown`: etcd's leadership moved off this
//! host's member, if it leads, before the host sleeps or k3s stops.

use std::process::ExitCode;

use actuator::{cli::Cli, leadership, output::print};
use clock::Clock;
use protocol::Role;

use super::settings;

/// Runs `hand-over`. A suspend is no graceful stop: a leader that sleeps
/// leaves the cluster with no leader, and writes stalled, until the
/// others' election timeout. Nothing to do on a host that is no voter. A
/// failure is said and the host goes on (the units that run this never
/// hold the sleep or the shutdown back past their own bound).
pub(crate) fn hand_over(
    cli: &Cli,
    before: &str,
    rt: &tokio::runtime::Runtime,
    clock: &Clock,
) -> anyhow::Result<ExitCode> {
    let s = settings(cli, None, None)?;
    let host = s.host(clock, rt.handle());
    let voter = host.role()? == Some(Role::Server) && host.member_may_vote();
    let (line, moved) = if voter {
        match rt.block_on(leadership::hand_over(&s.etcd, clock))
            .map_err(|why| anyhow::anyhow!("before {before}: {why}; the host goes on, and etcd elects a new leader after its election timeout"))?
        {
            leadership::HandOver::NotLeader => {
                (format!("before {before}: this member does not lead etcd; nothing to hand over"), None)
            }
            leadership::HandOver::Moved { to, took } => (
                format!(
                    "before {before}: etcd leadership moved to {to} in {} ms",
                    took.as_millis()
                ),
                Some(to.to_string()),
            ),
        }
    } else {
        (
            format!("before {before}: this host holds no etcd voter; nothing to hand over"),
            None,
        )
    };
    print(
        cli.output,
        &[line],
        &serde_json::json!({ "ok": true, "before": before, "movedTo": moved }),
    );
    Ok(ExitCode::SUCCESS)
}
