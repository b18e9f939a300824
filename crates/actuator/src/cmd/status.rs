//! `status`: the host as read here, with an API its report, and the
//! credential's lapse; exit 5 when something is degraded.

use std::process::ExitCode;

use actuator::{
    cli::{ApiArgs, Cli},
    cluster::{self, Candidates},
    config::Settings,
    local,
    output::print,
    report,
};
use anyhow::Context;
use clock::Clock;
use protocol::{exit::Exit, text::one_line};

use super::{settings, usage};

/// Runs `status`.
pub(crate) fn status(
    cli: &Cli,
    api: &ApiArgs,
    rt: &tokio::runtime::Runtime,
    clock: &Clock,
) -> anyhow::Result<ExitCode> {
    let format = cli.output;
    let s = settings(cli, Some(api), None)?;
    let local = local::local_status(&s.host(clock, rt.handle()));
    let mut lines = local.lines();
    let mut remote = serde_json::Value::Null;
    if !s.api.is_empty() {
        let r = api_report(&s, rt)?;
        // The report came from the API: whatever it holds is shown
        // escaped on one line, so a reason carrying a newline or a
        // terminal escape can neither forge a line nor drive the
        // terminal.
        lines.push(format!("report:       {}", report_line(r.as_ref())));
        remote = kubeview::time::with_times(serde_json::to_value(&r)?, &["startedAt", "updatedAt"]);
    }
    // The copy kept on the host, shown whatever it holds: a copy that
    // does not parse is what makes `watch` refuse to start.
    let (kept, kept_error) = match report::read_local(&s.host(clock, rt.handle()).paths) {
        Ok(r) => {
            lines.push(format!("kept report:  {}", report_line(r.as_ref())));
            (serde_json::to_value(&r)?, None)
        }
        Err(e) => {
            // (`local` counts it as degraded.)
            lines.push(format!("kept report:  {}", one_line(&e.to_string())));
            (serde_json::Value::Null, Some(e.to_string()))
        }
    };
    let k3s = s.host(clock, rt.handle()).k3s_version();
    lines.push(match &k3s {
        Ok(v) => format!(
            "k3s release:  {}{}",
            v.text,
            v.warning()
                .map(|w| format!("; WARNING: {w}"))
                .unwrap_or_default()
        ),
        Err(e) => format!("k3s release:  unknown ({})", one_line(&e.to_string())),
    });
    let k3s = match k3s {
        Ok(v) => serde_json::json!({"version": v.text, "supported": v.supported()}),
        Err(e) => serde_json::json!({"error": e.to_string()}),
    };
    let expiry = s.token_file.as_deref().and_then(cluster::token_expiry);
    if let Some(exp) = expiry {
        let at = kubeview::time::rfc3339(Some(exp));
        lines.push(format!(
            "credential:   lapses at {}{}",
            at.as_str().map_or_else(|| exp.to_string(), String::from),
            cluster::expiry_warning(exp, clock.unix_secs())
                .map(|w| format!("; WARNING: {w}"))
                .unwrap_or_default()
        ));
    }
    let exit = if local.degraded.is_empty() {
        Exit::Done
    } else {
        Exit::Degraded
    };
    print(
        format,
        &lines,
        &serde_json::json!({
            "ok": exit == Exit::Done,
            "exit": exit.code(),
            "host": local,
            "report": remote,
            "report_kept": kept,
            "report_kept_error": kept_error,
            "credential_expires": kubeview::time::rfc3339(expiry),
            "k3s": k3s,
        }),
    );
    Ok(ExitCode::from(exit.code()))
}

/// The host's report as the API holds it, read through each candidate in
/// turn, as the watcher moves on: an etcd-only server's 503 as much as a
/// refused connection.
fn api_report(
    s: &Settings,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<Option<protocol::Report>> {
    let candidates =
        Candidates::new(s.api.clone(), s.ca_file.clone(), s.token_file.clone()).map_err(usage)?;
    let r = rt
        .block_on(candidates.first_answer(
            |client| {
                let (names, node) = (&s.names, s.node.as_str());
                async move {
                    report::Published::default()
                        .read(&client, names, node)
                        .await
                }
            },
            |e| matches!(e, report::LoadError::Api(k) if cluster::moves_on(k)),
        ))
        .context("reading the report")?;
    Ok(r)
}

/// A report on one line, escaped (it may have come from the API, where a
/// reason carrying a newline or a terminal escape could forge a line or
/// drive the terminal), with its `seq`.
fn report_line(r: Option<&protocol::Report>) -> String {
    r.map_or("none".into(), |r| {
        one_line(&format!(
            "swap {} step {} {:?}{} (seq {})",
            r.swap.as_ref().map_or("-", |s| s.as_str()),
            r.step.as_str(),
            r.phase,
            r.reason
                .as_deref()
                .map(|x| format!(": {x}"))
                .unwrap_or_default(),
            r.seq
        ))
    })
}
