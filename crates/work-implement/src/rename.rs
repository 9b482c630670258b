//! A rename's ground truth for `work edit`: the editor's `sites` count is its word; whether the
//! old name is gone is not. When the description asks for a rename — the word `rename`, then
//! the old name in backticks, then `to` and the new name in backticks (`` Rename `greet_user`
//! to `welcome_user` ``), both plain identifiers, the old one standing as a word on the
//! definition site's line — the engine reads, before the dispatch, every line of the tracked
//! files where the old name stands as a word, and, after the edit, those files and every file
//! the edit changed again. An occurrence left is BLOCKED `rename-incomplete`, naming each
//! `PATH:LINE` (an alias `greet_user = welcome_user` keeps every use site working, so the
//! suite cannot tell).
//!
//! Not counted: prose files (`*.md`, `*.rst`, `*.txt`, `*.adoc`, a `CHANGELOG`/`NEWS`/`HISTORY`
//! file), a line that is a comment or the part of a line after a comment marker (`#`, `//`,
//! `--`, `;`, `/*`, `*`), binary files, files over 1 MiB, and the frozen checks (tests and check
//! scripts the edit may not change). The old name may stay in the definition site's file when
//! the description says to keep it (`` keep `greet_user` as an alias ``) or when a frozen check
//! still uses it (the alias is then what keeps the unchangeable check working).
//!
//! A rename may also rename the frozen checks, and only by the rename: [`renamed_check`] is
//! the engine's version of a frozen check file — every word occurrence of the old name
//! replaced by the new one, none when the new name already stands in it — and
//! [`only_renamed`] says whether the agent's file is that version (comment lines may be left
//! as they were). `crate::edit` allows such a change and has the checks run the engine's
//! version on its copy; any other change to a frozen check is `check-tampered`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The most of one file read.
const FILE_CAP: u64 = 1 << 20;
/// The most tracked files read before the dispatch.
const FILES_CAP: usize = 20_000;
/// The most `PATH:LINE`s a verdict names.
const NAMED_CAP: usize = 12;

/// A rename the description asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rename {
    /// The name being replaced.
    pub old: String,
    /// The name it becomes.
    pub new: String,
    /// The description says to keep the old name (`` keep `old` ``).
    pub keep: bool,
}

/// Where the old name stood before the dispatch.
#[derive(Debug, Clone, Default)]
pub struct Before {
    /// Repository-relative path → the lines (1-based) where the old name stood as a word.
    pub sites: BTreeMap<String, Vec<usize>>,
}

fn is_ident(w: &str) -> bool {
    let mut c = w.chars();
    c.next().is_some_and(|f| f.is_alphabetic() || f == '_' || f == '$')
        && c.all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$')
}

/// The backtick-quoted spans of `text` with the text before each.
fn quoted(text: &str) -> Vec<(&str, &str)> {
    let parts: Vec<&str> = text.split('`').collect();
    (1..parts.len()).step_by(2).filter(|&i| i + 1 < parts.len()).map(|i| (parts[i - 1], parts[i])).collect()
}

/// The rename `description` asks for, when it reads as one and the old name stands as a word
/// on `def_line`.
pub fn recognise(description: &str, def_line: &str) -> Option<Rename> {
    let lower = description.to_ascii_lowercase();
    let at = lower.find("rename")?;
    let spans = quoted(&description[at..]);
    let (_, old) = spans.first()?;
    let (before_new, new) = spans.get(1)?;
    let to = before_new.split_whitespace().last().is_some_and(|w| w.eq_ignore_ascii_case("to"));
    if !to || !is_ident(old) || !is_ident(new) || old == new || occurrences(def_line, old).is_empty() {
        return None;
    }
    let keep = lower.match_indices("keep").any(|(i, _)| {
        let rest = &description[i..];
        let sentence = rest.split(['.', '\n']).next().unwrap_or(rest);
        quoted(sentence).first().is_some_and(|(_, w)| w == old)
    });
    Some(Rename { old: old.to_string(), new: new.to_string(), keep })
}

