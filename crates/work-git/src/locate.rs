//! Reading a location the way a reviewer would: prose forms of `PATH:LINE`, one spelling per
//! path, and the quoted evidence compared with the lines the engine re-read.
//!
//! - [`prose_to_file_line`] rewrites what finders write instead of `PATH:LINE` — `a.rs#L42`,
//!   `a.rs#L4-L9`, `a.rs:L42`, `a.rs line 42`, `a.rs, line 42`, `a.rs (line 42)`,
//!   `a.rs lines 4-9`, `a.rs L42`, `line 42 of a.rs` — into `a.rs:42` (or `a.rs:4-9`), when the
//!   path part looks like a path.
//! - [`normalize_rel`] spells a relative path one way (`./`, `//`, a trailing `/`, `x/../`
//!   folded), refusing one that climbs out of the root.
//! - [`quotes`] and [`check_evidence`]: every span the finder quoted (in backticks or double
//!   quotes, or a bare evidence that reads as code) must occur, whitespace-normalised, within
//!   [`EVIDENCE_WINDOW`] lines of the claimed line.

use regex::Regex;
use std::sync::OnceLock;

/// How many lines either side of the claimed line(s) quoted evidence may come from.
pub const EVIDENCE_WINDOW: usize = 3;

/// The shortest quoted span that is compared (shorter ones are too common to prove anything).
const MIN_QUOTE: usize = 3;

fn prose_patterns() -> &'static [Regex] {
    static P: OnceLock<Vec<Regex>> = OnceLock::new();
    P.get_or_init(|| {
        [
            // a.rs#L42, a.rs#42, a.rs#L4-L9
            r"^(?P<p>[^\s#]+)#L?(?P<a>\d+)(?:-L?(?P<b>\d+))?$",
            // a.rs:L42, a.rs:L4-L9
            r"^(?P<p>[^\s:]+):L(?P<a>\d+)(?:-L?(?P<b>\d+))?$",
            // a.rs line 42, a.rs, line 42, a.rs (line 42), a.rs lines 4-9, a.rs (l. 42), a.rs L42
            r"(?i)^(?P<p>[^\s,()]+),?\s*\(?\s*(?:lines?|ln\.?|l\.|L)\s*(?P<a>\d+)(?:\s*(?:-|–|to)\s*(?P<b>\d+))?\s*\)?$",
            // line 42 of a.rs, lines 4-9 in a.rs
            r"(?i)^lines?\s+(?P<a>\d+)(?:\s*(?:-|–|to)\s*(?P<b>\d+))?\s+(?:of|in)\s+(?P<p>\S+)$",
        ]
        .iter()
        .filter_map(|p| Regex::new(p).ok())
        .collect()
    })
}

/// True when `s` reads as a file path: it has a `/` or a file extension, and no spaces.
pub(crate) fn path_like(s: &str) -> bool {
    if s.is_empty() || s.contains(char::is_whitespace) {
        return false;
    }
    s.contains('/')
        || s.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty() && (1..=5).contains(&ext.len()) && ext.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

/// Rewrites a prose location (`a.rs#L42`, `a.rs line 42`, …) into `PATH:LINE[-END]`; `None`
/// when `location` is not one of those forms.
pub fn prose_to_file_line(location: &str) -> Option<String> {
    let s = location.trim();
    for re in prose_patterns() {
        if let Some(c) = re.captures(s) {
            let p = c.name("p")?.as_str();
            if !path_like(p) {
                continue;
            }
            let a = c.name("a")?.as_str();
            return Some(match c.name("b") {
                Some(b) => format!("{p}:{a}-{}", b.as_str()),
                None => format!("{p}:{a}"),
            });
        }
    }
    None
}

/// Spells a relative path one way: empty and `.` segments dropped, `x/..` folded, a trailing
/// `/` removed. `None` when it climbs above the root or is empty.
pub fn normalize_rel(path: &str) -> Option<String> {
    let mut segs: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segs.pop()?;
            }
            s => segs.push(s),
        }
    }
    if segs.is_empty() { None } else { Some(segs.join("/")) }
}

/// Collapses every run of whitespace to one space and trims.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// True when a bare evidence text reads as code rather than prose: it has code punctuation and
/// few plain words.
fn reads_as_code(s: &str) -> bool {
    let t = s.trim();
    if t.is_empty() || t.contains(" — ") || t.contains(" -- ") || t.contains(" - ") {
        return false;
    }
    let code_chars = t.chars().any(|c| "(){}[];=<>".contains(c));
    let words = t.split_whitespace().filter(|w| w.len() >= 4 && w.chars().all(|c| c.is_ascii_lowercase())).count();
    code_chars && words < 3
}

