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

use std::path::Path;

/// The environment variable Python reads its bytecode cache directory from.
pub const PREFIX_VAR: &str = "PYTHONPYCACHEPREFIX";

/// An empty directory of the engine's own, removed on drop and when `work` is interrupted.
#[derive(Debug)]
pub struct FreshCache {
    dir: crate::scratch::ScratchDir,
}

impl FreshCache {
    /// Creates a new directory under the system's temporary directory (never one that was
    /// there: the creation is exclusive, and only its owner may enter it).
    pub fn new() -> std::io::Result<Self> {
        Ok(FreshCache { dir: crate::scratch::ScratchDir::new("work-pycache-")? })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
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
