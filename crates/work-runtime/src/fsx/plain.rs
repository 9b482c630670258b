//! Plain file writes and removals: the one place outside the state-file functions of
//! [`crate::fsx`] where the product creates, writes, links or removes a file.
//!
//! Each function is exactly the `std` call it names (same permissions, same symlink handling,
//! no fsync, no digest): for files that are not state — a work tree the engine builds, a
//! backend's scratch copy, a lock file, a log opened for appending. State files go through
//! [`crate::fsx::write_atomic`] and [`crate::fsx::remove_state`] instead. Clippy's
//! `disallowed-methods` bans the `std` calls outside work-runtime, so every write or removal is
//! found here or in the rest of `fsx`.
#![allow(clippy::disallowed_methods, reason = "the chokepoint for plain file writes and removals")]

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// Writes `contents` to `path` in place (`std::fs::write`: created or truncated, not atomic).
pub fn write(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> io::Result<()> {
    std::fs::write(path, contents)
}

/// Removes a file or a symlink (never followed).
pub fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    std::fs::remove_file(path)
}

/// Renames `from` to `to` (`std::fs::rename`).
pub fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    std::fs::rename(from, to)
}

/// Removes an empty directory.
pub fn remove_dir(path: impl AsRef<Path>) -> io::Result<()> {
    std::fs::remove_dir(path)
}

/// Removes a directory and everything below it (symlinks inside are removed, not followed).
pub fn remove_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    std::fs::remove_dir_all(path)
}

/// Copies a file's content and permissions; returns the bytes copied.
pub fn copy(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<u64> {
    std::fs::copy(from, to)
}

/// Makes `to` a hard link to `from`.
pub fn hard_link(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    std::fs::hard_link(from, to)
}

/// Makes `link` a symlink whose target is `target` (taken as is, never resolved).
pub fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// Opens `path` with `opts` (a lock file, or a log opened for appending).
pub fn open(opts: &OpenOptions, path: impl AsRef<Path>) -> io::Result<File> {
    opts.open(path)
}
