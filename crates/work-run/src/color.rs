//! The one colour decision (`--color auto|always|never`): every coloured piece of output asks
//! [`stderr`] whether to colour.
//!
//! - `auto` (the default): colour only when stderr is a terminal, `NO_COLOR` is unset or
//!   empty, and `TERM` is not `dumb`;
//! - `always`: colour even into a pipe or a file (an explicit flag overrides `NO_COLOR`);
//! - `never`: no escape code for colour anywhere.
//!
//! What is coloured: the live display's glyphs (`●` `✓` `○` `⚠`) and the `error:` /
//! `warning:` prefix of a line on stderr.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU8, Ordering};

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// Colour on a terminal, unless `NO_COLOR` or `TERM=dumb`.
    #[default]
    Auto,
    /// Colour always.
    Always,
    /// Colour never.
    Never,
}

impl std::str::FromStr for Choice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Choice::Auto),
            "always" => Ok(Choice::Always),
            "never" => Ok(Choice::Never),
            other => Err(format!("use colour `{other}`: expected auto, always or never")),
        }
    }
}

static CHOICE: AtomicU8 = AtomicU8::new(0);

/// Sets the choice for the rest of the process (from the global flag).
pub fn set_choice(c: Choice) {
    CHOICE.store(c as u8, Ordering::SeqCst);
}

/// The choice in force.
pub fn choice() -> Choice {
    match CHOICE.load(Ordering::SeqCst) {
        1 => Choice::Always,
        2 => Choice::Never,
        _ => Choice::Auto,
    }
}

/// Whether output on stderr is coloured.
pub fn stderr() -> bool {
    decide(choice(), std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR"), std::env::var("TERM").ok())
}

/// The decision, from its inputs.
fn decide(c: Choice, terminal: bool, no_color: Option<std::ffi::OsString>, term: Option<String>) -> bool {
    match c {
        Choice::Always => true,
        Choice::Never => false,
        Choice::Auto => terminal && no_color.is_none_or(|v| v.is_empty()) && term.as_deref() != Some("dumb"),
    }
}

/// `text` in the SGR colour `code` when colour is on.
pub fn paint(text: &str, code: &str, on: bool) -> String {
    if on { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_string() }
}

/// A stderr line with its `error:` (red) or `warning:` (yellow) prefix coloured when colour
/// is on; any other line unchanged.
pub fn prefix(line: &str) -> std::borrow::Cow<'_, str> {
    for (p, code) in [("error:", "31"), ("warning:", "33")] {
        if let Some(rest) = line.strip_prefix(p)
            && stderr()
        {
            return format!("{}{rest}", paint(p, code, true)).into();
        }
    }
    line.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_colours_only_a_terminal_without_no_color() {
        assert!(decide(Choice::Auto, true, None, None));
        assert!(decide(Choice::Auto, true, Some("".into()), Some("xterm".into())));
        assert!(!decide(Choice::Auto, false, None, None));
        assert!(!decide(Choice::Auto, true, Some("1".into()), None));
        assert!(!decide(Choice::Auto, true, None, Some("dumb".into())));
    }

    #[test]
    fn always_and_never_are_final() {
        assert!(decide(Choice::Always, false, Some("1".into()), Some("dumb".into())));
        assert!(!decide(Choice::Never, true, None, None));
    }
}
