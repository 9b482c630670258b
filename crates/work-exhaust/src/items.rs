//! Items and their dedup keys; gate 2 (the engine's own re-read at `PATH:LINE`) is
//! `work_git::evidence`, re-exported here.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;
pub use work_git::evidence::{
    FileLine, Gate2, Gate2Rules, Location, Resolved, classify_location, gate2, gate2_with, parse_file_line, resolve,
};

/// Normalises an id for dedup: lowercase, runs of anything but letters and digits become one
/// `-`, trimmed of `-`.
pub fn normalize_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    let mut dash = false;
    for c in id.trim().chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
            dash = false;
        } else if !dash && !out.is_empty() {
            out.push('-');
            dash = true;
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// The dedup keys of an item: its normalised id, and its `path:line` when it has one.
pub fn dedup_keys(id: &str, location: &str) -> Vec<String> {
    let norm = normalize_id(id);
    let mut keys = if norm.is_empty() { Vec::new() } else { vec![format!("id:{norm}")] };
    if let Some(fl) = parse_file_line(location) {
        keys.push(format!("loc:{}", fl.key()));
    }
    keys
}

/// An item rejected by gate 2 (remembered as seen so it never re-enters from a finder; an
/// oracle's item at its location is judged again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejected {
    /// The item's id as given.
    pub id: String,
    /// Its location as given.
    pub location: String,
    /// Why gate 2 refused it.
    pub reason: String,
    /// Where it came from (`finder:<angle>`, `seed-oracle`, `final-oracle`).
    pub source: String,
    /// The round (0 for gate 1).
    pub round: u32,
    /// The location's one spelling, as dedup compared it.
    #[serde(default, rename = "canonicalLocation", skip_serializing_if = "Option::is_none")]
    pub canonical_location: Option<String>,
}

/// The one spelling of a location for dedup: `PATH:LINE` with its path resolved inside the
/// root when it can be, else the location as classified (or as given).
pub fn canonical_location(root: &Path, location: &str) -> String {
    match classify_location(location) {
        Location::FileLine(fl) => match resolve(root, &fl) {
            Ok(r) if !r.rel.is_empty() => format!("{}:{}", r.rel, fl.line),
            _ => fl.key(),
        },
        _ => location.trim().to_string(),
    }
}

/// The dedup key of a concept: its normalised title (`None` when the title is empty).
pub fn concept_key(title: &str) -> Option<String> {
    let n = normalize_id(title);
    (!n.is_empty()).then(|| format!("concept:{n}"))
}

/// Builds the accepted item object: the finder's fields, with the engine's own `reReadSources`,
/// `reRead`, `workDone` and `source` written over whatever the finder claimed.
pub fn accepted_item(raw: &Map<String, Value>, gate: &Gate2, source: &str, round: u32) -> Value {
    let mut obj = raw.clone();
    for engine_field in ["reReadSources", "workDone", "reRead", "gate2", "source", "round"] {
        obj.remove(engine_field);
    }
    match gate {
        Gate2::Read { source: s, text } => {
            obj.insert("reReadSources".into(), Value::from(vec![s.clone()]));
            obj.insert("reRead".into(), serde_json::json!({"source": s, "text": text}));
            obj.insert("gate2".into(), Value::from("re-read"));
        }
        Gate2::Concept => {
            obj.insert("reReadSources".into(), Value::Array(vec![]));
            obj.insert("gate2".into(), Value::from("concept"));
        }
        Gate2::Refused(_) => {}
    }
    obj.insert("workDone".into(), Value::Bool(true));
    obj.insert("source".into(), Value::from(source));
    obj.insert("round".into(), Value::from(round));
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_normalise() {
        assert_eq!(normalize_id("  Job State: Partial_Fail!! "), "job-state-partial-fail");
        assert_eq!(normalize_id("A--B"), "a-b");
        assert_eq!(normalize_id("!!!"), "");
    }

    #[test]
    fn dedup_keys_use_one_spelling() {
        assert_eq!(dedup_keys("X", "./src/a.rs:007"), vec!["id:x".to_string(), "loc:src/a.rs:7".to_string()]);
    }
}
