//! DECIDE: route a finished review round (reopen the code, ship it, or stop) and the code gate.

use super::*;
use work_runtime::outcome::StopReason;

impl Driver {
    pub(super) async fn review(&mut self, st: &EngineState) -> Step {
        let mut mode = self.ensure_review_mode()?;
        let units = st.history.iter().filter(|h| h.event == "blocker-applied").count();
        let unit = format!("code-{}", units + 1);
        self.enter_unit(&unit)?;
        if let Some(step) = self.pending_decision(&unit, "code")? {
            return Ok(step);
        }
        // A run cut off after it committed the unit's shipping: finish it, never review again.
        if self.rs.shipping.as_ref().is_some_and(|s| s.unit == unit) {
            self.finish_shipping()?;
            return Ok(None);
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
                if r.stop.as_ref().is_some_and(|(code, _, _)| code == StopReason::Budget.as_str()) {
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
    pub(super) fn reopen_code(&mut self, sustained: Vec<Value>, detail: String) -> Step {
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

    /// The unit goes to the merge gate: spec.md `Shipped`, then what is owed is committed
    /// (`shipping`), then `reviewers-clean`, the clean adjudication recorded (when one exists; a
    /// person's acceptance has none) and the verdict written. A run cut off after the commit
    /// finishes the rest where it resumes ([`Self::finish_shipping`]).
    pub(super) fn ship_code(&mut self, clean: Option<String>, residual: Vec<String>) -> Result<(), LoopError> {
        self.set_status("spec.md", "Shipped")?;
        self.rs.shipping = Some(Shipping { unit: self.rs.unit.clone(), clean, residual });
        self.rs.open_round = None;
        self.save()?;
        self.finish_shipping()
    }

    /// Finishes a committed shipping: the transition (unless the engine is past it), the clean
    /// record (unless the cohort's last round is that record) and the verdict.
    pub(super) fn finish_shipping(&mut self) -> Result<(), LoopError> {
        let Some(ship) = self.rs.shipping.clone() else { return Ok(()) };
        self.set_status("spec.md", "Shipped")?;
        if self.engine()?.parsed_state() == Some(State::CodeReview) {
            self.fire("reviewers-clean", TransitionOpts::default())?;
        }
        if let Some(clean) = ship.clean {
            let c = self.cohort()?;
            let recorded = c
                .review_rounds
                .last()
                .is_some_and(|r| r.kind == "clean-report" && r.report.as_deref() == Some(clean.as_str()));
            if !recorded {
                cohort::review_record(
                    &self.run.root,
                    &self.sd,
                    &ReviewRecord::CleanReport(clean),
                    Some(&self.run_id()),
                    self.run.clock.as_ref(),
                )?;
            }
        }
        self.rs.shipping = None;
        // Saves `shipping` cleared together with the verdict's path.
        self.write_verdict(None, ship.residual)?;
        Ok(())
    }

    pub(super) fn code_gate(&mut self, _st: &EngineState) -> Step {
        self.finish_shipping()?;
        match std::mem::take(&mut self.human) {
            HumanInput::Approve => {
                // plan.md says `Done` when DONE is reached: a run cut off between the two
                // finishes it at DONE (`done_report`).
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

    pub(super) fn done_report(&self, st: &EngineState) -> Result<Report, LoopError> {
        let msg = if st.mode == Mode::SpecPlan.name() {
            "spec-plan run finished: the spec and plan are approved and the baseline is sealed".to_string()
        } else {
            // The approval's second half, when a run was cut off between `done` and it.
            if st.last_event.as_deref() == Some("done") {
                self.set_status("plan.md", "Done")?;
            }
            "code run finished: the merge was approved (DONE)".to_string()
        };
        self.run.progress(&format!("loop: DONE: {msg}"));
        Ok(self.report("done", "done", msg, None))
    }
}