/// The spans of `evidence` that claim to be source text: every `` `…` `` and `"…"` span, or,
/// when there is none, the whole evidence if it reads as code. A leading `PATH:LINE:` (grep
/// style) is dropped first. Spans shorter than three characters are not compared.
pub fn quotes(evidence: &str) -> Vec<String> {
    let mut text = evidence.trim();
    if let Some((head, tail)) = text.split_once(':')
        && path_like(head)
        && let Some(rest) = tail.strip_prefix(|c: char| c.is_ascii_digit())
    {
        let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
        if let Some(r) = rest.strip_prefix(':') {
            text = r.trim();
        }
    }
    let mut out = Vec::new();
    for delim in ['`', '"'] {
        let parts: Vec<&str> = text.split(delim).collect();
        // Odd-indexed parts sit between a pair of delimiters.
        for (i, part) in parts.iter().enumerate() {
            if i % 2 == 1 && i + 1 < parts.len() {
                let q = squash(part);
                if q.chars().count() >= MIN_QUOTE && !out.contains(&q) {
                    out.push(q);
                }
            }
        }
    }
    if out.is_empty() && reads_as_code(text) {
        let q = squash(text.trim_end_matches(['…', '.']).trim_end_matches("..."));
        if q.chars().count() >= MIN_QUOTE {
            out.push(q);
        }
    }
    out
}

/// Checks every quoted span of `evidence` against `lines` around `first..=last` (1-based).
/// `Err` names the first span that is not there.
pub fn check_evidence(lines: &[&str], first: usize, last: usize, evidence: &str) -> Result<(), String> {
    let qs = quotes(evidence);
    if qs.is_empty() {
        return Ok(());
    }
    let lo = first.saturating_sub(1).saturating_sub(EVIDENCE_WINDOW);
    let hi = (last + EVIDENCE_WINDOW).min(lines.len());
    let window: Vec<String> = lines[lo..hi].iter().map(|l| squash(l)).collect();
    let joined = window.join(" ");
    for q in &qs {
        let q = q.trim_end_matches('…').trim_end_matches("...").trim();
        if !joined.contains(q) {
            let shown: String = q.chars().take(80).collect();
            return Err(format!("the quoted evidence `{shown}` is not in lines {}-{hi} around the location", lo + 1));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_forms_become_file_lines() {
        for (prose, want) in [
            ("src/a.rs#L42", "src/a.rs:42"),
            ("src/a.rs#42", "src/a.rs:42"),
            ("src/a.rs#L4-L9", "src/a.rs:4-9"),
            ("a.rs:L42", "a.rs:42"),
            ("a.rs line 42", "a.rs:42"),
            ("a.rs, line 42", "a.rs:42"),
            ("a.rs (line 42)", "a.rs:42"),
            ("a.rs (Line 42)", "a.rs:42"),
            ("a.rs lines 4-9", "a.rs:4-9"),
            ("a.rs L42", "a.rs:42"),
            ("line 42 of src/a.rs", "src/a.rs:42"),
        ] {
            assert_eq!(prose_to_file_line(prose).as_deref(), Some(want), "{prose}");
        }
        for not in ["the job queue", "retry policy line 3", "Section (line 3)", "src/a.rs:42"] {
            assert_eq!(prose_to_file_line(not), None, "{not}");
        }
    }

    #[test]
    fn paths_have_one_spelling() {
        assert_eq!(normalize_rel("./src//a.rs/").as_deref(), Some("src/a.rs"));
        assert_eq!(normalize_rel("src/x/../a.rs").as_deref(), Some("src/a.rs"));
        assert_eq!(normalize_rel("../a.rs"), None);
        assert_eq!(normalize_rel("src/../../a.rs"), None);
        assert_eq!(normalize_rel("./"), None);
    }

    #[test]
    fn quoted_evidence_must_be_near_the_line() {
        let lines = ["fn a() {", "    let x = compute(1);", "    x.unwrap()", "}", "", "", "", "", "fn far() {}"];
        assert!(check_evidence(&lines, 2, 2, "`let x = compute(1);` then `x.unwrap()`").is_ok());
        assert!(check_evidence(&lines, 2, 2, "let   x = compute(1);").is_ok());
        assert!(check_evidence(&lines, 2, 2, "src/a.rs:2:    let x = compute(1);").is_ok());
        // Prose is not a quote; nothing to compare.
        assert!(check_evidence(&lines, 2, 2, "a.rs:2 — unwrap on a fallible call, no error path").is_ok());
        assert!(check_evidence(&lines, 2, 2, "calls compute() and then unwraps the result without checking").is_ok());
        // A fabricated quote, and a real one that is too far away.
        assert!(check_evidence(&lines, 2, 2, "`unsafe { transmute(x) }`").is_err());
        assert!(check_evidence(&lines, 2, 2, "unsafe { transmute(x) };").is_err());
        assert!(check_evidence(&lines, 2, 2, "`fn far() {}`").is_err());
        assert!(check_evidence(&lines, 6, 6, "`fn far() {}`").is_ok());
    }
}
