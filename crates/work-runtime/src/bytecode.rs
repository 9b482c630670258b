//! A fresh, empty Python bytecode cache for each check the engine runs.
//!
//! Python takes a `__pycache__/*.pyc` over its source when the header matches the source's
//! size and time (or its hash), and pytest does the same with its assertion-rewrite cache. Both
//! live in ignored directories that git, the snapshots and the freeze never see, so an agent
//! could leave bytecode of fixed code (or of a weakened test) stamped to match the unchanged
//! source, and the check would run that instead. Every check therefore runs with
//! `PYTHONPYCACHEPREFIX` pointing at a new empty directory outside the tree (Python reads and
//! writes bytecode only there; pytest honours `sys.pycache_prefix` for its rewrite cache), made
//! when the check starts and removed when it has ended, also when `work` is interrupted.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable Python reads its bytecode cache directory from.
pub const PREFIX_VAR: &str = "PYTHONPYCACHEPREFIX";

static NEXT: AtomicU64 = AtomicU64::new(0);

/// An empty directory of the engine's own, removed on drop.
#[derive(Debug)]
pub struct FreshCache {
    path: PathBuf,
    hook: u64,
}

impl FreshCache {
    /// Creates a new directory under the system's temporary directory (never one that was
    /// there: the creation is exclusive, and only its owner may enter it).
    pub fn new() -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        for _ in 0..64 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("work-pycache-{}-{n}-{nanos:x}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    let undo = path.clone();
                    let hook = crate::scratch::on_interrupt(move || drop(std::fs::remove_dir_all(undo)));
                    return Ok(FreshCache { path, hook });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other("no free name for a bytecode cache directory"))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FreshCache {
    fn drop(&mut self) {
        crate::scratch::cancel(self.hook);
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cache_is_new_empty_and_removed_when_dropped() {
        let (a, b) = (FreshCache::new().expect("a"), FreshCache::new().expect("b"));
        assert_ne!(a.path(), b.path());
        assert!(a.path().is_dir() && std::fs::read_dir(a.path()).expect("read").next().is_none());
        std::fs::write(a.path().join("x.pyc"), b"x").expect("write");
        let p = a.path().to_path_buf();
        drop(a);
        assert!(!p.exists());
    }
}
