//! The one walk of a directory: an inventory of what is there, and the one diff of two.
//!
//! [`Inventory::take`] walks a directory once, never following a symlink, and records every
//! entry by its relative path: kind, mode, size, inode, mtime, ctime, and a symlink's target
//! text. A directory is recorded by kind, mode and inode only: its size and times change
//! whenever an entry comes or goes, which the entry itself shows. ctime cannot be set by a
//! process, so a rewrite that restores the mtime is still seen. [`Inventory::changes`] names
//! what differs between two inventories. What is walked is the caller's policy: the read-only
//! view walks everything but what honest reading rewrites ([`Inventory::read_only`]); the check
//! surface's policies walk the project without its build and dependency directories
//! (`crate::surface`). Content is hashed by [`digest`], symlinks by their target text.
//!
//! Left out of a read-only walk, because honest read-only work changes them: git's index and
//! its lock, `objects/`, `logs/`, `FETCH_HEAD` and `ORIG_HEAD` of a `.git` at the root,
//! `__pycache__/` directories (an interpreter's byte-code cache), and what the caller keeps
//! out (the paths the engine itself writes while the dispatches run). A `.gitignore`,
//! `.gitattributes` or `.git` under a `__pycache__/` is still recorded: it changes what git
//! shows, and no interpreter writes one.
//!
//! The read-only walk is fallback only for what a read-only dispatch writes itself: with the
//! kernel sandbox (`work_runtime::sandbox`) every file is read-only to it and the state
//! directory is not there, so such a write fails with `EROFS` as it is tried; the comparison
//! catches it where there is no sandbox. What it also sees — a change no dispatch made, between
//! exhaust's waves — is not the sandbox's to refuse.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What is recorded of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `f` a regular file, `d` a directory, `l` a symlink, `o` anything else.
    pub kind: char,
    size: u64,
    mode: u32,
    ino: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    link: Option<PathBuf>,
}

/// What of an entry is walked and recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Recorded (and walked into when a directory).
    Recorded,
    /// Walked into, not recorded.
    Searched,
    /// Neither.
    Skipped,
}

/// Every entry under a directory at one instant, by relative path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    entries: BTreeMap<PathBuf, Entry>,
}

impl Inventory {
    /// Walks `root` from `from` (relative; `""` for the whole of it), asking `seen` of every
    /// entry (its relative path, and whether it is a directory) whether it is recorded and
    /// walked into. No symlink is followed; what cannot be read is missing.
    pub fn take(root: &Path, from: &str, seen: impl Fn(&Path, bool) -> Seen) -> Inventory {
        let mut inv = Inventory::default();
        let mut stack = vec![root.join(from)];
        while let Some(dir) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&dir) else { continue };
            for ent in rd.flatten() {
                let path = ent.path();
                let (Ok(rel), Ok(meta)) = (path.strip_prefix(root), std::fs::symlink_metadata(&path)) else { continue };
                let ft = meta.file_type();
                let how = seen(rel, ft.is_dir());
                if how != Seen::Skipped && ft.is_dir() {
                    stack.push(path.clone());
                }
                if how != Seen::Recorded {
                    continue;
                }
                let kind = match () {
                    _ if ft.is_symlink() => 'l',
                    _ if ft.is_dir() => 'd',
                    _ if ft.is_file() => 'f',
                    _ => 'o',
                };
                let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
                let (size, mtime_ns, ctime_ns) = match kind {
                    'd' => (0, 0, 0),
                    _ => (meta.size(), ns(meta.mtime(), meta.mtime_nsec()), ns(meta.ctime(), meta.ctime_nsec())),
                };
                let link = if kind == 'l' { std::fs::read_link(&path).ok() } else { None };
                let (mode, ino) = (meta.mode(), meta.ino());
                inv.entries.insert(rel.to_path_buf(), Entry { kind, size, mode, ino, mtime_ns, ctime_ns, link });
            }
        }
        inv
    }

    /// The read-only walk of `root` (see the module documentation), leaving out the paths
    /// under any of `keep_out` (absolute).
    pub fn read_only(root: &Path, keep_out: &[PathBuf]) -> Inventory {
        Inventory::take(root, "", |rel, _| {
            if keep_out.iter().any(|x| root.join(rel).starts_with(x)) {
                return Seen::Skipped;
            }
            if rel.components().any(|c| c.as_os_str() == "__pycache__") {
                let git_reads = [".gitignore", ".gitattributes", ".git"].iter().any(|n| rel.ends_with(n));
                return if git_reads { Seen::Recorded } else { Seen::Searched };
            }
            let mut parts = rel.iter().map(|c| c.to_string_lossy());
            let (first, second) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
            let git_rewrites = ["index", "index.lock", "objects", "logs", "FETCH_HEAD", "ORIG_HEAD"];
            if first == ".git" && git_rewrites.contains(&second.as_ref()) { Seen::Skipped } else { Seen::Recorded }
        })
    }

    /// Every entry that is not a directory, by relative path (sorted), with its kind.
    pub fn files(&self) -> impl Iterator<Item = (String, char)> + '_ {
        self.entries.iter().filter(|(_, e)| e.kind != 'd').map(|(p, e)| (p.to_string_lossy().into_owned(), e.kind))
    }

    /// The paths that were added, removed or changed from `self` to `after`, sorted, each
    /// prefixed `+`, `-` or `~`.
    pub fn changes(&self, after: &Inventory) -> Vec<String> {
        let sign = |was: Option<&Entry>, is: Option<&Entry>| match (was, is) {
            (None, _) => '+',
            (_, None) => '-',
            _ => '~',
        };
        diff(&self.entries, &after.entries)
            .into_iter()
            .map(|(p, was, is)| format!("{}{}", sign(was, is), p.display()))
            .collect()
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

/// The keys whose values differ between two measurements — changed, gone (`None` after) or
/// new (`None` before) — sorted by key: the one diff of two maps.
pub fn diff<'a, K: Ord, V: PartialEq>(
    before: &'a BTreeMap<K, V>,
    after: &'a BTreeMap<K, V>,
) -> Vec<(&'a K, Option<&'a V>, Option<&'a V>)> {
    let mut out: Vec<_> =
        before.iter().filter(|(k, v)| after.get(*k) != Some(*v)).map(|(k, v)| (k, Some(v), after.get(k))).collect();
    out.extend(after.iter().filter(|(k, _)| !before.contains_key(*k)).map(|(k, v)| (k, None, Some(v))));
    out.sort_by(|a, b| a.0.cmp(b.0));
    out
}

