//! The worker's report: its JSON Schema (what the dispatcher validates the answer against),
//! the typed report, `validate-report` (the engine's own parse, after the schema), and its
//! markdown rendering (`report.md`, `reports/NN.md`).
//!
//! One name per field, one type per field, no other field (docs/protocol.md):
//!
//! - `status` (required): `done | continue | blocked` (the engine folds case and blanks);
//! - `summary` (string), `blocker` (string or null), `notes` (string or null);
//! - `changes_claimed`, `next_steps`, `decisions`, `evidence` (arrays of strings); the
//!   claimed paths are checked against git.
//!
//! A `blocked` report without a blocker takes its summary (or "no reason given") as the
//! blocker.

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
    /// What the worker did, in a few lines (empty when it said nothing).
    #[serde(default)]
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

/// The report's status words.
pub const STATUS_WORDS: [&str; 3] = ["done", "continue", "blocked"];

/// The JSON Schema of the worker's answer (the dispatch schema): only `status` is required.
pub fn report_schema() -> Value {
    let list = |what: &str| json!({"type": "array", "items": {"type": "string"}, "description": what});
    json!({
        "title": "work-until worker report",
        "type": "object",
        "additionalProperties": false,
        "required": ["status"],
        "properties": {
            "status": {"enum": STATUS_WORDS,
                       "description": "done: the until-clause holds (the engine verifies); continue: more work remains; blocked: you cannot go on"},
            "summary": {"type": "string", "description": "what you did this iteration"},
            "changes_claimed": list("repository-relative paths you changed"),
            "blocker": {"type": ["string", "null"], "description": "what stops progress, or null"},
            "next_steps": list("what the next worker should do"),
            "decisions": list("decisions taken (kept in the ledger)"),
            "evidence": list("commands run, outputs"),
            "notes": {"type": ["string", "null"], "description": "free-form notes"}
        }
    })
}

/// The JSON Schema of the recon answer (iteration 0, read-only).
pub fn recon_schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "title": "work-until recon map",
        "type": "object",
        "additionalProperties": false,
        "required": ["summary"],
        "properties": {
            "summary": {"type": "string", "minLength": 1},
            "map": strings,
            "risks": strings,
            "recommended_next": strings
        }
    })
}

fn item_text(v: &Value) -> Option<String> {
    let s = match v {
        Value::Null => return None,
        Value::String(s) => s.clone(),
        Value::Object(o) => ["path", "file", "text", "name"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| v.to_string()),
        other => other.to_string(),
    };
    let s = s.trim().to_string();
    if s.is_empty() { None } else { Some(s) }
}

/// A list-like field: a string is one item, an array its items, null or absent nothing.
fn strings(obj: &serde_json::Map<String, Value>, field: &'static str) -> Result<Vec<String>, ReportError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items.iter().filter_map(item_text).collect()),
        Some(v @ Value::String(_)) => Ok(item_text(v).into_iter().collect()),
        Some(other) => {
            Err(ReportError::Invalid { field, reason: format!("expected a string or an array, found {other}") })
        }
    }
}

/// A text field that may come as a string or an array (joined with `sep`).
fn text(obj: &serde_json::Map<String, Value>, field: &'static str, sep: &str) -> Result<Option<String>, ReportError> {
    let v = strings(obj, field)?;
    Ok(if v.is_empty() { None } else { Some(v.join(sep)) })
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
    let status = match obj.get("status").and_then(Value::as_str).map(|s| s.trim().to_ascii_lowercase()) {
        Some(s) if s == "done" => ReportStatus::Done,
        Some(s) if s == "continue" => ReportStatus::Continue,
        Some(s) if s == "blocked" => ReportStatus::Blocked,
        Some(other) => {
            return Err(ReportError::Invalid {
                field: "status",
                reason: format!("`{other}` is not one of done, continue, blocked"),
            });
        }
        None => return Err(ReportError::Missing("status")),
    };
    let summary = opt_string(obj, "summary")?.unwrap_or_default();
    let mut changes_claimed: Vec<String> =
        strings(obj, "changes_claimed")?.iter().map(|p| normalize_claim(p)).filter(|p| !p.is_empty()).collect();
    changes_claimed.sort();
    changes_claimed.dedup();
    let mut blocker = text(obj, "blocker", "; ")?;
    if status == ReportStatus::Blocked && blocker.is_none() {
        blocker = Some(if summary.is_empty() { "no reason given".to_string() } else { summary.clone() });
    }
    Ok(WorkerReport {
        status,
        summary,
        changes_claimed,
        blocker,
        next_steps: strings(obj, "next_steps")?,
        decisions: strings(obj, "decisions")?,
        evidence: strings(obj, "evidence")?,
        notes: text(obj, "notes", "\n")?,
    })
}

/// A claimed path as the worker might write it (`./src/a.rs`, `` `src/a.rs` ``) reduced to
/// the form `git status` prints, on one line (a newline inside a claim could forge ledger
/// sections).
pub fn normalize_claim(p: &str) -> String {
    let one: String = p.split(['\n', '\r']).map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ");
    let mut s = one.trim().trim_matches('`').trim().to_string();
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
            json!({"status": "done", "summary": 3}),
            json!({"status": "done", "changes_claimed": 7}),
            json!("done"),
        ] {
            assert!(work_runtime::dispatch::validate(&schema, &bad).is_err(), "{bad}");
            assert!(validate_report(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_the_status_is_required() {
        let schema = report_schema();
        for doc in [json!({"status": "continue"}), json!({"status": "done"}), json!({"status": "done", "summary": ""})]
        {
            assert!(work_runtime::dispatch::validate(&schema, &doc).is_ok(), "{doc}");
            let r = validate_report(&doc).expect("valid");
            assert!(r.summary.is_empty());
            assert!(r.changes_claimed.is_empty() && r.blocker.is_none());
        }
    }

    #[test]
    fn one_name_per_field_and_no_other_field() {
        let schema = report_schema();
        assert!(schema.get("$schema").is_none() && schema.get("anyOf").is_none());
        let doc = json!({
            "status": "continue",
            "next_steps": ["do X"],
            "decisions": ["keep names"],
            "evidence": ["ran cargo test"],
            "notes": "one\ntwo",
            "changes_claimed": ["a.txt", "./b.txt", "e.txt\n## Decisions"],
            "blocker": "db down"
        });
        assert!(work_runtime::dispatch::validate(&schema, &doc).is_ok());
        let r = validate_report(&doc).expect("valid");
        assert_eq!(r.changes_claimed, ["a.txt", "b.txt", "e.txt ## Decisions"]);
        assert_eq!(r.blocker.as_deref(), Some("db down"));
        for other in [
            json!({"status": "continue", "files_changed": ["a.txt"]}),
            json!({"status": "continue", "blockers": "x"}),
            json!({"status": "Continue"}),
            json!({"status": "continue", "next_steps": "do X"}),
        ] {
            assert!(work_runtime::dispatch::validate(&schema, &other).is_err(), "{other}");
        }
        assert_eq!(validate_report(&json!({"status": " DONE "})).expect("folded").status, ReportStatus::Done);
    }

    #[test]
    fn blocked_without_blocker_uses_the_summary() {
        let r = validate_report(&json!({"status": "blocked", "summary": "no credentials"})).expect("valid");
        assert_eq!(r.blocker.as_deref(), Some("no credentials"));
        let r = validate_report(&json!({"status": "blocked"})).expect("valid");
        assert_eq!(r.blocker.as_deref(), Some("no reason given"));
    }
}