/// Whether `path` is prose (documentation, a changelog), where an old name may stay.
pub fn is_prose(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let upper = name.to_uppercase();
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_lowercase()).unwrap_or_default();
    matches!(ext.as_str(), "md" | "markdown" | "rst" | "txt" | "adoc")
        || ["CHANGELOG", "CHANGES", "NEWS", "HISTORY"].iter().any(|p| upper.starts_with(p))
}

/// Whether `line` is a comment line (it starts with a comment marker).
fn is_comment_line(line: &str) -> bool {
    let trimmed = line.trim_start();
    ["#", "//", "--", ";", "/*", "*"].iter().any(|m| trimmed.starts_with(m))
}

/// The byte offsets where `name` stands as a word in `text` (no letter, digit, `_` or `$`
/// either side), comments and strings included.
fn words(text: &str, name: &str) -> Vec<usize> {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    text.match_indices(name)
        .map(|(i, _)| i)
        .filter(|&i| {
            let before = text[..i].chars().next_back();
            let after = text[i + name.len()..].chars().next();
            !before.is_some_and(word) && !after.is_some_and(word)
        })
        .collect()
}

/// The byte offsets where `name` stands as a word in `line`, outside a comment.
pub fn occurrences(line: &str, name: &str) -> Vec<usize> {
    if is_comment_line(line) {
        return Vec::new();
    }
    words(line, name).into_iter().filter(|&i| !after_comment_marker(&line[..i])).collect()
}

/// The engine's version of a frozen check under `rename`: `frozen` with every word occurrence
/// of the old name — in code, strings and comments alike (a string can name the symbol:
/// `mock.patch("lib.add")`; no language is parsed) — replaced by the new name. `None` when the
/// old name does not stand in it, or the new one already does: renamed, such a check could
/// compare the new name with itself (`assert add(2, 2) == plus(2, 2)` beside a `plus` of its
/// own becomes `plus(2, 2) == plus(2, 2)`).
pub fn renamed_check(frozen: &str, rename: &Rename) -> Option<String> {
    let at = words(frozen, &rename.old);
    if at.is_empty() || !words(frozen, &rename.new).is_empty() {
        return None;
    }
    let mut out = String::with_capacity(frozen.len() + at.len() * rename.new.len());
    let mut from = 0;
    for i in at {
        out.push_str(&frozen[from..i]);
        out.push_str(&rename.new);
        from = i + rename.old.len();
    }
    out.push_str(&frozen[from..]);
    Some(out)
}

/// Whether `now` is the frozen check `frozen` changed by `rename` and nothing else:
/// [`renamed_check`]'s version byte for byte, or that version with some comment lines of
/// `frozen` (a line starting with a comment marker) left as they were — an editor may leave
/// `# add must stay exact` alone. Either way the checks then run the engine's version, never
/// `now`.
pub fn only_renamed(frozen: &str, now: &str, rename: &Rename) -> bool {
    let Some(ours) = renamed_check(frozen, rename) else { return false };
    if now == ours {
        return true;
    }
    let lines = |t: &str| t.split_inclusive('\n').map(str::to_string).collect::<Vec<_>>();
    let (was, ours, now) = (lines(frozen), lines(&ours), lines(now));
    was.len() == now.len()
        && ours.len() == now.len()
        && was.iter().zip(&ours).zip(&now).all(|((w, o), n)| n == o || (n == w && is_comment_line(w)))
}

/// Whether text before an occurrence holds a trailing-comment marker (`  # …`, `// …`).
fn after_comment_marker(before: &str) -> bool {
    before.contains("//") || before.contains(" #") || before.contains("\t#")
}

