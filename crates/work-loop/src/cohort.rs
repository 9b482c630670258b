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
        Some(v) => Some(format!("unsupported schema_version={v} (expected 1); run the reset pair")),
        // An older file of this project (its `schema`, or at least a run id) loads; a file
        // from before run ids (the scripts' pre-Phase-1 form) does not.
        None if st.schema == SCHEMA || !st.run_id.is_empty() => None,
        None => Some("unsupported schema_version=None (expected 1); run the reset pair".into()),
    }
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

fn missing(sd: &SpecDir) -> LoopError {
    LoopError::bad(format!("read `{}/{STATE_FILE}`: no such file (run `work loop cohort init` first)", sd.rel()))
}

fn load_required(sd: &SpecDir) -> Result<CohortState, LoopError> {
    let st = load(sd)?.ok_or_else(|| missing(sd))?;
    if let Some(why) = schema_problem(&st) {
        return Err(LoopError::refused(
            format!("read `{}/{STATE_FILE}`: {why}", sd.rel()),
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

fn check_run_id(st: &CohortState, expect: Option<&str>) -> Result<(), LoopError> {
    match expect {
        Some(e) if e != st.run_id => Err(LoopError::refused(
            format!("match run id: run_id mismatch: the cohort belongs to run `{}`, not `{e}`", st.run_id),
            json!({ "run_id": st.run_id, "expected_run_id": e }),
        )),
        _ => Ok(()),
    }
}

/// Takes the lock, loads the state, checks the run id and applies `f`; writes only when `f`
/// says something changed.
pub(crate) fn mutate(
    sd: &SpecDir,
    expect: Option<&str>,
    f: impl FnOnce(&mut CohortState) -> Result<(bool, Value, String), LoopError>,
) -> LoopResult {
    // A missing cohort is bad input before the lock: nothing is created for a missing run.
    if !sd.file(STATE_FILE)?.is_file() {
        return Err(missing(sd));
    }
    let _lock = Lock::acquire(&sd.file(&format!("{STATE_FILE}.lock"))?)?;
    let mut st = load_required(sd)?;
    check_run_id(&st, expect)?;
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

/// Caps for `cohort init`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// `implementation_retry_cap`.
    pub implementation: u32,
    /// `review_retry_cap`.
    pub review: u32,
}

impl Default for Caps {
    fn default() -> Self {
        Caps { implementation: DEFAULT_IMPLEMENTATION_RETRY_CAP, review: DEFAULT_REVIEW_RETRY_CAP }
    }
}

/// `cohort init <spec-dir> --run-id R`: refuses when state.json already exists (an orphaned
/// cohort is surfaced, never overwritten).
pub fn init(sd: &SpecDir, run_id: &str, caps: Caps, clock: &dyn Clock) -> LoopResult {
    if run_id.trim().is_empty() {
        return Err(LoopError::bad("use `--run-id`: it is empty"));
    }
    let _lock = Lock::acquire(&sd.file(&format!("{STATE_FILE}.lock"))?)?;
    if let Some(existing) = load(sd)? {
        return Err(LoopError::refused(
            format!(
                "init the cohort: `{}/{STATE_FILE}` already exists (run `{}`); reset it first",
                sd.rel(),
                existing.run_id
            ),
            json!({ "run_id": existing.run_id }),
        ));
    }
    let st = CohortState {
        schema_version: Some(json!(1)),
        schema: SCHEMA.into(),
        run_id: run_id.to_string(),
        feature: Some(sd.feature()),
        plan_review_status: pending(),
        approved_spec_hash: None,
        approved_plan_hash: None,
        created_at: clock.now_rfc3339(),
        baseline: None,
        baseline_history: Vec::new(),
        schedule_waves: Vec::new(),
        schedule_plan_sha256: None,
        current_wave_index: 0,
        implementation_retry_count: 0,
        implementation_retry_cap: caps.implementation,
        attempt_cycle_ids: Vec::new(),
        last_record_attempt_cycle_id: None,
        review_retry_count: 0,
        review_retry_cap: caps.review,
        review_round_count: 0,
        fingerprints: Vec::new(),
        previous_fingerprints: Vec::new(),
        review_rounds: Vec::new(),
        plan_reviewed_sha256: None,
        auto_parallel: false,
        last_commit_sha: None,
        worktrees: Vec::new(),
        extra: serde_json::Map::new(),
    };
    save(sd, &st)?;
    let mut doc = st.to_json();
    if let Value::Object(o) = &mut doc {
        o.insert("ok".into(), json!(true));
    }
    Ok(Outcome::ok(doc, format!("cohort initialised for run {run_id}")))
}

/// `cohort identity <spec-dir> --expect-run-id R`: the cohort (and the engine, when its state
/// exists) belong to run R.
pub fn identity(sd: &SpecDir, expect: Option<&str>) -> LoopResult {
    let st = load_required(sd)?;
    check_run_id(&st, expect)?;
    let engine = crate::engine::load(sd)?;
    // Without --expect-run-id the pair is checked against itself: the engine and the cohort
    // must belong to the same run.
    let expect = expect.unwrap_or(&st.run_id);
    if let Some(e) = &engine
        && e.run_id != expect
    {
        return Err(LoopError::refused(
            format!("match run id: the engine belongs to run `{}`, not `{expect}`", e.run_id),
            json!({ "run_id": st.run_id, "engine_run_id": e.run_id, "expected_run_id": expect }),
        ));
    }
    Ok(Outcome::ok(
        json!({ "ok": true, "run_id": st.run_id, "engine_run_id": engine.map(|e| e.run_id) }),
        format!("cohort and engine belong to run {expect}"),
    ))
}

/// The current hashes and statuses of spec.md and plan.md.
pub(crate) fn artifacts(sd: &SpecDir) -> Result<(String, String, Option<String>, Option<String>), LoopError> {
    let spec = sd
        .read_optional("spec.md")?
        .ok_or_else(|| LoopError::bad(format!("read `{}/spec.md`: no such file", sd.rel())))?;
    let plan = sd
        .read_optional("plan.md")?
        .ok_or_else(|| LoopError::bad(format!("read `{}/plan.md`: no such file", sd.rel())))?;
    Ok((canonical::sha256(&spec, false), canonical::sha256(&plan, true), read_status(&spec), read_status(&plan)))
}

/// `cohort approve-plan`: records the baseline; refuses unless both statuses are Approved.
///
/// Once a baseline exists: a no-op when spec.md and plan.md are unchanged; a refusal (exit 1,
/// `stale_baseline`, naming the file that changed) when either changed — unless `rebaseline`
/// (`--rebaseline`, an explicit decision) is set, which records a new baseline and keeps the old
/// one in `baseline_history`. The design: "refuses if changed, no-op if not".
pub fn approve_plan(sd: &SpecDir, expect: Option<&str>, rebaseline: bool, clock: &dyn Clock) -> LoopResult {
    mutate(sd, expect, |st| {
        let (spec_sha, plan_sha, spec_status, plan_status) = artifacts(sd)?;
        if let Some((old_spec, old_plan)) = st.approved_hashes() {
            let mut changed = Vec::new();
            if old_spec != spec_sha {
                changed.push("spec.md");
            }
            if old_plan != plan_sha {
                changed.push("plan.md");
            }
            if changed.is_empty() {
                status_legal_after_approval(sd)?;
                let doc = json!({ "baseline": st.baseline, "rebaselined": false });
                return Ok((false, doc, "approve-plan already recorded (no-op)".into()));
            }
            if !rebaseline {
                return Err(LoopError::refused(
                    format!(
                        "approve the plan: artifact changed since approval — spec_changed={}, plan_changed={}; {BOTH_CAUSES}; or re-review and pass `--rebaseline` to record a new baseline",
                        py_bool(changed.contains(&"spec.md")),
                        py_bool(changed.contains(&"plan.md")),
                    ),
                    json!({ "reason": "stale_baseline", "changed": changed, "baseline": st.baseline }),
                ));
            }
        }
        if spec_status.as_deref() != Some("Approved") || plan_status.as_deref() != Some("Approved") {
            let (file, got) = if spec_status.as_deref() == Some("Approved") {
                ("plan.md", &plan_status)
            } else {
                ("spec.md", &spec_status)
            };
            return Err(LoopError::refused(
                format!(
                    "approve the plan: {file} Status is {}; expected Approved (both spec.md and plan.md must be Approved)",
                    got.as_deref().map_or_else(|| "None".to_string(), |s| format!("'{s}'"))
                ),
                json!({ "spec_status": spec_status, "plan_status": plan_status, "reason": "status" }),
            ));
        }
        let rebaselined = st.approved_hashes().is_some();
        if let Some(old) = st.baseline.take() {
            st.baseline_history.push(old);
        }
        let b = Baseline {
            spec_sha256: spec_sha.clone(),
            plan_sha256: plan_sha.clone(),
            spec_status: "Approved".into(),
            plan_status: "Approved".into(),
            recorded_at: clock.now_rfc3339(),
        };
        st.baseline = Some(b.clone());
        st.plan_review_status = "approved".into();
        st.approved_spec_hash = Some(spec_sha.clone());
        st.approved_plan_hash = Some(plan_sha);
        let raw = sd.read_optional("plan.md")?.map(|t| sha256_hex(t.as_bytes()));
        st.plan_reviewed_sha256 = raw;
        let text = format!(
            "approve-plan {} (approved_spec_hash={}… approved_plan_hash={}…)",
            if rebaselined { "re-recorded (--rebaseline)" } else { "recorded" },
            &spec_sha[..12],
            &b.plan_sha256[..12]
        );
        Ok((true, json!({ "baseline": b, "rebaselined": rebaselined }), text))
    })
}

/// `True` / `False`, as the scripts print a flag.
fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// A mismatch has two possible causes the verbs cannot tell apart, so they name both.
pub const BOTH_CAUSES: &str = "either the approved scope changed, or this baseline was pinned before canonical hashing landed (to re-pin: restore `Status: Approved` in both spec.md and plan.md, `work loop cohort reset`, `cohort init --run-id <run_id>`, `cohort approve-plan`, `cohort schedule`, then restore the Status you were on; never reset the engine)";

/// After approval spec.md may only read Approved, Implementing or Shipped, and plan.md
/// Approved, Executing or Done (a file without a status is skipped).
pub(crate) fn status_legal_after_approval(sd: &SpecDir) -> Result<(), LoopError> {
    for (file, allowed) in
        [("spec.md", ["Approved", "Implementing", "Shipped"]), ("plan.md", ["Approved", "Executing", "Done"])]
    {
        let status = sd.read_optional(file)?.as_deref().and_then(read_status);
        if let Some(s) = status
            && !allowed.contains(&s.as_str())
        {
            return Err(LoopError::refused(
                format!(
                    "check the approved artifacts: {file} Status is '{s}'; expected one of {allowed:?} after approval"
                ),
                json!({ "reason": "status_regressed", "file": file, "status": s }),
            ));
        }
    }
    Ok(())
}

pub use crate::schedule::schedule;

/// `cohort schedule --plan P`: P must be the spec directory's own plan.md (the scripts accept
/// the flag and refuse any other file, so a schedule always describes the approved plan).
pub fn check_plan_flag(root: &std::path::Path, sd: &SpecDir, plan: Option<&str>) -> Result<(), LoopError> {
    let Some(p) = plan else { return Ok(()) };
    let given = confine(root, p)?;
    let own = sd.file("plan.md")?;
    let same = match (std::fs::canonicalize(&given), std::fs::canonicalize(&own)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(LoopError::refused(
            format!("schedule: --plan `{p}` is not `{}/plan.md`; nothing was changed", sd.rel()),
            json!({ "reason": "alternate_plan" }),
        ))
    }
}

/// `cohort wave advance --from-index N`: N → N+1; a no-op when the pointer is already N+1.
pub fn wave_advance(sd: &SpecDir, from: usize, expect: Option<&str>) -> LoopResult {
    mutate(sd, expect, |st| {
        let n = st.schedule_waves.len();
        if st.current_wave_index == from + 1 && from + 1 < n {
            let doc = json!({ "current_wave_index": st.current_wave_index, "wave_count": n });
            return Ok((false, doc, format!("already at wave {} (no-op)", st.current_wave_index)));
        }
        if st.current_wave_index != from {
            return Err(LoopError::refused(
                format!("advance the wave: the current wave is {}, not {from}", st.current_wave_index),
                json!({ "current_wave_index": st.current_wave_index, "wave_count": n }),
            ));
        }
        if from + 1 >= n {
            return Err(LoopError::refused(
                format!("advance the wave: wave {from} is the last of {n}"),
                json!({ "current_wave_index": st.current_wave_index, "wave_count": n }),
            ));
        }
        st.current_wave_index = from + 1;
        Ok((true, json!({ "current_wave_index": from + 1, "wave_count": n }), format!("advanced to wave {}", from + 1)))
    })
}

/// What `wave check --expect` asserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaveExpect {
    /// A wave after the current one exists.
    More,
    /// The current wave is the last (or nothing is scheduled).
    Last,
}

/// `cohort wave check --expect more|last`: exit 0 when it holds, 1 otherwise.
pub fn wave_check(
    sd: &SpecDir,
    expect_kind: WaveExpect,
    wave_index: Option<usize>,
    expect: Option<&str>,
) -> LoopResult {
    let st = load_required(sd)?;
    check_run_id(&st, expect)?;
    if let Some(n) = wave_index
        && n != st.current_wave_index
    {
        return Err(LoopError::refused(
            format!("check the wave: --wave-index {n} is not the current wave {}", st.current_wave_index),
            json!({ "reason": "wave_index", "current_wave_index": st.current_wave_index, "wave_index": n }),
        ));
    }
    let more = st.more_waves();
    let holds = match expect_kind {
        WaveExpect::More => more,
        WaveExpect::Last => !more,
    };
    let doc = json!({
        "ok": holds,
        "expect": if expect_kind == WaveExpect::More { "more" } else { "last" },
        "current_wave_index": st.current_wave_index,
        "wave_count": st.schedule_waves.len(),
        "more_waves": more,
    });
    let text = format!(
        "wave {} of {}: {}",
        st.current_wave_index,
        st.schedule_waves.len(),
        if more { "more waves remain" } else { "last wave" }
    );
    let out = Outcome::with(if holds { ExitStatus::Done } else { ExitStatus::Unsuccessful }, doc, text);
    Ok(if holds { out } else { out.text_to_stderr() })
}

/// `cohort record-attempt --phase implement --cycle-id C`: counts a gate failure once per C.
pub fn record_attempt(sd: &SpecDir, cycle_id: &str, expect: Option<&str>) -> LoopResult {
    validate_cycle_id(cycle_id)?;
    mutate(sd, expect, |st| {
        // `<run_id>:<decimal sequence>`, and the run id is this cohort's.
        let shape = cycle_id.split_once(':').filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let Some((prefix, _)) = shape else {
            return Err(LoopError::refused(
                format!("record the attempt: --cycle-id must be `<run_id>:<decimal sequence>` (got `{cycle_id}`)"),
                json!({ "reason": "cycle_id_shape", "cycle_id": cycle_id }),
            ));
        };
        if prefix != st.run_id {
            return Err(LoopError::refused(
                format!(
                    "record the attempt: the run id in --cycle-id (`{prefix}`) is not the cohort's `{}`",
                    st.run_id
                ),
                json!({ "reason": "cycle_id_run_id", "cycle_id": cycle_id, "run_id": st.run_id }),
            ));
        }
        if st.attempt_cycle_ids.iter().any(|c| c == cycle_id) {
            let doc = json!({ "implementation_retry_count": st.implementation_retry_count, "cycle_id": cycle_id });
            return Ok((false, doc, format!("cycle {cycle_id} already recorded (no-op)")));
        }
        st.attempt_cycle_ids.push(cycle_id.to_string());
        st.last_record_attempt_cycle_id = Some(cycle_id.to_string());
        st.implementation_retry_count += 1;
        let doc = json!({
            "implementation_retry_count": st.implementation_retry_count,
            "implementation_retry_cap": st.implementation_retry_cap,
            "cycle_id": cycle_id,
        });
        Ok((true, doc, format!("implementation attempt {} recorded", st.implementation_retry_count)))
    })
}

/// The longest `--cycle-id` accepted.
pub const MAX_CYCLE_ID_LEN: usize = 200;

/// A cycle id is non-empty, at most [`MAX_CYCLE_ID_LEN`] characters of `[A-Za-z0-9._:-]`
/// (the engine's ids are `<run_id>:<transition_sequence>`).
pub fn validate_cycle_id(cycle_id: &str) -> Result<(), LoopError> {
    if cycle_id.is_empty() {
        return Err(LoopError::bad("use `--cycle-id`: it is empty"));
    }
    if cycle_id.len() > MAX_CYCLE_ID_LEN {
        return Err(LoopError::bad(format!(
            "use `--cycle-id`: it is {} characters long (at most {MAX_CYCLE_ID_LEN})",
            cycle_id.len()
        )));
    }
    if let Some(c) = cycle_id.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))) {
        return Err(LoopError::bad(format!(
            "use `--cycle-id {}`: character {c:?} is not allowed (only A-Z a-z 0-9 . _ : -)",
            cycle_id.escape_debug()
        )));
    }
    Ok(())
}

