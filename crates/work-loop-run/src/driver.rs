//! The loop itself: one step per engine state until the run ends, pauses for a person, or is
//! blocked. Every state change goes through `work_loop` (engine transitions with their guards
//! and lock, cohort verbs, plan parsing, adjudication classification).

use crate::prompts::{self, ADJUDICATOR, DRAFTER, IMPLEMENTER, QUALITY, REVIEWER};
use crate::risk::{self, ReviewMode};
use crate::state::{
    Fix, InFlight, LostWork, PendingDecision, ReviewerOutcome, Revision, RunnerState, STATE_FILE, UnitFinding,
};
use crate::verdict::{self, Facts, Target, Verdict, VerdictState};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use work_git::{Base, Compare, Git, TreeState};
use work_loop::adjudication::{self, Class};
use work_loop::cohort::{self, Caps, CohortState, ReviewRecord};
use work_loop::common::{read_status, sha256_hex};
use work_loop::engine::{self, EngineState, TransitionOpts};
use work_loop::plan::parse_plan;
use work_loop::table::{Mode, State};
use work_loop::{LoopError, SpecDir};
use work_runtime::ExitStatus;
use work_runtime::dispatch::{Access, DispatchOutcome, DispatchSpec, Dispatcher};
use work_runtime::run::RunContext;

/// One role's backend and pins (model and effort travel on every dispatch).
#[derive(Debug, Clone)]
pub struct RoleDispatch {
    /// The pinned model.
    pub model: String,
    /// The pinned effort.
    pub effort: String,
    /// The role's dispatcher.
    pub dispatcher: Dispatcher,
}

/// A person's decision passed on the command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum HumanInput {
    /// None: stop at a human gate.
    #[default]
    None,
    /// `--approve`: the person's approval at the gate the run waits at — the spec or plan gate
    /// (the status line becomes Approved), the merge gate (fires `done`), or a review stop that
    /// waits for a decision (the findings in question are accepted as residual risk), or a
    /// `snapshot-loss` stop (the loss is accepted, the step is done).
    Approve,
    /// `--reject TEXT`: spec-rejected / plan-rejected / blocker-applied with what to change, or
    /// at a review stop that waits for a decision, the findings in question sustained.
    Reject(String),
}

/// What a run is asked to do.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The spec directory, repository-relative (`docs/specs/<feature>`).
    pub spec_dir: String,
    /// `--mode` (engine mode) for a new run; must match on resume.
    pub mode: Option<Mode>,
    /// `--light` / `--full`.
    pub review_mode: Option<ReviewMode>,
    /// The gates in order (`lint`, `typecheck`, `test`), name and command.
    pub gates: Vec<(String, String)>,
    /// Timeout of each gate command ([`gate_timeout`] gives the default); a gate that runs
    /// past it is red ("timed out after Ns").
    pub gate_timeout: Option<Duration>,
    /// Retry caps for a new cohort.
    pub caps: Caps,
    /// Spec/plan review rounds with sustained findings before the run is blocked.
    pub max_spec_rounds: u32,
    /// A person's decision.
    pub human: HumanInput,
    /// `--resume`: the run must already exist.
    pub resume: bool,
}

/// How a `work loop run` invocation ended.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// True when the run is DONE.
    pub ok: bool,
    /// `done`, `paused` or `blocked`.
    pub outcome: String,
    /// A stable code (`spec-human-gate`, `implementation-retry-cap`, `task-unchanged`, …).
    pub reason: String,
    /// What happened, in words.
    pub message: String,
    /// The spec directory.
    pub spec_dir: String,
    /// The engine run id.
    pub run_id: Option<String>,
    /// The engine state now.
    pub state: Option<String>,
    /// `code` or `spec-plan`.
    pub mode: Option<String>,
    /// `light` or `full`.
    pub review_mode: Option<String>,
    /// Why that review mode.
    pub review_mode_reasons: Vec<String>,
    /// What a person does to continue (exit 3), or null.
    pub next: Option<Value>,
    /// The latest verdict record, repository-relative.
    pub verdict: Option<String>,
    /// Its state.
    pub verdict_state: Option<VerdictState>,
    /// Every verdict record of the run.
    pub verdicts: Vec<String>,
    /// The transitions this invocation applied (`FROM -> TO (event)`).
    pub transitions: Vec<String>,
    /// The cohort's counters now.
    pub implementation_retry_count: Option<u32>,
    /// The cohort's counters now.
    pub review_retry_count: Option<u32>,
    /// The work a step lost, when the run stopped `snapshot-loss`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_work: Option<LostWork>,
    /// The `work` run id of this invocation (its event log is `.work/runs/<id>/`).
    pub work_run: String,
    /// The exit status.
    #[serde(skip)]
    pub exit: ExitStatus,
}

/// Checks everything that can be bad input before anything is dispatched or changed.
pub fn preflight(root: &Path, s: &Settings) -> Result<SpecDir, LoopError> {
    let sd = SpecDir::open(root, &s.spec_dir)?;
    if !sd.dir().is_dir() {
        return Err(LoopError::bad(format!(
            "use spec directory `{}`: no such directory (create it; it may be empty, the drafter writes spec.md and plan.md)",
            s.spec_dir
        )));
    }
    cover_state_files(&sd)?;
    let engine_state = engine::load(&sd).map_err(|e| reset_hint(&sd, e.to_string()))?;
    cohort::load(&sd).map_err(|e| reset_hint(&sd, e.to_string()))?;
    // The driver's progress belongs to the engine's run: with no run there is nothing to read.
    let runner = if engine_state.is_some() { load_runner(&sd)? } else { None };
    let effective_mode = match &engine_state {
        None => {
            if s.resume {
                return Err(LoopError::bad(format!(
                    "resume `{}`: no engine-state.json there (start the run without --resume)",
                    sd.rel()
                )));
            }
            if s.human != HumanInput::None {
                return Err(LoopError::bad(format!(
                    "use --approve / --reject: no run in `{}` yet, so no gate awaits a decision",
                    sd.rel()
                )));
            }
            let mode = s.mode.unwrap_or(Mode::Code);
            if mode == Mode::Code
                && let Some(text) = sd.read_optional("plan.md")?
            {
                parse_plan(&text).map_err(|e| LoopError::bad(format!("read `{}/plan.md`: {e}", sd.rel())))?;
            }
            mode
        }
        Some(st) => {
            let mode = Mode::parse(&st.mode).unwrap_or(Mode::Code);
            if let Some(m) = s.mode
                && m != mode
            {
                return Err(LoopError::bad(format!(
                    "use --mode {}: the run in `{}` is in {} mode",
                    m.name(),
                    sd.rel(),
                    st.mode
                )));
            }
            // A person decides at a human gate, or at a review stop that waits for a decision
            // (review stasis, an undecided adjudication); a `snapshot-loss` stop takes an
            // approval only (the loss accepted).
            let waits_for_decision = runner.as_ref().is_some_and(|r| {
                r.run_id == st.run_id
                    && (r.pending_decision.as_ref().is_some_and(|p| {
                        (p.phase == "code" && st.state == State::CodeReview.name())
                            || (p.phase == "spec-plan" && st.state == State::SpecPlanReview.name())
                    }) || (r.lost_work.is_some()
                        && s.human == HumanInput::Approve
                        && st.state == State::CodeImplementation.name()))
            });
            let at_gate =
                [State::SpecHumanGate, State::PlanHumanGate, State::CodeHumanGate].iter().any(|g| g.name() == st.state);
            if s.human != HumanInput::None && !at_gate && !waits_for_decision {
                let flag = if s.human == HumanInput::Approve { "--approve" } else { "--reject" };
                return Err(LoopError::bad(format!(
                    "use {flag}: the run in `{}` is at {}, not at a human gate or a review stop that waits for a decision",
                    sd.rel(),
                    st.state
                )));
            }
            if s.review_mode == Some(ReviewMode::Light)
                && runner.as_ref().is_some_and(|r| r.run_id == st.run_id && r.review_mode == Some(ReviewMode::Full))
            {
                return Err(LoopError::bad(format!(
                    "use --light: the run in `{}` is in full review mode, and a full run never drops to light",
                    sd.rel()
                )));
            }
            mode
        }
    };
    if effective_mode == Mode::Code && s.gates.is_empty() {
        return Err(LoopError::bad(
            "run the gates: no gate command (set `[gates]` lint / typecheck / test in work.toml, or pass --test-cmd)",
        ));
    }
    if effective_mode == Mode::Code && !Git::new(root).is_repo() {
        return Err(LoopError::bad(format!(
            "check the working tree: `{}` is not a git repository (the engine checks every task with git)",
            root.display()
        )));
    }
    Ok(sd)
}

/// The loop's state files — the engine's, the cohort's and the driver's — are recorded and
/// checked by digest (`work_runtime::fsx::digests`): one changed between invocations (an
/// implementer that edited it and killed `work`, a script, a hand) is refused by the next.
fn cover_state_files(sd: &SpecDir) -> Result<(), LoopError> {
    for f in [engine::STATE_FILE, cohort::STATE_FILE, STATE_FILE] {
        work_runtime::fsx::digests::cover(&sd.file(f)?);
    }
    Ok(())
}

/// A refused state file's error, with the way to discard the run.
fn reset_hint(sd: &SpecDir, e: String) -> LoopError {
    LoopError::bad(format!(
        "{e} (`work loop engine reset {dir}` and `work loop cohort reset {dir}` discard the run, with a person's authorization)",
        dir = sd.rel()
    ))
}

/// Reads `loop-run.json`, digest-checked (see `work_runtime::fsx::digests`): the pinned gates,
/// the frozen check surface and the approved digests in it are what a resume trusts, so a file
/// changed or removed since `work` last wrote it is refused.
fn load_runner(sd: &SpecDir) -> Result<Option<RunnerState>, LoopError> {
    let path = sd.file(STATE_FILE)?;
    work_runtime::fsx::digests::cover(&path);
    let text = sd.read_optional(STATE_FILE).map_err(|e| reset_hint(sd, e.to_string()))?;
    if text.is_none() {
        work_runtime::fsx::digests::verify(&path, None)
            .map_err(|e| reset_hint(sd, format!("read `{}/{STATE_FILE}`: {e}", sd.rel())))?;
    }
    match text {
        None => Ok(None),
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| LoopError::bad(format!("read `{}/{STATE_FILE}`: {e}", sd.rel()))),
    }
}

/// Merges an adjudicator's answer with the reviewer's report into the adjudication artifact:
/// each entry keeps the adjudicator's disposition and reason and gains the reviewer's title,
/// file, line, severity and fix (the adjudicator's severity and fix win when given). When the
/// answer does not cover every finding of the report exactly once, or names a finding the
/// report does not have, the artifact is `ADJUDICATION-INDETERMINATE` with the reasons in
/// `invalid` (a loud stop: an unadjudicated finding is never silently dropped).
pub fn merge_adjudication(report: &Value, answer: &Value) -> Value {
    let empty = Vec::new();
    let report_findings = report.get("findings").and_then(Value::as_array).unwrap_or(&empty);
    let answers = answer.get("findings").and_then(Value::as_array).unwrap_or(&empty);
    let id_of = |v: &Value| v.get("id").and_then(Value::as_str).unwrap_or("").to_string();
    let mut by_id: BTreeMap<String, &Value> = BTreeMap::new();
    let mut invalid = Vec::new();
    for f in report_findings {
        if by_id.insert(id_of(f), f).is_some() {
            invalid.push(format!("the report uses finding id `{}` twice", id_of(f)));
        }
    }
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    let mut out = Vec::new();
    for a in answers {
        let id = id_of(a);
        *seen.entry(id.clone()).or_default() += 1;
        let Some(rf) = by_id.get(&id) else {
            invalid.push(format!("the adjudication names finding `{id}`, which the report does not have"));
            continue;
        };
        let pick = |k: &str, first: &Value, second: &Value| first.get(k).or_else(|| second.get(k)).cloned();
        let mut m = serde_json::Map::new();
        m.insert("id".into(), json!(id));
        m.insert("disposition".into(), a.get("disposition").cloned().unwrap_or(Value::Null));
        for k in ["severity", "fix"] {
            if let Some(v) = pick(k, a, rf) {
                m.insert(k.into(), v);
            }
        }
        for k in ["title", "file", "line", "detail", "gate"] {
            if let Some(v) = rf.get(k) {
                m.insert(k.into(), v.clone());
            }
        }
        for k in ["reason", "evidence"] {
            if let Some(v) = a.get(k) {
                m.insert(k.into(), v.clone());
            }
        }
        out.push(Value::Object(m));
    }
    for id in by_id.keys() {
        match seen.get(id).copied().unwrap_or(0) {
            0 => invalid.push(format!("finding `{id}` of the report was not adjudicated")),
            1 => {}
            n => invalid.push(format!("finding `{id}` was adjudicated {n} times")),
        }
    }
    let status = if invalid.is_empty() {
        answer.get("status").cloned().unwrap_or(json!("adjudicated"))
    } else {
        json!("ADJUDICATION-INDETERMINATE")
    };
    json!({ "status": status, "invalid": invalid, "findings": out })
}

