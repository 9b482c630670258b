//! Reviewer reports (`review inspect --report`, `review record --report` without
//! `--adjudication`): the older, pre-adjudication form the work-loop scripts classify.
//!
//! A finding is a line that starts with a bold numbered title `**N. title**` followed by its
//! citation in one of three forms: `` `file:line` `` (backticked), `Where: location.` or a bare
//! `file:line`. Its fingerprint is the sha256 of `file|line|title` (`location|0|title` for the
//! `Where:` form), the title including its `**` markers. A report with findings is
//! `findings`; otherwise it is `clean` when it says `Clean — ready to commit.` or has a line
//! `SHIP IT`; otherwise `invalid`.

use crate::common::sha256_hex;
use serde::Serialize;

/// The clean verdict of the general reviewer.
pub const CLEAN_SUBSTRING: &str = "Clean — ready to commit.";

/// What a reviewer report says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportClass {
    /// At least one finding.
    Findings,
    /// No finding and a clean verdict.
    Clean,
    /// Neither (or unreadable).
    Invalid,
}

/// The classification of a report: its class and its sorted, de-duplicated fingerprints.
pub fn classify(text: &str) -> (ReportClass, Vec<String>) {
    let mut fps = fingerprints(text);
    fps.sort();
    fps.dedup();
    let clean = text.contains(CLEAN_SUBSTRING)
        || text.split('\n').any(|l| l.strip_prefix("SHIP IT").is_some_and(|r| r.trim().is_empty()));
    let class = if !fps.is_empty() {
        ReportClass::Findings
    } else if clean {
        ReportClass::Clean
    } else {
        ReportClass::Invalid
    };
    (class, fps)
}

/// The fingerprint of every finding line, in order.
pub fn fingerprints(text: &str) -> Vec<String> {
    text.lines().filter_map(|raw| finding_key(raw.trim())).map(|k| sha256_hex(k.as_bytes())).collect()
}

fn finding_key(line: &str) -> Option<String> {
    let (title, rest) = split_title(line)?;
    let rest = rest.trim_start_matches(|c: char| c == '.' || c.is_whitespace());
    if let Some(after) = rest.strip_prefix('`')
        && let Some(end) = after.find('`')
        && end > 0
    {
        // The backticked form wins; a citation without `:line` is no finding.
        let citation = after[..end].trim();
        let (file, line_no) = file_line(citation)?;
        return Some(format!("{file}|{line_no}|{title}"));
    }
    if let Some(after) = rest.strip_prefix("Where:") {
        let after = after.trim_start();
        let loc: &str = after.split('.').next().unwrap_or("");
        if !loc.is_empty() {
            return Some(format!("{}|0|{title}", loc.trim()));
        }
    }
    let token = rest.split(char::is_whitespace).next().unwrap_or("");
    let citation = unquoted_citation(token)?;
    let (file, line_no) = file_line(citation)?;
    Some(format!("{file}|{line_no}|{title}"))
}

/// `**N. text**` at the start of the line → (the title with its markers, the rest).
fn split_title(line: &str) -> Option<(&str, &str)> {
    let body = line.strip_prefix("**")?;
    let digits = body.len() - body.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || !body[digits..].starts_with('.') {
        return None;
    }
    let text_start = digits + 1;
    let star = body[text_start..].find('*')? + text_start;
    if star == text_start || !body[star..].starts_with("**") {
        return None;
    }
    let end = 2 + star + 2;
    Some((&line[..end], &line[end..]))
}

/// The longest prefix of `token` that ends in `:<digits>` (with something before the colon).
fn unquoted_citation(token: &str) -> Option<&str> {
    let bytes = token.as_bytes();
    (1..token.len()).rev().filter(|&i| bytes[i] == b':').find_map(|i| {
        let digits = token[i + 1..].len() - token[i + 1..].trim_start_matches(|c: char| c.is_ascii_digit()).len();
        (digits > 0).then(|| &token[..i + 1 + digits])
    })
}

/// The file (before the first colon) and the line (the digits right after it).
fn file_line(citation: &str) -> Option<(&str, &str)> {
    let (file, rest) = citation.split_once(':')?;
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    (digits > 0).then(|| (file, &rest[..digits]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_citation_forms_and_the_verdicts() {
        let k = |l: &str| finding_key(l);
        assert_eq!(k("**1. Race in lock** `src/a.rs:12`").as_deref(), Some("src/a.rs|12|**1. Race in lock**"));
        assert_eq!(k("**2. Bad.** src/b.py:7.").as_deref(), Some("src/b.py|7|**2. Bad.**"));
        assert_eq!(
            k("**3. Confusing.** Where: the login page. More").as_deref(),
            Some("the login page|0|**3. Confusing.**")
        );
        assert_eq!(k("**4. No line** `src/a.rs`"), None);
        assert_eq!(k("**Summary** nothing"), None);
        assert_eq!(classify("Clean — ready to commit.\n").0, ReportClass::Clean);
        assert_eq!(classify("## Verdict\nSHIP IT\n").0, ReportClass::Clean);
        assert_eq!(classify("nothing here\n").0, ReportClass::Invalid);
        let (c, fps) = classify("**1. A** `x:1`\n**1. A** `x:1`\nClean — ready to commit.\n");
        assert_eq!((c, fps.len()), (ReportClass::Findings, 1));
    }
}
