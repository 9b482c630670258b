//! Mechanical backstops on review judgement (docs/ground-truth.md, "Reviewers prove they
//! looked"):
//!
//! - a clean verdict names the files it read (`files_read`), at least one of them a file the
//!   change under review touched ([`work_git::looked::check_files_read`]); a reviewer that does
//!   not is asked once more with the reason, then counts as missing;
//! - the adjudicator's refutation of a finding cites `evidence: {location: "PATH:LINE", quote}`
//!   that the engine re-reads the way exhaust's gate 2 does (confined to the repository, never
//!   `.git/` or the state directory, the line exists, the quote occurs within a few lines of it,
//!   whitespace-normalised); a refutation without such evidence is `indeterminate` — a person
//!   decides;
//! - a finding about a gate (`gate`: the gate's name) is re-run by the engine when the
//!   adjudicator does not sustain it: a red gate makes it `sustained`, whatever was said.

use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use work_git::evidence::{Gate2, Gate2Rules, gate2_with};

/// The shortest quote that proves anything.
const MIN_QUOTE: usize = 3;

/// Why a refutation's `evidence` is not accepted, or `None` when the engine re-read it.
pub fn refutation_unproven(root: &Path, rules: &Gate2Rules, evidence: Option<&Value>) -> Option<String> {
    let Some(ev) = evidence.filter(|e| e.is_object()) else {
        return Some("it cites no evidence (`evidence`: {\"location\": \"PATH:LINE\", \"quote\": \"…\"})".into());
    };
    let location = ev.get("location").and_then(Value::as_str).unwrap_or_default();
    let quote = ev.get("quote").and_then(Value::as_str).unwrap_or_default().replace('`', "");
    if quote.split_whitespace().collect::<String>().chars().count() < MIN_QUOTE {
        return Some(format!("its evidence `{location}` quotes nothing the engine can compare"));
    }
    // The quote is compared as code: the whole of it must be in the lines around the location.
    match gate2_with(root, location, Some(&format!("`{}`", quote.trim())), rules) {
        Gate2::Read { .. } => None,
        Gate2::Concept => Some(format!("its evidence `{location}` is not a PATH:LINE location")),
        Gate2::Refused(why) => Some(why),
    }
}

/// Applies the engine's checks to a merged adjudication artifact, in place: findings about a
/// red gate are sustained, refutations the engine could not re-read become indeterminate. Each
/// override is recorded on the finding (`engine`) and returned as a note.
pub fn check_adjudication(
    artifact: &mut Value,
    root: &Path,
    rules: &Gate2Rules,
    red_gates: &BTreeSet<String>,
) -> Vec<String> {
    let mut notes = Vec::new();
    let Some(findings) = artifact.get_mut("findings").and_then(Value::as_array_mut) else { return notes };
    for f in findings.iter_mut() {
        let id = f.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        let disposition = f.get("disposition").and_then(Value::as_str).unwrap_or_default().to_string();
        let gate = f.get("gate").and_then(Value::as_str).map(str::to_string);
        let (now, why) = match gate {
            Some(g) if red_gates.contains(&g) && disposition != "sustained" => {
                ("sustained", format!("the gate `{g}` is red: a finding about a red gate cannot be {disposition}"))
            }
            _ if disposition == "refuted" => match refutation_unproven(root, rules, f.get("evidence")) {
                Some(why) => ("indeterminate", format!("the refutation was not accepted: {why}")),
                None => continue,
            },
            _ => continue,
        };
        if let Value::Object(o) = f {
            o.insert("disposition".into(), json!(now));
            o.insert("engine".into(), json!(why));
        }
        notes.push(format!("finding `{id}`: {why}"));
    }
    notes
}

/// The gate names the findings of `report` are about.
pub fn gates_named(report: &Value) -> BTreeSet<String> {
    report
        .get("findings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| f.get("gate").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refutations_need_re_read_evidence_and_red_gates_stay_sustained() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("a.rs"), "fn a() {\n    if x.is_none() { return; }\n}\n").expect("write");
        let rules = Gate2Rules::default();
        let ev = |loc: &str, q: &str| json!({"location": loc, "quote": q});
        assert_eq!(refutation_unproven(root, &rules, Some(&ev("a.rs:2", "if x.is_none()  {"))), None);
        assert_eq!(
            refutation_unproven(root, &rules, Some(&ev("./a.rs:1", "`if x.is_none()`"))),
            None,
            "within 3 lines"
        );
        for (e, want) in [
            (None, "cites no evidence"),
            (Some(ev("a.rs:2", "")), "quotes nothing"),
            (Some(ev("a.rs:2", "x.is_some()")), "not in lines"),
            (Some(ev("a.rs:9", "fn a()")), "past the end"),
            (Some(ev("../a.rs:1", "fn a()")), "refused"),
            (Some(ev("the code is fine", "fn a()")), "not a PATH:LINE"),
        ] {
            let got = refutation_unproven(root, &rules, e.as_ref()).unwrap_or_default();
            assert!(got.contains(want), "{e:?}: {got}");
        }
        let mut art = json!({"findings": [
            {"id": "F1", "disposition": "refuted", "gate": "test", "evidence": ev("a.rs:2", "is_none")},
            {"id": "F2", "disposition": "refuted", "reason": "trust me"},
            {"id": "F3", "disposition": "refuted", "evidence": ev("a.rs:2", "return;")},
            {"id": "F4", "disposition": "sustained"},
        ]});
        let red: BTreeSet<String> = ["test".to_string()].into();
        let notes = check_adjudication(&mut art, root, &rules, &red);
        let disp: Vec<&str> =
            art["findings"].as_array().into_iter().flatten().filter_map(|f| f["disposition"].as_str()).collect();
        assert_eq!(disp, vec!["sustained", "indeterminate", "refuted", "sustained"]);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("gate `test` is red"), "{notes:?}");
        let report = json!({"findings": [{"id": "F1", "gate": "test"}, {"id": "F2"}]});
        assert_eq!(gates_named(&report), red);
    }
}
