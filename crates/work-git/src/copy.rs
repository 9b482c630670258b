//! The engine's copy: where every check that judges a run runs.
//!
//! [`Git::engine_copy`] makes a clone of the repository under the git directory
//! (`<git-common-dir>/work-copies/<pid>-<n>`, never inside the agent's working tree) that
//! shares its objects (`git clone --shared`: nothing copied; no remote left, so nothing the
//! check does reaches the agent's repository through it), detached at HEAD, with a given tree
//! checked out over it (the index is HEAD's: `git status` and `git diff` in the copy show the
//! change as they show it in the agent's tree). Its `.git` is a directory, and the state
//! directory's place (when it is inside the tree) holds an empty directory: a check finds the
//! copy laid out like the tree.
//! The caller builds that tree (the agent's tree as a snapshot, its frozen checks put back:
//! [`crate::restore::Frozen`]), so nothing is ever written into the agent's tree to judge it.
//!
//! What the checks need that git does not carry — the ignored entries of the agent's tree (a
//! virtualenv, `node_modules`, `target/`, a build cache), outside the state directory — is
//! brought in as a **copy that cannot be written back**: directories made anew, a symlink
//! recreated as itself, every file up to [`COPIED_UP_TO`] copied with its mode and modification
//! time through `copy_file_range` (a reflink where the file system has one: btrfs, XFS,
//! bcachefs, NFS 4.2; an in-kernel byte copy elsewhere), so a check that rewrites one in place
//! changes the copy only; a larger file is hard-linked (a byte copy of a whole `target/` at every
//! check would cost its size), copied when a link cannot be made. The copy is removed when
//! dropped, and on an
//! interruption (`work_runtime::scratch`); one left by a `work` killed outright is removed by
//! the next copy of the same repository.

use crate::{Git, GitError, split_z};
use std::path::{Path, PathBuf};

/// A copy of the repository the engine owns; removed when dropped.
#[derive(Debug)]
pub struct EngineCopy {
    /// Its root.
    dir: PathBuf,
    /// The hook removing it on an interruption.
    hook: u64,
}

impl EngineCopy {
    /// The copy's root: where the checks run.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Removes `hide` (paths relative to the root, never followed through a symlink) from the
    /// copy, and leaves `emptied` as empty files: what the checks must run without.
    pub fn set_aside(&self, hide: &[String], emptied: &[String]) -> Result<(), GitError> {
        let io = |rel: &str, e: std::io::Error| GitError::Spawn(format!("setting {rel} aside in the copy: {e}"));
        for rel in hide.iter().chain(emptied) {
            let at = inside(&self.dir, rel).map_err(|e| io(rel, e))?;
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() => work_runtime::fsx::plain::remove_dir_all(&at).map_err(|e| io(rel, e))?,
                Ok(_) => work_runtime::fsx::plain::remove_file(&at).map_err(|e| io(rel, e))?,
                Err(_) => {}
            }
        }
        for rel in emptied {
            let at = inside(&self.dir, rel).map_err(|e| io(rel, e))?;
            if let Some(parent) = at.parent() {
                work_runtime::fsx::ensure_dir(parent).map_err(|e| io(rel, e))?;
            }
            work_runtime::fsx::plain::write(&at, "").map_err(|e| io(rel, e))?;
        }
        Ok(())
    }
}

impl Drop for EngineCopy {
    fn drop(&mut self) {
        work_runtime::scratch::cancel(self.hook);
        let _ = work_runtime::fsx::plain::remove_dir_all(&self.dir);
    }
}

/// `root/rel` when `rel` is plain and relative and no directory on the way is a symlink.
fn inside(root: &Path, rel: &str) -> std::io::Result<PathBuf> {
    if !work_runtime::fsx::is_plain_relative(Path::new(rel)) {
        return Err(std::io::Error::other(format!("`{rel}` is not a plain relative path")));
    }
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(std::io::Error::other(format!("{} is a symlink", at.display())));
        }
    }
    Ok(root.join(rel))
}

