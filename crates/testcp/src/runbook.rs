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

/// The text of the block marked `mark` in `text`, as written (a shell
/// function spans lines), or why there is none.
pub fn block_in<'a>(text: &'a str, mark: &str) -> Result<&'a str, String> {
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
    Ok(&block[..end])
}

/// The commands of the block marked `mark` in `text`, or why there are none.
pub fn commands_in(text: &str, mark: &str) -> Result<Vec<String>, String> {
    let marker = format!("<!-- runbook-test: {mark} -->");
    let commands: Vec<String> = block_in(text, mark)?
        .lines()
        .map(|l| l.split(" #").next().unwrap_or_default().trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if commands.is_empty() {
        return Err(format!("{marker}'s block holds no command"));
    }
    Ok(commands)
}

fn recovery_text() -> String {
    let path = recovery_md();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The block marked `mark` in docs/recovery.md as written (the `etcd`
/// shell function the etcd commands need); panics (the test fails) when
/// the doc has no such block.
pub fn block(mark: &str) -> String {
    block_in(&recovery_text(), mark)
        .unwrap_or_else(|e| panic!("docs/recovery.md: {e}"))
        .to_string()
}

/// The commands of the block marked `mark` in docs/recovery.md; panics
/// (the test fails) when the doc has no such block.
pub fn commands(mark: &str) -> Vec<String> {
    commands_in(&recovery_text(), mark).unwrap_or_else(|e| panic!("docs/recovery.md: {e}"))
}

/// The kubectl the runbooks' tests run: `$FLEET_ROLE_KUBECTL`, which
/// scripts/test.sh sets to the one it builds into `.cache/`. A test that
/// needs it fails without it rather than skip.
pub fn kubectl() -> PathBuf {
    match std::env::var_os("FLEET_ROLE_KUBECTL").map(PathBuf::from) {
        Some(p) if p.is_file() => p,
        _ => panic!("FLEET_ROLE_KUBECTL names no file: scripts/test.sh builds kubectl and sets it"),
    }
}

/// Where a runbook's lines run, as an administrator runs them.
pub struct Shell<'a> {
    /// A directory of the test's own: its `runbook-bin` holds the programs
    /// (first on `PATH`), and it is `HOME` (kubectl's discovery cache,
    /// `~/.kube/cache`, is keyed by host and port: shared, it hands one
    /// test's plane what another plane on the same port served).
    pub home: &'a Path,
    /// The programs by the names the doc calls them (`fleet-role`,
    /// `kubectl`).
    pub programs: &'a [(&'a str, &'a Path)],
    /// More of the environment (`KUBECONFIG`, `FLEET_ROLE_CONFIG`).
    pub env: &'a [(&'a str, &'a Path)],
    /// A secret no line may print (the administrator's token).
    pub secret: &'a str,
}

/// Runs the block of docs/recovery.md marked `mark`, each line as written
/// through `sh -c` (pipes and all) in `shell`, with `fill`'s placeholders
/// replaced. Each line is bounded (120 s) and must exit 0 unless it is a
/// `fleet-role status`, whose exit code is the test's to check; returns
/// each line's output.
pub async fn run(
    shell: &Shell<'_>,
    mark: &str,
    fill: &[(&str, &str)],
) -> Vec<(String, std::process::Output)> {
    let bin = shell.home.join("runbook-bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, program) in shell.programs {
        let link = bin.join(name);
        if !link.exists() {
            std::os::unix::fs::symlink(program, link).unwrap();
        }
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut outs = Vec::new();
    for command in commands(mark) {
        let command = fill
            .iter()
            .fold(command, |c, (from, to)| c.replace(from, to));
        eprintln!("runbook {mark}: {command}");
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            tokio::process::Command::new("sh")
                .args(["-c", &command])
                .env("PATH", &path)
                .env("HOME", shell.home)
                .envs(shell.env.iter().copied())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .unwrap_or_else(|_| panic!("{mark}: `{command}` ran past 120 s"))
        .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("{text}");
        assert!(
            !text.contains(shell.secret),
            "{mark}: `{command}` printed the administrator's token"
        );
        assert!(
            out.status.success() || command.starts_with("fleet-role status"),
            "{mark}: `{command}` failed ({}):\n{text}",
            out.status
        );
        outs.push((command, out));
    }
    outs
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
    fn a_marked_block_is_read_whole_for_a_shell_function_that_spans_lines() {
        let doc = "<!-- runbook-test: f -->\n```sh\nf() {\n  echo \"$@\"  # said\n}\n```\n";
        assert_eq!(
            block_in(doc, "f").unwrap(),
            "f() {\n  echo \"$@\"  # said\n}\n"
        );
        assert!(block_in(doc, "g").unwrap_err().contains("no block"));
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
