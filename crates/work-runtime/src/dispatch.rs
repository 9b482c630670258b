//! Agent dispatch: the one way a workflow asks for judgement.
//!
//! A workflow describes a dispatch ([`DispatchSpec`]); the [`Dispatcher`] turns it into a
//! `work.dispatch.v1` [`DispatchRequest`], hands it to the configured [`Agent`] backend,
//! validates the answer against the dispatch's schema itself (never trusting the backend),
//! retries a malformed answer exactly once with the validation error added to the brief,
//! and returns a [`DispatchOutcome`]. Every attempt is charged to the run's budget, logged as
//! events and recorded (request and response, a line of the run's `dispatches.jsonl`) beside
//! the event log.
//!
//! Null-handling: a failed or dropped dispatch is an outcome of its own, never an empty answer.
//!
//! Fail fast ([`fail_fast`]): the dispatchers of one run share a failure streak; once the
//! agent failed for one cause on two different subjects in a row, further dispatches fail at
//! once with that cause (nothing is started or charged) and [`Dispatcher::failing`] names it,
//! so that the workflow stops with `agent-failing`.

pub mod fail_fast;
mod notes;
pub mod replay;

pub use notes::{collect_notes, note};

use crate::budget::{BudgetTracker, Usage};
use crate::events::{Event, EventLog};
use async_trait::async_trait;
use fail_fast::FailStreak;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The protocol name written in every request.
pub const PROTOCOL: &str = "work.dispatch.v1";

/// What an agent may do to the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read only.
    ReadOnly,
    /// May write inside the repository.
    WorkspaceWrite,
}

impl Access {
    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::ReadOnly => "read-only",
            Access::WorkspaceWrite => "workspace-write",
        }
    }
}

/// The request an agent backend receives (the `work.dispatch.v1` document).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DispatchRequest {
    /// Always [`PROTOCOL`].
    pub protocol: String,
    /// The run.
    pub run_id: String,
    /// This dispatch (stable across its attempts).
    pub dispatch_id: String,
    /// 1, or 2 for the retry after a malformed answer.
    pub attempt: u32,
    /// The workflow (`exhaust`, `until`, …).
    pub workflow: String,
    /// The role (`finder`, `worker`, …).
    pub role: String,
    /// The pinned model.
    pub model: String,
    /// The pinned effort.
    pub effort: String,
    /// What the agent may touch.
    pub access: Access,
    /// The repository root, absolute.
    pub cwd: String,
    /// The full brief.
    pub prompt: String,
    /// The JSON Schema of the expected output, or null.
    pub schema: Option<Value>,
    /// Workflow data (angle, round, iteration, task id, …).
    pub context: Value,
}

impl DispatchRequest {
    /// The request as its JSON document (what `serde_json::to_value` gives), its strings moved
    /// rather than copied: what the attempt's record keeps once the agent answered.
    pub fn into_value(self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("protocol".into(), Value::String(self.protocol));
        m.insert("run_id".into(), Value::String(self.run_id));
        m.insert("dispatch_id".into(), Value::String(self.dispatch_id));
        m.insert("attempt".into(), json!(self.attempt));
        m.insert("workflow".into(), Value::String(self.workflow));
        m.insert("role".into(), Value::String(self.role));
        m.insert("model".into(), Value::String(self.model));
        m.insert("effort".into(), Value::String(self.effort));
        m.insert("access".into(), json!(self.access.as_str()));
        m.insert("cwd".into(), Value::String(self.cwd));
        m.insert("prompt".into(), Value::String(self.prompt));
        m.insert("schema".into(), self.schema.unwrap_or(Value::Null));
        m.insert("context".into(), self.context);
        Value::Object(m)
    }
}

/// A backend's answer: the document to validate, and what it cost.
#[derive(Debug, Clone)]
pub struct AgentReply {
    /// The output document (after unwrapping any envelope).
    pub document: Value,
    /// Usage reported by the backend.
    pub usage: Usage,
    /// The raw text received, for the dispatch record.
    pub raw: String,
}

