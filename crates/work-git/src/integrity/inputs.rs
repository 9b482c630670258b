//! What a [`Seal`] was read from, by the files' metadata: while none of them changed (and the
//! tree around them did not), reading the seal again gives the same seal, so a caller that
//! looks many times (exhaust, before and after every wave) reads it again only when something
//! it rests on moved. Reading it costs four gits, and each is a fork of a process whose size
//! grows with the run.
//!
//! The inputs are every file the seal reads: the index (its flags), every configuration file
//! git reads (system, global, local, worktree), the git directory's `commondir` (where git finds
//! its common files: rewritten, git reads another config, hooks and info), the info files and hooks, the excludes and
//! attributes files, and each `.gitattributes` and sealed `.gitignore`. A new `.gitignore` or
//! `.gitattributes` in the tree is a change of the tree, which the caller checks
//! ([`Git::reread_seal`]'s `tree_unchanged`). The seal is read again whatever the inputs say when
//! - the configuration includes other files (`include.*`, `includeIf.*`): they may be anywhere;
//! - an input changed within [`RACY`] of its reading: a second write in the same timestamp tick
//!   would leave its metadata as it was (git's own "racy" entries).
//!
//! Each input is recorded by kind, size, mode, inode, mtime and ctime, of the path itself and
//! of what a symlink leads to. A process cannot set a ctime.

use super::Seal;
use crate::Git;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

/// An input changed this recently is not trusted to show its next change.
#[cfg(not(test))]
pub const RACY: Duration = Duration::from_secs(2);
/// Shorter in unit tests, which wait it out between changes (timestamps tick in milliseconds).
#[cfg(test)]
pub const RACY: Duration = Duration::from_millis(200);

/// One file's metadata: mode (with its kind), size, inode, mtime and ctime (ns).
type Stamp = (u32, u64, u64, i128, i128);

fn stamp(meta: &std::fs::Metadata) -> Stamp {
    (
        meta.mode(),
        meta.size(),
        meta.ino(),
        i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
    )
}

/// The path itself and what it leads to (`None` where absent).
type Stamps = (Option<Stamp>, Option<Stamp>);

fn stamps(path: &Path) -> Stamps {
    (std::fs::symlink_metadata(path).ok().map(|m| stamp(&m)), std::fs::metadata(path).ok().map(|m| stamp(&m)))
}

/// The inputs of one reading of a seal, with their metadata at that reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Inputs {
    stamps: Vec<(PathBuf, Stamps)>,
}

impl Inputs {
    /// Stamps `paths` (and the configuration files git reads wherever it runs); `None` when the
    /// seal cannot be trusted to stay the same (an include, or a racy input).
    /// A reading that `started` before its first git ran.
    pub(super) fn read(git: &Git, seal: &Seal, mut paths: Vec<PathBuf>, started: SystemTime) -> Option<Inputs> {
        if seal.config.keys().any(|k| k.starts_with("include.") || k.starts_with("includeif.")) {
            return None;
        }
        paths.extend(config_files(git));
        paths.sort();
        paths.dedup();
        let mut out = Vec::with_capacity(paths.len());
        for path in paths {
            let s = stamps(&path);
            for (_, _, _, mtime, ctime) in [s.0, s.1].into_iter().flatten() {
                // Changed since (or just before) the reading began: what was read may be older.
                if racy(started, mtime) || racy(started, ctime) {
                    return None;
                }
            }
            out.push((path, s));
        }
        Some(Inputs { stamps: out })
    }

    /// True while every input has the metadata it had at the reading.
    pub(super) fn unchanged(&self) -> bool {
        let now = work_runtime::clock::file_time_now();
        self.stamps.iter().all(|(path, was)| {
            let s = stamps(path);
            s == *was && [s.0, s.1].into_iter().flatten().all(|(_, _, _, m, c)| !racy(now, m) && !racy(now, c))
        })
    }
}

/// True when a timestamp (ns after the epoch) lies within [`RACY`] before `now`, or after it.
fn racy(now: SystemTime, ns: i128) -> bool {
    let now_ns = now.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0);
    ns + RACY.as_nanos() as i128 >= now_ns
}

/// The configuration files git reads outside the repository: the system file (from git's
/// install prefix, and `/etc/gitconfig`), the global ones (`~/.gitconfig`,
/// `$XDG_CONFIG_HOME/git/config`), or the files `GIT_CONFIG_SYSTEM` / `GIT_CONFIG_GLOBAL` name.
/// Read once a process: `work`'s environment does not change while it runs.
fn config_files(git: &Git) -> Vec<PathBuf> {
    static FILES: OnceLock<Vec<PathBuf>> = OnceLock::new();
    FILES
        .get_or_init(|| {
            let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
            let mut files = Vec::new();
            match var("GIT_CONFIG_SYSTEM") {
                Some(p) => files.push(p),
                None => {
                    files.push(PathBuf::from("/etc/gitconfig"));
                    if let Ok(exec) = git.run(&["--exec-path"]) {
                        // <prefix>/lib/git-core or <prefix>/libexec/git-core.
                        let exec = PathBuf::from(exec.trim());
                        if let Some(prefix) = exec.parent().and_then(Path::parent) {
                            files.push(prefix.join("etc/gitconfig"));
                        }
                    }
                }
            }
            match var("GIT_CONFIG_GLOBAL") {
                Some(p) => files.push(p),
                None => {
                    if let Some(home) = var("HOME") {
                        files.push(home.join(".gitconfig"));
                    }
                    files.extend(super::xdg_git_file("config"));
                }
            }
            files.extend(var("GIT_CONFIG"));
            files
        })
        .clone()
}
