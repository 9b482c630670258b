//! A free-form plan's own text, read by the engine, against the plan-index and plan-extract
//! answers (which are agents' words):
//!
//! - **verbatim**: every extracted task text must be found in the plan. Both are compared
//!   normalised — each line's leading markers dropped (`#` of a heading, `>`, a list marker
//!   `-`/`*`/`+`/`1.`/`1)`, a checkbox `[ ]`/`[x]`), the inline markers `` ` `` and `*`
//!   dropped, every run of whitespace (line breaks included) one space — so an extract may
//!   drop a heading or a list number, or reflow lines, but not reword;
//! - **coverage**: when the plan has a recognisable enumeration of steps, every step must be
//!   inside some extracted task's text. The enumeration is the first of these the plan holds
//!   (outside fenced code), with at least two steps:
//!   1. headings of level 2 to 4 that read as steps: `## Step 1 …`, `### Task: …`, `## Phase 2`,
//!      `Stage`, `Part`, `Milestone`, or a number (`## 1. …`, `## 2) …`);
//!   2. the plan's first numbered list at the margin (`1.`/`1)` items not indented; a list ends
//!      at a line at the margin that is neither an item nor blank);
//!   3. checkboxes at the margin (`- [ ] …`).
//!
//!   A step is inside a task's text when its first line (a heading step: the first line of its
//!   body, or the heading when the body is empty) is. Plain bullets are not an enumeration (they
//!   are as often notes as steps), nor are indented lists. A plan whose numbered list is the
//!   sub-steps of one task passes: that task's text holds them all.

use std::collections::BTreeMap;

/// One step of a plan's enumeration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The 1-based line in the plan.
    pub line: usize,
    /// The text an extract must hold (normalised).
    pub key: String,
    /// The line as written, for a verdict.
    pub shown: String,
}

/// What kind of enumeration a plan has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Step headings.
    Headings,
    /// A numbered list.
    Numbered,
    /// Checkboxes.
    Checkboxes,
}

impl Kind {
    /// The words a verdict uses.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Headings => "step headings",
            Kind::Numbered => "numbered steps",
            Kind::Checkboxes => "checkbox steps",
        }
    }
}

const STEP_WORDS: [&str; 6] = ["task", "step", "phase", "stage", "part", "milestone"];

/// The text of a line without its leading markers (heading `#`s, `>`, list markers, checkboxes).
fn strip_markers(line: &str) -> &str {
    let mut t = line.trim_start();
    loop {
        let before = t;
        t = t.trim_start_matches('#').trim_start_matches('>').trim_start();
        for m in ["- ", "* ", "+ ", "[ ] ", "[x] ", "[X] "] {
            if let Some(rest) = t.strip_prefix(m) {
                t = rest.trim_start();
            }
        }
        let digits = t.chars().take_while(char::is_ascii_digit).count();
        if (1..=3).contains(&digits)
            && let Some(rest) = t[digits..].strip_prefix(". ").or_else(|| t[digits..].strip_prefix(") "))
        {
            t = rest.trim_start();
        }
        if t == before {
            return t;
        }
    }
}

/// The normalised form of a text (see the module doc).
pub fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        for word in strip_markers(line).split_whitespace() {
            let w: String = word.chars().filter(|c| *c != '`' && *c != '*').collect();
            if w.is_empty() {
                continue;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&w);
        }
    }
    out
}

