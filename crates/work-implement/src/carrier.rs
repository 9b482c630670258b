//! Carrier guards (seed #24): what a run is asked to do, checked before any agent dispatch.
//!
//! A carrier is the argument object of a run. It is accepted as an object, or as a JSON string
//! that parses to an object (a stringifying caller that still authored the object form). Any
//! other type (free text, a number, a boolean, an array, null) is a distinct `bad-carrier`
//! BLOCKED naming the received type; an unknown mode is `bad-carrier` too; a missing or blank
//! required field fails fast by name (`missing-field`). Required fields per mode:
//!
//! | mode | required |
//! |---|---|
//! | standard | `iter_id`, `plan_path` |
//! | mini | `iter_id`, `red_test_path`, `cause_summary` |
//! | edit | `edit_description`, `def_site` |

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Which pipeline a carrier asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A plan of tasks through the per-task loop.
    Standard,
    /// One fix that turns a handed-off RED test green.
    Mini,
    /// A compiler-driven edit at a definition site.
    Edit,
}

impl Mode {
    /// The carrier spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Standard => "standard",
            Mode::Mini => "mini",
            Mode::Edit => "edit",
        }
    }

    /// The fields a carrier of this mode must carry, non-blank.
    pub fn required(self) -> &'static [&'static str] {
        match self {
            Mode::Standard => &["iter_id", "plan_path"],
            Mode::Mini => &["iter_id", "red_test_path", "cause_summary"],
            Mode::Edit => &["edit_description", "def_site"],
        }
    }
}

/// Why a carrier was refused. Every variant ends the run BLOCKED with zero dispatches.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CarrierError {
    /// The carrier is not an object (nor a JSON string of one).
    #[error("carrier is {received}, not an object")]
    NotObject {
        /// The received type (`a string (free text)`, `a number`, …).
        received: String,
    },
    /// The carrier names a mode this command does not know.
    #[error("carrier has unknown mode `{mode}` (expected {expected})")]
    UnknownMode {
        /// What was written.
        mode: String,
        /// The accepted modes.
        expected: String,
    },
    /// A required field is missing, blank, or not a string.
    #[error("carrier field `{field}` is missing or blank (required in {mode} mode)")]
    MissingField {
        /// The field.
        field: String,
        /// The mode whose required set it belongs to.
        mode: String,
    },
    /// `iter_id` is not a plain name (it names a directory under `.work/iterations/`).
    #[error("carrier field `iter_id` `{0}` is not a plain name (letters, digits, `.`, `_`, `-`)")]
    BadIterId(String),
    /// An optional field has the wrong type.
    #[error("carrier field `{0}` must be a string")]
    NotAString(String),
}

impl CarrierError {
    /// The BLOCKED kind: `missing-field` for a missing field, `bad-carrier` otherwise.
    pub fn kind(&self) -> &'static str {
        match self {
            CarrierError::MissingField { .. } => "missing-field",
            _ => "bad-carrier",
        }
    }

    /// The field named by the error, when there is one.
    pub fn field(&self) -> Option<&str> {
        match self {
            CarrierError::MissingField { field, .. } | CarrierError::NotAString(field) => Some(field),
            CarrierError::BadIterId(_) => Some("iter_id"),
            _ => None,
        }
    }
}

/// A validated carrier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Carrier {
    /// The mode.
    pub mode: Mode,
    /// The iteration id (required in standard and mini mode; optional for an edit).
    pub iter_id: Option<String>,
    /// Standard: the plan file.
    pub plan_path: Option<String>,
    /// Standard: an optional task range `A-B` (`range` or `task_range`).
    pub range: Option<String>,
    /// Mini: the RED test, run by name.
    pub red_test_path: Option<String>,
    /// Mini: what the debugger found.
    pub cause_summary: Option<String>,
    /// Edit: what to change.
    pub edit_description: Option<String>,
    /// Edit: where the definition is (`PATH:LINE`).
    pub def_site: Option<String>,
}

