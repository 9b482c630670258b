//! Per-task progress of a standard run, so that a killed `work implement … --iter-id X` run
//! started again continues where it stopped.
//!
//! The record is kept at every task boundary: when a task starts (its id and the tree's diff
//! fingerprint at its start) and when it ends (its outcome, the boundary snapshot and the
//! fingerprint after it). On the next run with the same iteration id:
//!
//! - the dirty tree is the run's own, and accepted by the preflight, iff HEAD is still the
//!   recorded HEAD and either the tree's fingerprint is the one recorded last, or a task was
//!   in progress (its start state plus its own edits: the run was killed inside it);
//! - every DONE task is taken from the record and never dispatched again;
//! - the in-progress task is redone on top of its own edits, its change measured from the
//!   recorded start fingerprint;
//! - the record of a run that ended (any status) is marked finished as the run's last write,
//!   with the run's end report: a later run of the same request over the very tree the run left
//!   prints that report again ([`crate::resume::finished_report`]); any other later run of the
//!   iteration starts afresh, with the preflight's usual dirty check;
//! - every record carries what the iteration had spent ([`Progress::spent`]): a rerun starts from
//!   it, so its stats and budget count the whole iteration;
//! - the snapshot guard compares the next boundary with the last recorded snapshot, and the
//!   report shows the original preflight and every boundary snapshot.
//!
//! # On disk (`<state>/iterations/<iter-id>/`)
//!
//! Keeping a task boundary costs what the boundary adds, not what the record holds:
//!
//! - `progress.json` — the **snapshot**: the whole [`Progress`], pretty JSON. Written when
//!   the iteration starts (and once its ground truth is frozen), whenever the log has grown
//!   as large as the snapshot, and as the run's last write (marked finished): the file a
//!   person opens is the whole record once a run has ended (its log, left as it was, no
//!   longer extends it).
//! - `progress.jsonl` — the **log**: a header `{"progress_log": 1, "base": "<sha256 of the
//!   snapshot file>"}`, then one record a task step, appended (one synced write each):
//!   `{"seq": n, "start": {"task_id", "start"}}` when a task starts, `{"seq": n, "end":
//!   {"outcome", "snapshot", "tree"}}` when it ends. A boundary snapshot whose paths are sorted
//!   names only the paths added and removed since the previous boundary (`paths_added`,
//!   `paths_removed`), so a long plan does not copy every dirty path at every boundary.
//!
//! Loading reads the snapshot, then replays the log's records in `seq` order. A line that does
//! not parse (a write a crash tore) is dropped; a record out of sequence ends the replay; a log
//! whose `base` is not the snapshot's digest is stale (a crash between a snapshot and the log's
//! reset) and is ignored. Both files are state files: their digests are recorded on every
//! write, and a file changed outside a run is refused when read ([`load`]).

use crate::report::TaskOutcome;
use crate::state_write::StateWriteError;
use crate::tree::{Preflight, Snapshot, Tree};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use work_runtime::budget::Spent;
use work_runtime::fsx::sha256_hex;
use work_runtime::run::RunContext;

/// The log format version (the header's `progress_log`).
pub const LOG_VERSION: u32 = 1;

/// The progress record.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// What the iteration had spent at its last write (the runs before this one, for a resume).
    #[serde(default)]
    pub spent: Spent,
    /// The digest of what the iteration was asked ([`crate::resume::request_digest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// An edit's reading of the tree before its first dispatch (a redone edit is judged by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<EditFrozen>,
    /// The end report of the run that finished the iteration (a rerun over the tree it left
    /// prints it again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Value>,
    /// The waves of a run with `--concurrency` above 1 (`crate::waves`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waves: Option<crate::waves::WaveState>,
    /// Where the files on disk stand (not part of the record).
    #[serde(skip)]
    log: Log,
}

/// What an edit read before its first dispatch: the definition site's line and where the old
/// name of a rename stood (`crate::rename::before`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditFrozen {
    /// The definition site's line.
    pub def_line: String,
    /// Repository-relative path ⇒ the lines where the old name stood, for a rename.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rename_before: Option<std::collections::BTreeMap<String, Vec<usize>>>,
}

/// A task the record says was started and not ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InProgress {
    /// The task id.
    pub task_id: String,
    /// The tree's diff fingerprint when it started.
    pub start: Option<String>,
}

/// The snapshot and log on disk, and the steps not yet written.
#[derive(Debug, Clone, Default)]
struct Log {
    seq: u64,
    /// The log on disk extends the snapshot on disk (its `base` is the snapshot's digest).
    based: bool,
    log_bytes: u64,
    snapshot_bytes: u64,
    /// Steps taken since the last save.
    pending: Vec<Step>,
}