/// What `review record` records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewRecord {
    /// `--report P --adjudication`: a clean adjudicated report.
    CleanReport(String),
    /// `--report P`: a clean reviewer report ([`crate::report`]).
    CleanReviewerReport(String),
    /// `--fingerprint FP …`: a round with sustained findings (counts a review retry).
    Fingerprints(Vec<String>),
    /// `--all-skipped`: every warranted reviewer was a non-mandatory named skip.
    AllSkipped,
}

/// `cohort review record`. Not idempotent (the design says so): every call is a round.
pub fn review_record(
    root: &Path,
    sd: &SpecDir,
    what: &ReviewRecord,
    expect: Option<&str>,
    clock: &dyn Clock,
) -> LoopResult {
    // Read and classify the artifact before taking the lock: bad input changes nothing.
    let report = match what {
        ReviewRecord::CleanReport(p) => {
            let c = read_classification(root, p)?;
            if c.classification != Class::Clean {
                return Err(LoopError::refused(
                    format!("record the review: `{p}` is not clean ({} sustained)", c.sustained.len()),
                    json!({ "classification": c }),
                ));
            }
            Some(p.clone())
        }
        ReviewRecord::CleanReviewerReport(p) => {
            let (class, fps) =
                read_report(sd, p).map(|t| report::classify(&t)).unwrap_or((ReportClass::Invalid, Vec::new()));
            if class != ReportClass::Clean {
                return Err(LoopError::refused(
                    format!(
                        "record the review: report `{p}` is classified {class:?}, not clean (use --fingerprint for a findings round)"
                    ),
                    json!({ "classification": class, "fingerprints": fps }),
                ));
            }
            Some(p.clone())
        }
        ReviewRecord::Fingerprints(fps) if fps.iter().any(|f| f.trim().is_empty()) || fps.is_empty() => {
            return Err(LoopError::bad("use `--fingerprint`: a fingerprint is empty"));
        }
        _ => None,
    };
    mutate(sd, expect, |st| {
        let (kind, mut fps) = match what {
            ReviewRecord::CleanReport(_) | ReviewRecord::CleanReviewerReport(_) => ("clean-report", Vec::new()),
            ReviewRecord::Fingerprints(f) => ("fingerprints", f.clone()),
            ReviewRecord::AllSkipped => ("all-skipped", Vec::new()),
        };
        fps.sort();
        fps.dedup();
        st.review_round_count += 1;
        if matches!(what, ReviewRecord::Fingerprints(_)) {
            st.review_retry_count += 1;
        }
        st.previous_fingerprints = std::mem::replace(&mut st.fingerprints, fps.clone());
        st.review_rounds.push(ReviewRound {
            round: st.review_round_count,
            kind: kind.into(),
            report,
            fingerprints: fps,
            recorded_at: clock.now_rfc3339(),
        });
        let doc = json!({
            "kind": kind,
            "review_round_count": st.review_round_count,
            "review_retry_count": st.review_retry_count,
            "review_retry_cap": st.review_retry_cap,
            "fingerprints": st.fingerprints,
            "previous_fingerprints": st.previous_fingerprints,
        });
        Ok((true, doc, format!("review round {} recorded ({kind})", st.review_round_count)))
    })
}

