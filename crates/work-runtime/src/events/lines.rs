//! The event and record lines written straight to bytes: no JSON tree is built for a line
//! only to be written out and dropped (at a wave cap of 256 that was most of the dispatcher's
//! CPU while a wave's answers arrived together). The bytes are those of the tree the line
//! describes, written compactly: the tests check them against it.

use super::EventLog;
use crate::budget::Usage;
use crate::dispatch::DispatchRequest;
use serde_json::Value;
use std::io::Write;

/// Writes `s` as a JSON string (quoted and escaped).
pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Writes `,"key":` (the comma left out at the start of an object).
fn put_key(out: &mut Vec<u8>, key: &str) {
    if !matches!(out.last(), Some(b'{')) {
        out.push(b',');
    }
    put_str(out, key);
    out.push(b':');
}

/// The keys every event starts with; a field of the same name is not written.
const HEAD_KEYS: [&str; 4] = ["ts", "run_id", "seq", "kind"];

/// One event line (with its newline): `ts`, `run_id`, `seq`, `kind`, then the fields of
/// `fields` (an object; anything else adds none) other than those four.
pub(crate) fn write_event(out: &mut Vec<u8>, ts: &str, run_id: &str, seq: u64, kind: &str, fields: &Value) {
    out.push(b'{');
    put_key(out, "ts");
    put_str(out, ts);
    put_key(out, "run_id");
    put_str(out, run_id);
    put_key(out, "seq");
    let _ = write!(out, "{seq}");
    put_key(out, "kind");
    put_str(out, kind);
    if let Value::Object(m) = fields {
        for (k, v) in m.iter().filter(|(k, _)| !HEAD_KEYS.contains(&k.as_str())) {
            put_key(out, k);
            let _ = serde_json::to_writer(&mut *out, v);
        }
    }
    out.extend_from_slice(b"}\n");
}

/// How one attempt ended, for its record.
#[derive(Debug, Clone, Copy)]
pub struct AttemptResponse<'a> {
    /// `ok`, `malformed` or `failed`.
    pub outcome: &'a str,
    /// Why it was not ok.
    pub reason: Option<&'a str>,
    /// What the agent printed or answered.
    pub raw: &'a str,
    /// What the attempt cost.
    pub usage: &'a Usage,
    /// The validated document, when ok.
    pub document: Option<&'a Value>,
}

impl EventLog {
    /// The record line of one attempt (without its newline), its strings redacted and its
    /// large request parts stored as blobs: the bytes [`EventLog::record_dispatch`] writes for
    /// `{"request": request, "response": response}`.
    pub(crate) fn attempt_line(&self, request: &DispatchRequest, response: &AttemptResponse<'_>) -> Vec<u8> {
        let r = &self.redactor;
        let mut out = Vec::with_capacity(1024 + request.prompt.len() + response.raw.len());
        let text = |out: &mut Vec<u8>, key: &str, s: &str| {
            put_key(out, key);
            put_str(out, &r.redact(s));
        };
        out.push(b'{');
        put_key(&mut out, "dispatch_id");
        put_str(&mut out, &r.redact_name(&request.dispatch_id));
        put_key(&mut out, "attempt");
        let _ = write!(out, "{}", request.attempt);
        put_key(&mut out, "request");
        out.push(b'{');
        text(&mut out, "protocol", &request.protocol);
        text(&mut out, "run_id", &request.run_id);
        text(&mut out, "dispatch_id", &request.dispatch_id);
        put_key(&mut out, "attempt");
        let _ = write!(out, "{}", request.attempt);
        for (key, s) in [
            ("workflow", &request.workflow),
            ("role", &request.role),
            ("model", &request.model),
            ("effort", &request.effort),
        ] {
            text(&mut out, key, s);
        }
        text(&mut out, "access", request.access.as_str());
        text(&mut out, "cwd", &request.cwd);
        text(&mut out, "prompt", &request.prompt);
        put_key(&mut out, "schema");
        self.put_part(&mut out, request.schema.as_ref().unwrap_or(&Value::Null));
        put_key(&mut out, "context");
        self.put_context(&mut out, &request.context);
        out.extend_from_slice(b"},\"response\":{");
        text(&mut out, "outcome", response.outcome);
        put_key(&mut out, "reason");
        match response.reason {
            Some(reason) => put_str(&mut out, &r.redact(reason)),
            None => out.extend_from_slice(b"null"),
        }
        text(&mut out, "raw", response.raw);
        put_key(&mut out, "usage");
        let _ = serde_json::to_writer(&mut out, response.usage);
        put_key(&mut out, "document");
        let _ = serde_json::to_writer(&mut out, &response.document.map(|d| r.serializable(d)));
        out.extend_from_slice(b"}}");
        out
    }

    /// A context: each field of an object on its own (what several dispatches share, a
    /// round's `seen` list, is stored once even when a small field differs), else whole.
    fn put_context(&self, out: &mut Vec<u8>, context: &Value) {
        let Value::Object(fields) = context else { return self.put_part(out, context) };
        let redacted;
        let fields = if fields.keys().any(|k| matches!(self.redactor.redact(k), std::borrow::Cow::Owned(_))) {
            // A key that holds a secret (rare): the redacted copy, as the tree gives it.
            redacted = self.redactor.redact_json(context);
            redacted.as_object().unwrap_or(fields)
        } else {
            fields
        };
        out.push(b'{');
        for (k, v) in fields {
            put_key(out, &self.redactor.redact(k));
            self.put_part(out, v);
        }
        out.push(b'}');
    }

