//! The implementer's brief (the subagent template: TASK, DELIVERABLE, SCOPE, VERIFY,
//! STOP WHEN; an executable assignment, not a context handoff), its answer schema, and the
//! answer as the engine reads it.

use crate::goal::{Criterion, Goal};
use serde_json::{Value, json};

/// The JSON Schema of the implementer's answer. Only `status` is required: a minimal honest
/// answer (`{"status": "done"}`) is read the first time, never re-dispatched as malformed.
/// GREEN comes from the engine's observation whatever the word; only `blocked` changes what
/// the engine does.
pub fn answer_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["status"],
        "properties": {
            "status": {"enum": ["done", "partial", "blocked"],
                       "description": "done: you believe every targeted criterion passes (the engine observes); partial: some work remains; blocked: you cannot go on"},
            "summary": {"type": ["string", "null"]},
            "claims": {
                "type": ["array", "null"],
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "criterion": {"type": ["string", "null"]},
                        "claim": {"type": ["string", "null"]},
                        "evidence": {"type": ["string", "null"]}
                    }
                }
            },
            "cleanup": {
                "type": ["array", "null"],
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "resource": {"type": ["string", "null"]},
                        "action": {"type": ["string", "null"]},
                        "path": {"type": ["string", "null"]},
                        "pid": {"type": ["integer", "null"]}
                    }
                }
            },
            "blocker": {"type": ["string", "null"]}
        }
    })
}

/// One claim of the agent (recorded, never trusted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The criterion id (empty when the claim named none).
    pub criterion: String,
    /// What it says it did.
    pub claim: String,
    /// What it says proves it.
    pub evidence: Option<String>,
}

/// One torn-down resource the agent reports (a cleanup receipt to verify).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CleanupClaim {
    /// What it was.
    pub resource: String,
    /// What was done.
    pub action: String,
    /// A path (relative to the repository root) that must no longer exist.
    pub path: Option<String>,
    /// A process id that must no longer run.
    pub pid: Option<i64>,
}

/// The agent's answer; everything but `status` defaults to empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status word, trimmed and lower-cased (`done`, `partial`, `blocked`, …).
    pub status: String,
    /// One line (empty when not given).
    pub summary: String,
    /// Per-criterion claims.
    pub claims: Vec<Claim>,
    /// Cleanup receipts.
    pub cleanup: Vec<CleanupClaim>,
    /// Why it cannot progress (with `blocked`).
    pub blocker: Option<String>,
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl Answer {
    /// Reads a document that validated against [`answer_schema`]: one name and one shape per
    /// field; missing optional fields default.
    pub fn from_value(v: &Value) -> Result<Answer, String> {
        let obj = v.as_object().ok_or("the answer is not a JSON object")?;
        let status = text(obj.get("status")).map(|s| s.trim().to_ascii_lowercase()).ok_or("`status` is missing")?;
        let objects = |key: &str| -> Vec<serde_json::Map<String, Value>> {
            obj.get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_object().cloned())
                .collect()
        };
        let claims = objects("claims")
            .iter()
            .map(|o| Claim {
                criterion: text(o.get("criterion")).unwrap_or_default(),
                claim: text(o.get("claim")).unwrap_or_default(),
                evidence: text(o.get("evidence")),
            })
            .collect();
        let cleanup = objects("cleanup")
            .iter()
            .map(|o| {
                let path = text(o.get("path")).filter(|p| !p.trim().is_empty());
                let pid = o.get("pid").and_then(Value::as_i64);
                let resource = text(o.get("resource"))
                    .or_else(|| path.clone())
                    .or_else(|| pid.map(|p| format!("pid {p}")))
                    .unwrap_or_default();
                CleanupClaim { resource, action: text(o.get("action")).unwrap_or_default(), path, pid }
            })
            .collect();
        Ok(Answer {
            status,
            summary: text(obj.get("summary")).unwrap_or_default(),
            claims,
            cleanup,
            blocker: text(obj.get("blocker")),
        })
    }

    /// The agent says it cannot progress.
    pub fn is_blocked(&self) -> bool {
        self.status == "blocked"
    }
}

/// The current state of one target, for the brief.
#[derive(Debug, Clone)]
pub struct TargetView<'a> {
    /// The criterion.
    pub criterion: &'a Criterion,
    /// How its latest run ended and which checks failed.
    pub latest: String,
    /// The tail of its latest stdout.
    pub stdout_tail: String,
    /// The tail of its latest stderr.
    pub stderr_tail: String,
}

/// Keeps the last `max` characters of `s` (on a character boundary), marking the cut.
pub fn tail(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let kept: String = s.chars().skip(n - max).collect();
    format!("…{kept}")
}

