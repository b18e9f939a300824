//! `is ROLE`: systemd's `ExecCondition=`.

use std::process::ExitCode;

use actuator::{
    cli::Cli,
    config, local,
    output::{Format, print},
};
use clock::Clock;
use protocol::Role;

/// Runs `is ROLE`. Any doubt, including a bad setting, is "no" (exit 1),
/// so systemd skips the unit rather than failing it.
pub(crate) fn is(cli: &Cli, role: &str, no_tombstone: bool, clock: &Clock) -> ExitCode {
    let Ok(role) = Role::parse(role) else {
        return ExitCode::from(1);
    };
    let yes = local::is(&config::condition_host(cli, clock), role, no_tombstone);
    if cli.output == Format::Json {
        print(
            cli.output,
            &[],
            &serde_json::json!({ "ok": true, "role": role, "matches": yes }),
        );
    }
    ExitCode::from(if yes { 0 } else { 1 })
}
