//! The append-only event log of a run: `.work/runs/<run-id>/events.jsonl`, one JSON object a
//! line, each with `ts`, `run_id`, `seq` and `kind`; and the dispatch records beside it
//! ([`records`]: `dispatches.jsonl`, one line per attempt with its request and response).
//! A record's large request parts (the `schema`, and each field of the `context`, of
//! [`BLOB_MIN`] bytes or more: the same schema every finder gets, the `seen` list every finder
//! of a round gets) are stored once per run under `blobs/<sha256>.json` and named in the
//! record as `{"blob": "blobs/<sha256>.json"}` ([`resolve_record`] puts them back).
//!
//! Invariants: `seq` is strictly increasing from 1 within a run; every line is written (to the
//! kernel: a killed process loses none) before `emit` returns; a dispatch's `dispatch.start` is
//! written before its agent starts and synced to disk ([`EventLog::sync`], one sync shared by the
//! dispatches that start together) before its answer is used; every string passes through the
//! run's [`Redactor`] first. A log
//! whose last line a crash cut is read without it ([`read_log`]), and the next append starts
//! on a fresh line.

mod kinds;
mod lines;
pub mod records;

use crate::clock::Clock;
use crate::dispatch::DispatchRequest;
use crate::redact::Redactor;
use serde_json::{Map, Value, json};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use kinds::{Event, EventKind};
pub use lines::AttemptResponse;
pub use records::{RECORDS_FILE, RecordAt, find_record, read_records};

/// The event log of one run.
pub struct EventLog {
    run_id: String,
    dir: PathBuf,
    /// The last `seq`, the log (none: discarding) and a buffer the next line is written in.
    inner: Mutex<(u64, Option<File>, Vec<u8>)>,
    /// The `seq` synced to disk so far (the gate of a group commit), and a handle to sync with.
    synced: tokio::sync::Mutex<u64>,
    sync_file: Option<Arc<File>>,
    clock: Arc<dyn Clock>,
    redactor: Redactor,
    dispatches: std::sync::atomic::AtomicU64,
    observers: Mutex<Vec<Arc<dyn Observer>>>,
    /// True once an observer was added (events are typed for observers only).
    observed: std::sync::atomic::AtomicBool,
    /// Blobs already written in this run.
    blobs: Mutex<std::collections::HashSet<String>>,
    /// The dispatch records (none for a discarding log).
    records: Option<records::RecordLog>,
    /// True once `run.end` was written: every later line re-seals the log
    /// (see [`EventLog::seal`]).
    sealed: std::sync::atomic::AtomicBool,
}

/// The smallest serialised request part stored as a blob.
pub const BLOB_MIN: usize = 1024;

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog").field("run_id", &self.run_id).field("dir", &self.dir).finish()
    }
}