/// Why a backend produced no usable document.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AgentError {
    /// The agent failed: non-zero exit, killed, timeout, transport error. Not retried by the
    /// dispatcher; contributes nothing.
    #[error("agent failed: {reason}")]
    Failed {
        /// Why.
        reason: String,
        /// What it printed, if anything.
        raw: String,
        /// What it cost, if known.
        usage: Usage,
    },
    /// The agent answered, but not with a usable JSON document. Retried once.
    #[error("malformed answer: {reason}")]
    Malformed {
        /// Why.
        reason: String,
        /// What it printed.
        raw: String,
        /// What it cost, if known.
        usage: Usage,
    },
}

/// Per-invocation options that are not part of the protocol document.
#[derive(Debug, Clone, Copy)]
pub struct InvokeOptions {
    /// Kill the agent after this long.
    pub timeout: Duration,
}

/// An agent backend: something that turns a request into a reply.
#[async_trait]
pub trait Agent: Send + Sync {
    /// A short description for logs (`command:./finder.sh`, `claude:sonnet`).
    fn describe(&self) -> String;

    /// Checks, without dispatching, that the backend can run here (CLI present, key set).
    /// The error is a one-line reason.
    fn preflight(&self) -> Result<(), String> {
        Ok(())
    }

    /// Why this backend can never answer a dispatch bound by `schema` (one line), checked
    /// before the first dispatch: a schema it cannot serve is refused, never sent.
    fn schema_refusal(&self, _schema: &serde_json::Value) -> Option<String> {
        None
    }

    /// True when the backend can price what a dispatch cost (a CLI that reports USD, or an
    /// HTTP backend with configured prices). A backend that cannot makes `--budget-usd`
    /// meaningless, and commands refuse that combination rather than never stopping.
    fn reports_cost(&self) -> bool {
        true
    }

    /// Runs one attempt.
    async fn invoke(&self, request: &DispatchRequest, options: InvokeOptions) -> Result<AgentReply, AgentError>;
}

/// What a workflow asks for.
#[derive(Debug, Clone)]
pub struct DispatchSpec {
    /// The role.
    pub role: String,
    /// The pinned model.
    pub model: String,
    /// The pinned effort.
    pub effort: String,
    /// Access.
    pub access: Access,
    /// The brief.
    pub prompt: String,
    /// The schema the answer must validate against, or `None` for free-form JSON.
    pub schema: Option<Value>,
    /// Workflow data.
    pub context: Value,
    /// A short label used in the dispatch id (`angle`, task id …), made filename-safe.
    pub label: String,
}

/// How a dispatch ended.
#[derive(Debug, Clone)]
pub enum DispatchOutcome {
    /// A schema-valid answer.
    Ok {
        /// The dispatch id.
        dispatch_id: String,
        /// The validated document.
        output: Value,
        /// Usage over all attempts.
        usage: Usage,
        /// 1 or 2.
        attempts: u32,
    },
    /// The agent failed (exit code, kill, timeout, transport).
    Failed {
        /// The dispatch id.
        dispatch_id: String,
        /// Why.
        reason: String,
    },
    /// Malformed twice: dropped.
    Dropped {
        /// The dispatch id.
        dispatch_id: String,
        /// The last validation error.
        reason: String,
    },
    /// Not (or not fully) run because the budget was spent.
    OverBudget {
        /// The dispatch id.
        dispatch_id: String,
    },
}

impl DispatchOutcome {
    /// The validated output, when there is one.
    pub fn output(&self) -> Option<&Value> {
        match self {
            DispatchOutcome::Ok { output, .. } => Some(output),
            _ => None,
        }
    }

    /// The dispatch id.
    pub fn dispatch_id(&self) -> &str {
        match self {
            DispatchOutcome::Ok { dispatch_id, .. }
            | DispatchOutcome::Failed { dispatch_id, .. }
            | DispatchOutcome::Dropped { dispatch_id, .. }
            | DispatchOutcome::OverBudget { dispatch_id } => dispatch_id,
        }
    }

