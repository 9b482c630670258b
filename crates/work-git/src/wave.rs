//! Parallel write waves: each task of a wave in a worktree of the engine's, its result kept on
//! a private ref, merged back into the user's tree by the engine.
//!
//! - [`Git::wave_base`]: the user's tree as it is (tracked and untracked, outside the run's
//!   exclusions) as a dangling commit on HEAD: every task of a wave starts from it.
//! - [`Git::task_worktree`]: a detached worktree at that base, under the git directory
//!   (`<git-common-dir>/work/trees/<run>/<task>`), never inside the user's tree; one that
//!   exists already (a resumed run) is kept as it is, with its work.
//! - [`Git::keep_result`]: the worktree as it is, committed on the wave's base and written to
//!   `refs/work/<run>/<task>` before anything else happens to it.
//! - [`Git::merge_result`]: a three-way merge of a kept result into the user's tree as it is now
//!   (`git merge-tree` against the wave's base); clean, the paths it changes are written into
//!   the working tree (never the index); conflicted, nothing is written and the paths are named.
//!   Applying the same result again is a no-op, so a merge a killed run left half-done is
//!   finished by the next run's merge of it.

use crate::{Git, GitError, split_z};
use std::path::{Path, PathBuf};

/// A task's worktree of a parallel wave: `<git-common-dir>/work/trees/<run>/<task>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskTree {
    /// The run that made it.
    pub run: String,
    /// The task's id.
    pub task: String,
    /// Where it is.
    pub dir: PathBuf,
}

/// Why a name cannot go into a ref.
pub fn ref_part_ok(part: &str) -> bool {
    !part.is_empty()
        && !part.starts_with('.')
        && !part.ends_with(".lock")
        && !part.ends_with('.')
        && !part.contains("..")
        && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// `refs/work/<run>/<task>`: where a task's result is kept; `None` when either part cannot be
/// a ref name component (`[A-Za-z0-9._-]`, not starting with `.`, no `..`, not `.lock`).
pub fn result_ref(run: &str, task: &str) -> Option<String> {
    (ref_part_ok(run) && ref_part_ok(task)).then(|| format!("refs/work/{run}/{task}"))
}

/// How a merge of a task's result into the user's tree went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// Merged: the paths written into the user's tree (empty: already there).
    Clean(Vec<String>),
    /// Not merged: the paths both sides changed differently; nothing was written.
    Conflict(Vec<String>),
}

