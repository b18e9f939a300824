//! The local commands: what the installer and systemd call on the host.

use std::time::Duration;

use anyhow::Context;
use host::{Change, Host};
use protocol::{
    JoinUrl, Role, SwapId,
    exit::{Exit, Marked},
    text::one_line,
};
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
            "nothing changed: this host's etcd member may still vote \
             ({} exists and holds no tombstone, which k3s writes once the member is removed); \
             let the controller swap it out, or check etcd's member list (docs/recovery.md) \
             and run demote-local --force once the member is gone",
            host.paths.etcd_dir().display()
        );
    }
    Ok(())
}

/// The refusal of a `promote-local` over a datastore whose member may
/// still vote while the role file does not name the server (an etcd-only
/// voter that already names the agent, a role file lost): the promotion
/// would stop the server and move the datastore aside, taking a vote from
/// etcd with no quorum check. `promote-local` reads no etcd, so only a
/// tombstone proves the member gone from here.
fn refuse_promotion_over_voting_member(host: &Host) -> anyhow::Result<()> {
    if host.role()? != Some(Role::Server) && host.member_may_vote() {
        anyhow::bail!(
            "nothing changed: {} holds an etcd member that may still vote (no tombstone) and \
             the role file does not name the server; a promotion would move it aside. \
             Check etcd's member list (docs/recovery.md); once the member is gone, \
             `demote-local --force` moves the datastore aside and the promotion can go on",
            host.paths.etcd_dir().display()
        );
    }
    Ok(())
}

