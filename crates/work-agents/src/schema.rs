//! The dispatch schema rewritten for vendors' structured-output modes, and the answer brought
//! back to the original schema.
//!
//! The engine validates every answer against the **original** schema; what is sent to a
//! vendor is only a guide for its constrained decoding, so it may be looser (a keyword the
//! vendor rejects is dropped and described in words) or narrower (an "anything" becomes a
//! union of scalar types) than the original:
//!
//! - [`openai_strict`]: OpenAI's strict subset, used by Codex's `--output-schema` (always
//!   strict) and by `openai:` `json_schema` with `strict: true`. Every object is closed
//!   (`additionalProperties: false`) and lists **every** property in `required`; a property the
//!   original made optional becomes nullable (`anyOf [..., {"type": "null"}]`). Only `type`,
//!   `properties`, `required`, `additionalProperties`, `items`, `enum`, `const`, `anyOf`,
//!   `description`, `$ref` and `$defs` are kept; a type list becomes an `anyOf` of single types.
//!   [`drop_optional_nulls`] then removes the nulls the model wrote for such properties, so the
//!   answer validates against the original schema.
//! - [`anthropic`]: Anthropic's structured outputs (`output_config.format`). Objects are closed,
//!   `required` stays as it is; numeric, string-length and array bounds (`minimum`, `maximum`,
//!   `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, `minLength`, `maxLength`, `maxItems`,
//!   `minItems` above 1, `uniqueItems`), `pattern`, unsupported `format`s, `oneOf` (sent as
//!   `anyOf`), `not`, `if`/`then`/`else` and the like are removed and appended to the
//!   description, as the official SDKs do (`transform_schema`).
//!
//! [`openai_strict_violation`] checks a schema against the strict rules the transform produces
//! (tests, and the `openai:` backend's choice of `strict`).

use serde_json::{Map, Value, json};

/// String formats Anthropic's structured outputs accept.
const ANTHROPIC_FORMATS: [&str; 10] =
    ["date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"];

/// Keywords dropped without a note (annotations and defaults).
const SILENT: [&str; 6] = ["title", "default", "$schema", "$id", "examples", "$comment"];

/// Keywords outside OpenAI's strict subset as [`openai_strict`] produces it.
const NOT_STRICT: [&str; 22] = [
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependentRequired",
];

/// The vendor dialect of a transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    /// OpenAI strict structured outputs (and Codex `--output-schema`).
    OpenAiStrict,
    /// Anthropic structured outputs.
    Anthropic,
}

/// Root keywords a tool's `input_schema` may not carry (the Anthropic API refuses a root
/// `anyOf`/`oneOf`/`allOf`; the rest make no sense at a root that must be one object).
const NOT_AT_TOOL_ROOT: [&str; 7] = ["anyOf", "oneOf", "allOf", "not", "if", "then", "else"];

/// The schema as a tool's `input_schema`: what Claude Code's `--json-schema` becomes (it
/// accepts draft-07 or no `$schema`, and sends the schema as its `StructuredOutput` tool) and
/// what the `anthropic:` backend's forced tool takes. `$schema` and `$id` are dropped, root
/// combinators (`anyOf`, `oneOf`, …) are dropped and described, the root is `type: object`,
/// and regex patterns with inline flags (`(?i:…)`, not ECMA-262) are dropped and described.
/// Everything else is kept: the CLI checks the answer against what it was given.
pub fn tool_input(schema: &Value) -> Value {
    let Value::Object(m) = schema else { return schema.clone() };
    let mut m = m.clone();
    m.remove("$schema");
    m.remove("$id");
    let mut notes = Vec::new();
    for k in NOT_AT_TOOL_ROOT {
        if let Some(v) = m.remove(k) {
            notes.push(format!("{k}: {v}"));
        }
    }
    m.entry("type").or_insert_with(|| json!("object"));
    let mut out = Value::Object(m);
    portable_patterns(&mut out, 0);
    if !notes.is_empty() {
        append_description(&mut out, &notes.join("; "));
    }
    out
}

