//! Lenient reading of role answers. Each role's schema ([`crate::prompts`]) requires only what
//! the engine needs to decide (a status or verdict); everything else is optional and may come
//! in the shapes agents commonly use. Before an answer is used, the engine folds it into one
//! canonical form here, so the loop code reads one shape:
//!
//! - status and verdict words in any case, with `_`, `-` or a space between words
//!   (`APPROVED`, `changes-requested`, `Non compliant`); the quality verdict may be named
//!   `verdict` or `status`, the spec verdict `status` or `verdict`;
//! - list fields (`concerns`, `issues`, `held`) as a string or an array;
//! - `applied_changes` as a boolean or a list of paths (a non-empty list means true);
//! - quality findings as `{severity, text}` objects (the text may be named `description`,
//!   `message`, `finding` or `issue`) or plain strings; severity in any case, and a missing or
//!   unknown severity is `important` (fail closed: only `minor`, `low`, `nit`, `nitpick`,
//!   `trivial` or `cosmetic` read as minor);
//! - the tester's `fixtures` and the editor's `sites` as a count or a list (its length);
//! - the editor's `hole` as an object or a bare string (its detail, route `specify`).

use serde_json::{Map, Value, json};

/// A string schema matching any of `words` case-insensitively, with `_`, `-` or a space
/// between words and surrounding blanks allowed.
pub fn word_enum(words: &[&str]) -> Value {
    let alts: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase().replace('_', "[ _-]")).collect();
    json!({"type": "string", "pattern": format!("^\\s*(?i:{})\\s*$", alts.join("|")), "description": words.join(" | ")})
}

