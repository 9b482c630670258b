//! EXECUTE and GATES: the implementer's steps (plan tasks and repair rounds) and the pinned gates.

use super::*;
use serde_json::json;
use work_runtime::events::Event;
use work_runtime::outcome::StopReason;

impl Driver {
    pub(super) async fn execute(&mut self, st: &EngineState) -> Step {
        let run = self.run_id();
        let last = st.last_event.clone().unwrap_or_default();
        // Idempotent re-issues of the cohort step that follows each transition.
        match last.as_str() {
            "wave-passed" => {
                let n = st.last_event_context.get("completed_wave_index").and_then(Value::as_u64).unwrap_or_default();
                cohort::wave_advance(&self.sd, n as usize, Some(&run))?;
            }
            "gates-failed" => {
                let cycle = st
                    .last_event_context
                    .get("cycle_id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{run}:{}", st.transition_sequence));
                cohort::record_attempt(&self.sd, &cycle, Some(&run))?;
                if self.rs.fix.is_none() {
                    let detail = gates_text(&self.rs.last_gates);
                    self.rs.fix = Some(Fix { kind: "gates".into(), detail, findings: Vec::new() });
                    self.save()?;
                }
            }
            "findings-remain" if self.rs.recorded_seq != Some(st.transition_sequence) => {
                let route = engine::resume_route(st, None, None, None, self.sd.rel());
                return Ok(Some(self.paused(&route.action, route.message, json!({ "action": route.action }))));
            }
            "blocker-applied" if self.rs.fix.is_none() => {
                return Ok(Some(self.paused(
                    "no-fix-recorded",
                    "blocker-applied was fired outside `work loop run`, so the requested change is unknown; describe it with `--reject` at the merge gate, or drive this step by hand".into(),
                    json!({ "action": "describe-the-change" }),
                )));
            }
            _ => {}
        }
        if matches!(self.status_of("spec.md")?.as_deref(), None | Some("Draft" | "Approved")) {
            self.set_status("spec.md", "Implementing")?;
        }
        if self.rs.code_base.is_none() {
            // The base code review measures against: committed work stays in view.
            self.rs.code_base = Some(self.head_ref());
            self.rs.code_branch = self.git.branch();
            self.save()?;
        }
        if self.rs.check_surface.is_none() {
            self.freeze_check_surface().await;
            self.save()?;
        }
        if self.rs.git_seal.is_none() {
            // A `.gitignore` the spec or plan names is the work.
            let work: String = ["spec.md", "plan.md"]
                .iter()
                .filter_map(|f| self.sd.read_optional(f).ok().flatten())
                .collect::<Vec<_>>()
                .join("\n");
            self.rs.git_seal = self.git.seal().ok().map(|mut seal| {
                seal.allow_named_by(&work);
                seal
            });
            self.save()?;
        }
        let units = st.history.iter().filter(|h| h.event == "blocker-applied").count();
        self.enter_unit(&format!("code-{}", units + 1))?;
        if let Some(fix) = self.rs.fix.clone() {
            let label = format!("fix-{}", fix.kind);
            let ctx = json!({
                "phase": "fix",
                "task_id": label,
                "fix_kind": fix.kind,
                "detail": fix.detail,
                "findings": fix.findings,
                "spec_dir": self.sd.rel(),
            });
            let (dir, kind, detail) = (self.sd.rel().to_string(), fix.kind.clone(), fix.detail.clone());
            let mut text = fix.detail.clone();
            boundary::strings_of(&Value::Array(fix.findings.clone()), &mut text);
            let brief = |nudge: Option<&str>| prompts::fix_brief(&dir, &kind, &detail, nudge);
            if let Some(r) = self.implement_step(&label, ctx, brief, &text, false).await? {
                return Ok(Some(r));
            }
            for f in &mut self.rs.unit_findings {
                if f.resolution == "open" {
                    f.resolution = "fixed".into();
                }
            }
            self.rs.fix = None;
            self.rs.in_flight = None;
            self.save()?;
        } else {
            let c = self.cohort()?;
            let wave_index = c.current_wave_index;
            let wave = c.schedule_waves.get(wave_index).cloned().unwrap_or_default();
            let text = self.sd.read_optional("plan.md")?.unwrap_or_default();
            let plan = parse_plan(&text).map_err(|e| LoopError::bad(format!("read `{}`: {e}", self.rel("plan.md"))))?;
            let key = wave_index.to_string();
            let total: usize = c.schedule_waves.iter().map(Vec::len).sum();
            let mut done = c.schedule_waves.iter().take(wave_index).map(Vec::len).sum::<usize>()
                + self.rs.done_tasks.get(&key).map_or(0, Vec::len);
            for id in wave {
                if self.rs.done_tasks.get(&key).is_some_and(|d| d.contains(&id)) {
                    continue;
                }
                let Some(task) = plan.task(&id).cloned() else {
                    return Ok(Some(self.blocked(
                        "plan-changed",
                        format!(
                            "task {id} of wave {wave_index} is no longer in plan.md (the approved baseline changed)"
                        ),
                    )));
                };
                let ctx = json!({
                    "phase": "implement",
                    "task_id": task.id,
                    "title": task.title,
                    "wave_index": wave_index,
                    "spec_dir": self.sd.rel(),
                });
                let dir = self.sd.rel().to_string();
                self.run.emit(Event::TaskStart {
                    task_id: json!(task.id),
                    title: json!(task.title),
                    done: Some(done as u64),
                    total: Some(total as u64),
                });
                self.run.progress(&format!("loop: wave {wave_index}: task {}: {}", task.id, task.title));
                let text = format!("{}\n{}", task.title, task.body);
                let brief = |nudge: Option<&str>| prompts::task_brief(&dir, &task.id, &task.title, &task.body, nudge);
                if let Some(r) = self.implement_step(&format!("task-{}", task.id), ctx, brief, &text, true).await? {
                    self.run.emit(Event::TaskEnd {
                        task_id: json!(task.id),
                        status: json!("BLOCKED"),
                        reason: Some(json!(r.message)),
                        dispatches: None,
                        repairs: None,
                    });
                    return Ok(Some(r));
                }
                self.run.emit(Event::TaskEnd {
                    task_id: json!(task.id),
                    status: json!("DONE"),
                    reason: None,
                    dispatches: None,
                    repairs: None,
                });
                done += 1;
                self.rs.done_tasks.entry(key.clone()).or_default().push(id);
                self.rs.in_flight = None;
                self.save()?;
            }
        }
        self.fire("wave-complete", TransitionOpts::default())?;
        self.rs.done_tasks.clear();
        self.save()?;
        Ok(None)
    }

    /// One implementer dispatch (and one more when the first changed nothing). The base (HEAD)
    /// and the tree's change against it are taken once, before the first dispatch, and
    /// persisted (`in_flight` in loop-run.json) before it: committed work counts, and a run
    /// killed mid-dispatch judges the resumed dispatch against the real before state. The
    /// caller clears `in_flight` when it records the task or fix as done. `Ok(Err(..))` is a
    /// stop with its reason code.
    pub(super) async fn implement(
        &mut self,
        label: &str,
        context: Value,
        brief: impl Fn(Option<&str>) -> String,
    ) -> Result<Result<(), (String, String)>, LoopError> {
        const NUDGE: &str = "Your previous answer said done, but the working tree outside the spec directory did not change (committed work included): the task is not done. Make the change now.";
        let (mut attempt, base, before) = match self.rs.in_flight.clone() {
            Some(f) if f.label == label => {
                self.run.progress(&format!(
                    "loop: {label}: resuming an interrupted dispatch (attempt {}), judged against the tree before it",
                    f.attempt
                ));
                (f.attempt.clamp(1, 2), f.base, f.before)
            }
            _ => {
                let base = self.head_ref();
                let before = self.snapshot_since(&base)?;
                (1, base, before)
            }
        };
        while attempt <= 2 {
            self.rs.in_flight =
                Some(InFlight { label: label.into(), attempt, base: base.clone(), before: before.clone() });
            self.save()?;
            let mut ctx = context.clone();
            if let Value::Object(o) = &mut ctx {
                o.insert("attempt".into(), json!(attempt));
            }
            let nudge = (attempt > 1).then_some(NUDGE);
            let out = match self
                .ask(IMPLEMENTER, Access::WorkspaceWrite, brief(nudge), prompts::implementer_schema(), ctx, label)
                .await
            {
                Ok(o) => o,
                Err(e) => return Ok(Err((e.code("implementer-failed"), e.message))),
            };
            if prompts::says_blocked(&out) {
                let why = out.get("summary").and_then(Value::as_str).unwrap_or("no reason given");
                return Ok(Err(("implementer-blocked".into(), format!("{label}: the implementer is blocked: {why}"))));
            }
            if let Some(m) = self.approved_drift()? {
                return Ok(Err(("approved-artifacts-changed".into(), m)));
            }
            if let Some(why) = self.head_breach()? {
                return Ok(Err((StopReason::HeadMoved.into(), format!("{label}: {why}"))));
            }
            let after = self.snapshot_since(&base)?;
            if after != before {
                let changed: Vec<&String> =
                    after.iter().filter(|(k, v)| before.get(*k) != Some(v)).map(|(k, _)| k).collect();
                let gone: Vec<&String> = before.keys().filter(|k| !after.contains_key(*k)).collect();
                self.run.emit(Event::LoopTaskDone {
                    label: json!(label),
                    base: json!(base),
                    head: json!(self.git.head_sha()),
                    changed: json!(changed),
                    reverted: json!(gone),
                });
                return Ok(Ok(()));
            }
            self.run
                .progress(&format!("loop: {label}: the implementer claimed done but the working tree did not change"));
            self.run.emit(Event::LoopTaskUnchanged { label: json!(label), attempt: json!(attempt) });
            attempt += 1;
        }
        // A later resume starts the task afresh (two more dispatches).
        self.rs.in_flight = None;
        self.save()?;
        Ok(Err((
            "task-unchanged".into(),
            format!("{label}: the implementer claimed done twice but changed nothing in the working tree: not done"),
        )))
    }

    pub(super) async fn verify(&mut self) -> Step {
        let tampered = self.rs.git_seal.as_ref().map(|seal| crate::git_seal::tampered(&self.git, seal)).transpose();
        if let Some(msg) = tampered.map_err(super::plumbing::git_failed)?.flatten() {
            return Ok(Some(self.blocked(crate::git_seal::TAMPERED, msg)));
        }
        if let Some(r) = self.check_surface_stop() {
            return Ok(Some(r));
        }
        let mut runs = Vec::new();
        let mut red = false;
        // The gates run on the engine's copy of the tree: nothing they write lands in the
        // agent's tree, and a copy that cannot be made is a red gate.
        let exclude: Vec<String> = self.state_prefix().into_iter().collect();
        let copy = self.git.snapshot_copy(&exclude).map_err(|e| format!("the engine's copy could not be made: {e}"));
        for (name, cmd) in self.s.gates.clone() {
            self.run.emit(Event::GateStart { gate: json!(name), command: json!(cmd), about: None });
            let ran = match &copy {
                Ok(c) => self.run.spawner.shell(&cmd, c.path(), self.s.gate_timeout).await.map_err(|e| e.to_string()),
                Err(why) => Err(why.clone()),
            };
            let (green, end, tail) = match ran {
                Ok(out) => {
                    let mut text = out.stdout_text();
                    text.push_str(&out.stderr_text());
                    (out.success(), out.describe_end(), last_lines(&text, 20))
                }
                Err(e) => (false, format!("could not start: {e}"), String::new()),
            };
            self.run.emit(Event::GateEnd { gate: json!(name), green, end: Some(json!(end)), about: None });
            self.run.progress(&format!("gate {name}: {} ({end})", if green { "green" } else { "red" }));
            runs.push(json!({ "gate": name, "command": cmd, "green": green, "end": end, "tail": tail }));
            if !green {
                red = true;
                break;
            }
        }
        self.rs.last_gates = runs;
        self.save()?;
        if !red
            && let Ok(c) = &copy
            && let Some(r) = self.suite_report_stop(c.path()).await
        {
            return Ok(Some(r));
        }
        drop(copy);
        if !red && let Some(r) = self.restored_stop().await {
            return Ok(Some(r));
        }
        let c = self.cohort()?;
        let wave = Some(c.current_wave_index);
        if !red {
            if c.more_waves() {
                let st = self.fire("wave-passed", TransitionOpts { wave_index: wave, intent_incomplete: false })?;
                let n = st.last_event_context.get("completed_wave_index").and_then(Value::as_u64).unwrap_or_default();
                cohort::wave_advance(&self.sd, n as usize, Some(&self.run_id()))?;
            } else {
                self.fire("gates-clean", TransitionOpts { wave_index: wave, intent_incomplete: false })?;
            }
            return Ok(None);
        }
        if c.implementation_retry_count >= c.implementation_retry_cap {
            let msg = format!(
                "the gates are still red and the implementation retry cap is reached ({}/{}): {}",
                c.implementation_retry_count,
                c.implementation_retry_cap,
                gates_text(&self.rs.last_gates)
            );
            return Ok(Some(self.blocked("implementation-retry-cap", msg)));
        }
        let st = self.fire("gates-failed", TransitionOpts::default())?;
        let cycle = st
            .last_event_context
            .get("cycle_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{}:{}", st.run_id, st.transition_sequence));
        cohort::record_attempt(&self.sd, &cycle, Some(&self.run_id()))?;
        self.rs.fix = Some(Fix { kind: "gates".into(), detail: gates_text(&self.rs.last_gates), findings: Vec::new() });
        self.save()?;
        Ok(None)
    }
}
