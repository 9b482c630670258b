//! The plan format parsed without any agent, shared by `work loop cohort
//! schedule` and `work implement`.
//!
//! A task is a markdown heading of level 2, 3 or 4 that reads `Task <id>: <title>`:
//!
//! ```markdown
//! ## Task 1: Parse the config
//! Body text …
//!
//! ### Task 2: Use it
//! Depends on: 1
//! ```
//!
//! - The body of a task runs from the line after its heading to the next task heading (or the
//!   end of the file). Headings inside fenced code blocks (```` ``` ```` or `~~~`) are ignored.
//! - An optional line `Depends on: <id>, <id>` in the body (also written `**Depends on:** …`,
//!   `- Depends on: …`, with ids as `3`, `Task 3` or `` `3` ``; `none` means no dependency)
//!   lists the tasks that must finish first.
//! - Ids are `[A-Za-z0-9][A-Za-z0-9._-]*` and must be unique (compared exactly).
//! - [`Plan::waves`] layers the tasks topologically: wave 0 holds every task without
//!   dependencies, wave `n` every task whose dependencies all sit in waves `< n`. Inside a wave
//!   tasks keep their order in the plan, so the layering is deterministic.
//!
//! Unknown dependencies, duplicate ids and cycles (a task depending on itself included) are
//! errors ([`PlanError`]); a text without any task heading is [`PlanError::NoTasks`], which lets
//! a caller fall back to another extraction.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One task of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Task {
    /// The id as written after `Task ` (`1`, `2.3`, `A-1`).
    pub id: String,
    /// The title after the colon, trimmed.
    pub title: String,
    /// The heading level (2, 3 or 4).
    pub level: u8,
    /// The 1-based line number of the heading.
    pub line: usize,
    /// The body: the lines after the heading up to the next task heading, with leading and
    /// trailing blank lines removed (no trailing newline).
    pub body: String,
    /// The ids this task depends on, in the order written, without duplicates.
    pub depends_on: Vec<String>,
}

/// A parsed, validated plan: unique ids, known dependencies, no cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    tasks: Vec<Task>,
}

/// Why a plan was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// No `Task <id>: <title>` heading (levels 2–4) outside code fences.
    #[error("plan has no `Task <id>: <title>` heading")]
    NoTasks,
    /// A task heading whose id is not `[A-Za-z0-9][A-Za-z0-9._-]*`.
    #[error("task heading on line {line} has a malformed id `{id}`")]
    BadId {
        /// The 1-based line.
        line: usize,
        /// What was written.
        id: String,
    },
    /// Two tasks share an id.
    #[error("task id `{id}` is used twice (lines {first} and {second})")]
    DuplicateId {
        /// The id.
        id: String,
        /// The line of the first heading.
        first: usize,
        /// The line of the second heading.
        second: usize,
    },
    /// A `Depends on:` entry that is not a task of the plan.
    #[error("task `{task}` depends on unknown task `{dependency}`")]
    UnknownDependency {
        /// The depending task.
        task: String,
        /// The unknown id.
        dependency: String,
    },
    /// A dependency cycle; `tasks` lists the tasks left unschedulable, in plan order.
    #[error("dependency cycle among tasks {}", .tasks.join(", "))]
    Cycle {
        /// The tasks on or behind the cycle.
        tasks: Vec<String>,
    },
}

/// Parses a plan in the documented format (docs/plan-format.md) and validates it (see the module docs).
pub fn parse_plan(text: &str) -> Result<Plan, PlanError> {
    let mut tasks: Vec<Task> = Vec::new();
    let mut body: Vec<&str> = Vec::new();
    let mut fence: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            body.push(line);
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some("```");
            body.push(line);
            continue;
        }
        if trimmed.starts_with("~~~") {
            fence = Some("~~~");
            body.push(line);
            continue;
        }
        if let Some((level, id, title)) = task_heading(line) {
            if let Some(prev) = tasks.last_mut() {
                finish_body(prev, &body);
            }
            body.clear();
            if !valid_id(id) {
                return Err(PlanError::BadId { line: i + 1, id: id.to_string() });
            }
            if let Some(first) = tasks.iter().find(|t| t.id == id) {
                return Err(PlanError::DuplicateId { id: id.to_string(), first: first.line, second: i + 1 });
            }
            tasks.push(Task {
                id: id.to_string(),
                title: title.to_string(),
                level,
                line: i + 1,
                body: String::new(),
                depends_on: Vec::new(),
            });
        } else if !tasks.is_empty() {
            body.push(line);
        }
    }
    if let Some(prev) = tasks.last_mut() {
        finish_body(prev, &body);
    }
    if tasks.is_empty() {
        return Err(PlanError::NoTasks);
    }
    let ids: BTreeSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    for t in &tasks {
        for d in &t.depends_on {
            if !ids.contains(d.as_str()) {
                return Err(PlanError::UnknownDependency { task: t.id.clone(), dependency: d.clone() });
            }
        }
    }
    let plan = Plan { tasks };
    let placed: usize = plan.layer().iter().map(Vec::len).sum();
    if placed != plan.tasks.len() {
        let layered: BTreeSet<usize> = plan.layer().into_iter().flatten().collect();
        let left = plan.tasks.iter().enumerate().filter(|(i, _)| !layered.contains(i)).map(|(_, t)| t.id.clone());
        return Err(PlanError::Cycle { tasks: left.collect() });
    }
    Ok(plan)
}

