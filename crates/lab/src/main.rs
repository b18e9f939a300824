//! `fleet-role-lab`: a k3s fleet on one machine, each host a container
//! booting real systemd (`up`, `down`, `status`, `demo`, `bench`,
//! `chaos`). Every lab host's `k3s` is the stand-in's own binary
//! (`k3sstandin`, built beside this one).
#![forbid(unsafe_code)]

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use lab::{
    chaos, held_lab, lab_setup, scenario, status,
    systemd_lab::{self, SystemdLab},
};

/// fleet-role-lab: several k3s hosts on one machine, with a real etcd quorum.
#[derive(Debug, Parser)]
#[command(name = "fleet-role-lab", version)]
struct Cli {
    /// The lab's directory.
    #[arg(
        long,
        env = "FLEET_ROLE_LAB_DIR",
        default_value = ".cache/lab",
        global = true
    )]
    dir: PathBuf,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Start N servers and M agents on real systemd, with an actuator on
    /// each, and hold them in the foreground until `down` or Ctrl-C.
    Up {
        /// Servers (etcd voters).
        #[arg(long, default_value_t = 3)]
        servers: usize,
        /// Agents.
        #[arg(long, default_value_t = 2)]
        agents: usize,
        /// More agents on Docker hosts (`docker-1`…: k3s in containers of a
        /// private dockerd, the actuator beside them).
        #[arg(long, default_value_t = 0)]
        docker_agents: usize,
    },
    /// Power the held lab's hosts off.
    Down,
    /// Show the held lab's hosts, their units and etcd's members.
    Status,
    /// Power a host of the held lab off cleanly.
    Poweroff {
        /// The host.
        host: String,
    },
    /// Boot a host of the held lab that was powered off.
    Boot {
        /// The host.
        host: String,
    },
    /// Reboot a host of the held lab.
    Reboot {
        /// The host.
        host: String,
    },
    /// Cut a host of the held lab off its network.
    Cut {
        /// The host.
        host: String,
    },
    /// Put a host of the held lab back on its network.
    Restore {
        /// The host.
        host: String,
    },
    /// A lab on real systemd (3 servers, 1 agent, one container each) that
    /// swaps a voter for a standby with `fleet-role swap` (or by hand, the
    /// controller's part done by the lab), then powers off.
    Demo {
        /// Do the controller's part by hand instead of running `fleet-role`.
        #[arg(long)]
        by_hand: bool,
    },
    /// Measure the actuator in a fresh lab (figures, not a test).
    Bench {
        /// How many steps to time.
        #[arg(long, default_value_t = 50)]
        steps: usize,
        /// Seconds of idle to measure.
        #[arg(long, default_value_t = 60)]
        idle_secs: u64,
    },
    /// A robustness campaign: a lab of 3 servers and 2 agents, two
    /// `fleet-role run` instances, clients reading and writing etcd, and
    /// swaps back and forth under faults drawn from the seed; prints the
    /// summary and exits 1 on any violation (docs/testing.md).
    Chaos {
        /// The seed the schedule is drawn from.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How many swaps.
        #[arg(long, default_value_t = 4)]
        swaps: usize,
        /// How many faults in all (default: two per swap).
        #[arg(long)]
        faults: Option<usize>,
        /// Run the schedule in FILE (a campaign's `schedule.json`) instead
        /// of drawing one.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["seed", "swaps", "faults"])]
        replay: Option<PathBuf>,
        /// Plant a known defect in every host's actuator (the test build's
        /// actuator only), to see the campaign catch it.
        #[arg(long, value_name = "DEFECT", value_parser = plant_name)]
        plant: Option<plants::Plant>,
    },
    /// Runs PROGRAM in the cgroup NAME (made if missing) of each hierarchy:
    /// how a real-systemd lab host's nspawn starts in a cgroup of its own.
    #[command(hide = true)]
    InCgroup {
        /// The cgroup (the machine's name).
        name: String,
        /// The program and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        program: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Before any runtime thread exists: this process becomes the program.
    if let Cmd::InCgroup { name, program } = &cli.command {
        let e = lab::machine::exec_in_cgroup(name, &program[0], &program[1..]);
        eprintln!("fleet-role-lab in-cgroup {name}: {}: {e}", program[0]);
        return ExitCode::from(2);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fleet-role-lab: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn say(line: &str) {
    let clock = clock::Clock::system();
    let secs = clock.unix_secs().rem_euclid(86400);
    println!(
        "[{:02}:{:02}:{:02}] {line}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Cmd::InCgroup { .. } => unreachable!("handled in main before the runtime"),
        Cmd::Up {
            servers,
            agents,
            docker_agents,
        } => {
            let bins = lab_setup::Bins::beside(std::env::current_exe()?.parent().expect("a dir"))?;
            let dir = cli.dir.join("systemd");
            let lab = SystemdLab::up(
                systemd_lab::Options {
                    dir: dir.clone(),
                    servers,
                    agents,
                    docker_agents,
                    timings: Default::default(),
                    bins,
                },
                &say,
            )
            .await?;
            for line in status::status_lines(&lab).await {
                say(&line);
            }
            held_lab::hold(lab, &dir, &say).await?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Down => {
            print!("{}", held_lab::ask(&cli.dir.join("systemd"), "down").await?);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Poweroff { host } => act_on(&cli.dir, held_lab::HostAction::Poweroff, &host).await,
        Cmd::Boot { host } => act_on(&cli.dir, held_lab::HostAction::Boot, &host).await,
        Cmd::Reboot { host } => act_on(&cli.dir, held_lab::HostAction::Reboot, &host).await,
        Cmd::Cut { host } => act_on(&cli.dir, held_lab::HostAction::Cut, &host).await,
        Cmd::Restore { host } => act_on(&cli.dir, held_lab::HostAction::Restore, &host).await,
        Cmd::Status => {
            print!(
                "{}",
                held_lab::ask(&cli.dir.join("systemd"), "status").await?
            );
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Bench { steps, idle_secs } => {
            let bins = lab_setup::Bins::beside(std::env::current_exe()?.parent().expect("a dir"))?;
            lab::bench::run(
                &cli.dir.join("bench"),
                bins,
                steps,
                std::time::Duration::from_secs(idle_secs),
                &say,
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Chaos {
            seed,
            swaps,
            faults,
            replay,
            plant,
        } => {
            let bins = lab_setup::Bins::beside(std::env::current_exe()?.parent().expect("a dir"))?;
            let schedule = match replay {
                Some(file) => chaos::campaign::load(&file)?,
                None => chaos::schedule::Schedule::draw(seed, swaps, faults.unwrap_or(2 * swaps)),
            };
            let summary = chaos::campaign::run(
                chaos::campaign::Options {
                    dir: cli.dir.join("chaos"),
                    schedule,
                    bins,
                    fleet_role: std::env::current_exe()?.with_file_name("fleet-role"),
                    plant,
                },
                say,
            )
            .await?;
            for line in summary.lines() {
                say(&line);
            }
            // docs/testing.md's table of long campaigns.
            say(&format!("row: {}", summary.row()));
            Ok(if summary.violations.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Cmd::Demo { by_hand } => {
            let bins = lab_setup::Bins::beside(std::env::current_exe()?.parent().expect("a dir"))?;
            // Real systemd in each host; the lab lives as long as this
            // process and its hosts are powered off when the demo ends.
            let lab = SystemdLab::up(
                systemd_lab::Options {
                    dir: cli.dir.join("systemd"),
                    servers: 3,
                    agents: 1,
                    docker_agents: 0,
                    timings: Default::default(),
                    bins,
                },
                &say,
            )
            .await?;
            for line in status::status_lines(&lab).await {
                say(&line);
            }
            let fleet_role = std::env::current_exe()?.with_file_name("fleet-role");
            let report = if by_hand || !fleet_role.is_file() {
                scenario::swap_by_hand(&lab, "server-3", "agent-1", &say).await?
            } else {
                say("fleet-role swap --out server-3 --in agent-1");
                scenario::swap_with_controller(&lab, &fleet_role, "server-3", "agent-1", &say)
                    .await?
            };
            for line in report.lines() {
                say(&line);
            }
            for line in status::status_lines(&lab).await {
                say(&line);
            }
            let broken = report.broken_promises("server-3", "agent-1");
            for b in &broken {
                say(&format!("promise broken: {b}"));
            }
            say("powering the hosts off");
            drop(lab);
            Ok(if broken.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

/// Asks the held lab under `dir` to do `action` to `host`; fails when it
/// could not.
async fn act_on(
    dir: &std::path::Path,
    action: held_lab::HostAction,
    host: &str,
) -> anyhow::Result<ExitCode> {
    let answer =
        held_lab::ask(&dir.join("systemd"), &format!("{} {host}", action.as_str())).await?;
    print!("{answer}");
    Ok(if answer.starts_with("error:") {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// A planted defect the actuator carries, by its name (`--plant`).
fn plant_name(name: &str) -> Result<plants::Plant, String> {
    let carried = || {
        plants::Plant::ALL
            .into_iter()
            .filter(|p| p.in_the_actuator())
    };
    carried().find(|p| p.name() == name).ok_or_else(|| {
        let known: Vec<&str> = carried().map(plants::Plant::name).collect();
        format!(
            "no defect of that name the actuator carries (known: {})",
            known.join(", ")
        )
    })
}