/// The plan's lines outside fenced code blocks, with their 1-based numbers.
fn prose_lines(plan: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in plan.lines().enumerate() {
        let t = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| t.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

fn is_step_heading(line: &str) -> bool {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    if !(2..=4).contains(&hashes) || !line[hashes..].starts_with(' ') {
        return false;
    }
    let text = line[hashes..].trim();
    let first: String = text.chars().take_while(|c| c.is_alphanumeric()).collect();
    let lower = first.to_ascii_lowercase();
    STEP_WORDS.contains(&lower.as_str()) || (!first.is_empty() && first.chars().all(|c| c.is_ascii_digit()))
}

fn is_heading(line: &str) -> bool {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    (1..=6).contains(&hashes) && line[hashes..].starts_with(' ')
}

fn is_numbered_item(line: &str) -> bool {
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    (1..=3).contains(&digits) && (line[digits..].starts_with(". ") || line[digits..].starts_with(") "))
}

fn is_checkbox(line: &str) -> bool {
    ["- ", "* ", "+ "].iter().any(|p| line.starts_with(p))
        && matches!(line.get(2..5), Some("[ ]" | "[x]" | "[X]"))
        && line.get(5..6) == Some(" ")
}

fn step(line: usize, text: &str) -> Step {
    Step { line, key: normalise(text), shown: text.trim().to_string() }
}

fn heading_steps(lines: &[(usize, &str)]) -> Vec<Step> {
    let mut out = Vec::new();
    for (i, (n, line)) in lines.iter().enumerate() {
        if !is_step_heading(line) {
            continue;
        }
        let body = lines[i + 1..].iter().take_while(|(_, l)| !is_heading(l)).find(|(_, l)| !normalise(l).is_empty());
        out.push(match body {
            Some((bn, bl)) => step(*bn, bl),
            None => step(*n, line),
        });
    }
    out
}

fn first_numbered_list(lines: &[(usize, &str)]) -> Vec<Step> {
    let mut out = Vec::new();
    for (n, line) in lines {
        if is_numbered_item(line) {
            out.push(step(*n, line));
        } else if !out.is_empty() && !line.trim().is_empty() && !line.starts_with([' ', '\t']) {
            break;
        }
    }
    out
}

/// The plan's enumeration of steps, when it has one (see the module doc).
pub fn enumeration(plan: &str) -> Option<(Kind, Vec<Step>)> {
    let lines = prose_lines(plan);
    let usable = |v: Vec<Step>| -> Vec<Step> { v.into_iter().filter(|s| !s.key.is_empty()).collect() };
    let headings = usable(heading_steps(&lines));
    if headings.len() >= 2 {
        return Some((Kind::Headings, headings));
    }
    let numbered = usable(first_numbered_list(&lines));
    if numbered.len() >= 2 {
        return Some((Kind::Numbered, numbered));
    }
    let boxes = usable(lines.iter().filter(|(_, l)| is_checkbox(l)).map(|(n, l)| step(*n, l)).collect());
    (boxes.len() >= 2).then_some((Kind::Checkboxes, boxes))
}

/// Why the answers do not hold the plan's text, when they do not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Extracted texts not found in the plan: `(task id, the text's start)`.
    NotInPlan(Vec<(String, String)>),
    /// Steps of the plan no task's text holds.
    Uncovered {
        /// The enumeration's kind.
        kind: Kind,
        /// How many steps it has.
        total: usize,
        /// The steps left out.
        missing: Vec<Step>,
    },
}

impl Refusal {
    /// The `BLOCKED` kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::NotInPlan(_) => "extract-not-in-plan",
            Refusal::Uncovered { .. } => "cardinality",
        }
    }

    /// One line for the verdict and for the retry's brief.
    pub fn describe(&self, plan_path: &str) -> String {
        match self {
            Refusal::NotInPlan(texts) => format!(
                "the extracted text of {} is not in the plan (an extract is copied verbatim from {plan_path}: {})",
                texts.iter().map(|(id, _)| format!("task `{id}`")).collect::<Vec<_>>().join(", "),
                texts.iter().map(|(id, t)| format!("task `{id}` reads \"{t}\"")).collect::<Vec<_>>().join("; ")
            ),
            Refusal::Uncovered { kind, total, missing } => format!(
                "the plan has {total} {} but the tasks' text holds only {}: got {} of {total} (missing {})",
                kind.describe(),
                total - missing.len(),
                total - missing.len(),
                missing
                    .iter()
                    .map(|s| format!("{plan_path}:{} \"{}\"", s.line, cut(&s.shown)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

fn cut(s: &str) -> String {
    let mut t: String = s.chars().take(80).collect();
    if t.len() < s.len() {
        t.push('…');
    }
    t
}

/// Checks extracted `texts` (task id → text) against the `plan`: verbatim first, then (with
/// `whole`: every task of the plan was extracted, no `--range`) coverage.
pub fn check(plan: &str, texts: &BTreeMap<String, String>, whole_plan: bool) -> Result<(), Refusal> {
    let whole = normalise(plan);
    let normal: BTreeMap<&String, String> = texts.iter().map(|(id, t)| (id, normalise(t))).collect();
    let foreign: Vec<(String, String)> = normal
        .iter()
        .filter(|(_, t)| !whole.contains(t.as_str()))
        .map(|(id, _)| ((*id).clone(), cut(texts.get(*id).map(String::as_str).unwrap_or_default().trim())))
        .collect();
    if !foreign.is_empty() {
        return Err(Refusal::NotInPlan(foreign));
    }
    let Some((kind, steps)) = enumeration(plan).filter(|_| whole_plan) else { return Ok(()) };
    let total = steps.len();
    let missing: Vec<Step> =
        steps.into_iter().filter(|s| !normal.values().any(|t| t.contains(s.key.as_str()))).collect();
    if missing.is_empty() { Ok(()) } else { Err(Refusal::Uncovered { kind, total, missing }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(v: &[(&str, &str)]) -> BTreeMap<String, String> {
        v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    const NUMBERED: &str = "# Calculator work\n\n1. Fix `add` in lib.py so that it returns the sum.\n2. Add a function `mul(a, b)` to lib.py.\n\nAcceptance:\n\n1. the tests pass\n2. no new dependency\n";

    #[test]
    fn the_enumeration_is_the_first_kind_the_plan_holds() {
        let (kind, steps) = enumeration(NUMBERED).expect("numbered");
        assert_eq!(kind, Kind::Numbered);
        assert_eq!(steps.iter().map(|s| s.line).collect::<Vec<_>>(), vec![3, 4], "the first list only");
        let headings = "# P\n\n## Step 1: fix\nFix add.\n\n## Step 2: mul\nAdd mul.\n1. a\n2. b\n";
        let (kind, steps) = enumeration(headings).expect("headings");
        assert_eq!(kind, Kind::Headings);
        assert_eq!(steps.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(), vec!["Fix add.", "Add mul."]);
        assert_eq!(enumeration("- [ ] one\n- [x] two\n").map(|(k, s)| (k, s.len())), Some((Kind::Checkboxes, 2)));
        // Plain bullets, one item, indented lists and fenced code are not an enumeration.
        assert_eq!(enumeration("- one\n- two\n"), None);
        assert_eq!(enumeration("1. only one\n"), None);
        assert_eq!(enumeration("Do it:\n   1. a\n   2. b\n"), None);
        assert_eq!(enumeration("```\n1. a\n2. b\n```\n"), None);
    }

    #[test]
    fn a_left_out_step_and_a_text_not_in_the_plan_are_refused() {
        // The index dropped step 2 (the extract lost its backticks and number: still verbatim).
        let one = texts(&[("1", "Fix add in lib.py so that it returns the sum.")]);
        match check(NUMBERED, &one, true) {
            Err(Refusal::Uncovered { total: 2, missing, .. }) => assert_eq!(missing[0].line, 4),
            other => panic!("{other:?}"),
        }
        // A rewritten task.
        let rewritten =
            texts(&[("1", "1. Fix `add` in lib.py so that it returns the sum."), ("2", "Add one line to NOTES.md.")]);
        assert!(matches!(check(NUMBERED, &rewritten, true), Err(Refusal::NotInPlan(t)) if t[0].0 == "2"));
        // Both steps, reflowed across lines: accepted.
        let both = texts(&[
            ("1", "Fix `add` in lib.py so\nthat it returns the sum."),
            ("2", "2. Add a function `mul(a, b)` to lib.py."),
        ]);
        assert_eq!(check(NUMBERED, &both, true), Ok(()));
    }

    #[test]
    fn sub_steps_of_one_task_and_a_dropped_heading_pass() {
        let plan = "# Fix add\n\nFix `add` in lib.py:\n\n1. open lib.py\n2. replace `-` with `+`\n";
        assert_eq!(check(plan, &texts(&[("1", plan)]), true), Ok(()));
        let plan = "# P\n\n## Step 1: fix\nFix add.\n\n## Step 2: mul\nAdd mul.\n";
        assert_eq!(check(plan, &texts(&[("1", "Fix add."), ("2", "## Step 2: mul\nAdd mul.")]), true), Ok(()));
        assert!(
            check(plan, &texts(&[("1", "Fix add."), ("2", "Step 2: mul")]), true).is_err(),
            "a heading without its body"
        );
    }
}
