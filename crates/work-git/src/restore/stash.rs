//! The files a run added to the test tree, moved aside for the rerun with the frozen checks
//! restored and put back afterwards.
//!
//! Each file (or symlink: moved as itself, never followed) is renamed into a directory of its
//! own in the git directory (`work-rerun-hidden-<pid>-<n>/<i>`): nothing is copied, ignored
//! files move like any, and the pending record names the directory, so a `work` killed
//! mid-rerun leaves them to the next run that locks the tree. No rename goes through a
//! symlinked directory of the working tree.

use crate::{Git, GitError};
use std::io;
use std::path::{Path, PathBuf};

impl Git {
    /// A new, empty directory in the git directory to move the added files into.
    pub(super) fn new_stash(&self) -> Result<PathBuf, GitError> {
        for n in 0..64u32 {
            let name = format!("work-rerun-hidden-{}-{n}", std::process::id());
            let rel = self.run(&["rev-parse", "--git-path", &name])?;
            let path = PathBuf::from(rel.trim());
            let path = if path.is_absolute() { path } else { self.root.join(path) };
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(path),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(GitError::Spawn(format!("creating {}: {e}", path.display()))),
            }
        }
        Err(GitError::Spawn("no free directory in the git directory to move the added files into".into()))
    }
}

/// `root/rel` when no directory on the way is a symlink (it may lead out of the repository)
/// and `rel` is plain and relative.
fn inside(root: &Path, rel: &str) -> io::Result<PathBuf> {
    if !work_runtime::fsx::is_plain_relative(Path::new(rel)) {
        return Err(io::Error::other(format!("`{rel}` is not a plain relative path")));
    }
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(io::Error::other(format!("{} is a symlink", at.display())));
            }
            _ => {}
        }
    }
    Ok(root.join(rel))
}

/// Moves each of `paths` (relative to `root`) to `stash/<index>`; one already gone is skipped.
pub(super) fn move_aside(root: &Path, stash: &Path, paths: &[String]) -> io::Result<()> {
    for (i, rel) in paths.iter().enumerate() {
        let from = inside(root, rel)?;
        match std::fs::rename(&from, stash.join(i.to_string())) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => other.map_err(|e| io::Error::other(format!("moving {rel} aside: {e}")))?,
        }
    }
    Ok(())
}

/// Leaves an empty file at each of `emptied` that [`move_aside`] moved from `paths` (index `i`
/// of `paths` is `stash/<i>`): a check that names it still finds it. [`put_back`] renames the
/// agent's file over it.
pub(super) fn leave_empty(root: &Path, stash: &Path, paths: &[String], emptied: &[String]) -> io::Result<()> {
    for (i, rel) in paths.iter().enumerate() {
        if emptied.contains(rel) && std::fs::symlink_metadata(stash.join(i.to_string())).is_ok() {
            std::fs::write(inside(root, rel)?, "").map_err(|e| io::Error::other(format!("emptying {rel}: {e}")))?;
        }
    }
    Ok(())
}

/// Puts every file [`move_aside`] moved back where it was (over anything the rerun left
/// there), then removes the emptied stash directory. Tries every file; the first error.
pub(super) fn put_back(root: &Path, stash: &Path, paths: &[String]) -> io::Result<()> {
    let mut first = None;
    for (i, rel) in paths.iter().enumerate() {
        let from = stash.join(i.to_string());
        if std::fs::symlink_metadata(&from).is_err() {
            continue;
        }
        let to = inside(root, rel).and_then(|to| {
            if let Some(dir) = to.parent() {
                std::fs::create_dir_all(dir)?;
            }
            Ok(to)
        });
        if let Err(e) = to.and_then(|to| std::fs::rename(&from, to)) {
            first.get_or_insert(io::Error::other(format!("putting {rel} back: {e}")));
        }
    }
    if first.is_none() {
        match std::fs::remove_dir(stash) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => first = Some(e),
            _ => {}
        }
    }
    first.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    #[test]
    fn added_files_move_aside_and_back_and_never_through_a_symlinked_directory() {
        let (d, outside) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
        let (root, stash) = (d.path().join("repo"), d.path().join("stash"));
        std::fs::create_dir_all(root.join("tests/sub")).expect("mkdir");
        std::fs::create_dir_all(&stash).expect("mkdir");
        std::fs::write(root.join("tests/test_zz.py"), "import lib\n").expect("write");
        std::fs::write(root.join("tests/sub/__init__.py"), "x\n").expect("write");
        std::os::unix::fs::symlink("test_zz.py", root.join("tests/link.py")).expect("symlink");
        let paths: Vec<String> =
            ["tests/test_zz.py", "tests/sub/__init__.py", "tests/link.py", "tests/gone.py"].map(String::from).into();
        super::move_aside(&root, &stash, &paths).expect("aside");
        assert!(!root.join("tests/test_zz.py").exists() && !root.join("tests/sub/__init__.py").exists());
        assert!(std::fs::symlink_metadata(root.join("tests/link.py")).is_err());
        // The rerun leaves a file where one was moved from: the agent's version wins.
        std::fs::write(root.join("tests/test_zz.py"), "rerun's\n").expect("write");
        super::put_back(&root, &stash, &paths).expect("back");
        assert_eq!(std::fs::read_to_string(root.join("tests/test_zz.py")).expect("read"), "import lib\n");
        assert!(root.join("tests/sub/__init__.py").exists() && root.join("tests/link.py").is_symlink());
        assert!(!stash.exists(), "the stash is removed once empty");
        // A directory on the way replaced by a symlink: nothing moves through it.
        std::fs::create_dir_all(&stash).expect("mkdir");
        std::fs::rename(root.join("tests"), outside.path().join("t")).expect("mv");
        std::os::unix::fs::symlink(outside.path().join("t"), root.join("tests")).expect("symlink");
        assert!(super::move_aside(&root, &stash, &paths).is_err());
        assert!(outside.path().join("t/test_zz.py").exists());
    }
}
