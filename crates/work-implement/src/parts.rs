//! Review in parts: a task's diff larger than one reviewer brief holds is never cut and never
//! skipped. It is split into parts that each fit — at file boundaries, one huge file at hunk
//! boundaries, one huge hunk at line boundaries (the hunk header repeated, marked continued) —
//! every part is reviewed by its own dispatch, and the verdicts are combined: one non-clean
//! part makes the verdict non-clean with every part's findings; it is clean only when every
//! part is clean and each clean part named a file of its own part in `files_read`.
//!
//! Above [`MAX_PARTS`] parts, a single diff line larger than a part, or a list of the change's
//! paths that alone fills half a brief, the task is BLOCKED `too-large-to-review`.

use crate::tree::TaskDiff;
use serde_json::{Value, json};

/// The most parts one review is split into (at the reviewers' 120 000-byte brief, about
/// 960 000 bytes of diff); a larger change is BLOCKED `too-large-to-review`.
pub const MAX_PARTS: usize = 8;

/// One part of a task's diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The diff text of this part (whole file sections, or pieces of one file's section each
    /// headed by the file's `diff --git` header).
    pub text: String,
    /// The paths this part shows, in diff order.
    pub names: Vec<String>,
}

/// One file's section of a `git diff`: its header (up to the first hunk) and its hunks.
struct Section {
    name: String,
    header: String,
    hunks: Vec<String>,
}

impl Section {
    fn len(&self) -> usize {
        self.header.len() + self.hunks.iter().map(String::len).sum::<usize>()
    }
}

/// The path a `diff --git a/P b/P` line names (renames are off, so both sides agree): one of
/// `known` when it matches one exactly, else the line's own reading.
fn section_name(line: &str, known: &[String]) -> String {
    let rest = line.trim_end_matches('\n').strip_prefix("diff --git ").unwrap_or(line);
    if let Some(k) = known.iter().find(|k| rest == format!("a/{k} b/{k}")) {
        return k.clone();
    }
    let half = rest.len().saturating_sub(1) / 2;
    rest.get(..half).map(|a| a.trim_start_matches("a/").to_string()).unwrap_or_else(|| rest.to_string())
}

fn sections(diff: &str, known: &[String]) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    for line in diff.split_inclusive('\n') {
        if line.starts_with("diff --git ") {
            out.push(Section { name: section_name(line, known), header: line.to_string(), hunks: Vec::new() });
            continue;
        }
        let Some(s) = out.last_mut() else {
            // Text before the first file header (none from git): its own section.
            out.push(Section { name: String::new(), header: line.to_string(), hunks: Vec::new() });
            continue;
        };
        if line.starts_with("@@") {
            s.hunks.push(line.to_string());
        } else if let Some(h) = s.hunks.last_mut() {
            h.push_str(line);
        } else {
            s.header.push_str(line);
        }
    }
    out
}

/// A hunk larger than `room` cut at line boundaries; each later piece starts with the hunk's
/// header marked continued. `Err` names a single line larger than a piece can hold.
fn split_hunk(name: &str, hunk: &str, room: usize) -> Result<Vec<String>, String> {
    let mut lines = hunk.split_inclusive('\n');
    let head = lines.next().unwrap_or_default();
    let cont = format!("{} (continued)\n", head.trim_end_matches('\n'));
    let mut out = Vec::new();
    let mut cur = head.to_string();
    for line in lines {
        if cont.len() + line.len() > room {
            return Err(format!("{name} has one diff line of {} bytes", line.len()));
        }
        if cur.len() + line.len() > room {
            out.push(std::mem::replace(&mut cur, cont.clone()));
        }
        cur.push_str(line);
    }
    out.push(cur);
    Ok(out)
}

/// The pieces of one section, each at most `budget` bytes and headed by the file's header.
fn pieces(s: &Section, budget: usize) -> Result<Vec<String>, String> {
    if s.len() <= budget {
        return Ok(vec![format!("{}{}", s.header, s.hunks.concat())]);
    }
    let room = budget.saturating_sub(s.header.len());
    if room == 0 || s.hunks.is_empty() {
        return Err(format!("{} has a diff header of {} bytes", s.name, s.header.len()));
    }
    let mut out = Vec::new();
    let mut cur = s.header.clone();
    for hunk in &s.hunks {
        let parts = if hunk.len() <= room { vec![hunk.clone()] } else { split_hunk(&s.name, hunk, room)? };
        for h in parts {
            if cur.len() + h.len() > budget && cur.len() > s.header.len() {
                out.push(std::mem::replace(&mut cur, s.header.clone()));
            }
            cur.push_str(&h);
        }
    }
    out.push(cur);
    Ok(out)
}