impl Plan {
    /// The tasks in plan order.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// The task with this id.
    pub fn task(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// The task ids layered into waves (see the module docs). Never empty for a parsed plan,
    /// and every task appears exactly once.
    pub fn waves(&self) -> Vec<Vec<String>> {
        self.layer().into_iter().map(|w| w.into_iter().map(|i| self.tasks[i].id.clone()).collect()).collect()
    }

    /// The tasks themselves layered into waves, in the same order as [`Plan::waves`].
    pub fn wave_tasks(&self) -> Vec<Vec<&Task>> {
        self.layer().into_iter().map(|w| w.into_iter().map(|i| &self.tasks[i]).collect()).collect()
    }

    /// Kahn layering over task indices; stops when no task can be placed (a cycle).
    fn layer(&self) -> Vec<Vec<usize>> {
        let index: BTreeMap<&str, usize> = self.tasks.iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect();
        let mut wave_of: Vec<Option<usize>> = vec![None; self.tasks.len()];
        let mut waves: Vec<Vec<usize>> = Vec::new();
        loop {
            let current = waves.len();
            let mut wave = Vec::new();
            for (i, t) in self.tasks.iter().enumerate() {
                if wave_of[i].is_some() {
                    continue;
                }
                let ready = t
                    .depends_on
                    .iter()
                    .all(|d| index.get(d.as_str()).and_then(|&j| wave_of[j]).is_some_and(|w| w < current));
                if ready {
                    wave.push(i);
                }
            }
            if wave.is_empty() {
                break;
            }
            for &i in &wave {
                wave_of[i] = Some(current);
            }
            waves.push(wave);
        }
        waves
    }
}

/// `(level, id, title)` when `line` is a task heading of level 2–4.
fn task_heading(line: &str) -> Option<(u8, &str, &str)> {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    if !(2..=4).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim();
    let Some(rest) = rest.strip_prefix("Task").filter(|r| r.starts_with([' ', '\t'])) else {
        return short_task_heading(hashes, rest);
    };
    let (id, title) = rest.trim_start().split_once(':')?;
    let id = id.trim();
    if id.is_empty() || id.contains(char::is_whitespace) {
        return None;
    }
    // A closing ATX sequence (`## Task 1: x ##`) is not part of the title.
    let title = title.trim().trim_end_matches('#').trim_end();
    Some((hashes as u8, id, title))
}

/// The work-loop plan template's form, `## T1: title` / `### T2a title` (levels 2 and 3):
/// the id is `T`, digits and an optional lowercase letter, then a word boundary.
fn short_task_heading(hashes: usize, rest: &str) -> Option<(u8, &str, &str)> {
    if hashes > 3 {
        return None;
    }
    let after_t = rest.strip_prefix('T')?;
    let digits = after_t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let mut len = 1 + digits;
    if rest[len..].starts_with(|c: char| c.is_ascii_lowercase()) {
        len += 1;
    }
    let tail = &rest[len..];
    if tail.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let title = tail.trim_start().strip_prefix([':', '.', '-', '—']).unwrap_or(tail).trim();
    let title = title.trim_end_matches('#').trim_end();
    Some((hashes as u8, &rest[..len], title))
}

fn valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn finish_body(task: &mut Task, lines: &[&str]) {
    let start = lines.iter().position(|l| !l.trim().is_empty()).unwrap_or(lines.len());
    let end = lines.iter().rposition(|l| !l.trim().is_empty()).map_or(start, |e| e + 1);
    let kept = &lines[start..end.max(start)];
    task.body = kept.join("\n");
    for (_, l) in crate::common::unfenced(kept.iter().copied()) {
        if let Some(list) = depends_line(l) {
            for d in list {
                if !task.depends_on.contains(&d) {
                    task.depends_on.push(d);
                }
            }
        }
    }
}

/// The ids of a `Depends on:` line, or `None` when `line` is not one.
fn depends_line(line: &str) -> Option<Vec<String>> {
    let mut l = line.trim();
    for bullet in ["- ", "* ", "+ "] {
        if let Some(r) = l.strip_prefix(bullet) {
            l = r.trim_start();
        }
    }
    let l = l.trim_start_matches(['*', '_']);
    let rest = strip_prefix_ci(l, "depends on")?;
    let rest = rest.trim_start_matches(['*', '_']).trim_start();
    let rest = rest.strip_prefix(':')?;
    let rest = rest.trim_start_matches(['*', '_']);
    let mut out = Vec::new();
    // A parenthetical note (`T1 (after review)`) is not an id.
    let rest = rest.split('(').next().unwrap_or("");
    for raw in rest.split([',', ';']) {
        let mut item = raw.trim().trim_matches(|c| matches!(c, '`' | '*' | '_' | '.' | ' '));
        if let Some(r) = strip_prefix_ci(item, "task ") {
            item = r.trim().trim_matches('`');
        }
        let lower = item.to_ascii_lowercase();
        if item.is_empty() || matches!(lower.as_str(), "none" | "-" | "n/a" | "nothing") {
            continue;
        }
        out.push(item.to_string());
    }
    Some(out)
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tasks_bodies_and_waves() {
        let text = "# Plan\n\n**Status:** Approved\n\n## Tasks\n\n### Task 1: First thing\n\nDo it.\n\n### Task 2: Second\nDepends on: 1\n\n#### Task 3: Third\n**Depends on:** Task 1, `2`\nmore\n\n## Task 4: Alone\n";
        let plan = parse_plan(text).expect("parse");
        let ids: Vec<&str> = plan.tasks().iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["1", "2", "3", "4"]);
        assert_eq!(plan.tasks()[0].title, "First thing");
        assert_eq!(plan.tasks()[0].body, "Do it.");
        assert_eq!(plan.tasks()[2].depends_on, ["1", "2"]);
        assert_eq!(plan.tasks()[2].level, 4);
        assert_eq!(plan.tasks()[2].body, "**Depends on:** Task 1, `2`\nmore");
        assert_eq!(plan.waves(), vec![vec!["1", "4"], vec!["2"], vec!["3"]]);
        assert_eq!(plan.wave_tasks()[1][0].title, "Second");
        assert_eq!(plan.task("4").map(|t| t.line), Some(18));
    }