    /// A one-line description of a non-Ok outcome.
    pub fn failure_reason(&self) -> Option<String> {
        match self {
            DispatchOutcome::Ok { .. } => None,
            DispatchOutcome::Failed { reason, .. } => Some(format!("failed: {reason}")),
            DispatchOutcome::Dropped { reason, .. } => Some(format!("malformed twice: {reason}")),
            DispatchOutcome::OverBudget { .. } => Some("not run: budget spent".into()),
        }
    }
}

/// Validates `doc` against `schema`; the error lists the first few violations on one line.
pub fn validate(schema: &Value, doc: &Value) -> Result<(), String> {
    let validator = compiled(schema)?;
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .take(5)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() { e.to_string() } else { format!("{path}: {e}") }
        })
        .collect();
    if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
}

/// Compiled validators by schema text: a workflow sends the same few schemas thousands of
/// times, and compiling one costs more than validating an answer. The last one used is
/// checked first, without writing the schema out as a key.
fn compiled(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Last = Mutex<Option<(Value, Arc<jsonschema::Validator>)>>;
    static LAST: OnceLock<Last> = OnceLock::new();
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();
    let last = LAST.get_or_init(Default::default);
    if let Ok(l) = last.lock()
        && let Some((s, v)) = l.as_ref()
        && s == schema
    {
        return Ok(v.clone());
    }
    let v = compiled_by_text(schema, CACHE.get_or_init(Default::default))?;
    if let Ok(mut l) = last.lock() {
        *l = Some((schema.clone(), v.clone()));
    }
    Ok(v)
}

fn compiled_by_text(
    schema: &Value,
    cache: &std::sync::Mutex<std::collections::HashMap<String, Arc<jsonschema::Validator>>>,
) -> Result<Arc<jsonschema::Validator>, String> {
    let key = schema.to_string();
    if let Some(v) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(v);
    }
    let v = Arc::new(jsonschema::validator_for(schema).map_err(|e| format!("invalid schema: {e}"))?);
    if let Ok(mut c) = cache.lock()
        && c.len() < 256
    {
        c.insert(key, v.clone());
    }
    Ok(v)
}

/// Dispatches to one backend on behalf of one run. Cheap to clone.
#[derive(Clone)]
pub struct Dispatcher {
    agent: Arc<dyn Agent>,
    events: Arc<EventLog>,
    budget: Arc<BudgetTracker>,
    workflow: String,
    cwd: PathBuf,
    timeout: Duration,
    streak: Arc<FailStreak>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher").field("agent", &self.agent.describe()).field("workflow", &self.workflow).finish()
    }
}

fn safe_label(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c.to_ascii_lowercase() } else { '-' })
        .take(40)
        .collect();
    if s.is_empty() { "x".into() } else { s }
}

impl Dispatcher {
    /// A dispatcher for `workflow` in `cwd`, each attempt limited to `timeout`.
    pub fn new(
        agent: Arc<dyn Agent>,
        events: Arc<EventLog>,
        budget: Arc<BudgetTracker>,
        workflow: &str,
        cwd: PathBuf,
        timeout: Duration,
    ) -> Self {
        Self { agent, events, budget, workflow: workflow.into(), cwd, timeout, streak: Arc::default() }
    }

    /// Shares `streak` (the run's) instead of a streak of its own: every dispatcher of a run
    /// fails fast together.
    pub fn with_fail_streak(mut self, streak: Arc<FailStreak>) -> Self {
        self.streak = streak;
        self
    }

    /// The cause when the run's agent is failing (see [`fail_fast`]): dispatches are no longer
    /// run, and the workflow should stop with `agent-failing`.
    pub fn failing(&self) -> Option<String> {
        self.streak.failing()
    }

    /// The backend's description.
    pub fn agent_description(&self) -> String {
        self.agent.describe()
    }

