//! Output for people (one line each) and for machines (`--output json`).

use serde::Serialize;

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Lines for a person.
    #[default]
    Text,
    /// One JSON object on stdout.
    Json,
}

/// Prints a command's result: `text` lines for a person, or `json` as one
/// object.
pub fn print<T: Serialize>(format: Format, text: &[String], json: &T) {
    match format {
        Format::Text => {
            for line in text {
                println!("{line}");
            }
        }
        Format::Json => println!(
            "{}",
            serde_json::to_string(json).expect("output serializes")
        ),
    }
}

/// Prints an error once, at the edge: one line on stderr, or a JSON object
/// on stdout with `--output json`.
pub fn print_error(format: Format, err: &anyhow::Error, exit: protocol::exit::Exit) {
    let mut message = protocol::exit::said_once(err.chain());
    // A marked error starts with its outcome's word already.
    if err.downcast_ref::<protocol::exit::Marked>().is_none() {
        message = format!("{}: {message}", exit.label());
    }
    match format {
        Format::Text => eprintln!("fleet-role-actuator: {message}"),
        Format::Json => println!(
            "{}",
            serde_json::json!({ "ok": false, "exit": exit.code(), "error": message })
        ),
    }
}
