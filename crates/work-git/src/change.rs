//! A working tree's change against HEAD, carried to another clone and replayed there.
//!
//! [`Git::change`] takes the working tree as a snapshot tree (tracked and untracked files, not
//! ignored ones, see [`crate::snapshot`]) and renders it as a binary patch against HEAD. In
//! another clone that has the commit, [`Scratch::create`] makes a detached worktree at it,
//! applies the patch, and checks that the result is the same tree id (tree ids are content
//! hashes: equal ids, equal trees); [`Scratch::unchanged`] tells whether anything changed the
//! scratch tree since, and dropping the scratch removes the worktree.

use crate::{Git, GitError};
use std::path::{Path, PathBuf};
use work_runtime::spawn::{ProcessSpec, Spawner};

/// The largest patch [`Git::change`] renders.
pub const MAX_PATCH_BYTES: usize = 8 << 20;

/// Why a change could not be taken or replayed.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    /// A git command failed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// There is no commit to measure against.
    #[error("it has no commit checked out (HEAD)")]
    NoHead,
    /// The patch is larger than [`MAX_PATCH_BYTES`].
    #[error("the change against HEAD is more than {max} bytes as a patch")]
    TooLarge {
        /// The bound.
        max: usize,
    },
    /// A changed text file is not UTF-8 (the patch travels as text).
    #[error("the change against HEAD has text that is not UTF-8")]
    NotUtf8,
    /// The commit is not in this clone.
    #[error("commit {0} is not in this clone (fetch it)")]
    NoCommit(String),
    /// The patch does not apply at the commit.
    #[error("the change does not apply at {head}: {why}")]
    Apply {
        /// The commit.
        head: String,
        /// What git said.
        why: String,
    },
    /// The patch applied, but the result is another tree.
    #[error("the change applied, but the result is tree {got}, not {want}")]
    Fingerprint {
        /// The tree the change describes.
        want: String,
        /// The tree the scratch worktree holds.
        got: String,
    },
    /// Something changed the scratch tree after it was made.
    #[error("{0}")]
    Changed(String),
}

/// A working tree's change against its HEAD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The HEAD commit the change is against.
    pub head: String,
    /// The working tree as a tree id (the change's fingerprint).
    pub tree: String,
    /// `git diff --binary` from HEAD to the tree (empty when the tree is HEAD's).
    pub patch: String,
}

impl Git {
    /// The working tree's change against HEAD, outside `exclude` (which stays as HEAD has it),
    /// as a binary patch of at most [`MAX_PATCH_BYTES`].
    pub fn change<S: AsRef<str>>(&self, exclude: &[S]) -> Result<Change, ChangeError> {
        let head = self.head_sha().ok_or(ChangeError::NoHead)?;
        let tree = self.snapshot_tree(exclude)?;
        // Every option a user's configuration could change is spelled out: the patch must
        // apply anywhere.
        let args = [
            "diff",
            "--binary",
            "--full-index",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-relative",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            &head,
            &tree,
        ];
        let mut spec = ProcessSpec::new("git", args.iter().map(|s| s.to_string()).collect(), self.root());
        for (k, v) in crate::GIT_ENV {
            spec = spec.with_env(k, v);
        }
        spec.output_cap = MAX_PATCH_BYTES + 1;
        let out = Spawner.run_blocking(&spec).map_err(|e| GitError::Spawn(e.to_string()))?;
        if !out.success() {
            return Err(GitError::ended(&args, &out).into());
        }
        if out.stdout_truncated || out.stdout.len() > MAX_PATCH_BYTES {
            return Err(ChangeError::TooLarge { max: MAX_PATCH_BYTES });
        }
        let patch = String::from_utf8(out.stdout).map_err(|_| ChangeError::NotUtf8)?;
        Ok(Change { head, tree, patch })
    }
}

/// A detached worktree of another clone, at a commit, with a change applied. Removed on drop.
#[derive(Debug)]
pub struct Scratch {
    repo: Git,
    dir: PathBuf,
    /// The worktree as it was made: what a read-only agent must leave ([`crate::readonly`]).
    made: Option<crate::readonly::View>,
}

impl Scratch {
    /// Makes a worktree of `repo` at `dir` (missing or empty) at commit `change.head`, applies
    /// `change.patch` there and checks that the result is tree `change.tree`.
    pub fn create(repo: &Git, dir: &Path, change: &Change) -> Result<Scratch, ChangeError> {
        let head = &change.head;
        let valid = head.len() >= 7 && head.chars().all(|c| c.is_ascii_hexdigit());
        if !valid || repo.run(&["cat-file", "-e", &format!("{head}^{{commit}}")]).is_err() {
            return Err(ChangeError::NoCommit(head.clone()));
        }
        let path = dir.display().to_string();
        repo.run(&["worktree", "add", "--detach", "--quiet", &path, head])?;
        // From here on, dropping it removes the worktree.
        let mut s = Scratch { repo: repo.clone(), dir: dir.to_path_buf(), made: None };
        if !change.patch.is_empty() {
            let args = ["apply", "--binary", "--whitespace=nowarn", "-"];
            let mut spec = ProcessSpec::new("git", args.iter().map(|s| s.to_string()).collect(), dir)
                .with_stdin(change.patch.as_bytes().to_vec());
            for (k, v) in crate::GIT_ENV {
                spec = spec.with_env(k, v);
            }
            let out = Spawner.run_blocking(&spec).map_err(|e| GitError::Spawn(e.to_string()))?;
            if !out.success() {
                let why = out.stderr_text().lines().take(3).collect::<Vec<_>>().join("; ");
                return Err(ChangeError::Apply { head: head.clone(), why });
            }
        }
        let got = Git::new(dir).snapshot_tree::<&str>(&[])?;
        if got != change.tree {
            return Err(ChangeError::Fingerprint { want: change.tree.clone(), got });
        }
        s.made = Some(Git::new(dir).read_only_view(&crate::readonly::Watch::default())?);
        Ok(s)
    }

