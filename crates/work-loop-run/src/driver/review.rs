//! REVIEW: one round of read-only reviewers over the whole change, each report proven and
//! adjudicated before it counts.

use super::*;
use serde_json::json;
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

impl Driver {
    pub(super) async fn review_round(&mut self, unit: &str, phase: &str, roles: &[&str]) -> Result<Round, LoopError> {
        let round_no = self.open_round()?;
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
            if let Some(msg) = self.nested_repositories(&changed)? {
                return Ok(Round {
                    results: Vec::new(),
                    stop: Some((work_git::nested::NESTED.into(), msg, ExitStatus::Unsuccessful)),
                });
            }
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
        let tree_before = self.read_only_before()?;
        // Fan-out: every reviewer at once; the join is the barrier.
        let mut set = tokio::task::JoinSet::new();
        let mut recorded: BTreeMap<usize, DispatchOutcome> = BTreeMap::new();
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
            if let Some(o) = self.replayed(&spec) {
                recorded.insert(i, o);
                continue;
            }
            let d = rd.dispatcher.clone();
            set.spawn(async move { (i, d.dispatch(spec).await) });
        }
        let mut outcomes: BTreeMap<usize, DispatchOutcome> = recorded;
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
                Err(AskOr::Fatal(e)) if e.fatal == Some(StopReason::Budget.as_str()) => {
                    return self.budget_round(round_no, e.message);
                }
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
                    if e.fatal == Some(StopReason::Budget.as_str()) {
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
                self.run.emit(Event::AdjudicationOverridden { reviewer: json!(role), notes: json!(overrides) });
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

    /// The round to run: the one a cut-off run left open (the engine has not moved since it
    /// started; what it recorded is dropped, to be recorded again from its answers), else the
    /// next one. Committed before any reviewer is asked.
    fn open_round(&mut self) -> Result<u32, LoopError> {
        let seq = self.engine()?.transition_sequence;
        let round_no = match self.rs.open_round {
            Some(o) if o.seq == seq && o.round == self.rs.unit_rounds && o.round > 0 => {
                self.rs.unit_reviews.retain(|r| r.round != o.round);
                self.rs.unit_findings.retain(|f| f.round != o.round);
                o.round
            }
            _ => self.rs.unit_rounds + 1,
        };
        self.rs.unit_rounds = round_no;
        self.rs.open_round = Some(OpenRound { round: round_no, seq });
        self.save()?;
        Ok(round_no)
    }

    /// A reviewer's report once it proves the reviewer looked (see `crate::proof`): a clean
    /// verdict that names none of `changed` in `files_read` is refused, the reviewer is asked
    /// once more with the reason, and a second such answer counts the reviewer as missing.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn proven(
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
        self.run.emit(Event::ReviewUnproven {
            task_id: None,
            reviewer: json!(role),
            why: json!(why),
            attempt: json!(1),
        });
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
                self.run.emit(Event::ReviewUnproven {
                    task_id: None,
                    reviewer: json!(role),
                    why: json!(why),
                    attempt: json!(2),
                });
                Err(AskOr::Missing(format!("its clean verdict was refused twice: {why}")))
            }
        }
    }

    /// The pinned gates among `names` that are red now (the engine runs each once).
    pub(super) async fn red_gates(
        &self,
        names: &std::collections::BTreeSet<String>,
    ) -> std::collections::BTreeSet<String> {
        let mut red = std::collections::BTreeSet::new();
        let exclude: Vec<String> = self.state_prefix().into_iter().collect();
        let copy = self.git.snapshot_copy(&exclude);
        for (name, cmd) in self.s.gates.iter().filter(|(n, _)| names.contains(n)) {
            self.run.emit(Event::GateStart {
                gate: json!(name),
                command: json!(cmd),
                about: Some("a finding about the gate".into()),
            });
            let green = match &copy {
                Ok(c) => self.run.spawner.shell(cmd, c.path(), self.s.gate_timeout).await.is_ok_and(|o| o.success()),
                Err(_) => false,
            };
            self.run.emit(Event::GateEnd {
                gate: json!(name),
                green,
                end: None,
                about: Some("a finding about the gate".into()),
            });
            if !green {
                red.insert(name.clone());
            }
        }
        red
    }

    pub(super) fn push_outcome(&mut self, o: ReviewerOutcome) -> Result<ReviewerOutcome, LoopError> {
        self.run.progress(&format!(
            "review {} round {} {}: {} ({} sustained, {} refuted)",
            self.rs.unit, o.round, o.role, o.outcome, o.sustained, o.refuted
        ));
        self.rs.unit_reviews.push(o.clone());
        self.save()?;
        Ok(o)
    }

    pub(super) fn write_verdict(
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
        self.run.emit(Event::LoopVerdict { path: json!(rel), state: json!(state) });
        Ok(state)
    }

    /// A changed path that is a git repository of its own (a new nested repository, or a
    /// submodule whose work tree changed): its files are one gitlink or one path to git, so no
    /// reviewer would read them. Named unless the spec or plan names that path.
    fn nested_repositories(&self, changed: &[String]) -> Result<Option<String>, LoopError> {
        let text = format!(
            "{}\n{}",
            self.sd.read_optional("spec.md")?.unwrap_or_default(),
            self.sd.read_optional("plan.md")?.unwrap_or_default()
        );
        let nested = work_git::nested::unnamed(&self.run.root, changed, &text);
        Ok((!nested.is_empty()).then(|| work_git::nested::message(&nested, "the spec", "resume")))
    }
}
