//! Per-task progress of a standard run, so that a killed `work implement … --iter-id X` run
//! started again continues where it stopped (`<state>/iterations/<iter-id>/progress.json`).
//!
//! The record is written atomically at every task boundary: when a task starts (its id and
//! the tree's diff fingerprint at its start) and when it ends (its outcome, the boundary
//! snapshot and the fingerprint after it). On the next run with the same iteration id:
//!
//! - the dirty tree is the run's own, and accepted by the preflight, iff HEAD is still the
//!   recorded HEAD and either the tree's fingerprint is the one recorded last, or a task was
//!   in progress (its start state plus its own edits: the run was killed inside it);
//! - every DONE task is taken from the record and never dispatched again;
//! - the in-progress task is redone on top of its own edits, its change measured from the
//!   recorded start fingerprint;
//! - the record of a run that ended (any status) is marked finished as the run's last write:
//!   a later run of the same iteration starts afresh, with the preflight's usual dirty check;
//! - the snapshot guard compares the next boundary with the last recorded snapshot, and the
//!   report shows the original preflight and every boundary snapshot.

use crate::report::TaskOutcome;
use crate::tree::{Preflight, Snapshot, Tree};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The progress record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The iteration id.
    pub iter_id: String,
    /// HEAD when the first run of the iteration started.
    pub head: Option<String>,
    /// The first run's preflight (the tree before any task).
    pub preflight: Preflight,
    /// The tasks that ended, in order, with their outcomes.
    pub ended: Vec<TaskOutcome>,
    /// The boundary snapshots taken so far.
    pub snapshots: Vec<Snapshot>,
    /// The tree's diff fingerprint at the last boundary (or at the start).
    pub tree: Option<String>,
    /// The task started and not ended, with the fingerprint at its start.
    pub in_progress: Option<InProgress>,
    /// The run ended (whatever its status): a later run of the iteration starts afresh.
    #[serde(default)]
    pub finished: bool,
    /// What judges the iteration, frozen before its first task (a resume compares with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_surface: Option<work_git::surface::CheckSurface>,
    /// git's view of the tree when the iteration started (a resume compares with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_seal: Option<work_git::integrity::Seal>,
    /// What the engine's baseline suite run left in the tree (never evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byproducts: Option<work_git::byproducts::Byproducts>,
}

/// A task the record says was started and not ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InProgress {
    /// The task id.
    pub task_id: String,
    /// The tree's diff fingerprint when it started.
    pub start: Option<String>,
}

/// `<state>/iterations/<iter-id>/progress.json`.
pub fn path(state_dir: &Path, iter_id: &str) -> PathBuf {
    state_dir.join("iterations").join(iter_id).join("progress.json")
}

/// The record of an unfinished run of `iter_id`, if there is a readable one.
pub fn load(state_dir: &Path, iter_id: &str) -> Option<Progress> {
    if iter_id.is_empty() || !work_runtime::fsx::is_plain_relative(Path::new(iter_id)) {
        return None;
    }
    let (text, cut) = work_runtime::fsx::read_text_capped(&path(state_dir, iter_id), 16 << 20).ok()?;
    if cut {
        return None;
    }
    serde_json::from_str::<Progress>(&text).ok().filter(|p| p.iter_id == iter_id && !p.finished)
}

/// Whether a dirty tree is the one a killed run of `iter_id` left (see the module docs).
pub fn owns_tree(state_dir: &Path, iter_id: Option<&str>, tree: &Tree) -> bool {
    let Some(p) = iter_id.and_then(|i| load(state_dir, i)) else { return false };
    if tree.git().head_sha() != p.head {
        return false;
    }
    p.in_progress.is_some() || (p.tree.is_some() && tree.fingerprint().ok() == p.tree)
}

impl Progress {
    /// A fresh record for a run starting from `preflight`.
    pub fn new(iter_id: &str, head: Option<String>, preflight: Preflight, tree: Option<String>) -> Self {
        Progress {
            iter_id: iter_id.into(),
            head,
            preflight,
            ended: Vec::new(),
            snapshots: Vec::new(),
            tree,
            in_progress: None,
            finished: false,
            check_surface: None,
            git_seal: None,
            byproducts: None,
        }
    }

    /// The recorded outcome of a task that ended DONE.
    pub fn done(&self, task_id: &str) -> Option<&TaskOutcome> {
        self.ended.iter().find(|t| t.id == task_id && t.status == crate::report::TaskStatus::Done)
    }

    /// The recorded start fingerprint of `task_id` when it is the task in progress.
    pub fn start_of(&self, task_id: &str) -> Option<Option<String>> {
        self.in_progress.as_ref().filter(|p| p.task_id == task_id).map(|p| p.start.clone())
    }

    /// Records a task ending (in progress cleared, the outcome replacing any earlier one).
    pub fn end_task(&mut self, outcome: &TaskOutcome, snapshot: Option<&Snapshot>, tree: Option<String>) {
        self.ended.retain(|t| t.id != outcome.id);
        self.ended.push(outcome.clone());
        if let Some(s) = snapshot {
            self.snapshots.retain(|x| x.task_id != s.task_id);
            self.snapshots.push(s.clone());
        }
        self.tree = tree;
        self.in_progress = None;
    }
}
