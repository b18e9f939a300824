//! The local commands: what the installer and systemd call on the host.

use std::time::Duration;

use anyhow::Context;
use host::{Change, Host};
use protocol::{JoinUrl, Role, SwapId};
use serde::Serialize;

use crate::output::{Format, print};

/// `is ROLE [--no-tombstone]`: whether the role file names `role` (and, with
/// `no_tombstone`, the datastore holds no tombstone). Any doubt (a missing or
/// unreadable role file) is "no", so the unit's `ExecCondition` skips it.
pub fn is(host: &Host, role: Role, no_tombstone: bool) -> bool {
    let named = matches!(host.role(), Ok(Some(r)) if r == role);
    named && !(no_tombstone && host.has_tombstone())
}

#[derive(Serialize)]
struct SwitchOutput<'a> {
    ok: bool,
    command: &'a str,
    check: bool,
    changes: Vec<String>,
}

/// Which local switch to make.
#[derive(Debug, Clone)]
pub enum Switch {
    /// `promote-local --join URL`.
    Promote(JoinUrl),
    /// `demote-local [--force]`.
    Demote {
        /// Go on though the member may still vote.
        force: bool,
    },
}

/// The refusal of a `demote-local` whose member may still vote: demoting a
/// voter by hand takes a vote from etcd without the controller's quorum
/// gates, and done to two voters of three it loses quorum.
fn refuse_voting_member(host: &Host) -> anyhow::Result<()> {
    if host.member_may_vote() {
        anyhow::bail!(
            "demote-local refused, nothing changed: this host's etcd member may still vote \
             ({} exists and holds no tombstone, which k3s writes once the member is removed); \
             let the controller swap it out, or check etcd's member list (docs/recovery.md) \
             and run demote-local --force once the member is gone",
            host.paths.etcd_dir().display()
        );
    }
    Ok(())
}

/// Runs `promote-local` or `demote-local`: plans, then (without `check`)
/// applies under the host lock. With `check` nothing at all is changed, not
/// even the lock file.
pub fn switch(
    host: &Host,
    which: &Switch,
    check: bool,
    lock_timeout: Duration,
    format: Format,
) -> anyhow::Result<()> {
    let command = match which {
        Switch::Promote(_) => "promote-local",
        Switch::Demote { .. } => "demote-local",
    };
    let plan_of = |host: &Host| match which {
        Switch::Promote(join) => host.plan_promote(join),
        Switch::Demote { .. } => host.plan_demote(),
    };
    // A damaged role file is refused before anything, even the lock file,
    // is touched: the host may be a server or an agent.
    host.role()?;
    if let Switch::Demote { force: false } = which {
        refuse_voting_member(host)?;
    }
    let lines = |plan: &[Change], verb: &str| -> Vec<String> {
        if plan.is_empty() {
            vec![format!("{command}: nothing to change")]
        } else {
            plan.iter()
                .map(|c| format!("{verb}: {}", host.show(c)))
                .collect()
        }
    };
    if check {
        let plan = plan_of(host)?;
        let changes: Vec<String> = plan.iter().map(|c| host.show(c).to_string()).collect();
        print(
            format,
            &lines(&plan, "would"),
            &SwitchOutput {
                ok: true,
                command,
                check,
                changes,
            },
        );
        return Ok(());
    }
    let _lock = host.lock(lock_timeout)?;
    // Check and plan again under the lock: another switch may just have
    // changed the host.
    if let Switch::Demote { force: false } = which {
        refuse_voting_member(host)?;
    }
    let plan = plan_of(host)?;
    host.apply(&plan)
        .with_context(|| format!("{command} stopped part-way"))?;
    let changes: Vec<String> = plan.iter().map(|c| host.show(c).to_string()).collect();
    print(
        format,
        &lines(&plan, "did"),
        &SwitchOutput {
            ok: true,
            command,
            check,
            changes,
        },
    );
    Ok(())
}

/// `snapshot --name NAME`: an on-demand etcd snapshot, under the host lock.
pub fn snapshot(
    host: &Host,
    name: &SwapId,
    lock_timeout: Duration,
    format: Format,
) -> anyhow::Result<()> {
    let _lock = host.lock(lock_timeout)?;
    let file = host.snapshot(name)?;
    print(
        format,
        &[format!("snapshot: {file}")],
        &serde_json::json!({ "ok": true, "snapshot": file }),
    );
    Ok(())
}

/// The host's local state, for `status`.
#[derive(Debug, Serialize)]
pub struct LocalStatus {
    /// The Node name.
    pub node: String,
    /// The role file (`null` when missing or invalid).
    pub role: Option<Role>,
    /// `k3s`'s state as systemd reports it (`active (running)`,
    /// `activating (auto-restart)`, …; `unknown: …` when systemctl failed).
    pub server: String,
    /// `k3s-agent`'s state, likewise.
    pub agent: String,
    /// Whether the host holds a datastore.
    pub datastore: bool,
    /// Whether the datastore holds a tombstone.
    pub tombstone: bool,
    /// Whether a demoted copy is kept.
    pub demoted_copy: bool,
}

fn unit_state(sc: &host::systemd::Systemctl, unit: &str) -> String {
    sc.state(unit)
        .map_or_else(|e| format!("unknown: {e}"), |s| s.to_string())
}

/// Reads the host's local state.
pub fn local_status(host: &Host) -> LocalStatus {
    let sc = host.systemctl();
    LocalStatus {
        node: host.node.clone(),
        role: host.role().ok().flatten(),
        server: unit_state(sc, "k3s"),
        agent: unit_state(sc, "k3s-agent"),
        datastore: host.has_datastore(),
        tombstone: host.has_tombstone(),
        demoted_copy: host.paths.db_demoted().exists(),
    }
}

impl LocalStatus {
    /// Lines for a person.
    pub fn lines(&self) -> Vec<String> {
        let yes = |b: bool| if b { "yes" } else { "no" };
        vec![
            format!("node:         {}", self.node),
            format!(
                "role file:    {}",
                self.role.map_or("missing", |r| r.as_str())
            ),
            format!("k3s:          {}", self.server),
            format!("k3s-agent:    {}", self.agent),
            format!(
                "datastore:    {}{}",
                yes(self.datastore),
                if self.tombstone {
                    " (tombstone: member removed)"
                } else {
                    ""
                }
            ),
            format!("db.demoted:   {}", yes(self.demoted_copy)),
        ]
    }
}
