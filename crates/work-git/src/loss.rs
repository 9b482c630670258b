//! Work lost between two boundaries of one run, and what of it the work's own text plans.
//!
//! A run that dispatches an agent several times in sequence (`work implement`'s tasks, `work
//! loop run`'s tasks and repair rounds) takes a whole-tree snapshot at each boundary (see
//! [`crate::snapshot`]). Two things a later step can lose of an earlier step's work:
//!
//! - **lines** ([`Git::lost_lines`]): a line an earlier step added that is gone at the next
//!   boundary (`git checkout -- f` then re-editing `f`, a stashed or deleted new file);
//! - **paths** ([`Git::reverted_paths`]): a path an earlier step changed that is back at the
//!   base or gone (`git checkout -- f`, `git stash push -u`), whatever its lines were — an
//!   earlier step's deletion undone is caught here.
//!
//! A loss the later step's text plans is not counted ([`unplanned_lines`], [`plans_removal`]): a
//! line the text quotes, the lines of a file the text names with a word that removes it
//! (delete, remove, move, rename, replace, revert …) and that is gone (a planned deletion), a
//! path the text names that way. A text that only names the file it edits ("add `mul` to
//! lib.py") plans no loss of it: a step that deletes lib.py and writes a package without an
//! earlier step's function is a loss.

use crate::snapshot::LostLines;
use crate::{Git, GitError, is_excluded};
use std::collections::BTreeSet;
use std::path::Path;

/// What a later step lost of the earlier steps' work, beyond what its text plans.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Loss {
    /// Lines an earlier step added that are gone, per path.
    pub lines: Vec<LostLines>,
    /// Paths an earlier step changed that are back at the base or gone.
    pub paths: Vec<String>,
}

impl Loss {
    /// True when nothing was lost.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.paths.is_empty()
    }

    /// Every path the loss names (lines first, then the reverted paths not already named).
    pub fn all_paths(&self) -> Vec<String> {
        let mut out: Vec<String> = self.lines.iter().map(|l| l.path.clone()).collect();
        for p in &self.paths {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        out
    }

    /// One line for a verdict: the lost lines (three per path at most) and the reverted paths.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.lines.is_empty() {
            parts.push(describe_lines(&self.lines));
        }
        let bare: Vec<&str> =
            self.paths.iter().filter(|p| !self.lines.iter().any(|l| &l.path == *p)).map(String::as_str).collect();
        if !bare.is_empty() {
            parts.push(format!("{} back at the base or gone", bare.join(", ")));
        }
        parts.join("; ")
    }
}

