//! Scratch files a backend hands to a child for one attempt (the schema file a CLI reads):
//! registered while they live, and removed by [`remove_all`] when `work` is interrupted
//! (SIGINT and SIGTERM end the process without unwinding, so no destructor runs). A file
//! left by a SIGKILL is the next run's to sweep. Work the engine must undo when interrupted
//! (a directory it made: the engine's copy of the tree) registers an [`on_interrupt`] hook.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

static LIVE: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// Undo hooks run on an interruption, by id.
type Hook = Box<dyn FnOnce() + Send>;
static HOOKS: Mutex<BTreeMap<u64, Hook>> = Mutex::new(BTreeMap::new());
static NEXT_HOOK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Registers `undo`, run by [`remove_all`] when `work` is interrupted, until [`cancel`] is
/// called with the returned id (the owner undid the work itself).
pub fn on_interrupt(undo: impl FnOnce() + Send + 'static) -> u64 {
    let id = NEXT_HOOK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if let Ok(mut hooks) = HOOKS.lock() {
        hooks.insert(id, Box::new(undo));
    }
    id
}

/// The hook `id` is no longer needed.
pub fn cancel(id: u64) {
    if let Ok(mut hooks) = HOOKS.lock() {
        hooks.remove(&id);
    }
}

/// Registers a scratch file (removed on an interruption until [`forget`] is called).
pub fn register(path: &Path) {
    if let Ok(mut live) = LIVE.lock() {
        live.insert(path.to_path_buf());
    }
}

/// The file was removed by its owner.
pub fn forget(path: &Path) {
    if let Ok(mut live) = LIVE.lock() {
        live.remove(path);
    }
}

/// A scratch directory for one attempt (a sandboxed process's private `/tmp`, a CLI's private
/// state directory): removed when dropped, and on an interruption ([`remove_all`]).
#[derive(Debug)]
pub struct ScratchDir {
    dir: tempfile::TempDir,
    hook: u64,
}

impl ScratchDir {
    /// A fresh directory in the temporary directory, its name starting with `prefix`.
    pub fn new(prefix: &str) -> std::io::Result<Self> {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir()?;
        let path = dir.path().to_path_buf();
        let hook = on_interrupt(move || drop(std::fs::remove_dir_all(path)));
        Ok(Self { dir, hook })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        // The TempDir removes the directory itself.
        cancel(self.hook);
    }
}

/// Runs every registered undo hook and removes every registered scratch file (the children
/// reading them have been ended).
pub fn remove_all() {
    let hooks = match HOOKS.lock() {
        Ok(mut hooks) => std::mem::take(&mut *hooks),
        Err(_) => BTreeMap::new(),
    };
    for (_, undo) in hooks {
        undo();
    }
    let paths = match LIVE.lock() {
        Ok(mut live) => std::mem::take(&mut *live),
        Err(_) => return,
    };
    for p in paths {
        let _ = std::fs::remove_file(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_files_are_removed_and_forgotten_ones_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
        for p in [&a, &b] {
            std::fs::write(p, "{}").expect("write");
            register(p);
        }
        forget(&b);
        remove_all();
        assert!(!a.exists() && b.exists());
    }

    #[test]
    fn a_scratch_dir_is_removed_when_dropped_and_on_an_interrupt() {
        let (a, b) = (ScratchDir::new("work-test-").expect("a"), ScratchDir::new("work-test-").expect("b"));
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        drop(a);
        assert!(!pa.exists());
        std::mem::forget(b); // as when `work` is interrupted: no destructor runs
        remove_all();
        assert!(!pb.exists(), "an interruption removes it");
    }

    #[test]
    fn an_interrupt_runs_the_undo_hooks_not_cancelled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let (ua, ub) = (a.clone(), b.clone());
        on_interrupt(move || drop(std::fs::write(ua, "undone")));
        let id = on_interrupt(move || drop(std::fs::write(ub, "undone")));
        cancel(id);
        remove_all();
        assert!(a.exists() && !b.exists());
    }
}
