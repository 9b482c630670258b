//! The OpenAI Responses API (`POST /v1/responses`, streaming, as Codex uses it) and Chat
//! Completions (`POST /v1/chat/completions`, streaming or not).
//!
//! Tool steps become calls of the tools the request offers: `exec_command` (`{"cmd"}`),
//! `shell_command` (`{"command": "…"}`) or `shell` (`{"command": [argv]}`) for a command;
//! `apply_patch` (a custom tool or a function) for writes and edits. In Chat Completions,
//! `work`'s own tools (`run_command`, `write_file`, `edit_file`) when the request offers them;
//! [`Step::Tools`] becomes several calls in one answer in both APIs.

use crate::http;
use crate::script::{Step, apply_patch_text};
use serde_json::{Value, json};
use std::net::TcpStream;

fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}

/// The user's text in a Responses request (`input` messages of role `user`).
pub fn responses_brief(body: &Value) -> String {
    let items = body.get("input").and_then(Value::as_array).into_iter().flatten();
    items
        .filter(|i| i.get("role").and_then(Value::as_str) == Some("user"))
        .map(|i| text_of(i.get("content")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// How many tool outputs the Responses input holds.
pub fn responses_tool_results(body: &Value) -> usize {
    let items = body.get("input").and_then(Value::as_array).into_iter().flatten();
    items
        .filter(|i| {
            matches!(
                i.get("type").and_then(Value::as_str),
                Some("function_call_output" | "custom_tool_call_output" | "local_shell_call_output")
            )
        })
        .count()
}

/// `(name, type)` of every tool offered.
pub fn offered(body: &Value) -> Vec<(String, String)> {
    body.get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| {
            let kind = t.get("type").and_then(Value::as_str).unwrap_or("function").to_string();
            let name = t
                .get("name")
                .or_else(|| t.pointer("/function/name"))
                .and_then(Value::as_str)
                .unwrap_or(&kind)
                .to_string();
            (name, kind)
        })
        .collect()
}

fn has(tools: &[(String, String)], name: &str) -> Option<String> {
    tools.iter().find(|(n, _)| n == name).map(|(_, k)| k.clone())
}

/// The Responses output item for a step.
fn item(step: &Step, tools: &[(String, String)], n: usize) -> Value {
    let call_id = format!("call_{n:04}");
    let function = |name: &str, args: Value| {
        json!({"type": "function_call", "id": format!("fc_{n:04}"), "call_id": call_id, "name": name,
            "arguments": args.to_string(), "status": "completed"})
    };
    let message = |text: String| {
        json!({"type": "message", "id": format!("msg_{n:04}"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]})
    };
    let bash = |cmd: &str| {
        if has(tools, "exec_command").is_some() {
            function("exec_command", json!({"cmd": cmd}))
        } else if has(tools, "shell_command").is_some() {
            function("shell_command", json!({"command": cmd}))
        } else {
            function("shell", json!({"command": ["bash", "-lc", cmd]}))
        }
    };
    match step {
        Step::Bash(cmd) => bash(cmd),
        Step::Write { .. } | Step::Edit { .. } => {
            let patch = apply_patch_text(step, |p| std::fs::read_to_string(p).ok()).unwrap_or_default();
            match has(tools, "apply_patch").as_deref() {
                Some("custom") => json!({"type": "custom_tool_call", "id": format!("ctc_{n:04}"), "call_id": call_id,
                    "name": "apply_patch", "input": patch, "status": "completed"}),
                Some(_) => function("apply_patch", json!({"input": patch})),
                None => bash(&format!("apply_patch <<'PATCH'\n{patch}PATCH")),
            }
        }
        Step::Answer(doc) => message(doc.to_string()),
        Step::Text(t) | Step::Subagent(t) => message(t.clone()),
        Step::Mcp { server, tool, input } => {
            let names: Vec<String> = tools.iter().map(|(n, _)| n.clone()).collect();
            function(&crate::hosted::offered_name(&names, server, tool), input.clone())
        }
        Step::Tools(calls) => match calls.first() {
            Some(c) => function(&c.name, c.input.clone()),
            None => message(String::new()),
        },
        Step::Error { .. } | Step::Hang | Step::Cut => message(String::new()),
    }
}

/// Answers a Responses request with `step` as an SSE stream (`cut`: stop after the start).
pub fn answer_responses(stream: &mut TcpStream, body: &Value, step: &Step, usage: (u64, u64), cut: bool) {
    let n = responses_tool_results(body);
    let id = format!("resp_{n:04}");
    let items: Vec<Value> = match step {
        Step::Mcp { server, tool, input } => vec![crate::hosted::responses_call(body, server, tool, input, n)],
        Step::Tools(calls) => calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({"type": "function_call", "id": format!("fc_{n:04}_{i}"), "call_id": format!("call_{n:04}_{i}"),
                    "name": c.name, "arguments": c.input.to_string(), "status": "completed"})
            })
            .collect(),
        _ => vec![item(step, &offered(body), n)],
    };
    if !http::start_sse(stream) {
        return;
    }
    http::event(stream, Some("response.created"), &json!({"type": "response.created", "response": {"id": id}}));
    if cut {
        return;
    }
    for (i, it) in items.iter().enumerate() {
        http::event(
            stream,
            Some("response.output_item.added"),
            &json!({"type": "response.output_item.added", "output_index": i, "item": it}),
        );
        http::event(
            stream,
            Some("response.output_item.done"),
            &json!({"type": "response.output_item.done", "output_index": i, "item": it}),
        );
    }
    let usage = json!({"input_tokens": usage.0, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage.1, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.0 + usage.1});
    http::event(
        stream,
        Some("response.completed"),
        &json!({"type": "response.completed", "response": {"id": id, "status": "completed", "usage": usage}}),
    );
}