/// One reviewer's adjudicated result in a round.
struct Adjudicated {
    outcome: ReviewerOutcome,
    sustained: Vec<Value>,
    /// Indeterminate or unadjudicated findings (an undecided adjudication).
    undecided: Vec<Value>,
    fingerprints: Vec<String>,
}

/// What a review round produced.
struct Round {
    results: Vec<Adjudicated>,
    /// `(reason code, message, exit)` when the round cannot be routed.
    stop: Option<(String, String, ExitStatus)>,
}

impl Round {
    fn sustained(&self) -> Vec<Value> {
        self.results.iter().flat_map(|r| r.sustained.clone()).collect()
    }

    fn undecided(&self) -> Vec<Value> {
        self.results.iter().flat_map(|r| r.undecided.clone()).collect()
    }

    fn fingerprints(&self) -> Vec<String> {
        let mut f: Vec<String> = self.results.iter().flat_map(|r| r.fingerprints.clone()).collect();
        f.sort();
        f.dedup();
        f
    }

    fn first_clean(&self) -> Option<String> {
        self.results.iter().find(|r| r.outcome.outcome == "clean").and_then(|r| r.outcome.adjudication.clone())
    }
}

type Step = Result<Option<Report>, LoopError>;

pub use crate::review_diff::MAX_DIFF_BYTES;

/// The gate timeout when work.toml sets none (`[timeouts].gate_secs`): a hanging suite is a red
/// gate, never a driver that waits forever while it holds the spec directory's lock.
pub const DEFAULT_GATE_SECS: u64 = 1800;

/// The gate timeout for a configured value (`[timeouts].gate_secs`), [`DEFAULT_GATE_SECS`] when
/// none is set.
pub fn gate_timeout(configured_secs: Option<u64>) -> Duration {
    Duration::from_secs(configured_secs.unwrap_or(DEFAULT_GATE_SECS))
}

/// Why a dispatch gave no usable answer.
#[derive(Debug, Clone)]
struct AskError {
    /// A stop code that overrides the caller's (`state-tampered`, `read-only-violated`), or
    /// `None` for a failed dispatch the caller names.
    fatal: Option<&'static str>,
    /// What happened.
    message: String,
}

/// Why a reviewer's report was not taken: the reviewer counts as missing, or the run stops.
enum AskOr {
    /// The reviewer counts as missing (why).
    Missing(String),
    /// A stop (a violation, the budget).
    Fatal(AskError),
}

impl AskError {
    fn failed(message: String) -> Self {
        AskError { fatal: None, message }
    }

    fn fatal(code: &'static str, message: String) -> Self {
        AskError { fatal: Some(code), message }
    }

    /// The stop code: the fatal one, else `fallback`.
    fn code(&self, fallback: &str) -> String {
        self.fatal.unwrap_or(fallback).to_string()
    }
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Every file under `dir`, recursively (none when it does not exist).
fn collect_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => collect_files(&p, out),
            Ok(_) => out.push(p),
            Err(_) => {}
        }
    }
}

/// The loop over one spec directory.
pub struct Driver {
    run: RunContext,
    roles: BTreeMap<String, RoleDispatch>,
    s: Settings,
    sd: SpecDir,
    git: Git,
    rs: RunnerState,
    transitions: Vec<String>,
    human: HumanInput,
}

impl Driver {
    /// A driver for a preflighted spec directory.
    pub fn new(run: RunContext, roles: BTreeMap<String, RoleDispatch>, s: Settings, sd: SpecDir) -> Self {
        let git = Git::new(&run.root);
        let human = s.human.clone();
        Driver { run, roles, s, sd, git, rs: RunnerState::default(), transitions: Vec::new(), human }
    }

    /// Runs until DONE, a human gate, or a stop. Never panics; an unexpected refusal or error
    /// ends the invocation BLOCKED (exit 1) with the reason.
    pub async fn drive(mut self) -> Report {
        let r = match self.drive_inner().await {
            Ok(r) => r,
            Err(e) => {
                let code = match &e {
                    LoopError::Refused { json, .. } => {
                        json.get("reason").and_then(Value::as_str).unwrap_or("refused").replace('_', "-")
                    }
                    LoopError::BadInput(_) => "error".into(),
                };
                self.report("blocked", &code, format!("failed to {e}"), None)
            }
        };
        self.run.finish(&r.outcome, json!({ "reason": r.reason, "state": r.state }));
        r
    }

    async fn drive_inner(&mut self) -> Result<Report, LoopError> {
        if let Some(r) = self.start()? {
            return Ok(r);
        }
        // Each pass applies at least one transition or ends; the bound only guards against a bug.
        for _ in 0..1000 {
            let st = self.engine()?;
            let Some(state) = st.parsed_state() else {
                let route = engine::resume_route(&st, None, None, None, self.sd.rel());
                return Ok(self.paused("legacy-state", route.message.clone(), json!({ "action": route.action })));
            };
            if matches!(
                state,
                State::CodeImplementation | State::CodeVerification | State::CodeReview | State::CodeHumanGate
            ) && let Some(m) = self.approved_drift()?
            {
                return Ok(self.blocked("approved-artifacts-changed", m));
            }
            let step = match state {
                State::SpecPlanDrafting => self.drafting(&st).await?,
                State::SpecPlanReview => self.spec_review(&st).await?,
                State::SpecHumanGate => self.spec_gate(&st)?,
                State::PlanHumanGate => self.plan_gate(&st)?,
                State::SpecPlanApproved => self.seal(&st)?,
                State::CodeImplementation => self.execute(&st).await?,
                State::CodeVerification => self.verify().await?,
                State::CodeReview => self.review(&st).await?,
                State::CodeHumanGate => self.code_gate(&st)?,
                State::Done => Some(self.done_report(&st)),
            };
            if let Some(r) = step {
                return Ok(r);
            }
        }
        Ok(self.report("blocked", "loop-guard", "the loop made no progress in 1000 steps".into(), None))
    }

    // ----- plumbing -------------------------------------------------------------------------

    fn engine(&self) -> Result<EngineState, LoopError> {
        engine::load(&self.sd)?
            .ok_or_else(|| LoopError::bad(format!("read `{}/engine-state.json`: it disappeared", self.sd.rel())))
    }

    fn cohort(&self) -> Result<CohortState, LoopError> {
        cohort::load(&self.sd)?
            .ok_or_else(|| LoopError::bad(format!("read `{}/state.json`: it disappeared", self.sd.rel())))
    }

    fn save(&self) -> Result<(), LoopError> {
        let p = self.sd.file(STATE_FILE)?;
        work_runtime::fsx::digests::cover(&p);
        self.run
            .write_state(&p, &self.rs)
            .map_err(|e| LoopError::bad(format!("write `{}/{STATE_FILE}`: {e}", self.sd.rel())))
    }

    fn rel(&self, name: &str) -> String {
        format!("{}/{name}", self.sd.rel())
    }

    fn write_json(&self, name: &str, v: &Value) -> Result<String, LoopError> {
        let p = self.sd.file(name)?;
        self.run.write_state(&p, v).map_err(|e| LoopError::bad(format!("write `{}`: {e}", self.rel(name))))?;
        Ok(self.rel(name))
    }

    fn status_of(&self, file: &str) -> Result<Option<String>, LoopError> {
        Ok(self.sd.read_optional(file)?.as_deref().and_then(read_status))
    }

    fn set_status(&self, file: &str, value: &str) -> Result<(), LoopError> {
        let text = self.sd.read_optional(file)?.unwrap_or_default();
        if read_status(&text).as_deref() == Some(value) {
            return Ok(());
        }
        let p = self.sd.file(file)?;
        work_runtime::fsx::write_atomic(&p, crate::status::set_status(&text, value).as_bytes())
            .map_err(|e| LoopError::bad(format!("write `{}`: {e}", self.rel(file))))?;
        self.run.progress(&format!("{}: Status: {value}", self.rel(file)));
        Ok(())
    }

    fn fire(&mut self, event: &str, opts: TransitionOpts) -> Result<EngineState, LoopError> {
        let out = engine::transition(&self.sd, event, opts, self.run.clock.as_ref())?;
        self.transitions.push(out.text.clone());
        self.run.emit("loop.transition", json!({ "event": event, "text": out.text }));
        self.run.progress(&format!("loop: {}", out.text));
        self.engine()
    }

    fn run_id(&self) -> String {
        self.rs.run_id.clone()
    }

    fn report(&self, outcome: &str, reason: &str, message: String, next: Option<Value>) -> Report {
        let st = engine::load(&self.sd).ok().flatten();
        let co = cohort::load(&self.sd).ok().flatten();
        let exit = match outcome {
            "done" => ExitStatus::Done,
            "paused" => ExitStatus::Paused,
            _ => ExitStatus::Unsuccessful,
        };
        let verdict = self.rs.verdicts.last().cloned();
        let verdict_state = verdict.as_ref().and_then(|v| {
            let name = v.strip_prefix(&format!("{}/", self.sd.rel()))?;
            let text = self.sd.read_optional(name).ok()??;
            let doc: Value = serde_json::from_str(&text).ok()?;
            serde_json::from_value(doc.get("state")?.clone()).ok()
        });
        Report {
            ok: outcome == "done",
            outcome: outcome.into(),
            reason: reason.into(),
            message,
            spec_dir: self.sd.rel().into(),
            run_id: st.as_ref().map(|s| s.run_id.clone()),
            state: st.as_ref().map(|s| s.state.clone()),
            mode: st.as_ref().map(|s| s.mode.clone()),
            review_mode: self.rs.review_mode.map(|m| m.name().to_string()),
            review_mode_reasons: self.rs.mode_reasons.clone(),
            next,
            verdict,
            verdict_state,
            verdicts: self.rs.verdicts.clone(),
            transitions: self.transitions.clone(),
            implementation_retry_count: co.as_ref().map(|c| c.implementation_retry_count),
            review_retry_count: co.as_ref().map(|c| c.review_retry_count),
            lost_work: self.rs.lost_work.clone().filter(|_| reason == boundary::LOSS),
            work_run: self.run.run_id.clone(),
            exit,
        }
    }

    fn blocked(&self, reason: &str, message: String) -> Report {
        self.run.progress(&format!("loop: BLOCKED ({reason}): {message}"));
        self.report("blocked", reason, message, None)
    }

    fn resume_cmd(&self) -> String {
        format!("work loop run {} --resume", self.sd.rel())
    }

    fn paused(&self, reason: &str, message: String, mut next: Value) -> Report {
        if let Value::Object(o) = &mut next {
            o.entry("resume").or_insert(json!(self.resume_cmd()));
        }
        self.run.progress(&format!("loop: waiting for a person ({reason}): {message}"));
        self.report("paused", reason, message, Some(next))
    }

