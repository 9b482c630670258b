//! A state write that failed (a full disk, an I/O error): the run stops at once, with one line
//! naming the file (exit 1), and the same command continues it once the disk has room again.
//! A git the engine ran to judge the run that failed ends it the same way ([`RunError::Git`]).

use std::io;
use std::path::{Path, PathBuf};

/// A state file of the iteration (`progress.json`, its log, `stats.json`, `BLOCKED.md`) could
/// not be written.
#[derive(Debug, thiserror::Error)]
#[error("write `{}`: {source}", path.display())]
pub struct StateWriteError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: io::Error,
}

impl StateWriteError {
    /// The error of a failed write of `path`, for `map_err`.
    pub fn at(path: &Path) -> impl FnOnce(io::Error) -> StateWriteError + '_ {
        move |source| StateWriteError { path: path.to_path_buf(), source }
    }
}

/// Why a run ended without a report: an error of the engine's, never a verdict about an agent.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A state file could not be written.
    #[error(transparent)]
    State(#[from] StateWriteError),
    /// A git the engine ran to judge the run failed (exit 128, killed): the run cannot tell
    /// what the agent did, so it tells nothing.
    #[error(transparent)]
    Git(#[from] work_git::GitError),
}