impl Git {
    /// The worktrees of run `run`: `<git-common-dir>/work/trees/<run>`.
    pub fn wave_dir(&self, run: &str) -> Result<PathBuf, GitError> {
        let common = self.run(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
        Ok(PathBuf::from(common.trim()).join("work").join("trees").join(run))
    }

    /// The tree as it is (outside `exclude`) as a dangling commit whose parent is HEAD.
    pub fn wave_base<S: AsRef<str>>(&self, exclude: &[S]) -> Result<String, GitError> {
        let tree = self.snapshot_tree(exclude)?;
        self.snapshot_commit(&tree, "work: wave base")
    }

    /// A detached worktree at `base` in `dir`; kept as it is when `dir` is a worktree already.
    ///
    /// One at a time in the process: a `git worktree add` reads every worktree's
    /// administrative files, and fails on one another `add` is still writing. What a `work`
    /// killed during an `add` left is finished first: an `add` still running (its worktree
    /// locked as "initializing") is waited for; one that never finishes, a half-written `.git`
    /// file or a directory without one is moved aside (never deleted; no agent ran there: a
    /// task is dispatched only once its `add` returned) and its registration pruned.
    pub fn task_worktree(&self, dir: &Path, base: &str) -> Result<(), GitError> {
        let _admin = WORKTREE_ADMIN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = dir.display().to_string();
        if dir.join(".git").exists() && !initializing(dir) {
            return Ok(());
        }
        // Unlocked, so that the prune below drops the registration once the directory is aside.
        self.unlock_registration(dir)?;
        if std::fs::symlink_metadata(dir).is_ok() {
            let aside = dir.with_file_name(format!(
                "{}.partial-{}",
                dir.file_name().and_then(|n| n.to_str()).unwrap_or("task"),
                std::process::id()
            ));
            work_runtime::fsx::plain::rename(dir, &aside)
                .map_err(|e| GitError::Spawn(format!("move aside the partial worktree {at}: {e}")))?;
        }
        self.run(&["worktree", "prune"])?;
        self.run(&["worktree", "add", "--detach", "--quiet", &at, base]).map(|_| ())
    }

    /// Removes the "initializing" lock of the registration (`<git-common-dir>/worktrees/*`)
    /// whose `gitdir` names `dir`, if there is one.
    fn unlock_registration(&self, dir: &Path) -> Result<(), GitError> {
        let common = self.run(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
        let Ok(entries) = std::fs::read_dir(Path::new(common.trim()).join("worktrees")) else { return Ok(()) };
        let ours = dir.join(".git");
        for e in entries.flatten() {
            let named = std::fs::read_to_string(e.path().join("gitdir")).unwrap_or_default();
            let locked = e.path().join("locked");
            if Path::new(named.trim()) == ours && locked.exists() {
                work_runtime::fsx::plain::remove_file(&locked)
                    .map_err(|err| GitError::Spawn(format!("unlock {}: {err}", locked.display())))?;
            }
        }
        Ok(())
    }

    /// Removes the worktree `dir` (its result merged): the worktree and its administrative files.
    pub fn drop_worktree(&self, dir: &Path) -> Result<(), GitError> {
        let _admin = WORKTREE_ADMIN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !dir.exists() {
            return Ok(());
        }
        let at = dir.display().to_string();
        self.run(&["worktree", "remove", "--force", &at]).map(|_| ())
    }

    /// In a task's worktree: the tree as it is, committed on `base` and written to `name`.
    /// Returns the commit.
    pub fn keep_result(&self, base: &str, name: &str, message: &str) -> Result<String, GitError> {
        let none: [&str; 0] = [];
        let tree = self.snapshot_tree(&none)?;
        let commit = self.run_env(&["commit-tree", &tree, "-p", base, "-m", message], &crate::snapshot::IDENTITY)?;
        let commit = commit.trim().to_string();
        self.set_ref(name, &commit)?;
        Ok(commit)
    }

    /// Points `name` at `commit`.
    pub fn set_ref(&self, name: &str, commit: &str) -> Result<(), GitError> {
        self.run(&["update-ref", name, commit]).map(|_| ())
    }

    /// Where `name` points, or `None` when it does not exist.
    pub fn ref_target(&self, name: &str) -> Result<Option<String>, GitError> {
        Ok(self
            .query(&["rev-parse", "--verify", "-q", &format!("{name}^{{commit}}")])?
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()))
    }

    /// Merges `result` (a commit on `base`) into the tree as it is now (outside `exclude`): see
    /// the module documentation.
    pub fn merge_result<S: AsRef<str>>(&self, base: &str, result: &str, exclude: &[S]) -> Result<Merged, GitError> {
        let ours_tree = self.snapshot_tree(exclude)?;
        let ours = self.snapshot_commit(&ours_tree, "work: tree before merge")?;
        let merge_base = format!("--merge-base={base}");
        let args = ["merge-tree", "--write-tree", "--name-only", "-z", &merge_base, &ours, result];
        let out = match self.query(&args)? {
            Some(out) => out,
            None => {
                // Exit 1: conflicts. The tree id, then the conflicted paths.
                let out = conflict_output(&self.root, &args)?;
                let mut parts = out.split('\0');
                parts.next();
                let mut paths: Vec<String> = parts.take_while(|p| !p.is_empty()).map(str::to_string).collect();
                paths.dedup();
                return Ok(Merged::Conflict(paths));
            }
        };
        let merged = out.split('\0').next().unwrap_or("").trim().to_string();
        if merged.is_empty() {
            return Err(GitError::message(&args, "merge-tree gave no tree"));
        }
        let changed = self.tree_diff_status(&ours_tree, &merged)?;
        self.write_paths(&merged, &changed)?;
        Ok(Merged::Clean(changed.into_iter().map(|(_, p)| p).collect()))
    }

    /// Writes `changed` (as [`Git::tree_diff_status`] gives them from the tree as it is to
    /// `tree`) into the working tree: each added or changed path from `tree` (through a
    /// temporary index; the real index is never written), each deleted one removed.
    fn write_paths(&self, tree: &str, changed: &[(char, String)]) -> Result<(), GitError> {
        let (_guard, index) = self.temp_index()?;
        let env = [("GIT_INDEX_FILE", index.as_str())];
        self.run_env(&["read-tree", tree], &env)?;
        let mut write: Vec<&str> = vec!["checkout-index", "-f", "--"];
        for (code, path) in changed {
            if *code == 'D' {
                if !work_runtime::fsx::is_plain_relative(Path::new(path)) || through_link(&self.root, path) {
                    return Err(GitError::message(
                        &["merge-tree"],
                        &format!(
                            "`{path}` is not a plain relative path inside the tree (a directory on its way is a symlink, or it leaves the tree)"
                        ),
                    ));
                }
                let at = self.root.join(path);
                if std::fs::symlink_metadata(&at).is_ok() {
                    work_runtime::fsx::plain::remove_file(&at)
                        .map_err(|e| GitError::Spawn(format!("remove {path} merging a result: {e}")))?;
                }
            } else {
                write.push(path);
            }
        }
        if write.len() > 3 {
            self.run_env(&write, &env)?;
        }
        Ok(())
    }

    /// Every task worktree git knows under `<git-common-dir>/work/trees/` (`<run>/<task>`),
    /// sorted by path.
    pub fn task_trees(&self) -> Result<Vec<TaskTree>, GitError> {
        let trees = self.wave_dir("")?;
        let mut out: Vec<TaskTree> = self
            .worktrees_under(&trees)?
            .into_iter()
            .filter_map(|dir| {
                let rel = dir.strip_prefix(&trees).ok()?;
                let mut parts = rel.iter().map(|p| p.to_str());
                match (parts.next(), parts.next(), parts.next()) {
                    (Some(Some(run)), Some(Some(task)), None) => {
                        Some(TaskTree { run: run.to_string(), task: task.to_string(), dir: dir.clone() })
                    }
                    _ => None,
                }
            })
            .collect();
        out.sort_by(|a, b| a.dir.cmp(&b.dir));
        Ok(out)
    }

    /// Whether the work in task worktree `t` is exported: its result ref exists and holds
    /// exactly the worktree's tree as it is now (tracked and untracked files alike), so
    /// removing the worktree loses nothing. Run in the user's repository.
    pub fn exported(&self, t: &TaskTree) -> Result<Option<String>, GitError> {
        let Some(name) = result_ref(&t.run, &t.task) else { return Ok(None) };
        let Some(commit) = self.ref_target(&name)? else { return Ok(None) };
        let kept = self.run(&["rev-parse", &format!("{commit}^{{tree}}")])?;
        let none: [&str; 0] = [];
        let now = Git::new(&t.dir).snapshot_tree(&none)?;
        Ok((kept.trim() == now.trim()).then_some(name))
    }

    /// The worktrees git knows under `dir`.
    pub fn worktrees_under(&self, dir: &Path) -> Result<Vec<PathBuf>, GitError> {
        let out = self.run(&["worktree", "list", "--porcelain", "-z"])?;
        Ok(split_z(&out)
            .into_iter()
            .filter_map(|l| l.strip_prefix("worktree ").map(PathBuf::from))
            .filter(|p| p.starts_with(dir))
            .collect())
    }
}

/// Held while git's worktree administration is changed: one `add` or `remove` at a time.
static WORKTREE_ADMIN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether the worktree in `dir` is still being made by a `git worktree add` (git locks it as
/// "initializing" until the add is done), waiting up to 5 s for that add to finish; or was
/// left half-made (a `.git` file that names no git directory).
fn initializing(dir: &Path) -> bool {
    let link = std::fs::read_to_string(dir.join(".git")).unwrap_or_default();
    let Some(admin) = link.trim().strip_prefix("gitdir: ") else { return true };
    let locked = Path::new(admin).join("locked");
    for _ in 0..50 {
        match std::fs::read_to_string(&locked) {
            Ok(why) if why.trim() == "initializing" => std::thread::sleep(std::time::Duration::from_millis(100)),
            _ => return false,
        }
    }
    true
}

/// Whether a directory on the way from `root` to `rel` is a symlink: a deletion there would
/// remove a file the link leads to, perhaps outside the tree.
fn through_link(root: &Path, rel: &str) -> bool {
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    parts[..parts.len().saturating_sub(1)].iter().any(|part| {
        at.push(part);
        std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink())
    })
}

/// The output of a `git merge-tree` that ended with exit 1 (conflicts): its stdout.
fn conflict_output(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    let mut spec = work_runtime::spawn::ProcessSpec::new("git", args.iter().map(|s| s.to_string()).collect(), dir);
    for (k, v) in crate::GIT_ENV {
        spec = spec.with_env(k, v);
    }
    let out = work_runtime::spawn::Spawner.run_blocking(&spec).map_err(|e| GitError::Spawn(e.to_string()))?;
    match out.code {
        Some(1) if !out.stdout_truncated => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        _ => Err(GitError::ended(args, &out)),
    }
}

#[cfg(test)]
mod tests {
    use crate::scratch::repo_with;

    /// A deletion the merge would make through a directory the user's tree now has as a symlink
    /// is refused, and the file the link leads to (outside the tree) is left alone.
    #[test]
    fn a_deletion_through_a_symlinked_directory_is_refused() {
        let (d, g) = repo_with(&[("d/f", "x\n"), ("keep", "k\n")]);
        let tree = g.run(&["rev-parse", "HEAD^{tree}"]).expect("tree");
        let outside = tempfile::tempdir().expect("outside");
        std::fs::write(outside.path().join("f"), "theirs\n").expect("write");
        std::fs::remove_dir_all(d.path().join("d")).expect("rm");
        std::os::unix::fs::symlink(outside.path(), d.path().join("d")).expect("symlink");
        let err = g.write_paths(tree.trim(), &[('D', "d/f".to_string())]).expect_err("refused");
        assert!(err.to_string().contains("symlink"), "{err}");
        assert_eq!(std::fs::read_to_string(outside.path().join("f")).expect("read"), "theirs\n");
        // A plain deletion still goes through.
        g.write_paths(tree.trim(), &[('D', "keep".to_string())]).expect("plain deletion");
        assert!(!d.path().join("keep").exists());
    }
}
