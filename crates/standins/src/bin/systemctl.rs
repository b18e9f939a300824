//! A `systemctl` stand-in for one host root: unit files and drop-ins are read
//! from `$FLEET_ROLE_ROOT/etc/systemd/system`, `ExecCondition=` runs as systemd
//! runs it (exit 0 starts the unit, 1 to 254 skips the start quietly, 255 or a
//! signal fails it), and the most k3s units ever active at once is recorded.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, ExitCode},
};

use standins::{log, root, state_dir, units};

fn main() -> ExitCode {
    let root = match root() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("systemctl (stand-in): {e}");
            return ExitCode::from(2);
        }
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Queries leave no trace, so a --check run leaves the host tree as it was.
    if !args.iter().any(|a| a.starts_with("is-")) {
        log(&root, "systemd", &args.join(" "));
    }
    let quiet = args.iter().any(|a| a == "--quiet" || a == "-q");
    let now = args.iter().any(|a| a == "--now");
    let rest: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let Some((&verb, unit_args)) = rest.split_first() else {
        eprintln!("systemctl (stand-in): no command");
        return ExitCode::from(1);
    };
    let unit = unit_args
        .first()
        .map(|u| u.strip_suffix(".service").unwrap_or(u).to_string());
    let need_unit = || unit.clone().ok_or(());
    let result: Result<u8, String> = match verb {
        "daemon-reload" => Ok(0),
        "is-active" => need_unit().map_or(Ok(4), |u| {
            let on = units::is_active(&root, &u);
            if !quiet {
                println!("{}", if on { "active" } else { "inactive" });
            }
            Ok(if on { 0 } else { 3 })
        }),
        "is-enabled" => need_unit().map_or(Ok(4), |u| {
            let on = units::is_enabled(&root, &u);
            if !quiet {
                println!("{}", if on { "enabled" } else { "disabled" });
            }
            Ok(if on { 0 } else { 1 })
        }),
        "start" => need_unit()
            .map_err(|_| "start needs a unit".into())
            .and_then(|u| start(&root, &u)),
        "stop" => need_unit()
            .map_err(|_| "stop needs a unit".into())
            .map(|u| stop(&root, &u)),
        "restart" => need_unit()
            .map_err(|_| "restart needs a unit".into())
            .and_then(|u| {
                stop(&root, &u);
                start(&root, &u)
            }),
        "enable" => need_unit()
            .map_err(|_| "enable needs a unit".into())
            .and_then(|u| {
                unit_file(&root, &u)?;
                units::set(&root, &u, true, units::is_active(&root, &u));
                if now { start(&root, &u) } else { Ok(0) }
            }),
        "disable" => need_unit()
            .map_err(|_| "disable needs a unit".into())
            .map(|u| {
                if now {
                    stop(&root, &u);
                }
                units::set(&root, &u, false, units::is_active(&root, &u));
                0
            }),
        other => Err(format!("unknown command {other}")),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("systemctl (stand-in): {e}");
            ExitCode::from(1)
        }
    }
}

fn unit_file(root: &Path, unit: &str) -> Result<PathBuf, String> {
    let p = root.join(format!("etc/systemd/system/{unit}.service"));
    if p.exists() {
        Ok(p)
    } else {
        Err(format!("Unit {unit}.service not found."))
    }
}

/// The unit file followed by its drop-ins in name order, as systemd reads them.
fn unit_lines(root: &Path, unit: &str) -> Result<Vec<String>, String> {
    let mut files = vec![unit_file(root, unit)?];
    let dir = root.join(format!("etc/systemd/system/{unit}.service.d"));
    if let Ok(entries) = fs::read_dir(&dir) {
        let mut confs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "conf"))
            .collect();
        confs.sort();
        files.extend(confs);
    }
    Ok(files
        .iter()
        .filter_map(|f| fs::read_to_string(f).ok())
        .flat_map(|s| s.lines().map(str::to_string).collect::<Vec<_>>())
        .collect())
}

fn exec_conditions(lines: &[String]) -> Vec<String> {
    let mut out = vec![];
    for l in lines {
        if let Some(v) = l.trim().strip_prefix("ExecCondition=") {
            // An empty assignment resets the list, as in systemd.
            if v.trim().is_empty() {
                out.clear();
            } else {
                out.push(v.trim().to_string());
            }
        }
    }
    out
}

fn start(root: &Path, unit: &str) -> Result<u8, String> {
    let lines = unit_lines(root, unit)?;
    if units::is_active(root, unit) {
        return Ok(0);
    }
    for cond in exec_conditions(&lines) {
        let cond = cond.trim_start_matches(['-', '@', '+', '!']);
        let mut words = cond.split_whitespace();
        let Some(program) = words.next() else {
            continue;
        };
        // An absolute path under the host root wins; otherwise the program's
        // name is looked up on PATH (where tests put the built actuator).
        let under_root = root.join(program.trim_start_matches('/'));
        let program = if under_root.is_file() {
            under_root
        } else {
            PathBuf::from(Path::new(program).file_name().unwrap_or_default())
        };
        let status = Command::new(&program)
            .args(words)
            .env("FLEET_ROLE_ROOT", root)
            .status();
        match status.map(|s| s.code()) {
            Ok(Some(0)) => {}
            Ok(Some(c)) if (1..=254).contains(&c) => {
                log(
                    root,
                    "systemd",
                    &format!("condition failed for {unit} (exit {c}); not started"),
                );
                return Ok(0);
            }
            Ok(_) => return Err(format!("ExecCondition of {unit} failed")),
            Err(e) => {
                return Err(format!(
                    "ExecCondition of {unit} could not run {}: {e}",
                    program.display()
                ));
            }
        }
    }
    units::set(root, unit, units::is_enabled(root, unit), true);
    log(root, "systemd", &format!("started {unit}"));
    let _ = fs::create_dir_all(state_dir(root, "systemd"));
    Ok(0)
}

fn stop(root: &Path, unit: &str) -> u8 {
    if units::is_active(root, unit) {
        units::set(root, unit, units::is_enabled(root, unit), false);
        log(root, "systemd", &format!("stopped {unit}"));
    }
    0
}
