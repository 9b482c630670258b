//! Whole-tree snapshots, independent of the index.
//!
//! [`Git::snapshot_tree`] writes the working tree as a git tree object through a temporary
//! index: `read-tree HEAD`, `add -A`, `write-tree`, with `GIT_INDEX_FILE` pointing at a file of
//! the engine's own. Tracked and untracked files are in it (ignored ones are not), and nothing
//! of the real index is trusted: an `assume-unchanged` or `skip-worktree` flag, an
//! intent-to-add entry or a staged-then-reverted change cannot hide a file's content, and the
//! real index is never written. Two snapshots compare by their tree ids (equal ids, equal
//! trees); [`Git::tree_diff_text`] shows what changed between them and [`Git::lost_lines`]
//! names, per path, the lines one step added that a later step removed.

use crate::{Git, GitError, exclude_dirs, split_z};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes the temporary index files of one process.
static NEXT_INDEX: AtomicU64 = AtomicU64::new(0);

/// The identity snapshot commits carry (they are dangling: never on a branch).
pub(crate) const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "work"),
    ("GIT_AUTHOR_EMAIL", "work@localhost"),
    ("GIT_COMMITTER_NAME", "work"),
    ("GIT_COMMITTER_EMAIL", "work@localhost"),
];

/// How a lost mode reads among the lost lines ([`Git::lost_lines`]): `file mode 100755`.
pub const MODE_LINE: &str = "file mode ";

/// Lines of one path that an earlier step added and a later step removed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LostLines {
    /// The path, relative to the root.
    pub path: String,
    /// The lines, as they were.
    pub lines: Vec<String>,
}

/// One path that differs between two trees ([`Git::tree_changes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeChange {
    /// The path, relative to the root.
    pub path: String,
    /// `A` added, `M` modified, `D` deleted, `T` type changed.
    pub status: char,
    /// Its mode in each tree (`000000`: absent).
    pub modes: (String, String),
}

/// Removes a temporary index file when dropped.
pub(crate) struct TempIndex(std::path::PathBuf);

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = work_runtime::fsx::plain::remove_file(&self.0);
    }
}

impl Git {
    /// The working tree (tracked and untracked, not ignored, outside `exclude`) as a tree id,
    /// written through a temporary index (see the module documentation).
    pub fn snapshot_tree<S: AsRef<str>>(&self, exclude: &[S]) -> Result<String, GitError> {
        let (_guard, index) = self.temp_index()?;
        let env = [("GIT_INDEX_FILE", index.as_str())];
        let born = self.head_sha().is_some();
        self.run_env(&["read-tree", if born { "HEAD" } else { "--empty" }], &env)?;
        self.run_env(&["add", "-A", "--ignore-errors", "--", "."], &env)?;
        // The exclusions are put back as HEAD has them (an exclude pathspec on `add` fails
        // when the path is ignored).
        let excluded: Vec<String> = exclude_dirs(exclude).map(|e| format!(":(literal){e}")).collect();
        if !excluded.is_empty() {
            let mut args: Vec<&str> = if born {
                vec!["reset", "-q", "HEAD", "--"]
            } else {
                vec!["rm", "-r", "-q", "--cached", "--ignore-unmatch", "--"]
            };
            args.extend(excluded.iter().map(String::as_str));
            self.run_env(&args, &env)?;
        }
        Ok(self.run_env(&["write-tree"], &env)?.trim().to_string())
    }

    /// The tree every snapshot is measured from: HEAD's, or the empty tree on an unborn branch.
    pub fn base_tree(&self) -> Result<String, GitError> {
        match self.head_sha() {
            Some(_) => Ok(self.run(&["rev-parse", "HEAD^{tree}"])?.trim().to_string()),
            None => self.snapshot_tree(&["."]),
        }
    }

    /// A dangling commit of `tree` (its parent HEAD, when there is one) that `git show
    /// <commit>:<path>` recovers files from.
    pub fn snapshot_commit(&self, tree: &str, message: &str) -> Result<String, GitError> {
        self.snapshot_commit_after(tree, message, None)
    }

