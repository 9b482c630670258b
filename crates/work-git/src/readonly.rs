//! Read-only, one meaning: what a read-only dispatch (implement's E2E tester, plan-index and
//! plan-extract; loop run's reviewers and adjudicator; a `--queue` reviewer in its scratch
//! worktree) must leave as it was.
//!
//! A [`View`] holds HEAD; the snapshot tree (every path git does not ignore, by content,
//! through a temporary index, so an index flag hides nothing); the index's entries (what is
//! staged); git's seal (index flags, exclude lines, attributes, hooks, configuration:
//! [`crate::integrity`]); and a walk, by metadata, of the git directory's own files (refs, a
//! stash, anything git does not rewrite on a plain `git status`: the index, objects and logs
//! aside) and of the directories the caller watches (the state directory). Any difference is a
//! write, each named; a git that fails reading it is an error, never a write.
//!
//! Fallback only: with the kernel sandbox (`work_runtime::sandbox`) a read-only dispatch can
//! write neither the tree nor the git directory (the engine's copy in it included), and the
//! state directory is not there for it, so every write this names fails with `EROFS` as it is
//! tried. The view is taken and compared in both modes; it is what holds where there is no
//! sandbox (`--isolation none`, no user namespaces).

use crate::integrity::Seal;
use crate::inventory::Inventory;
use crate::{Git, GitError};
use std::path::{Path, PathBuf};

/// What the git directory holds that a plain `git status` or `git diff` rewrites: never a write.
const GIT_OWN: [&str; 7] = ["index", "index.lock", "objects", "logs", "FETCH_HEAD", "ORIG_HEAD", "work-copies"];

/// The tree as a read-only dispatch must leave it (see the module documentation).
#[derive(Debug, Clone)]
pub struct View {
    head: Option<String>,
    tree: String,
    index: String,
    seal: Seal,
    walks: Vec<(String, Inventory)>,
}

/// What [`Git::read_only_view`] leaves out and watches.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    /// Repository-relative paths the snapshot leaves out (the state directory).
    pub exclude: Vec<String>,
    /// Directories walked by metadata besides the git directory (the state directory).
    pub watched: Vec<PathBuf>,
    /// Paths no walk enters (the engine's own run directory, a tester's fixtures).
    pub keep_out: Vec<PathBuf>,
}

impl Git {
    /// The tree now, as [`View`] reads it.
    pub fn read_only_view(&self, w: &Watch) -> Result<View, GitError> {
        let git_dir = PathBuf::from(self.run(&["rev-parse", "--absolute-git-dir"])?.trim());
        let mut walks = vec![(".git/".to_string(), Inventory::read_only(&git_dir, &git_keep_out(&git_dir, w)))];
        for dir in &w.watched {
            let label = dir.strip_prefix(&self.root).unwrap_or(dir).display().to_string();
            walks.push((format!("{label}/"), Inventory::read_only(dir, &w.keep_out)));
        }
        Ok(View {
            head: self.head_sha(),
            tree: self.snapshot_tree(&w.exclude)?,
            index: self.run(&["ls-files", "-s", "-z"])?,
            seal: self.seal()?,
            walks,
        })
    }

    /// What changed since `before`, each named (`~path`, `+path`, `-path`; `~HEAD`, a staged
    /// path, git's view): empty when nothing did.
    pub fn read_only_changes(&self, before: &View, w: &Watch) -> Result<Vec<String>, GitError> {
        let now = self.read_only_view(w)?;
        let mut out = Vec::new();
        if now.head != before.head {
            out.push("~HEAD".to_string());
        }
        if now.tree != before.tree {
            out.extend(self.tree_diff_names(&before.tree, &now.tree)?.into_iter().map(|p| format!("~{p}")));
        }
        if now.index != before.index {
            let entries = |s: &str| s.split('\0').map(str::to_string).collect::<std::collections::BTreeSet<_>>();
            let (was, is) = (entries(&before.index), entries(&now.index));
            let staged = was.symmetric_difference(&is).filter_map(|e| e.split_once('\t')).map(|(_, p)| p);
            out.extend(staged.map(|p| format!("~{p} (staged)")));
        }
        out.extend(before.seal.changes(&now.seal).into_iter().map(|c| format!("~.git/ ({c})")));
        for ((label, was), (_, is)) in before.walks.iter().zip(&now.walks) {
            out.extend(was.changes(is).into_iter().map(|c| format!("{}{label}{}", &c[..1], &c[1..])));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// The git directory's own files a walk leaves out, and the caller's.
fn git_keep_out(git_dir: &Path, w: &Watch) -> Vec<PathBuf> {
    GIT_OWN.iter().map(|p| git_dir.join(p)).chain(w.keep_out.iter().cloned()).collect()
}

#[cfg(test)]
mod tests {
    use crate::readonly::Watch;

    #[test]
    fn every_kind_of_write_is_named_and_reading_is_none() {
        let (d, g) = crate::scratch::repo_with(&[("lib.py", "x = 0\n"), (".gitignore", "build/\n")]);
        let w = Watch::default();
        let before = g.read_only_view(&w).expect("view");
        g.run(&["status"]).expect("status");
        g.run(&["diff"]).expect("diff");
        std::fs::create_dir_all(d.path().join("build")).expect("mkdir");
        std::fs::write(d.path().join("build/out"), "ignored\n").expect("write");
        assert_eq!(g.read_only_changes(&before, &w).expect("changes"), Vec::<String>::new(), "reading is no write");
        let writes: [(&str, &dyn Fn()); 5] = [
            ("~lib.py", &|| std::fs::write(d.path().join("lib.py"), "x = 1\n").expect("write")),
            ("~new.py", &|| std::fs::write(d.path().join("new.py"), "y\n").expect("write")),
            ("~new.py (staged)", &|| drop(g.run(&["add", "new.py"]).expect("add"))),
            ("~.git/ (", &|| drop(g.run(&["update-index", "--assume-unchanged", "lib.py"]).expect("flag"))),
            ("+.git/refs/heads/other", &|| drop(g.run(&["branch", "other"]).expect("branch"))),
        ];
        for (named, write) in writes {
            let before = g.read_only_view(&w).expect("view");
            write();
            let changes = g.read_only_changes(&before, &w).expect("changes");
            assert!(changes.iter().any(|c| c.starts_with(named)), "{named}: {changes:?}");
        }
    }
}