    /// The budget tracker shared by this run.
    pub fn budget(&self) -> &Arc<BudgetTracker> {
        &self.budget
    }

    /// Runs one dispatch: attempt, validate, retry once when malformed. Each attempt's
    /// `dispatch.start` reaches the disk while its agent works.
    pub async fn dispatch(&self, spec: DispatchSpec) -> DispatchOutcome {
        let n = self.events.next_dispatch_number();
        self.dispatch_numbered(spec, n, StartSync::WhileItRuns).await
    }

    /// [`Self::dispatch`] with its number taken already.
    async fn dispatch_numbered(&self, spec: DispatchSpec, n: u64, sync: StartSync) -> DispatchOutcome {
        let subject = format!("{}/{}", spec.role, spec.label);
        // The id names the record files: no secret inside a file name, whole or altered.
        let id = format!("d{n:04}-{}-{}", safe_label(&spec.role), safe_label(&spec.label));
        let dispatch_id = self.events.redactor().redact_name(&id).into_owned();
        if let Some(cause) = self.streak.failing() {
            self.events.emit(Event::DispatchSkipped {
                dispatch_id: dispatch_id.clone(),
                reason: fail_fast::AGENT_FAILING.to_string(),
                cause: cause.clone(),
            });
            return DispatchOutcome::Failed { dispatch_id, reason: cause };
        }
        let outcome = self.attempts(spec, dispatch_id, sync).await;
        self.note_outcome(&outcome, &subject);
        outcome
    }

    /// Feeds the run's failure streak with how a dispatch ended.
    fn note_outcome(&self, outcome: &DispatchOutcome, subject: &str) {
        match outcome {
            DispatchOutcome::Ok { .. } | DispatchOutcome::Dropped { .. } => self.streak.answered(),
            DispatchOutcome::Failed { reason, .. } => {
                if self.streak.failed(subject, reason) {
                    self.events.emit(Event::AgentFailing { cause: reason.to_string(), agent: self.agent.describe() });
                }
            }
            DispatchOutcome::OverBudget { .. } => {}
        }
    }

    /// The attempts of one dispatch: attempt, validate, retry once when malformed. The spec's
    /// parts move into the request, which a retry reuses (nothing large is copied per attempt).
    async fn attempts(&self, spec: DispatchSpec, dispatch_id: String, sync: StartSync) -> DispatchOutcome {
        let mut usage = Usage::default();
        let mut last_error = String::new();
        let DispatchSpec { role, model, effort, access, prompt, schema, context, label: _ } = spec;
        let mut request = DispatchRequest {
            protocol: PROTOCOL.into(),
            run_id: self.events.run_id().into(),
            dispatch_id,
            attempt: 1,
            workflow: self.workflow.clone(),
            role,
            model,
            effort,
            access,
            cwd: self.cwd.display().to_string(),
            prompt,
            schema,
            context,
        };
        for attempt in 1..=2u32 {
            if !self.budget.try_reserve_dispatch() {
                self.events.emit(Event::DispatchOverBudget { dispatch_id: request.dispatch_id.clone(), attempt });
                return DispatchOutcome::OverBudget { dispatch_id: request.dispatch_id };
            }
            if attempt == 2 {
                request.attempt = 2;
                request.prompt.push_str(&format!(
                    "\n\nYOUR PREVIOUS ANSWER WAS REJECTED: {last_error}\nAnswer again with exactly one JSON document{}.",
                    if request.schema.is_some() { " that validates against the schema" } else { "" }
                ));
            }
            let verdict = self.attempt(&request, &mut usage, sync).await;
            match verdict {
                Ok(output) => {
                    return DispatchOutcome::Ok { dispatch_id: request.dispatch_id, output, usage, attempts: attempt };
                }
                Err(("failed", reason)) => return DispatchOutcome::Failed { dispatch_id: request.dispatch_id, reason },
                Err((_, reason)) => last_error = reason,
            }
        }
        self.events
            .emit(Event::DispatchDropped { dispatch_id: request.dispatch_id.clone(), reason: last_error.clone() });
        DispatchOutcome::Dropped { dispatch_id: request.dispatch_id, reason: last_error }
    }

