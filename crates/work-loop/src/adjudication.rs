//! The finding-adjudication artifact and its strict, state-free classification
//! (`cohort review classify`, and the part of `review inspect` / `review record --report`
//! that reads the artifact).
//!
//! The artifact is JSON, either an object with a `findings` array or the array itself:
//!
//! ```json
//! {"findings": [
//!   {"id": "F1", "severity": "blocker", "disposition": "sustained",
//!    "title": "…", "file": "src/a.rs", "line": 3, "fingerprint": "optional"}
//! ]}
//! ```
//!
//! - `disposition` (also accepted as `status`, `verdict` or `adjudication`) is `sustained`,
//!   `refuted` or `indeterminate` (case-insensitive). Anything else is an invalid artifact.
//! - A top-level `status`/`verdict` of `ADJUDICATION-INDETERMINATE` (or `indeterminate`) makes
//!   the whole artifact indeterminate.
//! - A finding without `fingerprint` gets `fp-` + the first 16 hex digits of the sha256 of its
//!   `file` and whitespace-normalised, lowercased `title` (never its line, which moves when code
//!   around it changes), so the same finding in two rounds has the same fingerprint.
//!
//! Classification: any indeterminate finding ⇒ `indeterminate` (a loud stop); otherwise any
//! sustained finding ⇒ `findings`; otherwise `clean` (refuted-only is exact clean).

use crate::common::{LoopError, sha256_hex};
use serde::Serialize;
use serde_json::Value;

/// The class of an adjudication artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// No sustained finding and nothing indeterminate.
    Clean,
    /// At least one sustained finding.
    Findings,
    /// The adjudicator could not decide: stop before any transition or record.
    Indeterminate,
}

/// A sustained finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sustained {
    /// The finding's id (or its index).
    pub id: String,
    /// Its severity, lowercased (`blocker`, `concern`, `nit`, …), or `unknown`.
    pub severity: String,
    /// Its title.
    pub title: String,
    /// Its fingerprint.
    pub fingerprint: String,
}

/// The classification of one artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Classification {
    /// The class.
    pub classification: Class,
    /// The sustained findings, in artifact order.
    pub sustained: Vec<Sustained>,
    /// The sorted, deduplicated fingerprints of the sustained findings.
    pub fingerprints: Vec<String>,
    /// How many findings were refuted.
    pub refuted: usize,
    /// How many findings were indeterminate.
    pub indeterminate: usize,
}

/// Classifies the text of an artifact; `source` names it in errors.
pub fn classify(text: &str, source: &str) -> Result<Classification, LoopError> {
    let bad = |why: String| LoopError::bad(format!("read adjudication `{source}`: {why}"));
    let doc: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let (findings, top) = match &doc {
        Value::Array(a) => (a.clone(), None),
        Value::Object(o) => {
            let top = o.get("status").or_else(|| o.get("verdict")).and_then(Value::as_str).map(str::to_string);
            match o.get("findings") {
                Some(Value::Array(a)) => (a.clone(), top),
                Some(_) => return Err(bad("`findings` is not an array".into())),
                None if top.is_some() => (Vec::new(), top),
                None => return Err(bad("no `findings` array".into())),
            }
        }
        _ => return Err(bad("neither an object nor an array".into())),
    };
    let top_indeterminate =
        top.as_deref().is_some_and(|s| s.to_ascii_lowercase().trim_start_matches("adjudication-") == "indeterminate");
    let mut out = Classification {
        classification: Class::Clean,
        sustained: Vec::new(),
        fingerprints: Vec::new(),
        refuted: 0,
        indeterminate: 0,
    };
    for (i, f) in findings.iter().enumerate() {
        let Value::Object(o) = f else { return Err(bad(format!("finding {i} is not an object"))) };
        let disposition = ["disposition", "status", "verdict", "adjudication"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str))
            .ok_or_else(|| bad(format!("finding {i} has no disposition")))?;
        let text_of = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match disposition.to_ascii_lowercase().as_str() {
            "sustained" => {
                let title = text_of("title");
                let fingerprint = match o.get("fingerprint").and_then(Value::as_str) {
                    Some(fp) if !fp.trim().is_empty() => fp.trim().to_string(),
                    _ => fingerprint_of(&text_of("file"), &title),
                };
                let id = o
                    .get("id")
                    .map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))
                    .unwrap_or_else(|| format!("#{i}"));
                let severity = match text_of("severity").to_ascii_lowercase() {
                    s if s.is_empty() => "unknown".to_string(),
                    s => s,
                };
                out.sustained.push(Sustained { id, severity, title, fingerprint });
            }
            "refuted" => out.refuted += 1,
            "indeterminate" | "adjudication-indeterminate" => out.indeterminate += 1,
            other => return Err(bad(format!("finding {i} has an unknown disposition `{other}`"))),
        }
    }
    let mut fps: Vec<String> = out.sustained.iter().map(|s| s.fingerprint.clone()).collect();
    fps.sort();
    fps.dedup();
    out.fingerprints = fps;
    out.classification = if top_indeterminate || out.indeterminate > 0 {
        Class::Indeterminate
    } else if out.sustained.is_empty() {
        Class::Clean
    } else {
        Class::Findings
    };
    Ok(out)
}

/// The fingerprint of a finding without one: see the module docs.
pub fn fingerprint_of(file: &str, title: &str) -> String {
    let norm: Vec<String> = title.split_whitespace().map(str::to_lowercase).collect();
    let digest = sha256_hex(format!("{}\n{}", file.trim(), norm.join(" ")).as_bytes());
    format!("fp-{}", &digest[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_clean_findings_and_indeterminate() {
        let clean = classify(r#"{"findings": [{"disposition": "refuted", "title": "x"}]}"#, "a").expect("ok");
        assert_eq!(clean.classification, Class::Clean);
        assert_eq!(clean.refuted, 1);
        let empty = classify(r#"{"findings": []}"#, "a").expect("ok");
        assert_eq!(empty.classification, Class::Clean);
        let f = classify(
            r#"[{"id": "F1", "severity": "Blocker", "status": "Sustained", "title": "Leak  in X", "file": "a.rs"},
                {"id": "F2", "disposition": "sustained", "fingerprint": "abc"}]"#,
            "a",
        )
        .expect("ok");
        assert_eq!(f.classification, Class::Findings);
        assert_eq!(f.sustained[0].severity, "blocker");
        assert_eq!(f.sustained[0].fingerprint, fingerprint_of("a.rs", "leak in x"));
        assert_eq!(f.fingerprints.len(), 2);
        let ind = classify(r#"{"findings": [{"disposition": "indeterminate"}]}"#, "a").expect("ok");
        assert_eq!(ind.classification, Class::Indeterminate);
        let top = classify(r#"{"status": "ADJUDICATION-INDETERMINATE"}"#, "a").expect("ok");
        assert_eq!(top.classification, Class::Indeterminate);
    }

    #[test]
    fn refuses_invalid_artifacts() {
        for bad in [
            "not json",
            "3",
            r#"{"x": 1}"#,
            r#"{"findings": [1]}"#,
            r#"[{"title": "no disposition"}]"#,
            r#"[{"disposition": "maybe"}]"#,
        ] {
            assert!(matches!(classify(bad, "a"), Err(LoopError::BadInput(_))), "{bad}");
        }
    }
}
