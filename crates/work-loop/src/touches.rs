//! `Touches:` annotations of a plan's tasks and the predicted disjointness of a wave, printed
//! by `work loop cohort schedule` as a screen (never a green light: only a person or the
//! authoritative gate decides that a wave may run in parallel).
//!
//! - A task's body may carry one line `**Touches:** <glob>, <glob> (prose)`: the globs are the
//!   comma-separated items before the first `(`. A task without the line declares nothing.
//! - Two globs overlap unless some segment (split at `/`) is provably disjoint: two literal
//!   segments that differ, or a literal segment the other's pattern does not match. Globs of a
//!   different depth never overlap (`*` does not cross `/`), except that `**` anywhere
//!   overlaps everything (fail safe).
//! - A wave of two or more tasks is `no` when two declaring tasks overlap, else `unknown` when
//!   some task declares nothing, else `yes`.

use crate::plan::Task;
use serde::Serialize;
use std::collections::BTreeSet;

/// The predicted disjointness of one wave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Disjoint {
    /// Every task declares touches and no two overlap.
    Yes,
    /// Two tasks' touches overlap.
    No,
    /// No overlap found, but some task declares nothing.
    Unknown,
}

impl Disjoint {
    /// The word printed after `predicted-disjoint:`.
    pub fn as_str(self) -> &'static str {
        match self {
            Disjoint::Yes => "yes",
            Disjoint::No => "no",
            Disjoint::Unknown => "unknown",
        }
    }
}

/// The globs of a task's `**Touches:**` line; `None` when it has none (or an empty one).
pub fn task_touches(task: &Task) -> Option<BTreeSet<String>> {
    for (_, line) in crate::common::unfenced(task.body.lines()) {
        if let Some(value) = line.strip_prefix("**Touches:**") {
            let head = value.split('(').next().unwrap_or("");
            let globs: BTreeSet<String> =
                head.split(',').map(str::trim).filter(|g| !g.is_empty()).map(str::to_string).collect();
            return (!globs.is_empty()).then_some(globs);
        }
    }
    None
}

/// The verdict for a wave whose tasks declared these touches (`None`: declared nothing).
pub fn wave_disjoint(per_task: &[Option<BTreeSet<String>>]) -> Disjoint {
    let declared: Vec<&BTreeSet<String>> = per_task.iter().flatten().collect();
    for (i, a) in declared.iter().enumerate() {
        for b in &declared[i + 1..] {
            if a.iter().any(|x| b.iter().any(|y| globs_overlap(x, y))) {
                return Disjoint::No;
            }
        }
    }
    if per_task.iter().any(Option::is_none) { Disjoint::Unknown } else { Disjoint::Yes }
}

/// True unless the two globs are provably disjoint (see the module docs).
pub fn globs_overlap(a: &str, b: &str) -> bool {
    if a.contains("**") || b.contains("**") {
        return true;
    }
    let (sa, sb): (Vec<&str>, Vec<&str>) = (a.split('/').collect(), b.split('/').collect());
    if sa.len() != sb.len() {
        return false;
    }
    !sa.iter().zip(&sb).any(|(x, y)| segment_disjoint(x, y))
}

fn is_literal(seg: &str) -> bool {
    !seg.contains(['*', '?', '['])
}

fn segment_disjoint(x: &str, y: &str) -> bool {
    match (is_literal(x), is_literal(y)) {
        (true, true) => x != y,
        (true, false) => !fnmatch(x, y),
        (false, true) => !fnmatch(y, x),
        (false, false) => false,
    }
}

/// Shell-style matching of one name against one pattern: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`;
/// a `[` without its `]` is a literal.
fn fnmatch(name: &str, pattern: &str) -> bool {
    let n: Vec<char> = name.chars().collect();
    let p: Vec<char> = pattern.chars().collect();
    matches_at(&n, &p)
}

fn matches_at(n: &[char], p: &[char]) -> bool {
    match p.first() {
        None => n.is_empty(),
        Some('*') => (0..=n.len()).any(|k| matches_at(&n[k..], &p[1..])),
        Some('?') => !n.is_empty() && matches_at(&n[1..], &p[1..]),
        Some('[') => match class(&p[1..]) {
            Some((set, negated, used)) => {
                let Some(&c) = n.first() else { return false };
                let hit = set.iter().any(|&(lo, hi)| lo <= c && c <= hi);
                hit != negated && matches_at(&n[1..], &p[1 + used..])
            }
            None => n.first() == Some(&'[') && matches_at(&n[1..], &p[1..]),
        },
        Some(&c) => n.first() == Some(&c) && matches_at(&n[1..], &p[1..]),
    }
}

/// A bracket class: its inclusive ranges, whether it is negated (`[!…]`), and how many pattern
/// characters it used after the `[` (up to and including `]`).
type Class = (Vec<(char, char)>, bool, usize);

/// The class starting after `[`; `None` when it never closes.
fn class(p: &[char]) -> Option<Class> {
    let mut i = 0;
    let negated = p.first() == Some(&'!');
    if negated {
        i += 1;
    }
    let mut set = Vec::new();
    let mut first = true;
    while i < p.len() {
        let c = p[i];
        if c == ']' && !first {
            return Some((set, negated, i + 1));
        }
        first = false;
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            set.push((c, p[i + 2]));
            i += 3;
        } else {
            set.push((c, c));
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(globs: &[&str]) -> Option<BTreeSet<String>> {
        Some(globs.iter().map(|g| g.to_string()).collect())
    }

    #[test]
    fn overlap_is_conservative_and_segment_wise() {
        assert!(!globs_overlap("src/a/*", "src/b/*"));
        assert!(!globs_overlap("src/*", "src/api/x.py"), "`*` never crosses `/`");
        assert!(globs_overlap("src/api/*", "src/api/x.py"));
        assert!(globs_overlap("src/api/x.py", "src/api/x.py"));
        assert!(globs_overlap("src/api/*.py", "src/*/handler.py"), "two patterns may share a name");
        assert!(globs_overlap("**/*.py", "src/x.py"));
        assert!(!globs_overlap("foo/*.py", "bar/*.py"));
        assert!(globs_overlap("[abc].py", "a.py"));
        assert!(!globs_overlap("[!a].py", "a.py"));
        assert!(!globs_overlap("src/x?.rs", "src/x.rs"));
    }

    #[test]
    fn a_wave_is_no_on_overlap_unknown_on_a_silent_task_else_yes() {
        assert_eq!(wave_disjoint(&[set(&["src/a/*"]), set(&["src/b/*"])]), Disjoint::Yes);
        assert_eq!(wave_disjoint(&[set(&["src/api/*"]), set(&["src/api/x.py"])]), Disjoint::No);
        assert_eq!(wave_disjoint(&[set(&["src/api/*"]), set(&["src/api/x.py"]), None]), Disjoint::No);
        assert_eq!(wave_disjoint(&[set(&["src/a/*"]), None]), Disjoint::Unknown);
    }

    #[test]
    fn touches_lines_are_read_from_the_task_body() {
        let plan = crate::plan::parse_plan(
            "### T1: a\n**Depends on:** none\n**Touches:** src/a/*.py (the handlers), docs/x.md\n### T2: b\n**Depends on:** none\n### T3: c\n**Touches:** docs/c.md, src/c.py\n",
        )
        .expect("plan");
        let t = plan.tasks();
        assert_eq!(task_touches(&t[0]), set(&["src/a/*.py"]), "prose after `(` is dropped");
        assert_eq!(task_touches(&t[1]), None);
        assert_eq!(task_touches(&t[2]), set(&["docs/c.md", "src/c.py"]));
    }
}