    /// One attempt: logged, run, validated, charged and recorded. The validated document, or
    /// `("malformed" | "failed", reason)`.
    async fn attempt(
        &self,
        request: &DispatchRequest,
        usage: &mut Usage,
        sync: StartSync,
    ) -> Result<Value, (&'static str, String)> {
        let attempt = request.attempt;
        self.events.emit(Event::DispatchStart {
            dispatch_id: request.dispatch_id.clone(),
            attempt,
            role: request.role.clone(),
            model: request.model.clone(),
            effort: request.effort.clone(),
            access: json!(request.access),
            agent: self.agent.describe(),
        });
        crate::faults::state_change();
        // The start is in the log before the agent runs (a killed run's dispatches count: the
        // kernel keeps what was written when the process dies). It reaches the disk before
        // the answer is used: while the agent works, or once for a whole wave.
        let start_synced = async {
            if sync == StartSync::WhileItRuns {
                self.events.sync().await;
            }
        };
        let ((result, notes), ()) = tokio::join!(
            notes::collect_notes(self.agent.invoke(request, InvokeOptions { timeout: self.timeout })),
            start_synced
        );
        for note in notes {
            let line = format!("{}: {note}", request.dispatch_id);
            self.events.emit(Event::DispatchNote { dispatch_id: request.dispatch_id.clone(), attempt, note });
            self.events.emit(Event::Progress { line });
        }
        let (verdict, raw, attempt_usage) = match result {
            Ok(reply) => {
                let v = match &request.schema {
                    Some(schema) => {
                        let mut doc = reply.document;
                        crate::enum_fold::fold_enum_words(schema, &mut doc);
                        validate(schema, &doc).map(|_| doc)
                    }
                    None => Ok(reply.document),
                };
                match v {
                    Ok(doc) => (Ok(doc), reply.raw, reply.usage),
                    Err(e) => (Err(("malformed", format!("schema: {e}"))), reply.raw, reply.usage),
                }
            }
            Err(AgentError::Malformed { reason, raw, usage }) => (Err(("malformed", reason)), raw, usage),
            Err(AgentError::Failed { reason, raw, usage }) => (Err(("failed", reason)), raw, usage),
        };
        usage.add(&attempt_usage);
        self.budget.record(&attempt_usage);
        self.budget.record_role(&request.role, &attempt_usage);
        // A backend that cannot price, or an attempt that reported no usage at all: its cost
        // is unknown, not zero.
        let priced = self.agent.reports_cost() && attempt_usage != Usage::default();
        if !priced {
            self.budget.record_unpriced(&request.role);
        }
        let (outcome, reason) = match &verdict {
            Ok(_) => ("ok", None),
            Err((k, r)) => (*k, Some(r.as_str())),
        };
        let response = crate::events::AttemptResponse {
            outcome,
            reason,
            raw: &raw,
            usage: &attempt_usage,
            document: verdict.as_ref().ok(),
        };
        let record = self.events.record_attempt(request, &response);
        self.events.emit(Event::DispatchEnd {
            dispatch_id: request.dispatch_id.clone(),
            attempt,
            outcome: outcome.to_string(),
            reason: reason.map(str::to_string),
            usage: json!(attempt_usage),
            priced,
            record: record.map(|r| r.file.to_string()),
            record_line: record.map(|r| r.line),
        });
        verdict
    }

