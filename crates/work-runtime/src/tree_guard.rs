//! Read-only enforcement: what a read-only dispatch may not change.
//!
//! A [`TreeSnapshot`] records every entry under the repository root — tracked, untracked,
//! ignored, the state directory, and the git directory's refs, config, hooks and info — by
//! kind, size, mode, inode, mtime and ctime, without following symlinks (a symlink is recorded
//! by its target text). ctime cannot be set by a process, so a rewrite that restores the mtime
//! is still seen. [`TreeSnapshot::changes`] lists what differs between two snapshots.
//!
//! Left out, because honest read-only work changes them: `.git/index` (git refreshes its stat
//! cache on `git status`), `.git/objects/` (content-addressed: writing an object changes no
//! file), `__pycache__/` directories (an interpreter's byte-code cache), and the paths the
//! engine itself writes while the dispatches run (given as `exclude`). A `.gitignore`,
//! `.gitattributes` or `.git` under a `__pycache__/` is still recorded: it changes what git
//! shows, and no interpreter writes one.
//!
//! Fallback only, for what a read-only dispatch writes itself: with the kernel sandbox
//! ([`crate::sandbox`]) every file is read-only to it and the state directory is not there, so
//! such a write fails with `EROFS` as it is tried; this comparison catches it where there is no
//! sandbox (`--isolation none`, no user namespaces). It runs in both modes. What it also sees —
//! a change no dispatch made, between exhaust's waves — is not the sandbox's to refuse.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What is recorded of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    kind: char,
    size: u64,
    mode: u32,
    ino: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    link: Option<PathBuf>,
}

/// The state of a tree at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeSnapshot {
    entries: BTreeMap<PathBuf, Entry>,
}

/// How many changed paths [`TreeSnapshot::changes`] names at most.
pub const CHANGES_SHOWN: usize = 20;

/// What of an entry is walked and recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// Recorded (and walked into when a directory).
    Recorded,
    /// Walked into, not recorded: a byte-code cache, searched for git's own files only.
    Searched,
    /// Neither.
    Skipped,
}

/// How `rel` is walked: the git-directory parts honest read-only work rewrites are skipped, a
/// byte-code cache is searched for the `.gitignore` and `.gitattributes` files git reads (and a
/// `.git`, which makes a directory of it another repository).
fn seen(rel: &Path) -> Seen {
    let mut comps = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned());
    let first = comps.next().unwrap_or_default();
    if rel.components().any(|c| c.as_os_str() == "__pycache__") {
        let name = rel.file_name().unwrap_or_default();
        let git_reads = [".gitignore", ".gitattributes", ".git"].iter().any(|n| name == *n);
        return if git_reads { Seen::Recorded } else { Seen::Searched };
    }
    if skipped(first, comps.next()) { Seen::Skipped } else { Seen::Recorded }
}

/// True for the git-directory parts honest read-only work rewrites.
fn skipped(first: String, second: Option<String>) -> bool {
    if first == ".git" {
        let second = second.unwrap_or_default();
        return matches!(second.as_str(), "index" | "index.lock" | "objects" | "logs" | "FETCH_HEAD" | "ORIG_HEAD");
    }
    false
}

impl TreeSnapshot {
    /// Walks `root` (no symlink is followed), leaving out the paths under any of `exclude`.
    pub fn take(root: &Path, exclude: &[PathBuf]) -> io::Result<TreeSnapshot> {
        let mut snap = TreeSnapshot::default();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let rd = match fs::read_dir(&dir) {
                Ok(rd) => rd,
                // Gone or unreadable while walking: what is missing shows as a change.
                Err(_) => continue,
            };
            for ent in rd.flatten() {
                let path = ent.path();
                if exclude.iter().any(|x| path.starts_with(x)) {
                    continue;
                }
                let Ok(rel) = path.strip_prefix(root) else { continue };
                let how = seen(rel);
                if how == Seen::Skipped {
                    continue;
                }
                let Ok(meta) = fs::symlink_metadata(&path) else { continue };
                let ft = meta.file_type();
                if how == Seen::Searched {
                    if ft.is_dir() {
                        stack.push(path);
                    }
                    continue;
                }
                let kind = if ft.is_symlink() {
                    'l'
                } else if ft.is_dir() {
                    'd'
                } else if ft.is_file() {
                    'f'
                } else {
                    'o'
                };
                let link = if ft.is_symlink() { fs::read_link(&path).ok() } else { None };
                // A directory's size and times change whenever an entry is added or removed:
                // the entry itself shows that, so directories are recorded by kind and mode.
                let (size, mtime_ns, ctime_ns, ino) = if kind == 'd' {
                    (0, 0, 0, meta.ino())
                } else {
                    (
                        meta.size(),
                        i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                        i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
                        meta.ino(),
                    )
                };
                snap.entries
                    .insert(rel.to_path_buf(), Entry { kind, size, mode: meta.mode(), ino, mtime_ns, ctime_ns, link });
                if kind == 'd' {
                    stack.push(path);
                }
            }
        }
        Ok(snap)
    }

    /// The paths that were added, removed or changed from `self` to `after`, sorted, each
    /// prefixed `+`, `-` or `~`.
    pub fn changes(&self, after: &TreeSnapshot) -> Vec<String> {
        let mut out = Vec::new();
        for (p, e) in &self.entries {
            match after.entries.get(p) {
                None => out.push(format!("-{}", p.display())),
                Some(a) if a != e => out.push(format!("~{}", p.display())),
                Some(_) => {}
            }
        }
        for p in after.entries.keys() {
            if !self.entries.contains_key(p) {
                out.push(format!("+{}", p.display()));
            }
        }
        out.sort_by(|a, b| a[1..].cmp(&b[1..]));
        out
    }

    /// The number of entries recorded.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A one-line description of `changes` (at most [`CHANGES_SHOWN`] paths named).