/// One task step, as the log records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Step {
    /// A task started.
    Start(InProgress),
    /// A task ended.
    End(Box<Ended>),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Ended {
    outcome: TaskOutcome,
    snapshot: Option<BoundaryRecord>,
    tree: Option<String>,
}

/// A boundary snapshot in the log: its paths whole, or (when sorted) as the change from the
/// previous boundary's.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct BoundaryRecord {
    boundary: String,
    task_id: String,
    sha: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    paths: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    paths_added: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    paths_removed: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tree: Option<String>,
}

impl BoundaryRecord {
    fn of(s: &Snapshot, prev: Option<&Snapshot>) -> Self {
        let sorted = s.paths.windows(2).all(|w| w[0] < w[1]);
        let (paths, paths_added, paths_removed) = match prev {
            Some(p) if sorted => {
                let (old, new): (BTreeSet<&String>, BTreeSet<&String>) =
                    (p.paths.iter().collect(), s.paths.iter().collect());
                (
                    None,
                    new.difference(&old).map(|x| (*x).clone()).collect(),
                    old.difference(&new).map(|x| (*x).clone()).collect(),
                )
            }
            _ if sorted => (None, s.paths.clone(), Vec::new()),
            _ => (Some(s.paths.clone()), Vec::new(), Vec::new()),
        };
        BoundaryRecord {
            boundary: s.boundary.clone(),
            task_id: s.task_id.clone(),
            sha: s.sha.clone(),
            paths,
            paths_added,
            paths_removed,
            tree: s.tree.clone(),
        }
    }

    fn into_snapshot(self, prev: Option<&Snapshot>) -> Snapshot {
        let paths = match self.paths {
            Some(p) => p,
            None => {
                let mut set: BTreeSet<String> = prev.map(|p| p.paths.iter().cloned().collect()).unwrap_or_default();
                for gone in &self.paths_removed {
                    set.remove(gone);
                }
                set.extend(self.paths_added);
                set.into_iter().collect()
            }
        };
        Snapshot { boundary: self.boundary, task_id: self.task_id, sha: self.sha, paths, tree: self.tree }
    }
}

/// One line of the log after its header.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    seq: u64,
    /// What the iteration had spent when the step was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spent: Option<Spent>,
    #[serde(flatten)]
    step: Step,
}

/// `<state>/iterations/<iter-id>/progress.json` (the snapshot).
pub fn path(state_dir: &Path, iter_id: &str) -> PathBuf {
    state_dir.join("iterations").join(iter_id).join("progress.json")
}

/// `<state>/iterations/<iter-id>/progress.jsonl` (the log).
pub fn log_path(state_dir: &Path, iter_id: &str) -> PathBuf {
    path(state_dir, iter_id).with_extension("jsonl")
}

/// The record of an unfinished run of `iter_id`, if there is a readable one. An error is a
/// state file changed outside a run (its digest is not the one `work` last wrote) or one that
/// could not be read.
pub fn load(state_dir: &Path, iter_id: &str) -> io::Result<Option<Progress>> {
    Ok(read(state_dir, iter_id)?.filter(|p| !p.finished))
}

/// The record of `iter_id`, finished or not: the snapshot with its log replayed.
pub fn read(state_dir: &Path, iter_id: &str) -> io::Result<Option<Progress>> {
    if iter_id.is_empty() || !work_runtime::fsx::is_plain_relative(Path::new(iter_id)) {
        return Ok(None);
    }
    let record = path(state_dir, iter_id);
    let Some(bytes) = work_runtime::fsx::read_optional_bytes(&record)? else {
        // A record `work` wrote and did not remove is refused when it is gone: deleting it
        // must not turn a rerun into a fresh start that freezes the checks from a tampered tree.
        work_runtime::fsx::digests::verify(&record, None)?;
        return Ok(None);
    };
    let Ok(mut p) = serde_json::from_slice::<Progress>(&bytes) else { return Ok(None) };
    if p.iter_id != iter_id {
        return Ok(None);
    }
    p.log = Log { snapshot_bytes: bytes.len() as u64, ..Log::default() };
    let lines = work_runtime::fsx::read_json_lines(&log_path(state_dir, iter_id))?.unwrap_or_default();
    let base = lines.first().and_then(|h| h.get("base")).and_then(Value::as_str);
    if base == Some(sha256_hex(&bytes).as_str()) {
        p.log.based = true;
        for line in lines.into_iter().skip(1) {
            p.log.log_bytes += line.to_string().len() as u64 + 1;
            let Some(rec) = serde_json::from_value::<Record>(line).ok().filter(|r| r.seq == p.log.seq + 1) else {
                // Out of sequence: nothing after it extends this log.
                p.log.based = false;
                break;
            };
            p.log.seq = rec.seq;
            if let Some(s) = rec.spent {
                p.spent = s;
            }
            p.apply(rec.step);
        }
    }
    Ok(Some(p))
}

