//! The docs' tables that can drift from the code, held to it: the exit
//! codes (docs/reference.md's table, the lists in docs/controller.md and
//! docs/actuator.md, the swap's endings in docs/controller.md) against
//! `protocol::exit::Exit` and the controller's `Ending`, and every Event
//! reason the controller records against docs/reference.md (and the list in
//! docs/controller.md). Each test fails naming the row that is wrong,
//! missing or left over.

use std::{collections::BTreeSet, path::PathBuf};

use controller::{drive::Ending, events::EventReason};
use fleetdecide::StopKind;
use protocol::exit::Exit;

/// A file of the repository's docs/.
fn doc(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of the section headed `heading` (`## Exit codes`), up to the
/// next heading of the same or a higher level.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let level = heading.split(' ').next().unwrap();
    let start = text
        .lines()
        .position(|l| l == heading)
        .unwrap_or_else(|| panic!("no section {heading:?}"));
    let mut out_start = 0;
    let mut out_end = text.len();
    let mut offset = 0;
    for (i, line) in text.lines().enumerate() {
        if i == start + 1 {
            out_start = offset;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if i > start && hashes > 0 && hashes <= level.len() && line[hashes..].starts_with(' ') {
            out_end = offset;
            break;
        }
        offset += line.len() + 1;
    }
    &text[out_start..out_end]
}

/// The rows of the first Markdown table in `text` whose header's first
/// cell is `first`, as cells (trimmed), the header and its rule left out.
fn table(text: &str, first: &str) -> Vec<Vec<String>> {
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut lines = text.lines().skip_while(|l| {
        !(l.starts_with('|') && cells(l).first().map(String::as_str) == Some(first))
    });
    assert!(lines.next().is_some(), "no table headed {first:?}");
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(cells)
        .collect()
}

/// A word every account of `exit` uses, whatever else it says.
fn keyword(exit: Exit) -> &'static str {
    match exit {
        Exit::Done => "done",
        Exit::Refused => "refused",
        Exit::Usage => "usage error",
        Exit::FailedSafe => "fail",
        Exit::NeedsHuman => "stopped part-way",
        Exit::Degraded => "degraded",
    }
}

/// Whether `exit` ends a command with an error line (`refused: ...`).
fn said_as_error(exit: Exit) -> bool {
    match exit {
        Exit::Done | Exit::Degraded => false,
        Exit::Refused | Exit::Usage | Exit::FailedSafe | Exit::NeedsHuman => true,
    }
}

#[test]
fn the_reference_exit_code_table_has_every_code_with_the_codes_own_meaning_and_word() {
    let text = doc("reference.md");
    let rows = table(section(&text, "## Exit codes"), "code");
    let codes: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    let want: Vec<String> = Exit::ALL.iter().map(|e| e.code().to_string()).collect();
    assert_eq!(codes, want, "docs/reference.md's exit codes, in order");
    for (row, exit) in rows.iter().zip(Exit::ALL) {
        let [_, word, meaning] = row.as_slice() else {
            panic!(
                "docs/reference.md: row {row:?} is not `| code | stderr starts with | meaning |`"
            )
        };
        let want_word = if said_as_error(exit) {
            format!("`{}:`", exit.label())
        } else {
            "(no error)".to_string()
        };
        assert_eq!(
            word,
            &want_word,
            "docs/reference.md: exit {}'s stderr word",
            exit.code()
        );
        assert!(
            meaning.replace('`', "").starts_with(exit.meaning()),
            "docs/reference.md: exit {} says {meaning:?}; the code's meaning is {:?}",
            exit.code(),
            exit.meaning()
        );
    }
}

/// The `**N** text` items of the paragraph that starts with `opening`.
fn bold_list(text: &str, opening: &str) -> Vec<(u8, String)> {
    let start = text
        .find(opening)
        .unwrap_or_else(|| panic!("no paragraph {opening:?}"));
    let para = &text[start..];
    let para = &para[..para.find("\n\n").unwrap_or(para.len())];
    let para = para.replace('\n', " ");
    let parts: Vec<&str> = para.split("**").collect();
    // `**3** text **4** ...`: a code at every odd part, its text after it.
    parts
        .iter()
        .enumerate()
        .skip(1)
        .step_by(2)
        .filter_map(|(i, p)| {
            let code = p.parse::<u8>().ok()?;
            Some((code, parts.get(i + 1).map_or("", |t| t).to_string()))
        })
        .collect()
}