/// `path (`a`, `b`, `c` and N more)` per path, `; `-separated.
pub fn describe_lines(lost: &[LostLines]) -> String {
    lost.iter()
        .map(|l| {
            let first: Vec<String> = l.lines.iter().take(3).map(|x| format!("`{x}`")).collect();
            let more = l.lines.len().saturating_sub(3);
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            format!("{} ({}{more})", l.path, first.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Words that plan a file's removal or its return to an earlier state.
const REMOVING: &[&str] = &[
    "delete", "remove", "rm ", "drop", "move", "rename", "replace", "revert", "undo", "restore", "reset", "discard",
    "split", "merge", "convert", "turn ",
];

/// How many bytes around a path's mention a removing word may stand.
const REMOVAL_WINDOW: usize = 80;

/// True when `text` names `path` (the repository-relative path or its file name) with a word that removes it or takes it
/// back ([`REMOVING`]) within [`REMOVAL_WINDOW`] bytes of the mention, in the same line: "Remove
/// shared.txt", "replace lib.py by a package lib/", "lib.py: delete it".
pub fn plans_removal(text: &str, path: &str) -> bool {
    near(text, path, REMOVING)
}

/// Words that plan a change of a file's mode.
const MODE_WORDS: &[&str] = &["chmod", "executable", "mode", "symlink", "permission"];

/// True when `text` names `path` with a word about its mode ([`MODE_WORDS`]) nearby, in the
/// same line ("make bin/hello non-executable", "chmod 644 bin/hello").
fn plans_mode(text: &str, path: &str) -> bool {
    near(text, path, MODE_WORDS)
}

/// True when `text` names `path` (or its file name) with one of `words` within
/// [`REMOVAL_WINDOW`] bytes of the mention, in the same line.
fn near(text: &str, path: &str, words: &[&str]) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let lower = text.to_ascii_lowercase();
    let (path, name) = (path.to_ascii_lowercase(), name.to_ascii_lowercase());
    [path.as_str(), name.as_str()].iter().filter(|n| !n.is_empty()).any(|needle| {
        lower.match_indices(*needle).any(|(at, _)| {
            let line_start = lower[..at].rfind('\n').map_or(0, |i| i + 1);
            let line_end = lower[at..].find('\n').map_or(lower.len(), |i| at + i);
            let from = floor_char(&lower, at.saturating_sub(REMOVAL_WINDOW).max(line_start));
            let to = floor_char(&lower, (at + needle.len() + REMOVAL_WINDOW).min(line_end));
            words.iter().any(|w| lower[from..to].contains(w))
        })
    })
}

/// The largest char boundary of `s` at or below `i`.
fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The lost lines `text` does not plan: a line the text quotes, or the lines of a file that is
/// gone from the tree under `root` and whose removal the text plans ([`plans_removal`]).
pub fn unplanned_lines(root: &Path, text: &str, lost: Vec<LostLines>) -> Vec<LostLines> {
    lost.into_iter()
        .filter_map(|mut l| {
            let gone = std::fs::symlink_metadata(root.join(&l.path)).is_err();
            if gone && plans_removal(text, &l.path) {
                return None;
            }
            l.lines.retain(|line| match line.strip_prefix(crate::snapshot::MODE_LINE) {
                Some(_) => !plans_mode(text, &l.path),
                None => !text.contains(line.trim()),
            });
            if l.lines.is_empty() { None } else { Some(l) }
        })
        .collect()
}

impl Git {
    /// The paths that differ between `base` and `prev` and no longer differ between `base` and
    /// `next` (three tree ids): changed by an earlier step, back at the base (or gone, for a
    /// path the base does not have) at the next boundary.
    pub fn reverted_paths(&self, base: &str, prev: &str, next: &str) -> Result<Vec<String>, GitError> {
        let now: BTreeSet<String> = self.tree_diff_names(base, next)?.into_iter().collect();
        Ok(self.tree_diff_names(base, prev)?.into_iter().filter(|p| !now.contains(p)).collect())
    }

    /// The paths git reads as binary in the change between two trees (`-` counts in
    /// `--numstat`): their "lines" are bytes, not work (a `.pyc` a gate run rewrites).
    pub fn binary_paths(&self, from: &str, to: &str) -> Result<BTreeSet<String>, GitError> {
        let out = self.run(&["diff", "--numstat", "--no-renames", "--no-ext-diff", "--no-textconv", "-z", from, to])?;
        Ok(crate::split_z(&out).iter().filter_map(|l| l.strip_prefix("-\t-\t").map(str::to_string)).collect())
    }

    /// The tree of `commit` (`""`: the empty tree, in the repository's object format).
    pub fn tree_of(&self, commit: &str) -> Result<String, GitError> {
        if commit.is_empty() {
            return Ok(self.run(&["hash-object", "-t", "tree", "/dev/null"])?.trim().to_string());
        }
        Ok(self.run(&["rev-parse", "--verify", "-q", &format!("{commit}^{{tree}}")])?.trim().to_string())
    }

    /// Points the ref `name` (under `refs/`) at `commit`, so `git gc` keeps a snapshot commit
    /// that is on no branch. Refs live in the git directory: the working tree never shows them.
    pub fn keep_ref(&self, name: &str, commit: &str) -> Result<(), GitError> {
        self.run(&["update-ref", "-m", "work: keep a boundary snapshot", name, commit]).map(|_| ())
    }

    /// What `next` lost of the work between `base` and `prev` (three tree ids), beyond what
    /// `text` plans, outside `exclude`. `per_line`: lost lines of paths still changed count
    /// too; otherwise only reverted paths (and their lines) do. A file that is binary at
    /// `prev` loses no lines (a rewritten `.pyc` is not lost work); gone, it is a reverted path.
    pub fn unplanned_loss<S: AsRef<str>>(
        &self,
        root: &Path,
        trees: [&str; 3],
        text: &str,
        exclude: &[S],
        per_line: bool,
    ) -> Result<Loss, GitError> {
        let [base, prev, next] = trees;
        let keep = |p: &str| !is_excluded(p, exclude);
        let binary = self.binary_paths(base, prev)?;
        let lost: Vec<LostLines> = self
            .lost_lines(base, prev, next)?
            .into_iter()
            .filter(|l| keep(&l.path) && !binary.contains(&l.path))
            .collect();
        let unplanned = unplanned_lines(root, text, lost.clone());
        // A reverted path is planned when the text plans its removal or return, or when it lost
        // lines and the text plans every one of them.
        let paths: Vec<String> = self
            .reverted_paths(base, prev, next)?
            .into_iter()
            .filter(|p| keep(p) && !plans_removal(text, p))
            .filter(|p| !lost.iter().any(|l| &l.path == p) || unplanned.iter().any(|l| &l.path == p))
            .collect();
        let lines = unplanned.into_iter().filter(|l| per_line || paths.contains(&l.path)).collect();
        Ok(Loss { lines, paths })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_the_text_plans_is_not_counted() {
        let (d, g) = crate::scratch::repo_with(&[("f.txt", "base\n")]);
        let base = g.base_tree().expect("base");
        std::fs::write(d.path().join("f.txt"), "base\none\n").expect("write");
        std::fs::write(d.path().join("u.txt"), "untracked work\n").expect("write");
        let prev = g.snapshot_tree::<&str>(&[]).expect("snap");
        std::fs::write(d.path().join("f.txt"), "base\ntwo\n").expect("write");
        std::fs::remove_file(d.path().join("u.txt")).expect("rm");
        let next = g.snapshot_tree::<&str>(&[]).expect("snap");
        let trees = [base.as_str(), prev.as_str(), next.as_str()];
        let loss = g.unplanned_loss::<&str>(d.path(), trees, "Add two.", &[], true).expect("loss");
        assert_eq!(loss.paths, vec!["u.txt"]);
        assert_eq!(loss.all_paths(), vec!["f.txt", "u.txt"]);
        assert_eq!(loss.describe(), "f.txt (`one`); u.txt (`untracked work`)");
        // Quoting the line plans its removal; naming the gone file plans its deletion.
        let planned = "Replace `one` with `two`; remove u.txt.";
        assert!(g.unplanned_loss::<&str>(d.path(), trees, planned, &[], true).expect("loss").is_empty());
        // Paths only: f.txt is still changed, u.txt is gone.
        let paths = g.unplanned_loss::<&str>(d.path(), trees, "Fix it.", &[], false).expect("loss");
        assert_eq!(paths.all_paths(), vec!["u.txt"]);
        assert!(g.unplanned_loss(d.path(), trees, "Fix it.", &["u.txt", "f.txt"], true).expect("loss").is_empty());
    }

    #[test]
    fn naming_a_file_plans_its_removal_only_with_a_word_that_removes_it() {
        assert!(plans_removal("Remove shared.txt.", "shared.txt"));
        assert!(plans_removal("Replace lib.py by a package lib/ holding add and mul.", "lib.py"));
        assert!(plans_removal("src/old.rs: delete it", "src/old.rs"));
        assert!(!plans_removal("Add `mul(a, b)` to lib.py, beside add.", "lib.py"));
        assert!(!plans_removal("Remove the comment.\nAdd mul to lib.py.", "lib.py"), "another line's word");
        assert!(!plans_removal("Add mul.", "lib.py"));
        let (d, g) = crate::scratch::repo_with(&[("lib.py", "def add(): pass\n")]);
        let base = g.base_tree().expect("base");
        std::fs::write(d.path().join("lib.py"), "def add(): pass\ndef sub(): pass\n").expect("write");
        let prev = g.snapshot_tree::<&str>(&[]).expect("snap");
        std::fs::remove_file(d.path().join("lib.py")).expect("rm");
        std::fs::create_dir(d.path().join("lib")).expect("mkdir");
        std::fs::write(d.path().join("lib/__init__.py"), "def add(): pass\ndef mul(): pass\n").expect("write");
        let next = g.snapshot_tree::<&str>(&[]).expect("snap");
        let trees = [base.as_str(), prev.as_str(), next.as_str()];
        let loss = g.unplanned_loss::<&str>(d.path(), trees, "Add `mul` to lib.py.", &[], true).expect("loss");
        assert_eq!(loss.all_paths(), vec!["lib.py"], "{loss:?}");
        let planned = "Turn lib.py into a package lib/ with add and mul; sub is dropped.";
        assert!(g.unplanned_loss::<&str>(d.path(), trees, planned, &[], true).expect("loss").is_empty());
    }

    #[test]
    fn a_mode_an_earlier_step_gave_is_lost_when_a_later_one_takes_it_away() {
        use std::os::unix::fs::PermissionsExt;
        let (d, g) = crate::scratch::repo_with(&[("f.txt", "base\n")]);
        let base = g.base_tree().expect("base");
        let hello = d.path().join("hello");
        std::fs::write(&hello, "#!/bin/sh\necho hi\n").expect("write");
        std::fs::set_permissions(&hello, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let prev = g.snapshot_tree::<&str>(&[]).expect("snap");
        std::fs::set_permissions(&hello, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        std::fs::write(d.path().join("README"), "more\n").expect("write");
        let next = g.snapshot_tree::<&str>(&[]).expect("snap");
        let trees = [base.as_str(), prev.as_str(), next.as_str()];
        let loss = g.unplanned_loss::<&str>(d.path(), trees, "Add a README line.", &[], true).expect("loss");
        assert_eq!(loss.describe(), "hello (`file mode 100755`)");
        let planned = "Make hello non-executable (chmod 644 hello).";
        assert!(g.unplanned_loss::<&str>(d.path(), trees, planned, &[], true).expect("loss").is_empty());
    }

    #[test]
    fn a_rewritten_binary_file_loses_no_lines() {
        let (d, g) = crate::scratch::repo_with(&[("f.txt", "base\n")]);
        let base = g.base_tree().expect("base");
        std::fs::write(d.path().join("m.pyc"), b"\0\x01abc1\nname one\n").expect("write");
        let prev = g.snapshot_tree::<&str>(&[]).expect("snap");
        std::fs::write(d.path().join("m.pyc"), b"\0\x01abc2\nname two\n").expect("write");
        let next = g.snapshot_tree::<&str>(&[]).expect("snap");
        assert!(!g.lost_lines(&base, &prev, &next).expect("lost").is_empty(), "read as text, bytes are lost");
        let loss = g.unplanned_loss::<&str>(d.path(), [&base, &prev, &next], "", &[], true).expect("loss");
        assert!(loss.is_empty(), "{loss:?}");
        std::fs::remove_file(d.path().join("m.pyc")).expect("rm");
        let gone = g.snapshot_tree::<&str>(&[]).expect("snap");
        let loss = g.unplanned_loss::<&str>(d.path(), [&base, &prev, &gone], "", &[], true).expect("loss");
        assert_eq!(loss.paths, vec!["m.pyc"]);
    }

    #[test]
    fn an_earlier_deletion_undone_is_a_reverted_path() {
        let (d, g) = crate::scratch::repo_with(&[("f.txt", "base\nkeep\n")]);
        let base = g.base_tree().expect("base");
        std::fs::write(d.path().join("f.txt"), "base\n").expect("write");
        let prev = g.snapshot_tree::<&str>(&[]).expect("snap");
        g.run(&["checkout", "--", "f.txt"]).expect("checkout");
        let next = g.snapshot_tree::<&str>(&[]).expect("snap");
        let loss = g.unplanned_loss::<&str>(d.path(), [&base, &prev, &next], "Add more.", &[], true).expect("loss");
        assert_eq!(loss, Loss { lines: Vec::new(), paths: vec!["f.txt".into()] });
        assert_eq!(loss.describe(), "f.txt back at the base or gone");
        assert_eq!(g.tree_of(&g.head_sha().expect("head")).expect("tree"), base);
        assert_eq!(g.tree_of("").expect("empty"), "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
    }
}
