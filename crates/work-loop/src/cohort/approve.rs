//! `cohort init`, `identity`, `approve-plan` and `schedule --plan`: pairing a cohort with a run and
//! pinning the approved baseline.

use super::*;

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
    // The scripts' words: no "reset pair" hint here, and "expected" rather than "supplied".
    let st = load(sd)?.ok_or_else(|| missing(sd))?;
    if let Some(why) = schema_problem(&st) {
        return Err(LoopError::refused(
            format!("identity: {why}"),
            json!({ "reason": "schema_version", "schema_version": st.schema_version }),
        ));
    }
    if let Some(e) = expect
        && e != st.run_id
    {
        return Err(LoopError::refused(
            format!("identity: run_id mismatch (stored={}, expected={})", py_repr_str(&st.run_id), py_repr_str(e)),
            json!({ "run_id": st.run_id, "expected_run_id": e, "reason": "run_id_mismatch" }),
        ));
    }
    let engine = crate::engine::load(sd)?;
    // Without --expect-run-id the pair is checked against itself: the engine and the cohort
    // must belong to the same run.
    let expect = expect.unwrap_or(&st.run_id);
    if let Some(e) = &engine
        && e.run_id != expect
    {
        return Err(LoopError::refused(
            format!("identity: run_id mismatch (engine={}, expected={})", py_repr_str(&e.run_id), py_repr_str(expect)),
            json!({ "run_id": st.run_id, "engine_run_id": e.run_id, "expected_run_id": expect, "reason": "run_id_mismatch" }),
        ));
    }
    let version = st.schema_version.clone().unwrap_or(Value::Null);
    let shown = match &version {
        Value::Null => "None".to_string(),
        v => v.to_string(),
    };
    // The scripts' document, field for field.
    Ok(Outcome::ok(
        json!({ "run_id": st.run_id, "schema_version": version }),
        format!("run_id={} schema_version={shown}", st.run_id),
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
    mutate(sd, "approve-plan", expect, |st| {
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
                status_legal_after_approval(sd, "approve-plan")?;
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

/// A mismatch has two possible causes the verbs cannot tell apart, so they name both, in the
/// scripts' words (their command names: `loop-cohort X` is `work loop cohort X`).
pub const BOTH_CAUSES: &str = concat!(
    "either the approved scope changed, or this baseline was pinned before ",
    "canonical hashing landed. For the second case, recover the cohort only: ",
    "(1) restore `Status: Approved` in BOTH spec.md and plan.md — approve-plan ",
    "refuses unless both read Approved; (2) `loop-cohort reset <spec-dir>`; ",
    "(3) `loop-cohort init <spec-dir> --run-id <run_id>`, taking run_id from ",
    "`loop-engine status <spec-dir> --json`; (4) `loop-cohort approve-plan ",
    "<spec-dir> --expect-run-id <run_id>` then `loop-cohort schedule <spec-dir> ",
    "--expect-run-id <run_id>`; ",
    "(5) restore the Status you were on. Do NOT run `loop-engine reset` — ",
    "`plan-locked` is legal only from SPEC-PLAN-APPROVED and the engine has no ",
    "state-setting verb, so resetting it strands the run. Note the reset clears ",
    "the retry counters and the stasis baseline, and re-running approve-plan ",
    "re-pins whatever is on disk, so it is a re-approval in substance"
);

/// After approval spec.md may only read Approved, Implementing or Shipped, and plan.md
/// Approved, Executing or Done (a file without a status is skipped).
pub(crate) fn status_legal_after_approval(sd: &SpecDir, verb: &str) -> Result<(), LoopError> {
    for (file, allowed) in
        [("spec.md", ["Approved", "Implementing", "Shipped"]), ("plan.md", ["Approved", "Executing", "Done"])]
    {
        let status = sd.read_optional(file)?.as_deref().and_then(read_status);
        if let Some(s) = status
            && !allowed.contains(&s.as_str())
        {
            return Err(LoopError::refused(
                format!(
                    "{verb}: {file} Status is {}; expected one of ['{}'] after approval",
                    py_repr_str(&s),
                    allowed.join("', '")
                ),
                json!({ "reason": "status_regressed", "file": file, "status": s }),
            ));
        }
    }
    Ok(())
}

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
