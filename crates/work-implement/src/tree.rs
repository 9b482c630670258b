//! Git ground truth for the pipeline: preflight, diff fingerprints, task-boundary snapshots,
//! and the untracked-aware `files_touched` count. The state directory (`.work/`, written
//! during the run) is never part of any of them.

use serde::Serialize;
use std::collections::BTreeSet;
use std::path::Path;
use work_git::{Git, GitError};

/// The folded preflight verdict (seed #29): run first, before the plan is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preflight {
    /// Nothing differs from HEAD and nothing is untracked (outside the state directory).
    pub clean: bool,
    /// HEAD, or null on an unborn branch.
    pub head_sha: Option<String>,
    /// The branch, or null when detached.
    pub branch: Option<String>,
    /// What makes the tree dirty.
    pub dirty_paths: Vec<String>,
}

/// One task-boundary snapshot (seed #23).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    /// `after task <id>`.
    pub boundary: String,
    /// The task id.
    pub task_id: String,
    /// `git stash create` (a dangling commit; null when nothing tracked differs from HEAD).
    pub sha: Option<String>,
    /// `git diff HEAD --name-only --no-renames`.
    pub paths: Vec<String>,
}

/// The repository as the pipeline sees it.
#[derive(Debug, Clone)]
pub struct Tree {
    git: Git,
    exclude: Option<String>,
}

impl Tree {
    /// A view of the repository at `root`, ignoring `state_dir` when it lies inside it.
    pub fn new(root: &Path, state_dir: &Path) -> Self {
        let exclude = state_dir
            .strip_prefix(root)
            .ok()
            .map(|p| p.to_string_lossy().trim_end_matches('/').to_string())
            .filter(|p| !p.is_empty());
        Self { git: Git::new(root), exclude }
    }

    /// The git handle.
    pub fn git(&self) -> &Git {
        &self.git
    }

    fn keep(&self, path: &str) -> bool {
        match &self.exclude {
            Some(ex) => !(path == ex || path.starts_with(&format!("{ex}/"))),
            None => true,
        }
    }

    /// `git status --porcelain` lines (`XY path`), untracked files included, state dir excluded.
    pub fn porcelain(&self) -> Result<Vec<String>, GitError> {
        Ok(self
            .git
            .status()?
            .into_iter()
            .filter(|e| self.keep(&e.path))
            .map(|e| format!("{} {}", e.code, e.path))
            .collect())
    }

    /// The dirty paths (untracked included), state dir excluded.
    pub fn dirty_paths(&self) -> Result<Vec<String>, GitError> {
        Ok(self.git.status()?.into_iter().filter(|e| self.keep(&e.path)).map(|e| e.path).collect())
    }

    /// The preflight verdict.
    pub fn preflight(&self) -> Result<Preflight, GitError> {
        if !self.git.is_repo() {
            return Err(GitError::Failed {
                args: "rev-parse --is-inside-work-tree".into(),
                stderr: "not a git repository".into(),
            });
        }
        let dirty_paths = self.dirty_paths()?;
        Ok(Preflight {
            clean: dirty_paths.is_empty(),
            head_sha: self.git.head_sha(),
            branch: self.git.branch(),
            dirty_paths,
        })
    }

    fn pathspec(&self) -> Vec<String> {
        match &self.exclude {
            Some(ex) => vec!["--".into(), ".".into(), format!(":(exclude){ex}")],
            None => Vec::new(),
        }
    }

    /// The diff against HEAD with untracked files' contents, as text (what reviewers read).
    pub fn diff_text(&self) -> Result<String, GitError> {
        let mut text = String::new();
        if self.git.head_sha().is_some() {
            let mut args: Vec<String> = vec!["diff".into(), "HEAD".into(), "--no-color".into(), "--binary".into()];
            args.extend(self.pathspec());
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            text = self.git.run(&refs)?;
        }
        for e in self.git.status()? {
            if e.code == "??" && self.keep(&e.path) {
                let content = std::fs::read(self.git.root().join(&e.path)).unwrap_or_default();
                text.push_str(&format!("untracked {} ({} bytes)\n", e.path, content.len()));
                text.push_str(&String::from_utf8_lossy(&content));
                text.push('\n');
            }
        }
        Ok(text)
    }

