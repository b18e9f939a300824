//! The command line, as parsed (raw values; [`crate::config`] validates them).

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// For a terminal.
    #[default]
    Text,
    /// One JSON object per line, for machines.
    Json,
}

/// fleet-role: swap etcd voters of a k3s fleet safely, through the Kubernetes API.
#[derive(Debug, Parser)]
#[command(name = "fleet-role", version, after_help = protocol::exit::EXIT_CODES_HELP)]
pub struct Cli {
    /// The kubeconfig file (else KUBECONFIG, ~/.kube/config, or the in-cluster
    /// ServiceAccount).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context to use (else its current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The config file (TOML; every key is optional, see docs/controller.md).
    #[arg(long, global = true, value_name = "FILE", env = "FLEET_ROLE_CONFIG")]
    pub config: Option<PathBuf>,
    /// The Lease holder identity; the actuators must be configured with the same.
    #[arg(long, global = true, env = "FLEET_ROLE_IDENTITY")]
    pub identity: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replace the voter OUT by the standby IN: one swap, run to its end.
    Swap {
        /// The voter to replace.
        #[arg(long = "out", value_name = "NODE")]
        out: String,
        /// The standby to promote.
        #[arg(long = "in", value_name = "NODE")]
        incoming: String,
        /// Print the plan and every gate's verdict; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Keep to `run`'s `[window]`: refuse (exit 1), saying when it next
        /// opens, outside it. Without it a swap by hand ignores the window.
        #[arg(long)]
        in_window: bool,
        /// The longest any one step may take (e.g. 90s, 15m, 1h); overrides
        /// the config file's step timeouts.
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// Let the drain evict the outgoing voter's pods that no controller
        /// owns (gone for good: nothing starts them again), as `kubectl
        /// drain --force` does; without it such a pod stops the swap, named
        /// (the file's `drain_force` sets it for every swap).
        #[arg(long)]
        force: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        output: Format,
    },
    /// One voter more per standby IN, promoted in turn (`--in A --in B`
    /// grows 1 to 3): every gate a swap's promotion has, and an odd count at
    /// the end. Each promotion is a change of its own (snapshot, promotion,
    /// clean-up) with the swap's pause and abort.
    Grow {
        /// The standby to promote; again for the next one.
        #[arg(long = "in", value_name = "NODE", required = true)]
        incoming: Vec<String>,
        /// Print the plan, every gate's verdict and each step's fault
        /// tolerance; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        output: Format,
    },
    /// One voter fewer per voter OUT, stepped down and removed in turn
    /// (`--out A --out B` shrinks 5 to 3): every gate a swap's step-down and
    /// removal have, quorum at every moment, and an odd count at the end.
    /// Each removal is a change of its own (snapshot, cordon, drain,
    /// step-down, removal, finish as an agent) with the swap's pause and abort.
    Shrink {
        /// The voter to remove; again for the next one.
        #[arg(long = "out", value_name = "NODE", required = true)]
        out: Vec<String>,
        /// Let the drain evict the outgoing voters' pods that no controller
        /// owns (gone for good), as `swap --force` does.
        #[arg(long)]
        force: bool,
        /// Print the plan, every gate's verdict and each step's fault
        /// tolerance; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        output: Format,
    },
    /// Show voters, learners, etcd-only and agent hosts, the Lease, each
    /// host's last report and a running swap's step, and what is degraded
    /// (exit 5 when something is).
    Status {
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        output: Format,
        /// Refresh until Ctrl-C (or SIGTERM); each refresh is bounded, and
        /// one that fails is said and the next one tried.
        #[arg(long)]
        watch: bool,
        /// The time between two refreshes with --watch (e.g. 2s, 1m).
        #[arg(
            long,
            value_name = "DURATION",
            default_value = "2s",
            requires = "watch"
        )]
        interval: String,
    },
    /// Keep the voters healthy by policy: replace a voter NotReady past the
    /// grace period (or, with `replace_ineligible`, on a host not eligible)
    /// with a healthy eligible standby. Several instances elect a leader.
    Run {
        /// Observe only: print each decision it would take and why; write
        /// nothing (no leader election either).
        #[arg(long)]
        dry_run: bool,
        /// Serve /metrics, /healthz and /readyz on HOST:PORT (overrides the
        /// file's `metrics_address`).
        #[arg(long, value_name = "HOST:PORT")]
        metrics_address: Option<String>,
    },
    /// Wind the running (or stopped) swap down to the cluster as it was, or,
    /// past the point of no return, finish it; clears its marks.
    Abort {
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        output: Format,
    },
    /// Stop taking new steps: a running swap halts at its next safe point.
    Pause,
    /// Lift a pause.
    Resume,
    /// Give host NODE its own identity and write its credential (see
    /// docs/security.md), or with --bundle everything the host needs;
    /// again to rotate the credential.
    Enroll(crate::enroll::EnrollArgs),
    /// Remove host NODE's identity, revoking its credential.
    Unenroll(crate::enroll::UnenrollArgs),
    /// Write the controller's own kubeconfig (a token of its ServiceAccount,
    /// the cluster's server and CA) for `fleet-role run` as a service; again
    /// to rotate it.
    Kubeconfig(crate::kubeconfig::KubeconfigArgs),
    /// Remove what fleet-role made in the cluster (the controller's
    /// workload, every host's identity, the roles, Leases, report and
    /// admission policy); refused while a swap is under way. The
    /// namespaces and the Nodes' labels are kept.
    Uninstall {
        /// Print what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the cluster-side objects as YAML, rendered from the config
    /// file (namespace, Lease names); needs no cluster: pipe it to
    /// `kubectl apply -f -`.
    Manifests {
        /// `actuators`: what every host's actuator shares (the report, its
        /// roles and admission policy); `controller`: the controller's
        /// ServiceAccount, roles and Leases; `all`: both and the
        /// controller's workload, one file for `kubectl apply -f`.
        #[arg(value_enum, default_value_t)]
        which: crate::manifests::Which,
    },
}