fn append_description(node: &mut Value, note: &str) {
    if let Value::Object(m) = node {
        let d = m.get("description").and_then(Value::as_str).map_or(String::new(), |d| format!("{d} "));
        m.insert("description".into(), json!(format!("{d}({note})")));
    }
}

/// True when `pattern` uses a construct ECMA-262 regexes lack (inline flags).
fn non_ecma(pattern: &str) -> bool {
    ["(?i", "(?s", "(?m", "(?x", "(?u", "(?-"].iter().any(|f| pattern.contains(f))
}

fn portable_patterns(node: &mut Value, depth: u32) {
    if depth > 64 {
        return;
    }
    match node {
        Value::Object(m) => {
            if let Some(p) = m.get("pattern").and_then(Value::as_str).filter(|p| non_ecma(p)).map(str::to_string) {
                m.remove("pattern");
                append_description(node, &format!("pattern: {p}"));
                if let Value::Object(m) = node {
                    m.values_mut().for_each(|v| portable_patterns(v, depth + 1));
                }
                return;
            }
            m.values_mut().for_each(|v| portable_patterns(v, depth + 1));
        }
        Value::Array(a) => a.iter_mut().for_each(|v| portable_patterns(v, depth + 1)),
        _ => {}
    }
}

/// Why `schema` cannot be a tool's `input_schema` (the Anthropic API's rules as the tests'
/// model server applies them), or `None`.
pub fn tool_input_violation(schema: &Value) -> Option<String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Some("input_schema: the root must be `type: object`".into());
    }
    NOT_AT_TOOL_ROOT
        .iter()
        .find(|k| schema.get(**k).is_some())
        .map(|k| format!("input_schema does not support {k} at the top level"))
}

/// The schema in OpenAI's strict form, or `None` when its root is not an object schema
/// (strict mode needs an object at the root).
pub fn openai_strict(schema: &Value) -> Option<Value> {
    let root_is_object = match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        None => schema.get("properties").is_some(),
        _ => false,
    };
    root_is_object.then(|| convert(schema, Dialect::OpenAiStrict))
}

/// The schema in the form Anthropic's structured outputs accept.
pub fn anthropic(schema: &Value) -> Value {
    convert(schema, Dialect::Anthropic)
}

/// Any scalar: what stands for the items of an array that says nothing about them.
fn any_scalar() -> Value {
    json!({"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]})
}

/// Something of any scalar type, or a list of them: what stands for a schema that allows
/// anything, which strict modes cannot express.
fn any_value() -> Value {
    json!({"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
                     {"type": "array", "items": any_scalar()}]})
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// True when `v` is an instance of the JSON type `t`.
fn has_type(v: &Value, t: &str) -> bool {
    let vt = json_type(v);
    vt == t || (t == "number" && vt == "integer")
}

/// The types a schema node allows, in its own order; empty when it says nothing about type.
fn node_types(m: &Map<String, Value>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |t: &str| {
        if !out.iter().any(|x| x == t) {
            out.push(t.to_string());
        }
    };
    match m.get("type") {
        Some(Value::String(t)) => push(t),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).for_each(&mut push),
        _ => {
            if m.contains_key("properties") || m.contains_key("required") {
                push("object");
            } else if m.contains_key("items") {
                push("array");
            } else if let Some(Value::Array(values)) = m.get("enum") {
                values.iter().for_each(|v| push(json_type(v)));
            } else if let Some(c) = m.get("const") {
                push(json_type(c));
            }
        }
    }
    out
}

/// Appends `notes` (`{key: value, …}`) to a description, the way the Anthropic SDK does.
fn describe(description: Option<&str>, notes: &Map<String, Value>) -> Option<String> {
    if notes.is_empty() {
        return description.map(str::to_string);
    }
    let listed: Vec<String> = notes
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}: {s}"),
            other => format!("{k}: {other}"),
        })
        .collect();
    let extra = format!("{{{}}}", listed.join(", "));
    Some(match description {
        Some(d) if !d.is_empty() => format!("{d}\n\n{extra}"),
        _ => extra,
    })
}