impl EventLog {
    /// Opens (creating) the log in `dir` for `run_id`.
    pub fn open(dir: &Path, run_id: &str, clock: Arc<dyn Clock>, redactor: Redactor) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("events.jsonl");
        let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
        if ends_torn(&path) {
            // A crash cut the last line: the next event starts on a line of its own.
            file.write_all(b"\n")?;
        }
        let sync_file = Some(Arc::new(file.try_clone()?));
        Ok(Self {
            run_id: run_id.to_string(),
            dir: dir.to_path_buf(),
            inner: Mutex::new((0, Some(file), Vec::new())),
            synced: Default::default(),
            sync_file,
            clock,
            redactor,
            dispatches: Default::default(),
            observers: Default::default(),
            observed: Default::default(),
            blobs: Default::default(),
            records: Some(records::RecordLog::new(dir)),
            sealed: Default::default(),
        })
    }

    /// A log that records nothing (for tests of pure logic).
    pub fn discard(run_id: &str, clock: Arc<dyn Clock>) -> Self {
        Self {
            run_id: run_id.to_string(),
            dir: PathBuf::new(),
            inner: Mutex::new((0, None, Vec::new())),
            synced: Default::default(),
            sync_file: None,
            clock,
            redactor: Redactor::default(),
            dispatches: Default::default(),
            observers: Default::default(),
            observed: Default::default(),
            blobs: Default::default(),
            records: None,
            sealed: Default::default(),
        }
    }

    /// The run's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Appends one event: `ts`, `run_id`, `seq`, then the event written out (its `kind`
    /// first). A failure to write the log is reported on stderr once per event, never fatal.
    pub fn emit(&self, event: Event) {
        let mut fields = match serde_json::to_value(&event) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("warning: failed to write an event: {e}");
                return;
            }
        };
        drop(event);
        let Some(kind) = fields.get("kind").and_then(Value::as_str).map(str::to_string) else { return };
        self.redactor.redact_json_in_place(&mut fields);
        let observed = if self.observed.load(std::sync::atomic::Ordering::Acquire) {
            // Typed again from the redacted fields: nothing observed holds a secret.
            serde_json::from_value::<Event>(fields.clone()).ok().and_then(|e| Observed::from_event(&e))
        } else {
            None
        };
        let Ok(mut guard) = self.inner.lock() else { return };
        let (seq, file, line) = &mut *guard;
        *seq += 1;
        if let Some(f) = file.as_mut() {
            line.clear();
            lines::write_event(line, &self.clock.now_rfc3339(), &self.run_id, *seq, &kind, &fields);
            if let Err(e) = f.write_all(line) {
                eprintln!("warning: failed to append to the event log: {e}");
            }
        }
        drop(guard);
        if self.sealed.load(std::sync::atomic::Ordering::Acquire) {
            self.write_seal();
        }
        if let Some(o) = observed {
            self.notify(&o);
        }
    }

    /// Seals the log as finished (after `run.end`): its digest is recorded in the state
    /// digests, and again after every later line (a progress line after the end), so that run
    /// history tells a log changed after its run ended
    /// (`fsx::digests::check_event_log`).
    pub fn seal(&self) {
        self.sealed.store(true, std::sync::atomic::Ordering::Release);
        self.write_seal();
    }

    fn write_seal(&self) {
        if self.records.is_none() {
            return;
        }
        let _guard = self.inner.lock();
        if let Err(e) = crate::fsx::digests::seal_event_log(&self.dir.join("events.jsonl")) {
            eprintln!("warning: failed to seal the event log: {e}");
        }
    }

    /// Syncs every event written so far to disk. Concurrent callers share one sync (a group
    /// commit): a caller whose events a sync that started after them covered does not sync
    /// again, so N dispatches starting together cost one or two syncs, not N one after the
    /// other. The sync runs on the blocking pool, never on a runtime worker.
    pub async fn sync(&self) {
        let Some(file) = self.sync_file.clone() else { return };
        let wanted = self.inner.lock().map(|g| g.0).unwrap_or(0);
        let mut synced = self.synced.lock().await;
        if *synced >= wanted {
            return;
        }
        // Every event up to here is written (seq and write are under one lock).
        let upto = self.inner.lock().map(|g| g.0).unwrap_or(wanted);
        match tokio::task::spawn_blocking(move || file.sync_data()).await {
            Ok(Ok(())) => *synced = upto,
            Ok(Err(e)) => eprintln!("warning: failed to sync the event log: {e}"),
            Err(e) => eprintln!("warning: failed to sync the event log: {e}"),
        }
    }

    /// Adds an observer: every event from now on that [`Observed`] types is handed to it,
    /// after it is in the log (a live display follows the log, it never feeds it).
    pub fn observe(&self, observer: Arc<dyn Observer>) {
        if let Ok(mut v) = self.observers.lock() {
            v.push(observer);
            self.observed.store(true, std::sync::atomic::Ordering::Release);
        }
    }

    fn notify(&self, e: &Observed) {
        let observers = match self.observers.lock() {
            Ok(v) => v.clone(),
            Err(_) => return,
        };
        for o in observers {
            o.observe(e);
        }
    }

    /// Logs how many steps of `unit` a run will take at most (`progress.total`): what a
    /// display draws its done/total bar against (a round cap, a plan's tasks, an iteration
    /// maximum, a goal's criteria).
    pub fn announce_total(&self, unit: Unit, total: u64) {
        self.emit(Event::ProgressTotal { unit, total });
    }

    /// Appends the record of one dispatch attempt (`record`: its `request` and `response`) to
    /// the run's records and says where it is.
    pub fn record_dispatch(&self, dispatch_id: &str, attempt: u32, record: Value) -> Option<RecordAt> {
        let log = self.records.as_ref()?;
        let mut value = record;
        self.redactor.redact_json_in_place(&mut value);
        if let Some(req) = value.get_mut("request") {
            if let Some(v) = req.get_mut("schema") {
                self.store_blob(v);
            }
            // A context's large fields one by one: what several dispatches share (a round's
            // `seen` list) is stored once even when a small field (the angle) differs.
            match req.get_mut("context") {
                Some(Value::Object(fields)) => fields.values_mut().for_each(|v| self.store_blob(v)),
                Some(v) => self.store_blob(v),
                None => {}
            }
        }
        let mut line = Map::new();
        line.insert("dispatch_id".into(), json!(self.redactor.redact_name(dispatch_id)));
        line.insert("attempt".into(), json!(attempt));
        if let Value::Object(parts) = value {
            line.extend(parts);
        }
        self.append_record(log, Value::Object(line).to_string().into_bytes(), dispatch_id, attempt)
    }

    /// Appends the record of one attempt of the dispatcher: `request` and how it ended,
    /// written straight out (the line [`Self::record_dispatch`] writes for them).
    pub fn record_attempt(&self, request: &DispatchRequest, response: &AttemptResponse<'_>) -> Option<RecordAt> {
        let log = self.records.as_ref()?;
        let line = self.attempt_line(request, response);
        self.append_record(log, line, &request.dispatch_id, request.attempt)
    }

    fn append_record(&self, log: &records::RecordLog, line: Vec<u8>, id: &str, attempt: u32) -> Option<RecordAt> {
        // An audit record, not resume state: appended whole but not synced, which would
        // dominate the cost of a short dispatch.
        match log.append(line) {
            Ok(at) => Some(at),
            Err(e) => {
                eprintln!("warning: failed to append the record of {id} attempt {attempt}: {e}");
                None
            }
        }
    }

    /// Replaces a large `v` by a reference to its blob, written once per run.
    fn store_blob(&self, v: &mut Value) {
        if !at_least(v, BLOB_MIN) {
            return;
        }
        let text = v.to_string();
        if text.len() >= BLOB_MIN
            && let Some(rel) = self.store_blob_text(text.as_bytes())
        {
            *v = json!({ "blob": rel });
        }
    }

    /// Stores `text` (a request part written out) as a blob, once per run; its name, or none
    /// when it could not be written (the part then stays inline).
    fn store_blob_text(&self, text: &[u8]) -> Option<String> {
        let rel = format!("blobs/{}.json", crate::fsx::sha256_hex(text));
        let fresh = self.blobs.lock().map(|mut b| b.insert(rel.clone())).unwrap_or(true);
        if fresh && let Err(e) = crate::fsx::write_line_unsynced(&self.dir.join(&rel), text) {
            eprintln!("warning: failed to write dispatch payload {rel}: {e}");
            // Not written: a later record tries again rather than naming a missing blob.
            if let Ok(mut b) = self.blobs.lock() {
                b.remove(&rel);
            }
            return None;
        }
        Some(rel)
    }

    /// The next dispatch number of this run (1, 2, …), shared by every dispatcher of the run.
    pub fn next_dispatch_number(&self) -> u64 {
        self.dispatches.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
    }

    /// The redactor this log applies.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }
}

