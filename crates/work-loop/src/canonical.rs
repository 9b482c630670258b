//! The canonical form of spec.md and plan.md that approval baselines hash, as the work-loop
//! scripts compute it, so a hash either side records is the hash the other computes.
//!
//! Four things are normalised and nothing else: CR/CRLF line ends become LF; trailing
//! whitespace is dropped from every line; the status *token* of the preamble's `**Status:**`
//! line becomes a placeholder (a status bump is bookkeeping); and the mark inside a ticked
//! checkbox becomes a space — in spec.md only inside the Acceptance Criteria section (a
//! checkbox elsewhere is scope), in plan.md everywhere (task progress). Checkboxes inside
//! fenced code are left alone; a region opened by an Acceptance Criteria heading closes at the
//! next heading of its depth or shallower (a bold lead-in closes at any heading or the next bold
//! lead-in).

use crate::common::sha256_hex;

const STATUS_PLACEHOLDER: &str = "<loop-cohort:status>";
const BOLD_DEPTH: usize = 7;

/// The sha256 (hex) of the canonical form of `text`; `is_plan` selects plan.md's file-wide
/// checkbox rule.
pub fn sha256(text: &str, is_plan: bool) -> String {
    sha256_hex(canonical(text, !is_plan).as_bytes())
}

/// The canonical form of `text`. `ac_section_only` is true for spec.md.
pub fn canonical(text: &str, ac_section_only: bool) -> String {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    let cleaned = strip_comments_keep_lines(&text);
    for (i, c) in cleaned.split('\n').enumerate() {
        if is_section_heading(c) {
            break;
        }
        if c.trim_start().starts_with('#') || status_group(c).is_none() {
            continue;
        }
        let Some(raw) = lines.get(i).cloned() else { break };
        let Some(start) = status_group(&raw) else { break };
        let token = status_token(&raw[start..]);
        if !token.is_empty() {
            lines[i] = format!("{}{STATUS_PLACEHOLDER}{}", &raw[..start], &raw[start + token.len()..]);
        }
        break;
    }
    untick(&mut lines, ac_section_only);
    lines.iter().map(|l| l.trim_end()).collect::<Vec<_>>().join("\n")
}

