//! A lab host that runs the previous release's actuator: the one that
//! writes its report under its key of the shared ConfigMap, with the
//! identity that release's `enroll` made. A fleet mid-upgrade has such
//! hosts beside ones on this release; the controller reads both.
//!
//! The binary (built by `scripts/build-previous-actuator.sh` from the
//! repository's history) is copied into the host's `/usr/local/bin`, and a
//! drop-in points the real actuator unit at it, as an operator would hold
//! one host back; the unit itself, its sandbox and its settings stay as
//! this release ships them (the previous release reads the same settings).

use std::{path::Path, time::Duration};

use anyhow::Context;
use secrecy::ExposeSecret;

use crate::{api::Apis, lab_setup, systemd_lab::SystemdLab};

/// Where the previous release's binary goes inside a host.
pub const BINARY: &str = "usr/local/bin/fleet-role-actuator-previous";
/// The drop-in that makes the actuator unit run it.
pub const DROP_IN: &str =
    "etc/systemd/system/fleet-role-actuator.service.d/90-previous-release.conf";

/// How long `systemctl` may take inside the host.
const SYSTEMCTL: Duration = Duration::from_secs(60);

/// Makes `host` run the previous release's actuator `binary` with that
/// release's identity, and waits until its unit is active again.
pub async fn run_previous_actuator(
    lab: &SystemdLab,
    host: &str,
    binary: &Path,
) -> anyhow::Result<()> {
    let root = lab.spec.root(host);
    let apis = Apis::for_lab(&lab.spec)?;
    let token = lab_setup::previous_release_token(&apis, host).await?;
    let inside = root.join(BINARY);
    std::fs::copy(binary, &inside)
        .with_context(|| format!("copying {} into {host}", binary.display()))?;
    std::fs::set_permissions(&inside, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    lab_setup::write(
        &root.join(DROP_IN),
        &format!("[Service]\nExecStart=\nExecStart=/{BINARY} watch\n"),
        0o644,
    )?;
    // The token file is replaced whole (the actuator re-reads it); this
    // release's is kept for the upgrade back.
    let token_file = lab.token_file(host);
    std::fs::copy(&token_file, token_file.with_extension("current"))
        .with_context(|| format!("keeping {}", token_file.display()))?;
    let tmp = token_file.with_extension("previous");
    lab_setup::write(&tmp, token.expose_secret(), 0o600)?;
    std::fs::rename(&tmp, &token_file)?;
    restart_actuator(lab, host).await
}

/// Upgrades `host` back to this release's actuator, where the package
/// upgrade and the new enrolment of docs/upgrade.md leave it: the drop-in
/// gone (the unit runs the binary this release installs), the host's own
/// token back, the unit restarted; waits until it is active again.
pub async fn upgrade_actuator(lab: &SystemdLab, host: &str) -> anyhow::Result<()> {
    let root = lab.spec.root(host);
    std::fs::remove_file(root.join(DROP_IN))
        .with_context(|| format!("{host} runs no previous release"))?;
    let token_file = lab.token_file(host);
    std::fs::rename(token_file.with_extension("current"), &token_file)
        .with_context(|| format!("putting {}'s own token back", host))?;
    restart_actuator(lab, host).await
}

/// Reloads the host's units and restarts its actuator, then waits until
/// the unit is active again.
async fn restart_actuator(lab: &SystemdLab, host: &str) -> anyhow::Result<()> {
    let m = lab.machine(host)?;
    tokio::task::block_in_place(|| {
        m.exec_ok(&["systemctl", "daemon-reload"], SYSTEMCTL)?;
        m.exec_ok(&["systemctl", "restart", "fleet-role-actuator"], SYSTEMCTL)
    })?;
    lab.wait_active(host, "fleet-role-actuator", SYSTEMCTL)
        .await
}
