//! The implementer's brief (the seed's subagent template: TASK, DELIVERABLE, SCOPE, VERIFY,
//! STOP WHEN; an executable assignment, not a context handoff), its answer schema, and the
//! answer as the engine reads it.

use crate::goal::{Criterion, Goal};
use serde::Deserialize;
use serde_json::{Value, json};

/// The JSON Schema of the implementer's answer.
pub fn answer_schema() -> Value {
    json!({
        "type": "object",
        "required": ["status", "summary", "claims", "cleanup"],
        "properties": {
            "status": {"enum": ["done", "partial", "blocked"]},
            "summary": {"type": "string"},
            "claims": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["criterion", "claim"],
                    "properties": {
                        "criterion": {"type": "string"},
                        "claim": {"type": "string"},
                        "evidence": {"type": "string"}
                    }
                }
            },
            "cleanup": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["resource", "action"],
                    "properties": {
                        "resource": {"type": "string"},
                        "action": {"type": "string"},
                        "path": {"type": "string"},
                        "pid": {"type": "integer"}
                    }
                }
            },
            "blocker": {"type": ["string", "null"]}
        }
    })
}

/// One claim of the agent (recorded, never trusted).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Claim {
    /// The criterion id.
    pub criterion: String,
    /// What it says it did.
    pub claim: String,
    /// What it says proves it.
    #[serde(default)]
    pub evidence: Option<String>,
}

/// One torn-down resource the agent reports (a cleanup receipt to verify).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CleanupClaim {
    /// What it was.
    pub resource: String,
    /// What was done.
    pub action: String,
    /// A path (relative to the repository root) that must no longer exist.
    #[serde(default)]
    pub path: Option<String>,
    /// A process id that must no longer run.
    #[serde(default)]
    pub pid: Option<i64>,
}

/// The agent's answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Answer {
    /// `done`, `partial` or `blocked`.
    pub status: String,
    /// One line.
    pub summary: String,
    /// Per-criterion claims.
    pub claims: Vec<Claim>,
    /// Cleanup receipts.
    pub cleanup: Vec<CleanupClaim>,
    /// Why it cannot progress (with `blocked`).
    #[serde(default)]
    pub blocker: Option<String>,
}

impl Answer {
    /// Reads a schema-valid document.
    pub fn from_value(v: &Value) -> Result<Answer, String> {
        serde_json::from_value(v.clone()).map_err(|e| e.to_string())
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
        p.push_str(&format!("- `{}`\n  scenario: {}\n  PASS when: {}\n", c.id, c.scenario, c.pass.describe()));
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
        "\nANSWER with exactly one JSON document: {\"status\": \"done\"|\"partial\"|\"blocked\", \"summary\": \
\"one line\", \"claims\": [{\"criterion\": \"<id>\", \"claim\": \"what you changed\", \"evidence\": \"optional\"}], \
\"cleanup\": [{\"resource\": \"…\", \"action\": \"…\", \"path\": \"optional\", \"pid\": 0}], \"blocker\": \"why, \
with status blocked\"}.\n",
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
    fn the_schema_accepts_a_full_answer_and_refuses_a_bare_claim() {
        let schema = answer_schema();
        let ok = json!({"status": "done", "summary": "s", "claims": [{"criterion": "a", "claim": "c"}],
            "cleanup": [{"resource": "tmp", "action": "rm -rf", "path": "tmp"}]});
        assert!(work_runtime::dispatch::validate(&schema, &ok).is_ok());
        let a = Answer::from_value(&ok).expect("reads");
        assert_eq!(a.cleanup[0].path.as_deref(), Some("tmp"));
        assert!(work_runtime::dispatch::validate(&schema, &json!({"status": "done"})).is_err());
        assert!(
            work_runtime::dispatch::validate(
                &schema,
                &json!({"status": "finished", "summary": "", "claims": [], "cleanup": []})
            )
            .is_err()
        );
    }

    #[test]
    fn tail_keeps_the_end() {
        assert_eq!(tail("abcdef", 3), "…def");
        assert_eq!(tail("ab", 3), "ab");
    }
}
