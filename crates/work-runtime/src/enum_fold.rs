//! Case folding of enum words in an agent's answer, before it is validated.
//!
//! A status word has one spelling (the schema's `enum`), but its case and the blanks around it
//! carry no meaning: `" DONE "` is `done`. Before validation the engine rewrites every string
//! that sits where the schema has an `enum` of strings and that matches exactly one of its
//! words once trimmed and compared without case. Anything else — a synonym, a word that
//! matches none — is left as it is, so validation refuses it.

use serde_json::Value;

/// Folds the enum words of `doc` in place, following `schema`'s `properties` and `items`.
pub fn fold_enum_words(schema: &Value, doc: &mut Value) {
    if let (Some(words), Value::String(s)) = (schema.get("enum").and_then(Value::as_array), &*doc)
        && let Some(word) = match_word(words, s)
    {
        *doc = Value::String(word);
        return;
    }
    match doc {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (key, sub) in props {
                    if let Some(v) = map.get_mut(key) {
                        fold_enum_words(sub, v);
                    }
                }
            }
        }
        Value::Array(list) => {
            if let Some(items) = schema.get("items") {
                for v in list {
                    fold_enum_words(items, v);
                }
            }
        }
        _ => {}
    }
}

/// The one enum word `s` names, when it is not already one and names exactly one.
fn match_word(words: &[Value], s: &str) -> Option<String> {
    if words.iter().any(|w| w.as_str() == Some(s)) {
        return None;
    }
    let t = s.trim();
    let mut hits = words.iter().filter_map(Value::as_str).filter(|w| w.eq_ignore_ascii_case(t));
    let first = hits.next()?;
    if hits.next().is_some() { None } else { Some(first.to_string()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "status": {"enum": ["done", "blocked"]},
            "items": {"type": "array", "items": {"type": "object", "properties": {"severity": {"enum": ["high", "low"]}}}}
        }})
    }

    #[test]
    fn case_and_blanks_fold_to_the_one_word() {
        let mut d = json!({"status": " DONE ", "items": [{"severity": "High"}, {"severity": "low"}]});
        fold_enum_words(&schema(), &mut d);
        assert_eq!(d, json!({"status": "done", "items": [{"severity": "high"}, {"severity": "low"}]}));
    }

    #[test]
    fn synonyms_and_non_strings_are_left_for_validation_to_refuse() {
        let mut d = json!({"status": "finished", "items": [{"severity": 3}], "other": "DONE"});
        let before = d.clone();
        fold_enum_words(&schema(), &mut d);
        assert_eq!(d, before);
    }

    #[test]
    fn an_ambiguous_fold_is_left_as_it_is() {
        let s = json!({"enum": ["Done", "done"]});
        let mut d = json!("DONE");
        fold_enum_words(&s, &mut d);
        assert_eq!(d, json!("DONE"));
    }
}