pub fn describe_changes(changes: &[String]) -> String {
    let shown: Vec<&str> = changes.iter().take(CHANGES_SHOWN).map(String::as_str).collect();
    let more = changes.len().saturating_sub(CHANGES_SHOWN);
    if more > 0 { format!("{} (and {more} more)", shown.join(" ")) } else { shown.join(" ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_writes_removals_and_restored_mtimes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        fs::create_dir_all(root.join("src")).expect("mkdir");
        fs::create_dir_all(root.join(".git/objects")).expect("mkdir");
        fs::write(root.join("src/a.rs"), "one\n").expect("write");
        fs::write(root.join("gone.txt"), "x").expect("write");
        let excluded = root.join(".work/runs/r1");
        fs::create_dir_all(&excluded).expect("mkdir");
        let before = TreeSnapshot::take(root, std::slice::from_ref(&excluded)).expect("snap");
        assert!(before.changes(&TreeSnapshot::take(root, std::slice::from_ref(&excluded)).expect("snap")).is_empty());
        // Honest noise: the engine's own run dir, git objects, byte-code caches.
        fs::write(excluded.join("rec.json"), "{}").expect("write");
        fs::write(root.join(".git/objects/ab"), "obj").expect("write");
        fs::create_dir_all(root.join("src/__pycache__")).expect("mkdir");
        fs::write(root.join("src/__pycache__/a.pyc"), "pyc").expect("write");
        let after = TreeSnapshot::take(root, std::slice::from_ref(&excluded)).expect("snap");
        assert!(before.changes(&after).is_empty(), "{:?}", before.changes(&after));
        // What git reads is seen even in a byte-code cache.
        fs::create_dir_all(root.join("src/__pycache__/x")).expect("mkdir");
        fs::write(root.join("src/__pycache__/x/.gitattributes"), "* -diff\n").expect("write");
        let seen = TreeSnapshot::take(root, std::slice::from_ref(&excluded)).expect("snap");
        assert_eq!(before.changes(&seen), vec!["+src/__pycache__/x/.gitattributes"]);
        fs::write(root.join("src/__pycache__/x/.git"), "gitdir: /elsewhere\n").expect("write");
        let seen = TreeSnapshot::take(root, std::slice::from_ref(&excluded)).expect("snap");
        assert_eq!(before.changes(&seen), vec!["+src/__pycache__/x/.git", "+src/__pycache__/x/.gitattributes"]);
        fs::remove_file(root.join("src/__pycache__/x/.git")).expect("rm");
        fs::remove_file(root.join("src/__pycache__/x/.gitattributes")).expect("rm");
        // A rewrite with the same size and the old mtime restored is still a change (ctime).
        let meta = fs::metadata(root.join("src/a.rs")).expect("meta");
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(root.join("src/a.rs"), "two\n").expect("write");
        let f = fs::File::options().write(true).open(root.join("src/a.rs")).expect("open");
        f.set_modified(meta.modified().expect("mtime")).expect("set mtime");
        fs::remove_file(root.join("gone.txt")).expect("rm");
        fs::write(root.join("new.txt"), "n").expect("write");
        let after = TreeSnapshot::take(root, &[excluded]).expect("snap");
        assert_eq!(before.changes(&after), vec!["-gone.txt", "+new.txt", "~src/a.rs"]);
    }
}