fn read_classification(root: &Path, rel: &str) -> Result<adjudication::Classification, LoopError> {
    let p = confine(root, rel)?;
    let text = fsx::read_optional(&p)
        .map_err(|e| LoopError::bad(format!("read adjudication `{rel}`: {e}")))?
        .ok_or_else(|| LoopError::bad(format!("read adjudication `{rel}`: no such file")))?;
    adjudication::classify(&text, rel)
}

/// `cohort review classify P`: state-free classification (light mode).
pub fn review_classify(root: &Path, rel: &str) -> LoopResult {
    let c = read_classification(root, rel)?;
    let text = format!("{}: {} sustained, {} refuted", class_name(c.classification), c.sustained.len(), c.refuted);
    let exit = if c.classification == Class::Indeterminate { ExitStatus::Unsuccessful } else { ExitStatus::Done };
    let mut doc = serde_json::to_value(&c).unwrap_or(Value::Null);
    if let Value::Object(o) = &mut doc {
        o.insert("ok".into(), json!(exit == ExitStatus::Done));
        o.insert("report".into(), json!(rel));
    }
    Ok(Outcome::with(exit, doc, text))
}

fn class_name(c: Class) -> &'static str {
    match c {
        Class::Clean => "clean",
        Class::Findings => "findings",
        Class::Indeterminate => "indeterminate",
    }
}

