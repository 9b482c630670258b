//! The Anthropic Messages API (`POST /v1/messages`, streaming or not), as Claude Code uses it.
//!
//! Tool steps become `tool_use` blocks of Claude Code's own tools (`Bash`, `Write`, `Edit`), or
//! of `work`'s own (`run_command`, `write_file`, `edit_file`) when the request offers those;
//! [`Step::Tools`] becomes one `tool_use` block per call. An answer becomes a call of the
//! `StructuredOutput` tool when the request offers it (Claude Code injects it for
//! `--json-schema`), of `work_result` when offered (the `anthropic:` backend's tool mode), else
//! text.

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

/// How many more tool calls than turns the conversation's assistant messages hold (a message
/// with 3 `tool_use` blocks counts 2).
pub fn extra_calls(body: &Value) -> usize {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .map(|blocks| blocks.iter().filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use")).count())
        .map(|n| n.saturating_sub(1))
        .sum()
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

/// The content blocks a step answers with, and the stop reason.
fn blocks(step: &Step, offered: &[String], n: usize) -> (Vec<Value>, &'static str) {
    let tool = |name: &str, input: Value| {
        (vec![json!({"type": "tool_use", "id": format!("toolu_{n:04}"), "name": name, "input": input})], "tool_use")
    };
    let engine = |name: &str| offered.iter().any(|t| t == name);
    match step {
        Step::Bash(cmd) if engine("run_command") => tool("run_command", json!({"command": cmd})),
        Step::Bash(cmd) => tool("Bash", json!({"command": cmd, "description": "run a command"})),
        Step::Write { path, content } if engine("write_file") => {
            tool("write_file", json!({"path": path, "content": content}))
        }
        Step::Write { path, content } => tool("Write", json!({"file_path": path, "content": content})),
        Step::Edit { path, old, new } if engine("edit_file") => {
            tool("edit_file", json!({"path": path, "old": old, "new": new}))
        }
        Step::Edit { path, old, new } => {
            tool("Edit", json!({"file_path": path, "old_string": old, "new_string": new, "replace_all": false}))
        }
        Step::Subagent(prompt) => tool(
            "Agent",
            json!({"description": "scripted subagent", "prompt": prompt, "subagent_type": "general-purpose"}),
        ),
        Step::Tools(calls) => (
            calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    json!({"type": "tool_use", "id": format!("toolu_{n:04}_{i}"), "name": c.name, "input": c.input})
                })
                .collect(),
            "tool_use",
        ),
        Step::Answer(doc) if engine("StructuredOutput") => tool("StructuredOutput", doc.clone()),
        Step::Answer(doc) if engine("work_result") => tool("work_result", doc.clone()),
        Step::Answer(doc) => (vec![json!({"type": "text", "text": doc.to_string()})], "end_turn"),
        Step::Text(t) => (vec![json!({"type": "text", "text": t})], "end_turn"),
        Step::Mcp { server, tool: t, input } => tool(&crate::hosted::offered_name(offered, server, t), input.clone()),
        Step::Error { .. } | Step::Hang | Step::Cut => (vec![json!({"type": "text", "text": ""})], "end_turn"),
    }
}

/// Answers a Messages request with `step` (`cut`: stop the stream half-way).
pub fn answer(stream: &mut TcpStream, body: &Value, step: &Step, usage: (u64, u64), cut: bool) {
    let offered = tools(body);
    let n = tool_results(body);
    let (content, stop) = blocks(step, &offered, n);
    let model = body.get("model").and_then(Value::as_str).unwrap_or("scripted");
    let id = format!("msg_{n:04}");
    let usage_in = json!({"input_tokens": usage.0, "output_tokens": 1,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    if body.get("stream").and_then(Value::as_bool) != Some(true) {
        let msg = json!({"id": id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": usage.0, "output_tokens": usage.1}});
        return http::respond(stream, 200, "application/json", &msg.to_string());
    }
    if !http::start_sse(stream) {
        return;
    }
    let start = json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage_in}});
    http::event(stream, Some("message_start"), &start);
    for (index, block) in content.iter().enumerate() {
        let (empty, delta) = match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                let mut e = block.clone();
                e["input"] = json!({});
                let partial = block.get("input").map(Value::to_string).unwrap_or_default();
                (e, json!({"type": "input_json_delta", "partial_json": partial}))
            }
            _ => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block.get("text").and_then(Value::as_str).unwrap_or("")}),
            ),
        };
        http::event(
            stream,
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": empty}),
        );
        if cut {
            let half: String = delta.to_string().chars().take(20).collect();
            let _ = std::io::Write::write_all(stream, format!("event: content_block_delta\ndata: {half}").as_bytes());
            return;
        }
        http::event(
            stream,
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
        http::event(stream, Some("content_block_stop"), &json!({"type": "content_block_stop", "index": index}));
    }
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
        let (b, stop) = blocks(&Step::Answer(json!({"a": 1})), &tools(&body), 1);
        assert_eq!(
            (b[0]["name"].as_str(), b[0]["input"].clone(), stop),
            (Some("StructuredOutput"), json!({"a": 1}), "tool_use")
        );
        let (b, stop) = blocks(&Step::Subagent("SUB: look".into()), &[], 2);
        assert_eq!(
            (b[0]["name"].as_str(), b[0]["input"]["prompt"].as_str(), stop),
            (Some("Agent"), Some("SUB: look"), "tool_use")
        );
        assert_eq!(extra_calls(&body), 0);
    }

    #[test]
    fn engine_tools_and_parallel_calls() {
        let offered: Vec<String> = ["read_file", "run_command", "write_file", "edit_file", "work_result"]
            .into_iter()
            .map(String::from)
            .collect();
        let (b, _) = blocks(&Step::Bash("ls".into()), &offered, 0);
        assert_eq!((b[0]["name"].as_str(), b[0]["input"].clone()), (Some("run_command"), json!({"command": "ls"})));
        let (b, _) = blocks(&Step::Edit { path: "a".into(), old: "x".into(), new: "y".into() }, &offered, 0);
        assert_eq!(b[0]["input"], json!({"path": "a", "old": "x", "new": "y"}));
        let calls = vec![
            crate::ToolCall::new("read_file", json!({"path": "a"})),
            crate::ToolCall::new("search", json!({"pattern": "x"})),
        ];
        let (b, stop) = blocks(&Step::Tools(calls), &offered, 3);
        assert_eq!((b.len(), stop), (2, "tool_use"));
        assert_ne!(b[0]["id"], b[1]["id"]);
        let (b, _) = blocks(&Step::Answer(json!({"a": 1})), &offered, 0);
        assert_eq!(b[0]["name"], "work_result");
        let body = json!({"messages": [
            {"role": "user", "content": "brief"},
            {"role": "assistant", "content": b_two()},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}, {"type": "tool_result", "tool_use_id": "b"}]}
        ]});
        assert_eq!((tool_results(&body), extra_calls(&body)), (2, 1), "two results of one turn are one step");
    }

    fn b_two() -> Value {
        json!([{"type": "tool_use", "id": "a", "name": "read_file", "input": {}},
               {"type": "tool_use", "id": "b", "name": "search", "input": {}}])
    }
}