    /// Hashes of the loop's own state files and review artifacts: no agent may change them.
    fn state_files_digest(&self) -> Result<String, LoopError> {
        let mut all = String::new();
        for f in ["engine-state.json", "state.json", STATE_FILE] {
            // A file its digest refuses (an agent rewrote it) reads as changed, not as an error.
            match self.sd.read_optional(f) {
                Ok(t) => all.push_str(&t.map(|t| sha256_hex(t.as_bytes())).unwrap_or_default()),
                Err(e) => all.push_str(&format!("<{e}>")),
            }
            all.push('|');
        }
        let mut files = Vec::new();
        collect_files(&self.sd.dir().join("reviews"), &mut files);
        files.sort();
        for p in files {
            let h = std::fs::read(&p).map(|b| sha256_hex(&b)).unwrap_or_else(|_| "<unreadable>".into());
            all.push_str(&format!("{}={h}|", p.display()));
        }
        Ok(all)
    }

    /// The state directory, repository-relative with a trailing `/`, when it lies inside the
    /// repository.
    fn state_prefix(&self) -> Option<String> {
        self.run.state_dir.strip_prefix(&self.run.root).ok().map(|p| format!("{}/", p.display())).filter(|p| p != "/")
    }

    /// The whole working tree as git sees it (HEAD, then every changed or untracked path with
    /// its status and content hash), the state directory aside: what a read-only dispatch
    /// must not change.
    fn tree_state(&self) -> Result<TreeState, LoopError> {
        let exclude: Vec<String> = self.state_prefix().into_iter().collect();
        self.git.tree_state(Base::Status, &exclude).map_err(|e| LoopError::bad(e.to_string()))
    }

    async fn ask(
        &self,
        role: &str,
        access: Access,
        prompt: String,
        schema: Value,
        context: Value,
        label: &str,
    ) -> Result<Value, AskError> {
        let Some(rd) = self.roles.get(role) else {
            return Err(AskError::failed(format!("no agent is configured for role {role}")));
        };
        let before = self.state_files_digest().map_err(|e| AskError::failed(e.to_string()))?;
        let tree_before = if access == Access::ReadOnly {
            Some(self.tree_state().map_err(|e| AskError::failed(e.to_string()))?)
        } else {
            None
        };
        let spec = DispatchSpec {
            role: role.into(),
            model: rd.model.clone(),
            effort: rd.effort.clone(),
            access,
            prompt,
            schema: Some(schema),
            context,
            label: label.into(),
        };
        let outcome = rd.dispatcher.dispatch(spec).await;
        let id = outcome.dispatch_id().to_string();
        self.guard(role, &id, &before, tree_before.as_ref())?;
        match outcome {
            DispatchOutcome::Ok { output, .. } => Ok(output),
            // Not the agent's failure: the run stops with reason `budget`, and a resume with a
            // bigger budget redoes this dispatch.
            DispatchOutcome::OverBudget { .. } => Err(AskError::fatal("budget", self.budget_message(role, &id))),
            other => Err(AskError::failed(format!(
                "{role} dispatch {id} {}",
                other.failure_reason().unwrap_or_else(|| "gave no answer".into())
            ))),
        }
    }

    /// Why the run stops at a dispatch the budget refused, and how to go on.
    fn budget_message(&self, who: &str, dispatch: &str) -> String {
        format!(
            "{}; the {who} dispatch {dispatch} was not run and nothing was counted: resume with a bigger budget (`{} --budget-dispatches N` / `--budget-tokens N` / `--budget-usd X`; the budget is per invocation)",
            self.run.budget.stop_line(),
            self.resume_cmd()
        )
    }

    /// A review round the budget cut short: it is taken back (round number, reviewer outcomes
    /// and findings of this round), so a resume with a bigger budget runs it again as the same
    /// round, and the run stops with reason `budget`.
    fn budget_round(&mut self, round_no: u32, msg: String) -> Result<Round, LoopError> {
        self.rs.unit_rounds = round_no.saturating_sub(1);
        self.rs.unit_reviews.retain(|o| o.round != round_no);
        self.rs.unit_findings.retain(|f| f.round != round_no);
        self.save()?;
        Ok(Round { results: Vec::new(), stop: Some(("budget".into(), msg, ExitStatus::Unsuccessful)) })
    }

