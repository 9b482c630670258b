//! Scratch files a backend hands to a child for one attempt (the schema file a CLI reads):
//! registered while they live, and removed by [`remove_all`] when `work` is interrupted
//! (SIGINT and SIGTERM end the process without unwinding, so no destructor runs). A file
//! left by a SIGKILL is the next run's to sweep.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

static LIVE: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

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

/// Removes every registered scratch file (the children reading them have been ended).
pub fn remove_all() {
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
}