#[test]
fn the_exit_code_lists_of_the_controller_and_the_actuator_give_each_code_its_outcome() {
    for (file, opening) in [
        ("controller.md", "Exit codes, the same as the actuator's"),
        ("actuator.md", "Exit codes, the same as the controller's"),
    ] {
        let items = bold_list(&doc(file), opening);
        let codes: Vec<u8> = items.iter().map(|(c, _)| *c).collect();
        let want: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, want, "docs/{file}: the codes listed, in order");
        for ((code, said), exit) in items.iter().zip(Exit::ALL) {
            assert!(
                said.to_lowercase().contains(keyword(exit)),
                "docs/{file}: **{code}** says {said:?}, not {:?} ({:?})",
                keyword(exit),
                exit.meaning()
            );
        }
    }
}

#[test]
fn the_swaps_endings_table_gives_each_ending_the_exit_code_the_controller_exits_with() {
    let text = doc("controller.md");
    let rows = table(&text, "ending");
    let code = |e: Ending| e.exit().code();
    let swap = fleetdecide::VoterChange::Swap;
    let refused = code(Ending::WoundDown {
        change: swap,
        kind: StopKind::Refused,
        reason: String::new(),
    });
    let failed = code(Ending::WoundDown {
        change: swap,
        kind: StopKind::Failed,
        reason: String::new(),
    });
    let want = [
        (
            "done",
            code(Ending::Done {
                change: swap,
                warning: None,
            })
            .to_string(),
        ),
        (
            "wound down",
            format!("{refused} (a gate) or {failed} (a failure)"),
        ),
        (
            "stopped",
            code(Ending::Stopped {
                message: String::new(),
            })
            .to_string(),
        ),
        ("lost", code(Ending::Lost(String::new())).to_string()),
    ];
    let got: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r[0].as_str(), r[1].as_str()))
        .collect();
    let want: Vec<(&str, &str)> = want.iter().map(|(e, c)| (*e, c.as_str())).collect();
    assert_eq!(got, want, "docs/controller.md's endings and their exits");

    // And the sentence on a lost Lease, where the number once drifted.
    let lost = code(Ending::Lost(String::new()));
    let at = text
        .find("(\"lost the regrade Lease\"")
        .expect("docs/controller.md names the lost Lease's message");
    let before = &text[at.saturating_sub(12)..at];
    assert!(
        before.contains(&format!("exits {lost}")),
        "docs/controller.md: a lost Lease exits {lost}, the sentence says {before:?}"
    );
}

/// The Event reasons named in `text`: the words in backticks that are
/// one UpperCamelCase word.
fn reasons_named(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| {
            w.starts_with(|c: char| c.is_ascii_uppercase())
                && w.chars().all(|c| c.is_ascii_alphanumeric())
        })
        .map(String::from)
        .collect()
}

#[test]
fn every_event_reason_the_controller_records_is_listed_in_the_reference_and_nothing_else() {
    let recorded: BTreeSet<String> = EventReason::ALL
        .iter()
        .map(|r| r.as_str().to_string())
        .collect();
    let text = doc("reference.md");
    let rows = table(section(&text, "## Events"), "reason");
    let listed: BTreeSet<String> = rows.iter().flat_map(|r| reasons_named(&r[0])).collect();
    assert_eq!(
        rows.len(),
        listed.len(),
        "docs/reference.md: one reason per row"
    );
    let missing: Vec<_> = recorded.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&recorded).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/reference.md's Events: missing {missing:?}, never recorded {extra:?}"
    );

    let text = doc("controller.md");
    let start = text
        .find("records an Event on the Node concerned")
        .expect("docs/controller.md lists the Events");
    let para = &text[start..];
    let para = &para[..para.find("tells the story").unwrap()];
    let listed = reasons_named(para);
    let missing: Vec<_> = recorded.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&recorded).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/controller.md's Events: missing {missing:?}, never recorded {extra:?}"
    );
}