/// A reviewer report, confined under the spec directory's root; `None` when it cannot be read
/// (the report is then `invalid`, a content outcome, never an error).
fn read_report(sd: &SpecDir, rel: &str) -> Option<String> {
    let p = confine(sd.root(), rel).ok()?;
    let m = std::fs::symlink_metadata(&p).ok()?;
    if !m.file_type().is_file() || m.len() > crate::common::MAX_MANAGED_BYTES {
        return None;
    }
    fsx::read_optional(&p).ok().flatten()
}

/// `cohort review inspect --report P`: the reviewer report's class, fingerprints and
/// stasis against the last round. Every content outcome exits 0 (an unreadable report is
/// `invalid`, with a warning on stderr).
pub fn review_inspect_report(sd: &SpecDir, rel: &str, expect: Option<&str>) -> LoopResult {
    let st = load_required(sd)?;
    check_run_id(&st, expect)?;
    let text = read_report(sd, rel);
    if text.is_none() {
        eprintln!("work loop: warning: report `{rel}` could not be read; classified invalid");
    }
    let (class, fps) = text.as_deref().map(report::classify).unwrap_or((ReportClass::Invalid, Vec::new()));
    let mut previous = st.fingerprints.clone();
    previous.sort();
    previous.dedup();
    let matches = !fps.is_empty() && fps == previous;
    let doc = json!({ "classification": class, "fingerprints": fps, "matches_previous_round": matches });
    let text = format!(
        "review inspect classification={} fingerprints={} matches_previous_round={matches}",
        serde_json::to_value(class).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
        fps.len()
    );
    Ok(Outcome::ok(doc, text))
}

