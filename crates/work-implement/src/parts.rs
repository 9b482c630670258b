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

/// Who reads a change in parts: the task's reviewers, or the E2E tester of the run's change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// A spec or quality reviewer of one task's diff.
    Reviewer,
    /// The E2E tester, shown the whole change of the run.
    Tester,
}

impl Reader {
    /// The change as the brief introduces it.
    fn render(self, d: &TaskDiff) -> String {
        match self {
            Reader::Reviewer => crate::prompts::render_task_diff(d),
            Reader::Tester => format!("THE CHANGE UNDER TEST ({}):\n{}", d.paths.join(", "), d.text),
        }
    }

    /// The heading of part `i` (1-based) of `n`: what the part is, what the whole change
    /// touches.
    pub fn heading(self, i: usize, n: usize, part: &Part, all_paths: &[String]) -> String {
        let (what, who, ask) = match self {
            Reader::Reviewer => (
                "THE TASK'S DIFF",
                "reviewed in {n} parts, each by its own reviewer",
                "Review what this part shows; read any other file of the change in the tree when you need it. A clean \
verdict names in `files_read` at least one file this part shows.",
            ),
            Reader::Tester => (
                "THE CHANGE UNDER TEST",
                "shown in {n} parts, each in its own tester dispatch",
                "Exercise the change end to end with this part in view; read any other file of the change in the tree \
when you need it.",
            ),
        };
        format!(
            "THIS IS PART {i} OF {n} OF {what}. The diff is too large for one brief, so it is {}; none is cut or \
skipped. This part shows: {}. The whole change touches (every part): {}. {ask}\n\n",
            who.replace("{n}", &n.to_string()),
            part.names.join(", "),
            all_paths.join(", ")
        )
    }
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

/// The briefs a diff is read in by `reader`: one, whole, when its diff fits `cap` bytes; else
/// one per part, each rendering (earlier tasks' summary, every path of the change, the part's
/// heading and its diff) within `cap`. `Err` says why it cannot be read in parts.
pub fn briefs(d: &TaskDiff, cap: usize, reader: Reader) -> Result<Vec<Brief>, String> {
    let whole = reader.render(d);
    if d.text.len() <= cap {
        return Ok(vec![Brief { diff: whole, names: d.names.clone(), part: None }]);
    }
    let widest = Part { text: String::new(), names: d.names.clone() };
    let fixed = whole.len() - d.text.len() + reader.heading(MAX_PARTS, MAX_PARTS, &widest, &d.paths).len();
    if fixed > cap / 2 {
        return Err(format!("the list of its {} paths alone fills half a brief", d.paths.len()));
    }
    let parts = split(&d.text, &d.names, cap - fixed)?;
    let n = parts.len();
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let text = format!("{}{}", reader.heading(i + 1, n, &p, &d.paths), p.text);
            let diff = reader.render(&TaskDiff { text, ..d.clone() });
            Brief { diff, names: p.names, part: Some((i + 1, n)) }
        })
        .collect())
}

/// What a repair brief shows of the task's diff, never cut: all of it when it fits one brief
/// (`cap` bytes); else the diff of every file a finding names in full (a finding of a part that
/// names no file of the change: the files of its part, `briefs`), and every other file of the
/// change listed with the size of its diff, said to be left out.
pub fn repair_diff(d: &TaskDiff, findings: &[String], briefs: &[Brief], cap: usize) -> String {
    if d.text.len() <= cap {
        return crate::prompts::render_task_diff(d);
    }
    let named = named_files(d, findings, briefs);
    let (mut shown, mut rest) = (String::new(), Vec::new());
    for s in sections(&d.text, &d.names) {
        if named.contains(&s.name) {
            shown.push_str(&s.header);
            shown.push_str(&s.hunks.concat());
        } else {
            let summary = d.paths.iter().find(|p| p.starts_with(&format!("{} (", s.name))).unwrap_or(&s.name);
            rest.push(format!("- {summary}: {} bytes of diff, not shown", s.len()));
        }
    }
    let names: Vec<&str> = named.iter().map(String::as_str).collect();
    let shown_what = if names.is_empty() {
        "The findings name no file of the change, so no file's diff is shown".to_string()
    } else {
        format!("Shown below in full: the diff of every file the findings name ({})", names.join(", "))
    };
    let text = format!(
        "THE TASK'S DIFF IS {} BYTES, MORE THAN ONE BRIEF HOLDS ({cap}); IT IS NOT CUT. {shown_what}. NOT SHOWN — \
read them in the tree — the other {} file(s) of the change, with the size of their diff:\n{}\n\n{shown}",
        d.text.len(),
        rest.len(),
        rest.join("\n")
    );
    crate::prompts::render_task_diff(&TaskDiff { text, ..d.clone() })
}

/// The files of the change the findings name: a path or a file name of the change in a
/// finding's text (`src/a.rs`, `a.rs:12`, `` `a.rs` ``); a finding of part `i` (`part i/n: …`)
/// that names none stands for the files of its part.
fn named_files(d: &TaskDiff, findings: &[String], briefs: &[Brief]) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for f in findings {
        let (part, body) = match f.strip_prefix("part ").and_then(|r| r.split_once(": ")) {
            Some((tag, body)) => (tag.split_once('/').and_then(|(i, _)| i.parse::<usize>().ok()), body),
            None => (None, f.as_str()),
        };
        let hit: Vec<&String> = d.names.iter().filter(|n| mentions(body, n)).collect();
        match (hit.is_empty(), part.and_then(|i| briefs.get(i.checked_sub(1)?))) {
            (true, Some(b)) => out.extend(b.names.iter().cloned()),
            _ => out.extend(hit.into_iter().cloned()),
        }
    }
    out
}

