//! The drafter writes the spec and the plan, nothing else (`drafter-wrote-tree`).
//!
//! The drafter is the one write-access role that runs before the code phase, so before the
//! check surface is frozen and git's view sealed: a test it weakened, or an index flag it set,
//! would be frozen as the baseline. The whole tree outside the spec and state directories is
//! hashed through a temporary index (so no index flag hides a change) before and after its
//! dispatch, and git's view is sealed across it; any difference stops the run BLOCKED, naming
//! the paths, before its drafts are read.

use super::Driver;
use crate::Report;
use work_git::integrity::{Seal, describe};

/// The stop reason.
pub const DRAFTER_WROTE_TREE: &str = "drafter-wrote-tree";

/// The tree and git's view before a drafter dispatch.
pub(super) struct DraftGuard {
    tree: Result<String, work_git::GitError>,
    seal: Result<Seal, work_git::GitError>,
}

impl Driver {
    /// Takes the tree outside the spec and state directories, and git's view, now.
    pub(super) fn draft_guard(&self) -> DraftGuard {
        DraftGuard { tree: self.git.snapshot_tree(&self.review_excludes()), seal: self.git.seal() }
    }

    /// The stop, when the drafter changed anything outside the spec directory (or it cannot be
    /// told: fail closed).
    pub(super) fn drafted_outside(&self, before: DraftGuard) -> Option<Report> {
        let mut changed = Vec::new();
        match self.git.snapshot_changes(&before.tree, &self.git.snapshot_tree(&self.review_excludes())) {
            Ok(names) => changed.extend(names),
            Err(why) => changed.push(format!("({why})")),
        }
        match (before.seal, self.git.seal()) {
            (Ok(a), Ok(b)) => {
                let c = a.changes(&b);
                if !c.is_empty() {
                    changed.push(format!("git's view: {}", describe(&c)));
                }
            }
            (Err(e), _) | (_, Err(e)) => changed.push(format!("(git's view could not be read: {e})")),
        }
        if changed.is_empty() {
            return None;
        }
        Some(self.blocked(
            DRAFTER_WROTE_TREE,
            format!(
                "the drafter changed the tree outside `{}` ({}); it writes only spec.md and plan.md there, and a change made before the code phase would be frozen as the baseline: undo it, then resume",
                self.sd.rel(),
                changed.join(", ")
            ),
        ))
    }
}