/// `cohort review inspect --adjudication P`: classification plus `matches_previous_round`
/// (stasis: the same non-empty sustained fingerprints as the last recorded round).
pub fn review_inspect(root: &Path, sd: &SpecDir, rel: &str, expect: Option<&str>) -> LoopResult {
    let st = load_required(sd)?;
    check_run_id(&st, expect)?;
    let c = read_classification(root, rel)?;
    let matches = !c.fingerprints.is_empty() && c.fingerprints == st.fingerprints;
    let exit = if c.classification == Class::Indeterminate { ExitStatus::Unsuccessful } else { ExitStatus::Done };
    let mut doc = serde_json::to_value(&c).unwrap_or(Value::Null);
    if let Value::Object(o) = &mut doc {
        o.insert("ok".into(), json!(exit == ExitStatus::Done));
        o.insert("report".into(), json!(rel));
        o.insert("matches_previous_round".into(), json!(matches));
        o.insert("previous_round_fingerprints".into(), json!(st.fingerprints));
        o.insert("review_round_count".into(), json!(st.review_round_count));
        o.insert("review_retry_count".into(), json!(st.review_retry_count));
        o.insert("review_retry_cap_reached".into(), json!(st.review_retry_count >= st.review_retry_cap));
    }
    let mut text = format!("{}: {} sustained", class_name(c.classification), c.sustained.len());
    if matches {
        text.push_str("; same findings as the previous round (stasis): surface for replanning");
    }
    text.push_str(&format!("\nmatches_previous_round: {matches}"));
    Ok(Outcome::with(exit, doc, text))
}

