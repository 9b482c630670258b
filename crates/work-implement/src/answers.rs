//! Reading role answers. Each role's schema ([`crate::prompts`]) names one field per fact, one
//! type per field, status words as enums and no other field; the dispatcher validates every
//! answer against it first. Here the engine folds a schema-valid answer into the canonical
//! form the loop code reads: status words with case and surrounding blanks folded, absent
//! lists as empty, absent flags and counts as null, and a quality finding without a known
//! severity as `important` (fail closed).

use serde_json::{Value, json};

/// A string schema that takes exactly one of `words`.
pub fn word_enum(words: &[&str]) -> Value {
    json!({"type": "string", "enum": words})
}

/// The canonical spelling (as listed in `words`) of `s`, folding case and surrounding blanks.
pub fn canon(s: &str, words: &[&'static str]) -> Option<&'static str> {
    let key = s.trim();
    words.iter().copied().find(|w| w.eq_ignore_ascii_case(key))
}

/// Implementer statuses.
pub const IMPLEMENTER_STATUS: [&str; 4] = ["DONE", "DONE_WITH_CONCERNS", "BLOCKED", "NEEDS_CONTEXT"];
/// Spec-review statuses.
pub const SPEC_STATUS: [&str; 3] = ["compliant", "non_compliant", "unclear"];
/// Quality verdicts.
pub const QUALITY_VERDICT: [&str; 2] = ["approved", "changes_requested"];
/// Quality finding severities.
pub const SEVERITY: [&str; 2] = ["important", "minor"];
/// Tester statuses.
pub const TESTER_STATUS: [&str; 3] = ["DONE", "FAILED", "BLOCKED"];
/// Editor statuses.
pub const EDITOR_STATUS: [&str; 3] = ["DONE", "HOLE", "BLOCKED"];
/// Where a hole goes.
pub const HOLE_ROUTE: [&str; 2] = ["specify", "tdd"];

fn word(doc: &Value, key: &str, words: &[&'static str]) -> Option<&'static str> {
    doc.get(key).and_then(Value::as_str).and_then(|s| canon(s, words))
}

/// A list of strings (blank items dropped); anything else is empty.
pub fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => {
            a.iter().filter_map(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
        }
        _ => Vec::new(),
    }
}

/// A text field: the trimmed string, or null when absent or blank.
fn opt_text(v: &Value) -> Value {
    match v.as_str().map(str::trim) {
        Some(s) if !s.is_empty() => Value::String(s.to_string()),
        _ => Value::Null,
    }
}

/// `applied_changes`: the boolean, null when absent.
pub fn applied(v: &Value) -> Value {
    v.as_bool().map(Value::Bool).unwrap_or(Value::Null)
}

fn count(v: &Value) -> Value {
    v.as_u64().map(|n| json!(n)).unwrap_or(Value::Null)
}

fn list(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

/// The implementer's answer: `{status, summary, applied_changes, concerns, held, reason}`.
pub fn implementer(doc: &Value) -> Value {
    json!({
        "status": word(doc, "status", &IMPLEMENTER_STATUS),
        "summary": opt_text(&doc["summary"]),
        "applied_changes": applied(&doc["applied_changes"]),
        "concerns": strings(&doc["concerns"]),
        "held": list(&doc["held"]),
        "reason": opt_text(&doc["reason"]),
    })
}

/// The spec reviewer's answer: `{status, issues, ambiguity, files_read}`.
pub fn spec(doc: &Value) -> Value {
    json!({
        "status": word(doc, "status", &SPEC_STATUS),
        "issues": strings(&doc["issues"]),
        "ambiguity": opt_text(&doc["ambiguity"]),
        "files_read": strings(&doc["files_read"]),
    })
}

/// One quality finding as `{severity: important|minor, text}` (no known severity ⇒ important).
pub fn finding(v: &Value) -> Value {
    let severity = word(v, "severity", &SEVERITY).unwrap_or("important");
    let text = v.get("text").and_then(Value::as_str).map(str::trim).unwrap_or_default();
    json!({"severity": severity, "text": text})
}

/// The quality reviewer's answer: `{verdict, issues: [{severity, text}], files_read}`.
pub fn quality(doc: &Value) -> Value {
    let issues: Vec<Value> = list(&doc["issues"]).iter().map(finding).collect();
    json!({"verdict": word(doc, "verdict", &QUALITY_VERDICT), "issues": issues,
           "files_read": strings(&doc["files_read"])})
}

/// The tester's answer: `{status, fixtures, summary}`.
pub fn tester(doc: &Value) -> Value {
    json!({
        "status": word(doc, "status", &TESTER_STATUS),
        "fixtures": count(&doc["fixtures"]),
        "summary": opt_text(&doc["summary"]),
    })
}

/// The editor's answer: `{status, applied_changes, sites, hole: null|{route, detail}, summary, reason}`.
pub fn editor(doc: &Value) -> Value {
    let hole = match &doc["hole"] {
        Value::Object(h) => json!({
            "route": h.get("route").and_then(Value::as_str).and_then(|r| canon(r, &HOLE_ROUTE)).unwrap_or("specify"),
            "detail": h.get("detail").map(opt_text).unwrap_or(Value::Null),
        }),
        _ => Value::Null,
    };
    json!({
        "status": word(doc, "status", &EDITOR_STATUS),
        "applied_changes": applied(&doc["applied_changes"]),
        "sites": count(&doc["sites"]),
        "hole": hole,
        "summary": opt_text(&doc["summary"]),
        "reason": opt_text(&doc["reason"]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts;
    use work_runtime::dispatch::validate;

    /// Every schema is plain and portable: no `$schema`, no root `anyOf`/`oneOf`, no pattern,
    /// closed objects.
    fn assert_portable(schema: &Value) {
        let text = schema.to_string();
        assert!(!text.contains("$schema") && !text.contains("anyOf") && !text.contains("oneOf"), "{text}");
        assert!(!text.contains("\"pattern\""), "{text}");
        assert_eq!(schema["additionalProperties"], json!(false), "{text}");
    }

    #[test]
    fn each_field_has_one_name_and_status_words_are_enums() {
        let schema = prompts::quality_schema();
        assert_portable(&schema);
        for doc in [
            json!({"verdict": "approved"}),
            json!({"verdict": "changes_requested", "issues": [{"severity": "minor", "text": "x"}]}),
        ] {
            assert!(validate(&schema, &doc).is_ok(), "{doc}: {:?}", validate(&schema, &doc));
        }
        for bad in [
            json!({}),
            json!({"status": "approved"}),
            json!({"verdict": "maybe"}),
            json!({"verdict": "changes-requested"}),
            json!({"verdict": "approved", "issues": "one finding"}),
            json!({"verdict": "approved", "issues": [{"severity": "nit", "text": "x"}]}),
        ] {
            assert!(validate(&schema, &bad).is_err(), "{bad}");
        }
        let q =
            quality(&json!({"verdict": " Approved ", "issues": [{"severity": "MINOR", "text": "a"}, {"text": "b"}]}));
        assert_eq!(
            q,
            json!({"verdict": "approved", "issues": [
            {"severity": "minor", "text": "a"}, {"severity": "important", "text": "b"}], "files_read": []})
        );
        assert!(validate(&schema, &json!({"verdict": "approved", "files_read": ["a.rs"]})).is_ok());
        assert!(validate(&schema, &json!({"verdict": "approved", "files_read": "a.rs"})).is_err());

        let schema = prompts::spec_schema();
        assert_portable(&schema);
        assert!(validate(&schema, &json!({"status": "non_compliant", "issues": ["x"]})).is_ok());
        assert!(validate(&schema, &json!({"verdict": "compliant"})).is_err());
        assert!(validate(&schema, &json!({"status": "compliant", "files_read": ["a.rs"]})).is_ok());
        assert_eq!(spec(&json!({"status": "compliant", "files_read": [" a.rs ", ""]}))["files_read"], json!(["a.rs"]));
        assert_eq!(spec(&json!({"status": "unclear", "ambiguity": "a"}))["ambiguity"], "a");

        let schema = prompts::implementer_schema();
        assert_portable(&schema);
        assert!(validate(&schema, &json!({"status": "DONE", "applied_changes": true, "concerns": ["one"]})).is_ok());
        assert!(validate(&schema, &json!({"status": "DONE", "applied_changes": ["a.txt"]})).is_err());
        assert_eq!(implementer(&json!({"status": "DONE"}))["applied_changes"], Value::Null);

        let schema = prompts::editor_schema();
        assert_portable(&schema);
        let doc = json!({"status": "HOLE", "applied_changes": false, "sites": 2,
                         "hole": {"route": "tdd", "detail": "needs a design"}});
        assert!(validate(&schema, &doc).is_ok(), "{:?}", validate(&schema, &doc));
        assert_eq!(editor(&doc)["hole"], json!({"route": "tdd", "detail": "needs a design"}));

        let schema = prompts::tester_schema();
        assert_portable(&schema);
        let doc = json!({"status": "DONE", "fixtures": 2});
        assert!(validate(&schema, &doc).is_ok());
        assert_eq!(tester(&doc), json!({"status": "DONE", "fixtures": 2, "summary": null}));
        for s in [prompts::index_schema(), prompts::extract_all_schema(), prompts::extract_one_schema()] {
            assert_portable(&s);
        }
    }
}
