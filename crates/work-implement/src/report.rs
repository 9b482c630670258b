//! The end-report and the per-task outcomes it carries.

use crate::carrier::Mode;
use crate::env::{Counter, GateRun};
use crate::tree::{Preflight, Snapshot};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use work_runtime::outcome::StopReason;

/// How an iteration ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    /// Every task done, files touched, suite green (or the mode's equivalent).
    #[serde(rename = "DONE")]
    Done,
    /// Stopped; the reason says why.
    #[serde(rename = "BLOCKED")]
    Blocked,
    /// Some tasks done, then one blocked.
    #[serde(rename = "PARTIAL")]
    Partial,
    /// An agent asked for context the plan does not give.
    #[serde(rename = "NEEDS_CONTEXT")]
    NeedsContext,
}

impl Status {
    /// The contract spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Done => "DONE",
            Status::Blocked => "BLOCKED",
            Status::Partial => "PARTIAL",
            Status::NeedsContext => "NEEDS_CONTEXT",
        }
    }
}

/// How one task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskStatus {
    /// Reviewed and approved (possibly with concerns).
    #[serde(rename = "DONE")]
    Done,
    /// Stopped.
    #[serde(rename = "BLOCKED")]
    Blocked,
    /// The implementer asked for context.
    #[serde(rename = "NEEDS_CONTEXT")]
    NeedsContext,
    /// Never started (an earlier task stopped the run).
    #[serde(rename = "NOT_ATTEMPTED")]
    NotAttempted,
}

/// One task's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskOutcome {
    /// The task id.
    pub id: String,
    /// The title.
    pub title: String,
    /// How it ended.
    pub status: TaskStatus,
    /// Why, when not plainly done.
    pub reason: Option<String>,
    /// The BLOCKED kind (`spec-ambiguous`, `review-loop-exhausted`, `important-on-unchanged-diff`, …).
    pub kind: Option<String>,
    /// Concerns surfaced (held findings, minor-valve findings, neutral no-op backstop, …).
    pub concerns: Vec<String>,
    /// Findings the implementer held to the plan (HOLD clause), verbatim.
    pub held: Vec<Value>,
    /// The findings behind a BLOCKED verdict.
    pub findings: Vec<Value>,
    /// What the implementer claimed (OR over the first dispatch and every repair): a neutral
    /// concern when it disagrees with the tree, never the outcome.
    pub applied_changes_claimed: Option<bool>,
    /// Whether the task changed the diff state (engine's fingerprint).
    pub tree_changed: bool,
    /// Repair dispatches.
    pub repairs: u32,
    /// Review dispatches (spec + quality).
    pub reviews: u32,
    /// Distinct diff states seen by the quality loop.
    pub fingerprints: usize,
    /// Whether this task went to the tester.
    pub e2e: bool,
    /// The tester's answer, for E2E tasks.
    pub e2e_result: Option<Value>,
    /// Dispatches and tokens spent on this task.
    pub spent: Counter,
    /// What the task's change touched outside what its text plans (`work_git::scope::unplanned`:
    /// not named, not under a named directory, no `Touches:` glob, not a test), as its last
    /// review saw it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub out_of_scope: Vec<String>,
}

impl TaskOutcome {
    /// A task not yet run.
    pub fn new(id: &str, title: &str) -> Self {
        Self {
            id: id.into(),
            title: title.into(),
            status: TaskStatus::NotAttempted,
            reason: None,
            kind: None,
            concerns: Vec::new(),
            held: Vec::new(),
            findings: Vec::new(),
            applied_changes_claimed: None,
            tree_changed: false,
            repairs: 0,
            reviews: 0,
            fingerprints: 0,
            e2e: false,
            e2e_result: None,
            spent: Counter::default(),
            out_of_scope: Vec::new(),
        }
    }

    /// Marks the task BLOCKED.
    pub fn blocked(mut self, kind: &str, reason: String) -> Self {
        self.status = TaskStatus::Blocked;
        self.kind = Some(kind.into());
        self.reason = Some(reason);
        self
    }
}

/// The artifacts carried in the end-report (and written under `.work/iterations/<iter-id>/`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Artifacts {
    /// The rendered `stats.json` (null on DONE and clean no-ops).
    pub stats_json: Option<String>,
    /// The rendered `BLOCKED.md` (null on DONE and clean no-ops).
    pub blocked_md: Option<String>,
    /// The directory they were written to, relative to the repository root when inside it.
    pub dir: Option<String>,
}

/// Spend figures for the closing note: dispatches and tokens per DONE task.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Stats {
    /// All dispatches of the run (each attempt counts).
    pub dispatches: u64,
    /// All agent tokens of the run.
    pub tokens: u64,
    /// Dispatches spent on plan index/extract (0 for a parsed plan).
    pub extraction_dispatches: u64,
    /// Tasks done.
    pub done_tasks: usize,
    /// Dispatches per done task (null with none done).
    pub dispatches_per_done_task: Option<f64>,
    /// Tokens per done task (null with none done).
    pub tokens_per_done_task: Option<f64>,
    /// Snapshot boundaries recorded (code, zero tokens).
    pub snapshots: usize,
}

