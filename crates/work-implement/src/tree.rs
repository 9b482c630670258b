//! Git ground truth for the pipeline: preflight, diff fingerprints, task-boundary snapshots,
//! and the untracked-aware `files_touched` count. The state directory (`.work/`, written
//! during the run) is never part of any of them.

use serde::Serialize;
use std::collections::BTreeSet;
use std::path::Path;
use work_git::head::{HeadAt, HeadBreach, HeadVerdict};
use work_git::snapshot::LostLines;
use work_git::{Base, Git, GitError, TreeState, is_excluded};

/// The folded preflight verdict (seed #29): run first, before the plan is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Preflight {
    /// Nothing differs from HEAD and nothing is untracked (outside the state directory).
    pub clean: bool,
    /// HEAD, or null on an unborn branch.
    pub head_sha: Option<String>,
    /// The branch, or null when detached.
    pub branch: Option<String>,
    /// What makes the tree dirty.
    pub dirty_paths: Vec<String>,
    /// Paths left out of the dirty check and of every later tree measurement: the plan file
    /// named on the command line when it is itself uncommitted (it is input, not work).
    pub excluded_paths: Vec<String>,
}

impl Preflight {
    /// Leaves `path` (repository-relative) out of the verdict when it is one of the dirty
    /// paths; returns whether it was.
    pub fn exclude(&mut self, path: &str) -> bool {
        let before = self.dirty_paths.len();
        self.dirty_paths.retain(|p| p != path);
        let hit = self.dirty_paths.len() != before;
        if hit {
            self.excluded_paths.push(path.to_string());
            self.clean = self.dirty_paths.is_empty();
        }
        hit
    }
}

/// HEAD moved in a way no honest commit moves it (see `work_git::head`): reset below the
/// run's base, the base rewritten, or another branch checked out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeadMove {
    /// HEAD at the preflight (the run's base).
    pub from: Option<String>,
    /// HEAD now.
    pub to: Option<String>,
    /// How it moved (`branch-switched`, `below-base`, `history-rewritten`).
    pub breach: HeadBreach,
    /// The branch now (`None`: detached).
    pub branch: Option<String>,
    /// The reason line.
    #[serde(skip)]
    line: String,
}

impl HeadMove {
    /// One line for a reason.
    pub fn describe(&self) -> String {
        self.line.clone()
    }
}

/// One task-boundary snapshot (seed #23).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// `after task <id>`.
    pub boundary: String,
    /// The task id.
    pub task_id: String,
    /// A dangling commit of the whole tree, tracked and untracked files (null when nothing
    /// differs from HEAD).
    pub sha: Option<String>,
    /// The paths that differ from HEAD (tracked and untracked).
    pub paths: Vec<String>,
    /// The whole tree's id (see [`Tree::snapshot_tree`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
}

/// The repository as the pipeline sees it.
#[derive(Debug, Clone)]
pub struct Tree {
    git: Git,
    exclude: Vec<String>,
    /// HEAD when the view was made (the run's base): every measurement starts from its tree,
    /// so commits an agent makes on top of it are part of the change (see `work_git::head`).
    base: HeadAt,
}

impl Tree {
    /// A view of the repository at `root`, ignoring `state_dir` when it lies inside it.
    pub fn new(root: &Path, state_dir: &Path) -> Self {
        let exclude = state_dir
            .strip_prefix(root)
            .ok()
            .map(|p| p.to_string_lossy().trim_end_matches('/').to_string())
            .filter(|p| !p.is_empty());
        let git = Git::new(root);
        let base = git.head_at();
        Self { git, exclude: exclude.into_iter().collect(), base }
    }

    /// The same view, also ignoring `paths` (repository-relative files or directories).
    pub fn excluding(mut self, paths: &[String]) -> Self {
        self.exclude.extend(paths.iter().map(|p| p.trim_end_matches('/').to_string()).filter(|p| !p.is_empty()));
        self
    }

    /// The git handle.
    pub fn exclusions(&self) -> &[String] {
        &self.exclude
    }