/// The canonical spelling (as listed in `words`) of `s`, if it is one of them.
pub fn canon(s: &str, words: &[&'static str]) -> Option<&'static str> {
    let key = s.trim().to_ascii_lowercase().replace([' ', '-'], "_");
    words.iter().copied().find(|w| w.to_ascii_lowercase() == key)
}

/// Implementer statuses.
pub const IMPLEMENTER_STATUS: [&str; 4] = ["DONE", "DONE_WITH_CONCERNS", "BLOCKED", "NEEDS_CONTEXT"];
/// Spec-review statuses.
pub const SPEC_STATUS: [&str; 3] = ["compliant", "non_compliant", "unclear"];
/// Quality verdicts.
pub const QUALITY_VERDICT: [&str; 2] = ["approved", "changes_requested"];
/// Tester statuses.
pub const TESTER_STATUS: [&str; 3] = ["DONE", "FAILED", "BLOCKED"];
/// Editor statuses.
pub const EDITOR_STATUS: [&str; 3] = ["DONE", "HOLE", "BLOCKED"];
/// Where a hole goes.
pub const HOLE_ROUTE: [&str; 2] = ["specify", "tdd"];

const MINOR_WORDS: [&str; 6] = ["minor", "low", "nit", "nitpick", "trivial", "cosmetic"];

fn word(doc: &Value, keys: &[&str], words: &[&'static str]) -> Option<&'static str> {
    keys.iter().find_map(|k| doc.get(*k).and_then(Value::as_str)).and_then(|s| canon(s, words))
}

fn text_of(v: &Value, keys: &[&str]) -> Option<String> {
    let s = match v {
        Value::Null => return None,
        Value::String(s) => s.clone(),
        Value::Object(o) => keys
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| v.to_string()),
        other => other.to_string(),
    };
    let s = s.trim().to_string();
    if s.is_empty() { None } else { Some(s) }
}

/// A list field as strings: a string is one item, an array its items (objects give their
/// `text`/`path`/…), anything else nothing.
pub fn strings(v: &Value) -> Vec<String> {
    const KEYS: [&str; 7] = ["text", "path", "file", "description", "message", "finding", "issue"];
    match v {
        Value::Array(a) => a.iter().filter_map(|x| text_of(x, &KEYS)).collect(),
        Value::Null => Vec::new(),
        other => text_of(other, &KEYS).into_iter().collect(),
    }
}

fn opt_text(v: &Value) -> Value {
    let s = strings(v);
    if s.is_empty() { Value::Null } else { Value::String(s.join("; ")) }
}

/// `applied_changes`: a boolean, or a list of paths (non-empty ⇒ true); null when absent.
pub fn applied(v: &Value) -> Value {
    match v {
        Value::Bool(b) => Value::Bool(*b),
        Value::Array(a) => Value::Bool(!a.is_empty()),
        Value::String(s) if !s.trim().is_empty() => Value::Bool(true),
        _ => Value::Null,
    }
}

fn count(v: &Value) -> Value {
    match v {
        Value::Number(n) => n.as_u64().map(|n| json!(n)).unwrap_or(Value::Null),
        Value::Array(a) => json!(a.len()),
        _ => Value::Null,
    }
}

fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        Value::Null => Vec::new(),
        other => vec![other.clone()],
    }
}

/// The implementer's answer: `{status, summary, applied_changes, concerns, held, reason}`.
pub fn implementer(doc: &Value) -> Value {
    json!({
        "status": word(doc, &["status"], &IMPLEMENTER_STATUS),
        "summary": opt_text(&doc["summary"]),
        "applied_changes": applied(&doc["applied_changes"]),
        "concerns": strings(&doc["concerns"]),
        "held": list(&doc["held"]),
        "reason": opt_text(&doc["reason"]),
    })
}

/// The spec reviewer's answer: `{status, issues, ambiguity}`.
pub fn spec(doc: &Value) -> Value {
    json!({
        "status": word(doc, &["status", "verdict"], &SPEC_STATUS),
        "issues": strings(&doc["issues"]),
        "ambiguity": opt_text(&doc["ambiguity"]),
    })
}

/// One quality finding as `{severity: important|minor, text}`.
pub fn finding(v: &Value) -> Value {
    let severity = match v.get("severity").and_then(Value::as_str) {
        Some(s) if MINOR_WORDS.contains(&s.trim().to_ascii_lowercase().as_str()) => "minor",
        _ => "important",
    };
    let text = text_of(v, &["text", "description", "message", "finding", "issue"]).unwrap_or_default();
    let mut m = Map::new();
    m.insert("severity".into(), json!(severity));
    m.insert("text".into(), json!(text));
    Value::Object(m)
}

/// The quality reviewer's answer: `{verdict, issues: [{severity, text}]}`.
pub fn quality(doc: &Value) -> Value {
    let issues: Vec<Value> = list(&doc["issues"]).iter().map(finding).collect();
    json!({"verdict": word(doc, &["verdict", "status"], &QUALITY_VERDICT), "issues": issues})
}

/// The tester's answer: `{status, fixtures, summary}`.
pub fn tester(doc: &Value) -> Value {
    json!({
        "status": word(doc, &["status"], &TESTER_STATUS),
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
        Value::String(s) if !s.trim().is_empty() => json!({"route": "specify", "detail": s.trim()}),
        _ => Value::Null,
    };
    json!({
        "status": word(doc, &["status"], &EDITOR_STATUS),
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

    #[test]
    fn quality_needs_only_a_verdict_under_either_name_in_any_case() {
        let schema = prompts::quality_schema();
        for doc in [
            json!({"verdict": "approved"}),
            json!({"status": "approved"}),
            json!({"verdict": "APPROVED"}),
            json!({"status": "CHANGES_REQUESTED", "issues": [{"text": "x"}]}),
            json!({"verdict": "changes-requested", "issues": "one finding"}),
        ] {
            assert!(validate(&schema, &doc).is_ok(), "{doc}: {:?}", validate(&schema, &doc));
        }
        for bad in [json!({}), json!({"verdict": "maybe"}), json!({"issues": []}), json!("approved")] {
            assert!(validate(&schema, &bad).is_err(), "{bad}");
        }
        assert_eq!(quality(&json!({"status": "APPROVED"})), json!({"verdict": "approved", "issues": []}));
        let q = quality(&json!({"verdict": "Changes Requested", "issues": [
            {"severity": "Minor", "text": "a"}, {"severity": "IMPORTANT", "description": "b"}, {"text": "c"},
            {"severity": "nit", "text": "d"}, {"severity": "weird", "text": "e"}, "f"]}));
        assert_eq!(q["verdict"], "changes_requested");
        let sev: Vec<&str> =
            q["issues"].as_array().expect("issues").iter().map(|i| i["severity"].as_str().unwrap_or("")).collect();
        assert_eq!(sev, ["minor", "important", "important", "minor", "important", "important"]);
        assert_eq!(q["issues"][1]["text"], "b");
        assert_eq!(q["issues"][5]["text"], "f");
    }

    #[test]
    fn the_other_roles_take_the_common_shapes() {
        let schema = prompts::implementer_schema();
        let doc = json!({"status": "done", "applied_changes": ["a.txt"], "concerns": "one"});
        assert!(validate(&schema, &doc).is_ok());
        let d = implementer(&doc);
        assert_eq!((d["status"].clone(), d["applied_changes"].clone()), (json!("DONE"), json!(true)));
        assert_eq!(d["concerns"], json!(["one"]));
        assert_eq!(implementer(&json!({"status": "DONE", "applied_changes": []}))["applied_changes"], false);
        assert_eq!(implementer(&json!({"status": "DONE"}))["applied_changes"], Value::Null);

        let schema = prompts::editor_schema();
        let doc = json!({"status": "Done", "applied_changes": ["src/lib.rs"], "sites": ["a", "b"], "hole": null});
        assert!(validate(&schema, &doc).is_ok());
        let e = editor(&doc);
        assert_eq!((e["applied_changes"].clone(), e["sites"].clone()), (json!(true), json!(2)));
        assert_eq!(editor(&json!({"status": "hole", "hole": "needs a design"}))["hole"]["route"], "specify");

        let schema = prompts::spec_schema();
        for doc in [json!({"status": "NON-COMPLIANT", "issues": "x"}), json!({"verdict": "compliant"})] {
            assert!(validate(&schema, &doc).is_ok(), "{doc}");
        }
        assert_eq!(spec(&json!({"status": "Non compliant", "issues": "x"}))["status"], "non_compliant");
        assert_eq!(spec(&json!({"verdict": "unclear", "ambiguity": ["a", "b"]}))["ambiguity"], "a; b");

        let schema = prompts::tester_schema();
        let doc = json!({"status": "done", "fixtures": ["f1", "f2"]});
        assert!(validate(&schema, &doc).is_ok());
        assert_eq!(tester(&doc), json!({"status": "DONE", "fixtures": 2, "summary": null}));
    }
}
