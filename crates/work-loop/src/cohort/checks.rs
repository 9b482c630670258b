//! `cohort plan check-current`, `schedule check-current`, `plan mark-reviewed`, `check`, `status`,
//! `reset` and the disabled verbs: read-mostly checks of the cohort against the spec directory.

use super::*;

/// `cohort plan check-current`: exit 0 when the approved baseline still matches spec.md and
/// plan.md (canonical hashes, statuses legal after approval); before approval, exit 1 with the
/// sentinel `plan_review_status: pending` on stderr (or exit 0 `current` when plan.md was
/// marked reviewed as it is now). `--require-schedule`: also a schedule computed from the
/// approved plan, with the wave pointer in range.
pub fn plan_check_current(sd: &SpecDir, require_schedule: bool, expect: Option<&str>) -> LoopResult {
    let st = load_required(sd, "plan check-current")?;
    check_run_id(&st, "plan check-current", expect)?;
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
    status_legal_after_approval(sd, "plan check-current")?;
    if require_schedule {
        if st.schedule_plan_sha256 != st.approved_plan_hash {
            return Err(LoopError::refused(
                format!(
                    "plan check-current: plan_hash != approved_plan_hash (schedule not run or run on a different plan version); {BOTH_CAUSES}"
                ),
                json!({ "reason": "stale_schedule" }),
            ));
        }
        if st.schedule_waves.is_empty() {
            return Err(LoopError::refused(
                "plan check-current: schedule_waves is empty (run schedule first)",
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
            format!("schedule check-current: plan.md not found at {}/plan.md", sd.dir().display()),
            json!({ "reason": "missing_plan" }),
        ));
    };
    if let Some(s) = read_status(&text)
        && !["Approved", "Executing", "Done"].contains(&s.as_str())
    {
        return Err(LoopError::refused(
            format!(
                "schedule check-current: plan.md Status is {}; expected one of ['Approved', 'Executing', 'Done'] after approval",
                py_repr_str(&s)
            ),
            json!({ "reason": "status_regressed", "status": s }),
        ));
    }
    let sha = canonical::sha256(&text, true);
    if st.schedule_plan_sha256.as_deref() != Some(sha.as_str()) {
        return Err(LoopError::refused(
            format!(
                "schedule check-current: plan.md no longer matches the scheduled baseline — {BOTH_CAUSES} (stored={} current={})",
                py_repr_str(st.schedule_plan_sha256.as_deref().unwrap_or_default()),
                py_repr_str(&sha)
            ),
            json!({ "reason": "stale_schedule", "plan_hash": st.schedule_plan_sha256, "current": sha }),
        ));
    }
    Ok(())
}

/// `cohort schedule check-current <spec-dir>`: read-only, exit 0 when the waves were computed
/// from plan.md as it is now, exit 1 otherwise.
pub fn schedule_check_current(sd: &SpecDir, expect: Option<&str>) -> LoopResult {
    let st = load_required(sd, "schedule check-current")?;
    check_run_id(&st, "schedule check-current", expect)?;
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
            return Ok(PlanReview::Drift(format!("{file} not found at {}/{file}", sd.dir().display())));
        };
        let current = canonical::sha256(&text, is_plan);
        if current != approved {
            return Ok(PlanReview::Drift(format!(
                "{file} no longer matches the approved baseline — {BOTH_CAUSES} (approved={} current={})",
                py_repr_str(&approved),
                py_repr_str(&current)
            )));
        }
    }
    Ok(PlanReview::Approved)
}

/// `cohort plan mark-reviewed`: records plan.md's hash as reviewed (after pre-EXECUTE review
/// is adjudicated clean). An extension: the design records it implicitly.
pub fn plan_mark_reviewed(sd: &SpecDir, expect: Option<&str>) -> LoopResult {
    mutate(sd, "plan mark-reviewed", expect, |st| {
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
        check_run_id(&st, "check", expect)?;
        // The scripts' implement phase has no cap of its own: it only needs readable state.
        return Ok(Outcome::ok(json!({ "ok": true, "phase": "implement", "conditions": [] }), ""));
    }
    let st = load_required(sd, "check")?;
    check_run_id(&st, "check", expect)?;
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
            "message": format!("implementation retry cap reached ({}/{}); reset and start a new run", st.implementation_retry_count, st.implementation_retry_cap),
        }));
    }
    if phase != Some(CheckPhase::GatesFailed) && st.review_retry_count >= st.review_retry_cap {
        conditions.push(json!({
            "code": "review_retry_cap",
            "message": format!("review retry cap reached ({}/{}); reset and start a new run", st.review_retry_count, st.review_retry_cap),
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
    let st = load_required(sd, "status")?;
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
