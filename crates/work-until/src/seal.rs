//! git's view of the tree, sealed for a session (see `work_git::integrity`): an index flag,
//! an exclude line, a `.gitattributes`, a hook or a driver a worker sets hides its change from
//! `git status` and `git diff` without touching a file (the iteration ground truth is measured by
//! hashing, but the seal also names what a worker did to git).
//! The seal is taken the first time a session runs and kept beside `meta.md`, so a resumed
//! session compares with the same seal.

use crate::session::{SEAL_FILE, Session, SessionError};
use crate::workflow::LoopEnv;
use serde_json::json;
use work_git::Git;
use work_git::integrity::{Seal, describe};
use work_runtime::events::Event;

/// The session's seal: the one kept, else a new one (kept for the next run).
/// The kept seal is refused when changed or removed since `work` wrote it (a seal taken again
/// would start from the git view the worker left).
pub(crate) fn session_seal(
    env: &LoopEnv<'_>,
    session: &Session,
    git: Option<&Git>,
) -> Result<Option<Seal>, SessionError> {
    let Some(git) = git else { return Ok(None) };
    let path = session.dir.join(SEAL_FILE);
    let refused = |e: String| SessionError::Io { action: "read", path: path.display().to_string(), reason: e };
    if let Some(text) = work_runtime::fsx::read_kept(&path).map_err(|e| refused(e.to_string()))? {
        return serde_json::from_str(&text).map(Some).map_err(|e| refused(e.to_string()));
    }
    let Ok(mut seal) = git.seal() else { return Ok(None) };
    // A `.gitignore` the goal names is the work.
    let m = &session.meta;
    seal.allow_named_by(&format!("{}\n{}\n{}", m.until, m.goal, m.instructions));
    if let Err(e) = env.run.write_state(&path, &seal) {
        env.run.emit(Event::UntilSealUnsaved { error: e.to_string() });
    }
    Ok(Some(seal))
}

/// Why the session stops BLOCKED `git-tampered`, when git's view changed since the seal; a
/// git that fails reading it again is an error of the run, not a change.
pub(crate) fn tampered(
    env: &LoopEnv<'_>,
    seal: Option<&Seal>,
    git: Option<&Git>,
) -> Result<Option<String>, work_git::GitError> {
    let (Some(seal), Some(git)) = (seal, git) else { return Ok(None) };
    let changes = seal.changes(&git.seal()?);
    if changes.is_empty() {
        return Ok(None);
    }
    env.run.emit(Event::UntilGitTampered { changes: json!(changes) });
    Ok(Some(format!(
        "git-tampered: the worker changed git's view of the tree ({}); an index flag, an exclude line, an attribute, a hook or a driver hides a change from the ground truth: undo it (e.g. `git update-index --no-skip-worktree <path>`, `git update-index --no-assume-unchanged <path>`)",
        describe(&changes)
    )))
}