    /// Runs `specs` with at most `cap` dispatches in flight; the rest queue and start as
    /// earlier ones finish (a sliding wave, so one slow agent does not idle the other slots).
    /// Returns when every dispatch has ended (the caller's barrier), with the outcomes in the
    /// order of `specs`. The cap applied is logged.
    ///
    /// Each of the `cap` slots is one task that takes the next spec from the queue as soon as
    /// its dispatch ended (after its `dispatch.end`), on the thread that handled the answer, as
    /// a client's connection sends its next request; dispatches are numbered in the order of
    /// `specs`. A slot whose task panicked is started again; its dispatch's outcome says so.
    pub async fn dispatch_waves(&self, specs: Vec<DispatchSpec>, cap: usize) -> Vec<DispatchOutcome> {
        let cap = cap.max(1);
        let total = specs.len();
        self.events.emit(Event::FanoutStart {
            size: total as u64,
            cap: cap as u64,
            queued: total.saturating_sub(cap) as u64,
        });
        let waves = Arc::new(Waves {
            queue: std::sync::Mutex::new(specs.into_iter().enumerate()),
            outcomes: std::sync::Mutex::new((0..total).map(|_| None).collect()),
        });
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..cap.min(total) {
            set.spawn(self.clone().slot(waves.clone()));
        }
        while let Some(joined) = set.join_next().await {
            if let Err(e) = joined {
                self.events.emit(Event::FanoutTaskPanicked { error: e.to_string() });
                set.spawn(self.clone().slot(waves.clone()));
            }
        }
        self.events.emit(Event::FanoutEnd { size: total as u64 });
        // The wave's starts reach the disk together, before any answer is handed back.
        self.events.sync().await;
        // Every slot has ended: the outcomes are taken, not copied.
        let mut outcomes = match Arc::try_unwrap(waves) {
            Ok(w) => w.outcomes.into_inner().unwrap_or_default(),
            Err(w) => w.outcomes.lock().map(|mut o| std::mem::take(&mut *o)).unwrap_or_default(),
        };
        outcomes.resize_with(total, || None);
        outcomes
            .into_iter()
            .enumerate()
            .map(|(i, o)| {
                o.unwrap_or_else(|| DispatchOutcome::Failed {
                    dispatch_id: format!("lost-{i}"),
                    reason: "the dispatch task panicked".into(),
                })
            })
            .collect()
    }

    /// One slot of [`Self::dispatch_waves`]: dispatches from the queue until it is empty.
    async fn slot(self, waves: Arc<Waves>) {
        loop {
            // The spec and its number are taken together: numbers follow the order of the specs.
            let next =
                waves.queue.lock().ok().and_then(|mut q| q.next().map(|s| (s, self.events.next_dispatch_number())));
            let Some(((i, spec), n)) = next else { return };
            let outcome = self.dispatch_numbered(spec, n, StartSync::AtWaveEnd).await;
            if let Ok(mut o) = waves.outcomes.lock()
                && let Some(slot) = o.get_mut(i)
            {
                *slot = Some(outcome);
            }
        }
    }
}

/// When an attempt's `dispatch.start` is synced to the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StartSync {
    /// While its agent works (one sync shared by the attempts starting together).
    WhileItRuns,
    /// Once for the whole wave, before [`Dispatcher::dispatch_waves`] returns.
    AtWaveEnd,
}

/// The shared state of one [`Dispatcher::dispatch_waves`]: the specs not started yet, and the
/// outcomes by the index of their spec.
struct Waves {
    queue: std::sync::Mutex<std::iter::Enumerate<std::vec::IntoIter<DispatchSpec>>>,
    outcomes: std::sync::Mutex<Vec<Option<DispatchOutcome>>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Budget;
    use crate::clock::SystemClock;
    use std::sync::Mutex;

    struct Scripted(Mutex<Vec<Result<Value, AgentError>>>);

    #[async_trait]
    impl Agent for Scripted {
        fn describe(&self) -> String {
            "scripted".into()
        }
        async fn invoke(&self, _r: &DispatchRequest, _o: InvokeOptions) -> Result<AgentReply, AgentError> {
            let next = self.0.lock().expect("lock").remove(0);
            next.map(|document| AgentReply { document, usage: Usage::default(), raw: String::new() })
        }
    }