fn set_description(out: &mut Map<String, Value>, description: Option<String>) {
    if let Some(d) = description {
        out.insert("description".into(), Value::String(d));
    }
}

/// True when a transformed node accepts `null`.
fn accepts_null(v: &Value) -> bool {
    match v.get("type") {
        Some(Value::String(t)) => t == "null",
        _ => v.get("anyOf").and_then(Value::as_array).is_some_and(|b| b.iter().any(accepts_null)),
    }
}

/// A transformed node that also accepts `null`.
fn nullable(v: Value) -> Value {
    if accepts_null(&v) {
        return v;
    }
    let Value::Object(mut m) = v else { return v };
    if let Some(Value::Array(branches)) = m.get_mut("anyOf") {
        branches.push(json!({"type": "null"}));
        return Value::Object(m);
    }
    let description = m.remove("description");
    let mut out = Map::new();
    out.insert("anyOf".into(), json!([Value::Object(m), {"type": "null"}]));
    if let Some(d) = description {
        out.insert("description".into(), d);
    }
    Value::Object(out)
}

/// One schema node in `dialect`.
fn convert(node: &Value, dialect: Dialect) -> Value {
    let Value::Object(m) = node else { return any_value() };
    let mut notes = Map::new();
    let description = m.get("description").and_then(Value::as_str);
    let mut defs_out: Option<(String, Value)> = None;
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = m.get(key) {
            let converted: Map<String, Value> = defs.iter().map(|(k, v)| (k.clone(), convert(v, dialect))).collect();
            defs_out = Some((key.to_string(), Value::Object(converted)));
        }
    }
    if let Some(r) = m.get("$ref") {
        let mut out = Map::new();
        out.insert("$ref".into(), r.clone());
        if let Some((k, v)) = defs_out {
            out.insert(k, v);
        }
        return Value::Object(out);
    }
    let types = node_types(m);
    // Branches that only add constraints (`anyOf: [{required: [a]}, {required: [b]}]`) cannot
    // be expressed: they are described, and the engine checks them.
    let typed_branches = m
        .get("anyOf")
        .or_else(|| m.get("oneOf"))
        .and_then(Value::as_array)
        .filter(|bs| !bs.is_empty() && bs.iter().all(is_typed_branch));
    let mut out = Map::new();
    let mut handled: Vec<&str> = vec![
        "type",
        "description",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "$defs",
        "definitions",
    ];
    if types.is_empty() {
        match typed_branches {
            Some(bs) => {
                let converted: Vec<Value> = bs.iter().map(|b| convert(b, dialect)).collect();
                out.insert("anyOf".into(), Value::Array(converted));
                handled.extend(["anyOf", "oneOf"]);
            }
            None => {
                if let Value::Object(any) = any_value() {
                    out = any;
                }
            }
        }
    } else {
        // With a type, any `anyOf`/`oneOf` beside it is described rather than sent.
        let mut branches: Vec<Value> = types
            .iter()
            .map(|t| typed_branch(m, t, dialect, &mut notes))
            // A branch whose enum kept no value of its type can match nothing.
            .filter(|b| b.get("enum").and_then(Value::as_array).is_none_or(|e| !e.is_empty()))
            .collect();
        match branches.len() {
            0 => {
                if let Value::Object(any) = any_value() {
                    out = any;
                }
            }
            1 => {
                if let Some(Value::Object(b)) = branches.pop() {
                    out = b;
                }
            }
            _ => {
                out.insert("anyOf".into(), Value::Array(branches));
            }
        }
    }
    for (k, v) in m {
        if handled.contains(&k.as_str()) || SILENT.contains(&k.as_str()) {
            continue;
        }
        // Keywords a typed branch already kept (Anthropic's formats and small minItems).
        if dialect == Dialect::Anthropic && (k == "format" || k == "minItems") && kept_in_branch(&out, k) {
            continue;
        }
        notes.insert(k.clone(), v.clone());
    }
    set_description(&mut out, describe(description, &notes));
    if let Some((k, v)) = defs_out {
        out.insert(k, v);
    }
    Value::Object(out)
}

