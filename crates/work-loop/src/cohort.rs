//! `work loop cohort …`: the bookkeeping beside the engine, in `<spec-dir>/state.json`
//! (the `loop-cohort.py`).
//!
//! It keeps the run id it was paired with, the approved baseline (hashes and status fields of
//! spec.md and plan.md), the wave schedule and pointer, the retry counters and caps, the review
//! rounds with one level of fingerprint history (for stasis), and the hash of the plan as last
//! reviewed. Every mutating verb takes the `state.json.lock` lock, checks `--expect-run-id`,
//! and writes atomically; a refusal changes nothing.

use crate::adjudication::{self, Class};
use crate::canonical;
use crate::common::{Lock, LoopError, LoopResult, Outcome, SpecDir, confine, read_status, sha256_hex};
use crate::report::{self, ReportClass};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::Path;
use work_runtime::ExitStatus;
use work_runtime::clock::Clock;
use work_runtime::fsx;

/// The cohort file's name inside the spec directory.
pub const STATE_FILE: &str = "state.json";
/// The schema tag written in the file.
pub const SCHEMA: &str = "work.loop.cohort.v1";
/// The default `implementation_retry_cap`.
pub const DEFAULT_IMPLEMENTATION_RETRY_CAP: u32 = 5;
/// The default `review_retry_cap`.
pub const DEFAULT_REVIEW_RETRY_CAP: u32 = 5;

/// The approved baseline recorded by `approve-plan`. Every field has a default (an empty hash
/// never matches, so a baseline without hashes is stale).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Baseline {
    /// sha256 of spec.md.
    pub spec_sha256: String,
    /// sha256 of plan.md.
    pub plan_sha256: String,
    /// spec.md's status at approval (`Approved`).
    pub spec_status: String,
    /// plan.md's status at approval (`Approved`).
    pub plan_status: String,
    /// When it was recorded.
    pub recorded_at: String,
}

/// One recorded review round. Every field has a default.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ReviewRound {
    /// 1-based round number.
    pub round: u32,
    /// `clean-report`, `fingerprints` or `all-skipped`.
    pub kind: String,
    /// The adjudication artifact of a clean report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    /// The fingerprints recorded.
    #[serde(default)]
    pub fingerprints: Vec<String>,
    /// When.
    pub recorded_at: String,
}

/// `state.json`.
///
/// Every field has a default, so an older or hand-written file loads: the caps default to
/// [`DEFAULT_IMPLEMENTATION_RETRY_CAP`] / [`DEFAULT_REVIEW_RETRY_CAP`], counters and lists to
/// zero and empty, `schema`, `run_id` and `created_at` to empty strings. Fields this version
/// does not know are kept in [`CohortState::extra`] and written back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CohortState {
    /// The scripts' format version: 1 (a newer one is refused; [`schema_problem`]).
    #[serde(default)]
    pub schema_version: Option<Value>,
    /// [`SCHEMA`].
    #[serde(default)]
    pub schema: String,
    /// The engine run this cohort belongs to.
    #[serde(default, deserialize_with = "string_or_null")]
    pub run_id: String,
    /// The spec directory's name.
    #[serde(default)]
    pub feature: Option<String>,
    /// `pending` until `approve-plan` records the baseline, then `approved`.
    #[serde(default = "pending")]
    pub plan_review_status: String,
    /// The canonical sha256 of spec.md at approval ([`crate::canonical`]).
    #[serde(default)]
    pub approved_spec_hash: Option<String>,
    /// The canonical sha256 of plan.md at approval.
    #[serde(default)]
    pub approved_plan_hash: Option<String>,
    /// When `init` ran.
    #[serde(default)]
    pub created_at: String,
    /// The approved baseline, once recorded.
    #[serde(default)]
    pub baseline: Option<Baseline>,
    /// Earlier baselines replaced by a re-approval.
    #[serde(default)]
    pub baseline_history: Vec<Baseline>,
    /// The waves (task ids), from `schedule`.
    #[serde(default)]
    pub schedule_waves: Vec<Vec<String>>,
    /// The canonical sha256 of plan.md when it was scheduled.
    #[serde(default, rename = "plan_hash", alias = "schedule_plan_sha256")]
    pub schedule_plan_sha256: Option<String>,
    /// The wave being worked on.
    #[serde(default)]
    pub current_wave_index: usize,
    /// Gate failures recorded (`record-attempt --phase implement`).
    #[serde(default)]
    pub implementation_retry_count: u32,
    /// The cap on implementation retries.
    #[serde(
        default = "default_implementation_cap",
        rename = "max_implementation_retries",
        alias = "implementation_retry_cap"
    )]
    pub implementation_retry_cap: u32,
    /// The cycle ids already recorded (idempotency).
    #[serde(default)]
    pub attempt_cycle_ids: Vec<String>,
    /// The last cycle id recorded (the scripts' idempotency key).
    #[serde(default)]
    pub last_record_attempt_cycle_id: Option<String>,
    /// Review rounds that ended with sustained findings (`review record --fingerprint`).
    #[serde(default)]
    pub review_retry_count: u32,
    /// The cap on review retries.
    #[serde(default = "default_review_cap", rename = "max_review_retries", alias = "review_retry_cap")]
    pub review_retry_cap: u32,
    /// Every recorded review round.
    #[serde(default)]
    pub review_round_count: u32,
    /// The fingerprints of the last recorded round.
    #[serde(default, rename = "finding_fingerprints", alias = "fingerprints")]
    pub fingerprints: Vec<String>,
    /// The fingerprints of the round before (one level of audit history).
    #[serde(default, rename = "previous_finding_fingerprints", alias = "previous_fingerprints")]
    pub previous_fingerprints: Vec<String>,
    /// The review rounds.
    #[serde(default)]
    pub review_rounds: Vec<ReviewRound>,
    /// sha256 of plan.md as last reviewed (`approve-plan`, `plan mark-reviewed`).
    #[serde(default)]
    pub plan_reviewed_sha256: Option<String>,
    /// Parallel dispatch (always false: disabled).
    #[serde(default)]
    pub auto_parallel: bool,
    /// The scripts' `last_commit_sha` (kept, unused).
    #[serde(default)]
    pub last_commit_sha: Option<Value>,
    /// The scripts' worktrees (kept, unused: worktree dispatch is disabled).
    #[serde(default)]
    pub worktrees: Vec<Value>,
    /// Fields this version does not know, kept on rewrite.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

