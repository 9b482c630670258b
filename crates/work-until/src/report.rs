//! The worker's report: its JSON Schema (what the dispatcher validates the answer against),
//! the typed report, `validate-report` (the engine's own parse, after the schema), and its
//! markdown rendering (`report.md`, `reports/NN.md`).
//!
//! Required fields: `status` (`done | continue | blocked`) and `summary` (non-empty). Optional,
//! typed when present: `changes_claimed` (paths), `blocker` (string or null), `next_steps`,
//! `decisions`, `evidence` (strings), `notes` (string). A `blocked` report without a blocker
//! takes its summary as the blocker. The schema is deliberately lenient about extra fields.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The worker's verdict on its iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportStatus {
    /// The worker believes the until-clause holds (the engine verifies).
    Done,
    /// More work remains.
    Continue,
    /// The worker cannot go on.
    Blocked,
}

impl ReportStatus {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportStatus::Done => "done",
            ReportStatus::Continue => "continue",
            ReportStatus::Blocked => "blocked",
        }
    }
}

/// A validated worker report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    /// done | continue | blocked.
    pub status: ReportStatus,
    /// What the worker did, in a few lines.
    pub summary: String,
    /// Paths the worker says it changed (repository-relative).
    #[serde(default)]
    pub changes_claimed: Vec<String>,
    /// What stops progress, if anything.
    #[serde(default)]
    pub blocker: Option<String>,
    /// What the next worker should do.
    #[serde(default)]
    pub next_steps: Vec<String>,
    /// Decisions taken (kept in the ledger for good).
    #[serde(default)]
    pub decisions: Vec<String>,
    /// Evidence the worker offers (commands run, outputs).
    #[serde(default)]
    pub evidence: Vec<String>,
    /// Free-form notes.
    #[serde(default)]
    pub notes: Option<String>,
}

/// Why a report was refused by [`validate_report`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// The answer is not a JSON object.
    #[error("the report is not a JSON object")]
    NotObject,
    /// A required field is missing or empty.
    #[error("the report's `{0}` is missing or empty")]
    Missing(&'static str),
    /// A field has the wrong type or value.
    #[error("the report's `{field}` is invalid: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// Why.
        reason: String,
    },
}

/// The JSON Schema of the worker's answer (the dispatch schema).
pub fn report_schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "work-until worker report",
        "type": "object",
        "required": ["status", "summary"],
        "properties": {
            "status": {"enum": ["done", "continue", "blocked"],
                       "description": "done: the until-clause holds (the engine verifies); continue: more work remains; blocked: you cannot go on"},
            "summary": {"type": "string", "minLength": 1, "description": "what you did this iteration"},
            "changes_claimed": {"type": "array", "items": {"type": "string"}, "description": "repository-relative paths you changed"},
            "blocker": {"type": ["string", "null"], "description": "what stops progress, or null"},
            "next_steps": strings,
            "decisions": strings,
            "evidence": strings,
            "notes": {"type": ["string", "null"]}
        }
    })
}

/// The JSON Schema of the recon answer (iteration 0, read-only).
pub fn recon_schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "work-until recon map",
        "type": "object",
        "required": ["summary"],
        "properties": {
            "summary": {"type": "string", "minLength": 1},
            "map": strings,
            "risks": strings,
            "recommended_next": strings
        }
    })
}

fn strings(obj: &serde_json::Map<String, Value>, field: &'static str) -> Result<Vec<String>, ReportError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.trim().to_string()),
                other => Err(ReportError::Invalid { field, reason: format!("expected strings, found {other}") }),
            })
            .filter(|r| r.as_ref().map(|s| !s.is_empty()).unwrap_or(true))
            .collect(),
        Some(other) => Err(ReportError::Invalid { field, reason: format!("expected an array, found {other}") }),
    }
}

