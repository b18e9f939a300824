//! The command line: an interface of the installer and of systemd, kept
//! exactly as documented in `docs/actuator.md` (exit codes included).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::output::Format;

/// fleet-role-actuator: the host-side half of a k3s voter swap.
#[derive(Debug, Parser)]
#[command(
    name = "fleet-role-actuator",
    version,
    after_help = protocol::exit::EXIT_CODES_HELP
)]
pub struct Cli {
    /// The root every host path is under.
    #[arg(long, env = "FLEET_ROLE_ROOT", global = true)]
    pub root: Option<PathBuf>,
    /// The TOML config file (default /etc/fleet-role/actuator.toml, if present).
    #[arg(long, env = "FLEET_ROLE_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// This host's Node name (default: the hostname).
    #[arg(long, env = "FLEET_ROLE_NODE", global = true)]
    pub node: Option<String>,
    /// Output for people (text) or machines (json).
    #[arg(long, value_enum, default_value_t = Format::Text, global = true)]
    pub output: Format,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Exit 0 when the role file names ROLE, 1 otherwise, any doubt included
    /// (systemd's ExecCondition).
    Is {
        /// `server` or `agent`.
        role: String,
        /// Also require that the datastore holds no tombstone.
        #[arg(long)]
        no_tombstone: bool,
    },
    /// Join the named server and run the server unit in place of the agent.
    PromoteLocal {
        /// The server to join: https://HOST:PORT.
        #[arg(long)]
        join: String,
        /// Print what would change, and change nothing.
        #[arg(long)]
        check: bool,
        /// Seconds to wait for another switch's lock.
        #[arg(long)]
        lock_timeout: Option<u64>,
    },
    /// Stop the server, move its datastore aside and run the agent unit.
    DemoteLocal {
        /// Print what would change, and change nothing.
        #[arg(long)]
        check: bool,
        /// Demote even though this host's member may still vote (a datastore
        /// with no tombstone): only once etcd's member list shows it gone, or
        /// when losing this voter is known to keep quorum.
        #[arg(long)]
        force: bool,
        /// Seconds to wait for another switch's lock.
        #[arg(long)]
        lock_timeout: Option<u64>,
    },
    /// Take an on-demand etcd snapshot named NAME.
    Snapshot {
        /// The snapshot's name (a DNS label, like a swap id).
        #[arg(long)]
        name: String,
    },
    /// Hand etcd's leadership to another voter if this host's member leads:
    /// what `fleet-role-handover.service` runs before the host sleeps, and
    /// `fleet-role-handover-shutdown.service` before k3s stops at shutdown.
    HandOver {
        /// What the host is about to do, for the log: `sleep` or `shutdown`.
        #[arg(long, value_parser = ["sleep", "shutdown"], default_value = "shutdown")]
        before: String,
    },
    /// Wait, bounded, until the server k3s joins through is reachable: for a
    /// network wrapper's `ExecStartPre` (Tailscale's, say). The server is
    /// `--url`, else `FLEET_ROLE_JOIN_URL` (fleet-role's unit drop-in sets it
    /// to the voter a promotion joined or a step-down named), else the
    /// `server:` k3s's config names, else `K3S_URL` of the server unit, then
    /// of the agent unit; with none, nothing to wait for. Exit 3 when the
    /// bound passes first.
    WaitJoin {
        /// The server to wait for: https://HOST:PORT.
        #[arg(long, env = "FLEET_ROLE_JOIN_URL")]
        url: Option<String>,
        /// The bound, in seconds.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
    /// Remove a learner etcd lists and no swap moves on, through this
    /// server's etcd member. Refused, with nothing changed, for a voter, for
    /// the learner of a change under way (the regrade Lease), and while the
    /// other voters are no healthy quorum. Run on a server.
    RemoveLearner {
        /// The member as `etcd member list` prints it: its id (hex) or its
        /// name (`NODE-XXXXXXXX`).
        member: String,
        /// How to reach the API (to read the regrade Lease).
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Remove a member etcd lists and no Node stands for (its host gone),
    /// through this server's etcd member. Refused, with nothing changed,
    /// for a member a Node stands for, one that answers as healthy, while
    /// a change holds the regrade Lease, and while the voters left would be
    /// no healthy quorum. Run on a server.
    RemoveGhost {
        /// The member: its id (hex, as `fleet-role status` lists etcd's
        /// members) or its name (`NODE-XXXXXXXX`).
        member: String,
        /// How to reach the API (to read the Nodes and the regrade Lease).
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show the role file as read, fleet-role's drop-ins, each unit's state
    /// and, with an API, the host's report; exit 5 when something is degraded.
    Status(ApiArgs),
    /// Watch this host's Node and carry out the steps it asks for.
    Watch(ApiArgs),
}

/// How to reach the API.
#[derive(Debug, Args, Default)]
pub struct ApiArgs {
    /// An API server URL; repeat for candidates tried in order.
    #[arg(long = "api", env = "FLEET_ROLE_API", value_delimiter = ',')]
    pub api: Vec<String>,
    /// The CA bundle that verifies the API servers.
    #[arg(long, env = "FLEET_ROLE_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// The ServiceAccount token file (re-read when it changes; never printed).
    #[arg(long, env = "FLEET_ROLE_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
}