/// `cohort plan check-current`: exit 0 when the approved baseline still matches spec.md and
/// plan.md (canonical hashes, statuses legal after approval); before approval, exit 1 with the
/// sentinel `plan_review_status: pending` on stderr (or exit 0 `current` when plan.md was
/// marked reviewed as it is now). `--require-schedule`: also a schedule computed from the
/// approved plan, with the wave pointer in range.
pub fn plan_check_current(sd: &SpecDir, require_schedule: bool, expect: Option<&str>) -> LoopResult {
    let st = load_required(sd)?;
    check_run_id(&st, expect)?;
    let status = plan_review(sd, &st)?;
    let doc = |status: &str| json!({ "ok": status != "pending", "plan_review_status": status, "plan_reviewed_sha256": st.plan_reviewed_sha256 });
    match status {
        PlanReview::Pending => {
            return Ok(
                Outcome::with(ExitStatus::Unsuccessful, doc("pending"), "plan_review_status: pending").text_to_stderr()
            );
        }
        PlanReview::Current => return Ok(Outcome::ok(doc("current"), "plan_review_status: current")),
        PlanReview::Drift(why) => {
            return Err(LoopError::refused(
                format!("plan check-current: {why}"),
                json!({ "reason": "stale_baseline" }),
            ));
        }
        PlanReview::Approved => {}
    }
    status_legal_after_approval(sd)?;
    if require_schedule {
        if st.schedule_plan_sha256 != st.approved_plan_hash {
            return Err(LoopError::refused(
                format!(
                    "plan check-current: plan_hash != approved_plan_hash (schedule not run, or run on another plan version); {BOTH_CAUSES}"
                ),
                json!({ "reason": "stale_schedule" }),
            ));
        }
        if st.schedule_waves.is_empty() {
            return Err(LoopError::refused(
                "plan check-current: schedule_waves is empty (run `work loop cohort schedule` first)",
                json!({ "reason": "no_schedule" }),
            ));
        }
        if st.current_wave_index >= st.schedule_waves.len() {
            return Err(LoopError::refused(
                format!(
                    "plan check-current: current_wave_index={} out of range [0, {})",
                    st.current_wave_index,
                    st.schedule_waves.len()
                ),
                json!({ "reason": "wave_index" }),
            ));
        }
    }
    Ok(Outcome::ok(doc("approved"), format!("plan check-current OK for {}", sd.feature())))
}