impl Git {
    /// A copy of this repository at HEAD with `tree` checked out over it, and the ignored
    /// entries of this working tree outside `exclude` (the state directory) copied in (see the
    /// module documentation).
    pub fn engine_copy<S: AsRef<str>>(&self, tree: &str, exclude: &[S]) -> Result<EngineCopy, GitError> {
        let home = self.copies_home()?;
        work_runtime::fsx::ensure_dir(&home)
            .map_err(|e| GitError::Spawn(format!("creating {}: {e}", home.display())))?;
        sweep_stale(&home);
        let dir = free_dir(&home)?;
        let head = match self.head_sha() {
            Some(h) => h,
            None => self.snapshot_commit(EMPTY_TREE, "work: empty base")?,
        };
        let (from, path) = (self.root.display().to_string(), dir.display().to_string());
        let gone = dir.clone();
        let hook = work_runtime::scratch::on_interrupt(move || {
            let _ = work_runtime::fsx::plain::remove_dir_all(gone);
        });
        let copy = EngineCopy { dir, hook };
        self.run(&["clone", "--shared", "--no-checkout", "--quiet", &from, &path])?;
        let inner = Git::new(copy.path());
        inner.run(&["remote", "remove", "origin"])?;
        inner.run(&["update-ref", "--no-deref", "HEAD", &head])?;
        inner.run(&["read-tree", "--reset", "-u", tree])?;
        inner.run(&["reset", "--quiet"])?;
        self.copy_ignored(copy.path(), exclude)?;
        for rel in crate::exclude_dirs(exclude) {
            if let Ok(at) = inside(copy.path(), rel) {
                let _ = work_runtime::fsx::ensure_dir(&at);
            }
        }
        Ok(copy)
    }

    /// The directory every engine copy of this repository is made in
    /// (`<git-common-dir>/work-copies`): the engine's own, never the agent's.
    pub fn copies_home(&self) -> Result<PathBuf, GitError> {
        let common = self.run(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
        Ok(PathBuf::from(common.trim()).join("work-copies"))
    }

    /// The engine's copy of this working tree as it is now (its snapshot tree, outside
    /// `exclude`): where a check that judges the agent's work runs, so that nothing the check
    /// does lands in the agent's tree.
    pub fn snapshot_copy<S: AsRef<str>>(&self, exclude: &[S]) -> Result<EngineCopy, GitError> {
        self.engine_copy(&self.snapshot_tree(exclude)?, exclude)
    }

    /// Brings the ignored entries of this working tree (outside `exclude`) into `to`.
    fn copy_ignored<S: AsRef<str>>(&self, to: &Path, exclude: &[S]) -> Result<(), GitError> {
        let out = self.run(&["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"])?;
        for entry in split_z(&out) {
            let rel = entry.trim_end_matches('/');
            if rel.is_empty() || crate::is_excluded(rel, exclude) {
                continue;
            }
            let dst = inside(to, rel).map_err(|e| GitError::Spawn(format!("bringing {rel} into the copy: {e}")))?;
            if let Some(parent) = dst.parent() {
                work_runtime::fsx::ensure_dir(parent)
                    .map_err(|e| GitError::Spawn(format!("{}: {e}", parent.display())))?;
            }
            copy_tree(&self.root.join(rel), &dst)
                .map_err(|e| GitError::Spawn(format!("bringing {rel} into the copy: {e}")))?;
        }
        Ok(())
    }
}

/// The empty tree's id.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// `from` recreated at `to`: directories made, files copied (a reflink where the file system
/// has one) with their mode and modification time, symlinks recreated as themselves.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        return work_runtime::fsx::plain::symlink(std::fs::read_link(from)?, to);
    }
    if meta.is_dir() {
        work_runtime::fsx::ensure_dir(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        return Ok(());
    }
    if !meta.is_file() {
        return Ok(());
    }
    if meta.len() > COPIED_UP_TO && work_runtime::fsx::plain::hard_link(from, to).is_ok() {
        return Ok(());
    }
    work_runtime::fsx::plain::copy(from, to)?;
    std::fs::File::open(to)?.set_modified(meta.modified()?)
}