/// True when `v` written out may take `min` bytes or more: an upper bound (a string's byte
/// escaped as `\uXXXX` takes six) that stops at `min` — most request parts are small, and
/// writing one out only to measure it costs more than the rest of its record.
fn at_least(v: &Value, min: usize) -> bool {
    fn size(v: &Value, min: usize, acc: &mut usize) {
        if *acc >= min {
            return;
        }
        match v {
            Value::String(s) => *acc += 6 * s.len() + 3,
            Value::Array(a) => a.iter().for_each(|x| size(x, min, acc)),
            Value::Object(o) => o.iter().for_each(|(k, x)| {
                *acc += 6 * k.len() + 4;
                size(x, min, acc);
            }),
            _ => *acc += 24,
        }
        *acc += 2;
    }
    let mut acc = 0;
    size(v, min, &mut acc);
    acc >= min
}

/// What a run counts in steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// An exhaust round.
    Round,
    /// An until iteration.
    Iteration,
    /// A task of a plan (implement, loop run).
    Task,
    /// A success criterion of a goal (ultra).
    Criterion,
}

impl Unit {
    /// The word in the log and on the bar ("round").
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Round => "round",
            Unit::Iteration => "iteration",
            Unit::Task => "task",
            Unit::Criterion => "criterion",
        }
    }

    /// The word for several ("rounds").
    pub fn plural(self) -> &'static str {
        match self {
            Unit::Round => "rounds",
            Unit::Iteration => "iterations",
            Unit::Task => "tasks",
            Unit::Criterion => "criteria",
        }
    }
}

