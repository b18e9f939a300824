//! Untrusted values made safe for one line of output: the one rule every
//! crate uses before it logs, reports or prints text another principal wrote.

// === Helpers ===

/// An untrusted value made safe for one line of output: control characters
/// escaped, at most 240 characters.
pub fn one_line(raw: &str) -> String {
    let mut out = String::new();
    for (i, c) in raw.chars().enumerate() {
        if i >= 240 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
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
        assert!(one_line(&"x".repeat(1000)).chars().count() <= 241);
    }
}
