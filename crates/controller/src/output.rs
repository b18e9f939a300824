//! What `fleet-role` prints: each step of a swap with the wall-clock time
//! (UTC) and the time since the command started, as text for a terminal or
//! as one JSON object per line.
//!
//! Every value that came from the API is printed through
//! [`fleetdecide::one_line`] by the decisions that name it, so an
//! annotation holding a newline or an escape sequence cannot forge a line or
//! drive the terminal.

use std::time::Instant;

use clock::Clock;
use fleetdecide::{Action, Gate, Plan};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::cli::Format;

/// Prints the progress of one command.
#[derive(Debug)]
pub struct Printer {
    format: Format,
    clock: Clock,
    start: Instant,
    last: Option<String>,
}

impl Printer {
    /// A printer reading `clock`, counting from now.
    pub fn new(format: Format, clock: Clock) -> Self {
        Self {
            format,
            start: clock.now(),
            clock,
            last: None,
        }
    }

    /// The output format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The clock (the time of day for a terminal, RFC 3339 for JSON) and
    /// the seconds since the printer started.
    fn stamp(&self) -> (String, f64) {
        let secs = self.clock.unix_secs();
        let clock = match self.format {
            Format::Text => Timestamp::from_second(secs)
                .map(|t| t.strftime("%H:%M:%S").to_string())
                .unwrap_or_default(),
            Format::Json => kubeview::time::at_second(secs),
        };
        (clock, self.clock.since(self.start).as_secs_f64())
    }

    /// One line of progress (text) or one object (JSON).
    pub fn line(&mut self, message: &str, fields: Value) {
        let (clock, elapsed) = self.stamp();
        match self.format {
            Format::Text => println!("{clock} {:>+8.1}s  {message}", elapsed),
            Format::Json => {
                let mut v = json!({"time": clock, "elapsed": (elapsed * 10.0).round() / 10.0, "message": message});
                if let (Some(m), Value::Object(f)) = (v.as_object_mut(), fields) {
                    m.extend(f);
                }
                println!("{v}");
            }
        }
    }

    /// An action of a swap. Renewals are not shown; a wait is shown once
    /// until what is awaited changes.
    pub fn action(&mut self, action: &Action) {
        if matches!(action, Action::RenewLease) {
            return;
        }
        let text = match action {
            Action::MarkStep { step } => format!("── {}", step.as_str()),
            Action::Wait {
                reason,
                deadline: Some(d),
                ..
            } => format!(
                "waiting: {reason} (times out at {})",
                Timestamp::from_second(*d)
                    .map(|t| t.strftime("%H:%M:%S").to_string())
                    .unwrap_or_default()
            ),
            Action::Refuse { .. } => "refused by a gate; nothing was changed".into(),
            other => other.describe(),
        };
        let is_wait = matches!(
            action,
            Action::Wait { .. } | Action::WaitForLease { .. } | Action::Paused { .. }
        );
        if is_wait && self.last.as_deref() == Some(text.as_str()) {
            return;
        }
        self.last = Some(text.clone());
        let fields =
            json!({"action": kubeview::time::with_times(json!(action), &["deadline", "until"])});
        self.line(&text, fields);
        if let Action::Refuse { gates } = action {
            self.gates(gates);
        }
    }

    /// Every gate's verdict.
    pub fn gates(&mut self, gates: &[Gate]) {
        for g in gates {
            match self.format {
                Format::Text => println!(
                    "  {} {:<22} {}",
                    if g.passed { "pass" } else { "FAIL" },
                    g.name.as_str(),
                    g.reason
                ),
                Format::Json => {}
            }
        }
    }

    /// A swap's dry run: its gates and steps.
    pub fn plan(&mut self, out: &str, incoming: &str, plan: &Plan) {
        self.dry_run(
            &format!("swap out {out}, in {incoming}"),
            "`fleet-role swap` without --dry-run would start now",
            json!({"out": out, "in": incoming}),
            plan,
        );
    }

    /// A grow's or shrink's dry run (`what`: `grow` or `shrink`, of
    /// `nodes` in turn).
    pub fn resize_plan(&mut self, what: &str, nodes: &[&str], plan: &Plan) {
        let key = if what == "grow" { "in" } else { "out" };
        self.dry_run(
            &format!("{what} with {} in turn", nodes.join(", ")),
            &format!("the {what} could start now (this version builds its dry run only)"),
            json!({"move": what, key: nodes}),
            plan,
        );
    }

    /// A dry run's gates and steps, each step with its fault tolerance;
    /// `fields`: what the JSON line says the plan is of.
    fn dry_run(&mut self, title: &str, ok_line: &str, fields: serde_json::Value, plan: &Plan) {
        let ok = fleetdecide::all_pass(&plan.gates);
        match self.format {
            Format::Text => {
                println!("dry run: {title}; nothing will be written");
                println!("gates:");
                self.gates(&plan.gates);
                println!("plan:");
                for (i, s) in plan.steps.iter().enumerate() {
                    println!("  {}. {}", i + 1, s.step);
                    println!("     {}", s.tolerance.describe());
                }
                if ok {
                    println!("every gate passes: {ok_line}");
                } else {
                    println!("refused: a gate is shut (see FAIL above)");
                }
            }
            Format::Json => {
                let mut line =
                    json!({"dryRun": true, "ok": ok, "gates": plan.gates, "steps": plan.steps});
                if let (Some(l), Some(f)) = (line.as_object_mut(), fields.as_object()) {
                    l.extend(f.clone());
                }
                println!("{line}");
            }
        }
    }

    /// The final result and its exit code.
    pub fn result(&mut self, result: &str, code: u8, message: &str) {
        match self.format {
            Format::Text => {
                let (clock, elapsed) = self.stamp();
                println!("{clock} {:>+8.1}s  {result}: {message}", elapsed);
            }
            Format::Json => {
                let (clock, elapsed) = self.stamp();
                println!(
                    "{}",
                    json!({"time": clock, "elapsed": (elapsed * 10.0).round() / 10.0, "result": result, "exit": code, "message": message})
                );
            }
        }
    }
}

/// Prints an error once, at the edge, with its causes.
pub fn print_error(format: Format, err: &anyhow::Error, exit: protocol::exit::Exit) {
    // One line: a value from the API or a file must not start a new one.
    let mut message = protocol::exit::said_once(err.chain());
    // A marked error starts with its outcome's word already.
    if err.downcast_ref::<protocol::exit::Marked>().is_none() {
        message = format!("{}: {message}", exit.label());
    }
    match format {
        Format::Text => eprintln!("fleet-role: {message}"),
        Format::Json => println!(
            "{}",
            json!({"ok": false, "exit": exit.code(), "error": message})
        ),
    }
}