/// Ignored files up to this size are copied; a larger one (a build artifact, a wheel, a
/// model) is hard-linked where it can be. What checks rewrite in place — logs, counters,
/// small databases, caches' indexes — is small, while copying a whole `target/` or
/// `node_modules` byte by byte (where the file system has no reflink) would cost its size at
/// every check.
const COPIED_UP_TO: u64 = 1 << 20;

/// A new directory under `home` named for this process.
fn free_dir(home: &Path) -> Result<PathBuf, GitError> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    for _ in 0..64 {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = home.join(format!("{}-{n}", std::process::id()));
        if std::fs::symlink_metadata(&dir).is_err() {
            return Ok(dir);
        }
    }
    Err(GitError::Spawn(format!("no free directory under {} for the engine's copy", home.display())))
}

/// Removes the copies under `home` whose `work` is gone (killed outright).
fn sweep_stale(home: &Path) {
    let Ok(entries) = std::fs::read_dir(home) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let pid = name.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| p != std::process::id() && !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = work_runtime::fsx::plain::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_copy_holds_the_tree_and_the_ignored_entries_and_leaves_the_agents_tree_alone() {
        let (d, g) = crate::scratch::repo_with(&[
            ("lib.py", "x = 0\n"),
            ("tests/t.py", "assert x == 1\n"),
            (".gitignore", "venv/\n.work/\n"),
        ]);
        std::fs::create_dir_all(d.path().join("venv/lib")).expect("mkdir");
        std::fs::write(d.path().join("venv/lib/site.py"), "site\n").expect("write");
        std::fs::create_dir_all(d.path().join(".work")).expect("mkdir");
        std::fs::write(d.path().join(".work/state.json"), "{}\n").expect("write");
        std::fs::write(d.path().join("lib.py"), "x = 1\n").expect("write");
        std::fs::write(d.path().join("new.py"), "y = 1\n").expect("write");
        let tree = g.snapshot_tree(&[".work"]).expect("snap");
        let copy = g.engine_copy(&tree, &[".work"]).expect("copy");
        let at = copy.path().to_path_buf();
        assert!(!at.starts_with(d.path()) || at.starts_with(d.path().join(".git")), "outside the working tree");
        let read = |p: &str| std::fs::read_to_string(at.join(p)).unwrap_or_default();
        assert_eq!((read("lib.py").as_str(), read("new.py").as_str()), ("x = 1\n", "y = 1\n"));
        assert_eq!(read("venv/lib/site.py"), "site\n", "ignored entries are brought in");
        assert!(!at.join(".work/state.json").exists(), "the state directory is not");
        assert!(at.join(".git").is_dir() && at.join(".work").is_dir(), "laid out like the tree");
        let status = crate::Git::new(&at).run(&["status", "--porcelain"]).expect("status");
        assert!(status.contains(" M lib.py") && status.contains("?? new.py"), "{status}");
        copy.set_aside(&["new.py".to_string()], &["tests/t.py".to_string()]).expect("aside");
        assert!(!at.join("new.py").exists() && read("tests/t.py").is_empty());
        // A file the check rewrites in place lands in the copy only, with the time it had.
        let (mine, theirs) = (d.path().join("venv/lib/site.py"), at.join("venv/lib/site.py"));
        let mtime = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).expect("mtime");
        assert_eq!(mtime(&mine), mtime(&theirs));
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(&theirs).expect("open in place");
        f.write_all(b"patched").expect("write in place");
        drop(f);
        assert_eq!(std::fs::read_to_string(&theirs).expect("read"), "patched");
        drop(copy);
        assert!(!at.exists(), "the copy is removed");
        assert_eq!(std::fs::read_to_string(d.path().join("venv/lib/site.py")).expect("read"), "site\n");
        assert_eq!(std::fs::read_to_string(d.path().join("new.py")).expect("read"), "y = 1\n");
    }
}