    fn dispatcher(answers: Vec<Result<Value, AgentError>>, budget: Budget) -> Dispatcher {
        let events = Arc::new(EventLog::discard("run", Arc::new(SystemClock)));
        Dispatcher::new(
            Arc::new(Scripted(Mutex::new(answers))),
            events,
            Arc::new(BudgetTracker::new(budget, Default::default())),
            "test",
            PathBuf::from("/"),
            Duration::from_secs(5),
        )
    }

    fn spec() -> DispatchSpec {
        DispatchSpec {
            role: "finder".into(),
            model: "m".into(),
            effort: "low".into(),
            access: Access::ReadOnly,
            prompt: "p".into(),
            schema: Some(json!({"type": "object", "required": ["a"]})),
            context: json!({}),
            label: "x".into(),
        }
    }

    #[test]
    fn a_request_moved_into_its_document_is_what_serde_writes() {
        let r = DispatchRequest {
            protocol: PROTOCOL.into(),
            run_id: "r".into(),
            dispatch_id: "d1".into(),
            attempt: 2,
            workflow: "exhaust".into(),
            role: "finder".into(),
            model: "m".into(),
            effort: "high".into(),
            access: Access::WorkspaceWrite,
            cwd: "/x".into(),
            prompt: "p".into(),
            schema: Some(json!({"type": "object"})),
            context: json!({"angle": "a"}),
        };
        let serde = serde_json::to_value(&r).expect("serialises");
        assert_eq!(serde.to_string(), r.clone().into_value().to_string(), "the same keys in the same order");
        let bare = DispatchRequest { schema: None, ..r };
        assert_eq!(serde_json::to_value(&bare).expect("serialises"), bare.into_value());
    }

    /// An agent that notes something about its attempt (a refused tool call) and answers.
    struct Noting;

    #[async_trait]
    impl Agent for Noting {
        fn describe(&self) -> String {
            "noting".into()
        }
        async fn invoke(&self, _r: &DispatchRequest, _o: InvokeOptions) -> Result<AgentReply, AgentError> {
            note("tool call `write_file` refused: read-only");
            Ok(AgentReply { document: json!({"a": 1}), usage: Usage::default(), raw: String::new() })
        }
    }

    struct Lines(Mutex<Vec<String>>);

    impl crate::events::Observer for Lines {
        fn observe(&self, event: &crate::events::Observed) {
            if let crate::events::Observed::Line(l) = event {
                self.0.lock().expect("lock").push(l.clone());
            }
        }
    }

