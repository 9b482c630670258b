//! Answers already recorded are never asked for again. A run cut off (killed) after an agent
//! answered, and before the workflow's state took the answer in, left that answer in its
//! `dispatches.jsonl`. The resumed run asks the same question and takes the recorded answer
//! instead of dispatching: [`CutOffRuns`] reads the records of the runs a workflow's state
//! names as cut off, and [`CutOffRuns::answer`] finds the answer to a request.
//!
//! A request is the same when its role, model, effort, access, prompt, schema and context are
//! ([`request_digest`]): a workflow that cannot ask the very same question again (its brief
//! says what the resumed run has seen since) commits the digest of the request before it
//! dispatches, and asks [`CutOffRuns::answer_to`] that digest. Only a dispatch whose last
//! attempt was a schema-valid answer is taken; one that failed, was dropped or was cut off
//! mid-way is asked again. A request the redactor changed (a secret in it) is recorded redacted
//! and never matches: it is dispatched again, which is the safe side.

use super::{DispatchOutcome, DispatchSpec};
use crate::run::RunContext;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The digest of a request's question: its role, model, effort, access, prompt, schema and
/// context (sha256 hex, object keys in sorted order).
pub fn request_digest(spec: &DispatchSpec) -> String {
    question_digest(
        &spec.role,
        &spec.model,
        &spec.effort,
        spec.access.as_str(),
        &spec.prompt,
        spec.schema.as_ref().unwrap_or(&Value::Null),
        &spec.context,
    )
}

/// The digest of a recorded request (its blobs put back), as [`request_digest`] gives it for
/// the spec it was made from; `None` when a field is missing.
fn recorded_digest(request: &Value) -> Option<String> {
    let text = |k: &str| request[k].as_str();
    Some(question_digest(
        text("role")?,
        text("model")?,
        text("effort")?,
        text("access")?,
        text("prompt")?,
        &request["schema"],
        &request["context"],
    ))
}

fn question_digest(
    role: &str,
    model: &str,
    effort: &str,
    access: &str,
    prompt: &str,
    schema: &Value,
    context: &Value,
) -> String {
    let q = json!({
        "role": role, "model": model, "effort": effort, "access": access,
        "prompt": prompt, "schema": schema, "context": context,
    });
    let mut out = Vec::with_capacity(prompt.len() + 256);
    canonical(&q, &mut out);
    crate::fsx::sha256_hex(&out)
}

/// `v` written out with every object's keys in sorted order.
fn canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let _ = serde_json::to_writer(&mut *out, k);
                out.push(b':');
                canonical(&o[k.as_str()], out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(x, out);
            }
            out.push(b']');
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

/// One cut-off run: its id, and its first attempts' request digests with their records.
struct CutOffRun {
    id: String,
    /// Every record of the run, in order.
    records: Vec<Value>,
    /// (digest of the request, dispatch id) of every first attempt, in order.
    asked: Vec<(String, String)>,
}

/// The dispatch records of the runs that were cut off, newest run first, read once.
#[derive(Default)]
pub struct CutOffRuns {
    runs: Vec<CutOffRun>,
}

/// An answer a cut-off run recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    /// The run that recorded it.
    pub run: String,
    /// Its dispatch id (in that run).
    pub dispatch_id: String,
    /// The validated document.
    pub output: Value,
    /// The attempt that gave it (1, or 2 after a malformed first one).
    pub attempts: u32,
}

impl CutOffRuns {
    /// Reads the records of the runs `run_ids` (oldest first, as a workflow's state lists
    /// them) under `<state_dir>/runs`, leaving out `current` (the run asking). A run whose
    /// records cannot be read has none.
    pub fn read(state_dir: &Path, run_ids: &[String], current: &str) -> Self {
        let runs = run_ids
            .iter()
            .rev()
            .filter(|id| id.as_str() != current)
            .map(|id| {
                let dir: PathBuf = state_dir.join("runs").join(id);
                let records = crate::events::read_records(&dir).unwrap_or_default();
                let asked = records
                    .iter()
                    .filter(|r| r["attempt"] == 1)
                    .filter_map(|r| {
                        let id = r["dispatch_id"].as_str()?;
                        let whole = crate::events::resolve_record(&dir, r);
                        Some((recorded_digest(&whole["request"])?, id.to_string()))
                    })
                    .collect();
                CutOffRun { id: id.clone(), records, asked }
            })
            .collect();
        CutOffRuns { runs }
    }

    /// The recorded answer to `spec`, when a cut-off run asked exactly this.
    pub fn answer(&self, spec: &DispatchSpec) -> Option<Replayed> {
        self.answer_to(&request_digest(spec))
    }