/// The schedule was computed from plan.md as it is now (canonical hash) and plan.md's status
/// is legal after approval: what the engine checks before every transition out of a CODE-*
/// state but `done`.
pub fn schedule_current_of(sd: &SpecDir, st: &CohortState) -> Result<(), LoopError> {
    let Some(text) = sd.read_optional("plan.md")? else {
        return Err(LoopError::refused(
            format!("schedule check-current: plan.md not found in `{}`", sd.rel()),
            json!({ "reason": "missing_plan" }),
        ));
    };
    if let Some(s) = read_status(&text)
        && !["Approved", "Executing", "Done"].contains(&s.as_str())
    {
        return Err(LoopError::refused(
            format!(
                "schedule check-current: plan.md Status is '{s}'; expected one of Approved, Executing, Done after approval"
            ),
            json!({ "reason": "status_regressed", "status": s }),
        ));
    }
    let sha = canonical::sha256(&text, true);
    if st.schedule_plan_sha256.as_deref() != Some(sha.as_str()) {
        return Err(LoopError::refused(
            format!("schedule check-current: plan.md no longer matches the scheduled baseline — {BOTH_CAUSES}"),
            json!({ "reason": "stale_schedule", "plan_hash": st.schedule_plan_sha256, "current": sha }),
        ));
    }
    Ok(())
}

/// `cohort schedule check-current <spec-dir>`: read-only, exit 0 when the waves were computed
/// from plan.md as it is now, exit 1 otherwise.
pub fn schedule_check_current(sd: &SpecDir, expect: Option<&str>) -> LoopResult {
    let st = load_required(sd)?;
    check_run_id(&st, expect)?;
    schedule_current_of(sd, &st)?;
    Ok(Outcome::ok(
        json!({ "ok": true, "schedule_waves": st.schedule_waves, "plan_hash": st.schedule_plan_sha256 }),
        format!("schedule check-current OK for {}", sd.feature()),
    ))
}

/// Where the plan review stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PlanReview {
    /// Not approved, and plan.md not marked reviewed as it is now.
    Pending,
    /// Not approved, but plan.md was marked reviewed as it is now (`plan mark-reviewed`).
    Current,
    /// Approved, and spec.md and plan.md still match the baseline.
    Approved,
    /// Approved, but spec.md or plan.md changed since.
    Drift(String),
}

fn plan_review(sd: &SpecDir, st: &CohortState) -> Result<PlanReview, LoopError> {
    let Some((spec_hash, plan_hash)) = st.approved_hashes() else {
        let sha = sd.read_optional("plan.md")?.map(|t| sha256_hex(t.as_bytes()));
        let current = sha.is_some() && sha == st.plan_reviewed_sha256;
        return Ok(if current { PlanReview::Current } else { PlanReview::Pending });
    };
    for (file, approved, is_plan) in [("spec.md", spec_hash, false), ("plan.md", plan_hash, true)] {
        let Some(text) = sd.read_optional(file)? else {
            return Ok(PlanReview::Drift(format!("{file} not found in `{}`", sd.rel())));
        };
        if canonical::sha256(&text, is_plan) != approved {
            return Ok(PlanReview::Drift(format!("{file} no longer matches the approved baseline — {BOTH_CAUSES}")));
        }
    }
    Ok(PlanReview::Approved)
}

/// `cohort plan mark-reviewed`: records plan.md's hash as reviewed (after pre-EXECUTE review
/// is adjudicated clean). An extension: the design records it implicitly.
pub fn plan_mark_reviewed(sd: &SpecDir, expect: Option<&str>) -> LoopResult {
    mutate(sd, expect, |st| {
        let text = sd
            .read_optional("plan.md")?
            .ok_or_else(|| LoopError::bad(format!("read `{}/plan.md`: no such file", sd.rel())))?;
        let sha = sha256_hex(text.as_bytes());
        let changed = st.plan_reviewed_sha256.as_deref() != Some(&sha);
        st.plan_reviewed_sha256 = Some(sha.clone());
        Ok((changed, json!({ "plan_review_status": "current", "plan_sha256": sha }), "plan marked reviewed".into()))
    })
}

/// Which cap `check` looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckPhase {
    /// The implementation phase: no cap of its own (the state must still be readable).
    Implement,
    /// The implementation retry cap only.
    GatesFailed,
    /// The review retry cap only.
    Review,
}