/// Whether a dirty tree is the one a killed run of `iter_id` left (see the module docs).
pub fn owns_tree(state_dir: &Path, iter_id: Option<&str>, tree: &Tree) -> bool {
    let Some(p) = iter_id.and_then(|i| load(state_dir, i).ok().flatten()) else { return false };
    if tree.git().head_sha() != p.head {
        return false;
    }
    p.in_progress.is_some()
        || p.waves.as_ref().is_some_and(|w| w.open)
        || (p.tree.is_some() && tree.fingerprint().ok() == p.tree)
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
            spent: Spent::default(),
            request: None,
            edit: None,
            report: None,
            waves: None,
            log: Log::default(),
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

    /// Records a task starting (written by the next [`save`] as one appended record).
    pub fn start_task(&mut self, started: InProgress) {
        let step = Step::Start(started);
        self.log.pending.push(step.clone());
        self.apply(step);
    }

    /// Records a task ending (in progress cleared, the outcome replacing any earlier one),
    /// written by the next [`save`] as one appended record.
    pub fn end_task(&mut self, outcome: &TaskOutcome, snapshot: Option<&Snapshot>, tree: Option<String>) {
        let snapshot = snapshot.map(|s| BoundaryRecord::of(s, self.snapshots.last()));
        let step = Step::End(Box::new(Ended { outcome: outcome.clone(), snapshot, tree }));
        self.log.pending.push(step.clone());
        self.apply(step);
    }

    fn apply(&mut self, step: Step) {
        match step {
            Step::Start(started) => self.in_progress = Some(started),
            Step::End(ended) => {
                let Ended { outcome, snapshot, tree } = *ended;
                self.ended.retain(|t| t.id != outcome.id);
                self.ended.push(outcome);
                if let Some(b) = snapshot {
                    let s = b.into_snapshot(self.snapshots.last());
                    self.snapshots.retain(|x| x.task_id != s.task_id);
                    self.snapshots.push(s);
                }
                self.tree = tree;
                self.in_progress = None;
            }
        }
    }
}

/// Writes what changed since the last save: the task steps taken as appended records, or the
/// whole record as a fresh snapshot when there is no step to append (a change of the record's
/// other fields), when the log has grown as large as the snapshot, or when the log on disk does
/// not extend the snapshot.
pub fn save(run: &RunContext, p: &mut Progress) -> Result<(), StateWriteError> {
    if p.iter_id.is_empty() {
        return Ok(());
    }
    p.spent = run.budget.spent();
    let pending = std::mem::take(&mut p.log.pending);
    if pending.is_empty() || !p.log.based || p.log.log_bytes >= p.log.snapshot_bytes {
        return snapshot(run, p);
    }
    let log = log_path(&run.state_dir, &p.iter_id);
    for step in pending {
        let rec = Record { seq: p.log.seq + 1, spent: Some(p.spent), step };
        let line = serde_json::to_value(&rec)
            .and_then(|v| serde_json::to_vec(&run.redactor.redact_json(&v)))
            .map_err(|e| StateWriteError::at(&log)(io::Error::other(e)))?;
        if let Err(e) = work_runtime::fsx::append_line(&log, &line) {
            // What the log holds is unknown now: the next save writes a snapshot.
            p.log.based = false;
            return Err(StateWriteError::at(&log)(e));
        }
        p.log.seq += 1;
        p.log.log_bytes += line.len() as u64 + 1;
    }
    Ok(())
}

/// Writes the whole record as the snapshot and starts a fresh log on it. A finished record's
/// snapshot is the run's last write: the log is left as it is, and no longer extends it (a
/// later run of the iteration starts afresh and replaces both).
pub fn snapshot(run: &RunContext, p: &mut Progress) -> Result<(), StateWriteError> {
    p.log.pending.clear();
    p.log.based = false;
    let record = path(&run.state_dir, &p.iter_id);
    let mut bytes = serde_json::to_value(&*p)
        .and_then(|v| serde_json::to_vec_pretty(&run.redactor.redact_json(&v)))
        .map_err(|e| StateWriteError::at(&record)(io::Error::other(e)))?;
    bytes.push(b'\n');
    work_runtime::fsx::write_atomic(&record, &bytes).map_err(StateWriteError::at(&record))?;
    if p.finished {
        return Ok(());
    }
    let mut header =
        serde_json::json!({"progress_log": LOG_VERSION, "base": sha256_hex(&bytes)}).to_string().into_bytes();
    header.push(b'\n');
    let log = log_path(&run.state_dir, &p.iter_id);
    work_runtime::fsx::write_atomic(&log, &header).map_err(StateWriteError::at(&log))?;
    p.log = Log { based: true, snapshot_bytes: bytes.len() as u64, ..Log::default() };
    Ok(())
}

#[cfg(test)]
mod tests;