    /// [`Git::snapshot_commit`] with `earlier` (an earlier snapshot commit) as a parent too, so
    /// one ref on the newest keeps a run's whole chain of snapshots from `git gc`.
    pub fn snapshot_commit_after(&self, tree: &str, message: &str, earlier: Option<&str>) -> Result<String, GitError> {
        let head = self.head_sha();
        let mut args = vec!["commit-tree", tree, "-m", message];
        for parent in earlier.into_iter().chain(head.as_deref()) {
            args.extend(["-p", parent]);
        }
        Ok(self.run_env(&args, &IDENTITY)?.trim().to_string())
    }

    /// The paths that differ between two trees.
    pub fn tree_diff_names(&self, from: &str, to: &str) -> Result<Vec<String>, GitError> {
        Ok(self.tree_changes(from, to)?.into_iter().map(|c| c.path).collect())
    }

    /// Every path that differs between two trees, with how (no renames): the one diff of two
    /// snapshots every policy reads.
    pub fn tree_changes(&self, from: &str, to: &str) -> Result<Vec<TreeChange>, GitError> {
        let out = self.run(&["diff-tree", "-r", "-z", "--raw", "--no-renames", from, to])?;
        Ok(split_z(&out)
            .chunks(2)
            .filter_map(|c| {
                let [meta, path] = c else { return None };
                // `:<old mode> <new mode> <old blob> <new blob> <status>`
                let m: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
                let status = m.get(4)?.chars().next()?;
                Some(TreeChange { path: path.clone(), status, modes: (m.first()?.to_string(), m.get(1)?.to_string()) })
            })
            .collect())
    }

