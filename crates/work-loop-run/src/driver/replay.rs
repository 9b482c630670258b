//! Answers already recorded are never asked for again: a run cut off (killed) after an agent
//! answered, and before the driver's state took the answer in, left that answer in its
//! `dispatches.jsonl`. The resumed run asks the same question (the same role, pins, access,
//! brief, schema and context: the round it resumes is the same round) and takes the recorded
//! answer instead of dispatching (`work_runtime::dispatch::replay`, which `work ultra` shares).
//! Only the runs in `open_runs` are searched — those that were cut off; a run that ended
//! judged its answers, and a later run asks afresh.

use super::*;
use work_runtime::dispatch::replay::CutOffRuns;

impl Driver {
    /// The cut-off runs' records, newest run first, read once per invocation.
    fn cut_off_records(&self) -> &CutOffRuns {
        self.recorded.get_or_init(|| CutOffRuns::read(&self.run.state_dir, &self.rs.open_runs, &self.run.run_id))
    }

    /// The recorded answer to `spec`, when a cut-off run asked exactly this and got a valid
    /// answer: an outcome that dispatched nothing and cost nothing in this run.
    pub(super) fn replayed(&self, spec: &DispatchSpec) -> Option<DispatchOutcome> {
        let found = self.cut_off_records().answer(spec)?;
        Some(found.take(&self.run, &spec.role))
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
