//! `fleet-role-manpages DIR`: writes the man pages (section 1, one per
//! command and subcommand) and the bash, zsh and fish completions of
//! `fleet-role-actuator` and `fleet-role` under `DIR`, from the programs'
//! own clap definitions, so what the packages install can never drift from
//! what the binaries accept. `scripts/package.sh` runs it; nothing ships it.
//!
//! Layout written, as the packages install it:
//! `DIR/man1/*.1`, `DIR/bash/<program>`, `DIR/zsh/_<program>`,
//! `DIR/fish/<program>.fish`.
#![forbid(unsafe_code)]

use std::{
    fs,
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context, bail};
use clap::{Command, CommandFactory};
use clap_complete::{Shell, generate_to};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fleet-role-manpages: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        bail!("usage: fleet-role-manpages DIR");
    };
    let dir = PathBuf::from(dir);
    for cmd in [
        actuator::cli::Cli::command(),
        controller::cli::Cli::command(),
    ] {
        write_all(&dir, cmd)?;
    }
    Ok(())
}

/// Writes one program's pages and completions.
fn write_all(dir: &Path, mut cmd: Command) -> anyhow::Result<()> {
    let name = cmd.get_name().to_string();
    let man = dir.join("man1");
    fs::create_dir_all(&man).with_context(|| format!("creating {}", man.display()))?;
    clap_mangen::generate_to(cmd.clone(), &man)
        .with_context(|| format!("writing the man pages of {name} into {}", man.display()))?;
    for (shell, sub) in [
        (Shell::Bash, "bash"),
        (Shell::Zsh, "zsh"),
        (Shell::Fish, "fish"),
    ] {
        let out = dir.join(sub);
        fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        let written = generate_to(shell, &mut cmd, &name, &out)
            .with_context(|| format!("writing the {sub} completion of {name}"))?;
        // bash-completion looks a command's file up by the command's name.
        if shell == Shell::Bash {
            let target = out.join(&name);
            fs::rename(&written, &target).with_context(|| {
                format!("renaming {} to {}", written.display(), target.display())
            })?;
        }
    }
    Ok(())
}