/// True when `text` names the path `name`: the path itself, or a file name or tail of it with
/// an extension or a directory (`lib.py`, `src/lib.py`), with a `:LINE` or `#L…` suffix allowed.
fn mentions(text: &str, name: &str) -> bool {
    text.split(|c: char| c.is_whitespace() || "`'\"()[]{}<>,;".contains(c)).any(|tok| {
        let t = tok.trim_start_matches("./");
        let t = t.split([':', '#']).next().unwrap_or_default().trim_end_matches('.');
        !t.is_empty()
            && (t == name
                || ((t.contains('.') || t.contains('/')) && name.ends_with(&format!("/{t}")))
                || t.ends_with(&format!("/{name}")))
    })
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

    fn diff_of(files: &[(&str, String)]) -> TaskDiff {
        TaskDiff {
            tree: "t".into(),
            text: files.iter().map(|(_, f)| f.as_str()).collect(),
            paths: files.iter().map(|(n, _)| format!("{n} (+1 -1)")).collect(),
            names: files.iter().map(|(n, _)| n.to_string()).collect(),
            earlier: Vec::new(),
        }
    }

    #[test]
    fn a_repair_brief_over_the_cap_shows_each_named_files_diff_in_full_and_lists_the_rest() {
        let bulk = file("aaa_bulk.txt", &[&format!("@@ -0,0 +1,300 @@\n{}", "+row of bulk data\n".repeat(300))]);
        let lib = file("src/lib.rs", &["@@ -1 +1 @@\n-x\n+backdoor\n"]);
        let z = file("zzz.txt", &["@@ -1 +1 @@\n-a\n+b\n"]);
        let d = diff_of(&[("aaa_bulk.txt", bulk.clone()), ("src/lib.rs", lib.clone()), ("zzz.txt", z.clone())]);
        assert_eq!(repair_diff(&d, &[], &[], 1 << 20), crate::prompts::render_task_diff(&d), "it fits: whole");
        let r = repair_diff(&d, &["`lib.rs:1` adds a backdoor".into()], &[], 1000);
        assert!(r.contains(&lib) && !r.contains(&z) && !r.contains("+row of bulk data"), "{r}");
        assert!(r.contains("IT IS NOT CUT") && r.contains("every file the findings name (src/lib.rs)"), "{r}");
        assert!(r.contains(&format!("- aaa_bulk.txt (+1 -1): {} bytes of diff, not shown", bulk.len())), "{r}");
        assert!(r.contains(&format!("- zzz.txt (+1 -1): {} bytes of diff, not shown", z.len())), "{r}");
        // A large named file is shown in full however large; a part's finding naming no file
        // stands for the files of its part.
        let r = repair_diff(&d, &["aaa_bulk.txt is generated".into()], &[], 1000);
        assert!(r.contains(&bulk), "{r}");
        let part = |names: &[&str], i| Brief {
            diff: String::new(),
            names: names.iter().map(|n| n.to_string()).collect(),
            part: Some((i, 2)),
        };
        let briefs = [part(&["aaa_bulk.txt"], 1), part(&["src/lib.rs", "zzz.txt"], 2)];
        let r = repair_diff(&d, &["part 2/2: an off-by-one".into()], &briefs, 1000);
        assert!(r.contains(&lib) && r.contains(&z) && !r.contains("+row of bulk data"), "{r}");
        let r = repair_diff(&d, &["nothing named".into()], &briefs, 1000);
        assert!(r.contains("The findings name no file of the change") && !r.contains(&lib), "{r}");
    }

    #[test]
    fn the_tester_reads_a_large_change_in_parts_with_every_line() {
        let files: Vec<(String, String)> = (0..6)
            .map(|i| {
                let name = format!("f{i}.txt");
                let f = file(
                    &name,
                    &[&format!("@@ -0,0 +1,40 @@\n{}", format!("+line {i} of a file under test\n").repeat(40))],
                );
                (name, f)
            })
            .collect();
        let refs: Vec<(&str, String)> = files.iter().map(|(n, f)| (n.as_str(), f.clone())).collect();
        let d = diff_of(&refs);
        let b = briefs(&d, 2400, Reader::Tester).expect("parts");
        assert!(b.len() > 1 && b.iter().all(|p| p.diff.len() <= 2400), "{b:?}");
        assert!(b.iter().all(|p| p.diff.contains("OF THE CHANGE UNDER TEST") && !p.diff.contains("reviewer")));
        for (_, f) in &files {
            assert!(b.iter().any(|p| p.diff.contains(f.as_str())), "every file reaches the tester whole");
        }
        let whole = briefs(&d, 1 << 20, Reader::Tester).expect("whole");
        assert_eq!(whole.len(), 1);
        assert!(whole[0].diff.starts_with("THE CHANGE UNDER TEST (f0.txt (+1 -1)"), "{}", whole[0].diff);
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
