//! Scratch files a backend hands to a child for one attempt (the schema file a CLI reads):
//! registered while they live, and removed by [`remove_all`] when `work` is interrupted
//! (SIGINT and SIGTERM end the process without unwinding, so no destructor runs). A
//! [`ScratchDir`] left by a SIGKILL is swept by the next `work` that makes one of its kind (its
//! name carries the PID that made it). Work the engine must undo when interrupted
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
    /// A fresh directory in the temporary directory (only its owner may enter it), named
    /// `{prefix}{PID}-XXXXXX`. The first one of a prefix in a process sweeps what killed runs
    /// left ([`sweep_stale`]).
    pub fn new(prefix: &str) -> std::io::Result<Self> {
        let base = std::env::temp_dir();
        sweep_stale_once(&base, prefix);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{prefix}{}-", std::process::id()))
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(&base)?;
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

/// Removes the directories `base/{prefix}{PID}-…` whose PID no longer runs — what a `work` killed
/// before it could remove them left — never another user's, a link, or one of a live process.
/// Returns how many were removed.
pub fn sweep_stale(base: &Path, prefix: &str) -> usize {
    use std::os::unix::fs::MetadataExt;
    // `/proc/self` belongs to this process's effective user.
    let Ok(me) = std::fs::metadata("/proc/self").map(|m| m.uid()) else { return 0 };
    let Ok(entries) = std::fs::read_dir(base) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<i64>().ok())
        else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else { continue };
        let stale = meta.is_dir() && meta.uid() == me && !crate::spawn::pid_running(pid);
        if stale && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// [`sweep_stale`] the first time this process makes a scratch directory with `prefix`.
fn sweep_stale_once(base: &Path, prefix: &str) {
    static SWEPT: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let first = SWEPT.lock().map(|mut swept| swept.insert(prefix.to_string())).unwrap_or(false);
    if first {
        sweep_stale(base, prefix);
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
    fn a_killed_runs_scratch_dirs_are_swept_and_live_ones_kept() {
        let base = tempfile::tempdir().expect("tempdir");
        let dead = base.path().join("work-x-999999999-abc");
        let live = base.path().join(format!("work-x-{}-abc", std::process::id()));
        let other_kind = base.path().join("work-y-999999999-abc");
        let not_ours = base.path().join("work-x-notapid");
        for d in [&dead, &live, &other_kind, &not_ours] {
            std::fs::create_dir_all(d.join("inner")).expect("mkdir");
        }
        let link = base.path().join("work-x-999999998-link");
        std::os::unix::fs::symlink(&live, &link).expect("symlink");
        assert_eq!(sweep_stale(base.path(), "work-x-"), 1);
        assert!(!dead.exists());
        assert!(live.exists() && other_kind.exists() && not_ours.exists() && link.exists());
    }

    #[test]
    fn a_scratch_dir_names_its_pid_and_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let d = ScratchDir::new("work-test-").expect("dir");
        let name = d.path().file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        assert!(name.starts_with(&format!("work-test-{}-", std::process::id())), "{name}");
        let mode = std::fs::metadata(d.path()).expect("stat").permissions().mode();
        assert_eq!(mode & 0o077, 0, "only its owner may enter it");
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