fn opt_string(obj: &serde_json::Map<String, Value>, field: &'static str) -> Result<Option<String>, ReportError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(other) => Err(ReportError::Invalid { field, reason: format!("expected a string or null, found {other}") }),
    }
}

/// `validate-report`: the engine's own check of an answer (after the dispatcher's schema
/// check), giving the typed report.
pub fn validate_report(doc: &Value) -> Result<WorkerReport, ReportError> {
    let obj = doc.as_object().ok_or(ReportError::NotObject)?;
    let status = match obj.get("status").and_then(Value::as_str).map(str::trim) {
        Some("done") => ReportStatus::Done,
        Some("continue") => ReportStatus::Continue,
        Some("blocked") => ReportStatus::Blocked,
        Some(other) => {
            return Err(ReportError::Invalid {
                field: "status",
                reason: format!("`{other}` is not one of done, continue, blocked"),
            });
        }
        None => return Err(ReportError::Missing("status")),
    };
    let summary = opt_string(obj, "summary")?.ok_or(ReportError::Missing("summary"))?;
    let mut changes_claimed = strings(obj, "changes_claimed")?;
    changes_claimed = changes_claimed.into_iter().map(|p| normalize_claim(&p)).collect();
    changes_claimed.sort();
    changes_claimed.dedup();
    let mut blocker = opt_string(obj, "blocker")?;
    if status == ReportStatus::Blocked && blocker.is_none() {
        blocker = Some(summary.clone());
    }
    Ok(WorkerReport {
        status,
        summary,
        changes_claimed,
        blocker,
        next_steps: strings(obj, "next_steps")?,
        decisions: strings(obj, "decisions")?,
        evidence: strings(obj, "evidence")?,
        notes: opt_string(obj, "notes")?,
    })
}

/// A claimed path as the worker might write it (`./src/a.rs`, `` `src/a.rs` ``) reduced to
/// the form `git status` prints.
pub fn normalize_claim(p: &str) -> String {
    let mut s = p.trim().trim_matches('`').trim().to_string();
    while let Some(rest) = s.strip_prefix("./") {
        s = rest.to_string();
    }
    s
}

/// The recon answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReconReport {
    /// The map in a few lines.
    pub summary: String,
    /// Where things are.
    pub map: Vec<String>,
    /// What could go wrong.
    pub risks: Vec<String>,
    /// What iteration 1 should do.
    pub recommended_next: Vec<String>,
}

/// Parses a schema-valid recon answer.
pub fn validate_recon(doc: &Value) -> Result<ReconReport, ReportError> {
    let obj = doc.as_object().ok_or(ReportError::NotObject)?;
    Ok(ReconReport {
        summary: opt_string(obj, "summary")?.ok_or(ReportError::Missing("summary"))?,
        map: strings(obj, "map")?,
        risks: strings(obj, "risks")?,
        recommended_next: strings(obj, "recommended_next")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_and_validator_agree_on_required_fields() {
        let schema = report_schema();
        let good =
            json!({"status": "continue", "summary": "did x", "changes_claimed": ["./a.rs", "a.rs"], "blocker": null});
        assert!(work_runtime::dispatch::validate(&schema, &good).is_ok());
        let r = validate_report(&good).expect("valid");
        assert_eq!(r.changes_claimed, vec!["a.rs".to_string()]);
        for bad in [
            json!({"summary": "x"}),
            json!({"status": "maybe", "summary": "x"}),
            json!({"status": "done", "summary": ""}),
            json!({"status": "done", "summary": "x", "changes_claimed": "a.rs"}),
            json!("done"),
        ] {
            assert!(work_runtime::dispatch::validate(&schema, &bad).is_err(), "{bad}");
            assert!(validate_report(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn blocked_without_blocker_uses_the_summary() {
        let r = validate_report(&json!({"status": "blocked", "summary": "no credentials"})).expect("valid");
        assert_eq!(r.blocker.as_deref(), Some("no credentials"));
    }
}