/// How one dispatch attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptEnd {
    /// A valid answer.
    Ok,
    /// An answer that did not validate (retried once, then dropped).
    Malformed,
    /// The agent failed (exit code, kill, timeout).
    Failed,
}

/// The events a live display follows, typed from what the log records (an event of another
/// kind is not observed). Built from the redacted event, so nothing here holds a secret.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// `run.start`.
    RunStarted {
        /// The workflow.
        workflow: String,
    },
    /// `dispatch.start`: an attempt is in flight.
    DispatchStarted {
        /// The dispatch id.
        dispatch_id: String,
        /// 1 or 2.
        attempt: u64,
        /// The role.
        role: String,
        /// The model pin.
        model: String,
        /// The backend that runs it (`command:./finder.py`, `openai:gpt-x`, `claude`).
        agent: String,
    },
    /// `dispatch.end`: an attempt ended.
    DispatchEnded {
        /// The dispatch id.
        dispatch_id: String,
        /// 1 or 2.
        attempt: u64,
        /// How it ended.
        end: AttemptEnd,
        /// Why it was not `Ok`.
        reason: Option<String>,
        /// Tokens it used (input + output).
        tokens: u64,
        /// What it cost.
        cost_usd: f64,
    },
    /// `dispatch.over_budget`: a dispatch refused by the budget.
    OverBudget {
        /// The dispatch id.
        dispatch_id: String,
    },
    /// A step began (`round.start`, `until.iteration.start`).
    StepStarted {
        /// What kind of step.
        unit: Unit,
        /// Its number, when known.
        n: Option<u64>,
    },
    /// A step ended: `done` steps are done in all when known (`journal.saved` counts the
    /// rounds), else one more is (`task.resumed`: a task done by an earlier run).
    StepEnded {
        /// What kind of step.
        unit: Unit,
        /// How many are done, when the event says.
        done: Option<u64>,
    },
    /// At most this many steps (`progress.total`, `plan.selected`).
    Total {
        /// What kind of step.
        unit: Unit,
        /// How many.
        total: u64,
    },
    /// `task.start`: a task of a plan began (implement, loop run). Loop run also says how
    /// many of the plan's tasks are done before it and how many there are.
    TaskStarted {
        /// The task id.
        id: String,
        /// Its title.
        title: String,
        /// Tasks done before this one, when the event says.
        done: Option<u64>,
        /// Tasks in the plan, when the event says.
        total: Option<u64>,
    },
    /// `task.end`: a task ended, done or not.
    TaskEnded {
        /// The task id.
        id: String,
        /// True when its status is `DONE`.
        done: bool,
        /// Why it did not end done.
        reason: Option<String>,
    },
    /// `ultra.observe`: a criterion observed passing or failing.
    Criterion {
        /// The criterion id.
        id: String,
        /// True when it passed.
        pass: bool,
    },
    /// The run cannot go on without a change (`until.check-tampered`, `check-surface.changed`,
    /// `budget.stop`).
    Blocked {
        /// Why.
        reason: String,
    },
    /// `progress`: one human line.
    Line(String),
    /// `run.end`.
    RunEnded {
        /// The outcome word.
        outcome: String,
    },
}