    /// The worktree's root.
    pub fn root(&self) -> &Path {
        &self.dir
    }

    /// Whether the scratch tree is still as it was made: read-only in the one meaning of
    /// [`crate::readonly`] (nothing written, staged, removed or committed; ignored files aside).
    pub fn unchanged(&self) -> Result<(), ChangeError> {
        let Some(made) = &self.made else { return Ok(()) };
        let paths = Git::new(&self.dir).read_only_changes(made, &crate::readonly::Watch::default())?;
        if paths.is_empty() {
            return Ok(());
        }
        let mut list: Vec<String> = paths.iter().take(5).cloned().collect();
        if paths.len() > 5 {
            list.push(format!("… {} more", paths.len() - 5));
        }
        Err(ChangeError::Changed(format!("changed {}", list.join(", "))))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let path = self.dir.display().to_string();
        if self.repo.run(&["worktree", "remove", "--force", "--force", &path]).is_err() {
            let _ = work_runtime::fsx::plain::remove_dir_all(&self.dir);
            let _ = self.repo.run(&["worktree", "prune"]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::repo_with;

    fn clone_of(origin: &Git) -> (tempfile::TempDir, Git) {
        let dir = tempfile::tempdir().expect("tempdir");
        let to = dir.path().join("c");
        origin.run(&["clone", "-q", ".", &to.display().to_string()]).expect("clone");
        (dir, Git::new(&to))
    }

    #[test]
    fn a_change_replays_in_another_clone_as_the_same_tree_and_its_scratch_is_removed() {
        let (dir, git) = repo_with(&[("a.txt", "one\ntwo\n"), ("gone.txt", "x\n"), ("bin.dat", "\0\u{1}")]);
        let (_c, other) = clone_of(&git);
        std::fs::write(dir.path().join("a.txt"), "one\n2\n").expect("write");
        std::fs::remove_file(dir.path().join("gone.txt")).expect("rm");
        std::fs::write(dir.path().join("new.txt"), "new\n").expect("write");
        std::fs::write(dir.path().join("bin.dat"), [0u8, 2, 255]).expect("write");
        std::fs::create_dir_all(dir.path().join(".state")).expect("mkdir");
        std::fs::write(dir.path().join(".state/s.json"), "{}").expect("write");
        let change = git.change(&[".state"]).expect("change");
        assert!(!change.patch.contains(".state"), "{}", change.patch);
        let at = tempfile::tempdir().expect("tempdir");
        let scratch_dir = at.path().join("s");
        {
            let s = Scratch::create(&other, &scratch_dir, &change).expect("replays");
            assert_eq!(std::fs::read_to_string(s.root().join("a.txt")).expect("read"), "one\n2\n");
            assert!(!s.root().join("gone.txt").exists());
            assert_eq!(std::fs::read(s.root().join("bin.dat")).expect("read"), [0u8, 2, 255]);
            s.unchanged().expect("nothing wrote it");
            std::fs::write(s.root().join("new.txt"), "edited\n").expect("write");
            let e = s.unchanged().expect_err("a write is seen").to_string();
            assert!(e.contains("new.txt"), "{e}");
        }
        assert!(!scratch_dir.exists(), "the scratch worktree is removed");
        assert!(!other.run(&["worktree", "list"]).expect("list").contains("/s "), "and unregistered");
    }

    #[test]
    fn a_change_that_does_not_replay_is_refused() {
        let (dir, git) = repo_with(&[("a.txt", "one\ntwo\n")]);
        let (_c, other) = clone_of(&git);
        std::fs::write(dir.path().join("a.txt"), "one\n2\n").expect("write");
        let change = git.change::<&str>(&[]).expect("change");
        let at = tempfile::tempdir().expect("tempdir");
        let broken = Change { patch: change.patch.replace("-two", "-three"), ..change.clone() };
        let e = Scratch::create(&other, &at.path().join("s1"), &broken).expect_err("does not apply");
        assert!(matches!(e, ChangeError::Apply { .. }), "{e}");
        assert!(!at.path().join("s1").exists(), "nothing is left behind");
        let other_tree = Change { tree: git.base_tree().expect("tree"), ..change.clone() };
        let e = Scratch::create(&other, &at.path().join("s2"), &other_tree).expect_err("another tree");
        assert!(matches!(e, ChangeError::Fingerprint { .. }), "{e}");
        let missing = Change { head: "0123456789abcdef0123456789abcdef01234567".into(), ..change };
        let e = Scratch::create(&other, &at.path().join("s3"), &missing).expect_err("no such commit");
        assert!(matches!(e, ChangeError::NoCommit(_)), "{e}");
    }
}
