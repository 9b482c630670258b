//! Damage outside what a run's text plans, that no check looks at: a deleted document, a
//! changed CI configuration. Never silent: a workflow names each such path in its summary
//! (`out_of_scope_damage`). What git itself reads (hooks, the configuration) is not here: the
//! seal blocks it outright (`crate::integrity`, `git-tampered`).
//!
//! A path is planned when the run's text names it (the path itself, or a directory of it
//! written with its trailing `/`) or a `**Touches:**` line of the text has a glob matching it
//! (`*` within a segment, `**` across segments).

use serde::Serialize;

/// What kind of damage a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DamageKind {
    /// A document deleted: a `*.md`, `*.rst` or `*.adoc` file, or anything under `docs/` or
    /// `doc/`.
    DocsDeleted,
    /// CI configuration added, changed or deleted: `.github/`, `.ci/`, `.circleci/`,
    /// `.buildkite/`, `.gitlab-ci.yml`, `.travis.yml`, `Jenkinsfile`, `azure-pipelines.yml`.
    CiConfig,
}

/// One damaged path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Damage {
    /// The path (repository-relative).
    pub path: String,
    /// What kind of damage it is.
    pub kind: DamageKind,
}

impl Damage {
    /// One line for a summary.
    pub fn describe(&self) -> String {
        let what = match self.kind {
            DamageKind::DocsDeleted => "document deleted",
            DamageKind::CiConfig => "CI configuration changed",
        };
        format!("out-of-scope damage: {what}: {} (the run's text does not plan it)", self.path)
    }
}

/// The damage among `changes` (`git status --porcelain`-style lines: `?? new`, ` M changed`,
/// ` D deleted`) that `text` does not plan.
pub fn damage(changes: &[String], text: &str) -> Vec<Damage> {
    let touches = touches(text);
    changes
        .iter()
        .filter_map(|line| {
            let (code, path) = (line.get(..2)?, line.get(3..)?);
            let kind = if is_ci(path) {
                DamageKind::CiConfig
            } else if code.contains('D') && is_doc(path) {
                DamageKind::DocsDeleted
            } else {
                return None;
            };
            (!planned(path, text, &touches)).then(|| Damage { path: path.to_string(), kind })
        })
        .collect()
}

fn is_doc(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [".md", ".rst", ".adoc"].iter().any(|e| lower.ends_with(e))
        || lower.starts_with("docs/")
        || lower.starts_with("doc/")
}

fn is_ci(path: &str) -> bool {
    [".github/", ".ci/", ".circleci/", ".buildkite/"].iter().any(|d| path.starts_with(d))
        || [".gitlab-ci.yml", ".travis.yml", "Jenkinsfile", "azure-pipelines.yml"].contains(&path)
}

fn planned(path: &str, text: &str, touches: &[String]) -> bool {
    if text.contains(path) || touches.iter().any(|g| glob(g, path)) {
        return true;
    }
    let mut dir = path;
    while let Some((d, _)) = dir.rsplit_once('/') {
        if names_dir(text, &format!("{d}/")) {
            return true;
        }
        dir = d;
    }
    false
}

/// The paths of `changed` that `text` does not plan and that are not tests (in the test tree
/// as the check surface reads it: [`crate::surface::is_test_path`]): what a task touched
/// outside its text.
pub fn unplanned(changed: &[String], text: &str) -> Vec<String> {
    let touches = touches(text);
    changed.iter().filter(|p| !crate::surface::is_test_path(p) && !planned(p, text, &touches)).cloned().collect()
}

/// Whether `text` names the directory `dir` (ending in `/`) as a word of its own: `docs/`
/// followed by no more path (`docs/other.md` names a file, not the directory).
fn names_dir(text: &str, dir: &str) -> bool {
    text.match_indices(dir).any(|(i, _)| {
        let after = text[i + dir.len()..].chars().next();
        !after.is_some_and(|c| c.is_alphanumeric() || "._-/*".contains(c))
    })
}

/// The globs of every `**Touches:**` (or `Touches:`) line of `text`.
fn touches(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().trim_start_matches(['-', '*', ' ']);
            l.strip_prefix("Touches:**").or_else(|| l.strip_prefix("Touches:"))
        })
        .flat_map(|v| v.split('(').next().unwrap_or("").split(',').map(|g| g.trim().trim_matches('`').to_string()))
        .filter(|g| !g.is_empty())
        .collect()
}

/// `*` matches within a segment, `**` any number of segments.
fn glob(pattern: &str, path: &str) -> bool {
    fn segs(p: &[&str], s: &[&str]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(&"**"), _) => segs(&p[1..], s) || (!s.is_empty() && segs(p, &s[1..])),
            (Some(a), Some(b)) => seg(a.as_bytes(), b.as_bytes()) && segs(&p[1..], &s[1..]),
            _ => false,
        }
    }
    fn seg(p: &[u8], s: &[u8]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(b'*'), _) => seg(&p[1..], s) || (!s.is_empty() && seg(p, &s[1..])),
            (Some(a), Some(b)) => a == b && seg(&p[1..], &s[1..]),
            _ => false,
        }
    }
    let p: Vec<&str> = pattern.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    segs(&p, &s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn unplanned_doc_deletions_and_ci_edits_are_damage_and_planned_ones_are_not() {
        let changes =
            lines(&[" D docs/guide.md", " M .github/workflows/ci.yml", " M src/a.rs", " M README.md", "?? notes.md"]);
        let d = damage(&changes, "Fix src/a.rs.");
        let kinds: Vec<(&str, DamageKind)> = d.iter().map(|d| (d.path.as_str(), d.kind)).collect();
        assert_eq!(
            kinds,
            [("docs/guide.md", DamageKind::DocsDeleted), (".github/workflows/ci.yml", DamageKind::CiConfig)]
        );
        assert!(damage(&changes, "Remove docs/guide.md; update .github/ too.").is_empty());
        assert!(damage(&changes, "Rewrite everything under `docs/`; `.github/` too.").is_empty());
        assert!(damage(&changes, "**Touches:** docs/*.md, .github/**").is_empty());
        assert_eq!(damage(&changes, "**Touches:** docs/other.md").len(), 2);
    }

    #[test]
    fn a_change_outside_the_text_is_unplanned_unless_it_is_a_test() {
        let changed = lines(&["src/a.rs", "src/b.rs", "tests/a_test.rs", "docs/x.md"]);
        assert_eq!(unplanned(&changed, "Fix src/a.rs.\n\n**Touches:** docs/*.md"), ["src/b.rs"]);
    }
}
