//! Work is not lost between implementer steps (`snapshot-loss`).
//!
//! Each implementer step of the code phase that ends with a change — a plan task, a repair
//! round — is a boundary: the whole tree (tracked and untracked, outside the spec and state
//! directories) is written as a git tree through a temporary index (`work_git::snapshot`) and
//! kept as a snapshot commit, chained to the run's earlier ones and held by one ref per run
//! (`refs/work/loop-run/<run>`, in the git directory: never a change in the tree). Its ids are in
//! `loop-run.json`, so a resumed run compares with the boundary an earlier invocation took.
//!
//! At the next boundary the engine compares (`work_git::loss`), from the code phase's base:
//! after a plan task, every line an earlier step added that is gone and every path an earlier
//! step changed that is back at the base or gone; after a repair round (whose brief is to change
//! earlier work), the paths only. What the step's own text plans is not counted — a line the
//! task quotes, a file or path it names with a word that removes it (delete, move, replace …) —
//! the rule `work implement` uses (`work_git::loss::plans_removal`).
//! Anything else stops the run BLOCKED `snapshot-loss`, naming the lines and paths and the
//! snapshot to recover them from. A person who adjudicates the loss as intended accepts it
//! with `--resume --approve`: the step's tree becomes the boundary, the step is done.

use super::{Driver, HumanInput};
use crate::Report;
use crate::state::{Boundary, LostWork};
use serde_json::{Value, json};
use work_git::loss::Loss;
use work_loop::LoopError;
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

/// The stop reason.
pub const LOSS: &str = StopReason::SnapshotLoss.as_str();

impl Driver {
    /// The ref that keeps this run's boundary snapshots.
    fn snapshot_ref(&self) -> String {
        let id: String = self
            .rs
            .run_id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
            .collect();
        format!("refs/work/loop-run/{id}")
    }

    /// One implementer step: the dispatch (see `Driver::implement`), then its boundary — or,
    /// when a person accepted the loss this step caused, neither (see [`Driver::accept_loss`]).
    /// `Some` is the stop.
    pub(super) async fn implement_step(
        &mut self,
        label: &str,
        context: Value,
        brief: impl Fn(Option<&str>) -> String,
        text: &str,
        per_line: bool,
    ) -> Result<Option<Report>, LoopError> {
        if self.accept_loss(label)? {
            return Ok(None);
        }
        if let Err((code, msg)) = self.implement(label, context, brief).await? {
            return Ok(Some(self.blocked(&code, msg)));
        }
        self.boundary(label, text, per_line)
    }

    /// A boundary after the implementer step `label` ended with a change: the tree is compared
    /// with the last boundary (see the module documentation), then recorded (the caller saves
    /// the state). `text` is the step's own text (the task, or the repair's detail and
    /// findings); `per_line`: lost lines of paths still changed count too.
    fn boundary(&mut self, label: &str, text: &str, per_line: bool) -> Result<Option<Report>, LoopError> {
        self.rs.lost_work = None;
        let excludes = self.review_excludes();
        let fail = |what: &str, e: work_git::GitError| {
            format!(
                "{label}: the boundary snapshot could not be {what} ({e}); work lost since the last boundary cannot be ruled out: inspect the tree, then resume"
            )
        };
        let tree = match self.git.snapshot_tree(&excludes) {
            Ok(t) => t,
            Err(e) => return Ok(Some(self.blocked(LOSS, fail("taken", e)))),
        };
        if let Some(prev) = self.rs.boundary.clone() {
            let loss = self.git.tree_of(&self.review_base()).and_then(|base| {
                self.git.unplanned_loss(&self.run.root, [&base, &prev.tree, &tree], text, &excludes, per_line)
            });
            match loss {
                Ok(l) if l.is_empty() => {}
                Ok(l) => return self.lost(&prev, label, l).map(Some),
                Err(e) => return Ok(Some(self.blocked(LOSS, fail("compared with the last one", e)))),
            }
        }
        if let Err(e) = self.record_boundary(label, tree) {
            return Ok(Some(self.blocked(LOSS, fail("kept", e))));
        }
        Ok(None)
    }