/// The sha256 hex of everything `r` reads (streamed, whatever its size); `None` on a read error.
pub(crate) fn digest(mut r: impl Read) -> Option<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => return Some(hex::encode(h.finalize())),
            Ok(n) => h.update(&buf[..n]),
            Err(_) => return None,
        }
    }
}

/// The digest a symlink is recorded by: its target text, marked, so it never equals a file
/// with that content.
pub(crate) fn link_digest(target: &str) -> String {
    hex::encode(Sha256::digest(format!("symlink\0{target}").as_bytes()))
}

/// At most `shown` of `items` joined by `sep`, and how many more there are: the one way every
/// policy names what it found.
pub fn describe<T: std::fmt::Display>(items: &[T], shown: usize, sep: &str) -> String {
    let list: Vec<String> = items.iter().take(shown).map(ToString::to_string).collect();
    match items.len().saturating_sub(shown) {
        0 => list.join(sep),
        more => format!("{} (and {more} more)", list.join(sep)),
    }
}

/// Changes of [`Inventory::changes`] (or the read-only view's) in one line: at most twenty.
pub fn describe_changes(changes: &[String]) -> String {
    describe(changes, 20, " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

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
        let keep_out = std::slice::from_ref(&excluded);
        let before = Inventory::read_only(root, keep_out);
        assert!(before.changes(&Inventory::read_only(root, keep_out)).is_empty());
        // Honest noise: the engine's own run dir, git objects, byte-code caches.
        fs::write(excluded.join("rec.json"), "{}").expect("write");
        fs::write(root.join(".git/objects/ab"), "obj").expect("write");
        fs::create_dir_all(root.join("src/__pycache__")).expect("mkdir");
        fs::write(root.join("src/__pycache__/a.pyc"), "pyc").expect("write");
        let after = Inventory::read_only(root, keep_out);
        assert!(before.changes(&after).is_empty(), "{:?}", before.changes(&after));
        // What git reads is seen even in a byte-code cache.
        fs::create_dir_all(root.join("src/__pycache__/x")).expect("mkdir");
        fs::write(root.join("src/__pycache__/x/.gitattributes"), "* -diff\n").expect("write");
        let seen = Inventory::read_only(root, keep_out);
        assert_eq!(before.changes(&seen), vec!["+src/__pycache__/x/.gitattributes"]);
        fs::write(root.join("src/__pycache__/x/.git"), "gitdir: /elsewhere\n").expect("write");
        let seen = Inventory::read_only(root, keep_out);
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
        let after = Inventory::read_only(root, &[excluded]);
        assert_eq!(before.changes(&after), vec!["-gone.txt", "+new.txt", "~src/a.rs"]);
        assert_eq!(describe(&after.changes(&before), 2, " "), "+gone.txt -new.txt (and 1 more)");
    }
}
