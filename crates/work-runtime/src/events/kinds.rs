//! Every event a run logs, one variant per `kind`: the only place an event's kind and its
//! fields are spelled. A line on disk is `ts`, `run_id`, `seq`, then this enum written out
//! (`kind` first, then the variant's fields in the order declared here), so each variant's
//! `rename` and field order are the log's format: logs written before stay readable.
//!
//! All kinds live here, the workflows' too (`until.*`, `wave.*`, `loop.*`), so that a display
//! (the live status, `work history`) is one `match` over one type. The runtime does not know a
//! workflow's types: a field whose value is a workflow's type (a task status, a report kind, a
//! list of changes) is held as its JSON [`Value`], written by the workflow with `json!`.
//! An `Option` field marked `skip_serializing_if` is one some emitters leave out; an `Option`
//! without it is written as `null` when absent. No event has a field named `kind` (the line's
//! own `kind` would hide it: the log never held one).

use super::Unit;
use crate::outcome::ExhaustStop;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Declares [`Event`] and [`EventKind`] from one list: each kind's name on disk is written
/// once, in its variant's `rename`.
macro_rules! events {
    ($($(#[$m:meta])* $v:ident { $($body:tt)* },)*) => {
        /// One event of a run's log.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind")]
        #[allow(missing_docs)]
        pub enum Event {
            $($(#[$m])* $v { $($body)* },)*
        }

        /// The kind of an event without its fields: what a reader of a log matches on, whatever
        /// fields a line of an earlier build holds.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[allow(missing_docs)]
        pub enum EventKind {
            $($(#[$m])* $v,)*
        }

        impl EventKind {
            /// Every kind, in the order declared.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$v,)*];
        }

        impl Event {
            /// This event's kind.
            pub fn kind(&self) -> EventKind {
                match self {
                    $(Event::$v { .. } => EventKind::$v,)*
                }
            }
        }
    };
}

impl EventKind {
    /// The kind of a logged event (a line of `events.jsonl` read as JSON); None for a kind
    /// this build does not log.
    pub fn of(event: &Value) -> Option<Self> {
        event.get("kind").and_then(|k| EventKind::deserialize(k).ok())
    }
}

events! {
    // The run.
    #[serde(rename = "run.start")]
    RunStart { workflow: String, root: String },
    #[serde(rename = "run.end")]
    RunEnd {
        outcome: String,
        detail: Value,
        spent: Value,
        spent_by_role: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state_digests: Option<Value>,
    },
    #[serde(rename = "progress")]
    Progress { line: String },
    #[serde(rename = "progress.total")]
    ProgressTotal { unit: Unit, total: u64 },
    #[serde(rename = "budget.stop")]
    BudgetStop { refused: Value, spent: Value },

    // Dispatches.
    #[serde(rename = "dispatch.start")]
    DispatchStart {
        dispatch_id: String,
        attempt: u32,
        role: String,
        model: String,
        effort: String,
        access: Value,
        agent: String,
    },
    #[serde(rename = "dispatch.end")]
    DispatchEnd {
        dispatch_id: String,
        attempt: u32,
        outcome: String,
        reason: Option<String>,
        usage: Value,
        priced: bool,
        record: Option<String>,
        record_line: Option<u64>,
    },
    #[serde(rename = "dispatch.note")]
    DispatchNote { dispatch_id: String, attempt: u32, note: String },
    #[serde(rename = "dispatch.over_budget")]
    DispatchOverBudget { dispatch_id: String, attempt: u32 },
    #[serde(rename = "dispatch.dropped")]
    DispatchDropped { dispatch_id: String, reason: String },
    #[serde(rename = "dispatch.skipped")]
    DispatchSkipped { dispatch_id: String, reason: String, cause: String },
    #[serde(rename = "dispatch.replayed")]
    DispatchReplayed { dispatch_id: String, run: String, role: String, attempt: u32 },
    #[serde(rename = "agent.failing")]
    AgentFailing { cause: String, agent: String },
    #[serde(rename = "fanout.start")]
    FanoutStart { size: u64, cap: u64, queued: u64 },
    #[serde(rename = "fanout.end")]
    FanoutEnd { size: u64 },
    #[serde(rename = "fanout.task_panicked")]
    FanoutTaskPanicked { error: String },

    // Steps, tasks and plans (implement, loop run).
    #[serde(rename = "task.start")]
    TaskStart {
        task_id: Value,
        title: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        done: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<u64>,
    },
    #[serde(rename = "task.end")]
    TaskEnd {
        task_id: Value,
        status: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dispatches: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repairs: Option<Value>,
    },
    #[serde(rename = "task.resumed")]
    TaskResumed { task_id: Value, status: Value },
    #[serde(rename = "plan.selected")]
    PlanSelected { tasks: Value },
    #[serde(rename = "plan.answers_refused")]
    PlanAnswersRefused { attempt: Value, reason: Value },
    #[serde(rename = "plan.batch_discarded")]
    PlanBatchDiscarded { reason: Value },
    #[serde(rename = "iteration.end")]
    IterationEnd { status: Value, reason: Value },
    #[serde(rename = "iteration.resumed")]
    IterationResumed { ended: u64, in_progress: Value },
    #[serde(rename = "scope.unplanned")]
    ScopeUnplanned { task_id: Value, paths: Value },
    #[serde(rename = "scope.damage")]
    ScopeDamage { path: Value },
    #[serde(rename = "review.unproven")]
    ReviewUnproven {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<Value>,
        reviewer: Value,
        why: Value,
        attempt: Value,
    },
    #[serde(rename = "review.part")]
    ReviewPart { task_id: Value, reviewer: Value, index: Value, count: Value },
    #[serde(rename = "review.wrote-tree")]
    ReviewWroteTree { task_id: Value, reviewer: Value, paths: Value },
    #[serde(rename = "e2e.part")]
    E2ePart { task_id: Value, index: Value, count: Value },
    #[serde(rename = "artifacts.written")]
    ArtifactsWritten { dir: String, ok: bool },
    #[serde(rename = "snapshot")]
    Snapshot {
        boundary: Value,
        sha: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        paths: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tree: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "ref")]
        reference: Option<Value>,
    },
    #[serde(rename = "byproducts.learned")]
    ByproductsLearned { paths: Value, dirs: Value },

    // What judges a run (gates, the suite, the check surface, git).
    #[serde(rename = "gate.start")]
    GateStart {
        gate: Value,
        command: Value,
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "for")]
        about: Option<String>,
    },
    #[serde(rename = "gate.end")]
    GateEnd {
        gate: Value,
        green: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "for")]
        about: Option<String>,
    },
    #[serde(rename = "gates.pinned")]
    GatesPinned { pinned: Value, configured: Value },
    #[serde(rename = "suite.baseline")]
    SuiteBaseline { command: Value, collected: Value, skipped: Value },
    #[serde(rename = "check-surface.changed")]
    CheckSurfaceChanged {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        goal_id: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        changes: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        restored: Option<Value>,
    },
    #[serde(rename = "check-surface.renamed")]
    CheckSurfaceRenamed { old: Value, new: Value, paths: Value },
    #[serde(rename = "frozen-rerun.start")]
    FrozenRerunStart {},
    #[serde(rename = "frozen-rerun.end")]
    FrozenRerunEnd {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        goal_id: Option<Value>,
        restored: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hidden: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        emptied: Option<Value>,
        green: bool,
    },
    #[serde(rename = "git.tampered")]
    GitTampered { changes: Value },
    #[serde(rename = "git.failed")]
    GitFailed { error: String },
    #[serde(rename = "head.committed")]
    HeadCommitted { from: Value, to: Value, commits: Value },
    #[serde(rename = "head.moved")]
    HeadMoved {
        from: Value,
        to: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        breach: Option<Value>,
        branch: Value,
    },

    // Implement's waves.
    #[serde(rename = "wave.start")]
    WaveStart { tasks: Value, concurrency: Value },
    #[serde(rename = "wave.task")]
    WaveTask { task_id: Value, worktree: Value, base: Value },
    #[serde(rename = "wave.kept")]
    WaveKept {
        task_id: Value,
        #[serde(rename = "ref")]
        reference: Value,
        commit: Value,
    },
    #[serde(rename = "ref.restored")]
    RefRestored {
        task_id: Value,
        #[serde(rename = "ref")]
        reference: Value,
        commit: Value,
    },
    #[serde(rename = "wave.merged")]
    WaveMerged {
        task_id: Value,
        #[serde(rename = "ref")]
        reference: Value,
        paths: Value,
    },
    #[serde(rename = "wave.conflict")]
    WaveConflict {
        task_id: Value,
        #[serde(rename = "ref")]
        reference: Value,
        paths: Value,
    },
    #[serde(rename = "wave.outside")]
    WaveOutside {
        #[serde(rename = "where")]
        place: Value,
        paths: Value,
    },

    // Exhaust.
    #[serde(rename = "exhaust.start")]
    ExhaustStart { what: Value, k: Value, cap: Value, agent: String, resumed: bool, journal: String },
    #[serde(rename = "exhaust.stop")]
    ExhaustStop {
        #[serde(rename = "stoppedReason")]
        stopped_reason: ExhaustStop,
        detail: Value,
    },
    #[serde(rename = "round.start")]
    RoundStart { round: u64, angles: Value, cap: Value },
    #[serde(rename = "journal.saved")]
    JournalSaved { rounds: u64, seen: u64 },
    #[serde(rename = "finder.failed")]
    FinderFailed { round: Value, angle: Value, reason: Value, failures: Value },
    #[serde(rename = "gate2.rejected")]
    Gate2Rejected { id: Value, location: Value, reason: Value, source: Value },
    #[serde(rename = "gate3.failed")]
    Gate3Failed { round: Value, error: String },
    #[serde(rename = "readonly.writes")]
    ReadonlyWrites {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        round: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        between: Option<Value>,
        changes: Value,
        violations: Value,
    },
    #[serde(rename = "oracle.copy-remade")]
    OracleCopyRemade { source: Value, round: Value, changes: Value },
    #[serde(rename = "oracle.ran")]
    OracleRan { command: Value, source: Value, items: u64 },

    // Loop run.
    #[serde(rename = "snapshot.loss")]
    SnapshotLoss {
        /// The lost work as the run's state records it.
        #[serde(flatten)]
        lost: Map<String, Value>,
    },
    #[serde(rename = "snapshot.loss-accepted")]
    SnapshotLossAccepted {
        /// The accepted loss as the run's state recorded it.
        #[serde(flatten)]
        lost: Map<String, Value>,
    },
    #[serde(rename = "loop.transition")]
    LoopTransition { event: Value, text: Value },
    #[serde(rename = "loop.decision")]
    LoopDecision { unit: Value, reason: Value, decision: Value },
    #[serde(rename = "loop.verdict")]
    LoopVerdict { path: Value, state: Value },
    #[serde(rename = "loop.task.done")]
    LoopTaskDone { label: Value, base: Value, head: Value, changed: Value, reverted: Value },
    #[serde(rename = "loop.task.unchanged")]
    LoopTaskUnchanged { label: Value, attempt: Value },
    #[serde(rename = "adjudication.overridden")]
    AdjudicationOverridden { reviewer: Value, notes: Value },

    // Until.
    #[serde(rename = "until.suite.baseline")]
    UntilSuiteBaseline { command: Value, collected: Value, skipped: Value },
    #[serde(rename = "until.surface.unsaved")]
    UntilSurfaceUnsaved { error: String },
    #[serde(rename = "until.seal.unsaved")]
    UntilSealUnsaved { error: String },
    #[serde(rename = "until.verify.start")]
    UntilVerifyStart { command: Value },
    #[serde(rename = "until.verify.end")]
    UntilVerifyEnd { command: Value, passed: bool, end: Value },
    #[serde(rename = "until.iteration.start")]
    UntilIterationStart { session: Value, iteration: u64 },
    #[serde(rename = "until.iteration.end")]
    UntilIterationEnd {
        session: Value,
        iteration: u64,
        status: Value,
        decision: Value,
        changed: Value,
        false_claims: Value,
    },
    #[serde(rename = "until.iteration.redo")]
    UntilIterationRedo { iteration: Value },
    #[serde(rename = "until.check-tampered")]
    UntilCheckTampered { changes: Value },
    #[serde(rename = "until.git-tampered")]
    UntilGitTampered { changes: Value },
    #[serde(rename = "until.frozen-rerun")]
    UntilFrozenRerun { command: Value, restored: Value, green: bool },
    #[serde(rename = "until.error")]
    UntilError { error: String },
    #[serde(rename = "until.stop")]
    UntilStop { session: Value, status: Value, reason: Value, iterations: Value },

    // Ultra.
    #[serde(rename = "ultra.observe")]
    UltraObserve { goal_id: Value, criterion: Value, label: Value, verdict: Value, end: Value },
    #[serde(rename = "goal.changed")]
    GoalChanged { goal_id: Value, changes: Value },
}