/// True for an `anyOf` branch that describes a value (a type, properties, items, values, a
/// reference or its own branches), not only a constraint such as `{"required": [...]}`.
fn is_typed_branch(b: &Value) -> bool {
    ["type", "properties", "items", "enum", "const", "$ref", "anyOf", "oneOf"].iter().any(|k| b.get(*k).is_some())
}

fn kept_in_branch(out: &Map<String, Value>, key: &str) -> bool {
    out.contains_key(key)
        || out.get("anyOf").and_then(Value::as_array).is_some_and(|bs| bs.iter().any(|b| b.get(key).is_some()))
}

/// The branch of node `m` for JSON type `t`.
fn typed_branch(m: &Map<String, Value>, t: &str, dialect: Dialect, notes: &mut Map<String, Value>) -> Value {
    let mut b = Map::new();
    b.insert("type".into(), Value::String(t.to_string()));
    if let Some(Value::Array(values)) = m.get("enum") {
        let kept: Vec<Value> = values.iter().filter(|v| has_type(v, t)).cloned().collect();
        b.insert("enum".into(), Value::Array(kept));
    }
    if let Some(c) = m.get("const").filter(|c| has_type(c, t)) {
        b.insert("const".into(), c.clone());
    }
    match t {
        "object" => {
            let required: Vec<String> = m
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default();
            let mut props = Map::new();
            if let Some(Value::Object(p)) = m.get("properties") {
                for (k, v) in p {
                    let converted = convert(v, dialect);
                    let optional = !required.contains(k);
                    let converted =
                        if dialect == Dialect::OpenAiStrict && optional { nullable(converted) } else { converted };
                    props.insert(k.clone(), converted);
                }
            }
            for k in &required {
                if !props.contains_key(k) {
                    props.insert(k.clone(), any_value());
                }
            }
            let required_out: Vec<Value> = match dialect {
                Dialect::OpenAiStrict => props.keys().cloned().map(Value::String).collect(),
                Dialect::Anthropic => required.iter().cloned().map(Value::String).collect(),
            };
            b.insert("properties".into(), Value::Object(props));
            b.insert("required".into(), Value::Array(required_out));
            b.insert("additionalProperties".into(), Value::Bool(false));
        }
        "array" => {
            let items = match m.get("items") {
                Some(i @ Value::Object(_)) => convert(i, dialect),
                Some(Value::Array(tuple)) => {
                    notes.insert("items".into(), Value::Array(tuple.clone()));
                    any_value()
                }
                _ => any_scalar(),
            };
            b.insert("items".into(), items);
            if dialect == Dialect::Anthropic
                && let Some(n) = m.get("minItems").filter(|n| n.as_u64().is_some_and(|n| n <= 1))
            {
                b.insert("minItems".into(), n.clone());
            }
        }
        "string" => {
            if dialect == Dialect::Anthropic
                && let Some(f) = m.get("format").filter(|f| f.as_str().is_some_and(|f| ANTHROPIC_FORMATS.contains(&f)))
            {
                b.insert("format".into(), f.clone());
            }
        }
        _ => {}
    }
    Value::Object(b)
}

/// Removes, recursively, every property of `document` whose value is `null` and that the
/// original `schema` does not require: the nulls a model writes for the properties
/// [`openai_strict`] made required-but-nullable. Everything else is left as it is.
pub fn drop_optional_nulls(schema: &Value, mut document: Value) -> Value {
    prune(schema, &mut document, schema, 0);
    document
}

