//! The worker's report: its JSON Schema (what the dispatcher validates the answer against),
//! the typed report, `validate-report` (the engine's own parse, after the schema), and its
//! markdown rendering (`report.md`, `reports/NN.md`).
//!
//! Only `status` (`done | continue | blocked`, any case) is required: CONTRACTS §4 names
//! nothing else. Everything else is optional and read leniently, because a worker that did the
//! work must not lose the iteration over the shape of its prose:
//!
//! - `summary` (string; default empty);
//! - list-like fields — `next_steps`, `decisions`, `evidence`, `changes_claimed` — take a
//!   string (one item) or an array (strings; an object item gives its `path` / `file` / `text`,
//!   else its JSON);
//! - the claimed files are also read under the common other names `files_changed`,
//!   `changed_files`, `changes` and `files` (all of them, merged); they are still checked
//!   against git like `changes_claimed`;
//! - the blocker is `blocker` or `blockers`, a string or an array (items joined with `; `);
//! - `notes` is a string or an array (joined by lines).
//!
//! A `blocked` report without a blocker takes its summary (or "no reason given") as the
//! blocker. The schema is deliberately lenient about extra fields.

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

/// The accepted spellings of the report's status (the engine folds case).
const STATUS_SPELLINGS: [&str; 9] =
    ["done", "continue", "blocked", "DONE", "CONTINUE", "BLOCKED", "Done", "Continue", "Blocked"];

/// The other names a worker may give its claimed files (read like `changes_claimed`).
pub const CLAIM_ALIASES: [&str; 4] = ["files_changed", "changed_files", "changes", "files"];

/// The JSON Schema of the worker's answer (the dispatch schema): only `status` is required.
pub fn report_schema() -> Value {
    let list = |what: &str| json!({"type": ["string", "array", "null"], "description": what});
    let mut props = serde_json::Map::new();
    props.insert(
        "status".into(),
        json!({"enum": STATUS_SPELLINGS,
               "description": "done: the until-clause holds (the engine verifies); continue: more work remains; blocked: you cannot go on"}),
    );
    props.insert("summary".into(), json!({"type": ["string", "null"], "description": "what you did this iteration"}));
    props.insert("changes_claimed".into(), list("repository-relative paths you changed"));
    for alias in CLAIM_ALIASES {
        props.insert(alias.into(), list("same as changes_claimed"));
    }
    props.insert("blocker".into(), list("what stops progress, or null"));
    props.insert("blockers".into(), list("same as blocker"));
    props.insert("next_steps".into(), list("what the next worker should do"));
    props.insert("decisions".into(), list("decisions taken (kept in the ledger)"));
    props.insert("evidence".into(), list("commands run, outputs"));
    props.insert("notes".into(), list("free-form notes"));
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "work-until worker report",
        "type": "object",
        "required": ["status"],
        "properties": Value::Object(props)
    })
}

/// The JSON Schema of the recon answer (iteration 0, read-only).
pub fn recon_schema() -> Value {
    let strings = json!({"type": ["string", "array", "null"]});
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
    let mut changes_claimed = strings(obj, "changes_claimed")?;
    for alias in CLAIM_ALIASES {
        changes_claimed.extend(strings(obj, alias)?);
    }
    changes_claimed = changes_claimed.iter().map(|p| normalize_claim(p)).filter(|p| !p.is_empty()).collect();
    changes_claimed.sort();
    changes_claimed.dedup();
    let mut blocker = text(obj, "blocker", "; ")?;
    if blocker.is_none() {
        blocker = text(obj, "blockers", "; ")?;
    }
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
        for doc in [json!({"status": "continue"}), json!({"status": "DONE"}), json!({"status": "done", "summary": ""})]
        {
            assert!(work_runtime::dispatch::validate(&schema, &doc).is_ok(), "{doc}");
            let r = validate_report(&doc).expect("valid");
            assert!(r.summary.is_empty());
            assert!(r.changes_claimed.is_empty() && r.blocker.is_none());
        }
    }

    #[test]
    fn list_fields_take_strings_or_arrays_and_claims_take_other_names() {
        let doc = json!({
            "status": "continue",
            "next_steps": "do X",
            "decisions": ["keep names", 3],
            "evidence": "ran cargo test",
            "notes": ["one", "two"],
            "changes_claimed": "a.txt",
            "files_changed": ["b.txt"],
            "changed_files": "c.txt",
            "changes": [{"path": "d.txt", "what": "edited"}],
            "files": ["./a.txt", "e.txt\n## Decisions"],
            "blockers": ["db down", "no key"]
        });
        assert!(work_runtime::dispatch::validate(&report_schema(), &doc).is_ok());
        let r = validate_report(&doc).expect("valid");
        assert_eq!(r.next_steps, vec!["do X".to_string()]);
        assert_eq!(r.decisions, vec!["keep names".to_string(), "3".to_string()]);
        assert_eq!(r.evidence, vec!["ran cargo test".to_string()]);
        assert_eq!(r.notes.as_deref(), Some("one\ntwo"));
        assert_eq!(r.changes_claimed, ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt ## Decisions"]);
        assert_eq!(r.blocker.as_deref(), Some("db down; no key"));
        let r = validate_report(&json!({"status": "continue", "blocker": "x", "blockers": "y"})).expect("valid");
        assert_eq!(r.blocker.as_deref(), Some("x"), "`blocker` wins over `blockers`");
    }

    #[test]
    fn blocked_without_blocker_uses_the_summary() {
        let r = validate_report(&json!({"status": "blocked", "summary": "no credentials"})).expect("valid");
        assert_eq!(r.blocker.as_deref(), Some("no credentials"));
        let r = validate_report(&json!({"status": "blocked"})).expect("valid");
        assert_eq!(r.blocker.as_deref(), Some("no reason given"));
    }
}