/// `diff` split into parts of at most `budget` bytes each, in diff order (`known`: the change's
/// paths, to name each section exactly). `Err` says why it cannot be split: more than
/// [`MAX_PARTS`] parts, or a single line larger than a part.
pub fn split(diff: &str, known: &[String], budget: usize) -> Result<Vec<Part>, String> {
    let mut parts: Vec<Part> = Vec::new();
    let mut cur = Part { text: String::new(), names: Vec::new() };
    for s in sections(diff, known) {
        for piece in pieces(&s, budget)? {
            if !cur.text.is_empty() && cur.text.len() + piece.len() > budget {
                parts.push(std::mem::replace(&mut cur, Part { text: String::new(), names: Vec::new() }));
                if parts.len() >= MAX_PARTS {
                    return Err(format!("it would take more than {MAX_PARTS} reviewer briefs"));
                }
            }
            cur.text.push_str(&piece);
            if !s.name.is_empty() && cur.names.last() != Some(&s.name) {
                cur.names.push(s.name.clone());
            }
        }
    }
    if !cur.text.is_empty() || parts.is_empty() {
        parts.push(cur);
    }
    Ok(parts)
}

/// The heading of part `i` (1-based) of `n`: what the part is, what the whole change touches.
pub fn heading(i: usize, n: usize, part: &Part, all_paths: &[String]) -> String {
    format!(
        "THIS IS PART {i} OF {n} OF THE TASK'S DIFF. The diff is too large for one brief, so it is reviewed in \
{n} parts, each by its own reviewer; none is cut or skipped. This part shows: {}. The whole change touches \
(every part): {}. Review what this part shows; read any other file of the change in the tree when you need it. \
A clean verdict names in `files_read` at least one file this part shows.\n\n",
        part.names.join(", "),
        all_paths.join(", ")
    )
}

/// The diff one reviewer dispatch reads: the task's whole diff, or one part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Brief {
    /// The rendered diff for the brief ([`crate::prompts::render_task_diff`]).
    pub diff: String,
    /// The paths it shows: a clean verdict on it names one of them in `files_read`.
    pub names: Vec<String>,
    /// `(i, n)`: part `i` (1-based) of `n`; `None` when the diff is reviewed whole.
    pub part: Option<(usize, usize)>,
}

/// The briefs a task's diff is reviewed in: one, whole, when its diff fits `cap` bytes; else one
/// per part, each rendering (earlier tasks' summary, every path of the change, the part's
/// heading and its diff) within `cap`. `Err` says why it cannot be reviewed in parts.
pub fn briefs(d: &TaskDiff, cap: usize) -> Result<Vec<Brief>, String> {
    let whole = crate::prompts::render_task_diff(d);
    if d.text.len() <= cap {
        return Ok(vec![Brief { diff: whole, names: d.names.clone(), part: None }]);
    }
    let widest = Part { text: String::new(), names: d.names.clone() };
    let fixed = whole.len() - d.text.len() + heading(MAX_PARTS, MAX_PARTS, &widest, &d.paths).len();
    if fixed > cap / 2 {
        return Err(format!("the list of its {} paths alone fills half a reviewer's brief", d.paths.len()));
    }
    let parts = split(&d.text, &d.names, cap - fixed)?;
    let n = parts.len();
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let text = format!("{}{}", heading(i + 1, n, &p, &d.paths), p.text);
            let diff = crate::prompts::render_task_diff(&TaskDiff { text, ..d.clone() });
            Brief { diff, names: p.names, part: Some((i + 1, n)) }
        })
        .collect())
}

/// `part i/n` prefixed to a finding of a part's answer (`n` = 1: unchanged).
fn tag(i: usize, n: usize, text: &str) -> String {
    if n == 1 { text.to_string() } else { format!("part {i}/{n}: {text}") }
}

/// The spec verdicts of every part as one: `unclear` when any part is unclear, else
/// `non_compliant` when any is, else `compliant`; every part's issues (and ambiguities) kept.
pub fn merge_spec(answers: &[Value]) -> Value {
    let n = answers.len();
    let status = |w: &str| answers.iter().any(|a| a["status"].as_str() == Some(w));
    let verdict = if status("unclear") {
        "unclear"
    } else if answers.iter().all(|a| a["status"].as_str() == Some("compliant")) {
        "compliant"
    } else {
        "non_compliant"
    };
    let mut issues = Vec::new();
    let mut ambiguity = Vec::new();
    let mut read = Vec::new();
    for (i, a) in answers.iter().enumerate() {
        issues.extend(crate::answers::strings(&a["issues"]).iter().map(|t| tag(i + 1, n, t)));
        if let Some(t) = a["ambiguity"].as_str() {
            ambiguity.push(tag(i + 1, n, t));
        }
        read.extend(crate::answers::strings(&a["files_read"]));
    }
    let ambiguity = if ambiguity.is_empty() { Value::Null } else { json!(ambiguity.join("; ")) };
    json!({"status": verdict, "issues": issues, "ambiguity": ambiguity, "files_read": read})
}