impl Observed {
    /// Types an event for a display; None for a kind no display follows.
    pub fn from_event(event: &Event) -> Option<Self> {
        let opt_text = |v: &Value| v.as_str().map(str::to_string);
        let text = |v: &Value| opt_text(v).unwrap_or_default();
        Some(match event {
            Event::RunStart { workflow, .. } => Observed::RunStarted { workflow: workflow.clone() },
            Event::RunEnd { outcome, .. } => Observed::RunEnded { outcome: outcome.clone() },
            Event::Progress { line } => Observed::Line(line.clone()),
            Event::DispatchStart { dispatch_id, attempt, role, model, agent, .. } => Observed::DispatchStarted {
                dispatch_id: dispatch_id.clone(),
                attempt: u64::from(*attempt),
                role: role.clone(),
                model: model.clone(),
                agent: agent.clone(),
            },
            Event::DispatchEnd { dispatch_id, attempt, outcome, reason, usage, .. } => {
                let u = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
                Observed::DispatchEnded {
                    dispatch_id: dispatch_id.clone(),
                    attempt: u64::from(*attempt),
                    end: match outcome.as_str() {
                        "ok" => AttemptEnd::Ok,
                        "malformed" => AttemptEnd::Malformed,
                        _ => AttemptEnd::Failed,
                    },
                    reason: reason.clone(),
                    tokens: u("input_tokens") + u("output_tokens"),
                    cost_usd: usage.get("cost_usd").and_then(Value::as_f64).unwrap_or(0.0),
                }
            }
            Event::DispatchOverBudget { dispatch_id, .. } => Observed::OverBudget { dispatch_id: dispatch_id.clone() },
            Event::RoundStart { round, .. } => Observed::StepStarted { unit: Unit::Round, n: Some(*round) },
            Event::UntilIterationStart { iteration, .. } => {
                Observed::StepStarted { unit: Unit::Iteration, n: Some(*iteration) }
            }
            Event::JournalSaved { rounds, .. } => Observed::StepEnded { unit: Unit::Round, done: Some(*rounds) },
            Event::UntilIterationEnd { iteration, .. } => {
                Observed::StepEnded { unit: Unit::Iteration, done: Some(*iteration) }
            }
            Event::TaskResumed { .. } => Observed::StepEnded { unit: Unit::Task, done: None },
            Event::TaskStart { task_id, title, done, total } => {
                Observed::TaskStarted { id: text(task_id), title: text(title), done: *done, total: *total }
            }
            Event::TaskEnd { task_id, status, reason, .. } => Observed::TaskEnded {
                id: text(task_id),
                done: status.as_str() == Some("DONE"),
                reason: reason.as_ref().and_then(opt_text),
            },
            Event::PlanSelected { tasks } => {
                Observed::Total { unit: Unit::Task, total: tasks.as_array().map_or(0, |a| a.len() as u64) }
            }
            Event::ProgressTotal { unit, total } => Observed::Total { unit: *unit, total: *total },
            Event::UltraObserve { criterion, verdict, .. } => {
                Observed::Criterion { id: text(criterion), pass: verdict.as_str() == Some("pass") }
            }
            Event::UntilCheckTampered { changes: c } | Event::CheckSurfaceChanged { changes: Some(c), .. } => {
                Observed::Blocked { reason: format!("what judges the run changed: {}", changes_text(c)) }
            }
            Event::CheckSurfaceChanged { changes: None, .. } => {
                Observed::Blocked { reason: "what judges the run changed: ".into() }
            }
            Event::BudgetStop { refused, .. } => {
                Observed::Blocked { reason: format!("budget: refused {}", text(refused)) }
            }
            _ => return None,
        })
    }
}

fn changes_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// Follows a run's events as they are logged (a live display). Called on the thread that
/// logged the event, after the line is written; it must not block.
pub trait Observer: Send + Sync {
    /// One typed event.
    fn observe(&self, event: &Observed);
}

/// A dispatch record with its blobs put back (`run_dir` is the run's directory): the whole
/// request and response, as the agent saw and answered them.
pub fn resolve_record(run_dir: &Path, record: &Value) -> Value {
    let mut out = record.clone();
    if let Some(req) = out.get_mut("request").and_then(Value::as_object_mut) {
        for v in req.values_mut() {
            resolve_blob(run_dir, v);
        }
        if let Some(Value::Object(fields)) = req.get_mut("context") {
            fields.values_mut().for_each(|v| resolve_blob(run_dir, v));
        }
    }
    out
}

