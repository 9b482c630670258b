//! Git ground truth: what the tree really is, never what an agent says it is.
//!
//! Every call runs `git` through the runtime's spawner (blocking; callable from async code
//! running on a multi-threaded runtime, and from plain synchronous code).

use std::path::{Path, PathBuf};
use work_runtime::spawn::{ProcessSpec, Spawner};

/// Why a git query failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// `git` could not be started.
    #[error("run git: {0}")]
    Spawn(String),
    /// `git` exited non-zero.
    #[error("run git {args}: {stderr}")]
    Failed {
        /// The arguments.
        args: String,
        /// What git said.
        stderr: String,
    },
}

/// One entry of `git status --porcelain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusEntry {
    /// The two status letters (`??` for untracked, ` M`, `A `, …).
    pub code: String,
    /// The path (the destination for renames).
    pub path: String,
}

/// A git repository at a root.
#[derive(Debug, Clone)]
pub struct Git {
    root: PathBuf,
}

impl Git {
    /// A handle on the repository whose work tree is `root`.
    pub fn new(root: &Path) -> Self {
        Self { root: root.to_path_buf() }
    }

    /// The repository root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The top level of the work tree containing `dir`, or `None` when `dir` is not in one.
    pub fn toplevel(dir: &Path) -> Option<PathBuf> {
        let out = run_in(dir, &["rev-parse", "--show-toplevel"]).ok()?;
        let top = out.trim();
        if top.is_empty() { None } else { Some(PathBuf::from(top)) }
    }

    /// Runs `git <args>` in the root and returns stdout.
    pub fn run(&self, args: &[&str]) -> Result<String, GitError> {
        run_in(&self.root, args)
    }

    /// True when the root is inside a git work tree.
    pub fn is_repo(&self) -> bool {
        self.run(&["rev-parse", "--is-inside-work-tree"]).map(|s| s.trim() == "true").unwrap_or(false)
    }

    /// `git status --porcelain` (untracked files included, one entry per file).
    pub fn status(&self) -> Result<Vec<StatusEntry>, GitError> {
        let out = self.run(&["status", "--porcelain=v1", "-z", "--untracked-files=all"])?;
        let mut entries = Vec::new();
        let mut parts = out.split('\0').filter(|s| !s.is_empty());
        while let Some(p) = parts.next() {
            if p.len() < 4 {
                continue;
            }
            let code = p[..2].to_string();
            let path = p[3..].to_string();
            if code.starts_with('R') || code.starts_with('C') {
                // -z puts the source path after the destination.
                let _ = parts.next();
            }
            entries.push(StatusEntry { code, path });
        }
        Ok(entries)
    }

    /// The paths that differ from HEAD or are untracked.
    pub fn dirty_paths(&self) -> Result<Vec<String>, GitError> {
        Ok(self.status()?.into_iter().map(|e| e.path).collect())
    }

    /// True when nothing differs from HEAD and nothing is untracked.
    pub fn is_clean(&self) -> Result<bool, GitError> {
        Ok(self.status()?.is_empty())
    }

    /// The HEAD commit sha, or `None` on an unborn branch.
    pub fn head_sha(&self) -> Option<String> {
        self.run(&["rev-parse", "--verify", "-q", "HEAD"]).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
    }

    /// The current branch name, or `None` when detached.
    pub fn branch(&self) -> Option<String> {
        self.run(&["symbolic-ref", "--short", "-q", "HEAD"])
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// `git diff HEAD` including untracked files' content (as additions), as text.
    pub fn diff_with_untracked(&self) -> Result<String, GitError> {
        let mut text =
            if self.head_sha().is_some() { self.run(&["diff", "HEAD", "--no-color"])? } else { String::new() };
        for e in self.status()? {
            if e.code == "??" {
                let p = self.root.join(&e.path);
                let content = std::fs::read(&p).unwrap_or_default();
                text.push_str(&format!("untracked {}\n", e.path));
                text.push_str(&String::from_utf8_lossy(&content));
                text.push('\n');
            }
        }
        Ok(text)
    }

    /// A fingerprint (sha256 hex) of the whole working-tree state relative to HEAD,
    /// untracked files included. Equal fingerprints mean equal diffs.
    pub fn diff_fingerprint(&self) -> Result<String, GitError> {
        use sha2::{Digest, Sha256};
        let diff = self.diff_with_untracked()?;
        Ok(hex::encode(Sha256::digest(diff.as_bytes())))
    }

    /// `git diff HEAD --name-only --no-renames` plus untracked paths.
    pub fn changed_paths(&self) -> Result<Vec<String>, GitError> {
        let mut paths: Vec<String> = if self.head_sha().is_some() {
            self.run(&["diff", "HEAD", "--name-only", "--no-renames"])?.lines().map(str::to_string).collect()
        } else {
            Vec::new()
        };
        for e in self.status()? {
            if e.code == "??" && !paths.contains(&e.path) {
                paths.push(e.path);
            }
        }
        paths.sort();
        paths.dedup();
        Ok(paths)
    }

    /// `git stash create` (a snapshot commit of the dirty tree, without touching it); `None`
    /// when the tree is clean. Untracked files are not in it (git's own limit).
    pub fn stash_create(&self) -> Result<Option<String>, GitError> {
        let s = self.run(&["stash", "create"])?;
        let s = s.trim();
        Ok(if s.is_empty() { None } else { Some(s.to_string()) })
    }
}

fn run_in(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    let spec = ProcessSpec::new("git", args.iter().map(|s| s.to_string()).collect(), dir)
        .with_env("GIT_TERMINAL_PROMPT", "0")
        .with_env("LC_ALL", "C");
    let out = Spawner.run_blocking(&spec).map_err(|e| GitError::Spawn(e.to_string()))?;
    if out.success() {
        Ok(out.stdout_text())
    } else {
        Err(GitError::Failed { args: args.join(" "), stderr: out.stderr_text().trim().to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        let g = Git::new(d.path());
        g.run(&["init", "-q"]).expect("init");
        g.run(&["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"])
            .expect("commit");
        d
    }

    #[test]
    fn status_and_fingerprint_follow_the_tree() {
        let d = repo();
        let g = Git::new(d.path());
        assert!(g.is_clean().expect("status"));
        let clean = g.diff_fingerprint().expect("fp");
        std::fs::write(d.path().join("new file.txt"), "hello").expect("write");
        assert_eq!(g.dirty_paths().expect("status"), vec!["new file.txt".to_string()]);
        let dirty = g.diff_fingerprint().expect("fp");
        assert_ne!(clean, dirty);
        assert_eq!(g.changed_paths().expect("paths"), vec!["new file.txt".to_string()]);
        assert!(g.head_sha().is_some());
        assert!(Git::toplevel(d.path()).is_some());
    }
}