    /// A sha256 of [`Tree::diff_text`]: equal fingerprints mean equal diff states.
    pub fn fingerprint(&self) -> Result<String, GitError> {
        use sha2::{Digest, Sha256};
        Ok(hex::encode(Sha256::digest(self.diff_text()?.as_bytes())))
    }

    /// `git diff HEAD --name-only --no-renames` (tracked changes only: checkout cannot discard
    /// an untracked file, so untracked files are outside the snapshot guard's threat model).
    pub fn head_changed_paths(&self) -> Result<BTreeSet<String>, GitError> {
        if self.git.head_sha().is_none() {
            return Ok(BTreeSet::new());
        }
        Ok(self
            .git
            .run(&["diff", "HEAD", "--name-only", "--no-renames"])?
            .lines()
            .filter(|l| !l.is_empty() && self.keep(l))
            .map(str::to_string)
            .collect())
    }

    /// Records a task boundary: `git stash create` plus the HEAD-modified path set.
    pub fn snapshot(&self, task_id: &str) -> Result<Snapshot, GitError> {
        let paths: Vec<String> = self.head_changed_paths()?.into_iter().collect();
        let sha = if paths.is_empty() { None } else { self.stash_create() };
        Ok(Snapshot { boundary: format!("after task {task_id}"), task_id: task_id.into(), sha, paths })
    }
}

impl Tree {
    /// `git stash create`, retried with a stand-in identity when the repository has none (the
    /// snapshot is a dangling commit, so the identity is never seen on a branch). `None` when
    /// it cannot be made: the path comparison still runs without a recovery sha.
    fn stash_create(&self) -> Option<String> {
        match self.git.stash_create() {
            Ok(sha) => sha,
            Err(_) => self
                .git
                .run(&["-c", "user.name=work", "-c", "user.email=work@localhost", "stash", "create"])
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty()),
        }
    }
}

/// The paths HEAD-modified at `prev` and gone at `next` (seed #23).
pub fn lost_paths(prev: &Snapshot, next: &Snapshot) -> Vec<String> {
    let now: BTreeSet<&String> = next.paths.iter().collect();
    prev.paths.iter().filter(|p| !now.contains(p)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        let g = Git::new(d.path());
        g.run(&["init", "-q"]).expect("init");
        std::fs::write(d.path().join("a.txt"), "a\n").expect("write");
        g.run(&["add", "-A"]).expect("add");
        g.run(&["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "x"]).expect("commit");
        d
    }

    #[test]
    fn state_dir_is_invisible_and_fingerprints_track_the_tree() {
        let d = repo();
        let t = Tree::new(d.path(), &d.path().join(".work"));
        std::fs::create_dir_all(d.path().join(".work/runs")).expect("mkdir");
        std::fs::write(d.path().join(".work/runs/e.jsonl"), "x").expect("write");
        assert!(t.preflight().expect("preflight").clean);
        let f0 = t.fingerprint().expect("fp");
        std::fs::write(d.path().join(".work/runs/e.jsonl"), "xy").expect("write");
        assert_eq!(f0, t.fingerprint().expect("fp"), "state dir writes do not change the fingerprint");
        std::fs::write(d.path().join("a.txt"), "b\n").expect("write");
        let f1 = t.fingerprint().expect("fp");
        assert_ne!(f0, f1);
        std::fs::write(d.path().join("a.txt"), "a\n").expect("write");
        assert_eq!(f0, t.fingerprint().expect("fp"), "A-B-A returns to the same fingerprint");
        std::fs::write(d.path().join("new.txt"), "n\n").expect("write");
        assert_eq!(t.dirty_paths().expect("dirty"), vec!["new.txt".to_string()]);
        assert!(t.head_changed_paths().expect("paths").is_empty(), "untracked is outside the snapshot set");
    }

    #[test]
    fn a_discarded_path_is_lost_between_snapshots() {
        let d = repo();
        let t = Tree::new(d.path(), &d.path().join(".work"));
        std::fs::write(d.path().join("a.txt"), "task 1\n").expect("write");
        let s1 = t.snapshot("1").expect("snap");
        assert!(s1.sha.is_some());
        std::fs::write(d.path().join("a.txt"), "a\n").expect("write");
        let s2 = t.snapshot("2").expect("snap");
        assert_eq!(lost_paths(&s1, &s2), vec!["a.txt".to_string()]);
        let sha = s1.sha.expect("sha");
        assert_eq!(t.git().run(&["show", &format!("{sha}:a.txt")]).expect("show"), "task 1\n");
    }
}
