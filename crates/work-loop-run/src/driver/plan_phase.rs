//! PLAN: drafting, the spec-and-plan review, the human gates and the seal of the approved baseline.

use super::*;
use serde_json::json;
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

impl Driver {
    pub(super) async fn drafting(&mut self, st: &EngineState) -> Step {
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
            if let Some(stop) = self.drafted_outside(guard)? {
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

    pub(super) async fn spec_review(&mut self, st: &EngineState) -> Step {
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
    pub(super) fn spec_clean(&mut self) -> Result<(), LoopError> {
        self.write_verdict(None, Vec::new())?;
        cohort::plan_mark_reviewed(&self.sd, Some(&self.run_id()))?;
        self.fire("reviewers-clean", TransitionOpts::default())?;
        Ok(())
    }

    /// Sustained spec/plan findings go back to the drafter.
    pub(super) fn spec_revise(&mut self, findings: Vec<Value>, detail: String) -> Result<(), LoopError> {
        self.fire("findings-remain", TransitionOpts::default())?;
        self.rs.revision = Some(Revision { kind: "review".into(), detail, findings });
        self.save()?;
        self.write_verdict(None, Vec::new())?;
        Ok(())
    }

    /// A round that stopped: BLOCKED, or (an undecided adjudication) a pause that waits for a
    /// person's decision, remembered so that a resume does not pay for another round.
    pub(super) fn stop_round(
        &mut self,
        unit: &str,
        phase: &str,
        round: &Round,
        code: &str,
        msg: String,
        exit: ExitStatus,
    ) -> Step {
        if code == StopReason::Budget.as_str() {
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
    pub(super) fn wait_for_decision(&mut self, p: PendingDecision) -> Result<Report, LoopError> {
        self.rs.pending_decision = Some(p.clone());
        self.save()?;
        Ok(self.decision_pause(&p))
    }

    pub(super) fn decision_pause(&self, p: &PendingDecision) -> Report {
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
    pub(super) fn pending_decision(&mut self, unit: &str, phase: &str) -> Result<Option<Option<Report>>, LoopError> {
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
                self.run.emit(Event::LoopDecision {
                    unit: json!(unit),
                    reason: json!(p.reason),
                    decision: json!("approve"),
                });
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
                self.run.emit(Event::LoopDecision {
                    unit: json!(unit),
                    reason: json!(p.reason),
                    decision: json!("reject"),
                });
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
    pub(super) fn settle_undecided(&mut self, p: &PendingDecision, resolution: &str) {
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

    pub(super) fn gate_next(&self, file: &str, status: &str, what: &str) -> Value {
        json!({
            "action": format!("approve-{what}"),
            "file": self.rel(file),
            "edit": format!("set the status line of {} to `**Status:** {status}`", self.rel(file)),
            "then": self.resume_cmd(),
            "approve": format!("work loop run {} --resume --approve", self.sd.rel()),
            "reject": format!("work loop run {} --resume --reject \"<what to change>\"", self.sd.rel()),
        })
    }

    pub(super) fn reject_to_drafting(&mut self, event: &str, text: &str) -> Step {
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
    pub(super) fn human_gate(&mut self, st: &EngineState, file: &str, what: &str) -> Step {
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

    pub(super) fn spec_gate(&mut self, st: &EngineState) -> Step {
        self.human_gate(st, "spec.md", "spec")
    }

    pub(super) fn plan_gate(&mut self, st: &EngineState) -> Step {
        self.human_gate(st, "plan.md", "plan")
    }

    pub(super) fn seal(&mut self, st: &EngineState) -> Step {
        let run = self.run_id();
        cohort::approve_plan(&self.sd, Some(&run), false, self.run.clock.as_ref())?;
        if st.mode == Mode::Code.name() {
            cohort::schedule(&self.sd, Some(&run))?;
        }
        self.fire("plan-locked", TransitionOpts::default())?;
        self.record_approved()?;
        Ok(None)
    }
}
