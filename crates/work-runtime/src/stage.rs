//! State directories that appear whole or not at all.
//!
//! A workflow that creates a directory of several state files (a `work until` session)
//! builds it under a staging name beside its final place ([`staging_path`]), writes every
//! file there with [`crate::fsx::write_atomic`], then [`publish_dir`]s it: one `rename(2)`
//! that refuses to replace an existing directory. A crash leaves either the finished
//! directory or a staging directory (a name starting with `.`, which readers skip and the
//! next creation of the same id removes with [`discard_dir`]).

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

/// The staging directory for `dest`: `.<name>.staging` in the same parent.
pub fn staging_path(dest: &Path) -> PathBuf {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "dir".into());
    dest.with_file_name(format!(".{name}.staging"))
}

/// Removes a (staging) directory and everything in it; a missing one is not an error.
pub fn discard_dir(path: &Path) -> io::Result<()> {
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Renames `staging` to `dest` atomically, refusing (`AlreadyExists`) when `dest` exists,
/// then fsyncs the parent so the new name is durable.
pub fn publish_dir(staging: &Path, dest: &Path) -> io::Result<()> {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    crate::fsx::digests::before_move_dir(staging, dest)?;
    crate::faults::state_write()?;
    renameat2(AT_FDCWD, staging, AT_FDCWD, dest, RenameFlags::RENAME_NOREPLACE).map_err(io::Error::from)?;
    if let Some(parent) = dest.parent()
        && let Ok(d) = File::open(parent)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_is_whole_and_never_replaces() {
        let d = tempfile::tempdir().expect("tempdir");
        let dest = d.path().join("s");
        let st = staging_path(&dest);
        assert_eq!(st, d.path().join(".s.staging"));
        crate::fsx::write_atomic(&st.join("meta.md"), b"m").expect("write");
        publish_dir(&st, &dest).expect("publish");
        assert!(dest.join("meta.md").exists() && !st.exists());
        crate::fsx::write_atomic(&st.join("meta.md"), b"other").expect("write");
        let e = publish_dir(&st, &dest).expect_err("dest exists");
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        discard_dir(&st).expect("discard");
        discard_dir(&st).expect("a missing one is fine");
        assert_eq!(fs::read_to_string(dest.join("meta.md")).expect("read"), "m");
    }
}