    /// After a dispatch (or a fan-out of them): the loop's state files and review artifacts
    /// must be as they were, and a read-only dispatch must have left the tree as it was. Either
    /// violation is fatal (BLOCKED, whatever the caller would do with a failed dispatch).
    fn guard(
        &self,
        who: &str,
        dispatch: &str,
        state_before: &str,
        tree_before: Option<&TreeState>,
    ) -> Result<(), AskError> {
        if self.state_files_digest().map_err(|e| AskError::failed(e.to_string()))? != state_before {
            return Err(AskError::fatal(
                "state-tampered",
                format!(
                    "{who} dispatch {dispatch} changed the loop's state files (engine-state.json, state.json, {STATE_FILE} or reviews/ in `{}`); no agent may edit them: inspect and restore them before resuming",
                    self.sd.rel()
                ),
            ));
        }
        if let Some(before) = tree_before {
            let after = self.tree_state().map_err(|e| AskError::failed(e.to_string()))?;
            if &after != before {
                let mut changed = after.changed_since(before, Compare::StatusAndContent);
                if after.head != before.head {
                    changed.push("<HEAD>".into());
                }
                changed.sort();
                changed.dedup();
                let list = changed.join(", ");
                return Err(AskError::fatal(
                    "read-only-violated",
                    format!(
                        "{who} dispatch {dispatch} is read-only but changed the working tree ({list}); its report is not used: inspect the change before resuming"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// HEAD as a base reference (`""` on an unborn branch).
    fn head_ref(&self) -> String {
        self.git.head_sha().unwrap_or_default()
    }

    /// The change against `base` (`""`: no commit), outside the spec and state directories:
    /// every path that differs from it (committed, staged or not) or is untracked.
    fn tree_since(&self, base: &str) -> Result<TreeState, LoopError> {
        let against = if base.is_empty() { Base::Empty } else { Base::Commit(base) };
        self.git
            .tree_state(against, &self.review_excludes())
            .map_err(|e| LoopError::bad(format!("read the working tree's change: {e}")))
    }

    /// What code review leaves out: the spec directory and the state directory.
    fn review_excludes(&self) -> Vec<String> {
        let mut v = vec![self.sd.rel().to_string()];
        v.extend(self.state_prefix());
        v
    }

    /// The change against `base`, outside the spec and state directories: path ⇒ content hash
    /// of the working-tree file. Committed work counts: it differs from the base.
    fn snapshot_since(&self, base: &str) -> Result<BTreeMap<String, String>, LoopError> {
        Ok(self.tree_since(base)?.content_map("<absent>"))
    }

    /// The base code review measures against: HEAD when the code phase began (HEAD now for a
    /// run started before the base was recorded).
    fn review_base(&self) -> String {
        self.rs.code_base.clone().unwrap_or_else(|| self.head_ref())
    }

    /// The full diff reviewers see: `git diff <base>` (committed work included) plus every
    /// untracked file as an addition, outside the spec and state directories. Never cut: once
    /// it is over [`MAX_DIFF_BYTES`] the rest is not read, and [`crate::review_diff::whole`]
    /// refuses it.
    fn diff_text(&self, base: &str) -> String {
        let mut text = String::new();
        if !base.is_empty() {
            match self.git.diff_text(base, &["--no-color", "--no-renames"], &self.review_excludes()) {
                Ok(d) => text.push_str(&d),
                Err(e) => text.push_str(&format!("(git diff {base} failed: {e})\n")),
            }
        }
        // Without a base there is no `git diff`: every file is an addition.
        let added: Vec<String> = match self.tree_since(base) {
            Ok(st) if base.is_empty() => st.paths.into_keys().collect(),
            Ok(st) => st.untracked().map(str::to_string).collect(),
            Err(_) => Vec::new(),
        };
        for p in added {
            if text.len() > MAX_DIFF_BYTES {
                break;
            }
            let bytes = std::fs::read(self.run.root.join(&p)).unwrap_or_default();
            text.push_str(&format!("diff --git a/{p} b/{p}\nnew file (untracked)\n--- /dev/null\n+++ b/{p}\n"));
            match std::str::from_utf8(&bytes) {
                Ok(t) => {
                    for line in t.lines() {
                        text.push('+');
                        text.push_str(line);
                        text.push('\n');
                    }
                }
                Err(_) => text.push_str(&format!("Binary file {p} ({} bytes)\n", bytes.len())),
            }
        }
        text
    }

    fn target(&self) -> Target {
        let base = self.review_base();
        let snap = self.snapshot_since(&base).unwrap_or_default();
        let fp = serde_json::to_string(&snap).ok().map(|s| sha256_hex(s.as_bytes()));
        Target {
            base: Some(base).filter(|b| !b.is_empty()),
            head: self.git.head_sha(),
            diff_fingerprint: fp,
            changed_paths: snap.into_keys().collect(),
        }
    }

    // ----- start and resume -----------------------------------------------------------------

    fn start(&mut self) -> Result<Option<Report>, LoopError> {
        match engine::load(&self.sd)? {
            None => {
                if let Some(c) = cohort::load(&self.sd)? {
                    let msg = format!(
                        "`{}/state.json` belongs to run {} but there is no engine-state.json (an orphaned cohort); inspect it with `work loop cohort status {}` and, with explicit authorization, remove it with `work loop cohort reset {}`, then start again",
                        self.sd.rel(),
                        c.run_id,
                        self.sd.rel(),
                        self.sd.rel()
                    );
                    self.rs.run_id = c.run_id.clone();
                    return Ok(Some(self.paused(
                        "orphaned-cohort",
                        msg,
                        json!({ "action": "authorize-cohort-reset" }),
                    )));
                }
                let mode = self.s.mode.unwrap_or(Mode::Code);
                let out = engine::init(&self.sd, mode, self.run.clock.as_ref())?;
                let run_id = out.json.get("run_id").and_then(Value::as_str).unwrap_or_default().to_string();
                cohort::init(&self.sd, &run_id, self.s.caps, self.run.clock.as_ref())?;
                self.run.progress(&format!("loop: new {} run {run_id} in {}", mode.name(), self.sd.rel()));
                self.rs = RunnerState::new(&run_id);
            }
            Some(st) => {
                match cohort::load(&self.sd)? {
                    None => {
                        // A crash between the engine's and the cohort's init: finish the pair.
                        cohort::init(&self.sd, &st.run_id, self.s.caps, self.run.clock.as_ref())?;
                    }
                    Some(c) if c.run_id != st.run_id => {
                        self.rs.run_id = st.run_id.clone();
                        let msg = format!(
                            "the cohort belongs to run {}, the engine to {}: the pair is not one run; surface it, then reset both with explicit authorization",
                            c.run_id, st.run_id
                        );
                        return Ok(Some(self.paused(
                            "identity-mismatch",
                            msg,
                            json!({ "action": "surface-identity-mismatch" }),
                        )));
                    }
                    Some(_) => {}
                }
                self.rs = match load_runner(&self.sd)? {
                    Some(r) if r.run_id == st.run_id => r,
                    _ => RunnerState::new(&st.run_id),
                };
                self.run.progress(&format!("loop: resuming run {} at {}", st.run_id, st.state));
            }
        }
        self.pin_gates();
        if self.s.review_mode == Some(ReviewMode::Full) && self.rs.review_mode == Some(ReviewMode::Light) {
            self.rs.review_mode = Some(ReviewMode::Full);
            self.rs.mode_reasons.push("--full on resume: escalated from light".into());
        }
        self.save()?;
        Ok(None)
    }

    /// The gates are pinned when the run starts: a later invocation runs the same commands,
    /// whatever `work.toml` (which an implementer can edit) or `--test-cmd` says by then.
    fn pin_gates(&mut self) {
        match &self.rs.pinned_gates {
            None => self.rs.pinned_gates = Some(self.s.gates.clone()),
            Some(pinned) if *pinned != self.s.gates => {
                let now: Vec<String> = self.s.gates.iter().map(|(n, c)| format!("{n}=`{c}`")).collect();
                let was: Vec<String> = pinned.iter().map(|(n, c)| format!("{n}=`{c}`")).collect();
                self.run.emit("gates.pinned", json!({ "pinned": pinned, "configured": self.s.gates }));
                self.run.progress(&format!(
                    "loop: the gates changed since this run started ({}); running the pinned ones ({}) — start a new run to change them",
                    now.join(", "),
                    was.join(", ")
                ));
            }
            Some(_) => {}
        }
        self.s.gates = self.rs.pinned_gates.clone().unwrap_or_default();
    }

    /// Freezes what judges the code phase (see `work_git::surface`), once; the test runners the
    /// gates run report their suite here (the baseline green gates are compared with).
    async fn freeze_check_surface(&mut self) {
        if self.rs.check_surface.is_none() {
            let cmds: Vec<&str> = self.s.gates.iter().map(|(_, c)| c.as_str()).collect();
            let mut s =
                work_git::surface::CheckSurface::freeze(&self.run.root, &cmds, work_git::surface::Named::CheckLike);
            // A script only a gate names is the check; one the spec or plan names is the work.
            let work: String = ["spec.md", "plan.md"]
                .iter()
                .filter_map(|f| self.sd.read_optional(f).ok().flatten())
                .collect::<Vec<_>>()
                .join("\n");
            s.pin_unnamed_by(&self.run.root, &cmds, &work);
            s.record_tree(&self.git, &self.state_prefix().into_iter().collect::<Vec<_>>());
            s.record_suites(&self.run.spawner, &self.run.root, &cmds, self.s.gate_timeout).await;
            for (part, collected, skipped) in s.suites() {
                self.run.emit("suite.baseline", json!({ "command": part, "collected": collected, "skipped": skipped }));
            }
            self.rs.check_surface = Some(s);
        }
    }

    /// A stop when green gates ran a suite that lost tests since the code phase began (see
    /// `work_git::suite_report`).
    async fn suite_report_stop(&self) -> Option<Report> {
        let surface = self.rs.check_surface.as_ref()?;
        let lost = surface.suite_changes(&self.run.spawner, &self.run.root, self.s.gate_timeout).await;
        if lost.is_empty() {
            return None;
        }
        let what = work_git::surface::describe(&lost);
        self.run.emit("check-surface.changed", json!({ "changes": what }));
        Some(self.blocked(
            "check-tampered",
            format!(
                "the gates are green but their suite lost tests since the code phase began: {what}. Adding tests is the only change allowed: restore them (git diff shows the change), then resume"
            ),
        ))
    }

    /// A stop when the implementer changed what judges it: a gate's script, the configuration,
    /// or an existing test (adding tests is allowed).
    fn check_surface_stop(&self) -> Option<Report> {
        let surface = self.rs.check_surface.as_ref()?;
        let changes = surface.changes(&self.run.root, work_git::surface::TestEdits::Add);
        if changes.is_empty() {
            return None;
        }
        let what = work_git::surface::describe(&changes);
        self.run.emit("check-surface.changed", json!({ "changes": what }));
        Some(self.blocked(
            "check-tampered",
            format!(
                "the implementation changed what judges it: {what}. Gates are only as honest as the scripts and tests they run: restore them (git diff shows the change), then resume"
            ),
        ))
    }

    /// Records spec.md and plan.md as approved (status lines left out).
    fn record_approved(&mut self) -> Result<(), LoopError> {
        for file in ["spec.md", "plan.md"] {
            let text = self.sd.read_optional(file)?.unwrap_or_default();
            self.rs.approved_digests.insert(file.into(), crate::status::approved_digest(&text));
        }
        self.save()
    }

    /// Why the code phase must stop when spec.md or plan.md changed after plan-locked (status
    /// lines aside).
    fn approved_drift(&self) -> Result<Option<String>, LoopError> {
        let mut changed = Vec::new();
        for (file, digest) in &self.rs.approved_digests {
            let text = self.sd.read_optional(file)?.unwrap_or_default();
            if crate::status::approved_digest(&text) != *digest {
                changed.push(self.rel(file));
            }
        }
        if changed.is_empty() {
            return Ok(None);
        }
        Ok(Some(format!(
            "{} changed after the plan was locked: the code phase answers to what a person approved. Restore the approved text, or re-approve it (`work loop cohort approve-plan {} --rebaseline`) and start a new run",
            changed.join(" and "),
            self.sd.rel()
        )))
    }

    fn ensure_review_mode(&mut self) -> Result<ReviewMode, LoopError> {
        if let Some(m) = self.rs.review_mode {
            return Ok(m);
        }
        let spec = self.sd.read_optional("spec.md")?.unwrap_or_default();
        let plan = self.sd.read_optional("plan.md")?.unwrap_or_default();
        let d = risk::decide(self.s.review_mode, &spec, &plan);
        self.run.progress(&format!("loop: {} mode ({})", d.mode.name(), d.reasons.join("; ")));
        self.rs.review_mode = Some(d.mode);
        self.rs.mode_reasons = d.reasons;
        self.save()?;
        Ok(d.mode)
    }

    /// Starts a new review unit when `unit` differs from the current one.
    fn enter_unit(&mut self, unit: &str) -> Result<(), LoopError> {
        if self.rs.unit != unit {
            self.rs.unit = unit.into();
            self.rs.unit_rounds = 0;
            self.rs.unit_reviews.clear();
            self.rs.unit_findings.clear();
            self.rs.rereview_used = false;
            self.rs.light_next = None;
            self.save()?;
        }
        Ok(())
    }

    // ----- PLAN ---------------------------------------------------------------------------

    async fn drafting(&mut self, st: &EngineState) -> Step {
        let mode = st.mode.clone();
        let spec = self.sd.read_optional("spec.md")?;
        let plan = self.sd.read_optional("plan.md")?;
        let mut missing = Vec::new();
        if spec.is_none() {
            missing.push("spec.md");
        }
        if plan.is_none() {
            missing.push("plan.md");
        }
        if !missing.is_empty() || self.rs.revision.is_some() {
            let revision = self.rs.revision.as_ref().map(|r| r.detail.clone());
            let brief = prompts::drafter_brief(self.sd.rel(), &mode, &missing, revision.as_deref());
            let context = json!({
                "phase": "draft",
                "spec_dir": self.sd.rel(),
                "mode": mode,
                "missing": missing,
                "revision": self.rs.revision,
            });
            let guard = self.draft_guard();
            let asked =
                self.ask(DRAFTER, Access::WorkspaceWrite, brief, prompts::drafter_schema(), context, "draft").await;
            if let Some(stop) = self.drafted_outside(guard) {
                return Ok(Some(stop));
            }
            let out = match asked {
                Ok(o) => o,
                Err(e) => return Ok(Some(self.blocked(&e.code("drafter-failed"), e.message))),
            };
            if prompts::says_blocked(&out) {
                let why = out.get("summary").and_then(Value::as_str).unwrap_or("no reason given").to_string();
                return Ok(Some(self.blocked("drafter-blocked", format!("the drafter is blocked: {why}"))));
            }
            // Any other status word is a claim: the files decide.
            for f in ["spec.md", "plan.md"] {
                if self.sd.read_optional(f)?.is_none() {
                    return Ok(Some(self.blocked(
                        "draft-incomplete",
                        format!("the drafter answered but `{}` does not exist", self.rel(f)),
                    )));
                }
            }
            if self.rs.revision.is_some()
                && self.sd.read_optional("spec.md")? == spec
                && self.sd.read_optional("plan.md")? == plan
            {
                return Ok(Some(self.blocked(
                    "draft-unchanged",
                    format!(
                        "the drafter owed a revision but changed neither `{}` nor `{}`",
                        self.rel("spec.md"),
                        self.rel("plan.md")
                    ),
                )));
            }
            if mode == Mode::Code.name() {
                let text = self.sd.read_optional("plan.md")?.unwrap_or_default();
                if let Err(e) = parse_plan(&text) {
                    return Ok(Some(
                        self.blocked("plan-unparsable", format!("`{}` after drafting: {e}", self.rel("plan.md"))),
                    ));
                }
            }
            for f in &mut self.rs.unit_findings {
                if f.resolution == "open" {
                    f.resolution = "fixed".into();
                }
            }
            self.rs.revision = None;
            self.save()?;
        }
        self.fire("spec-ready", TransitionOpts::default())?;
        Ok(None)
    }

    async fn spec_review(&mut self, st: &EngineState) -> Step {
        let mode = self.ensure_review_mode()?;
        if mode == ReviewMode::Light {
            // Light mode trims the pre-EXECUTE spec/plan review (no structural trigger fired).
            self.run.progress("loop: light mode: pre-EXECUTE spec/plan review is a named skip");
            cohort::plan_mark_reviewed(&self.sd, Some(&self.run_id()))?;
            self.fire("reviewers-clean", TransitionOpts::default())?;
            return Ok(None);
        }
        let rejections = st.history.iter().filter(|h| h.event == "spec-rejected" || h.event == "plan-rejected").count();
        let unit = format!("spec-{}", rejections + 1);
        self.enter_unit(&unit)?;
        if let Some(step) = self.pending_decision(&unit, "spec-plan")? {
            return Ok(step);
        }
        let round = self.review_round(&unit, "spec-plan", &[REVIEWER]).await?;
        if let Some((code, msg, exit)) = round.stop.clone() {
            return self.stop_round(&unit, "spec-plan", &round, &code, msg, exit);
        }
        let sustained = round.sustained();
        if sustained.is_empty() {
            self.spec_clean()?;
            return Ok(None);
        }
        let revisions = st
            .history
            .iter()
            .filter(|h| h.event == "findings-remain" && h.from == State::SpecPlanReview.name())
            .count();
        if revisions as u32 >= self.s.max_spec_rounds {
            let msg = format!(
                "the spec/plan review still sustains {} finding(s) after {revisions} revision(s) (--max-spec-rounds {})",
                sustained.len(),
                self.s.max_spec_rounds
            );
            self.write_verdict(Some(msg.clone()), Vec::new())?;
            return Ok(Some(self.blocked("spec-review-cap", msg)));
        }
        let detail = findings_text(&sustained);
        self.spec_revise(sustained, detail)?;
        Ok(None)
    }

    /// The spec/plan review unit is adjudicated clean (or its open findings were accepted).
    fn spec_clean(&mut self) -> Result<(), LoopError> {
        self.write_verdict(None, Vec::new())?;
        cohort::plan_mark_reviewed(&self.sd, Some(&self.run_id()))?;
        self.fire("reviewers-clean", TransitionOpts::default())?;
        Ok(())
    }

    /// Sustained spec/plan findings go back to the drafter.
    fn spec_revise(&mut self, findings: Vec<Value>, detail: String) -> Result<(), LoopError> {
        self.fire("findings-remain", TransitionOpts::default())?;
        self.rs.revision = Some(Revision { kind: "review".into(), detail, findings });
        self.save()?;
        self.write_verdict(None, Vec::new())?;
        Ok(())
    }

    /// A round that stopped: BLOCKED, or (an undecided adjudication) a pause that waits for a
    /// person's decision, remembered so that a resume does not pay for another round.
    fn stop_round(
        &mut self,
        unit: &str,
        phase: &str,
        round: &Round,
        code: &str,
        msg: String,
        exit: ExitStatus,
    ) -> Step {
        if code == "budget" {
            // No review result: the round was taken back, and no verdict is written for it.
            return Ok(Some(self.blocked(code, msg)));
        }
        self.write_verdict(Some(msg.clone()), Vec::new())?;
        if exit != ExitStatus::Paused {
            return Ok(Some(self.blocked(code, msg)));
        }
        let p = PendingDecision {
            unit: unit.into(),
            phase: phase.into(),
            reason: code.into(),
            message: msg,
            round: self.rs.unit_rounds,
            undecided: round.undecided(),
            sustained: round.sustained(),
        };
        Ok(Some(self.wait_for_decision(p)?))
    }

    /// Records a stop that a person decides, and pauses.
    fn wait_for_decision(&mut self, p: PendingDecision) -> Result<Report, LoopError> {
        self.rs.pending_decision = Some(p.clone());
        self.save()?;
        Ok(self.decision_pause(&p))
    }

    fn decision_pause(&self, p: &PendingDecision) -> Report {
        let approve = format!("work loop run {} --resume --approve", self.sd.rel());
        let reject = format!("work loop run {} --resume --reject \"<what to change>\"", self.sd.rel());
        let back = if p.phase == "spec-plan" { "the drafter" } else { "implementation" };
        let msg = format!(
            "{} — a person decides: `{approve}` accepts the {} finding(s) in question as residual risk; `{reject}` sends them back to {back} as sustained, with what to change (resuming without a decision asks again, with no new review)",
            p.message,
            p.undecided.len()
        );
        self.paused(
            &p.reason,
            msg,
            json!({
                "action": "decide",
                "findings": p.undecided.iter().map(|f| f.get("id").cloned().unwrap_or(Value::Null)).collect::<Vec<_>>(),
                "approve": approve,
                "reject": reject,
            }),
        )
    }

    /// A stop of this unit that waits for a person: without a decision it pauses again (no new
    /// round); `--approve` accepts the findings in question as residual risk; `--reject TEXT`
    /// sustains them and reopens the work with the person's words. `None` when nothing waits.
    fn pending_decision(&mut self, unit: &str, phase: &str) -> Result<Option<Option<Report>>, LoopError> {
        let Some(p) = self.rs.pending_decision.clone() else { return Ok(None) };
        if p.unit != unit || p.phase != phase {
            // A stale decision of another unit (the engine moved on by hand): forget it.
            self.rs.pending_decision = None;
            self.save()?;
            return Ok(None);
        }
        match std::mem::take(&mut self.human) {
            HumanInput::None => Ok(Some(Some(self.decision_pause(&p)))),
            HumanInput::Approve => {
                self.rs.pending_decision = None;
                self.settle_undecided(&p, "accepted");
                self.save()?;
                self.run.emit("loop.decision", json!({ "unit": unit, "reason": p.reason, "decision": "approve" }));
                self.run.progress(&format!("loop: a person accepted the findings of {} as residual risk", p.reason));
                if !p.sustained.is_empty() {
                    let detail = findings_text(&p.sustained);
                    return if phase == "spec-plan" {
                        self.spec_revise(p.sustained.clone(), detail)?;
                        Ok(Some(None))
                    } else {
                        Ok(Some(self.reopen_code(p.sustained.clone(), detail)?))
                    };
                }
                if phase == "spec-plan" {
                    self.spec_clean()?;
                } else {
                    self.ship_code(None, Vec::new())?;
                }
                Ok(Some(None))
            }
            HumanInput::Reject(text) => {
                self.rs.pending_decision = None;
                self.settle_undecided(&p, "open");
                self.save()?;
                self.run.emit("loop.decision", json!({ "unit": unit, "reason": p.reason, "decision": "reject" }));
                let mut all = p.sustained.clone();
                all.extend(p.undecided.iter().cloned());
                let detail = format!("A person decided ({}): {text}\n{}", p.reason, findings_text(&all));
                if phase == "spec-plan" {
                    self.spec_revise(all, detail)?;
                    Ok(Some(None))
                } else {
                    Ok(Some(self.reopen_code(all, detail)?))
                }
            }
        }
    }

    /// Sets the resolution of the findings in question (adding those the unit does not hold
    /// yet, such as undecided ones).
    fn settle_undecided(&mut self, p: &PendingDecision, resolution: &str) {
        for f in &p.undecided {
            let s = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let (reviewer, id) = (s("reviewer"), s("id"));
            let mut found = false;
            for u in &mut self.rs.unit_findings {
                if u.reviewer == reviewer && u.id == id && u.round == p.round && u.resolution == "open" {
                    u.resolution = resolution.into();
                    found = true;
                }
            }
            if !found {
                self.rs.unit_findings.push(UnitFinding {
                    reviewer,
                    round: p.round,
                    id,
                    severity: s("severity"),
                    title: s("title"),
                    fingerprint: fingerprint_or_compute(f),
                    resolution: resolution.into(),
                });
            }
        }
    }

    fn gate_next(&self, file: &str, status: &str, what: &str) -> Value {
        json!({
            "action": format!("approve-{what}"),
            "file": self.rel(file),
            "edit": format!("set the status line of {} to `**Status:** {status}`", self.rel(file)),
            "then": self.resume_cmd(),
            "approve": format!("work loop run {} --resume --approve", self.sd.rel()),
            "reject": format!("work loop run {} --resume --reject \"<what to change>\"", self.sd.rel()),
        })
    }

    fn reject_to_drafting(&mut self, event: &str, text: &str) -> Step {
        self.fire(event, TransitionOpts::default())?;
        self.rs.revision = Some(Revision {
            kind: "rejected".into(),
            detail: format!("A person rejected it: {text}"),
            findings: Vec::new(),
        });
        self.save()?;
        self.set_status("spec.md", "Draft")?;
        self.set_status("plan.md", "Drafting")?;
        Ok(None)
    }

    /// A spec or plan human gate. `--reject` sends the spec back to drafting; `--approve` sets
    /// the file's status line to Approved and fires the gate; an Approved status line fires it
    /// only after the run has paused at this gate once (the gate is a person's decision, not a
    /// file state: an approval written before the gate was reached, or before a revision, is
    /// confirmed by resuming).
    fn human_gate(&mut self, st: &EngineState, file: &str, what: &str) -> Step {
        let (approved_event, rejected_event, code) = if what == "spec" {
            ("spec-approved", "spec-rejected", "spec-human-gate")
        } else {
            ("plan-approved", "plan-rejected", "plan-human-gate")
        };
        match std::mem::take(&mut self.human) {
            HumanInput::Reject(text) => return self.reject_to_drafting(rejected_event, &text),
            HumanInput::Approve => {
                self.set_status(file, "Approved")?;
                self.rs.gate_waited = None;
                self.save()?;
                self.fire(approved_event, TransitionOpts::default())?;
                return Ok(None);
            }
            HumanInput::None => {}
        }
        let status = self.status_of(file)?;
        let waited_here = self.rs.gate_waited == Some(st.transition_sequence);
        match status.as_deref() {
            Some("Approved") if waited_here => {
                self.rs.gate_waited = None;
                self.save()?;
                self.fire(approved_event, TransitionOpts::default())?;
                Ok(None)
            }
            Some("Implementing" | "Shipped" | "Archived") if what == "spec" => {
                let route = engine::resume_route(st, None, status.as_deref(), None, self.sd.rel());
                Ok(Some(self.paused(&route.action, route.message, json!({ "action": route.action }))))
            }
            Some("Executing" | "Done") if what == "plan" => {
                let route = engine::resume_route(st, None, None, status.as_deref(), self.sd.rel());
                Ok(Some(self.paused(&route.action, route.message, json!({ "action": route.action }))))
            }
            other => {
                self.rs.gate_waited = Some(st.transition_sequence);
                self.save()?;
                let msg = if other == Some("Approved") {
                    format!(
                        "the {what} awaits a person's approval: {} already says `Approved`, but that predates this gate; confirm it with `{}` (or `{} --approve`), or reject with `--reject \"<what to change>\"`",
                        self.rel(file),
                        self.resume_cmd(),
                        self.resume_cmd()
                    )
                } else {
                    format!(
                        "the {what} awaits approval: set `**Status:** Approved` in {} and run `{}`, or run `{} --approve`",
                        self.rel(file),
                        self.resume_cmd(),
                        self.resume_cmd()
                    )
                };
                Ok(Some(self.paused(code, msg, self.gate_next(file, "Approved", what))))
            }
        }
    }

    fn spec_gate(&mut self, st: &EngineState) -> Step {
        self.human_gate(st, "spec.md", "spec")
    }

    fn plan_gate(&mut self, st: &EngineState) -> Step {
        self.human_gate(st, "plan.md", "plan")
    }

    fn seal(&mut self, st: &EngineState) -> Step {
        let run = self.run_id();
        cohort::approve_plan(&self.sd, Some(&run), false, self.run.clock.as_ref())?;
        if st.mode == Mode::Code.name() {
            cohort::schedule(&self.sd, Some(&run))?;
        }
        self.fire("plan-locked", TransitionOpts::default())?;
        self.record_approved()?;
        Ok(None)
    }

    // ----- EXECUTE ------------------------------------------------------------------------

    async fn execute(&mut self, st: &EngineState) -> Step {
        let run = self.run_id();
        let last = st.last_event.clone().unwrap_or_default();
        // Idempotent re-issues of the cohort step that follows each transition.
        match last.as_str() {
            "wave-passed" => {
                let n = st.last_event_context.get("completed_wave_index").and_then(Value::as_u64).unwrap_or_default();
                cohort::wave_advance(&self.sd, n as usize, Some(&run))?;
            }
            "gates-failed" => {
                let cycle = st
                    .last_event_context
                    .get("cycle_id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{run}:{}", st.transition_sequence));
                cohort::record_attempt(&self.sd, &cycle, Some(&run))?;
                if self.rs.fix.is_none() {
                    let detail = gates_text(&self.rs.last_gates);
                    self.rs.fix = Some(Fix { kind: "gates".into(), detail, findings: Vec::new() });
                    self.save()?;
                }
            }
            "findings-remain" if self.rs.recorded_seq != Some(st.transition_sequence) => {
                let route = engine::resume_route(st, None, None, None, self.sd.rel());
                return Ok(Some(self.paused(&route.action, route.message, json!({ "action": route.action }))));
            }
            "blocker-applied" if self.rs.fix.is_none() => {
                return Ok(Some(self.paused(
                    "no-fix-recorded",
                    "blocker-applied was fired outside `work loop run`, so the requested change is unknown; describe it with `--reject` at the merge gate, or drive this step by hand".into(),
                    json!({ "action": "describe-the-change" }),
                )));
            }
            _ => {}
        }
        if matches!(self.status_of("spec.md")?.as_deref(), None | Some("Draft" | "Approved")) {
            self.set_status("spec.md", "Implementing")?;
        }
        if self.rs.code_base.is_none() {
            // The base code review measures against: committed work stays in view.
            self.rs.code_base = Some(self.head_ref());
            self.save()?;
        }
        if self.rs.check_surface.is_none() {
            self.freeze_check_surface().await;
            self.save()?;
        }
        if self.rs.git_seal.is_none() {
            // A `.gitignore` the spec or plan names is the work.
            let work: String = ["spec.md", "plan.md"]
                .iter()
                .filter_map(|f| self.sd.read_optional(f).ok().flatten())
                .collect::<Vec<_>>()
                .join("\n");
            self.rs.git_seal = self.git.seal().ok().map(|mut seal| {
                seal.allow_named_by(&work);
                seal
            });
            self.save()?;
        }
        let units = st.history.iter().filter(|h| h.event == "blocker-applied").count();
        self.enter_unit(&format!("code-{}", units + 1))?;
        if let Some(fix) = self.rs.fix.clone() {
            let label = format!("fix-{}", fix.kind);
            let ctx = json!({
                "phase": "fix",
                "task_id": label,
                "fix_kind": fix.kind,
                "detail": fix.detail,
                "findings": fix.findings,
                "spec_dir": self.sd.rel(),
            });
            let (dir, kind, detail) = (self.sd.rel().to_string(), fix.kind.clone(), fix.detail.clone());
            let mut text = fix.detail.clone();
            boundary::strings_of(&Value::Array(fix.findings.clone()), &mut text);
            let brief = |nudge: Option<&str>| prompts::fix_brief(&dir, &kind, &detail, nudge);
            if let Some(r) = self.implement_step(&label, ctx, brief, &text, false).await? {
                return Ok(Some(r));
            }
            for f in &mut self.rs.unit_findings {
                if f.resolution == "open" {
                    f.resolution = "fixed".into();
                }
            }
            self.rs.fix = None;
            self.rs.in_flight = None;
            self.save()?;
        } else {
            let c = self.cohort()?;
            let wave_index = c.current_wave_index;
            let wave = c.schedule_waves.get(wave_index).cloned().unwrap_or_default();
            let text = self.sd.read_optional("plan.md")?.unwrap_or_default();
            let plan = parse_plan(&text).map_err(|e| LoopError::bad(format!("read `{}`: {e}", self.rel("plan.md"))))?;
            let key = wave_index.to_string();
            let total: usize = c.schedule_waves.iter().map(Vec::len).sum();
            let mut done = c.schedule_waves.iter().take(wave_index).map(Vec::len).sum::<usize>()
                + self.rs.done_tasks.get(&key).map_or(0, Vec::len);
            for id in wave {
                if self.rs.done_tasks.get(&key).is_some_and(|d| d.contains(&id)) {
                    continue;
                }
                let Some(task) = plan.task(&id).cloned() else {
                    return Ok(Some(self.blocked(
                        "plan-changed",
                        format!(
                            "task {id} of wave {wave_index} is no longer in plan.md (the approved baseline changed)"
                        ),
                    )));
                };
                let ctx = json!({
                    "phase": "implement",
                    "task_id": task.id,
                    "title": task.title,
                    "wave_index": wave_index,
                    "spec_dir": self.sd.rel(),
                });
                let dir = self.sd.rel().to_string();
                let start = json!({"task_id": task.id, "title": task.title, "done": done, "total": total});
                self.run.emit("task.start", start);
                self.run.progress(&format!("loop: wave {wave_index}: task {}: {}", task.id, task.title));
                let text = format!("{}\n{}", task.title, task.body);
                let brief = |nudge: Option<&str>| prompts::task_brief(&dir, &task.id, &task.title, &task.body, nudge);
                if let Some(r) = self.implement_step(&format!("task-{}", task.id), ctx, brief, &text, true).await? {
                    self.run.emit("task.end", json!({"task_id": task.id, "status": "BLOCKED", "reason": r.message}));
                    return Ok(Some(r));
                }
                self.run.emit("task.end", json!({"task_id": task.id, "status": "DONE"}));
                done += 1;
                self.rs.done_tasks.entry(key.clone()).or_default().push(id);
                self.rs.in_flight = None;
                self.save()?;
            }
        }
        self.fire("wave-complete", TransitionOpts::default())?;
        self.rs.done_tasks.clear();
        self.save()?;
        Ok(None)
    }

    /// One implementer dispatch (and one more when the first changed nothing). The base (HEAD)
    /// and the tree's change against it are taken once, before the first dispatch, and
    /// persisted (`in_flight` in loop-run.json) before it: committed work counts, and a run
    /// killed mid-dispatch judges the resumed dispatch against the real before state. The
    /// caller clears `in_flight` when it records the task or fix as done. `Ok(Err(..))` is a
    /// stop with its reason code.
    async fn implement(
        &mut self,
        label: &str,
        context: Value,
        brief: impl Fn(Option<&str>) -> String,
    ) -> Result<Result<(), (String, String)>, LoopError> {
        const NUDGE: &str = "Your previous answer said done, but the working tree outside the spec directory did not change (committed work included): the task is not done. Make the change now.";
        let (mut attempt, base, before) = match self.rs.in_flight.clone() {
            Some(f) if f.label == label => {
                self.run.progress(&format!(
                    "loop: {label}: resuming an interrupted dispatch (attempt {}), judged against the tree before it",
                    f.attempt
                ));
                (f.attempt.clamp(1, 2), f.base, f.before)
            }
            _ => {
                let base = self.head_ref();
                let before = self.snapshot_since(&base)?;
                (1, base, before)
            }
        };
        while attempt <= 2 {
            self.rs.in_flight =
                Some(InFlight { label: label.into(), attempt, base: base.clone(), before: before.clone() });
            self.save()?;
            let mut ctx = context.clone();
            if let Value::Object(o) = &mut ctx {
                o.insert("attempt".into(), json!(attempt));
            }
            let nudge = (attempt > 1).then_some(NUDGE);
            let out = match self
                .ask(IMPLEMENTER, Access::WorkspaceWrite, brief(nudge), prompts::implementer_schema(), ctx, label)
                .await
            {
                Ok(o) => o,
                Err(e) => return Ok(Err((e.code("implementer-failed"), e.message))),
            };
            if prompts::says_blocked(&out) {
                let why = out.get("summary").and_then(Value::as_str).unwrap_or("no reason given");
                return Ok(Err(("implementer-blocked".into(), format!("{label}: the implementer is blocked: {why}"))));
            }
            if let Some(m) = self.approved_drift()? {
                return Ok(Err(("approved-artifacts-changed".into(), m)));
            }
            let after = self.snapshot_since(&base)?;
            if after != before {
                let changed: Vec<&String> =
                    after.iter().filter(|(k, v)| before.get(*k) != Some(v)).map(|(k, _)| k).collect();
                let gone: Vec<&String> = before.keys().filter(|k| !after.contains_key(*k)).collect();
                self.run.emit(
                    "loop.task.done",
                    json!({ "label": label, "base": base, "head": self.git.head_sha(), "changed": changed, "reverted": gone }),
                );
                return Ok(Ok(()));
            }
            self.run
                .progress(&format!("loop: {label}: the implementer claimed done but the working tree did not change"));
            self.run.emit("loop.task.unchanged", json!({ "label": label, "attempt": attempt }));
            attempt += 1;
        }
        // A later resume starts the task afresh (two more dispatches).
        self.rs.in_flight = None;
        self.save()?;
        Ok(Err((
            "task-unchanged".into(),
            format!("{label}: the implementer claimed done twice but changed nothing in the working tree: not done"),
        )))
    }

    // ----- GATES --------------------------------------------------------------------------

    async fn verify(&mut self) -> Step {
        if let Some(msg) = self.rs.git_seal.as_ref().and_then(|seal| crate::git_seal::tampered(&self.git, seal)) {
            return Ok(Some(self.blocked(crate::git_seal::TAMPERED, msg)));
        }
        if let Some(r) = self.check_surface_stop() {
            return Ok(Some(r));
        }
        let mut runs = Vec::new();
        let mut red = false;
        for (name, cmd) in self.s.gates.clone() {
            self.run.emit("gate.start", json!({ "gate": name, "command": cmd }));
            let (green, end, tail) = match self.run.spawner.shell(&cmd, &self.run.root, self.s.gate_timeout).await {
                Ok(out) => {
                    let mut text = out.stdout_text();
                    text.push_str(&out.stderr_text());
                    (out.success(), out.describe_end(), last_lines(&text, 20))
                }
                Err(e) => (false, format!("could not start: {e}"), String::new()),
            };
            self.run.emit("gate.end", json!({ "gate": name, "green": green, "end": end }));
            self.run.progress(&format!("gate {name}: {} ({end})", if green { "green" } else { "red" }));
            runs.push(json!({ "gate": name, "command": cmd, "green": green, "end": end, "tail": tail }));
            if !green {
                red = true;
                break;
            }
        }
        self.rs.last_gates = runs;
        self.save()?;
        if !red && let Some(r) = self.suite_report_stop().await {
            return Ok(Some(r));
        }
        if !red && let Some(r) = self.restored_stop().await {
            return Ok(Some(r));
        }
        let c = self.cohort()?;
        let wave = Some(c.current_wave_index);
        if !red {
            if c.more_waves() {
                let st = self.fire("wave-passed", TransitionOpts { wave_index: wave, intent_incomplete: false })?;
                let n = st.last_event_context.get("completed_wave_index").and_then(Value::as_u64).unwrap_or_default();
                cohort::wave_advance(&self.sd, n as usize, Some(&self.run_id()))?;
            } else {
                self.fire("gates-clean", TransitionOpts { wave_index: wave, intent_incomplete: false })?;
            }
            return Ok(None);
        }
        if c.implementation_retry_count >= c.implementation_retry_cap {
            let msg = format!(
                "the gates are still red and the implementation retry cap is reached ({}/{}): {}",
                c.implementation_retry_count,
                c.implementation_retry_cap,
                gates_text(&self.rs.last_gates)
            );
            return Ok(Some(self.blocked("implementation-retry-cap", msg)));
        }
        let st = self.fire("gates-failed", TransitionOpts::default())?;
        let cycle = st
            .last_event_context
            .get("cycle_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{}:{}", st.run_id, st.transition_sequence));
        cohort::record_attempt(&self.sd, &cycle, Some(&self.run_id()))?;
        self.rs.fix = Some(Fix { kind: "gates".into(), detail: gates_text(&self.rs.last_gates), findings: Vec::new() });
        self.save()?;
        Ok(None)
    }

    // ----- REVIEW and DECIDE --------------------------------------------------------------

    async fn review_round(&mut self, unit: &str, phase: &str, roles: &[&str]) -> Result<Round, LoopError> {
        let round_no = self.rs.unit_rounds + 1;
        self.rs.unit_rounds = round_no;
        self.save()?;
        let mut shared = json!({
            "phase": phase,
            "spec_dir": self.sd.rel(),
            "review_unit": unit,
            "round": round_no,
        });
        // What a clean verdict must show it read (one of them at least).
        let mut changed = vec![self.rel("spec.md"), self.rel("plan.md")];
        let target = if phase == "spec-plan" {
            format!("the spec `{}` and plan `{}`", self.rel("spec.md"), self.rel("plan.md"))
        } else {
            // The whole change since the code phase began, committed work included: the full
            // diff travels in the context, so nothing the implementer touched is hidden.
            let base = self.review_base();
            let snap = self.snapshot_since(&base)?;
            changed = snap.keys().cloned().collect();
            let against = if base.is_empty() {
                "the empty tree (no commit yet): every file".to_string()
            } else {
                format!("base commit {base} (`git diff {base}` plus untracked files, committed work included)")
            };
            if let Value::Object(o) = &mut shared {
                o.insert("base".into(), json!(base));
                o.insert("head".into(), json!(self.git.head_sha()));
                o.insert("changed_paths".into(), json!(snap.keys().collect::<Vec<_>>()));
                match crate::review_diff::whole(self.diff_text(&base), &changed) {
                    Ok(diff) => o.insert("diff".into(), json!(diff)),
                    Err(msg) => {
                        let stop = Some((crate::review_diff::TOO_LARGE.into(), msg, ExitStatus::Unsuccessful));
                        return Ok(Round { results: Vec::new(), stop });
                    }
                };
            }
            format!(
                "the working tree's change against {against}, outside `{}/`; the full diff is in context.diff",
                self.sd.rel()
            )
        };
        if let Value::Object(o) = &mut shared {
            o.insert("target".into(), json!(target));
        }
        let with = |extra: Value| {
            let mut c = shared.clone();
            if let (Value::Object(o), Value::Object(e)) = (&mut c, extra) {
                o.extend(e);
            }
            c
        };
        // The guard around the fan-out: reviewers are read-only and never touch loop state.
        let state_before = self.state_files_digest()?;
        let tree_before = self.tree_state()?;
        // Fan-out: every reviewer at once; the join is the barrier.
        let mut set = tokio::task::JoinSet::new();
        for (i, role) in roles.iter().enumerate() {
            let Some(rd) = self.roles.get(*role) else { continue };
            let spec = DispatchSpec {
                role: (*role).into(),
                model: rd.model.clone(),
                effort: rd.effort.clone(),
                access: Access::ReadOnly,
                prompt: prompts::review_brief(role, phase, self.sd.rel(), &target),
                schema: Some(prompts::report_schema()),
                context: shared.clone(),
                label: format!("{unit}-r{round_no}"),
            };
            let d = rd.dispatcher.clone();
            set.spawn(async move { (i, d.dispatch(spec).await) });
        }
        let mut outcomes: BTreeMap<usize, DispatchOutcome> = BTreeMap::new();
        while let Some(joined) = set.join_next().await {
            if let Ok((i, o)) = joined {
                outcomes.insert(i, o);
            }
        }
        let mut round = Round { results: Vec::new(), stop: None };
        let who = roles.join(" / ");
        let ids = outcomes.values().map(|o| o.dispatch_id().to_string()).collect::<Vec<_>>().join(", ");
        if let Err(e) = self.guard(&who, &ids, &state_before, Some(&tree_before)) {
            round.stop = Some((e.code("reviewer-violation"), e.message, ExitStatus::Unsuccessful));
            return Ok(round);
        }
        if let Some(o) = outcomes.values().find(|o| matches!(o, DispatchOutcome::OverBudget { .. })) {
            let msg = self.budget_message(&who, o.dispatch_id());
            return self.budget_round(round_no, msg);
        }
        for (i, role) in roles.iter().enumerate() {
            let base = format!("reviews/{unit}/r{round_no}-{role}");
            let first = match outcomes.get(&i) {
                Some(DispatchOutcome::Ok { output, .. }) => Ok(prompts::normalize_report(output)),
                other => Err(format!(
                    "its dispatch {}",
                    other.and_then(DispatchOutcome::failure_reason).unwrap_or_else(|| "did not run".into())
                )),
            };
            let proven = match first {
                Ok(report) => {
                    self.proven(role, phase, report, &changed, &shared, &target, &format!("{unit}-r{round_no}")).await
                }
                Err(why) => Err(AskOr::Missing(why)),
            };
            let report = match proven {
                Ok(report) => report,
                Err(AskOr::Fatal(e)) if e.fatal == Some("budget") => return self.budget_round(round_no, e.message),
                Err(AskOr::Fatal(e)) => {
                    round.stop = Some((e.code(""), e.message, ExitStatus::Unsuccessful));
                    return Ok(round);
                }
                Err(AskOr::Missing(why)) => {
                    let msg = format!("the mandatory {role} is missing: {why}");
                    self.push_outcome(ReviewerOutcome {
                        round: round_no,
                        role: (*role).into(),
                        outcome: "missing".into(),
                        report: None,
                        adjudication: None,
                        sustained: 0,
                        refuted: 0,
                        indeterminate: 0,
                        note: Some(msg.clone()),
                    })?;
                    round.stop.get_or_insert(("reviewer-missing".into(), msg, ExitStatus::Unsuccessful));
                    continue;
                }
            };
            let report_rel = self.write_json(&format!("{base}.report.json"), &report)?;
            // The gateway: every report, clean claims included, is adjudicated before routing.
            let answer = self
                .ask(
                    ADJUDICATOR,
                    Access::ReadOnly,
                    prompts::adjudicator_brief(role, &report_rel, self.sd.rel(), &target),
                    prompts::adjudication_schema(),
                    with(json!({ "reviewer": role, "report_path": report_rel, "report": report })),
                    &format!("{unit}-r{round_no}-{role}"),
                )
                .await;
            let answer = match answer {
                Ok(a) => a,
                Err(e) => {
                    let msg = if e.fatal.is_some() {
                        e.message.clone()
                    } else {
                        format!("the finding-adjudicator is missing for the {role}'s report: {e}")
                    };
                    self.push_outcome(ReviewerOutcome {
                        round: round_no,
                        role: (*role).into(),
                        outcome: "missing".into(),
                        report: Some(report_rel),
                        adjudication: None,
                        sustained: 0,
                        refuted: 0,
                        indeterminate: 0,
                        note: Some(msg.clone()),
                    })?;
                    if e.fatal == Some("budget") {
                        return self.budget_round(round_no, e.message);
                    }
                    if e.fatal.is_some() {
                        // A violation ends the round at once: nothing after it is trusted.
                        round.stop = Some((e.code(""), msg, ExitStatus::Unsuccessful));
                        return Ok(round);
                    }
                    round.stop.get_or_insert(("adjudicator-missing".into(), msg, ExitStatus::Unsuccessful));
                    continue;
                }
            };
            let mut artifact = merge_adjudication(&report, &answer);
            let red = self.red_gates(&crate::proof::gates_named(&report)).await;
            let rules = work_git::evidence::Gate2Rules {
                forbidden: std::fs::canonicalize(&self.run.state_dir).into_iter().collect(),
                scope: Vec::new(),
            };
            let overrides = crate::proof::check_adjudication(&mut artifact, &self.run.root, &rules, &red);
            if !overrides.is_empty() {
                self.run.emit("adjudication.overridden", json!({ "reviewer": role, "notes": overrides }));
                artifact["engine"] = json!(overrides);
            }
            let adj_rel = self.write_json(&format!("{base}.adjudication.json"), &artifact)?;
            let text = serde_json::to_string(&artifact).unwrap_or_default();
            let class = adjudication::classify(&text, &adj_rel)?;
            let outcome_name = match class.classification {
                Class::Clean => "clean",
                Class::Findings => "findings",
                Class::Indeterminate => "indeterminate",
            };
            let fps: BTreeMap<String, String> =
                class.sustained.iter().map(|s| (s.id.clone(), s.fingerprint.clone())).collect();
            let tag = |f: &Value| {
                let mut f = f.clone();
                if let Value::Object(o) = &mut f {
                    o.insert("reviewer".into(), json!(role));
                    o.insert("adjudication".into(), json!(adj_rel));
                }
                f
            };
            let adjudicated = artifact["findings"].as_array().cloned().unwrap_or_default();
            let sustained: Vec<Value> = adjudicated
                .iter()
                .filter(|f| f.get("disposition").and_then(Value::as_str) == Some("sustained"))
                .map(|f| {
                    let mut f = tag(f);
                    let id = f.get("id").and_then(Value::as_str).unwrap_or("").to_string();
                    if let Value::Object(o) = &mut f {
                        o.insert("fingerprint".into(), json!(fps.get(&id)));
                    }
                    f
                })
                .collect();
            // What a person decides on when the adjudication is undecided: the findings left
            // indeterminate, and those of the report the adjudicator did not cover.
            let mut undecided: Vec<Value> = Vec::new();
            if class.classification == Class::Indeterminate {
                undecided.extend(
                    adjudicated
                        .iter()
                        .filter(|f| f.get("disposition").and_then(Value::as_str) == Some("indeterminate"))
                        .map(tag),
                );
                let covered: Vec<&str> =
                    adjudicated.iter().filter_map(|f| f.get("id").and_then(Value::as_str)).collect();
                for f in report["findings"].as_array().into_iter().flatten() {
                    if !f.get("id").and_then(Value::as_str).is_some_and(|id| covered.contains(&id)) {
                        let mut f = tag(f);
                        if let Value::Object(o) = &mut f {
                            o.insert("disposition".into(), json!("unadjudicated"));
                        }
                        undecided.push(f);
                    }
                }
            }
            let note = artifact["invalid"]
                .as_array()
                .filter(|a| !a.is_empty())
                .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; "));
            let outcome = self.push_outcome(ReviewerOutcome {
                round: round_no,
                role: (*role).into(),
                outcome: outcome_name.into(),
                report: Some(report_rel),
                adjudication: Some(adj_rel.clone()),
                sustained: class.sustained.len(),
                refuted: class.refuted,
                indeterminate: class.indeterminate,
                note: note.clone(),
            })?;
            if class.classification == Class::Indeterminate {
                let msg = format!(
                    "the adjudication of the {role}'s report is indeterminate ({}): see {adj_rel}",
                    note.unwrap_or_else(|| format!("{} finding(s) undecided", class.indeterminate))
                );
                round.stop.get_or_insert(("adjudication-indeterminate".into(), msg, ExitStatus::Paused));
            }
            for s in &sustained {
                self.rs.unit_findings.push(UnitFinding {
                    reviewer: (*role).into(),
                    round: round_no,
                    id: s.get("id").and_then(Value::as_str).unwrap_or("").into(),
                    severity: s.get("severity").and_then(Value::as_str).unwrap_or("unknown").into(),
                    title: s.get("title").and_then(Value::as_str).unwrap_or("").into(),
                    fingerprint: s.get("fingerprint").and_then(Value::as_str).unwrap_or("").into(),
                    resolution: "open".into(),
                });
            }
            round.results.push(Adjudicated { outcome, sustained, undecided, fingerprints: class.fingerprints });
        }
        self.save()?;
        Ok(round)
    }

    /// A reviewer's report once it proves the reviewer looked (see `crate::proof`): a clean
    /// verdict that names none of `changed` in `files_read` is refused, the reviewer is asked
    /// once more with the reason, and a second such answer counts the reviewer as missing.
    #[allow(clippy::too_many_arguments)]
    async fn proven(
        &self,
        role: &str,
        phase: &str,
        report: Value,
        changed: &[String],
        context: &Value,
        target: &str,
        label: &str,
    ) -> Result<Value, AskOr> {
        let check = |r: &Value| match r.get("verdict").and_then(Value::as_str) {
            Some("clean") => work_git::looked::check_files_read(&work_git::looked::files_read(r), changed),
            _ => Ok(()),
        };
        let Err(why) = check(&report) else { return Ok(report) };
        self.run.emit("review.unproven", json!({ "reviewer": role, "why": why, "attempt": 1 }));
        let prompt = format!(
            "{}\nYour previous answer was refused: {why}. Read the change, then answer again.",
            prompts::review_brief(role, phase, self.sd.rel(), target)
        );
        let again = self
            .ask(role, Access::ReadOnly, prompt, prompts::report_schema(), context.clone(), &format!("{label}-again"))
            .await
            .map_err(|e| if e.fatal.is_some() { AskOr::Fatal(e) } else { AskOr::Missing(e.message) })?;
        let again = prompts::normalize_report(&again);
        match check(&again) {
            Ok(()) => Ok(again),
            Err(why) => {
                self.run.emit("review.unproven", json!({ "reviewer": role, "why": why, "attempt": 2 }));
                Err(AskOr::Missing(format!("its clean verdict was refused twice: {why}")))
            }
        }
    }

    /// The pinned gates among `names` that are red now (the engine runs each once).
    async fn red_gates(&self, names: &std::collections::BTreeSet<String>) -> std::collections::BTreeSet<String> {
        let mut red = std::collections::BTreeSet::new();
        for (name, cmd) in self.s.gates.iter().filter(|(n, _)| names.contains(n)) {
            self.run.emit("gate.start", json!({ "gate": name, "command": cmd, "for": "a finding about the gate" }));
            let green =
                self.run.spawner.shell(cmd, &self.run.root, self.s.gate_timeout).await.is_ok_and(|o| o.success());
            self.run.emit("gate.end", json!({ "gate": name, "green": green, "for": "a finding about the gate" }));
            if !green {
                red.insert(name.clone());
            }
        }
        red
    }

    fn push_outcome(&mut self, o: ReviewerOutcome) -> Result<ReviewerOutcome, LoopError> {
        self.run.progress(&format!(
            "review {} round {} {}: {} ({} sustained, {} refuted)",
            self.rs.unit, o.round, o.role, o.outcome, o.sustained, o.refuted
        ));
        self.rs.unit_reviews.push(o.clone());
        self.save()?;
        Ok(o)
    }

    fn write_verdict(
        &mut self,
        blocking: Option<String>,
        mut residual: Vec<String>,
    ) -> Result<VerdictState, LoopError> {
        let open = self.rs.unit_findings.iter().filter(|f| f.resolution == "open").count();
        for f in self.rs.unit_findings.iter().filter(|f| f.resolution == "accepted") {
            residual.push(format!(
                "accepted by a person as residual risk: [{}] {} {} ({}, round {})",
                f.severity, f.id, f.title, f.reviewer, f.round
            ));
        }
        let facts = Facts { blocking_reason: blocking.clone(), open_findings: open, residual_risks: residual.clone() };
        let state = verdict::state_of(&facts);
        let v = Verdict {
            schema: verdict::SCHEMA.into(),
            review_unit: self.rs.unit.clone(),
            spec_dir: self.sd.rel().into(),
            run_id: self.run_id(),
            review_mode: self.rs.review_mode.map(|m| m.name()).unwrap_or("full").into(),
            state,
            target: self.target(),
            rounds: self.rs.unit_rounds,
            reviewers: self.rs.unit_reviews.clone(),
            sustained_findings: self.rs.unit_findings.clone(),
            residual_risks: residual,
            blocking_reason: blocking,
            gates: if self.rs.unit.starts_with("code-") { self.rs.last_gates.clone() } else { Vec::new() },
            human_merge_decision: "pending".into(),
            recorded_at: self.run.clock.now_rfc3339(),
        };
        let name = format!("reviews/{}/review-verdict.json", self.rs.unit);
        let doc = serde_json::to_value(&v).unwrap_or(Value::Null);
        let rel = self.write_json(&name, &doc)?;
        if !self.rs.verdicts.contains(&rel) {
            self.rs.verdicts.push(rel.clone());
        } else {
            // Keep the latest-written record last.
            self.rs.verdicts.retain(|p| p != &rel);
            self.rs.verdicts.push(rel.clone());
        }
        self.save()?;
        self.run.emit("loop.verdict", json!({ "path": rel, "state": state }));
        Ok(state)
    }

    async fn review(&mut self, st: &EngineState) -> Step {
        let mut mode = self.ensure_review_mode()?;
        let units = st.history.iter().filter(|h| h.event == "blocker-applied").count();
        let unit = format!("code-{}", units + 1);
        self.enter_unit(&unit)?;
        if let Some(step) = self.pending_decision(&unit, "code")? {
            return Ok(step);
        }
        let mut residual = Vec::new();
        let mut round = None;
        let light_next = if mode == ReviewMode::Light { self.rs.light_next.take() } else { None };
        match light_next.as_deref() {
            Some("accept") => {
                residual.push(
                    "light mode: fixes of sustained non-Blocker findings passed GATES but were not re-reviewed"
                        .to_string(),
                );
            }
            _ => {
                let roles: &[&str] = if mode == ReviewMode::Full { &[REVIEWER, QUALITY] } else { &[REVIEWER] };
                let rereview_was = self.rs.rereview_used;
                if light_next.as_deref() == Some("rereview") {
                    self.rs.rereview_used = true;
                }
                let r = self.review_round(&unit, "code", roles).await?;
                if r.stop.as_ref().is_some_and(|(code, _, _)| code == "budget") {
                    // The round did not happen: the single light-mode re-review is not used up,
                    // and the resumed run takes the same route.
                    self.rs.rereview_used = rereview_was;
                    self.rs.light_next = light_next.clone();
                    self.save()?;
                }
                round = Some(r);
            }
        }
        if let Some(r) = &round {
            if let Some((code, msg, exit)) = r.stop.clone() {
                return self.stop_round(&unit, "code", r, &code, msg, exit);
            }
            let sustained = r.sustained();
            if !sustained.is_empty() {
                let has_blocker = has_blocker(&sustained);
                // The escalation round is compared with light rounds: it is not stasis.
                let mut escalated_now = false;
                if mode == ReviewMode::Light && has_blocker && self.rs.rereview_used {
                    mode = ReviewMode::Full;
                    escalated_now = true;
                    self.rs.review_mode = Some(ReviewMode::Full);
                    self.rs.escalated = true;
                    self.rs
                        .mode_reasons
                        .push("a Blocker survived the single light-mode re-review: escalated to full".into());
                    self.run.progress("loop: a Blocker survived the light-mode re-review: escalating to full mode");
                }
                let fps = r.fingerprints();
                let c = self.cohort()?;
                if mode == ReviewMode::Full && !escalated_now && !fps.is_empty() && fps == c.fingerprints {
                    let msg = format!(
                        "stasis: the same {} finding(s) were sustained two review rounds in a row; another round would not help",
                        fps.len()
                    );
                    self.write_verdict(Some(msg.clone()), Vec::new())?;
                    let p = PendingDecision {
                        unit: unit.clone(),
                        phase: "code".into(),
                        reason: "review-stasis".into(),
                        message: msg,
                        round: self.rs.unit_rounds,
                        undecided: sustained,
                        sustained: Vec::new(),
                    };
                    return Ok(Some(self.wait_for_decision(p)?));
                }
                let detail = findings_text(&sustained);
                return self.reopen_code(sustained, detail);
            }
        }
        // Adjudicated clean (or light mode's accepted fixes): ship the unit to the human gate.
        self.ship_code(round.as_ref().and_then(Round::first_clean), residual)?;
        Ok(None)
    }

    /// Sustained code findings reopen implementation: the review retry cap first (BLOCKED when
    /// reached), then `findings-remain` (its guard carries the cap too), then the fingerprints
    /// are recorded and the fix is owed. Light mode remembers what its next review does.
    fn reopen_code(&mut self, sustained: Vec<Value>, detail: String) -> Step {
        let c = self.cohort()?;
        if c.review_retry_count >= c.review_retry_cap {
            let msg = format!(
                "{} sustained finding(s) remain and the review retry cap is reached ({}/{})",
                sustained.len(),
                c.review_retry_count,
                c.review_retry_cap
            );
            self.write_verdict(Some(msg.clone()), Vec::new())?;
            return Ok(Some(self.blocked("review-retry-cap", msg)));
        }
        if self.rs.review_mode == Some(ReviewMode::Light) {
            let next = if has_blocker(&sustained) && !self.rs.rereview_used { "rereview" } else { "accept" };
            self.rs.light_next = Some(next.into());
        }
        let mut fps: Vec<String> = sustained.iter().map(fingerprint_or_compute).collect();
        if fps.is_empty() {
            fps.push(work_loop::adjudication::fingerprint_of("", &detail));
        }
        fps.sort();
        fps.dedup();
        // Transition first (it carries the cap guard); record only when it applied.
        let st = self.fire("findings-remain", TransitionOpts::default())?;
        cohort::review_record(
            &self.run.root,
            &self.sd,
            &ReviewRecord::Fingerprints(fps),
            Some(&self.run_id()),
            self.run.clock.as_ref(),
        )?;
        self.rs.recorded_seq = Some(st.transition_sequence);
        self.rs.fix = Some(Fix { kind: "review".into(), detail, findings: sustained });
        self.save()?;
        self.write_verdict(None, Vec::new())?;
        Ok(None)
    }

    /// The unit goes to the merge gate: spec.md `Shipped`, `reviewers-clean`, then the clean
    /// adjudication recorded (when one exists; a person's acceptance has none).
    fn ship_code(&mut self, clean: Option<String>, residual: Vec<String>) -> Result<(), LoopError> {
        self.set_status("spec.md", "Shipped")?;
        self.fire("reviewers-clean", TransitionOpts::default())?;
        if let Some(clean) = clean {
            cohort::review_record(
                &self.run.root,
                &self.sd,
                &ReviewRecord::CleanReport(clean),
                Some(&self.run_id()),
                self.run.clock.as_ref(),
            )?;
        }
        self.write_verdict(None, residual)?;
        Ok(())
    }

    fn code_gate(&mut self, _st: &EngineState) -> Step {
        match std::mem::take(&mut self.human) {
            HumanInput::Approve => {
                self.fire("done", TransitionOpts::default())?;
                self.set_status("plan.md", "Done")?;
                Ok(None)
            }
            HumanInput::Reject(text) => {
                self.fire("blocker-applied", TransitionOpts::default())?;
                self.rs.fix = Some(Fix { kind: "human".into(), detail: text, findings: Vec::new() });
                self.save()?;
                Ok(None)
            }
            HumanInput::None => {
                let verdict = self.rs.verdicts.last().cloned();
                let msg = format!(
                    "review unit {} is ready for the merge decision{}: approve with `work loop run {} --resume --approve`, or request changes with `--reject \"<what to change>\"`",
                    self.rs.unit,
                    verdict.as_ref().map(|v| format!(" (verdict: {v})")).unwrap_or_default(),
                    self.sd.rel()
                );
                Ok(Some(self.paused(
                    "code-human-gate",
                    msg,
                    json!({
                        "action": "merge-decision",
                        "verdict": verdict,
                        "approve": format!("work loop run {} --resume --approve", self.sd.rel()),
                        "reject": format!("work loop run {} --resume --reject \"<what to change>\"", self.sd.rel()),
                    }),
                )))
            }
        }
    }

    fn done_report(&self, st: &EngineState) -> Report {
        let msg = if st.mode == Mode::SpecPlan.name() {
            "spec-plan run finished: the spec and plan are approved and the baseline is sealed".to_string()
        } else {
            "code run finished: the merge was approved (DONE)".to_string()
        };
        self.run.progress(&format!("loop: DONE: {msg}"));
        self.report("done", "done", msg, None)
    }
}

/// True when a sustained finding is a Blocker (severities are folded when reports arrive).
fn has_blocker(findings: &[Value]) -> bool {
    findings.iter().any(|f| f.get("severity").and_then(Value::as_str) == Some("blocker"))
}

/// A finding's fingerprint: the adjudication's, else computed from its file and title.
fn fingerprint_or_compute(f: &Value) -> String {
    match f.get("fingerprint").and_then(Value::as_str) {
        Some(fp) if !fp.trim().is_empty() => fp.trim().to_string(),
        _ => {
            let s = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or("");
            work_loop::adjudication::fingerprint_of(s("file"), s("title"))
        }
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(n)..].join("\n")
}

fn gates_text(runs: &[Value]) -> String {
    runs.iter()
        .filter(|r| r.get("green").and_then(Value::as_bool) == Some(false))
        .map(|r| {
            format!(
                "gate {} (`{}`) is red: {}\n{}",
                r["gate"].as_str().unwrap_or("?"),
                r["command"].as_str().unwrap_or("?"),
                r["end"].as_str().unwrap_or("?"),
                r["tail"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn findings_text(findings: &[Value]) -> String {
    findings
        .iter()
        .map(|f| {
            let s = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let line = f.get("line").and_then(Value::as_u64).map(|l| format!(":{l}")).unwrap_or_default();
            format!(
                "- [{}] {} {} ({}{line}) — Fix: {} (see {})",
                s("severity"),
                s("id"),
                s("title"),
                s("file"),
                s("fix"),
                s("adjudication")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

mod boundary;
mod draft_guard;
mod restored;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_reviewer_fields_and_flags_gaps() {
        let report = json!({"findings": [
            {"id": "F1", "severity": "blocker", "title": "Leak", "file": "a.rs", "line": 3, "fix": "close it"},
            {"id": "F2", "severity": "nit", "title": "Name"}
        ]});
        let answer = json!({"findings": [
            {"id": "F1", "disposition": "sustained", "reason": "real"},
            {"id": "F2", "disposition": "refuted", "severity": "concern"}
        ]});
        let a = merge_adjudication(&report, &answer);
        assert_eq!(a["status"], "adjudicated");
        assert_eq!(a["findings"][0]["title"], "Leak");
        assert_eq!(a["findings"][0]["severity"], "blocker");
        assert_eq!(a["findings"][1]["severity"], "concern");
        let c = adjudication::classify(&a.to_string(), "x").expect("classify");
        assert_eq!(c.classification, Class::Findings);
        assert_eq!(c.sustained.len(), 1);

        let partial = merge_adjudication(&report, &json!({"findings": [{"id": "F1", "disposition": "refuted"}]}));
        assert_eq!(partial["status"], "ADJUDICATION-INDETERMINATE");
        let c = adjudication::classify(&partial.to_string(), "x").expect("classify");
        assert_eq!(c.classification, Class::Indeterminate);

        let extra = merge_adjudication(
            &json!({"findings": []}),
            &json!({"findings": [{"id": "X", "disposition": "sustained"}]}),
        );
        assert_eq!(extra["status"], "ADJUDICATION-INDETERMINATE");
        let clean = merge_adjudication(&json!({"findings": []}), &json!({"findings": []}));
        assert_eq!(adjudication::classify(&clean.to_string(), "x").expect("classify").classification, Class::Clean);
    }

    #[test]
    fn gates_time_out_by_default() {
        assert_eq!(gate_timeout(None), Duration::from_secs(DEFAULT_GATE_SECS));
        assert_eq!(DEFAULT_GATE_SECS, 1800);
        assert_eq!(gate_timeout(Some(5)), Duration::from_secs(5));
    }

    #[test]
    fn fingerprints_are_kept_or_computed() {
        assert_eq!(fingerprint_or_compute(&json!({"fingerprint": "fp-x"})), "fp-x");
        let f = json!({"file": "a.rs", "title": "Leak  in X"});
        assert_eq!(fingerprint_or_compute(&f), work_loop::adjudication::fingerprint_of("a.rs", "Leak in X"));
        assert!(has_blocker(&[json!({"severity": "blocker"})]));
        assert!(!has_blocker(&[json!({"severity": "concern"})]));
    }

    #[test]
    fn gates_and_findings_text() {
        let t = gates_text(&[
            json!({"gate": "test", "command": "make", "green": false, "end": "exit code 1", "tail": "boom"}),
        ]);
        assert!(t.contains("gate test (`make`) is red: exit code 1\nboom"), "{t}");
        let f = findings_text(&[
            json!({"id": "F1", "severity": "blocker", "title": "T", "file": "a.rs", "line": 2, "fix": "x", "adjudication": "p"}),
        ]);
        assert_eq!(f, "- [blocker] F1 T (a.rs:2) — Fix: x (see p)");
        assert_eq!(last_lines("a\nb\nc", 2), "b\nc");
    }
}