/// The JSON type name of a value, as the BLOCKED reason writes it.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string (free text)",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads carrier text as given on a command line or in a file: JSON when it parses, else
/// free text (a string).
pub fn value_from_text(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// Accepts an object, or a string holding the JSON of an object; refuses every other type.
pub fn normalize(v: Value) -> Result<Map<String, Value>, CarrierError> {
    match v {
        Value::Object(m) => Ok(m),
        Value::String(s) => match serde_json::from_str::<Value>(s.trim()) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(inner) if !matches!(inner, Value::String(_)) => {
                Err(CarrierError::NotObject { received: format!("a string holding {}", type_name(&inner)) })
            }
            _ => Err(CarrierError::NotObject { received: "a string (free text)".into() }),
        },
        other => Err(CarrierError::NotObject { received: type_name(&other).into() }),
    }
}

fn str_field(m: &Map<String, Value>, key: &str) -> Result<Option<String>, CarrierError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(CarrierError::NotAString(key.into())),
    }
}

/// True when `id` can name a directory: `[A-Za-z0-9][A-Za-z0-9._-]*`, at most 100 characters.
pub fn plain_name(id: &str) -> bool {
    let mut chars = id.chars();
    id.len() <= 100
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Validates a carrier for a command. `allowed` lists the modes the command runs (the first
/// is the default when the carrier has no `mode`). `overlay` holds fields given as flags,
/// which win over the carrier's.
pub fn parse(
    carrier: Option<Value>,
    allowed: &[Mode],
    default_mode: Mode,
    overlay: &[(&str, Option<String>)],
) -> Result<Carrier, CarrierError> {
    let mut m = match carrier {
        Some(v) => normalize(v)?,
        None => Map::new(),
    };
    for (k, v) in overlay {
        if let Some(v) = v {
            m.insert((*k).to_string(), Value::String(v.clone()));
        }
    }
    let mode = match m.get("mode") {
        None | Some(Value::Null) => default_mode,
        Some(Value::String(s)) => {
            let s = s.trim();
            let found = allowed.iter().find(|md| {
                md.as_str() == s || (**md == Mode::Edit && (s == "compiler-driven-edit" || s == "compiler-driven"))
            });
            match found {
                Some(md) => *md,
                None => {
                    let expected = allowed.iter().map(|m| format!("`{}`", m.as_str())).collect::<Vec<_>>().join(" or ");
                    return Err(CarrierError::UnknownMode { mode: s.to_string(), expected });
                }
            }
        }
        Some(other) => {
            let expected = allowed.iter().map(|m| format!("`{}`", m.as_str())).collect::<Vec<_>>().join(" or ");
            return Err(CarrierError::UnknownMode { mode: other.to_string(), expected });
        }
    };
    for field in mode.required() {
        let ok = matches!(m.get(*field), Some(Value::String(s)) if !s.trim().is_empty());
        if !ok {
            return Err(CarrierError::MissingField { field: (*field).into(), mode: mode.as_str().into() });
        }
    }
    let iter_id = str_field(&m, "iter_id")?.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    if let Some(id) = &iter_id
        && !plain_name(id)
    {
        return Err(CarrierError::BadIterId(id.clone()));
    }
    let range = match str_field(&m, "range")? {
        Some(r) => Some(r),
        None => str_field(&m, "task_range")?,
    }
    .map(|s| s.trim().to_string())
    .filter(|s| !s.is_empty());
    let trimmed = |k: &str| -> Result<Option<String>, CarrierError> {
        Ok(str_field(&m, k)?.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()))
    };
    Ok(Carrier {
        mode,
        iter_id,
        plan_path: trimmed("plan_path")?,
        range,
        red_test_path: trimmed("red_test_path")?,
        cause_summary: trimmed("cause_summary")?,
        edit_description: trimmed("edit_description")?,
        def_site: trimmed("def_site")?,
    })
}

/// A task range `A-B` (or a single `A`), inclusive, `A <= B`.
pub fn parse_range(text: &str) -> Result<(u64, u64), String> {
    let t = text.trim();
    let (a, b) = match t.split_once('-') {
        Some((a, b)) => (a.trim(), b.trim()),
        None => (t, t),
    };
    let parse = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit()) { None } else { s.parse().ok() }
    };
    match (parse(a), parse(b)) {
        (Some(a), Some(b)) if a <= b && b - a < 100_000 => Ok((a, b)),
        (Some(_), Some(_)) => Err(format!("range `{t}` is not ascending (A-B with A <= B)")),
        _ => Err(format!("range `{t}` is not `A-B` with whole-number task ids")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const IMPL: &[Mode] = &[Mode::Standard, Mode::Mini];

    #[test]
    fn object_and_json_string_of_object_are_accepted() {
        let c = parse(Some(json!({"iter_id": "it1", "plan_path": "p.md"})), IMPL, Mode::Standard, &[]).expect("ok");
        assert_eq!(c.mode, Mode::Standard);
        assert_eq!(c.plan_path.as_deref(), Some("p.md"));
        let s = json!({"mode": "mini", "iter_id": "i", "red_test_path": "t", "cause_summary": "c"}).to_string();
        let c = parse(Some(Value::String(s)), IMPL, Mode::Standard, &[]).expect("ok");
        assert_eq!(c.mode, Mode::Mini);
        let text = r#"{"iter_id":"i","plan_path":"p"}"#;
        assert!(parse(Some(value_from_text(text)), IMPL, Mode::Standard, &[]).is_ok());
        // A JSON string literal holding an object (double-encoded) also parses to an object.
        let double = serde_json::to_string(text).expect("encode");
        assert!(parse(Some(value_from_text(&double)), IMPL, Mode::Standard, &[]).is_ok());
    }

    #[test]
    fn other_types_are_bad_carriers_naming_the_type() {
        for (v, name) in [
            (value_from_text("please implement the plan"), "a string (free text)"),
            (value_from_text("42"), "a number"),
            (value_from_text("true"), "a boolean"),
            (value_from_text("[1]"), "an array"),
            (value_from_text("null"), "null"),
            (Value::String("7".into()), "a string holding a number"),
        ] {
            let e = parse(Some(v), IMPL, Mode::Standard, &[]).expect_err("refused");
            assert_eq!(e.kind(), "bad-carrier");
            assert!(e.to_string().contains(name), "{e} should name {name}");
        }
    }

    #[test]
    fn unknown_mode_and_missing_fields_are_named() {
        let e = parse(Some(json!({"mode": "turbo", "iter_id": "i"})), IMPL, Mode::Standard, &[]).expect_err("x");
        assert_eq!(e.kind(), "bad-carrier");
        assert!(e.to_string().contains("turbo"));
        let e = parse(Some(json!({"iter_id": "i", "plan_path": "  "})), IMPL, Mode::Standard, &[]).expect_err("x");
        assert_eq!(e.field(), Some("plan_path"));
        assert_eq!(e.kind(), "missing-field");
        let e = parse(Some(json!({"mode": "mini", "iter_id": "i", "red_test_path": "t"})), IMPL, Mode::Standard, &[])
            .expect_err("x");
        assert_eq!(e.field(), Some("cause_summary"));
        let e = parse(None, &[Mode::Edit], Mode::Edit, &[("edit_description", Some("x".into()))]).expect_err("x");
        assert_eq!(e.field(), Some("def_site"));
        let e = parse(Some(json!({"iter_id": 5, "plan_path": "p"})), IMPL, Mode::Standard, &[]).expect_err("x");
        assert_eq!(e.field(), Some("iter_id"));
        let e = parse(Some(json!({"iter_id": "../x", "plan_path": "p"})), IMPL, Mode::Standard, &[]).expect_err("x");
        assert_eq!(e.kind(), "bad-carrier");
    }

    #[test]
    fn flags_overlay_the_carrier() {
        let c = parse(
            Some(json!({"iter_id": "a", "plan_path": "p"})),
            IMPL,
            Mode::Standard,
            &[("iter_id", Some("b".into())), ("plan_path", None)],
        )
        .expect("ok");
        assert_eq!(c.iter_id.as_deref(), Some("b"));
        assert_eq!(c.plan_path.as_deref(), Some("p"));
    }

    #[test]
    fn ranges() {
        assert_eq!(parse_range("2-4"), Ok((2, 4)));
        assert_eq!(parse_range("3"), Ok((3, 3)));
        assert!(parse_range("4-2").is_err());
        assert!(parse_range("a-b").is_err());
        assert!(parse_range("1-").is_err());
    }
}
