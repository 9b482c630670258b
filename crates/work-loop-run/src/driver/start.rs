//! Start and resume: pinned gates, the frozen check surface, the approved baseline, review units.

use super::preflight::load_runner;
use super::*;
use serde_json::json;
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

impl Driver {
    pub(super) fn start(&mut self) -> Result<Option<Report>, LoopError> {
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
    pub(super) fn pin_gates(&mut self) {
        match &self.rs.pinned_gates {
            None => self.rs.pinned_gates = Some(self.s.gates.clone()),
            Some(pinned) if *pinned != self.s.gates => {
                let now: Vec<String> = self.s.gates.iter().map(|(n, c)| format!("{n}=`{c}`")).collect();
                let was: Vec<String> = pinned.iter().map(|(n, c)| format!("{n}=`{c}`")).collect();
                self.run.emit(Event::GatesPinned { pinned: json!(pinned), configured: json!(self.s.gates) });
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
    pub(super) async fn freeze_check_surface(&mut self) {
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
                self.run.emit(Event::SuiteBaseline {
                    command: json!(part),
                    collected: json!(collected),
                    skipped: json!(skipped),
                });
            }
            self.rs.check_surface = Some(s);
        }
    }

    /// A stop when green gates ran a suite that lost tests since the code phase began (see
    /// `work_git::suite_report`), run in `dir` (the engine's copy of the tree).
    pub(super) async fn suite_report_stop(&self, dir: &std::path::Path) -> Option<Report> {
        let surface = self.rs.check_surface.as_ref()?;
        let lost = surface.suite_changes(&self.run.spawner, dir, self.s.gate_timeout).await;
        if lost.is_empty() {
            return None;
        }
        let what = work_git::surface::describe(&lost);
        self.run.emit(Event::CheckSurfaceChanged { goal_id: None, changes: Some(json!(what)), restored: None });
        Some(self.blocked(
            StopReason::CheckTampered.as_str(),
            format!(
                "the gates are green but their suite lost tests since the code phase began: {what}. Adding tests is the only change allowed: restore them (git diff shows the change), then resume"
            ),
        ))
    }

    /// A stop when the implementer changed what judges it: a gate's script, the configuration,
    /// or an existing test (adding tests is allowed).
    pub(super) fn check_surface_stop(&self) -> Option<Report> {
        let surface = self.rs.check_surface.as_ref()?;
        let changes = surface.changes(&self.run.root, work_git::surface::TestEdits::Add);
        if changes.is_empty() {
            return None;
        }
        let what = work_git::surface::describe(&changes);
        self.run.emit(Event::CheckSurfaceChanged { goal_id: None, changes: Some(json!(what)), restored: None });
        Some(self.blocked(
            StopReason::CheckTampered.as_str(),
            format!(
                "the implementation changed what judges it: {what}. Gates are only as honest as the scripts and tests they run: restore them (git diff shows the change), then resume"
            ),
        ))
    }

    /// Records spec.md and plan.md as approved (status lines left out).
    pub(super) fn record_approved(&mut self) -> Result<(), LoopError> {
        for file in ["spec.md", "plan.md"] {
            let text = self.sd.read_optional(file)?.unwrap_or_default();
            self.rs.approved_digests.insert(file.into(), crate::status::approved_digest(&text));
        }
        self.save()
    }

    /// Why the code phase must stop when spec.md or plan.md changed after plan-locked (status
    /// lines aside).
    pub(super) fn approved_drift(&self) -> Result<Option<String>, LoopError> {
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

    pub(super) fn ensure_review_mode(&mut self) -> Result<ReviewMode, LoopError> {
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
    pub(super) fn enter_unit(&mut self, unit: &str) -> Result<(), LoopError> {
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
}
