//! The locks a run holds: one on its own state (a journal, a session, an iteration, a goal,
//! a spec directory) and, for every workflow that writes the working tree, one on the tree.
//!
//! Both are kernel `flock`s through [`work_runtime::fsx::LockFile`] (released when the holder
//! dies, so never stale). Beside each lock file a `.holder` record names the run that holds it
//! (`pid` and run id), so a refused run can say who is in the way in one line.
//!
//! The tree lock lives in the repository's git directory (`<git-dir>/work-tree.lock`; each
//! `git worktree` has its own), so two runs on one tree are refused whatever `--state-dir`
//! each uses. Outside a git repository it falls back to `<state-dir>/locks/tree.lock`.

use std::path::{Path, PathBuf};
use work_runtime::fsx::{LockError, LockFile};

/// A lock another run holds, or one that could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockRefused {
    /// Another live run holds it.
    #[error("lock {what}: it is held by {}", holder_text(.pid, .run_id))]
    Held {
        /// What was being locked ("the working tree /repo", "session `x`").
        what: String,
        /// The holder's pid, when recorded.
        pid: Option<i32>,
        /// The holder's run id, when recorded.
        run_id: Option<String>,
    },
    /// The lock file could not be created.
    #[error("lock {what}: {source}")]
    Io {
        /// What was being locked.
        what: String,
        /// Why.
        source: LockError,
    },
}

fn holder_text(pid: &Option<i32>, run_id: &Option<String>) -> String {
    match (pid, run_id) {
        (Some(p), Some(r)) => format!("run {r} (pid {p}); wait for it to end or stop it"),
        (Some(p), None) => format!("another run (pid {p}); wait for it to end or stop it"),
        (None, Some(r)) => format!("run {r}; wait for it to end or stop it"),
        (None, None) => "another run; wait for it to end or stop it".into(),
    }
}

/// A held lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct Held {
    _lock: LockFile,
    path: PathBuf,
    created: bool,
}

impl Held {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when this run created the lock file (it did not exist before).
    pub fn created(&self) -> bool {
        self.created
    }
}

fn holder_path(lock: &Path) -> PathBuf {
    let mut s = lock.as_os_str().to_owned();
    s.push(".holder");
    PathBuf::from(s)
}

/// Takes the lock at `path` for `run_id`, without waiting.
pub fn acquire(path: &Path, what: &str, run_id: &str) -> Result<Held, LockRefused> {
    let created = !path.exists();
    match LockFile::acquire(path) {
        Ok(lock) => {
            let record = format!("{} {run_id}\n", std::process::id());
            // The record only names the holder to a refused run; the flock is the lock.
            let _ = work_runtime::fsx::write_atomic(&holder_path(path), record.as_bytes());
            Ok(Held { _lock: lock, path: path.to_path_buf(), created })
        }
        Err(LockError::Held { holder, .. }) => {
            let rec = std::fs::read_to_string(holder_path(path)).unwrap_or_default();
            let mut words = rec.split_whitespace();
            let rec_pid = words.next().and_then(|p| p.parse::<i32>().ok());
            let rec_run = words.next().map(str::to_string);
            // The record is trusted only when it names the pid the lock file names.
            let run_id = if rec_pid.is_some() && rec_pid == holder { rec_run } else { None };
            Err(LockRefused::Held { what: what.to_string(), pid: holder.or(rec_pid), run_id })
        }
        Err(e) => Err(LockRefused::Io { what: what.to_string(), source: e }),
    }
}

/// Removes a lock this run created (with its record) while it is still held: a run refused
/// as bad input leaves nothing behind.
pub fn discard(held: Held) {
    if held.created {
        let _ = work_runtime::fsx::plain::remove_file(holder_path(&held.path));
        let _ = work_runtime::fsx::plain::remove_file(&held.path);
    }
    drop(held);
}

/// Where the working-tree lock of `root` lives.
pub fn tree_lock_path(root: &Path, state_dir: &Path) -> PathBuf {
    match work_git::Git::new(root).run(&["rev-parse", "--absolute-git-dir"]) {
        Ok(dir) if !dir.trim().is_empty() => PathBuf::from(dir.trim()).join("work-tree.lock"),
        _ => state_dir.join("locks").join("tree.lock"),
    }
}

/// Takes the working-tree lock of `root` for `run_id`.
pub fn lock_tree(root: &Path, state_dir: &Path, run_id: &str) -> Result<Held, LockRefused> {
    acquire(&tree_lock_path(root, state_dir), &format!("the working tree {}", root.display()), run_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_run_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("locks/x.lock");
        let first = acquire(&p, "x", "run-1").expect("first");
        assert!(first.created());
        // flock is per open file description: a second acquire in one process conflicts too.
        let e = acquire(&p, "x", "run-2").expect_err("second is refused");
        let msg = e.to_string();
        assert!(msg.contains("run-1") && msg.contains(&format!("pid {}", std::process::id())), "{msg}");
        discard(first);
        assert!(!p.exists());
        let again = acquire(&p, "x", "run-3").expect("free again");
        drop(again);
        let kept = acquire(&p, "x", "run-4").expect("free again");
        assert!(!kept.created());
        discard(kept);
        assert!(p.exists(), "a lock file this run did not create is never deleted");
    }
}