/// The refusal of a demotion whose agent could not start
/// ([`host::eligibility`]): judged on what the host holds, as `demote-local`
/// reads no API (the watcher, which does, also checks that the agent's
/// `server:` is a live server other than this host).
pub fn refuse_ineligible(host: &Host, node: &str) -> anyhow::Result<()> {
    let reasons = host::eligibility::assess(
        &host::eligibility::read(&host.paths),
        node,
        None,
        host::eligibility::Judged::All,
    );
    if !reasons.is_empty() {
        anyhow::bail!(
            "nothing changed: this host is not eligible for demotion, its agent could not start: {}",
            reasons.join("; ")
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
    host.role()
        .map_err(|e| anyhow::Error::new(e).context(Marked(Exit::Refused)))?;
    if let Switch::Demote { force: false } = which {
        refuse_voting_member(host).map_err(|e| e.context(Marked(Exit::Refused)))?;
    }
    if let Switch::Promote(_) = which {
        refuse_promotion_over_voting_member(host).map_err(|e| e.context(Marked(Exit::Refused)))?;
    }
    if let Switch::Demote { .. } = which {
        refuse_ineligible(host, &host.node).map_err(|e| e.context(Marked(Exit::Refused)))?;
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
        refuse_voting_member(host).map_err(|e| e.context(Marked(Exit::Refused)))?;
    }
    if let Switch::Promote(_) = which {
        refuse_promotion_over_voting_member(host).map_err(|e| e.context(Marked(Exit::Refused)))?;
    }
    let plan = plan_of(host)?;
    host.apply(&plan)
        .with_context(|| format!("{command} stopped part-way"))
        .context(Marked(Exit::NeedsHuman))?;
    // The report kept on the host says what the host now is (its watcher
    // sends it, as the newer copy, at its next decision).
    let role = match which {
        Switch::Promote(_) => Role::Server,
        Switch::Demote { .. } => Role::Agent,
    };
    if let Err(e) = crate::report::after_hand_switch(&host.paths, role, host.clock().unix_secs()) {
        eprintln!(
            "{command}: the switch is done, but the report kept on the host still says the \
             host's last step ({e}); `fleet-role status` may misread the host until its next step"
        );
    }
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

/// The role file as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum RoleFile {
    /// It names a role.
    Names {
        /// The role.
        role: Role,
    },
    /// There is none.
    Missing,
    /// It holds no valid role.
    Invalid {
        /// Its first bytes, escaped (`\n`, `\xNN`): safe on one line.
        bytes: String,
    },
    /// It could not be read.
    Unreadable {
        /// Why.
        error: String,
    },
}

impl RoleFile {
    /// Reads the role file as the host does ([`Host::role`]), keeping the
    /// bytes of an invalid one to show.
    pub fn read(host: &Host) -> RoleFile {
        match host.role() {
            Ok(Some(role)) => RoleFile::Names { role },
            Ok(None) => RoleFile::Missing,
            // Refused by the host, yet its bytes can be read (no valid
            // role, or not text at all): invalid, shown as it is.
            Err(e) => match std::fs::read(host.paths.role_file()) {
                Ok(bytes) => RoleFile::Invalid {
                    bytes: escaped(&bytes),
                },
                Err(_) => RoleFile::Unreadable {
                    error: one_line(&e.to_string()),
                },
            },
        }
    }

    /// The role it names, if it names one.
    pub fn role(&self) -> Option<Role> {
        match self {
            RoleFile::Names { role } => Some(*role),
            _ => None,
        }
    }
}

/// Bytes escaped for one line, at most 64 of them: their text by the one
/// rule ([`protocol::text::one_line`]), and each byte that is not UTF-8 as
/// `\xNN`. A role file may hold anything (half a write, a binary), and a
/// byte no text rule can show is still worth seeing as it is, rather than
/// as a replacement character.
fn escaped(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes[..bytes.len().min(64)].utf8_chunks() {
        out.push_str(&one_line(chunk.valid()));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    if bytes.len() > 64 {
        out.push('…');
    }
    format!("\"{out}\"")
}

/// The units fleet-role's drop-ins gate (the regrade watcher's only where
/// the host runs one).
pub const GATED_UNITS: [&str; 3] = ["k3s", "k3s-agent", "fleet-regrade"];

/// Where systemd looks for a unit's drop-ins, in its order of precedence.
const UNIT_DIRS: [&str; 4] = [
    "etc/systemd/system",
    "run/systemd/system",
    "usr/lib/systemd/system",
    "lib/systemd/system",
];

/// One of fleet-role's drop-ins, and where it was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DropIn {
    /// The unit it gates.
    pub unit: &'static str,
    /// The file found (`None`: in none of systemd's unit directories).
    pub path: Option<String>,
}

fn drop_ins(host: &Host) -> Vec<DropIn> {
    GATED_UNITS
        .iter()
        .map(|unit| DropIn {
            unit,
            path: UNIT_DIRS.iter().find_map(|dir| {
                let rel = format!("{dir}/{unit}.service.d/50-fleet-role.conf");
                host.paths.at(&rel).is_file().then(|| format!("/{rel}"))
            }),
        })
        .collect()
}

/// The host's local state, for `status`.
#[derive(Debug, Serialize)]
pub struct LocalStatus {
    /// The Node name.
    pub node: String,
    /// The role the role file names (`null` when missing or invalid).
    pub role: Option<Role>,
    /// The role file as read.
    pub role_file: RoleFile,
    /// fleet-role's drop-ins.
    pub drop_ins: Vec<DropIn>,
    /// `k3s`'s state as systemd reports it (`active (running)`,
    /// `activating (auto-restart)`, …; `unknown: systemd could not be
    /// asked: …` when systemctl failed).
    pub server: String,
    /// `k3s-agent`'s state, likewise.
    pub agent: String,
    /// Whether the host holds a datastore.
    pub datastore: bool,
    /// Whether the datastore holds a tombstone.
    pub tombstone: bool,
    /// Whether a demoted copy is kept.
    pub demoted_copy: bool,
    /// The protocol version this actuator writes its report in.
    pub protocol: u32,
    /// What is degraded, one line each (empty: nothing).
    pub degraded: Vec<String>,
}

type Unit = Result<host::systemd::UnitState, String>;

fn unit_state(sc: &host::units::Units, unit: &str) -> Unit {
    sc.state(unit).map_err(|e| one_line(&e.to_string()))
}

/// A unit's state for a person; `asked` is what runs the units (systemd,
/// or Docker).
fn shown_state(u: &Unit, asked: &str) -> String {
    u.as_ref().map_or_else(
        |e| format!("unknown: {asked} could not be asked: {e}"),
        |s| s.to_string(),
    )
}

/// What is degraded on the host: the role file missing, invalid or
/// unreadable; a drop-in of the two k3s units missing; systemd not
/// answering; the unit the role file names not active, or the other one
/// running as well; a tombstone under a role file that names the server.
pub fn degraded(
    role_file: &RoleFile,
    drop_ins: &[DropIn],
    server: &Unit,
    agent: &Unit,
    tombstone: bool,
) -> Vec<String> {
    use host::systemd::ActiveState;
    let mut out = Vec::new();
    match role_file {
        RoleFile::Names { .. } => {}
        RoleFile::Missing => out.push(
            "the role file is missing: neither k3s unit may start (see docs/recovery.md)".into(),
        ),
        RoleFile::Invalid { bytes } => out.push(format!(
            "the role file is invalid (it holds {bytes}; it must say server or agent)"
        )),
        RoleFile::Unreadable { error } => out.push(format!("the role file is unreadable: {error}")),
    }
    for d in drop_ins
        .iter()
        .filter(|d| d.path.is_none() && d.unit != "fleet-regrade")
    {
        out.push(format!(
            "{}.service has no fleet-role drop-in: it may start whatever the role file says",
            d.unit
        ));
    }
    for (unit, u) in [("k3s", server), ("k3s-agent", agent)] {
        if let Err(e) = u {
            out.push(format!("systemd could not be asked about {unit}: {e}"));
        }
    }
    if let Some(role) = role_file.role() {
        let (named, other) = match role {
            Role::Server => (server, agent),
            Role::Agent => (agent, server),
        };
        if let Ok(s) = named
            && !matches!(s.active, ActiveState::Active | ActiveState::Reloading)
        {
            out.push(format!(
                "{} is {s}, and the role file names it",
                role.unit()
            ));
        }
        if let Ok(s) = other
            && !s.is_stopped()
        {
            out.push(format!(
                "{} is {s}, and the role file names {}",
                role.other().unit(),
                role.unit()
            ));
        }
        if role == Role::Server && tombstone {
            out.push(
                "the datastore holds a tombstone (the member was removed) and the role file names the server"
                    .into(),
            );
        }
    }
    out
}

/// Reads the host's local state.
pub fn local_status(host: &Host) -> LocalStatus {
    let sc = host.units();
    let role_file = RoleFile::read(host);
    let drop_ins = drop_ins(host);
    let asked = match sc {
        host::units::Units::Systemd(_) => "systemd",
        host::units::Units::Docker(_) => "Docker",
    };
    let server = unit_state(sc, "k3s");
    let agent = unit_state(sc, "k3s-agent");
    let tombstone = host.has_tombstone();
    let mut degraded = degraded(&role_file, &drop_ins, &server, &agent, tombstone);
    // A kept report that cannot be used is what makes `watch` refuse to start.
    if let Err(e) = crate::report::read_local(&host.paths) {
        degraded.push(format!(
            "`watch` refuses to start: {}",
            one_line(&e.to_string())
        ));
    }
    LocalStatus {
        node: host.node.clone(),
        role: role_file.role(),
        degraded,
        role_file,
        drop_ins,
        server: shown_state(&server, asked),
        agent: shown_state(&agent, asked),
        datastore: host.has_datastore(),
        tombstone,
        demoted_copy: host.paths.db_demoted().exists(),
        protocol: protocol::PROTOCOL_VERSION,
    }
}

impl LocalStatus {
    /// Lines for a person.
    pub fn lines(&self) -> Vec<String> {
        let yes = |b: bool| if b { "yes" } else { "no" };
        let role_file = match &self.role_file {
            RoleFile::Names { role } => role.as_str().to_string(),
            RoleFile::Missing => "missing".into(),
            RoleFile::Invalid { bytes } => format!("INVALID: {bytes}"),
            RoleFile::Unreadable { error } => format!("UNREADABLE: {error}"),
        };
        let mut lines = vec![
            format!("node:         {}", self.node),
            format!("role file:    {role_file}"),
        ];
        for d in &self.drop_ins {
            lines.push(format!(
                "drop-in:      {:<14}{}",
                d.unit,
                d.path.as_deref().unwrap_or("missing")
            ));
        }
        lines.extend([
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
            format!("protocol:     {}", self.protocol),
        ]);
        if self.degraded.is_empty() {
            lines.push("health:       nothing degraded".into());
        }
        lines.extend(self.degraded.iter().map(|d| format!("DEGRADED:     {d}")));
        lines
    }
}