/// `cohort check [--phase …]`: exit 1 when a cap is reached, naming each condition.
///
/// Without `--phase` it also reports a pending plan review (`plan_review_pending`) — but only
/// while the engine is planning (engine-state.json absent, or in a state before
/// CODE-IMPLEMENTATION, or in a legacy state). In CODE-* and DONE the plan is sealed by the
/// baseline and edits to it (ticked tasks, `Status: Done` at finish) are expected, so they do
/// not fail `check`; `plan_review_status` is still reported.
pub fn check(sd: &SpecDir, phase: Option<CheckPhase>, expect: Option<&str>) -> LoopResult {
    if phase == Some(CheckPhase::Implement) {
        let st = load_readable(sd)?;
        check_run_id(&st, expect)?;
        // The scripts' implement phase has no cap of its own: it only needs readable state.
        return Ok(Outcome::ok(json!({ "ok": true, "phase": "implement", "conditions": [] }), ""));
    }
    let st = load_required(sd)?;
    check_run_id(&st, expect)?;
    let engine_state = crate::engine::load(sd)?.map(|e| e.state);
    let planning = engine_state.as_deref().and_then(crate::table::State::parse).is_none_or(|s| {
        !matches!(
            s,
            crate::table::State::CodeImplementation
                | crate::table::State::CodeVerification
                | crate::table::State::CodeReview
                | crate::table::State::CodeHumanGate
                | crate::table::State::Done
        )
    });
    let mut conditions = Vec::new();
    if phase != Some(CheckPhase::Review) && st.implementation_retry_count >= st.implementation_retry_cap {
        conditions.push(json!({
            "code": "implementation_retry_cap",
            "message": format!("implementation retry cap reached ({}/{})", st.implementation_retry_count, st.implementation_retry_cap),
        }));
    }
    if phase != Some(CheckPhase::GatesFailed) && st.review_retry_count >= st.review_retry_cap {
        conditions.push(json!({
            "code": "review_retry_cap",
            "message": format!("review retry cap reached ({}/{})", st.review_retry_count, st.review_retry_cap),
        }));
    }
    let mut plan_status = None;
    if phase.is_none() {
        let status = match plan_review(sd, &st)? {
            PlanReview::Pending | PlanReview::Drift(_) => "pending",
            PlanReview::Current => "current",
            PlanReview::Approved => "approved",
        };
        plan_status = Some(status);
        if status == "pending" && planning {
            conditions.push(json!({ "code": "plan_review_pending", "message": "plan_review_status: pending" }));
        }
    }
    let ok = conditions.is_empty();
    let text = if ok {
        String::new()
    } else {
        conditions.iter().filter_map(|c| c["message"].as_str()).collect::<Vec<_>>().join("; ")
    };
    let doc = json!({
        "ok": ok,
        "conditions": conditions,
        "plan_review_status": plan_status,
        "engine_state": engine_state,
        "plan_review_checked": phase.is_none() && planning,
        "implementation_retry_count": st.implementation_retry_count,
        "implementation_retry_cap": st.implementation_retry_cap,
        "review_retry_count": st.review_retry_count,
        "review_retry_cap": st.review_retry_cap,
    });
    // A cap reached is a refusal in the scripts: its reason goes to stderr.
    let out = Outcome::with(if ok { ExitStatus::Done } else { ExitStatus::Unsuccessful }, doc, text);
    Ok(if ok { out } else { out.text_to_stderr() })
}

/// `cohort status --json`.
pub fn status(sd: &SpecDir) -> LoopResult {
    let st = load_required(sd)?;
    let text = format!(
        "run {}: wave {}/{}, implementation retries {}/{}, review retries {}/{}, review rounds {}",
        st.run_id,
        st.current_wave_index,
        st.schedule_waves.len(),
        st.implementation_retry_count,
        st.implementation_retry_cap,
        st.review_retry_count,
        st.review_retry_cap,
        st.review_round_count
    );
    Ok(Outcome::ok(st.to_json(), text))
}

/// `cohort reset`: deletes state.json. A no-op (exit 0) when the file or the whole directory
/// is absent: nothing is created then, not even the lock file.
pub fn reset(sd: &SpecDir) -> LoopResult {
    let p = sd.file(STATE_FILE)?;
    if !p.exists() {
        return Ok(Outcome::ok(json!({ "ok": true, "removed": false }), "no cohort state (no-op)"));
    }
    let _lock = Lock::acquire(&sd.file(&format!("{STATE_FILE}.lock"))?)?;
    let existed = p.exists();
    if existed {
        work_runtime::fsx::remove_state(&p)
            .map_err(|e| LoopError::bad(format!("remove `{}/{STATE_FILE}`: {e}", sd.rel())))?;
    }
    Ok(Outcome::ok(
        json!({ "ok": true, "removed": existed }),
        if existed { "cohort state removed" } else { "no cohort state (no-op)" },
    ))
}

/// The scripts' verbs that exist only to refuse (`dispatch-decision`, `auto-parallel`,
/// `worktree …`): present, exit 1, "disabled", never "unknown".
pub fn disabled(verb: &str) -> LoopResult {
    Err(LoopError::refused(
        format!("run `cohort {verb}`: {verb} is disabled in Phase 1 (parallel dispatch is not part of the loop)"),
        json!({ "reason": "disabled", "verb": verb }),
    ))
}