    /// The diff between two trees as a reviewer reads it (no external diff, no text
    /// conversion, no renames).
    pub fn tree_diff_text(&self, from: &str, to: &str) -> Result<String, GitError> {
        self.run(&["diff", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", from, to])
    }

    /// `path (+added -removed)` for every path that differs between two trees.
    pub fn tree_diff_summary(&self, from: &str, to: &str) -> Result<Vec<String>, GitError> {
        let out = self.run(&["diff", "--numstat", "--no-renames", "-z", from, to])?;
        Ok(split_z(&out)
            .iter()
            .filter_map(|l| {
                let mut parts = l.splitn(3, '\t');
                let (a, r, p) = (parts.next()?, parts.next()?, parts.next()?);
                Some(format!("{p} (+{a} -{r})"))
            })
            .collect())
    }

    /// The lines `base → prev` added that `prev → next` removed, per path (a line counted as
    /// often as it was both added and removed). Lines without a letter or digit (`}`, blank)
    /// are not counted: they carry no work of their own. A mode an earlier step gave a path
    /// (an executable bit, a symlink) that the next boundary changed again counts as one lost
    /// line `file mode M` ([`MODE_LINE`]): a later `chmod -x` is lost work too.
    pub fn lost_lines(&self, base: &str, prev: &str, next: &str) -> Result<Vec<LostLines>, GitError> {
        let mut out = self.lost_text_lines(base, prev, next)?;
        for (path, mode) in self.lost_modes(base, prev, next)? {
            let line = format!("{MODE_LINE}{mode}");
            match out.iter_mut().find(|l| l.path == path) {
                Some(l) => l.lines.push(line),
                None => out.push(LostLines { path, lines: vec![line] }),
            }
        }
        Ok(out)
    }

    /// `path → mode` of each path whose mode `base → prev` set (a new path's included) and
    /// `prev → next` changed again, the path still there.
    fn lost_modes(&self, base: &str, prev: &str, next: &str) -> Result<Vec<(String, String)>, GitError> {
        let set = self.raw_modes(base, prev)?;
        Ok(self
            .raw_modes(prev, next)?
            .into_iter()
            .filter(|(path, (was, now))| {
                now != "000000" && was != now && set.get(path).is_some_and(|(b, p)| b != p && p == was)
            })
            .map(|(path, (was, _))| (path, was))
            .collect())
    }

    /// `path → (mode in from, mode in to)` for each path that differs between two trees.
    fn raw_modes(&self, from: &str, to: &str) -> Result<BTreeMap<String, (String, String)>, GitError> {
        Ok(self.tree_changes(from, to)?.into_iter().map(|c| (c.path, c.modes)).collect())
    }

    fn lost_text_lines(&self, base: &str, prev: &str, next: &str) -> Result<Vec<LostLines>, GitError> {
        let added = hunk_lines(&self.zero_context_diff(base, prev)?, '+');
        let removed = hunk_lines(&self.zero_context_diff(prev, next)?, '-');
        let mut out = Vec::new();
        for (path, gone) in removed {
            let Some(had) = added.get(&path) else { continue };
            let mut pool: BTreeMap<&str, usize> = BTreeMap::new();
            for l in had {
                *pool.entry(l.as_str()).or_default() += 1;
            }
            let mut lines = Vec::new();
            for l in gone {
                if let Some(n) = pool.get_mut(l.as_str())
                    && *n > 0
                {
                    *n -= 1;
                    if l.chars().any(char::is_alphanumeric) {
                        lines.push(l);
                    }
                }
            }
            if !lines.is_empty() {
                out.push(LostLines { path, lines });
            }
        }
        Ok(out)
    }

    fn zero_context_diff(&self, from: &str, to: &str) -> Result<String, GitError> {
        self.run(&[
            "-c",
            "core.quotePath=false",
            "diff",
            "-U0",
            "-a",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            from,
            to,
        ])
    }
}

/// The `sign` lines (`+` added, `-` removed) of a `-U0` diff, per path (the new path for added
/// lines, the old one for removed lines). Hunk headers give the line counts, so a content line
/// that looks like a header is read as content.
fn hunk_lines(diff: &str, sign: char) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut old_path, mut new_path) = (String::new(), String::new());
    let mut lines = diff.lines();
    while let Some(line) = lines.next() {
        if let Some(p) = line.strip_prefix("--- ") {
            old_path = p.strip_prefix("a/").unwrap_or(p).to_string();
        } else if let Some(p) = line.strip_prefix("+++ ") {
            new_path = p.strip_prefix("b/").unwrap_or(p).to_string();
        } else if let Some(h) = line.strip_prefix("@@ ") {
            let (minus, plus) = hunk_counts(h);
            for _ in 0..minus + plus {
                let Some(l) = lines.next() else { break };
                let mut chars = l.chars();
                let first = chars.next();
                if first == Some(sign) {
                    let path = if sign == '+' { &new_path } else { &old_path };
                    out.entry(path.clone()).or_default().push(chars.as_str().trim_end().to_string());
                }
            }
        }
    }
    out
}

/// The line counts of a hunk header (`-a,b +c,d @@`; a missing count is 1).
fn hunk_counts(header: &str) -> (usize, usize) {
    let mut parts = header.split_whitespace();
    let count = |p: Option<&str>| -> usize {
        p.map(|r| match r[1..].split_once(',') {
            Some((_, n)) => n.parse().unwrap_or(0),
            None => 1,
        })
        .unwrap_or(0)
    };
    let minus = count(parts.next().filter(|p| p.starts_with('-')));
    let plus = count(parts.next().filter(|p| p.starts_with('+')));
    (minus, plus)
}

impl Git {
    /// Runs `git <args>` in the root with extra environment variables.
    pub(crate) fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Result<String, GitError> {
        crate::run_in_env(&self.root, args, env)
    }

    /// A temporary index file of the engine's own (removed when the guard drops) and its path,
    /// for `GIT_INDEX_FILE`.
    pub(crate) fn temp_index(&self) -> Result<(TempIndex, String), GitError> {
        let n = NEXT_INDEX.fetch_add(1, Ordering::Relaxed);
        let name = format!("work-snapshot-{}-{n}.index", std::process::id());
        let rel = self.run(&["rev-parse", "--git-path", &name])?;
        let path = std::path::PathBuf::from(rel.trim());
        let path = if path.is_absolute() { path } else { self.root.join(path) };
        let index = path.display().to_string();
        Ok((TempIndex(path), index))
    }