fn pending() -> String {
    "pending".into()
}

fn string_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// Why a cohort file cannot be used: a `schema_version` other than 1 (a newer or foreign
/// format), or no `schema_version`, no `schema` and no run id (a file from before runs had
/// ids).
pub fn schema_problem(st: &CohortState) -> Option<String> {
    match &st.schema_version {
        Some(v) if v.as_u64() == Some(1) => None,
        Some(v) => Some(format!("unsupported schema_version={} (expected 1)", py_repr(v))),
        // An older file of this project (its `schema`, or at least a run id) loads; a file
        // from before run ids (the scripts' pre-Phase-1 form) does not.
        None if st.schema == SCHEMA || !st.run_id.is_empty() => None,
        None => Some("unsupported schema_version=None (expected 1)".into()),
    }
}

/// A value as the scripts print one in a message (Python's `repr`): `'text'`, `None`, `99`.
pub fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::String(t) => py_repr_str(t),
        other => other.to_string(),
    }
}

/// A string as Python's `repr` prints it (single quotes unless it holds one and no double).
pub fn py_repr_str(t: &str) -> String {
    let (q, other) = if t.contains('\'') && !t.contains('"') { ('"', '\'') } else { ('\'', '"') };
    let mut out = String::from(q);
    for c in t.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => {
                let _ = other;
                out.push(c);
            }
        }
    }
    out.push(q);
    out
}

fn default_implementation_cap() -> u32 {
    DEFAULT_IMPLEMENTATION_RETRY_CAP
}

fn default_review_cap() -> u32 {
    DEFAULT_REVIEW_RETRY_CAP
}

impl CohortState {
    /// The approved (canonical) hashes of spec.md and plan.md, once `approve-plan` recorded
    /// them (a file the scripts wrote carries them without this project's `baseline`).
    pub fn approved_hashes(&self) -> Option<(String, String)> {
        if self.plan_review_status != "approved" && self.baseline.is_none() {
            return None;
        }
        let spec = self.approved_spec_hash.clone().or_else(|| self.baseline.as_ref().map(|b| b.spec_sha256.clone()));
        let plan = self.approved_plan_hash.clone().or_else(|| self.baseline.as_ref().map(|b| b.plan_sha256.clone()));
        Some((spec.unwrap_or_default(), plan.unwrap_or_default()))
    }

    /// `current_wave_index + 1 < schedule_waves.len()`.
    pub fn more_waves(&self) -> bool {
        self.current_wave_index + 1 < self.schedule_waves.len()
    }