    /// The git handle.
    pub fn git(&self) -> &Git {
        &self.git
    }

    /// The repository-relative paths this view leaves out (the state directory, …).
    pub fn excluded(&self) -> &[String] {
        &self.exclude
    }

    fn keep(&self, path: &str) -> bool {
        !is_excluded(path, &self.exclude)
    }

    /// The run's base: HEAD when the view was made.
    pub fn base(&self) -> &HeadAt {
        &self.base
    }

    /// How HEAD moved since the view was made, judged by the one rule (`work_git::head`).
    pub fn judge_head(&self) -> Result<HeadVerdict, GitError> {
        self.git.judge_head(&self.base)
    }

    /// HEAD moved dishonestly since the view was made, and how (judged as `v`).
    pub fn head_move(&self, v: HeadVerdict) -> Option<HeadMove> {
        let line = v.describe(&self.base)?;
        let HeadVerdict::Breach { breach, to, branch } = v else { return None };
        Some(HeadMove { from: self.base.sha.clone(), to, breach, branch, line })
    }

    /// Every dirty path with its status code and a content hash (a file that cannot be read
    /// hashes as absent): compare two of these to see what changed in between.
    pub fn dirty_state(&self) -> Result<TreeState, GitError> {
        self.git.tree_state(Base::Status, &self.exclude)
    }

    /// [`Tree::dirty_state`] of the engine copy at `dir` (see [`Tree::copy`]).
    pub fn dirty_state_of(&self, dir: &Path) -> Result<TreeState, GitError> {
        Git::new(dir).tree_state(Base::Status, &self.exclude)
    }

    /// The engine's copy of the tree as it is now, outside the state directory and the
    /// exclusions: where the checks run (`work_git::copy`).
    pub fn copy(&self) -> Result<work_git::copy::EngineCopy, GitError> {
        self.git.snapshot_copy(&self.exclude)
    }

    /// What differs from the base, as `git status --porcelain` would label it (`?? new`, ` M
    /// changed`, ` D deleted`, ` T type changed`), state dir and exclusions left out. Measured
    /// by hashing, never read from the index: the whole-tree snapshot against the base's tree, so
    /// an index flag (`skip-worktree`, `assume-unchanged`) cannot hide a change and an
    /// index-only edit (`git rm --cached`, a staged mode) cannot fake one.
    pub fn porcelain(&self) -> Result<Vec<String>, GitError> {
        self.changes_from(&self.base_tree()?)
    }

    /// What differs from the whole-tree snapshot `from` (a [`Tree::snapshot_tree`] id), labelled
    /// as [`Tree::porcelain`] labels it: what changed since then, by hashing.
    pub fn changes_from(&self, from: &str) -> Result<Vec<String>, GitError> {
        let now = self.snapshot_tree()?;
        Ok(self
            .git
            .tree_diff_status(from, &now)?
            .into_iter()
            .filter(|(_, p)| self.keep(p))
            .map(|(code, p)| match code {
                'A' => format!("?? {p}"),
                c => format!(" {c} {p}"),
            })
            .collect())
    }

    /// The paths that differ from the base by content (untracked included), state dir excluded
    /// (see [`Tree::porcelain`]).
    pub fn dirty_paths(&self) -> Result<Vec<String>, GitError> {
        Ok(self.head_changed_paths()?.into_iter().collect())
    }

    /// The preflight verdict.
    pub fn preflight(&self) -> Result<Preflight, GitError> {
        if !self.git.is_repo() {
            return Err(GitError::message(&["rev-parse", "--is-inside-work-tree"], "not a git repository"));
        }
        let dirty_paths = self.dirty_paths()?;
        Ok(Preflight {
            clean: dirty_paths.is_empty(),
            head_sha: self.git.head_sha(),
            branch: self.git.branch(),
            dirty_paths,
            excluded_paths: Vec::new(),
        })
    }

    /// The whole working tree (tracked and untracked, outside the exclusions) as a git tree
    /// id, written through a temporary index: no index flag or intent-to-add entry hides a
    /// file's content from it (see `work_git::snapshot`).
    pub fn snapshot_tree(&self) -> Result<String, GitError> {
        self.git.snapshot_tree(&self.exclude)
    }

