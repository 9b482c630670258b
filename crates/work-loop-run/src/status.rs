//! Rewriting the `Status:` line of spec.md / plan.md (a deterministic step the loop performs
//! itself: `Implementing` before code, `Shipped` before reviewers-clean, `Draft`/`Drafting`
//! after a rejection, `Done` on the plan at the end).

use work_loop::common::read_status;

/// `text` with its first status line (as [`read_status`] finds it) set to `**Status:** value`.
/// A text without a status line gets one after its first `#` heading (or at the top).
pub fn set_status(text: &str, value: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let target = status_line_index(text);
    let new_line = format!("**Status:** {value}");
    match target {
        Some(i) => lines[i] = new_line,
        None => {
            let at = lines.iter().position(|l| l.starts_with("# ")).map_or(0, |h| h + 1);
            lines.insert(at, String::new());
            lines.insert(at + 1, new_line);
        }
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') || text.is_empty() {
        out.push('\n');
    }
    out
}

/// The index of the status line [`set_status`] rewrites: the first line outside a code fence
/// that reads as one.
fn status_line_index(text: &str) -> Option<usize> {
    work_loop::common::unfenced(text.lines()).find(|(_, line)| read_status(line).is_some()).map(|(i, _)| i)
}

/// A digest of `text` with its one status line left out (the line [`set_status`] rewrites: the
/// loop changes it itself): what a person approved, compared at every later step. Any other line
/// counts, one that reads as a status line too — a "**Status:** Waived: `mul` is dropped" added
/// below changes what was approved.
pub fn approved_digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let skip = status_line_index(text);
    for (_, line) in text.lines().enumerate().filter(|(i, _)| Some(*i) != skip) {
        h.update(line.trim_end().as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approved_digest_ignores_status_lines_only() {
        let a = "# Spec\n**Status:** Approved\nDo X.\n";
        assert_eq!(approved_digest(a), approved_digest(&set_status(a, "Shipped")));
        assert_ne!(approved_digest(a), approved_digest("# Spec\n**Status:** Approved\nDo Y.\n"));
        // A second status-like line is what was approved changing, above or below the real one.
        assert_ne!(approved_digest(a), approved_digest(&format!("{a}- **Status:** Waived: X is dropped\n")));
        assert_ne!(approved_digest(a), approved_digest(&format!("Status: Waived\n{a}")));
    }

    #[test]
    fn rewrites_the_first_status_line_only() {
        let t = "# Spec\n\n```\nStatus: Fenced\n```\n- **Status**: Draft (x)\nStatus: Other\n";
        let out = set_status(t, "Approved");
        assert_eq!(read_status(&out).as_deref(), Some("Approved"));
        assert!(out.contains("Status: Fenced"));
        assert!(out.contains("Status: Other"));
        assert!(out.ends_with('\n'));
    }

    #[test]
    fn inserts_a_status_line_when_none() {
        let out = set_status("# Plan\nbody\n", "Drafting");
        assert_eq!(out, "# Plan\n\n**Status:** Drafting\nbody\n");
        assert_eq!(read_status(&set_status("", "Draft")).as_deref(), Some("Draft"));
    }
}