/// The end-report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndReport {
    /// DONE | BLOCKED | PARTIAL | NEEDS_CONTEXT.
    pub status: Status,
    /// The mode.
    pub mode: Mode,
    /// The iteration id (null when the carrier had none).
    pub iter_id: Option<String>,
    /// Why it ended so.
    pub reason: String,
    /// The BLOCKED kind (`bad-carrier`, `missing-field`, `dirty-tree`, `no-op`, `no-suite`, `suite-red`,
    /// `snapshot-loss`, `spec-ambiguous`, `cardinality`, `no-op-edit`, `hole`, `regression`, …).
    pub kind: Option<String>,
    /// Where a BLOCKED run goes next (`debug`, `specify`, `tdd`), when the pipeline knows.
    pub route: Option<String>,
    /// The run id.
    pub run_id: Option<String>,
    /// Per-task outcomes, in execution order.
    pub tasks: Vec<TaskOutcome>,
    /// Concerns (never the outcome).
    pub concerns: Vec<String>,
    /// The diagnosis behind a BLOCKED (null on DONE and infra early exits).
    pub blocked_detail: Option<Value>,
    /// Files touched (what differs from HEAD by content, untracked files included, measured
    /// before E2E fixtures and artifacts); null when the run stopped before measuring.
    pub files_touched: Option<usize>,
    /// The lines behind `files_touched`, labelled as `git status --porcelain` would (`?? new`,
    /// ` M changed`, ` D deleted`), measured by hashing (see `Tree::porcelain`).
    pub files: Vec<String>,
    /// What `files` changed outside what the plan's tasks plan and no check looks at (a
    /// deleted document, CI configuration; see `work_git::scope`): each is also a concern.
    pub out_of_scope_damage: Vec<work_git::scope::Damage>,
    /// The engine's own suite run (null when not run).
    pub suite_green: Option<bool>,
    /// The suite run itself.
    pub suite: Option<GateRun>,
    /// The folded preflight.
    pub preflight: Option<Preflight>,
    /// Task-boundary snapshots (multi-task runs).
    pub snapshots: Vec<Snapshot>,
    /// stats.json / BLOCKED.md.
    pub artifacts: Artifacts,
    /// Spend.
    pub stats: Stats,
    /// Mode-specific observations (mini: the RED test runs; edit: sites, dirty checks, build).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

impl EndReport {
    /// Adds a judged task: its concerns, and what it touched outside its text's plan as a
    /// concern of its own.
    pub fn push_judged(&mut self, outcome: TaskOutcome) {
        self.concerns.extend(outcome.concerns.iter().cloned());
        if !outcome.out_of_scope.is_empty() {
            self.concerns.push(format!(
                "task {}: out of scope: touched what its text does not plan: {}",
                outcome.id,
                outcome.out_of_scope.join(", ")
            ));
        }
        self.tasks.push(outcome);
    }

    /// A report with nothing but a status and reason.
    pub fn new(status: Status, mode: Mode, iter_id: Option<String>, reason: String) -> Self {
        Self {
            status,
            mode,
            iter_id,
            reason,
            kind: None,
            route: None,
            run_id: None,
            tasks: Vec::new(),
            concerns: Vec::new(),
            blocked_detail: None,
            files_touched: None,
            out_of_scope_damage: Vec::new(),
            files: Vec::new(),
            suite_green: None,
            suite: None,
            preflight: None,
            snapshots: Vec::new(),
            artifacts: Artifacts::default(),
            stats: Stats::default(),
            detail: None,
        }
    }

    /// The infra early exit (bad carrier, dirty tree): BLOCKED with a kind, no BLOCKED.md,
    /// no blocked_detail, zero dispatches.
    pub fn infra(mode: Mode, iter_id: Option<String>, kind: &str, reason: String) -> Self {
        let mut r = Self::new(Status::Blocked, mode, iter_id, reason);
        r.kind = Some(kind.into());
        r
    }

    /// Ends the run BLOCKED `budget`: the budget refused `refused` (a dispatch, described), and
    /// the reason names what was not done (every task not DONE, the E2E tester or the suite run
    /// when they did not run). Nothing the budget refused counts as the agent's failure.
    pub fn stop_for_budget(&mut self, refused: &str, spent: &str) {
        let mut not_done: Vec<String> = self
            .tasks
            .iter()
            .filter(|t| t.status != TaskStatus::Done)
            .map(|t| {
                let status = match t.status {
                    TaskStatus::NotAttempted => "not attempted",
                    TaskStatus::NeedsContext => "needs context",
                    _ => "not finished",
                };
                format!("task {} ({status})", t.id)
            })
            .collect();
        if self.tasks.is_empty() && self.mode == Mode::Standard {
            not_done.push("every task of the plan (none was selected)".into());
        }
        if self.suite.is_none() {
            not_done.push("the end-verify suite run".into());
        }
        for t in self.tasks.iter_mut().filter(|t| t.kind.as_deref() == Some(StopReason::Budget.as_str())) {
            t.status = TaskStatus::Blocked;
        }
        self.status = Status::Blocked;
        self.kind = Some(StopReason::Budget.into());
        self.route = None;
        self.reason = format!(
            "budget: {spent}; the {refused} was not run; not done: {}; run again with a bigger budget",
            if not_done.is_empty() { "nothing else".to_string() } else { not_done.join(", ") }
        );
        self.blocked_detail = Some(serde_json::json!({
            "kind": StopReason::Budget.as_str(),
            "refused": refused,
            "spent": spent,
            "not_done": not_done,
            "tasks_done": self.tasks.iter().filter(|t| t.status == TaskStatus::Done).count(),
        }));
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
