//! A human gate asked through the client: when a run pauses for a person's approval (exit 3
//! with `next.approve`, as `work loop run` does at its spec, plan and merge gates) and the
//! client declared the `elicitation` capability (form mode), the server asks the person
//! (`elicitation/create`) instead of returning "paused", and on an accepted answer makes the
//! call that continues itself.
//!
//! The question is one form: `decision` (`approve` or `reject`) and, for a rejection, `changes`
//! (what to change, passed as the run's `--reject` text). A declined or cancelled question, or
//! a rejection without `changes`, ends the call with the paused result, as for a client
//! without elicitation.

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use serde_json::{Map, Value, json};

/// The placeholder a paused document puts where the person's rejection text goes.
pub const CHANGES_PLACEHOLDER: &str = "<what to change>";

/// A gate a person can decide: the calls that approve and reject.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// What the run said (its `message`).
    pub message: String,
    /// The call that approves: (tool, arguments).
    pub approve: (String, Map<String, Value>),
    /// The call that rejects, its placeholder still in.
    pub reject: Option<(String, Map<String, Value>)>,
}

/// What the person decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Make this call: (tool, arguments).
    Continue(String, Map<String, Value>),
    /// Nothing decided; the note says why (for the paused result).
    Undecided(String),
}

impl Gate {
    /// The gate of a paused document, given how a `work …` command becomes a call: `None`
    /// when the document offers no approval.
    pub fn of(doc: &Value, call_of: impl Fn(&str) -> Option<(String, Value)>) -> Option<Gate> {
        let next = doc.get("next")?;
        let call = |key: &str| {
            let (tool, args) = call_of(next.get(key)?.as_str()?)?;
            match args {
                Value::Object(m) => Some((tool, m)),
                _ => None,
            }
        };
        Some(Gate {
            message: doc.get("message").and_then(Value::as_str).unwrap_or("the run awaits a person").to_string(),
            approve: call("approve")?,
            reject: call("reject"),
        })
    }

    /// The question: the run's message and the form (`None` only if the SDK refused the form).
    pub fn question(&self) -> Option<ElicitRequestParams> {
        let mut decisions = vec!["approve"];
        if self.reject.is_some() {
            decisions.push("reject");
        }
        let mut props = json!({
            "decision": {"type": "string", "title": "Decision", "enum": decisions,
                "description": "approve: the run continues; reject: it goes back with your changes"},
        });
        if self.reject.is_some() {
            props["changes"] = json!({"type": "string", "title": "What to change",
                "description": "When rejecting: what to change (the run's --reject text)"});
        }
        let schema = json!({"type": "object", "properties": props, "required": ["decision"]});
        let requested_schema: ElicitationSchema = serde_json::from_value(schema).ok()?;
        Some(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: format!("work paused for your decision: {}", self.message),
            requested_schema,
        })
    }

    /// The call the answer asks for.
    pub fn decide(&self, answer: &ElicitResult) -> Decision {
        match answer.action {
            ElicitationAction::Accept => {}
            ElicitationAction::Decline => return Decision::Undecided("the person declined to decide".into()),
            _ => return Decision::Undecided("the person cancelled the question".into()),
        }
        let content = answer.content.as_ref();
        let field = |k: &str| content.and_then(|c| c.get(k)).and_then(Value::as_str).unwrap_or("").trim();
        match (field("decision"), &self.reject) {
            ("approve", _) => Decision::Continue(self.approve.0.clone(), self.approve.1.clone()),
            ("reject", Some((tool, args))) if !field("changes").is_empty() => {
                let mut args = args.clone();
                for v in args.values_mut() {
                    if v.as_str() == Some(CHANGES_PLACEHOLDER) {
                        *v = json!(field("changes"));
                    }
                }
                Decision::Continue(tool.clone(), args)
            }
            ("reject", Some(_)) => Decision::Undecided("a rejection needs what to change (`changes`)".into()),
            (other, _) => Decision::Undecided(format!("no decision (`decision` was `{other}`)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Value {
        json!({"outcome": "paused", "message": "the spec awaits approval", "next": {
            "approve": "work loop run d --resume --approve",
            "reject": "work loop run d --resume --reject \"<what to change>\""}})
    }

    fn call_of(c: &str) -> Option<(String, Value)> {
        let mut args = json!({"spec_dir": "d", "resume": true});
        if c.contains("--approve") {
            args["approve"] = json!(true);
        } else {
            args["reject"] = json!(CHANGES_PLACEHOLDER);
        }
        Some(("loop_run".into(), args))
    }

    fn answer(action: ElicitationAction, content: Value) -> ElicitResult {
        let mut r = ElicitResult::new(action);
        r.content = Some(content);
        r
    }

    #[test]
    fn a_gate_asks_and_the_answer_is_the_call() {
        let g = Gate::of(&doc(), call_of).expect("a gate");
        let q = serde_json::to_value(g.question().expect("a form")).expect("serialises");
        assert_eq!(q["requestedSchema"]["properties"]["decision"]["enum"], json!(["approve", "reject"]), "{q}");
        assert!(q["message"].as_str().is_some_and(|m| m.contains("the spec awaits approval")), "{q}");
        let approve = g.decide(&answer(ElicitationAction::Accept, json!({"decision": "approve"})));
        assert_eq!(approve, Decision::Continue("loop_run".into(), g.approve.1.clone()));
        let reject = g.decide(&answer(ElicitationAction::Accept, json!({"decision": "reject", "changes": "name it"})));
        let Decision::Continue(_, args) = reject else { panic!("a call") };
        assert_eq!(args["reject"], "name it");
        for (a, c) in [
            (ElicitationAction::Decline, json!({})),
            (ElicitationAction::Cancel, json!({})),
            (ElicitationAction::Accept, json!({"decision": "reject"})),
            (ElicitationAction::Accept, json!({"decision": "maybe"})),
        ] {
            assert!(matches!(g.decide(&answer(a, c)), Decision::Undecided(_)));
        }
        assert_eq!(Gate::of(&json!({"next": {"resume": "work loop run d --resume"}}), call_of), None);
    }
}