/// The user's text in a Chat Completions request.
pub fn chat_brief(body: &Value) -> String {
    let msgs = body.get("messages").and_then(Value::as_array).into_iter().flatten();
    msgs.filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(|m| text_of(m.get("content")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// How many tool messages the chat holds.
pub fn chat_tool_results(body: &Value) -> usize {
    let msgs = body.get("messages").and_then(Value::as_array).into_iter().flatten();
    msgs.filter(|m| m.get("role").and_then(Value::as_str) == Some("tool")).count()
}

/// How many more tool calls than turns the chat's assistant messages hold (a message with 3
/// `tool_calls` counts 2).
pub fn chat_extra_calls(body: &Value) -> usize {
    let msgs = body.get("messages").and_then(Value::as_array).into_iter().flatten();
    msgs.filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .map(|calls| calls.len().saturating_sub(1))
        .sum()
}

/// The assistant message and finish reason a step answers a Chat Completions request with.
fn chat_message(step: &Step, tools: &[(String, String)], n: usize) -> (Value, &'static str) {
    let calls = |list: Vec<(String, Value)>| {
        let list: Vec<Value> = list
            .into_iter()
            .enumerate()
            .map(|(i, (name, args))| {
                json!({"id": format!("call_{n:04}_{i}"), "type": "function",
                    "function": {"name": name, "arguments": args.to_string()}})
            })
            .collect();
        (json!({"role": "assistant", "content": null, "tool_calls": list}), "tool_calls")
    };
    let engine = |name: &str| has(tools, name).is_some();
    match step {
        Step::Bash(cmd) => {
            let name = if engine("run_command") {
                "run_command".to_string()
            } else {
                tools.first().map_or("shell".to_string(), |(n, _)| n.clone())
            };
            calls(vec![(name, json!({"command": cmd}))])
        }
        Step::Write { path, content } if engine("write_file") => {
            calls(vec![("write_file".into(), json!({"path": path, "content": content}))])
        }
        Step::Edit { path, old, new } if engine("edit_file") => {
            calls(vec![("edit_file".into(), json!({"path": path, "old": old, "new": new}))])
        }
        Step::Tools(list) => calls(list.iter().map(|c| (c.name.clone(), c.input.clone())).collect()),
        Step::Answer(doc) => (json!({"role": "assistant", "content": doc.to_string()}), "stop"),
        Step::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
        _ => (json!({"role": "assistant", "content": ""}), "stop"),
    }
}

/// Answers a Chat Completions request with `step`.
pub fn answer_chat(stream: &mut TcpStream, body: &Value, step: &Step, usage: (u64, u64), cut: bool) {
    let n = chat_tool_results(body);
    let (message, finish) = chat_message(step, &offered(body), n);
    let model = body.get("model").and_then(Value::as_str).unwrap_or("scripted");
    let usage = json!({"prompt_tokens": usage.0, "completion_tokens": usage.1, "total_tokens": usage.0 + usage.1});
    if body.get("stream").and_then(Value::as_bool) != Some(true) {
        let c = json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage});
        return http::respond(stream, 200, "application/json", &c.to_string());
    }
    if !http::start_sse(stream) {
        return;
    }
    let chunk = |delta: Value, finish: Value, usage: Value| {
        json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": usage})
    };
    http::event(stream, None, &chunk(json!({"role": "assistant"}), Value::Null, Value::Null));
    if cut {
        return;
    }
    http::event(stream, None, &chunk(message, json!(finish), Value::Null));
    http::event(stream, None, &chunk(json!({}), Value::Null, usage));
    http::raw_data(stream, "[DONE]");
}

/// Why the Responses API would refuse a strict `text.format` schema (every object closed with
/// `additionalProperties: false` and every property required), as a 400 message.
pub fn refusal(body: &Value) -> Option<String> {
    let f = body.pointer("/text/format")?;
    if f.get("strict").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let name = f.get("name").and_then(Value::as_str).unwrap_or("schema");
    strict_violation(f.get("schema")?, "root", 0)
        .map(|why| format!("Invalid schema for response_format '{name}': In context=({why})"))
}

fn strict_violation(node: &Value, at: &str, depth: u32) -> Option<String> {
    let Value::Object(m) = node else { return None };
    if depth > 64 {
        return None;
    }
    if let Some(Value::Object(props)) = m.get("properties") {
        if m.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Some(format!("'{at}'), 'additionalProperties' is required to be supplied and to be false"));
        }
        let required: Vec<&str> = m
            .get("required")
            .and_then(Value::as_array)
            .map_or(vec![], |r| r.iter().filter_map(Value::as_str).collect());
        if let Some(k) = props.keys().find(|k| !required.contains(&k.as_str())) {
            return Some(format!("'{at}'), 'required' is required to include every key in properties. Missing '{k}'"));
        }
        for (k, v) in props {
            if let Some(e) = strict_violation(v, k, depth + 1) {
                return Some(e);
            }
        }
    }
    for k in ["items", "anyOf", "$defs", "definitions"] {
        match m.get(k) {
            Some(Value::Array(a)) => {
                if let Some(e) = a.iter().find_map(|v| strict_violation(v, at, depth + 1)) {
                    return Some(e);
                }
            }
            Some(Value::Object(o)) if k != "items" => {
                if let Some(e) = o.values().find_map(|v| strict_violation(v, at, depth + 1)) {
                    return Some(e);
                }
            }
            Some(v) => {
                if let Some(e) = strict_violation(v, at, depth + 1) {
                    return Some(e);
                }
            }
            None => {}
        }
    }
    None
}