    /// The recorded answer to the request whose [`request_digest`] is `digest`, when a
    /// cut-off run asked it and its dispatch's last attempt was a schema-valid answer.
    pub fn answer_to(&self, digest: &str) -> Option<Replayed> {
        for run in &self.runs {
            for (_, id) in run.asked.iter().filter(|(d, _)| d == digest) {
                // The dispatch's last attempt says how it ended (a retry follows a malformed one).
                let Some(last) = run.records.iter().rev().find(|r| r["dispatch_id"] == id.as_str()) else { continue };
                if last["response"]["outcome"] != "ok" || last["response"]["document"].is_null() {
                    continue;
                }
                return Some(Replayed {
                    run: run.id.clone(),
                    dispatch_id: id.clone(),
                    output: last["response"]["document"].clone(),
                    attempts: last["attempt"].as_u64().and_then(|a| u32::try_from(a).ok()).unwrap_or(1),
                });
            }
        }
        None
    }
}

impl Replayed {
    /// Takes the answer in `run`: says so (a `dispatch.replayed` event and a progress line)
    /// and gives it as an outcome that dispatched nothing and cost nothing in this run.
    pub fn take(self, run: &RunContext, role: &str) -> DispatchOutcome {
        run.emit(crate::events::Event::DispatchReplayed {
            dispatch_id: self.dispatch_id.clone(),
            run: self.run.clone(),
            role: role.to_string(),
            attempt: self.attempts,
        });
        run.progress(&format!(
            "{}: the answer recorded by cut-off run {} is taken, not asked again",
            self.dispatch_id, self.run
        ));
        DispatchOutcome::Ok {
            dispatch_id: self.dispatch_id,
            output: self.output,
            usage: Default::default(),
            attempts: self.attempts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::Access;

    fn spec(prompt: &str) -> DispatchSpec {
        DispatchSpec {
            role: "implementer".into(),
            model: "m".into(),
            effort: "high".into(),
            access: Access::WorkspaceWrite,
            prompt: prompt.into(),
            schema: Some(json!({"type": "object"})),
            context: json!({"b": 1, "a": [1, {"y": 2, "x": 3}]}),
            label: "t".into(),
        }
    }

    fn record(id: &str, attempt: u32, s: &DispatchSpec, outcome: &str) -> Value {
        json!({"dispatch_id": id, "attempt": attempt,
            "request": {"role": s.role, "model": s.model, "effort": s.effort, "access": s.access.as_str(),
                "prompt": s.prompt, "schema": s.schema, "context": s.context},
            "response": {"outcome": outcome, "document": if outcome == "ok" { json!({"done": id}) } else { Value::Null }}})
    }

    fn runs(records: Vec<Value>) -> CutOffRuns {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("runs/r1");
        std::fs::create_dir_all(&run).expect("mkdir");
        let text: String = records.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(run.join(crate::events::RECORDS_FILE), text).expect("write");
        CutOffRuns::read(dir.path(), &["r1".into(), "now".into()], "now")
    }

    #[test]
    fn the_same_question_takes_its_recorded_answer_and_another_does_not() {
        let s = spec("fix it");
        let cut = runs(vec![record("d0001-a", 1, &spec("other"), "ok"), record("d0002-b", 1, &s, "ok")]);
        let got = cut.answer(&s).expect("replayed");
        assert_eq!(
            (got.run.as_str(), got.dispatch_id.as_str(), got.output.clone()),
            ("r1", "d0002-b", json!({"done": "d0002-b"}))
        );
        assert!(cut.answer(&spec("fix it again")).is_none());
        // The digest does not depend on the order of the context's keys.
        let mut reordered = s.clone();
        reordered.context = json!({"a": [1, {"x": 3, "y": 2}], "b": 1});
        assert_eq!(cut.answer_to(&request_digest(&reordered)), Some(got));
    }

    #[test]
    fn a_dispatch_whose_last_attempt_failed_is_asked_again() {
        let s = spec("fix it");
        let cut = runs(vec![record("d0001-a", 1, &s, "malformed"), record("d0001-a", 2, &s, "failed")]);
        assert!(cut.answer(&s).is_none());
        let cut = runs(vec![record("d0001-a", 1, &s, "malformed"), record("d0001-a", 2, &s, "ok")]);
        assert_eq!(cut.answer(&s).map(|r| r.attempts), Some(2));
    }

    #[test]
    fn the_asking_run_is_not_searched() {
        let s = spec("fix it");
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("runs/now");
        std::fs::create_dir_all(&run).expect("mkdir");
        std::fs::write(run.join(crate::events::RECORDS_FILE), format!("{}\n", record("d0001-a", 1, &s, "ok")))
            .expect("write");
        assert!(CutOffRuns::read(dir.path(), &["now".into()], "now").answer(&s).is_none());
    }
}
