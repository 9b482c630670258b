//! One run of a workflow: its id, its directories, its clock, event log, budget, spawner and
//! progress output. Workflows receive a [`RunContext`] and reach the outside world through it.

use crate::budget::{Budget, BudgetTracker, Spent};
use crate::clock::Clock;
use crate::events::{Event, EventLog};
use crate::redact::Redactor;
use crate::spawn::Spawner;
use serde_json::{Value, json};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where human progress lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressSink {
    /// Plain lines on stderr.
    Stderr,
    /// Nowhere (still logged as events).
    Silent,
}

/// What a run is started with.
#[derive(Clone)]
pub struct RunOptions {
    /// The repository root.
    pub root: PathBuf,
    /// The state directory.
    pub state_dir: PathBuf,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// The redactor.
    pub redactor: Redactor,
    /// The budget limits.
    pub budget: Budget,
    /// What earlier runs of the same journal already spent.
    pub already_spent: Spent,
    /// The same, per role.
    pub already_by_role: std::collections::BTreeMap<String, Spent>,
    /// Where progress lines go.
    pub progress: ProgressSink,
}

/// Everything a workflow needs from the runtime for one run.
#[derive(Clone)]
pub struct RunContext {
    /// The run id (`<utc-timestamp>-<workflow>-<pid>`).
    pub run_id: String,
    /// The workflow name.
    pub workflow: String,
    /// The repository root.
    pub root: PathBuf,
    /// The state directory (`.work/` by default).
    pub state_dir: PathBuf,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// The event log.
    pub events: Arc<EventLog>,
    /// The budget.
    pub budget: Arc<BudgetTracker>,
    /// The process spawner.
    pub spawner: Spawner,
    /// The redactor applied to everything persisted.
    pub redactor: Redactor,
    /// The failure streak every dispatcher of the run shares (fail fast).
    pub fail_streak: Arc<crate::dispatch::fail_fast::FailStreak>,
    progress: ProgressSink,
}

impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext").field("run_id", &self.run_id).field("root", &self.root).finish()
    }
}

/// Builds a run id from the clock: `20260101T000000Z-exhaust-1a2b`.
pub fn new_run_id(clock: &dyn Clock, workflow: &str) -> String {
    let t = clock.now().format("%Y%m%dT%H%M%S%3fZ");
    format!("{t}-{workflow}-{:x}", std::process::id())
}

impl RunContext {
    /// The state directory as a path the git measurements leave out (`[".work/"]`), relative
    /// to the root; empty when it lies outside the root (or is the root).
    pub fn state_exclude(&self) -> Vec<String> {
        self.state_dir
            .strip_prefix(&self.root)
            .ok()
            .filter(|rel| !rel.as_os_str().is_empty())
            .map(|rel| format!("{}/", rel.display()))
            .into_iter()
            .collect()
    }

    /// Starts a run: creates `<state_dir>/runs/<run-id>/` and its event log, emits `run.start`.
    pub fn start(opts: RunOptions, workflow: &str) -> io::Result<Self> {
        let run_id = new_run_id(opts.clock.as_ref(), workflow);
        Self::start_with_id(opts, workflow, run_id)
    }

    /// Starts a run under a run id chosen beforehand (the harness names the run in the locks
    /// it takes before the run starts).
    pub fn start_with_id(opts: RunOptions, workflow: &str, run_id: String) -> io::Result<Self> {
        let RunOptions { root, state_dir, clock, redactor, budget, already_spent, already_by_role, progress } = opts;
        let (root, state_dir) = (root.as_path(), state_dir.as_path());
        let dir = state_dir.join("runs").join(&run_id);
        let events = Arc::new(EventLog::open(&dir, &run_id, clock.clone(), redactor.clone())?);
        events.emit(Event::RunStart { workflow: workflow.to_string(), root: root.display().to_string() });
        Ok(Self {
            run_id,
            workflow: workflow.into(),
            root: root.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            clock,
            events,
            budget: Arc::new(BudgetTracker::with_roles(budget, already_spent, already_by_role)),
            spawner: Spawner,
            redactor,
            fail_streak: Arc::default(),
            progress,
        })
    }

    /// The run's directory (`<state_dir>/runs/<run-id>`).
    pub fn run_dir(&self) -> PathBuf {
        self.state_dir.join("runs").join(&self.run_id)
    }

    /// Emits an event.
    pub fn emit(&self, event: Event) {
        self.events.emit(event);
    }

    /// Prints one human progress line (stderr, plain) and logs it as a `progress` event.
    pub fn progress(&self, line: &str) {
        let line = self.redactor.redact(line);
        if self.progress == ProgressSink::Stderr {
            // A closed or full stderr never ends the run: the line is in the event log.
            use std::io::Write;
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
        self.events.emit(Event::Progress { line: line.into_owned() });
    }

    /// Writes a JSON state file atomically, redacting secrets first.
    pub fn write_state<T: serde::Serialize>(&self, path: &Path, value: &T) -> io::Result<()> {
        let v = serde_json::to_value(value).map_err(io::Error::other)?;
        crate::fsx::write_json_atomic(path, &self.redactor.redact_json(&v))
    }

    /// Writes a text state file atomically, redacting secrets first.
    pub fn write_text(&self, path: &Path, text: &str) -> io::Result<()> {
        crate::fsx::write_atomic(path, self.redactor.redact(text).as_bytes())
    }

    /// Emits `run.end` with the outcome.
    pub fn finish(&self, outcome: &str, detail: Value) {
        let spent = self.budget.spent();
        let by_role = self.budget.spent_by_role();
        let written = crate::fsx::digests::written();
        // The state files this run wrote and the digest chain's head: the next run checks them.
        let state_digests =
            (!written.is_empty()).then(|| json!({"files": written, "chain": crate::fsx::digests::head()}));
        self.events.emit(Event::RunEnd {
            outcome: outcome.to_string(),
            detail,
            spent: json!(spent),
            spent_by_role: json!(by_role),
            state_digests,
        });
        self.events.seal();
    }
}
