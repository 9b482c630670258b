//! Steps for a CLI that hosts MCP servers: the model calls a tool of a configured server
//! ([`crate::Step::Mcp`]) and the CLI runs it through its MCP client and sends the result back
//! in the next request.
//!
//! Each CLI names an MCP tool in its own way (Claude Code `mcp__<server>__<tool>`, Codex
//! `<server>__<tool>` or `mcp__<server>__<tool>` depending on its version, a plugin's server
//! `mcp__plugin_<plugin>_<server>__<tool>`), so the step names the server and the tool and the
//! answer uses whichever offered name is that tool.

use crate::Api;
use serde_json::{Value, json};

/// The name under which the request offers `tool` of MCP server `server`: an exact
/// `mcp__server__tool` or `server__tool`, else the offered name ending in `__tool` that
/// mentions `server`, else `mcp__server__tool` (the CLI then reports an unknown tool, which a
/// test sees in the next request).
pub fn offered_name(offered: &[String], server: &str, tool: &str) -> String {
    let exact = [format!("mcp__{server}__{tool}"), format!("{server}__{tool}")];
    if let Some(n) = exact.iter().find(|n| offered.contains(n)) {
        return n.clone();
    }
    let suffix = format!("__{tool}");
    offered.iter().find(|n| n.ends_with(&suffix) && n.contains(server)).cloned().unwrap_or_else(|| exact[0].clone())
}

/// The Responses output item that calls `tool` of MCP server `server`. Codex offers a
/// server's tools inside a `namespace` tool (`{"type": "namespace", "name": "mcp__work",
/// "tools": [...]}`), and a call of one names the namespace and the tool; a flat offer is
/// called by its [`offered_name`].
pub fn responses_call(body: &Value, server: &str, tool: &str, input: &Value, n: usize) -> Value {
    let tools = body.get("tools").and_then(Value::as_array).cloned().unwrap_or_default();
    let name_of = |t: &Value| t.get("name").and_then(Value::as_str).unwrap_or("").to_string();
    let namespace = tools.iter().find(|t| {
        t.get("type").and_then(Value::as_str) == Some("namespace")
            && name_of(t).contains(server)
            && t.get("tools").and_then(Value::as_array).is_some_and(|inner| inner.iter().any(|x| name_of(x) == tool))
    });
    let mut call = json!({"type": "function_call", "id": format!("fc_{n:04}"), "call_id": format!("call_{n:04}"),
        "arguments": input.to_string(), "status": "completed"});
    match namespace {
        Some(ns) => {
            call["namespace"] = json!(name_of(ns));
            call["name"] = json!(tool);
        }
        None => {
            let flat: Vec<String> = tools.iter().map(name_of).collect();
            call["name"] = json!(offered_name(&flat, server, tool));
        }
    }
    call
}

/// The text of every tool result in a request, in conversation order: Messages `tool_result`
/// blocks; Responses `function_call_output` / `custom_tool_call_output` items; Chat `tool`
/// messages. A result given as content blocks is their texts joined by newlines.
pub fn tool_outputs(api: Api, body: &Value) -> Vec<String> {
    let list = |key: &str| body.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    match api {
        Api::Messages => list("messages")
            .iter()
            .filter_map(|m| m.get("content").and_then(Value::as_array))
            .flatten()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            .map(|b| text_of(b.get("content")))
            .collect(),
        Api::Responses => list("input")
            .iter()
            .filter(|i| {
                matches!(
                    i.get("type").and_then(Value::as_str),
                    Some("function_call_output" | "custom_tool_call_output")
                )
            })
            .map(|i| text_of(i.get("output")))
            .collect(),
        Api::Chat => list("messages")
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
            .map(|m| text_of(m.get("content")))
            .collect(),
        Api::Other => Vec::new(),
    }
}

/// A string, or the texts of an array of content blocks (`{"type": "text", "text": …}`,
/// `input_text`, `output_text`) joined by newlines.
fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        Some(Value::Object(o)) => o.get("content").map(|c| text_of(Some(c))).unwrap_or_default(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offered_name_is_found_whatever_the_cli_calls_it() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(offered_name(&names(&["Bash", "mcp__work__exhaust"]), "work", "exhaust"), "mcp__work__exhaust");
        assert_eq!(offered_name(&names(&["shell", "work__exhaust"]), "work", "exhaust"), "work__exhaust");
        assert_eq!(
            offered_name(
                &names(&["mcp__plugin_work_work__exhaust", "mcp__plugin_work_work__until"]),
                "work",
                "exhaust"
            ),
            "mcp__plugin_work_work__exhaust"
        );
        assert_eq!(offered_name(&names(&["Bash"]), "work", "exhaust"), "mcp__work__exhaust");
    }

    #[test]
    fn tool_outputs_read_every_wire_format() {
        let messages = json!({"messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                "content": [{"type": "text", "text": "{\"a\": 1}"}]}]}]});
        assert_eq!(tool_outputs(Api::Messages, &messages), ["{\"a\": 1}"]);
        let responses = json!({"input": [{"type": "function_call_output", "call_id": "c", "output": "out"}]});
        assert_eq!(tool_outputs(Api::Responses, &responses), ["out"]);
        let chat = json!({"messages": [{"role": "tool", "content": "x"}]});
        assert_eq!(tool_outputs(Api::Chat, &chat), ["x"]);
    }
}
