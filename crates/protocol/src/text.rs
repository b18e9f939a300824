//! Untrusted values made safe for one line of output: the one rule every
//! crate uses before it logs, reports or prints text another principal wrote.

// === Helpers ===

/// How many characters [`one_line`] keeps.
pub const ONE_LINE_MAX: usize = 240;

/// An untrusted value made safe for one line of output: control characters
/// escaped, at most [`ONE_LINE_MAX`] characters.
pub fn one_line(raw: &str) -> String {
    one_line_within(raw, ONE_LINE_MAX)
}

/// [`one_line`] with its own bound: control characters escaped (`\n`,
/// `\u{1b}`), at most `max` characters of the escaped text, then `…` if
/// anything was cut. An escape is never cut in half, so what is shown can
/// always be read back.
pub fn one_line_within(raw: &str, max: usize) -> String {
    let mut out = String::new();
    let mut len = 0usize;
    for c in raw.chars() {
        // A control character is shown escaped; no allocation per
        // character (a report's reason can be long and hostile).
        let piece = c.escape_default();
        let width = if c.is_control() { piece.len() } else { 1 };
        if len.saturating_add(width) > max {
            out.push('…');
            break;
        }
        len += width;
        if c.is_control() {
            out.extend(piece);
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_untrusted_value_is_shown_on_one_line() {
        assert_eq!(one_line("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        assert!(one_line(&"x".repeat(1000)).chars().count() <= ONE_LINE_MAX + 1);
    }

    #[test]
    fn a_value_is_cut_only_past_its_bound_and_never_inside_an_escape() {
        assert_eq!(one_line_within("abcd", 4), "abcd");
        assert_eq!(one_line_within("abcde", 4), "abcd…");
        assert_eq!(one_line_within("ab\u{1b}", 4), "ab…");
        assert_eq!(one_line_within("ab\n", 4), "ab\\n");
        assert_eq!(one_line_within("", 0), "");
        assert_eq!(one_line_within("a", 0), "…");
    }
}