    /// The status document (`cohort status --json`).
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(o) = &mut v {
            o.insert("wave_count".into(), json!(self.schedule_waves.len()));
            o.insert("more_waves".into(), json!(self.more_waves()));
            o.insert(
                "current_wave".into(),
                json!(self.schedule_waves.get(self.current_wave_index).cloned().unwrap_or_default()),
            );
            o.insert(
                "implementation_retry_cap_reached".into(),
                json!(self.implementation_retry_count >= self.implementation_retry_cap),
            );
            o.insert("review_retry_cap_reached".into(), json!(self.review_retry_count >= self.review_retry_cap));
        }
        v
    }
}

/// Reads `state.json`; `None` when absent. A corrupt file is bad input.
pub fn load(sd: &SpecDir) -> Result<Option<CohortState>, LoopError> {
    match sd.read_optional(STATE_FILE)? {
        None => Ok(None),
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| LoopError::bad(format!("read `{}/{STATE_FILE}`: {e}", sd.rel()))),
    }
}

/// The scripts' words for a missing cohort: `state.json missing at <spec dir>/state.json`.
fn missing(sd: &SpecDir) -> LoopError {
    LoopError::bad(format!("{STATE_FILE} missing at {}/{STATE_FILE}", sd.dir().display()))
}

/// Reads state.json for `verb`, refusing a missing file or another schema version.
fn load_required(sd: &SpecDir, verb: &str) -> Result<CohortState, LoopError> {
    let st = load(sd)?.ok_or_else(|| missing(sd))?;
    if let Some(why) = schema_problem(&st) {
        return Err(LoopError::refused(
            format!("{verb}: {why}; run reset pair"),
            json!({ "reason": "schema_version", "schema_version": st.schema_version }),
        ));
    }
    Ok(st)
}

/// Reads state.json for a verb that needs only readable state (`check --phase implement`):
/// any schema version.
fn load_readable(sd: &SpecDir) -> Result<CohortState, LoopError> {
    load(sd)?.ok_or_else(|| missing(sd))
}

fn save(sd: &SpecDir, st: &CohortState) -> Result<(), LoopError> {
    let p = sd.file(STATE_FILE)?;
    fsx::write_json_atomic(&p, st).map_err(|e| LoopError::bad(format!("write `{}/{STATE_FILE}`: {e}", sd.rel())))
}

/// The fence: `--expect-run-id` must name the cohort's run (the scripts' words when not).
fn check_run_id(st: &CohortState, verb: &str, expect: Option<&str>) -> Result<(), LoopError> {
    match expect {
        Some(e) if e != st.run_id => Err(LoopError::refused(
            format!(
                "{verb}: --expect-run-id mismatch (stored={}, supplied={})",
                py_repr_str(&st.run_id),
                py_repr_str(e)
            ),
            json!({ "run_id": st.run_id, "expected_run_id": e, "reason": "run_id_mismatch" }),
        )),
        _ => Ok(()),
    }
}

/// Takes the lock, loads the state, checks the run id and applies `f`; writes only when `f`
/// says something changed.
pub(crate) fn mutate(
    sd: &SpecDir,
    verb: &str,
    expect: Option<&str>,
    f: impl FnOnce(&mut CohortState) -> Result<(bool, Value, String), LoopError>,
) -> LoopResult {
    // A missing cohort is bad input before the lock: nothing is created for a missing run.
    if !sd.file(STATE_FILE)?.is_file() {
        return Err(missing(sd));
    }
    let _lock = Lock::acquire(&sd.file(&format!("{STATE_FILE}.lock"))?)?;
    let mut st = load_required(sd, verb)?;
    check_run_id(&st, verb, expect)?;
    let (changed, mut doc, text) = f(&mut st)?;
    if changed {
        save(sd, &st)?;
    }
    if let Value::Object(o) = &mut doc {
        o.insert("ok".into(), json!(true));
        o.insert("changed".into(), json!(changed));
        o.insert("run_id".into(), json!(st.run_id));
    }
    Ok(Outcome::ok(doc, text))
}

pub use crate::schedule::schedule;

mod approve;
mod checks;
mod review;
mod waves;

pub use approve::{BOTH_CAUSES, Caps, approve_plan, check_plan_flag, identity, init};
pub(crate) use approve::{artifacts, status_legal_after_approval};
pub use checks::{
    CheckPhase, check, disabled, plan_check_current, plan_mark_reviewed, reset, schedule_check_current,
    schedule_current_of, status,
};
pub use review::{ReviewRecord, review_classify, review_inspect, review_inspect_report, review_record};
pub use waves::{MAX_CYCLE_ID_LEN, WaveExpect, record_attempt, validate_cycle_id, wave_advance, wave_check};