/// An OpenAI error body.
pub fn error_body(kind: &str, message: &str) -> String {
    json!({"error": {"type": kind, "message": message, "code": null, "param": null}}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_go_to_the_offered_tool() {
        let tools = vec![("exec_command".to_string(), "function".to_string()), ("apply_patch".into(), "custom".into())];
        let it = item(&Step::Bash("ls".into()), &tools, 0);
        assert_eq!((it["name"].as_str(), it["arguments"].as_str()), (Some("exec_command"), Some("{\"cmd\":\"ls\"}")));
        let w = item(&Step::Write { path: "/nonexistent/x".into(), content: "a".into() }, &tools, 1);
        assert_eq!(w["type"], "custom_tool_call");
        assert!(w["input"].as_str().unwrap_or("").contains("*** Add File: /nonexistent/x\n+a\n"));
        let shell = item(&Step::Bash("ls".into()), &[("shell".into(), "function".into())], 2);
        assert_eq!(shell["arguments"], json!({"command": ["bash", "-lc", "ls"]}).to_string());
    }

    #[test]
    fn chat_calls_work_tools_in_parallel() {
        let tools: Vec<(String, String)> = ["read_file", "run_command", "write_file"]
            .iter()
            .map(|n| (n.to_string(), "function".to_string()))
            .collect();
        let (m, finish) = chat_message(&Step::Bash("ls".into()), &tools, 0);
        assert_eq!((m["tool_calls"][0]["function"]["name"].as_str(), finish), (Some("run_command"), "tool_calls"));
        let list = vec![
            crate::ToolCall::new("read_file", json!({"path": "a"})),
            crate::ToolCall::new("search", json!({"pattern": "b"})),
        ];
        let (m, _) = chat_message(&Step::Tools(list), &tools, 2);
        assert_eq!(m["tool_calls"].as_array().map(Vec::len), Some(2));
        let body = json!({"messages": [{"role": "user", "content": "x"}, m,
            {"role": "tool", "tool_call_id": "call_0002_0", "content": "a"},
            {"role": "tool", "tool_call_id": "call_0002_1", "content": "b"}]});
        assert_eq!((chat_tool_results(&body), chat_extra_calls(&body)), (2, 1));
    }

    #[test]
    fn strict_formats_must_be_closed_and_fully_required() {
        let f = |schema: Value| json!({"text": {"format": {"type": "json_schema", "name": "s", "strict": true, "schema": schema}}});
        let open = f(json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}));
        assert!(refusal(&open).is_some_and(|m| m.contains("additionalProperties")));
        let partial = f(json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"]}));
        assert!(refusal(&partial).is_some_and(|m| m.contains("Missing 'b'")));
        let ok = f(
            json!({"type": "object", "additionalProperties": false, "properties": {"a": {"type": "string"}}, "required": ["a"]}),
        );
        assert_eq!(refusal(&ok), None);
    }

    #[test]
    fn reads_brief_and_outputs() {
        let body = json!({"input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "the brief"}]},
            {"type": "function_call", "call_id": "c", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "x"}
        ]});
        assert_eq!(responses_brief(&body), "the brief");
        assert_eq!(responses_tool_results(&body), 1);
    }
}
