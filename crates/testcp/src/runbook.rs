//! The runbook's commands as docs/recovery.md gives them, for the tests
//! that produce each stuck state and then run what the doc says: a runbook
//! whose command changes, or goes away, fails its test.
//!
//! A block is marked for the tests by the line `<!-- runbook-test: MARK -->`
//! right before its ```` ```sh ```` fence. Its commands are read one per
//! line, a trailing ` # comment` and blank or comment lines left out; the
//! placeholders in capitals (`OUT`, `IN`, `MEMBER_ID`) are the test's to
//! fill in.

use std::path::{Path, PathBuf};

/// docs/recovery.md of this source tree.
pub fn recovery_md() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/recovery.md")
}

/// The commands of the block marked `mark` in `text`, or why there are none.
pub fn commands_in(text: &str, mark: &str) -> Result<Vec<String>, String> {
    let marker = format!("<!-- runbook-test: {mark} -->");
    let at = text
        .find(&marker)
        .ok_or_else(|| format!("no block is marked {marker}"))?;
    let block = text[at + marker.len()..]
        .trim_start()
        .strip_prefix("```sh\n")
        .ok_or_else(|| format!("{marker} is not followed by a sh block"))?;
    let end = block
        .find("```")
        .ok_or_else(|| format!("{marker}'s block does not end"))?;
    let commands: Vec<String> = block[..end]
        .lines()
        .map(|l| l.split(" #").next().unwrap_or_default().trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if commands.is_empty() {
        return Err(format!("{marker}'s block holds no command"));
    }
    Ok(commands)
}

/// The commands of the block marked `mark` in docs/recovery.md; panics
/// (the test fails) when the doc has no such block.
pub fn commands(mark: &str) -> Vec<String> {
    let path = recovery_md();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    commands_in(&text, mark).unwrap_or_else(|e| panic!("docs/recovery.md: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_blocks_commands_are_read_without_their_comments() {
        let doc = "text\n<!-- runbook-test: x -->\n```sh\n# look first\nfleet-role abort   # winds it down\n\nfleet-role status\n```\nmore\n";
        assert_eq!(
            commands_in(doc, "x").unwrap(),
            ["fleet-role abort", "fleet-role status"]
        );
        assert!(commands_in(doc, "y").unwrap_err().contains("no block"));
        let empty = "<!-- runbook-test: x -->\n```sh\n# nothing\n```\n";
        assert!(commands_in(empty, "x").unwrap_err().contains("no command"));
        let unfenced = "<!-- runbook-test: x -->\nfleet-role abort\n";
        assert!(commands_in(unfenced, "x").is_err());
    }

    #[test]
    fn every_marked_block_of_the_runbook_holds_commands() {
        let text = std::fs::read_to_string(recovery_md()).unwrap();
        let marks: Vec<&str> = text
            .match_indices("<!-- runbook-test: ")
            .map(|(i, m)| {
                let rest = &text[i + m.len()..];
                &rest[..rest.find(" -->").unwrap()]
            })
            .collect();
        assert!(!marks.is_empty());
        for mark in marks {
            assert!(commands_in(&text, mark).is_ok(), "{mark}");
        }
    }
}