    /// `(code, path)` for every path that differs between two trees: `A` added, `M` modified,
    /// `D` deleted, `T` type changed (no renames).
    pub fn tree_diff_status(&self, from: &str, to: &str) -> Result<Vec<(char, String)>, GitError> {
        Ok(self.tree_changes(from, to)?.into_iter().map(|c| (c.status, c.path)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Git) {
        crate::scratch::repo_with(&[(
            "f.txt", "base
",
        )])
    }

    #[test]
    fn a_snapshot_holds_untracked_files_and_ignores_index_flags() {
        let (d, g) = repo();
        let base = g.base_tree().expect("base");
        assert_eq!(g.snapshot_tree(&[".work"]).expect("snap"), base, "a clean tree is HEAD's tree");
        std::fs::write(d.path().join("f.txt"), "base\nedit\n").expect("write");
        g.run(&["update-index", "--assume-unchanged", "f.txt"]).expect("flag");
        std::fs::write(d.path().join("new.txt"), "new\n").expect("write");
        std::fs::create_dir_all(d.path().join(".work")).expect("mkdir");
        std::fs::write(d.path().join(".work/state"), "s").expect("write");
        assert_eq!(g.diff_names(&["HEAD"]).expect("names"), Vec::<String>::new(), "git diff is fooled");
        let snap = g.snapshot_tree(&[".work"]).expect("snap");
        assert_eq!(g.tree_diff_names(&base, &snap).expect("names"), vec!["f.txt", "new.txt"]);
        assert!(g.tree_diff_text(&base, &snap).expect("diff").contains("+edit"));
        assert_eq!(g.tree_diff_summary(&base, &snap).expect("sum"), vec!["f.txt (+1 -0)", "new.txt (+1 -0)"]);
        let c = g.snapshot_commit(&snap, "snap").expect("commit");
        assert_eq!(g.run(&["show", &format!("{c}:new.txt")]).expect("show"), "new\n");
        assert_eq!(g.run(&["ls-files", "-v", "f.txt"]).expect("ls"), "h f.txt\n", "the real index is untouched");
    }

    #[test]
    fn lines_an_earlier_step_added_and_a_later_one_removed_are_lost() {
        let (d, g) = repo();
        let base = g.base_tree().expect("base");
        std::fs::write(d.path().join("f.txt"), "base\none\n}\n").expect("write");
        std::fs::write(d.path().join("u.txt"), "untracked work\n").expect("write");
        let prev = g.snapshot_tree::<&str>(&[]).expect("snap");
        // The next step reverts f.txt and re-edits it, and stashes the untracked file away.
        std::fs::write(d.path().join("f.txt"), "base\ntwo\n").expect("write");
        std::fs::remove_file(d.path().join("u.txt")).expect("rm");
        let next = g.snapshot_tree::<&str>(&[]).expect("snap");
        let lost = g.lost_lines(&base, &prev, &next).expect("lost");
        assert_eq!(
            lost,
            vec![
                LostLines { path: "f.txt".into(), lines: vec!["one".into()] },
                LostLines { path: "u.txt".into(), lines: vec!["untracked work".into()] },
            ]
        );
        // Keeping the earlier lines and adding more loses nothing.
        std::fs::write(d.path().join("f.txt"), "base\none\n}\nthree\n").expect("write");
        std::fs::write(d.path().join("u.txt"), "untracked work\n").expect("write");
        let kept = g.snapshot_tree::<&str>(&[]).expect("snap");
        assert!(g.lost_lines(&base, &prev, &kept).expect("lost").is_empty());
    }

    #[test]
    fn hunk_headers_give_the_counts() {
        assert_eq!(hunk_counts("-1 +1,2 @@"), (1, 2));
        assert_eq!(hunk_counts("-0,0 +1 @@ x"), (0, 1));
        let diff = "--- a/x\n+++ b/x\n@@ -1,0 +2,2 @@\n++++ looks like a header\n+--- too\n";
        assert_eq!(hunk_lines(diff, '+')["x"], vec!["+++ looks like a header", "--- too"]);
    }
}
