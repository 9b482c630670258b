//! Rewriting the `Status:` line of spec.md / plan.md (a deterministic step the loop performs
//! itself: `Implementing` before code, `Shipped` before reviewers-clean, `Draft`/`Drafting`
//! after a rejection, `Done` on the plan at the end).

use work_loop::common::read_status;

/// `text` with its first status line (as [`read_status`] finds it) set to `**Status:** value`.
/// A text without a status line gets one after its first `#` heading (or at the top).
pub fn set_status(text: &str, value: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut fence = false;
    let mut target = None;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if !fence && read_status(line).is_some() {
            target = Some(i);
            break;
        }
    }
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

/// A digest of `text` with every status line left out (the loop rewrites those itself): what a
/// person approved, compared at every later step.
pub fn approved_digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for line in text.lines().filter(|l| read_status(l).is_none()) {
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
