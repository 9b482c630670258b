//! git's view of the tree, sealed when the code phase begins (see `work_git::integrity`): an
//! index flag (`skip-worktree`, `assume-unchanged`), an exclude line, a `.gitattributes`, a
//! hook or a diff driver an implementer sets hides its change from `git diff` — the diff the
//! reviewers read — without touching a file. The seal is kept in `loop-run.json`, so a resumed
//! run compares with the first run's seal, and it is compared before every gate run: a change
//! stops the run BLOCKED `git-tampered`, naming it, before any reviewer sees a diff that hides
//! something.

use work_git::Git;
use work_git::integrity::{Seal, describe};
use work_runtime::outcome::StopReason;

/// The stop reason.
pub const TAMPERED: &str = StopReason::GitTampered.as_str();

/// Why the run stops `git-tampered` when git's view changed since `seal`; `None` otherwise. A
/// git that fails reading the view again is an error of the run, never a change.
pub fn tampered(git: &Git, seal: &Seal) -> Result<Option<String>, work_git::GitError> {
    let changes = seal.changes(&git.seal()?);
    if changes.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "the implementation changed git's view of the tree ({}); an index flag, an exclude line, an attribute, a hook or a driver hides a change from the diff the reviewers read: undo it (e.g. `git update-index --no-skip-worktree <path>`, `git update-index --no-assume-unchanged <path>`), then resume",
        describe(&changes)
    )))
}
