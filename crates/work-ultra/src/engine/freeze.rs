//! The goal's check surface, frozen once: before the goal's first implementation dispatch the
//! engine records what judges it (`work_git::surface`: the scenarios' check scripts, the
//! configuration, the test tree, and the suites' own reports) in `state.json`, with its
//! digest. Every later run of the goal — a resume after a kill, a rerun after a stop — first
//! compares the tree with that freeze, so a check changed between runs (by an interrupted
//! implementer, a process it left, or a person) stops the run BLOCKED `check-tampered` naming
//! the path, before any scenario runs; it never becomes the next run's baseline.

use super::{Outcome, Runner, StopReason, UltraError};
use crate::state::{GoalStatus, surface_digest};
use std::path::Path;
use std::time::Duration;
use work_git::surface::{self, CheckSurface, Named, TestEdits};

impl Runner<'_, '_> {
    /// The stop when the tree no longer matches the goal's frozen check surface (an earlier
    /// run froze it); `None` when it matches or nothing is frozen yet.
    pub(super) fn changed_between_runs(&mut self, root: &Path) -> Result<Option<Outcome>, UltraError> {
        let Some(frozen) = &self.state.check_surface else { return Ok(None) };
        let changes = frozen.changes(root, TestEdits::Add);
        if changes.is_empty() {
            return Ok(None);
        }
        let what = surface::describe(&changes);
        self.env.run.emit("check-surface.changed", serde_json::json!({"goal_id": self.goal.id, "changes": what}));
        let detail = format!(
            "what judges the goal changed since its first run froze it: {what}. A check changed between runs (an interrupted implementer, a process it left, a person) is never the new baseline: restore it (git diff shows the change) and run the goal again, or, if the change is meant, start the goal over with `work ultra {} --fresh`",
            self.env.goal_file
        );
        self.stop(GoalStatus::Blocked, StopReason::CheckTampered, detail, 0, false).map(Some)
    }

    /// This run's check surface (what the implementer's changes are compared with after every
    /// attempt) and the goal's frozen one (whose suite reports the final pass is compared
    /// with). The first run to get here freezes the goal's and keeps it in `state.json`; later
    /// runs only add the suites of criteria that are new since.
    pub(super) async fn freeze(
        &mut self,
        root: &Path,
        checks: &[String],
        scenarios: &[&str],
        longest: Option<Duration>,
    ) -> Result<(CheckSurface, CheckSurface), UltraError> {
        let mut now = CheckSurface::freeze(root, checks, Named::CheckLike);
        // A script only a criterion names is the check; one the objective names is the work.
        now.pin_unnamed_by(root, checks, &self.goal.objective);
        let mut frozen = self.state.check_surface.clone().unwrap_or_else(|| now.clone());
        frozen.record_suites(&self.env.run.spawner, root, scenarios, longest).await;
        if self.state.check_surface.as_ref() != Some(&frozen) {
            self.state.check_surface_sha256 = Some(surface_digest(&frozen));
            self.state.check_surface = Some(frozen.clone());
            self.save()?;
        }
        Ok((now, frozen))
    }
}
