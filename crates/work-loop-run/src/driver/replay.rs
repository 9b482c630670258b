//! Answers already recorded are never asked for again: a run cut off (killed) after an agent
//! answered, and before the driver's state took the answer in, left that answer in its
//! `dispatches.jsonl`. The resumed run asks the same question (the same role, pins, access,
//! brief, schema and context: the round it resumes is the same round) and takes the recorded
//! answer instead of dispatching. Only the runs in `open_runs` are searched — those that were
//! cut off; a run that ended judged its answers, and a later run asks afresh.
//!
//! A request the redactor changed (a secret in it) is recorded redacted and never matches: it
//! is dispatched again, which is the safe side.

use super::*;
use std::path::PathBuf;

/// One cut-off run's records.
pub(super) struct Recorded {
    dir: PathBuf,
    records: Vec<Value>,
}

impl Driver {
    /// The cut-off runs' records, newest run first, read once per invocation.
    fn cut_off_records(&self) -> &[Recorded] {
        self.recorded.get_or_init(|| {
            self.rs
                .open_runs
                .iter()
                .rev()
                .filter(|id| **id != self.run.run_id)
                .map(|id| {
                    let dir = self.run.state_dir.join("runs").join(id);
                    let records = work_runtime::events::read_records(&dir).unwrap_or_default();
                    Recorded { dir, records }
                })
                .collect()
        })
    }

    /// The recorded answer to `spec`, when a cut-off run asked exactly this and got a valid
    /// answer: an outcome that dispatched nothing and cost nothing in this run.
    pub(super) fn replayed(&self, spec: &DispatchSpec) -> Option<DispatchOutcome> {
        let schema = spec.schema.clone().unwrap_or(Value::Null);
        for run in self.cut_off_records() {
            for rec in &run.records {
                let req = &rec["request"];
                let same = rec["attempt"] == 1
                    && req["role"] == spec.role.as_str()
                    && req["model"] == spec.model.as_str()
                    && req["effort"] == spec.effort.as_str()
                    && req["access"] == spec.access.as_str()
                    && req["prompt"] == spec.prompt.as_str();
                if !same {
                    continue;
                }
                let whole = work_runtime::events::resolve_record(&run.dir, rec);
                if whole["request"]["context"] != spec.context || whole["request"]["schema"] != schema {
                    continue;
                }
                let Some(id) = rec["dispatch_id"].as_str() else { continue };
                // The dispatch's last attempt says how it ended (a retry follows a malformed one).
                let Some(last) = run.records.iter().rev().find(|r| r["dispatch_id"] == id) else { continue };
                if last["response"]["outcome"] != "ok" || last["response"]["document"].is_null() {
                    continue;
                }
                let from = run.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                self.run.emit(
                    "dispatch.replayed",
                    json!({ "dispatch_id": id, "run": from, "role": spec.role, "attempt": last["attempt"] }),
                );
                self.run
                    .progress(&format!("{id}: the answer recorded by cut-off run {from} is taken, not asked again"));
                return Some(DispatchOutcome::Ok {
                    dispatch_id: id.to_string(),
                    output: last["response"]["document"].clone(),
                    usage: Default::default(),
                    attempts: last["attempt"].as_u64().and_then(|a| u32::try_from(a).ok()).unwrap_or(1),
                });
            }
        }
        None
    }

    /// Adds this run to `open_runs` (a cut-off run is found there) and commits the person's
    /// decision, before any dispatch or transition. A decision a cut-off run already applied
    /// is spent: dropped, and a rejection's owed fix restored if the cut came before it was
    /// saved.
    pub(super) fn open_this_run(&mut self) -> Result<(), LoopError> {
        let _ = self.cut_off_records();
        let st = self.engine()?;
        let seq = st.transition_sequence;
        if let Some((kind, text)) = self.human.parts() {
            if self.rs.spent_decision(kind, text, seq) {
                self.run.progress(&format!("loop: the --{kind} given to a run that was cut off was applied already"));
                if let (HumanInput::Reject(t), None) = (&self.human, &self.rs.fix)
                    && st.last_event.as_deref() == Some("blocker-applied")
                    && st.parsed_state() == Some(State::CodeImplementation)
                {
                    self.rs.fix = Some(Fix { kind: "human".into(), detail: t.clone(), findings: Vec::new() });
                }
                self.human = HumanInput::None;
            } else {
                let text = text.map(str::to_string);
                self.rs.decision = Some(Decision { kind: kind.into(), text, seq });
            }
        }
        if !self.rs.open_runs.contains(&self.run.run_id) {
            self.rs.open_runs.push(self.run.run_id.clone());
        }
        self.save()
    }

    /// The run ended (done, paused, blocked): its answers and those of the runs it resumed are
    /// judged, and no round is left open.
    pub(super) fn close_runs(&mut self) {
        let open = !self.rs.open_runs.is_empty() || self.rs.open_round.is_some() || self.rs.decision.is_some();
        if self.rs.run_id.is_empty() || !open {
            return;
        }
        if self.sd.file(STATE_FILE).is_ok_and(|p| p.exists()) {
            self.rs.open_runs.clear();
            self.rs.open_round = None;
            self.rs.decision = None;
            if let Err(e) = self.save() {
                self.run.progress(&format!("warning: {e}"));
            }
        }
    }
}
