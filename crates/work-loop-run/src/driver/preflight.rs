//! Preflight: everything that can be bad input, checked before anything is dispatched or changed.

use super::*;

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
            // A run cut off after it applied this very decision: the command is run again to
            // finish it, and the decision is spent (see `Decision`).
            let spent = s.human.parts().is_some_and(|(kind, text)| {
                runner
                    .as_ref()
                    .is_some_and(|r| r.run_id == st.run_id && r.spent_decision(kind, text, st.transition_sequence))
            });
            if s.human != HumanInput::None && !at_gate && !waits_for_decision && !spent {
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
pub(super) fn load_runner(sd: &SpecDir) -> Result<Option<RunnerState>, LoopError> {
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
