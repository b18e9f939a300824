//! A `systemctl` stand-in for one host root.
//!
//! More in docs/internals.md, "standins: bin::systemctl".

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
    thread,
    time::Duration,
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
    // Queries and internal jobs leave no trace, so a --check run leaves the
    // host tree as it was and the log shows each command once.
    if !args
        .iter()
        .any(|a| a.starts_with("is-") || a == "show" || a.starts_with("__"))
    {
        log(&root, "systemd", &args.join(" "));
    }
    let flag = |f: &str| args.iter().any(|a| a == f);
    let quiet = flag("--quiet") || flag("-q");
    let now = flag("--now");
    let no_block = flag("--no-block");
    let value_only = flag("--value");
    let mut props: Vec<String> = vec![];
    let mut rest: Vec<&str> = vec![];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-p" || a == "--property" {
            if let Some(p) = it.next() {
                props.extend(p.split(',').map(str::to_string));
            }
        } else if let Some(p) = a.strip_prefix("--property=") {
            props.extend(p.split(',').map(str::to_string));
        } else if !a.starts_with('-') {
            rest.push(a);
        }
    }
    let Some((&verb, unit_args)) = rest.split_first() else {
        eprintln!("systemctl (stand-in): no command");
        return ExitCode::from(1);
    };
    let unit_at = |i: usize| {
        unit_args
            .get(i)
            .map(|u| u.strip_suffix(".service").unwrap_or(u).to_string())
    };
    let unit = unit_at(0);
    let need = |what: &str| unit.clone().ok_or_else(|| format!("{what} needs a unit"));
    // A job either runs here (systemctl waits for it) or is queued and runs
    // detached (--no-block), as systemd's job queue does.
    let job = |verb: &str, u: &str| -> Result<u8, String> {
        if no_block {
            queue(&root, verb, u)
        } else {
            run_job(&root, verb, u)
        }
    };
    let result: Result<u8, String> = match verb {
        "daemon-reload" => Ok(0),
        "is-active" => Ok(need("is-active").map_or(4, |u| {
            let s = units::state(&root, &u);
            if !quiet {
                println!("{}", s.active);
            }
            // systemctl is-active: 0 for active (or reloading), 3 otherwise,
            // activating and deactivating included.
            if s.active == "active" || s.active == "reloading" {
                0
            } else {
                3
            }
        })),
        "is-enabled" => Ok(need("is-enabled").map_or(4, |u| {
            let yes = units::is_enabled(&root, &u);
            if !quiet {
                println!("{}", if yes { "enabled" } else { "disabled" });
            }
            if yes { 0 } else { 1 }
        })),
        "show" => need("show").map(|u| show(&root, &u, &props, value_only)),
        "start" | "stop" | "restart" => need(verb).and_then(|u| job(verb, &u)),
        "enable" => need("enable").and_then(|u| {
            Unit::read(&root, &u)?;
            units::set_enabled(&root, &u, true);
            if now { job("start", &u) } else { Ok(0) }
        }),
        "disable" => need("disable").and_then(|u| {
            let code = if now { job("stop", &u)? } else { 0 };
            units::set_enabled(&root, &u, false);
            Ok(code)
        }),
        "__job" => match (unit.as_deref(), unit_at(1)) {
            (Some(v), Some(u)) => run_job(&root, v, &u),
            _ => Err("__job needs a verb and a unit".into()),
        },
        "__supervise" => need("__supervise").map(|u| supervise(&root, &u)),
        "__boot" => {
            for u in units::enabled(&root) {
                if let Err(e) = run_job(&root, "start", &u) {
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

/// `systemctl show -p …`: `Key=value` lines in the order asked (the value
/// alone with `--value`); with no `-p`, every property the stand-in knows.
fn show(root: &Path, unit: &str, props: &[String], value_only: bool) -> u8 {
    let s = units::state(root, unit);
    let known = [
        "ActiveState",
        "SubState",
        "Result",
        "InactiveExitTimestampMonotonic",
    ];
    let asked: Vec<&str> = if props.is_empty() {
        known.to_vec()
    } else {
        props.iter().map(String::as_str).collect()
    };
    for p in asked {
        let v = match p {
            "ActiveState" => s.active.clone(),
            "SubState" => s.sub.clone(),
            "Result" => s.result.clone(),
            "InactiveExitTimestampMonotonic" => s.inactive_exit.to_string(),
            _ => continue,
        };
        if value_only {
            println!("{v}");
        } else {
            println!("{p}={v}");
        }
    }
    0
}

/// Queues a job: a detached `__job VERB UNIT` that runs it after this
/// program has returned.
fn queue(root: &Path, verb: &str, unit: &str) -> Result<u8, String> {
    Unit::read(root, unit)?;
    let out = unit_log(root, unit)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Command::new(exe)
        .args(["__job", verb, unit])
        .env("FLEET_ROLE_ROOT", root)
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(|e| e.to_string())?)
        .stderr(out)
        .spawn()
        .map_err(|e| format!("cannot queue {verb} {unit}: {e}"))?;
    Ok(0)
}

fn run_job(root: &Path, verb: &str, unit: &str) -> Result<u8, String> {
    match verb {
        "start" => start(root, unit),
        "stop" => Ok(stop(root, unit)),
        "restart" => {
            stop(root, unit);
            start(root, unit)
        }
        other => Err(format!("unknown job {other}")),
    }
}

fn unit_log(root: &Path, unit: &str) -> Result<fs::File, String> {
    let dir = state_dir(root, "systemd");
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{unit}.log")))
        .map_err(|e| format!("the unit's log: {e}"))
}

/// A unit file with its drop-ins, as far as the stand-in reads it.
#[derive(Debug, Default)]
struct Unit {
    conditions: Vec<String>,
    exec_start: Option<String>,
    environment: Vec<(String, String)>,
    restart_always: bool,
    restart_sec: Duration,
    notify: bool,
    conflicts: Vec<String>,
}

fn unit_files(root: &Path, unit: &str) -> Vec<PathBuf> {
    let mut files = vec![root.join(format!("etc/systemd/system/{unit}.service"))];
    if let Ok(entries) = fs::read_dir(root.join(format!("etc/systemd/system/{unit}.service.d"))) {
        let mut confs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "conf"))
            .collect();
        confs.sort();
        files.extend(confs);
    }
    files
}

impl Unit {
    fn read(root: &Path, unit: &str) -> Result<Unit, String> {
        let files = unit_files(root, unit);
        if !files[0].exists() {
            return Err(format!("Unit {unit}.service not found."));
        }
        let mut u = Unit {
            restart_sec: Duration::from_millis(100),
            ..Unit::default()
        };
        for text in files.iter().filter_map(|f| fs::read_to_string(f).ok()) {
            for line in text.lines().map(str::trim) {
                if line.starts_with('#') {
                    continue;
                }
                let Some((key, value)) = line.split_once('=') else {
                    continue;
                };
                let value = value.trim();
                match key.trim() {
                    "ExecCondition" if value.is_empty() => u.conditions.clear(),
                    "ExecCondition" => u.conditions.push(value.to_string()),
                    "ExecStart" => u.exec_start = (!value.is_empty()).then(|| value.to_string()),
                    "Type" => u.notify = value == "notify",
                    "Restart" => u.restart_always = value == "always",
                    "RestartSec" => {
                        u.restart_sec = value
                            .trim_end_matches('s')
                            .parse::<f64>()
                            .map_or(u.restart_sec, Duration::from_secs_f64)
                    }
                    "Conflicts" if value.is_empty() => u.conflicts.clear(),
                    "Conflicts" => u.conflicts.extend(
                        value
                            .split_whitespace()
                            .map(|c| c.strip_suffix(".service").unwrap_or(c).to_string()),
                    ),
                    // systemd reads the file at each start; a `-` prefix
                    // makes a missing one no error (install.sh's k3s units
                    // use `-/etc/systemd/system/<unit>.service.env`).
                    "EnvironmentFile" => {
                        let (optional, path) = match value.strip_prefix('-') {
                            Some(p) => (true, p),
                            None => (false, value),
                        };
                        match fs::read_to_string(root.join(path.trim_start_matches('/'))) {
                            Ok(t) => {
                                for l in t.lines().map(str::trim) {
                                    if l.starts_with('#') {
                                        continue;
                                    }
                                    if let Some((k, val)) = l.split_once('=') {
                                        let val = val.trim_matches(['"', '\'']);
                                        u.environment.push((k.to_string(), val.to_string()));
                                    }
                                }
                            }
                            Err(_) if optional => {}
                            Err(e) => return Err(format!("{path}: {e}")),
                        }
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

/// The units that must stop before `unit` starts: those it names in
/// `Conflicts=`, and those naming it (systemd applies the dependency both ways).
fn conflicting(root: &Path, unit: &str, u: &Unit) -> Vec<String> {
    let mut out = u.conflicts.clone();
    if let Ok(entries) = fs::read_dir(root.join("etc/systemd/system")) {
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(other) = name.strip_suffix(".service") else {
                continue;
            };
            if other != unit
                && !out.iter().any(|o| o == other)
                && Unit::read(root, other).is_ok_and(|o| o.conflicts.iter().any(|c| c == unit))
            {
                out.push(other.to_string());
            }
        }
    }
    out.retain(|o| o != unit);
    out
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

fn set(root: &Path, unit: &str, active: &str, sub: &str, result: &str) {
    units::set_state(root, unit, active, sub, result);
}

/// The start job: conflicting units stopped, then the unit started; returns
/// once it is `active`, skipped by its condition, or failed (a notify unit
/// that never becomes ready keeps it waiting).
fn start(root: &Path, unit: &str) -> Result<u8, String> {
    let u = Unit::read(root, unit)?;
    if units::is_active(root, unit) {
        return Ok(0);
    }
    for other in conflicting(root, unit, &u) {
        if units::is_active(root, &other) {
            log(
                root,
                "systemd",
                &format!("stopping {other} (conflicts with {unit})"),
            );
            stop(root, &other);
        }
    }
    if u.exec_start.is_none() {
        // State only: the condition decides, and a start is at once complete.
        set(root, unit, "activating", "condition", "success");
        return match u.conditions_pass(root, unit) {
            Ok(true) => {
                set(root, unit, "active", "running", "success");
                log(root, "systemd", &format!("started {unit}"));
                Ok(0)
            }
            Ok(false) => {
                set(root, unit, "inactive", "dead", "exec-condition");
                Ok(0)
            }
            Err(e) => {
                set(root, unit, "failed", "failed", "exec-condition");
                Err(e)
            }
        };
    }
    let _ = fs::remove_file(pid_file(root, unit, "stopping"));
    set(root, unit, "activating", "condition", "success");
    let out = unit_log(root, unit)?;
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
    // The job ends when the start does: systemctl start returns then.
    loop {
        let s = units::state(root, unit);
        match (s.active.as_str(), s.sub.as_str()) {
            // Skipped by its condition, or a simple unit whose process
            // already ended cleanly: the start itself succeeded.
            ("active", _) | ("inactive", _) => return Ok(0),
            ("activating", "auto-restart") | ("failed", _) => {
                return Err(format!(
                    "Job for {unit}.service failed because the control process exited with error code."
                ));
            }
            _ => thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The stop job: `deactivating` while the main process gets SIGTERM (then
/// SIGKILL), then `inactive`. A unit in its auto-restart wait or its
/// condition is stopped too.
fn stop(root: &Path, unit: &str) -> u8 {
    let clock = clock::Clock::system();
    if !units::is_active(root, unit) {
        return 0;
    }
    let _ = fs::write(pid_file(root, unit, "stopping"), "");
    set(root, unit, "deactivating", "stop-sigterm", "success");
    if let Some(sup) = read_pid(root, unit, "supervisor") {
        signal(sup, "-KILL");
    }
    // KillMode=process: the main process alone gets SIGTERM, then SIGKILL
    // after the stop timeout; whatever it started (pod shims) lives on.
    if let Some(main) = read_pid(root, unit, "main-pid") {
        signal(main, "-TERM");
        let start = clock.now();
        while alive(main) && clock.since(start) < Duration::from_secs(15) {
            thread::sleep(Duration::from_millis(50));
        }
        if alive(main) {
            signal(main, "-KILL");
        }
    }
    for what in ["supervisor", "main-pid", "ready"] {
        let _ = fs::remove_file(pid_file(root, unit, what));
    }
    set(root, unit, "inactive", "dead", "success");
    log(root, "systemd", &format!("stopped {unit}"));
    0
}

fn stopping(root: &Path, unit: &str) -> bool {
    pid_file(root, unit, "stopping").exists()
}

/// The supervisor of one unit's main process: its condition, its readiness,
/// and `Restart=`/`RestartSec=`.
fn supervise(root: &Path, unit: &str) -> u8 {
    let clock = clock::Clock::system();
    let mut first = true;
    while let Ok(u) = Unit::read(root, unit) {
        if !first {
            set(root, unit, "activating", "condition", "success");
        }
        first = false;
        match u.conditions_pass(root, unit) {
            Ok(true) => {}
            Ok(false) => return end(root, unit, "inactive", "dead", "exec-condition"),
            Err(e) => {
                eprintln!("systemctl (stand-in): {e}");
                return end(root, unit, "failed", "failed", "exec-condition");
            }
        }
        if stopping(root, unit) {
            return 0;
        }
        let Some(mut cmd) = u
            .exec_start
            .as_deref()
            .and_then(|line| u.command(root, line))
        else {
            break;
        };
        let ready = pid_file(root, unit, "ready");
        let _ = fs::remove_file(&ready);
        if u.notify {
            cmd.env("FLEET_ROLE_NOTIFY_FILE", &ready);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("systemctl (stand-in): {unit}: {e}");
                return end(root, unit, "failed", "failed", "exit-code");
            }
        };
        let _ = fs::write(pid_file(root, unit, "main-pid"), child.id().to_string());
        if u.notify {
            set(root, unit, "activating", "start", "success");
        } else {
            set(root, unit, "active", "running", "success");
            log(root, "systemd", &format!("started {unit}"));
        }
        let mut announced = !u.notify;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) => {}
                Err(_) => break None,
            }
            if !announced && ready.exists() && !stopping(root, unit) {
                set(root, unit, "active", "running", "success");
                log(root, "systemd", &format!("started {unit}"));
                announced = true;
            }
            thread::sleep(Duration::from_millis(20));
        };
        if stopping(root, unit) {
            return 0;
        }
        log(root, "systemd", &format!("{unit} exited ({status:?})"));
        let clean = status.is_some_and(|s| s.success());
        if !u.restart_always {
            let (a, sub, r) = if clean {
                ("inactive", "dead", "success")
            } else {
                ("failed", "failed", "exit-code")
            };
            return end(root, unit, a, sub, r);
        }
        // Restart=always: systemd shows the wait as activating (auto-restart).
        set(root, unit, "activating", "auto-restart", "exit-code");
        let start = clock.now();
        while clock.since(start) < u.restart_sec {
            if stopping(root, unit) {
                return 0;
            }
            thread::sleep(Duration::from_millis(20));
        }
        if stopping(root, unit) {
            return 0;
        }
        log(root, "systemd", &format!("restarting {unit}"));
    }
    end(root, unit, "inactive", "dead", "success")
}

fn end(root: &Path, unit: &str, active: &str, sub: &str, result: &str) -> u8 {
    for what in ["main-pid", "supervisor", "ready"] {
        let _ = fs::remove_file(pid_file(root, unit, what));
    }
    if !stopping(root, unit) {
        set(root, unit, active, sub, result);
    }
    0
}
