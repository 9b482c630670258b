//! The goal's check surface, frozen once: before the goal's first implementation dispatch the
//! engine records what judges it (`work_git::surface`: the scenarios' check scripts, the
//! configuration, the test tree, and the suites' own reports) in `state.json`, with its
//! digest. Every later run of the goal — a resume after a kill, a rerun after a stop — first
//! compares the tree with that freeze, so a check changed between runs (by an interrupted
//! implementer, a process it left, or a person) stops the run BLOCKED `check-tampered` naming
//! the path, before any scenario runs; it never becomes the next run's baseline.
//!
//! The goal file is frozen with it: what judges each criterion (its kind, scenario, observable
//! and teardown) is kept in `state.json`, and a later run whose `GOAL.toml` removed a frozen
//! criterion or changed what judges it stops BLOCKED `check-tampered` naming each, before any
//! scenario runs. Adding criteria is allowed (each is frozen at the next freeze); `--fresh`
//! starts the goal over on purpose.

use super::{Outcome, Runner, StopReason, UltraError};
use crate::state::{FrozenCriterion, GoalStatus, surface_digest};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use work_git::surface::{self, CheckSurface, Named, TestEdits};
use work_runtime::events::Event;

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
        self.env.run.emit(Event::CheckSurfaceChanged {
            goal_id: Some(json!(self.goal.id)),
            changes: Some(json!(what)),
            restored: None,
        });
        let detail = format!(
            "what judges the goal changed since its first run froze it: {what}. A check changed between runs (an interrupted implementer, a process it left, a person) is never the new baseline: restore it (git diff shows the change) and run the goal again, or, if the change is meant, start the goal over with `work ultra {} --fresh`",
            self.env.goal_file
        );
        self.stop(GoalStatus::Blocked, StopReason::CheckTampered, detail, 0, false).map(Some)
    }

    /// The stop when the goal file removed a frozen criterion or changed what judges one;
    /// `None` when every frozen criterion is in the goal as it was frozen (new ones may be).
    pub(super) fn goal_changed_between_runs(&mut self) -> Result<Option<Outcome>, UltraError> {
        let now: BTreeMap<&str, FrozenCriterion> =
            self.goal.criteria.iter().map(|c| (c.id.as_str(), FrozenCriterion::of(c))).collect();
        let mut changes = Vec::new();
        for (id, was) in &self.state.frozen_criteria {
            match now.get(id.as_str()) {
                None => changes.push(format!("criterion `{id}` removed")),
                Some(c) => {
                    let what = was.changed_in(c);
                    if !what.is_empty() {
                        changes.push(format!("criterion `{id}`: {} changed", what.join(", ")));
                    }
                }
            }
        }
        if changes.is_empty() {
            return Ok(None);
        }
        let what = changes.join("; ");
        self.env.run.emit(Event::GoalChanged { goal_id: json!(self.goal.id), changes: json!(changes) });
        let detail = format!(
            "the goal changed since its first run froze it: {what}. A frozen criterion is never removed or redefined between runs (a weaker check would judge the work): restore `{0}`, add a criterion with a new id instead (adding is allowed), or, if the change is meant, start the goal over with `work ultra {0} --fresh`",
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
        let mut frozen = match self.state.check_surface.clone() {
            Some(f) => f,
            None => {
                // The tree the checks are frozen in: what the final pass writes them back from.
                let mut f = now.clone();
                let git = work_git::Git::new(root);
                if git.is_repo() {
                    f.record_tree(&git, &self.env.run.state_exclude());
                }
                f
            }
        };
        let copy = self.check_copy();
        if let Ok(dir) = super::copy::dir_of(&copy, root) {
            frozen.record_suites(&self.env.run.spawner, dir, scenarios, longest).await;
        }
        drop(copy);
        let mut changed = false;
        for c in &self.goal.criteria {
            if !self.state.frozen_criteria.contains_key(&c.id) {
                self.state.frozen_criteria.insert(c.id.clone(), FrozenCriterion::of(c));
                changed = true;
            }
        }
        if self.state.check_surface.as_ref() != Some(&frozen) {
            self.state.check_surface_sha256 = Some(surface_digest(&frozen));
            self.state.check_surface = Some(frozen.clone());
            changed = true;
        }
        if changed {
            self.save()?;
        }
        Ok((now, frozen))
    }
}