    #[tokio::test]
    async fn an_attempts_notes_are_shown_as_progress_lines() {
        let events = Arc::new(EventLog::discard("run", Arc::new(SystemClock)));
        let lines = Arc::new(Lines(Mutex::new(Vec::new())));
        events.observe(lines.clone());
        let d = Dispatcher::new(
            Arc::new(Noting),
            events,
            Arc::new(BudgetTracker::new(Budget::default(), Default::default())),
            "test",
            PathBuf::from("/"),
            Duration::from_secs(5),
        );
        assert!(matches!(d.dispatch(spec()).await, DispatchOutcome::Ok { .. }));
        let lines = lines.0.lock().expect("lock").clone();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].ends_with("-x: tool call `write_file` refused: read-only"), "{lines:?}");
    }

    #[tokio::test]
    async fn malformed_once_then_valid_is_ok_on_attempt_two() {
        let d = dispatcher(vec![Ok(json!({"b": 1})), Ok(json!({"a": 1}))], Budget::default());
        match d.dispatch(spec()).await {
            DispatchOutcome::Ok { attempts, output, .. } => {
                assert_eq!(attempts, 2);
                assert_eq!(output, json!({"a": 1}));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn malformed_twice_is_dropped_and_failure_is_not_retried() {
        let d = dispatcher(vec![Ok(json!(1)), Ok(json!(2))], Budget::default());
        assert!(matches!(d.dispatch(spec()).await, DispatchOutcome::Dropped { .. }));
        let fail = AgentError::Failed { reason: "exit code 1".into(), raw: String::new(), usage: Usage::default() };
        let d = dispatcher(vec![Err(fail)], Budget::default());
        assert!(matches!(d.dispatch(spec()).await, DispatchOutcome::Failed { .. }));
    }

    #[tokio::test]
    async fn two_subjects_failing_for_one_cause_stop_the_agent_being_run() {
        let fail = || {
            Err(AgentError::Failed { reason: "Invalid API key".into(), raw: String::new(), usage: Usage::default() })
        };
        // Two answers only: a third invocation would find none and panic.
        let d = dispatcher(vec![fail(), fail()], Budget::default());
        let labelled = |l: &str| DispatchSpec { label: l.into(), ..spec() };
        assert!(matches!(d.dispatch(labelled("a")).await, DispatchOutcome::Failed { .. }));
        assert_eq!(d.failing(), None, "one failure is not a streak");
        assert!(matches!(d.dispatch(labelled("b")).await, DispatchOutcome::Failed { .. }));
        assert_eq!(d.failing().as_deref(), Some("Invalid API key"));
        let shared = d.clone().with_fail_streak(d.streak.clone());
        match shared.dispatch(labelled("c")).await {
            DispatchOutcome::Failed { reason, .. } => assert_eq!(reason, "Invalid API key", "the cause, not run"),
            other => panic!("{other:?}"),
        }
        assert_eq!(d.budget().spent().dispatches, 2, "the skipped dispatch cost nothing");
    }

    /// Answers `{"a": <label>}` after a short wait, counting the attempts in flight; panics
    /// on the label `boom`.
    #[derive(Default)]
    struct Counting {
        now: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl Agent for Counting {
        fn describe(&self) -> String {
            "counting".into()
        }
        async fn invoke(&self, r: &DispatchRequest, _o: InvokeOptions) -> Result<AgentReply, AgentError> {
            use std::sync::atomic::Ordering::SeqCst;
            let label = r.context["label"].as_str().unwrap_or_default().to_string();
            assert_ne!(label, "boom", "a panicking agent");
            let now = self.now.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(now, SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
            self.now.fetch_sub(1, SeqCst);
            Ok(AgentReply { document: json!({"a": label}), usage: Usage::default(), raw: String::new() })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waves_keep_the_cap_and_the_order_of_the_specs_and_survive_a_panic() {
        let agent = Arc::new(Counting::default());
        let events = Arc::new(EventLog::discard("run", Arc::new(SystemClock)));
        let budget = Arc::new(BudgetTracker::new(Budget::default(), Default::default()));
        let d = Dispatcher::new(agent.clone(), events, budget, "test", PathBuf::from("/"), Duration::from_secs(5));
        let labels: Vec<String> = (0..40).map(|i| if i == 7 { "boom".into() } else { format!("l{i}") }).collect();
        let specs =
            labels.iter().map(|l| DispatchSpec { context: json!({"label": l}), label: l.clone(), ..spec() }).collect();
        let outcomes = d.dispatch_waves(specs, 4).await;
        assert_eq!(agent.most.load(std::sync::atomic::Ordering::SeqCst), 4, "four in flight at most, and at once");
        assert_eq!(outcomes.len(), 40);
        for (i, (o, l)) in outcomes.iter().zip(&labels).enumerate() {
            if i == 7 {
                assert_eq!(o.dispatch_id(), "lost-7", "the panicked dispatch is lost, the others run");
                continue;
            }
            assert_eq!(o.output(), Some(&json!({"a": l})), "outcome {i} is its spec's");
            assert_eq!(o.dispatch_id(), format!("d{:04}-finder-{l}", i + 1), "numbered in the order of the specs");
        }
    }

    #[tokio::test]
    async fn budget_refuses_dispatches_past_the_limit() {
        let d = dispatcher(vec![Ok(json!({"a": 1}))], Budget { max_dispatches: Some(1), ..Default::default() });
        assert!(d.dispatch(spec()).await.output().is_some());
        assert!(matches!(d.dispatch(spec()).await, DispatchOutcome::OverBudget { .. }));
    }
}