/// The quality verdicts of every part as one: `approved` only when every part approved;
/// every part's findings kept (an approved part's notes too).
pub fn merge_quality(answers: &[Value]) -> Value {
    let n = answers.len();
    let approved = answers.iter().all(|a| a["verdict"].as_str() == Some("approved"));
    let mut issues = Vec::new();
    let mut read = Vec::new();
    for (i, a) in answers.iter().enumerate() {
        for f in a["issues"].as_array().into_iter().flatten() {
            let text = tag(i + 1, n, f["text"].as_str().unwrap_or(""));
            issues.push(json!({"severity": f["severity"].clone(), "text": text}));
        }
        read.extend(crate::answers::strings(&a["files_read"]));
    }
    let verdict = if approved { "approved" } else { "changes_requested" };
    json!({"verdict": verdict, "issues": issues, "files_read": read})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, hunks: &[&str]) -> String {
        let mut s = format!("diff --git a/{name} b/{name}\nindex 1..2 100644\n--- a/{name}\n+++ b/{name}\n");
        for h in hunks {
            s.push_str(h);
        }
        s
    }

    #[test]
    fn a_diff_is_split_at_files_then_hunks_then_lines_and_nothing_is_lost() {
        let big_hunk = format!("@@ -1,0 +1,40 @@\n{}", "+0123456789\n".repeat(40));
        let diff = [
            file("a.rs", &["@@ -1 +1 @@\n-x\n+y\n"]),
            file("big.txt", &[&big_hunk, "@@ -90 +90 @@\n-p\n+q\n"]),
            file("z.rs", &["@@ -3 +3 @@\n-m\n+n\n"]),
        ]
        .concat();
        let known = vec!["a.rs".to_string(), "big.txt".to_string(), "z.rs".to_string()];
        let parts = split(&diff, &known, 200).expect("splits");
        assert!(parts.len() > 2, "{parts:?}");
        assert!(parts.iter().all(|p| p.text.len() <= 200), "{parts:?}");
        // Every diff line of the whole is in some part, in order.
        let body: Vec<&str> = diff.lines().filter(|l| l.starts_with('+') || l.starts_with('-')).collect();
        let seen: Vec<&str> = parts
            .iter()
            .flat_map(|p| p.text.lines())
            .filter(|l| l.starts_with('+') || l.starts_with('-'))
            .filter(|l| !l.starts_with("---") && !l.starts_with("+++"))
            .collect();
        let want: Vec<&str> = body.into_iter().filter(|l| !l.starts_with("---") && !l.starts_with("+++")).collect();
        assert_eq!(seen, want);
        // Each piece of the big file carries its header; a hunk cut is marked continued.
        let big: Vec<&Part> = parts.iter().filter(|p| p.names.contains(&"big.txt".to_string())).collect();
        assert!(big.len() > 1 && big.iter().all(|p| p.text.contains("diff --git a/big.txt b/big.txt")), "{big:?}");
        assert!(big.iter().any(|p| p.text.contains("@@ -1,0 +1,40 @@ (continued)")), "{big:?}");
        assert_eq!(parts[0].names[0], "a.rs");
        assert_eq!(parts.last().map(|p| p.names.last().cloned()), Some(Some("z.rs".to_string())));
    }

    #[test]
    fn a_diff_that_fits_is_one_part_and_an_unsplittable_one_is_refused() {
        let d = file("a.rs", &["@@ -1 +1 @@\n-x\n+y\n"]);
        let parts = split(&d, &["a.rs".into()], 10_000).expect("fits");
        assert_eq!(parts, vec![Part { text: d.clone(), names: vec!["a.rs".into()] }]);
        let long = file("one.txt", &[&format!("@@ -0,0 +1 @@\n+{}\n", "x".repeat(500))]);
        let e = split(&long, &["one.txt".into()], 200).expect_err("one line too long");
        assert!(e.contains("one.txt") && e.contains("one diff line"), "{e}");
        let many: String = (0..20).map(|i| file(&format!("f{i}"), &["@@ -1 +1 @@\n-x\n+y\n"])).collect();
        let e = split(&many, &[], 120).expect_err("too many parts");
        assert!(e.contains(&format!("more than {MAX_PARTS}")), "{e}");
    }

    #[test]
    fn one_unclean_part_makes_the_verdict_unclean_with_every_finding() {
        let ok = json!({"status": "compliant", "issues": [], "files_read": ["a"]});
        let bad = json!({"status": "non_compliant", "issues": ["backdoor"], "files_read": []});
        let m = merge_spec(&[ok.clone(), bad]);
        assert_eq!(m["status"], "non_compliant");
        assert_eq!(m["issues"], json!(["part 2/2: backdoor"]));
        assert_eq!(merge_spec(&[ok.clone(), ok.clone()])["status"], "compliant");
        let unclear = json!({"status": "unclear", "issues": [], "ambiguity": "which?"});
        assert_eq!(merge_spec(&[ok, unclear])["status"], "unclear");
        let appr = json!({"verdict": "approved", "issues": [{"severity": "minor", "text": "n"}]});
        let chg = json!({"verdict": "changes_requested", "issues": [{"severity": "important", "text": "bug"}]});
        let q = merge_quality(&[appr.clone(), chg]);
        assert_eq!(q["verdict"], "changes_requested");
        assert_eq!(q["issues"][1], json!({"severity": "important", "text": "part 2/2: bug"}));
        assert_eq!(merge_quality(&[appr.clone(), appr])["verdict"], "approved");
    }
}