    /// The tree every measurement starts from: the run's base's (the empty tree on an unborn
    /// branch), whatever the agent committed on top of it since.
    pub fn base_tree(&self) -> Result<String, GitError> {
        self.git.tree_of(self.base.sha.as_deref().unwrap_or_default())
    }

    /// The whole tree's change since the base, as text (what the tester reads).
    pub fn diff_text(&self) -> Result<String, GitError> {
        let now = self.snapshot_tree()?;
        self.git.tree_diff_text(&self.base_tree()?, &now)
    }

    /// What a reviewer of one task reads: the task's own change (from `start`, the tree when
    /// the task started, to now) and a one-line-per-path summary of what earlier tasks changed.
    pub fn task_diff(&self, start: Option<&str>) -> Result<TaskDiff, GitError> {
        let base = self.base_tree()?;
        let start = start.map(str::to_string).unwrap_or_else(|| base.clone());
        let now = self.snapshot_tree()?;
        Ok(TaskDiff {
            text: self.git.tree_diff_text(&start, &now)?,
            names: self.git.tree_diff_names(&start, &now)?.into_iter().filter(|p| self.keep(p)).collect(),
            tree: now.clone(),
            paths: self.git.tree_diff_summary(&start, &now)?,
            earlier: self.git.tree_diff_summary(&base, &start)?,
        })
    }

    /// The fingerprint of the tree's state: its whole-tree snapshot id (equal ids, equal trees).
    pub fn fingerprint(&self) -> Result<String, GitError> {
        self.snapshot_tree()
    }

    /// The paths that differ from the base (tracked and untracked), committed or not, hashed through a whole-tree
    /// snapshot, never read from the index.
    pub fn head_changed_paths(&self) -> Result<BTreeSet<String>, GitError> {
        let now = self.snapshot_tree()?;
        Ok(self.git.tree_diff_names(&self.base_tree()?, &now)?.into_iter().filter(|p| self.keep(p)).collect())
    }

    /// Records a task boundary: the whole tree as a dangling commit (tracked and untracked
    /// files; `git show <sha>:<path>` recovers any of them) and the paths that differ from the base.
    pub fn snapshot(&self, task_id: &str) -> Result<Snapshot, GitError> {
        let tree = self.snapshot_tree()?;
        let paths: Vec<String> = self.git.tree_diff_names(&self.base_tree()?, &tree)?;
        let sha = if paths.is_empty() {
            None
        } else {
            self.git.snapshot_commit(&tree, &format!("work: snapshot after task {task_id}")).ok()
        };
        Ok(Snapshot {
            boundary: format!("after task {task_id}"),
            task_id: task_id.into(),
            sha,
            paths,
            tree: Some(tree),
        })
    }

    /// The lines earlier tasks added (up to `prev`) that are gone at `next`, per path.
    pub fn lost_lines(&self, prev: &Snapshot, next: &Snapshot) -> Result<Vec<LostLines>, GitError> {
        match (&prev.tree, &next.tree) {
            (Some(a), Some(b)) => self.git.lost_lines(&self.base_tree()?, a, b),
            _ => Ok(Vec::new()),
        }
    }
}

/// One task's change as its reviewers read it (see [`Tree::task_diff`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDiff {
    /// The tree the diff leads to (the fingerprint of the state reviewed).
    pub tree: String,
    /// The diff of the task's own change.
    pub text: String,
    /// `path (+a -r)` of each path the task changed.
    pub paths: Vec<String>,
    /// The paths the task changed (what a clean review must name one of in `files_read`).
    pub names: Vec<String>,
    /// `path (+a -r)` of each path earlier tasks of the run changed (already reviewed).
    pub earlier: Vec<String>,
}

/// The paths HEAD-modified (or new) at `prev` and back to HEAD at `next` (seed #23).
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
        assert_eq!(t.head_changed_paths().expect("paths").into_iter().collect::<Vec<_>>(), vec!["new.txt"]);
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