/// Builds the brief of one attempt.
pub fn prompt(goal: &Goal, targets: &[TargetView<'_>], attempt: u32, history: &[String], notes: &[String]) -> String {
    let ids: Vec<&str> = targets.iter().map(|t| t.criterion.id.as_str()).collect();
    let mut p = String::new();
    p.push_str(&format!(
        "TASK: Change the repository so that the failing success criteria {} of the goal below pass. \
This is an executable assignment, not a context handoff: do the work now, in this repository.\n\n",
        ids.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
    ));
    p.push_str(&format!("GOAL: {}\n", goal.objective));
    p.push_str(&format!("TIER: {} — {}\n", goal.tier.as_str(), goal.tier_justification));
    p.push_str(&format!("ATTEMPT: {attempt}\n\n"));
    p.push_str(
        "DELIVERABLE: the smallest production change that flips each criterion below from RED (failing, \
captured before any change) to GREEN. Tests alone never prove done; the scenario is the proof.\n\n",
    );
    p.push_str("SCOPE — the criteria to make pass (each scenario runs with `sh -c` in the repository root):\n");
    for t in targets {
        let c = t.criterion;
        p.push_str(&format!("- `{}`\n", c.id));
        for about in [&c.name, &c.description].into_iter().flatten() {
            p.push_str(&format!("  about: {about}\n"));
        }
        p.push_str(&format!("  scenario: {}\n  PASS when: {}\n", c.scenario, c.pass.describe()));
        p.push_str(&format!(
            "  evidence captured by the engine: {}\n",
            c.evidence.iter().map(|e| e.as_str()).collect::<Vec<_>>().join(", ")
        ));
        p.push_str(&format!("  latest observation: {}\n", t.latest));
        if !t.stdout_tail.trim().is_empty() {
            p.push_str(&format!("  stdout (tail):\n{}\n", indent(&t.stdout_tail)));
        }
        if !t.stderr_tail.trim().is_empty() {
            p.push_str(&format!("  stderr (tail):\n{}\n", indent(&t.stderr_tail)));
        }
    }
    let others: Vec<&Criterion> = goal.criteria.iter().filter(|c| !ids.contains(&c.id.as_str())).collect();
    if !others.is_empty() {
        p.push_str("\nMUST KEEP PASSING (the engine re-runs these after you answer):\n");
        for c in others {
            p.push_str(&format!(
                "- `{}` ({}): {} — PASS when {}\n",
                c.id,
                c.kind.as_str(),
                c.scenario,
                c.pass.describe()
            ));
        }
    }
    if !history.is_empty() {
        p.push_str("\nWHAT WAS TRIED (do not repeat a failed approach):\n");
        for h in history {
            p.push_str(&format!("- {h}\n"));
        }
    }
    if !notes.is_empty() {
        p.push_str("\nENGINE NOTES:\n");
        for n in notes {
            p.push_str(&format!("- {n}\n"));
        }
    }
    p.push_str(
        "\nVERIFY: after you answer, the engine re-runs every scenario itself. A criterion is green only when \
the engine observes PASS; your claims are recorded, never trusted. Never delete, skip or weaken a test or \
a scenario, never suppress a lint or an error.\n",
    );
    p.push_str(
        "CLEANUP: tear down everything you started (servers, sessions, temporary files and directories) before \
you answer, and list each under `cleanup` with its `path` (relative to the repository root) or `pid`: the \
engine checks that a listed path no longer exists and a listed pid no longer runs. Leftover state means not done.\n",
    );
    p.push_str(&format!("STOP WHEN: {}\n", goal.stop_line));
    p.push_str(
        "\nANSWER with exactly one JSON document: {\"status\": \"done\"|\"partial\"|\"blocked\"} is enough; add \
\"summary\": \"one line\", \"claims\": [{\"criterion\": \"<id>\", \"claim\": \"what you changed\", \"evidence\": \"optional\"}], \
\"cleanup\": [{\"resource\": \"…\", \"action\": \"…\", \"path\": \"optional\", \"pid\": 0}] and, with status blocked, \
\"blocker\": \"why\".\n",
    );
    p
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    | {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_requires_only_a_status_and_the_answer_defaults_the_rest() {
        let schema = answer_schema();
        let ok = json!({"status": "done", "summary": "s", "claims": [{"criterion": "a", "claim": "c"}],
            "cleanup": [{"resource": "tmp", "action": "rm -rf", "path": "tmp"}]});
        assert!(work_runtime::dispatch::validate(&schema, &ok).is_ok());
        let a = Answer::from_value(&ok).expect("reads");
        assert_eq!(a.cleanup[0].path.as_deref(), Some("tmp"));

        let bare = json!({"status": "done"});
        assert!(work_runtime::dispatch::validate(&schema, &bare).is_ok());
        let a = Answer::from_value(&bare).expect("reads");
        assert_eq!((a.status.as_str(), a.summary.as_str(), a.claims.len(), a.cleanup.len()), ("done", "", 0, 0));
        assert!(!a.is_blocked());

        // One shape per field: claims and receipts are objects, a pid an integer, the status one
        // of three words (the dispatcher folds its case before validating).
        for loose in [
            json!({"status": "done", "claims": ["made it pass"]}),
            json!({"status": "done", "cleanup": [{"pid": "42"}]}),
            json!({"status": "done", "cleanup": ["rm -rf tmp"]}),
            json!({"status": "finished"}),
            json!({"status": "done", "verdict": "done"}),
        ] {
            assert!(work_runtime::dispatch::validate(&schema, &loose).is_err(), "{loose}");
        }
        let blocked = json!({"status": "blocked", "claims": [{"claim": "made it pass"}], "cleanup": [{"pid": 42}], "blocker": null});
        let a = Answer::from_value(&blocked).expect("reads");
        assert!(a.is_blocked());
        assert_eq!((a.claims[0].criterion.as_str(), a.claims[0].claim.as_str()), ("", "made it pass"));
        assert_eq!((a.cleanup[0].pid, a.cleanup[0].resource.as_str()), (Some(42), "pid 42"));

        for bad in
            [json!({}), json!({"summary": "no status"}), json!({"status": ""}), json!({"status": 3}), json!("done")]
        {
            assert!(work_runtime::dispatch::validate(&schema, &bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tail_keeps_the_end() {
        assert_eq!(tail("abcdef", 3), "…def");
        assert_eq!(tail("ab", 3), "ab");
    }
}