    #[test]
    fn parses_the_work_loop_template_headings() {
        let text = "# Plan\n\n### T1: First\n\n### T2 Second\n**Depends on:** T1 (after review)\n\n## T3a: Third\nDepends on: T1, T2\n\n### Tasks overview\n\n#### T9: level four is not this form\n";
        let plan = parse_plan(text).expect("parse");
        let ids: Vec<&str> = plan.tasks().iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["T1", "T2", "T3a"]);
        assert_eq!(plan.tasks()[0].title, "First");
        assert_eq!(plan.tasks()[1].title, "Second");
        assert_eq!(plan.tasks()[1].depends_on, ["T1"]);
        assert_eq!(plan.waves(), vec![vec!["T1"], vec!["T2"], vec!["T3a"]]);
    }

    #[test]
    fn ignores_non_task_headings_and_fenced_code() {
        let text = "## Task A-1: Real\n```\n## Task 9: not real\nDepends on: zzz\n```\n# Task 5: level one is not a task\n##### Task 6: level five neither\n##Task 7: no space\n";
        let plan = parse_plan(text).expect("parse");
        assert_eq!(plan.waves(), vec![vec!["A-1"]]);
        assert!(plan.tasks()[0].body.contains("## Task 9"));
        assert!(plan.tasks()[0].depends_on.is_empty());
    }

    #[test]
    fn depends_on_none_is_empty() {
        let plan = parse_plan("## Task 1: x\n- Depends on: none\n").expect("parse");
        assert!(plan.tasks()[0].depends_on.is_empty());
    }

    #[test]
    fn refuses_bad_plans() {
        assert_eq!(parse_plan("# nothing\n## Not a task\n"), Err(PlanError::NoTasks));
        assert_eq!(
            parse_plan("## Task 1: a\nDepends on: 7\n"),
            Err(PlanError::UnknownDependency { task: "1".into(), dependency: "7".into() })
        );
        assert_eq!(
            parse_plan("## Task 1: a\n## Task 1: b\n"),
            Err(PlanError::DuplicateId { id: "1".into(), first: 1, second: 2 })
        );
        assert_eq!(parse_plan("## Task 1: a\nDepends on: 1\n"), Err(PlanError::Cycle { tasks: vec!["1".into()] }));
        assert_eq!(
            parse_plan("## Task 1: a\n## Task 2: b\nDepends on: 3\n## Task 3: c\nDepends on: 2\n"),
            Err(PlanError::Cycle { tasks: vec!["2".into(), "3".into()] })
        );
        assert!(matches!(parse_plan("## Task $x: a\n"), Err(PlanError::BadId { .. })));
    }
}
