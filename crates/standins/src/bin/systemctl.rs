//! A `systemctl` stand-in for one host root.
//!
//! - Unit files and drop-ins are read from `$FLEET_ROLE_ROOT/etc/systemd/system`
//!   (drop-ins in name order; a later assignment wins, an empty one resets a list).
//! - `ExecCondition=` runs as systemd runs it: exit 0 starts the unit, 1 to 254
//!   skips the start quietly, 255 or a signal fails it.
//! - A unit with `ExecStart=` runs a real process under a small supervisor
//!   (this same program, `__supervise UNIT`), which restarts it after
//!   `RestartSec=` when `Restart=always` (checking `ExecCondition=` again, as
//!   systemd does), with `Environment=` set. `stop` kills the main process only
//!   (`KillMode=process`, as k3s's units have): children such as pod shims live on.
//! - A unit without `ExecStart=` is state only.
//! - `__boot` starts every enabled unit (after a simulated reboot has emptied `run/`).
//! - The most k3s units ever active at once is recorded, to check "never both".

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
    thread,
    time::{Duration, Instant},
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
    if !args
        .iter()
        .any(|a| a.starts_with("is-") || a == "__supervise")
    {
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
    let need = |what: &str| unit.clone().ok_or_else(|| format!("{what} needs a unit"));
    let result: Result<u8, String> = match verb {
        "daemon-reload" => Ok(0),
        "is-active" => Ok(need("is-active").map_or(4, |u| {
            answer(quiet, units::is_active(&root, &u), "active", "inactive", 3)
        })),
        "is-enabled" => Ok(need("is-enabled").map_or(4, |u| {
            answer(
                quiet,
                units::is_enabled(&root, &u),
                "enabled",
                "disabled",
                1,
            )
        })),
        "start" => need("start").and_then(|u| start(&root, &u)),
        "stop" => need("stop").map(|u| stop(&root, &u)),
        "restart" => need("restart").and_then(|u| {
            stop(&root, &u);
            start(&root, &u)
        }),
        "enable" => need("enable").and_then(|u| {
            Unit::read(&root, &u)?;
            units::set_enabled(&root, &u, true);
            if now { start(&root, &u) } else { Ok(0) }
        }),
        "disable" => need("disable").map(|u| {
            if now {
                stop(&root, &u);
            }
            units::set_enabled(&root, &u, false);
            0
        }),
        "__supervise" => need("__supervise").map(|u| supervise(&root, &u)),
        "__boot" => {
            for u in units::enabled(&root) {
                if let Err(e) = start(&root, &u) {
                    eprintln!("systemctl (stand-in): {e}");
                }
            }
            Ok(0)
        }
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

fn answer(quiet: bool, yes: bool, on: &str, off: &str, no_code: u8) -> u8 {
    if !quiet {
        println!("{}", if yes { on } else { off });
    }
    if yes { 0 } else { no_code }
}

/// A unit file with its drop-ins, as far as the stand-in reads it.
#[derive(Debug, Default)]
struct Unit {
    conditions: Vec<String>,
    exec_start: Option<String>,
    environment: Vec<(String, String)>,
    restart_always: bool,
    restart_sec: Duration,
}

impl Unit {
    fn read(root: &Path, unit: &str) -> Result<Unit, String> {
        let file = root.join(format!("etc/systemd/system/{unit}.service"));
        if !file.exists() {
            return Err(format!("Unit {unit}.service not found."));
        }
        let mut files = vec![file];
        if let Ok(entries) = fs::read_dir(root.join(format!("etc/systemd/system/{unit}.service.d")))
        {
            let mut confs: Vec<PathBuf> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "conf"))
                .collect();
            confs.sort();
            files.extend(confs);
        }
        let mut u = Unit {
            restart_sec: Duration::from_millis(100),
            ..Unit::default()
        };
        for text in files.iter().filter_map(|f| fs::read_to_string(f).ok()) {
            for line in text.lines().map(str::trim) {
                let Some((key, value)) = line.split_once('=') else {
                    continue;
                };
                let value = value.trim();
                match key.trim() {
                    "ExecCondition" if value.is_empty() => u.conditions.clear(),
                    "ExecCondition" => u.conditions.push(value.to_string()),
                    "ExecStart" => u.exec_start = (!value.is_empty()).then(|| value.to_string()),
                    "Restart" => u.restart_always = value == "always",
                    "RestartSec" => {
                        u.restart_sec = value
                            .trim_end_matches('s')
                            .parse::<f64>()
                            .map_or(u.restart_sec, Duration::from_secs_f64)
                    }
                    "Environment" => {
                        let v = value.trim_matches('"');
                        if let Some((k, val)) = v.split_once('=') {
                            u.environment.push((k.to_string(), val.to_string()));
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(u)
    }

    fn command(&self, root: &Path, line: &str) -> Option<Command> {
        let line = line.trim_start_matches(['-', '@', '+', '!']);
        let mut words = line.split_whitespace();
        let program = words.next()?;
        // An absolute path under the host root wins; otherwise the program's
        // name is looked up on PATH (where tests put the built binaries).
        let under_root = root.join(program.trim_start_matches('/'));
        let program = if under_root.is_file() {
            under_root
        } else {
            PathBuf::from(Path::new(program).file_name().unwrap_or_default())
        };
        let mut c = Command::new(program);
        c.args(words)
            .env("FLEET_ROLE_ROOT", root)
            .stdin(Stdio::null());
        for (k, v) in &self.environment {
            c.env(k, v);
        }
        Some(c)
    }

    /// Runs the conditions: `Ok(true)` to start, `Ok(false)` to skip.
    fn conditions_pass(&self, root: &Path, unit: &str) -> Result<bool, String> {
        for cond in &self.conditions {
            let Some(mut c) = self.command(root, cond) else {
                continue;
            };
            match c.status().map(|s| s.code()) {
                Ok(Some(0)) => {}
                Ok(Some(code)) if (1..=254).contains(&code) => {
                    log(
                        root,
                        "systemd",
                        &format!("condition failed for {unit} (exit {code}); not started"),
                    );
                    return Ok(false);
                }
                Ok(_) => return Err(format!("ExecCondition of {unit} failed")),
                Err(e) => return Err(format!("ExecCondition of {unit} could not run: {e}")),
            }
        }
        Ok(true)
    }
}

fn pid_file(root: &Path, unit: &str, what: &str) -> PathBuf {
    state_dir(root, "systemd").join(format!("{unit}.{what}"))
}

fn read_pid(root: &Path, unit: &str, what: &str) -> Option<u32> {
    fs::read_to_string(pid_file(root, unit, what))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn alive(pid: u32) -> bool {
    // A zombie has exited: it only waits to be reaped.
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

fn start(root: &Path, unit: &str) -> Result<u8, String> {
    let u = Unit::read(root, unit)?;
    if units::is_active(root, unit) {
        return Ok(0);
    }
    if !u.conditions_pass(root, unit)? {
        return Ok(0);
    }
    units::set_active(root, unit, true);
    log(root, "systemd", &format!("started {unit}"));
    if u.exec_start.is_some() {
        let _ = fs::remove_file(pid_file(root, unit, "stopping"));
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(state_dir(root, "systemd").join(format!("{unit}.log")))
            .map_err(|e| format!("the unit's log: {e}"))?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let child = Command::new(exe)
            .args(["__supervise", unit])
            .env("FLEET_ROLE_ROOT", root)
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(|e| e.to_string())?)
            .stderr(out)
            .spawn()
            .map_err(|e| format!("cannot start {unit}: {e}"))?;
        fs::write(pid_file(root, unit, "supervisor"), child.id().to_string())
            .map_err(|e| e.to_string())?;
    }
    Ok(0)
}

fn stop(root: &Path, unit: &str) -> u8 {
    if !units::is_active(root, unit) {
        return 0;
    }
    let _ = fs::write(pid_file(root, unit, "stopping"), "");
    if let Some(sup) = read_pid(root, unit, "supervisor") {
        signal(sup, "-KILL");
    }
    // KillMode=process: the main process alone gets SIGTERM, then SIGKILL
    // after the stop timeout; whatever it started (pod shims) lives on.
    if let Some(main) = read_pid(root, unit, "main-pid") {
        signal(main, "-TERM");
        let start = Instant::now();
        while alive(main) && start.elapsed() < Duration::from_secs(15) {
            thread::sleep(Duration::from_millis(50));
        }
        if alive(main) {
            signal(main, "-KILL");
        }
    }
    for what in ["supervisor", "main-pid"] {
        let _ = fs::remove_file(pid_file(root, unit, what));
    }
    units::set_active(root, unit, false);
    log(root, "systemd", &format!("stopped {unit}"));
    0
}

/// The supervisor of one unit's main process (`Restart=`, `RestartSec=`).
fn supervise(root: &Path, unit: &str) -> u8 {
    while let Ok(u) = Unit::read(root, unit) {
        let Some(mut cmd) = u
            .exec_start
            .as_deref()
            .and_then(|line| u.command(root, line))
        else {
            break;
        };
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("systemctl (stand-in): {unit}: {e}");
                break;
            }
        };
        let _ = fs::write(pid_file(root, unit, "main-pid"), child.id().to_string());
        let status = child.wait();
        if pid_file(root, unit, "stopping").exists() {
            return 0;
        }
        log(root, "systemd", &format!("{unit} exited ({status:?})"));
        if !u.restart_always {
            break;
        }
        thread::sleep(u.restart_sec);
        if pid_file(root, unit, "stopping").exists() {
            return 0;
        }
        match u.conditions_pass(root, unit) {
            Ok(true) => log(root, "systemd", &format!("restarting {unit}")),
            _ => break,
        }
    }
    let _ = fs::remove_file(pid_file(root, unit, "main-pid"));
    let _ = fs::remove_file(pid_file(root, unit, "supervisor"));
    units::set_active(root, unit, false);
    0
}