fn resolve_ref<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let path = r.strip_prefix('#')?;
    root.pointer(path)
}

fn prune(schema: &Value, doc: &mut Value, root: &Value, depth: u32) {
    if depth > 64 {
        return;
    }
    let Value::Object(s) = schema else { return };
    if let Some(target) = s.get("$ref").and_then(Value::as_str).and_then(|r| resolve_ref(root, r)) {
        prune(target, doc, root, depth + 1);
    }
    match doc {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = s.get("properties") {
                let required: Vec<&str> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .map_or(vec![], |r| r.iter().filter_map(Value::as_str).collect());
                map.retain(|k, v| !(v.is_null() && props.contains_key(k) && !required.contains(&k.as_str())));
                for (k, v) in map.iter_mut() {
                    if let Some(ps) = props.get(k) {
                        prune(ps, v, root, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(is @ Value::Object(_)) = s.get("items") {
                for it in items.iter_mut() {
                    prune(is, it, root, depth + 1);
                }
            }
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = s.get(key) {
            for b in branches {
                prune(b, doc, root, depth + 1);
            }
        }
    }
}

/// Why `schema` is not in the strict form OpenAI (and Codex `--output-schema`) require, or
/// `None` when it is: an object root; every object closed with every property required;
/// every array with `items`; every node typed (or an `anyOf`, `$ref`); no type lists beyond
/// `[T, "null"]`; no keyword outside the subset.
pub fn openai_strict_violation(schema: &Value) -> Option<String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Some("the root is not `type: object`".into());
    }
    strict_node(schema, "$")
}

fn strict_node(node: &Value, at: &str) -> Option<String> {
    let Value::Object(m) = node else { return Some(format!("{at}: a schema must be an object")) };
    if m.contains_key("$ref") {
        return None;
    }
    for k in NOT_STRICT {
        if m.contains_key(k) {
            return Some(format!("{at}: `{k}` is not supported in strict mode"));
        }
    }
    let types: Vec<&str> = match m.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => {
            let ts: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            if ts.iter().filter(|t| **t != "null").count() > 1 {
                return Some(format!("{at}: a type list may hold one type besides null"));
            }
            ts
        }
        _ => vec![],
    };
    if types.is_empty() && !m.contains_key("anyOf") {
        return Some(format!("{at}: schema must have a `type` key"));
    }
    if types.contains(&"object") || m.contains_key("properties") {
        if m.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Some(format!("{at}: `additionalProperties` is required to be supplied and to be false"));
        }
        let Some(Value::Object(props)) = m.get("properties") else {
            return Some(format!("{at}: an object must list its `properties`"));
        };
        let required: Vec<&str> = m
            .get("required")
            .and_then(Value::as_array)
            .map_or(vec![], |r| r.iter().filter_map(Value::as_str).collect());
        for k in props.keys() {
            if !required.contains(&k.as_str()) {
                return Some(format!("{at}: `required` must list every property; missing `{k}`"));
            }
        }
        for r in &required {
            if !props.contains_key(*r) {
                return Some(format!("{at}: `required` names `{r}`, which is not a property"));
            }
        }
        for (k, v) in props {
            if let Some(e) = strict_node(v, &format!("{at}.{k}")) {
                return Some(e);
            }
        }
    }
    if types.contains(&"array") {
        match m.get("items") {
            Some(items) => {
                if let Some(e) = strict_node(items, &format!("{at}[]")) {
                    return Some(e);
                }
            }
            None => return Some(format!("{at}: an array must have `items`")),
        }
    }
    if let Some(Value::Array(branches)) = m.get("anyOf") {
        for (i, b) in branches.iter().enumerate() {
            if let Some(e) = strict_node(b, &format!("{at}|{i}")) {
                return Some(e);
            }
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The finder schema of `work exhaust` (work-exhaust's `finder_schema`).
    pub(crate) fn finder() -> Value {
        json!({
            "type": "object",
            "required": ["angle", "items"],
            "properties": {
                "angle": {"type": "string"},
                "items": {"type": "array", "items": {
                    "type": "object",
                    "required": ["id", "title", "location"],
                    "properties": {
                        "id": {"type": "string", "minLength": 1},
                        "title": {"type": "string"},
                        "description": {"type": "string"},
                        "location": {"type": "string", "minLength": 1},
                        "evidence": {"type": "string"},
                        "severity": {"enum": ["critical", "high", "medium", "low"]}
                    }
                }},
                "roundNotes": {"type": "string"}
            }
        })
    }

    /// Shapes of `work implement`'s schemas: a case-insensitive pattern, type lists with
    /// objects and arrays, `minimum`, constraint-only `anyOf`, untyped arrays.
    pub(crate) fn implement_like() -> Value {
        let word = json!({"type": "string", "pattern": "^\\s*(?i:done|blocked)\\s*$", "description": "DONE | BLOCKED"});
        json!({
            "type": "object",
            "anyOf": [{"required": ["status"]}, {"required": ["verdict"]}],
            "properties": {
                "status": word.clone(),
                "verdict": word,
                "issues": {"type": ["array", "string", "null"], "items": {
                    "type": ["object", "string"],
                    "properties": {"severity": {"type": ["string", "null"]}, "text": {"type": "string"}}
                }},
                "fixtures": {"type": ["integer", "array", "null"], "minimum": 0},
                "held": {"type": ["array", "object", "string", "null"]},
                "total": {"type": "integer", "minimum": 0},
                "tags": {"type": "array", "minItems": 2, "maxItems": 5, "items": {"type": "string", "format": "email"}}
            }
        })
    }

    fn validate(schema: &Value, doc: &Value) -> Result<(), String> {
        work_runtime::dispatch::validate(schema, doc)
    }

    /// The shape of `work until`'s report schema: a 2020-12 `$schema`, a root `anyOf`.
    fn until_like() -> Value {
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "anyOf": [{"required": ["status"]}, {"required": ["verdict"]}],
            "properties": {"status": {"type": "string", "pattern": "^(?i:done|blocked)$"},
                "verdict": {"type": "string"}, "pattern": {"type": "string", "pattern": "^[a-z]+$"}}})
    }

    #[test]
    fn tool_inputs_carry_no_dialect_or_root_combinator() {
        let original = until_like();
        assert!(tool_input_violation(&original).is_some());
        let sent = tool_input(&original);
        assert_eq!(tool_input_violation(&sent), None, "{sent:#}");
        assert!(sent.get("$schema").is_none(), "Claude Code accepts only draft-07 or no $schema");
        assert!(sent["description"].as_str().unwrap_or("").contains("anyOf"), "the dropped rule is described");
        let status = &sent["properties"]["status"];
        assert!(status.get("pattern").is_none() && status["description"].as_str().unwrap_or("").contains("(?i:"));
        assert_eq!(sent["properties"]["pattern"]["pattern"], "^[a-z]+$", "an ECMA pattern stays");
        assert_eq!(tool_input(&json!({"properties": {}}))["type"], "object");
        assert!(openai_strict(&original).is_some_and(|s| s.get("$schema").is_none()));
        assert!(anthropic(&original).get("$schema").is_none());
    }

    #[test]
    fn workflow_schemas_become_strict() {
        for original in [finder(), implement_like(), json!({"type": "object", "required": ["items"]})] {
            let strict = openai_strict(&original).expect("object root");
            assert_eq!(openai_strict_violation(&strict), None, "{strict:#}");
            assert_eq!(openai_strict_violation(&openai_strict(&strict).expect("again")), None);
        }
        assert!(openai_strict_violation(&finder()).is_some(), "the original is not strict");
        assert!(openai_strict(&json!({"type": "array"})).is_none());
        let strict = openai_strict(&finder()).expect("object");
        let item = &strict["properties"]["items"]["items"];
        assert_eq!(item["required"], json!(["id", "title", "description", "location", "evidence", "severity"]));
        assert!(accepts_null(&item["properties"]["severity"]) && !accepts_null(&item["properties"]["id"]));
        assert!(item["properties"]["id"]["description"].as_str().unwrap_or("").contains("minLength: 1"));
        assert_eq!(item["properties"]["severity"]["anyOf"][0]["type"], "string", "the enum's type is inferred");
    }

    #[test]
    fn nulls_for_optional_properties_are_dropped_before_validation() {
        let original = finder();
        let answer = json!({"angle": "a", "roundNotes": null, "items": [
            {"id": "x", "title": "t", "location": "a.rs:1", "description": null, "evidence": null, "severity": null},
            {"id": "y", "title": "u", "location": "b.rs:2", "description": "d", "evidence": null, "severity": "high"}
        ]});
        let strict = openai_strict(&original).expect("object");
        assert_eq!(validate(&strict, &answer), Ok(()), "the model's answer fits the strict schema");
        assert!(validate(&original, &answer).is_err(), "but not the original");
        let fixed = drop_optional_nulls(&original, answer);
        assert_eq!(validate(&original, &fixed), Ok(()));
        assert_eq!(fixed["items"][0], json!({"id": "x", "title": "t", "location": "a.rs:1"}));
        assert_eq!(fixed["items"][1]["severity"], "high");
        // A required property keeps its null (the engine then reports it).
        let kept = drop_optional_nulls(&original, json!({"angle": null, "items": []}));
        assert_eq!(kept, json!({"angle": null, "items": []}));
        // Nested through type lists and constraint-only anyOf.
        let doc =
            json!({"status": "done", "verdict": null, "issues": [{"severity": null, "text": "t"}], "total": null});
        let fixed = drop_optional_nulls(&implement_like(), doc);
        assert_eq!(fixed, json!({"status": "done", "issues": [{"text": "t"}]}));
        assert_eq!(validate(&implement_like(), &fixed), Ok(()));
    }

    /// Every keyword used anywhere in a schema (property names excluded).
    pub(crate) fn keys_anywhere(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if k != "properties" {
                        out.push(k.clone());
                    }
                    keys_anywhere(x, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| keys_anywhere(x, out)),
            _ => {}
        }
    }

    #[test]
    fn anthropic_loses_the_keywords_it_rejects_but_keeps_required() {
        for original in [finder(), implement_like()] {
            let sent = anthropic(&original);
            let mut keys = Vec::new();
            keys_anywhere(&sent, &mut keys);
            for k in ["minLength", "maxLength", "minimum", "maximum", "pattern", "maxItems", "oneOf", "uniqueItems"] {
                assert!(!keys.contains(&k.to_string()), "{k} was sent: {sent:#}");
            }
            assert!(!sent.to_string().contains("\"type\":["), "type lists become anyOf: {sent}");
        }
        let sent = anthropic(&finder());
        assert_eq!(sent["required"], json!(["angle", "items"]));
        assert_eq!(sent["additionalProperties"], false);
        assert_eq!(sent["properties"]["items"]["items"]["additionalProperties"], false);
        let sent = anthropic(&implement_like());
        let tags = &sent["properties"]["tags"];
        assert_eq!(tags["items"]["format"], "email", "a supported format stays");
        assert!(tags.get("minItems").is_none() && tags["description"].as_str().unwrap_or("").contains("minItems: 2"));
        assert!(sent["properties"]["status"]["description"].as_str().unwrap_or("").contains("pattern"));
        // Whatever validates against the sent schema's required fields still meets the original.
        let doc = json!({"status": "done", "issues": "none"});
        assert_eq!(validate(&implement_like(), &doc), Ok(()));
    }
}