    /// Keeps `tree` as the boundary after `label`: a snapshot commit chained to the last one,
    /// the run's ref moved to it (the caller saves the state).
    fn record_boundary(&mut self, label: &str, tree: String) -> Result<(), work_git::GitError> {
        let message = format!("work: loop run {} after {label}", self.rs.run_id);
        let earlier = self.rs.boundary.as_ref().map(|b| b.commit.clone());
        let commit = self.git.snapshot_commit_after(&tree, &message, earlier.as_deref())?;
        self.git.keep_ref(&self.snapshot_ref(), &commit)?;
        self.run.emit(Event::Snapshot {
            boundary: json!(label),
            sha: json!(commit),
            paths: None,
            tree: Some(json!(tree)),
            reference: Some(json!(self.snapshot_ref())),
        });
        self.rs.boundary = Some(Boundary { label: label.into(), tree, commit });
        Ok(())
    }

    /// `--approve` at a `snapshot-loss` stop for the step `label`: a person compared the tree
    /// with the snapshot and accepts the loss. The tree as the step left it becomes the
    /// boundary, and the step counts as done without another dispatch. `Ok(false)` when no
    /// accepted loss is waiting for this step.
    fn accept_loss(&mut self, label: &str) -> Result<bool, LoopError> {
        if self.human != HumanInput::Approve || self.rs.lost_work.as_ref().is_none_or(|l| l.to != label) {
            return Ok(false);
        }
        self.human = HumanInput::None;
        let lost = self.rs.lost_work.take();
        let tree = self.git.snapshot_tree(&self.review_excludes()).map_err(|e| LoopError::bad(e.to_string()))?;
        self.record_boundary(label, tree).map_err(|e| LoopError::bad(e.to_string()))?;
        self.run.emit(Event::SnapshotLossAccepted { lost: fields_of(&lost) });
        self.run.progress(&format!(
            "loop: {label}: a person accepted the work it lost (--approve); its tree is the new boundary"
        ));
        self.rs.in_flight = None;
        self.save()?;
        Ok(true)
    }

    /// The stop for `loss` at the boundary after `label`, recorded in the state.
    fn lost(&mut self, prev: &Boundary, label: &str, loss: Loss) -> Result<Report, LoopError> {
        let sha = prev.commit.clone();
        let recovery: Vec<String> = loss.all_paths().iter().map(|p| format!("git show {sha}:{p}")).collect();
        let message = format!(
            "{label} lost work of an earlier step (there at the boundary after {}) and its text does not say so: {}; recover from snapshot {sha} (`{}`, kept by ref {}); adjudicate against the snapshot: restore the work and resume (the step runs again), or accept the loss with --resume --approve",
            prev.label,
            loss.describe(),
            recovery.first().cloned().unwrap_or_default(),
            self.snapshot_ref()
        );
        let lost = LostWork {
            from: prev.label.clone(),
            to: label.into(),
            snapshot: sha,
            snapshot_ref: self.snapshot_ref(),
            lines: loss.lines,
            paths: loss.paths,
            recovery,
        };
        self.run.emit(Event::SnapshotLoss { lost: fields_of(&lost) });
        self.rs.lost_work = Some(lost);
        self.save()?;
        Ok(self.blocked(LOSS, message))
    }
}

/// Every string of a JSON value (a finding's title, fix, file …), one a line: the text a repair
/// round's planned removals are read from.
pub(super) fn strings_of(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(a) => a.iter().for_each(|x| strings_of(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings_of(x, out)),
        _ => {}
    }
}

/// The fields `lost` is written as (none when it is absent).
fn fields_of(lost: &impl serde::Serialize) -> serde_json::Map<String, Value> {
    match serde_json::to_value(lost) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}