/// The lines of the file at `rel` where `name` stands as a word (none for a missing, binary or
/// oversized file).
fn lines_with(root: &Path, rel: &str, name: &str) -> Vec<usize> {
    let Ok(bytes) = work_runtime::fsx::read_confined(root, rel, FILE_CAP) else { return Vec::new() };
    if bytes.len() as u64 >= FILE_CAP || bytes.contains(&0) {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    text.lines().enumerate().filter(|(_, l)| !occurrences(l, name).is_empty()).map(|(i, _)| i + 1).collect()
}

/// Reads where the old name stands in the tracked files (`tracked`), before the dispatch.
pub fn before(root: &Path, tracked: &[String], rename: &Rename) -> Before {
    let mut sites = BTreeMap::new();
    for rel in tracked.iter().filter(|p| !is_prose(p)).take(FILES_CAP) {
        let lines = lines_with(root, rel, &rename.old);
        if !lines.is_empty() {
            sites.insert(rel.clone(), lines);
        }
    }
    Before { sites }
}

/// What the rename left, after the edit: the `PATH:LINE`s where the old name still stands.
#[derive(Debug, Clone, Default)]
pub struct Left {
    /// Every `PATH:LINE` left, sorted.
    pub sites: Vec<String>,
    /// The use sites before the edit (occurrences outside the definition site's line), counted
    /// in the files judged.
    pub use_sites_before: usize,
    /// The files judged that held the old name before the edit.
    pub files_before: usize,
}

/// Judges the tree after the edit: the files that held the old name before and the files the
/// edit `changed`, minus prose and the `frozen` checks.
pub fn left(
    root: &Path,
    rename: &Rename,
    before: &Before,
    changed: &[String],
    frozen: &BTreeSet<String>,
    def_site: (&str, usize),
) -> Left {
    let judged = |p: &String| !is_prose(p) && !frozen.contains(p);
    // The checks that may not change still name the old name: the alias is what keeps them working.
    let checks_use_it = before.sites.keys().any(|p| frozen.contains(p));
    let alias_allowed = rename.keep || checks_use_it;
    let files: BTreeSet<&String> = before.sites.keys().chain(changed.iter()).filter(|p| judged(p)).collect();
    let mut out = Left::default();
    for (path, lines) in before.sites.iter().filter(|(p, _)| judged(p)) {
        out.files_before += 1;
        out.use_sites_before += lines.iter().filter(|&&n| !(path == def_site.0 && n == def_site.1)).count();
    }
    for path in files {
        if alias_allowed && path == def_site.0 {
            continue;
        }
        out.sites.extend(lines_with(root, path, &rename.old).into_iter().map(|n| format!("{path}:{n}")));
    }
    out
}

/// The one-line verdict for what the rename left.
pub fn verdict(rename: &Rename, left: &Left) -> String {
    let named: Vec<&str> = left.sites.iter().take(NAMED_CAP).map(String::as_str).collect();
    let more = left.sites.len().saturating_sub(NAMED_CAP);
    format!(
        "the rename of `{}` to `{}` is incomplete: `{}` still stands at {}{} — rename every use site (an alias at the definition site is kept only when the description says keep `{}`)",
        rename.old,
        rename.new,
        rename.old,
        named.join(", "),
        if more > 0 { format!(" and {more} more") } else { String::new() },
        rename.old
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rename_is_read_from_the_description_and_the_definition_line() {
        let r = recognise("rename `greet_user` to `welcome_user` at every use site", "def greet_user(name):");
        assert_eq!(r, Some(Rename { old: "greet_user".into(), new: "welcome_user".into(), keep: false }));
        let k = recognise("Rename `greet_user` to `welcome_user`; keep `greet_user` as an alias.", "def greet_user():");
        assert!(k.is_some_and(|r| r.keep));
        // Not a rename: no `to`, not identifiers, or the old name is not on the definition line.
        assert_eq!(recognise("rename `a` and `b`", "def a():"), None);
        assert_eq!(recognise("rename `a.b` to `c`", "a.b = 1"), None);
        assert_eq!(recognise("rename `parse` to `parse_args`", "def parser():"), None);
        assert_eq!(recognise("make `f` return 1", "def f():"), None);
    }

    #[test]
    fn occurrences_are_words_outside_comments() {
        assert_eq!(occurrences("print(greet_user('a'))", "greet_user"), vec![6]);
        assert!(occurrences("print(greet_users('a'))", "greet_user").is_empty());
        assert!(occurrences("# was greet_user", "greet_user").is_empty());
        assert!(occurrences("x = 1  # was greet_user", "greet_user").is_empty());
        assert!(occurrences("let x = 1; // greet_user", "greet_user").is_empty());
        assert_eq!(occurrences("getattr(lib, \"greet_user\")", "greet_user").len(), 1);
        assert!(is_prose("docs/CHANGELOG") && is_prose("README.md") && !is_prose("app.py"));
    }

    #[test]
    fn a_frozen_check_may_change_by_the_rename_alone() {
        let r = recognise("Rename `add` to `plus`", "def add(a, b):").expect("rename");
        let frozen = "from lib import add\n\n# add is exact\ndef test_add():\n    assert add(1, 2) == 3  # add\n    assert getattr(lib, 'add')\n    s.adds(1); s.add_one(); $add\n";
        let ours = renamed_check(frozen, &r).expect("renamed");
        assert_eq!(
            ours,
            "from lib import plus\n\n# plus is exact\ndef test_add():\n    assert plus(1, 2) == 3  # plus\n    assert getattr(lib, 'plus')\n    s.adds(1); s.add_one(); $add\n"
        );
        assert!(only_renamed(frozen, &ours, &r));
        // A comment line left as it was is the rename; a trailing comment left is not.
        let kept = ours.replace("# plus is exact", "# add is exact");
        assert!(only_renamed(frozen, &kept, &r));
        assert!(!only_renamed(frozen, &ours.replace("3  # plus", "3  # add"), &r));
        // Anything else is not: a weakened assertion, a test removed, an appended rebinding, a
        // use left unrenamed, the file untouched.
        assert!(!only_renamed(frozen, &ours.replace("== 3", "== plus(1, 2)"), &r));
        assert!(!only_renamed(frozen, &ours.replace("def test_add():\n", ""), &r));
        assert!(!only_renamed(frozen, &format!("{ours}plus = lambda a, b: 3\n"), &r));
        assert!(!only_renamed(frozen, &ours.replacen("plus(1, 2)", "add(1, 2)", 1), &r));
        assert!(!only_renamed(frozen, frozen, &r));
        // The new name already in the check: no renamed version (it could compare it with itself).
        assert_eq!(renamed_check("plus = lambda a, b: a + b\nassert add(2, 2) == plus(2, 2)\n", &r), None);
        assert_eq!(renamed_check("assert adder(1)\n", &r), None, "the old name does not stand");
    }

    #[test]
    fn what_is_left_names_each_line_and_an_alias_is_allowed_only_when_asked_or_needed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = |rel: &str, text: &str| std::fs::write(dir.path().join(rel), text).expect("write");
        w("lib.py", "def greet_user(n):\n    return n\n");
        w("app.py", "from lib import greet_user\nprint(greet_user(1))\n");
        let tracked = vec!["lib.py".to_string(), "app.py".to_string(), "README.md".to_string()];
        let mut r = recognise("rename `greet_user` to `welcome_user`", "def greet_user(n):").expect("rename");
        let b = before(dir.path(), &tracked, &r);
        assert_eq!(b.sites.len(), 2);
        // The liar: the definition renamed with an alias kept, the use sites untouched.
        w("lib.py", "def welcome_user(n):\n    return n\n\ngreet_user = welcome_user\n");
        let none = BTreeSet::new();
        let l = left(dir.path(), &r, &b, &["lib.py".into()], &none, ("lib.py", 1));
        assert_eq!(l.sites, vec!["app.py:1", "app.py:2", "lib.py:4"]);
        assert_eq!((l.use_sites_before, l.files_before), (2, 2));
        // Asked to keep the alias: only the use sites count.
        r.keep = true;
        let l = left(dir.path(), &r, &b, &["lib.py".into()], &none, ("lib.py", 1));
        assert_eq!(l.sites, vec!["app.py:1", "app.py:2"]);
        // The honest rename with the alias kept: nothing left.
        w("app.py", "from lib import welcome_user\nprint(welcome_user(1))\n");
        let l = left(dir.path(), &r, &b, &["lib.py".into(), "app.py".into()], &none, ("lib.py", 1));
        assert!(l.sites.is_empty(), "{:?}", l.sites);
        // A frozen check that still calls the old name allows the alias without being asked.
        r.keep = false;
        let frozen: BTreeSet<String> = ["app.py".to_string()].into();
        let l = left(dir.path(), &r, &b, &["lib.py".into()], &frozen, ("lib.py", 1));
        assert!(l.sites.is_empty(), "{:?}", l.sites);
    }
}
