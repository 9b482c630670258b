//! The Anthropic Messages API (`POST /v1/messages`, streaming or not), as Claude Code uses it.
//!
//! Tool steps become `tool_use` blocks of Claude Code's own tools (`Bash`, `Write`, `Edit`);
//! an answer becomes a call of the `StructuredOutput` tool when the request offers it (Claude
//! Code injects it for `--json-schema`), else text.

use crate::http;
use crate::script::Step;
use serde_json::{Value, json};
use std::net::TcpStream;

/// The user's text in a Messages request: every text of every user turn, tool results
/// excluded.
pub fn brief(body: &Value) -> String {
    let mut out = String::new();
    for m in body.get("messages").and_then(Value::as_array).into_iter().flatten() {
        if m.get("role").and_then(Value::as_str) != Some("user") {
            continue;
        }
        match m.get("content") {
            Some(Value::String(s)) => out.push_str(s),
            Some(Value::Array(blocks)) => {
                for b in blocks {
                    if b.get("type").and_then(Value::as_str) == Some("text") {
                        out.push_str(b.get("text").and_then(Value::as_str).unwrap_or(""));
                        out.push('\n');
                    }
                }
            }
            _ => {}
        }
        out.push('\n');
    }
    out
}

/// How many `tool_result` blocks the conversation holds.
pub fn tool_results(body: &Value) -> usize {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        .count()
}

/// The names of the tools the request offers.
pub fn tools(body: &Value) -> Vec<String> {
    body.get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// The content block a step answers with, and the stop reason.
fn block(step: &Step, offered: &[String], n: usize) -> (Value, &'static str) {
    let tool = |name: &str, input: Value| {
        (json!({"type": "tool_use", "id": format!("toolu_{n:04}"), "name": name, "input": input}), "tool_use")
    };
    match step {
        Step::Bash(cmd) => tool("Bash", json!({"command": cmd, "description": "run a command"})),
        Step::Write { path, content } => tool("Write", json!({"file_path": path, "content": content})),
        Step::Edit { path, old, new } => {
            tool("Edit", json!({"file_path": path, "old_string": old, "new_string": new, "replace_all": false}))
        }
        Step::Subagent(prompt) => tool(
            "Agent",
            json!({"description": "scripted subagent", "prompt": prompt, "subagent_type": "general-purpose"}),
        ),
        Step::Answer(doc) if offered.iter().any(|t| t == "StructuredOutput") => tool("StructuredOutput", doc.clone()),
        Step::Answer(doc) => (json!({"type": "text", "text": doc.to_string()}), "end_turn"),
        Step::Text(t) => (json!({"type": "text", "text": t}), "end_turn"),
        Step::Mcp { server, tool: t, input } => tool(&crate::hosted::offered_name(offered, server, t), input.clone()),
        Step::Error { .. } | Step::Hang | Step::Cut => (json!({"type": "text", "text": ""}), "end_turn"),
    }
}

/// Answers a Messages request with `step` (`cut`: stop the stream half-way).
pub fn answer(stream: &mut TcpStream, body: &Value, step: &Step, usage: (u64, u64), cut: bool) {
    let offered = tools(body);
    let (content, stop) = block(step, &offered, tool_results(body));
    let model = body.get("model").and_then(Value::as_str).unwrap_or("scripted");
    let id = format!("msg_{:04}", tool_results(body));
    let usage_in = json!({"input_tokens": usage.0, "output_tokens": 1,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    if body.get("stream").and_then(Value::as_bool) != Some(true) {
        let msg = json!({"id": id, "type": "message", "role": "assistant", "model": model,
            "content": [content], "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": usage.0, "output_tokens": usage.1}});
        return http::respond(stream, 200, "application/json", &msg.to_string());
    }
    if !http::start_sse(stream) {
        return;
    }
    let start = json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage_in}});
    http::event(stream, Some("message_start"), &start);
    let (empty, delta) = match content.get("type").and_then(Value::as_str) {
        Some("tool_use") => {
            let mut e = content.clone();
            e["input"] = json!({});
            let partial = content.get("input").map(Value::to_string).unwrap_or_default();
            (e, json!({"type": "input_json_delta", "partial_json": partial}))
        }
        _ => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": content.get("text").and_then(Value::as_str).unwrap_or("")}),
        ),
    };
    http::event(
        stream,
        Some("content_block_start"),
        &json!({"type": "content_block_start", "index": 0, "content_block": empty}),
    );
    if cut {
        let half: String = delta.to_string().chars().take(20).collect();
        let _ = std::io::Write::write_all(stream, format!("event: content_block_delta\ndata: {half}").as_bytes());
        return;
    }
    http::event(
        stream,
        Some("content_block_delta"),
        &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
    );
    http::event(stream, Some("content_block_stop"), &json!({"type": "content_block_stop", "index": 0}));
    http::event(
        stream,
        Some("message_delta"),
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": usage.1}}),
    );
    http::event(stream, Some("message_stop"), &json!({"type": "message_stop"}));
}

/// Why the Anthropic API would refuse the request's tools (a tool `input_schema` must be an
/// object schema without a root `anyOf`/`oneOf`/`allOf`), as a 400 message.
pub fn refusal(body: &Value) -> Option<String> {
    let tools = body.get("tools").and_then(Value::as_array)?;
    tools.iter().enumerate().find_map(|(i, t)| {
        let s = t.get("input_schema")?;
        if s.get("type").and_then(Value::as_str) != Some("object") {
            return Some(format!("tools.{i}.custom.input_schema.type: Input should be 'object'"));
        }
        ["oneOf", "allOf", "anyOf"].iter().any(|k| s.get(*k).is_some()).then(|| {
            format!(
                "tools.{i}.custom.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level"
            )
        })
    })
}

/// An Anthropic error body.
pub fn error_body(kind: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_brief_and_tool_results() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "you are a finder"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}
        ], "tools": [{"name": "Bash"}, {"name": "StructuredOutput"}]});
        assert!(brief(&body).contains("you are a finder"));
        assert_eq!(tool_results(&body), 1);
        let (b, stop) = block(&Step::Answer(json!({"a": 1})), &tools(&body), 1);
        assert_eq!(
            (b["name"].as_str(), b["input"].clone(), stop),
            (Some("StructuredOutput"), json!({"a": 1}), "tool_use")
        );
        let (b, stop) = block(&Step::Subagent("SUB: look".into()), &[], 2);
        assert_eq!(
            (b["name"].as_str(), b["input"]["prompt"].as_str(), stop),
            (Some("Agent"), Some("SUB: look"), "tool_use")
        );
    }
}