    /// A request part, redacted: inline, or a reference to its blob when it is large.
    fn put_part(&self, out: &mut Vec<u8>, v: &Value) {
        let at = out.len();
        let _ = serde_json::to_writer(&mut *out, &self.redactor.serializable(v));
        if out.len() - at >= super::BLOB_MIN
            && let Some(rel) = self.store_blob_text(&out[at..])
        {
            out.truncate(at);
            out.extend_from_slice(b"{\"blob\":");
            put_str(out, &rel);
            out.push(b'}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::Access;
    use crate::redact::Redactor;
    use serde_json::{Map, json};
    use std::sync::Arc;

    const SECRET: &str = "sk-canary-0123456789";

    fn log(dir: &std::path::Path, redactor: Redactor) -> EventLog {
        let clock = crate::clock::FakeClock::new(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH, 1);
        EventLog::open(dir, "r1", Arc::new(clock), redactor).expect("open")
    }

    fn request(context: Value) -> DispatchRequest {
        DispatchRequest {
            protocol: crate::dispatch::PROTOCOL.into(),
            run_id: "r1".into(),
            dispatch_id: "d0001-finder-a".into(),
            attempt: 2,
            workflow: "exhaust".into(),
            role: "finder".into(),
            model: "m".into(),
            effort: "high".into(),
            access: Access::ReadOnly,
            cwd: "/repo".into(),
            prompt: format!("find \"things\"\n\twith ünïcode \u{1} and {SECRET}"),
            schema: Some(json!({"type": "object", "description": "x".repeat(2000)})),
            context,
        }
    }

    #[test]
    fn an_event_line_is_the_object_it_describes() {
        let fields = json!({"dispatch_id": "d1", "seq": 99, "kind": "x", "usage": {"cost_usd": 0.25},
                            "reason": "a \"quoted\"\nline é", "none": null});
        let mut out = Vec::new();
        write_event(&mut out, "1970-01-01T00:00:00Z", "r1", 7, "dispatch.end", &fields);
        let mut want = Map::new();
        want.insert("ts".into(), json!("1970-01-01T00:00:00Z"));
        want.insert("run_id".into(), json!("r1"));
        want.insert("seq".into(), json!(7));
        want.insert("kind".into(), json!("dispatch.end"));
        for (k, v) in fields.as_object().expect("object") {
            want.entry(k.clone()).or_insert(v.clone());
        }
        assert_eq!(String::from_utf8(out).expect("utf-8"), format!("{}\n", Value::Object(want)));
        let mut out = Vec::new();
        write_event(&mut out, "t", "r", 1, "k", &Value::Null);
        assert_eq!(out, b"{\"ts\":\"t\",\"run_id\":\"r\",\"seq\":1,\"kind\":\"k\"}\n", "no fields, none written");
    }

    #[test]
    fn an_attempt_line_is_the_record_of_the_request_and_response() {
        let mut redactor = Redactor::default();
        redactor.add(SECRET);
        let seen: Vec<Value> = (0..60).map(|i| json!({"id": format!("item-{i}"), "note": SECRET})).collect();
        let contexts = [
            json!({"angle": format!("a {SECRET}"), "seen": seen}),
            json!({"angle": "a", SECRET: 1}),
            json!("a context that is a string"),
            Value::Null,
        ];
        let usage = Usage { input_tokens: 10, output_tokens: 5, cost_usd: 0.1 + 0.2 };
        let doc = json!({"items": [{"id": SECRET}]});
        for (i, context) in contexts.into_iter().enumerate() {
            for redactor in [Redactor::default(), redactor.clone()] {
                let (direct, tree) = (tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir"));
                let (direct_log, tree_log) = (log(direct.path(), redactor.clone()), log(tree.path(), redactor));
                let req = request(context.clone());
                let ok = i % 2 == 0;
                let response = AttemptResponse {
                    outcome: if ok { "ok" } else { "malformed" },
                    reason: (!ok).then_some("schema: \"items\" is required"),
                    raw: "{\"items\": []} and more",
                    usage: &usage,
                    document: ok.then_some(&doc),
                };
                let at = direct_log.record_attempt(&req, &response).expect("recorded");
                let tree_at = tree_log
                    .record_dispatch(
                        &req.dispatch_id,
                        req.attempt,
                        json!({"request": req.clone().into_value(),
                               "response": {"outcome": response.outcome, "reason": response.reason,
                                            "raw": response.raw, "usage": usage, "document": response.document}}),
                    )
                    .expect("recorded");
                assert_eq!(at, tree_at);
                let read = |d: &std::path::Path| std::fs::read_to_string(d.join(super::super::RECORDS_FILE));
                let (line, want) = (read(direct.path()).expect("read"), read(tree.path()).expect("read"));
                assert_eq!(line, want, "context {i}");
                let blobs = |d: &std::path::Path| {
                    let mut v: Vec<(String, String)> = std::fs::read_dir(d.join("blobs"))
                        .map(|r| r.flatten().collect::<Vec<_>>())
                        .unwrap_or_default()
                        .into_iter()
                        .map(|e| {
                            let text = std::fs::read_to_string(e.path()).expect("read");
                            (e.file_name().to_string_lossy().into_owned(), text)
                        })
                        .collect();
                    v.sort();
                    v
                };
                assert_eq!(blobs(direct.path()), blobs(tree.path()), "context {i}");
                assert!(!blobs(direct.path()).is_empty(), "the schema is large: a blob");
            }
        }
    }
}