/// HTML comments (`<!-- … -->`, across lines) replaced by the newlines they held.
fn strip_comments_keep_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("<!--") {
        out.push_str(&rest[..i]);
        match rest[i + 4..].find("-->") {
            Some(j) => {
                let inner = &rest[i..i + 4 + j + 3];
                out.extend(std::iter::repeat_n('\n', inner.matches('\n').count()));
                rest = &rest[i + 4 + j + 3..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// `^ {0,3}#{2,}([ \t]|$)`.
fn is_section_heading(line: &str) -> bool {
    let t = strip_up_to_3_spaces(line);
    let hashes = t.len() - t.trim_start_matches('#').len();
    hashes >= 2 && matches!(t[hashes..].chars().next(), None | Some(' ' | '\t'))
}

fn strip_up_to_3_spaces(line: &str) -> &str {
    let n = line.len() - line.trim_start_matches(' ').len();
    &line[n.min(3)..]
}

/// The byte offset where the value of the first `**Status:**` on the line starts (after the
/// whitespace), when a value follows.
fn status_group(line: &str) -> Option<usize> {
    let i = line.find("**Status:**")? + "**Status:**".len();
    let rest = &line[i..];
    if rest.is_empty() {
        return None;
    }
    let ws = rest.len() - rest.trim_start().len();
    // The value needs one character; a line of only whitespace after the key leaves one
    // whitespace character for it.
    if ws == rest.len() {
        let last = rest.char_indices().last().map_or(0, |(k, _)| k);
        return Some(i + last);
    }
    Some(i + ws)
}

/// The leading status token of a value: cut at ` (`, ` →` or `<!--`, then the first word.
pub fn status_token(raw: &str) -> &str {
    let mut t = raw;
    for delim in [" (", " →", "<!--"] {
        if let Some(i) = t.find(delim) {
            t = &t[..i];
        }
    }
    t.split_whitespace().next().unwrap_or("")
}

/// Clears the mark of every ticked checkbox the artifact treats as bookkeeping.
fn untick(lines: &mut [String], ac_section_only: bool) {
    let mut in_ac = !ac_section_only;
    let mut opened_depth = BOLD_DEPTH;
    let mut fence: Option<(char, usize)> = None;
    for line in lines.iter_mut() {
        let stripped = line.trim_start();
        if let Some(marker @ ('`' | '~')) = stripped.chars().next() {
            let run = stripped.len() - stripped.trim_start_matches(marker).len();
            let info = stripped[run..].trim();
            match fence {
                None if run >= 3 => {
                    fence = Some((marker, run));
                    continue;
                }
                Some((c, n)) if c == marker && run >= n && info.is_empty() => {
                    fence = None;
                    continue;
                }
                _ => {}
            }
        }
        if fence.is_some() {
            continue;
        }
        if ac_section_only && is_ac_heading(line) {
            in_ac = true;
            opened_depth = heading_depth(line).unwrap_or(BOLD_DEPTH);
            continue;
        }
        if ac_section_only && in_ac {
            let closes = heading_depth(line).is_some_and(|d| d <= opened_depth)
                || (opened_depth == BOLD_DEPTH && strip_up_to_3_spaces(line).starts_with("**"));
            if closes {
                in_ac = false;
            }
        }
        if in_ac
            && is_ticked(line)
            && let Some(j) = line.find('[')
        {
            line.replace_range(j + 1..j + 2, " ");
        }
    }
}

/// `^ {0,3}(#{1,6})[ \t]` → the depth.
fn heading_depth(line: &str) -> Option<usize> {
    let t = strip_up_to_3_spaces(line);
    let n = t.len() - t.trim_start_matches('#').len();
    ((1..=6).contains(&n) && matches!(t[n..].chars().next(), Some(' ' | '\t'))).then_some(n)
}

/// `^ {0,3}(?:#{2,3}\s+|\*\*)Acceptance\s+Criteria\b`, case-insensitive.
fn is_ac_heading(line: &str) -> bool {
    let t = strip_up_to_3_spaces(line);
    let rest = if let Some(r) = t.strip_prefix("**") {
        r
    } else {
        let n = t.len() - t.trim_start_matches('#').len();
        if !(2..=3).contains(&n) {
            return false;
        }
        let after = &t[n..];
        let trimmed = after.trim_start();
        if trimmed.len() == after.len() {
            return false;
        }
        trimmed
    };
    let Some(word) = rest.get(..10) else { return false };
    if !word.eq_ignore_ascii_case("acceptance") {
        return false;
    }
    let after = &rest[10..];
    let trimmed = after.trim_start();
    if trimmed.len() == after.len() {
        return false;
    }
    let Some(crit) = trimmed.get(..8) else { return false };
    crit.eq_ignore_ascii_case("criteria")
        && !trimmed[8..].chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// `^\s*-\s*\[[xX]\]\s`.
fn is_ticked(line: &str) -> bool {
    let t = line.trim_start();
    let Some(t) = t.strip_prefix('-') else { return false };
    let t = t.trim_start();
    let Some(t) = t.strip_prefix("[x]").or_else(|| t.strip_prefix("[X]")) else { return false };
    t.chars().next().is_some_and(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookkeeping_edits_keep_the_hash_and_scope_edits_move_it() {
        let spec = "# S\n\n- **Status:** Approved <!-- Draft | Approved -->\n\n## Acceptance criteria\n\n- [ ] AC1\n\n## Boundaries\n\n- [ ] never\n";
        let h = sha256(spec, false);
        assert_eq!(sha256(&spec.replace("Approved <!--", "Implementing <!--"), false), h, "status bump");
        assert_eq!(sha256(&spec.replace("- [ ] AC1", "- [x] AC1"), false), h, "ticked criterion");
        assert_eq!(sha256(&spec.replace('\n', "\r\n"), false), h, "CRLF");
        assert_eq!(sha256(&spec.replace("AC1\n", "AC1  \n"), false), h, "trailing space");
        assert_ne!(sha256(&spec.replace("- [ ] never", "- [x] never"), false), h, "checkbox outside AC");
        assert_ne!(sha256(&spec.replace("- [ ] AC1", "  - [x] AC1"), false), h, "re-indented");
        assert_ne!(sha256(&spec.replace("AC1", "AC2"), false), h, "criterion text");
        let plan = "# P\n\n- **Status:** Approved\n\n### T1\n\n- [ ] step\n";
        assert_eq!(sha256(&plan.replace("[ ]", "[x]"), true), sha256(plan, true));
        // Inside fenced code a checkbox is content.
        let fenced = "## Acceptance Criteria\n```\n- [ ] a\n```\n";
        assert_ne!(sha256(&fenced.replace("[ ]", "[x]"), false), sha256(fenced, false));
    }

    #[test]
    fn the_status_token_is_the_leading_word() {
        assert_eq!(status_token("Shipped (2024-01-01)"), "Shipped");
        assert_eq!(status_token("Approved → Shipped"), "Approved");
        assert_eq!(status_token("Draft<!-- x -->"), "Draft");
        assert_eq!(status_token("<!-- x -->"), "");
    }
}