/// Puts a blob back in place of its reference `{"blob": "blobs/…"}`.
fn resolve_blob(run_dir: &Path, v: &mut Value) {
    let Some(rel) = v.get("blob").and_then(Value::as_str).filter(|r| r.starts_with("blobs/")) else { return };
    let path = run_dir.join(rel);
    if let Some(back) = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok()) {
        *v = back;
    }
}

/// True when the file exists, is not empty and does not end with a newline.
fn ends_torn(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = File::open(path) else { return false };
    if f.seek(SeekFrom::End(-1)).is_err() {
        return false;
    }
    let mut last = [0u8; 1];
    f.read_exact(&mut last).is_ok() && last[0] != b'\n'
}

/// The events of a log, in order. A line that does not parse (the last one, cut by a crash, or
/// a cut line an append followed) is skipped, never an error; a missing log is empty.
pub fn read_log(path: &Path) -> io::Result<Vec<Value>> {
    let text = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .filter(Value::is_object)
        .collect())
}

/// How many dispatch attempts a log says were started: what a resumed run must count as spent
/// even when the run was killed before it recorded their results anywhere else.
pub fn started_dispatches(path: &Path) -> io::Result<u64> {
    Ok(read_log(path)?.iter().filter(|e| EventKind::of(e) == Some(EventKind::DispatchStart)).count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(dir: &Path) -> EventLog {
        EventLog::open(
            dir,
            "r1",
            Arc::new(crate::clock::FakeClock::new(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH, 1)),
            Redactor::default(),
        )
        .expect("open")
    }

    #[derive(Default)]
    struct Seen(Mutex<Vec<Observed>>);

    impl Observer for Seen {
        fn observe(&self, e: &Observed) {
            self.0.lock().expect("lock").push(e.clone());
        }
    }

    #[test]
    fn observers_get_the_typed_events_a_display_follows_after_they_are_logged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = log(dir.path());
        let seen = Arc::new(Seen::default());
        l.observe(seen.clone());
        l.announce_total(Unit::Round, 3);
        let ds = |id: &str| Event::DispatchStart {
            dispatch_id: id.into(),
            attempt: 1,
            role: "finder".into(),
            model: "m".into(),
            effort: String::new(),
            access: Value::Null,
            agent: String::new(),
        };
        l.emit(Event::RoundStart { round: 1, angles: json!([]), cap: json!(1) });
        l.emit(ds("d1"));
        let usage = json!({"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.25});
        l.emit(Event::DispatchEnd {
            dispatch_id: "d1".into(),
            attempt: 1,
            outcome: "failed".into(),
            reason: Some("x".into()),
            usage,
            priced: true,
            record: None,
            record_line: None,
        });
        l.emit(Event::JournalSaved { rounds: 1, seen: 0 });
        l.emit(Event::PlanSelected { tasks: json!(["1", "2"]) });
        l.emit(Event::TaskStart { task_id: json!("1"), title: json!("Add the parser"), done: None, total: None });
        let end = |id: &str, status: &str, reason: Option<Value>| Event::TaskEnd {
            task_id: json!(id),
            status: json!(status),
            reason,
            dispatches: None,
            repairs: None,
        };
        l.emit(end("1", "BLOCKED", Some(json!("r"))));
        l.emit(Event::TaskStart { task_id: json!("2"), title: json!("t"), done: Some(1), total: Some(2) });
        l.emit(end("2", "DONE", None));
        let null = Value::Null;
        l.emit(Event::LoopTaskDone {
            label: json!("task-2"),
            base: null.clone(),
            head: null.clone(),
            changed: null.clone(),
            reverted: null,
        });
        l.emit(Event::OracleRan { command: json!("c"), source: json!("s"), items: 0 });
        let got = seen.0.lock().expect("lock").clone();
        assert_eq!(
            got,
            vec![
                Observed::Total { unit: Unit::Round, total: 3 },
                Observed::StepStarted { unit: Unit::Round, n: Some(1) },
                Observed::DispatchStarted {
                    dispatch_id: "d1".into(),
                    attempt: 1,
                    role: "finder".into(),
                    model: "m".into(),
                    agent: String::new()
                },
                Observed::DispatchEnded {
                    dispatch_id: "d1".into(),
                    attempt: 1,
                    end: AttemptEnd::Failed,
                    reason: Some("x".into()),
                    tokens: 15,
                    cost_usd: 0.25
                },
                Observed::StepEnded { unit: Unit::Round, done: Some(1) },
                Observed::Total { unit: Unit::Task, total: 2 },
                Observed::TaskStarted { id: "1".into(), title: "Add the parser".into(), done: None, total: None },
                Observed::TaskEnded { id: "1".into(), done: false, reason: Some("r".into()) },
                Observed::TaskStarted { id: "2".into(), title: "t".into(), done: Some(1), total: Some(2) },
                Observed::TaskEnded { id: "2".into(), done: true, reason: None },
            ],
            "kinds no display follows are not observed"
        );
        // Every observed event is in the log too.
        assert_eq!(read_log(&dir.path().join("events.jsonl")).expect("read").len(), 12);
    }

    #[test]
    fn an_event_is_written_kind_first_then_its_fields_in_the_order_the_log_always_had() {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = log(dir.path());
        l.emit(Event::TaskEnd {
            task_id: json!("1"),
            status: json!("BLOCKED"),
            reason: Some(Value::Null),
            dispatches: Some(json!(2)),
            repairs: Some(json!(0)),
        });
        l.emit(Event::GateStart { gate: json!("lint"), command: json!("make"), about: Some("a finding".into()) });
        l.emit(Event::FrozenRerunStart {});
        let mut lost = Map::new();
        lost.insert("to".into(), json!("b"));
        lost.insert("from".into(), json!("a"));
        l.emit(Event::SnapshotLoss { lost });
        l.emit(Event::WaveOutside { place: json!("the working tree"), paths: json!(["x"]) });
        drop(l);
        let text = std::fs::read_to_string(dir.path().join("events.jsonl")).expect("read");
        let want = [
            r#""kind":"task.end","task_id":"1","status":"BLOCKED","reason":null,"dispatches":2,"repairs":0}"#,
            r#""kind":"gate.start","gate":"lint","command":"make","for":"a finding"}"#,
            r#""kind":"frozen-rerun.start"}"#,
            r#""kind":"snapshot.loss","to":"b","from":"a"}"#,
            r#""kind":"wave.outside","where":"the working tree","paths":["x"]}"#,
        ];
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got.len(), want.len(), "{text}");
        for (i, (line, tail)) in got.iter().zip(want).enumerate() {
            let head = format!(r#","run_id":"r1","seq":{},"#, i + 1);
            let (before, rest) = line.split_at(line.find(r#""kind""#).expect("a kind"));
            assert!(before.starts_with(r#"{"ts":""#) && before.ends_with(&head), "{line}");
            assert_eq!(rest, tail);
            let back: Event = serde_json::from_str(line).expect("an event reads back");
            assert!(Observed::from_event(&back).is_none() || i == 0, "{back:?}");
        }
    }

    #[test]
    fn a_reader_tells_every_kind_from_its_name_whatever_fields_the_line_has() {
        for k in EventKind::ALL {
            let name = serde_json::to_value(k).expect("a kind");
            assert_eq!(EventKind::of(&json!({"kind": name})), Some(*k), "{name}");
        }
        let old = json!({"ts": "t", "seq": 1, "kind": "dispatch.start", "dispatch_id": "d1"});
        assert_eq!(EventKind::of(&old), Some(EventKind::DispatchStart), "a line with fewer fields");
        assert_eq!(EventKind::of(&json!({"kind": "galaxy.start"})), None);
        assert_eq!(EventKind::of(&json!({"seq": 1})), None);
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_the_next_append_starts_fresh() {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = log(dir.path());
        let ds = |id: &str| Event::DispatchStart {
            dispatch_id: id.into(),
            attempt: 1,
            role: String::new(),
            model: String::new(),
            effort: String::new(),
            access: Value::Null,
            agent: String::new(),
        };
        l.emit(ds("d1"));
        drop(l);
        let path = dir.path().join("events.jsonl");
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(br#"{"kind": "dispatch.st"#).expect("tear");
        drop(f);
        assert_eq!(read_log(&path).expect("read").len(), 1, "the torn line is skipped");
        let l = log(dir.path());
        l.emit(ds("d2"));
        drop(l);
        let events = read_log(&path).expect("read");
        assert_eq!(events.len(), 2, "the append after the torn line is whole: {events:?}");
        assert_eq!(started_dispatches(&path).expect("count"), 2);
        assert_eq!(read_log(&dir.path().join("none")).expect("missing").len(), 0);
    }

    #[test]
    fn large_request_parts_are_stored_once_and_resolve_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = log(dir.path());
        let schema = json!({"type": "object", "description": "x".repeat(2000)});
        let seen: Vec<Value> = (0..100).map(|i| json!({"id": format!("item-{i}"), "location": "a.rs:1"})).collect();
        for (id, angle) in [("d1", "a"), ("d2", "b")] {
            let rec = json!({"request": {"prompt": format!("angle {angle}"), "schema": schema,
                                         "context": {"angle": angle, "seen": seen}},
                             "response": {"outcome": "ok"}});
            let at = l.record_dispatch(id, 1, rec.clone()).expect("recorded");
            let text = std::fs::read_to_string(dir.path().join(at.file)).expect("read");
            let line = text.lines().nth(usize::try_from(at.line).expect("line") - 1).expect("the line it names");
            let stored: Value = serde_json::from_str(line).expect("json");
            let is_blob = |v: &Value| v["blob"].as_str().is_some_and(|b| b.starts_with("blobs/"));
            assert!(is_blob(&stored["request"]["schema"]), "{stored}");
            assert!(is_blob(&stored["request"]["context"]["seen"]), "{stored}");
            assert_eq!(stored["request"]["context"]["angle"], angle, "a small part stays inline");
            let mut whole = rec.clone();
            whole["dispatch_id"] = json!(id);
            whole["attempt"] = json!(1);
            assert_eq!(resolve_record(dir.path(), &stored), whole);
            assert_eq!(find_record(dir.path(), id, 1).expect("read"), Some(whole));
        }
        let blobs = std::fs::read_dir(dir.path().join("blobs")).expect("blobs").count();
        assert_eq!(blobs, 2, "the schema and the seen list both dispatches sent are stored once each");
    }

    #[test]
    fn records_are_one_line_each_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rec = |n: u64| json!({"request": {"prompt": format!("p{n}")}, "response": {"outcome": "ok"}});
        let l = log(dir.path());
        let at = l.record_dispatch("d1", 1, rec(1)).expect("recorded");
        assert_eq!(at, RecordAt { file: RECORDS_FILE, line: 1 });
        assert_eq!(l.record_dispatch("d1", 2, rec(2)).expect("recorded").line, 2);
        drop(l);
        let path = dir.path().join(RECORDS_FILE);
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(br#"{"dispatch_id": "d2", "attempt": 1, "requ"#).expect("tear");
        drop(f);
        assert_eq!(read_records(dir.path()).expect("read").len(), 2, "the torn line is dropped");
        let l = log(dir.path());
        let at = l.record_dispatch("d3", 1, rec(3)).expect("recorded");
        assert_eq!(at.line, 4, "the torn line keeps its number, the next record starts a line of its own");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.lines().nth(3).is_some_and(|l| l.contains(r#""dispatch_id":"d3""#)), "{text}");
        let ids: Vec<Value> =
            read_records(dir.path()).expect("read").iter().map(|r| r["dispatch_id"].clone()).collect();
        assert_eq!(ids, vec![json!("d1"), json!("d1"), json!("d3")]);
        assert_eq!(find_record(dir.path(), "d1", 2).expect("read").expect("found")["request"]["prompt"], "p2");
        assert_eq!(find_record(dir.path(), "d2", 1).expect("read"), None, "a torn record is not found");
        assert!(read_records(&dir.path().join("none")).expect("missing").is_empty());
    }
}
