//! The loop itself: one step per engine state until the run ends, pauses for a person, or is
//! blocked. Every state change goes through `work_loop` (engine transitions with their guards
//! and lock, cohort verbs, plan parsing, adjudication classification).
//!
//! This file holds the driver's types, the step loop and the review round's bookkeeping; each
//! phase lives in its own module: `preflight` (bad input before anything changes), `plumbing`
//! (state files, transitions, reports, the read-only guard, the views of the tree), `start`
//! (start and resume), `plan_phase` (PLAN), `execute` (EXECUTE and GATES), `review` (one review
//! round), `decide` (DECIDE and the code gate), `boundary` (`snapshot-loss`), `draft_guard`
//! (the drafter held to the spec directory) and `restored` (green gates rerun with the frozen
//! checks restored).

use crate::prompts::{self, ADJUDICATOR, DRAFTER, IMPLEMENTER, QUALITY, REVIEWER};
use crate::risk::{self, ReviewMode};
use crate::state::{
    Decision, Fix, InFlight, LostWork, OpenRound, PendingDecision, ReviewerOutcome, Revision, RunnerState, STATE_FILE,
    Shipping, UnitFinding,
};
use crate::verdict::{self, Facts, Target, Verdict, VerdictState};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use work_git::{Base, Git, TreeState};
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

impl HumanInput {
    /// The decision's kind (`approve`, `reject`) and text, or `None`.
    pub fn parts(&self) -> Option<(&'static str, Option<&str>)> {
        match self {
            HumanInput::None => None,
            HumanInput::Approve => Some(("approve", None)),
            HumanInput::Reject(t) => Some(("reject", Some(t.as_str()))),
        }
    }
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

pub use preflight::preflight;

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
    /// The records of the runs cut off before this one (`replay`), read once.
    recorded: std::sync::OnceLock<work_runtime::dispatch::replay::CutOffRuns>,
}

impl Driver {
    /// A driver for a preflighted spec directory.
    pub fn new(run: RunContext, roles: BTreeMap<String, RoleDispatch>, s: Settings, sd: SpecDir) -> Self {
        let git = Git::new(&run.root);
        let human = s.human.clone();
        Driver {
            run,
            roles,
            s,
            sd,
            git,
            rs: RunnerState::default(),
            transitions: Vec::new(),
            human,
            recorded: std::sync::OnceLock::new(),
        }
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
        self.close_runs();
        self.run.finish(&r.outcome, json!({ "reason": r.reason, "state": r.state }));
        r
    }

    async fn drive_inner(&mut self) -> Result<Report, LoopError> {
        if let Some(r) = self.start()? {
            return Ok(r);
        }
        self.open_this_run()?;
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
                State::Done => Some(self.done_report(&st)?),
            };
            if let Some(r) = step {
                return Ok(r);
            }
        }
        Ok(self.report("blocked", "loop-guard", "the loop made no progress in 1000 steps".into(), None))
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
mod decide;
mod draft_guard;
mod execute;
mod plan_phase;
mod plumbing;
mod preflight;
mod replay;
mod restored;
mod review;
mod start;

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
