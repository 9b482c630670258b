//! The tool loop of both HTTP backends against the scripted loopback server.

use crate::anthropic::AnthropicAgent;
use crate::openai::OpenAiAgent;
use crate::testserver::{Reply, TestServer};
use serde_json::{Value, json};
use std::time::Duration;
use work_config::AgentDef;
use work_runtime::dispatch::{Access, Agent, AgentError, AgentReply, DispatchRequest, InvokeOptions};

fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(d.path().join("src")).expect("mkdir");
    std::fs::write(d.path().join("src/jobs.rs"), "fn a() { transition(1); }\nfn e() { rollback() }\n").expect("write");
    d
}

fn request(root: &std::path::Path, access: Access) -> DispatchRequest {
    let mut r = crate::test_request(access);
    r.cwd = root.display().to_string();
    r.schema = Some(json!({"type": "object", "properties": {"items": {"type": "array"}}, "required": ["items"]}));
    r
}

fn def(server: &TestServer, anthropic: bool, max_turns: Option<u32>) -> AgentDef {
    let url = server.url();
    AgentDef {
        base_url: Some(if anthropic { url.trim_end_matches("/v1").to_string() } else { url }),
        input_usd_per_mtok: Some(1.0),
        output_usd_per_mtok: Some(2.0),
        max_turns,
        ..Default::default()
    }
}

fn openai(server: &TestServer, max_turns: Option<u32>) -> OpenAiAgent {
    OpenAiAgent::new("m", &def(server, false, max_turns)).expect("builds")
}

fn anthropic(server: &TestServer, max_turns: Option<u32>) -> AnthropicAgent {
    AnthropicAgent::new("m", &def(server, true, max_turns))
        .expect("builds")
        .with_fixed_key(Some("sk-ant-test-key-0000"))
}

fn chat_calls(calls: &[(&str, Value)]) -> Reply {
    let list: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("c{i}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    Reply::json(
        200,
        json!({"choices": [{"finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": list}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
    )
}

fn chat_answer(doc: Value) -> Reply {
    Reply::json(
        200,
        json!({"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": doc.to_string()}}],
        "usage": {"prompt_tokens": 200, "completion_tokens": 20}}),
    )
}

fn messages_calls(calls: &[(&str, Value)]) -> Reply {
    let blocks: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, input))| json!({"type": "tool_use", "id": format!("t{i}"), "name": name, "input": input}))
        .collect();
    Reply::json(
        200,
        json!({"type": "message", "role": "assistant", "content": blocks, "stop_reason": "tool_use",
        "usage": {"input_tokens": 100, "output_tokens": 10}}),
    )
}

fn messages_answer(doc: Value) -> Reply {
    Reply::json(
        200,
        json!({"type": "message", "role": "assistant", "stop_reason": "end_turn",
        "content": [{"type": "text", "text": doc.to_string()}], "usage": {"input_tokens": 200, "output_tokens": 20}}),
    )
}

async fn invoke(a: &dyn Agent, req: &DispatchRequest) -> Result<AgentReply, AgentError> {
    a.invoke(req, InvokeOptions { timeout: Duration::from_secs(20) }).await
}

fn parallel_reads() -> Vec<(&'static str, Value)> {
    vec![("search", json!({"pattern": "rollback"})), ("read_file", json!({"path": "src/jobs.rs", "start_line": 2}))]
}

/// Checks the final reply of a search-and-read dispatch: the answer, usage over both turns, the
/// transcript in the raw record.
fn assert_two_turns(reply: &AgentReply) {
    assert_eq!(reply.document, json!({"items": ["src/jobs.rs:2"]}));
    assert_eq!((reply.usage.input_tokens, reply.usage.output_tokens), (300, 30), "usage summed over the turns");
    assert!((reply.usage.cost_usd - (300.0 + 60.0) / 1e6).abs() < 1e-12, "{}", reply.usage.cost_usd);
    let raw: Value = serde_json::from_str(&reply.raw).expect("the record is JSON");
    assert_eq!(raw["turns"], 2);
    let calls = &raw["transcript"][0]["calls"];
    assert_eq!((calls[0]["name"].as_str(), calls[1]["name"].as_str()), (Some("search"), Some("read_file")));
    assert!(calls[0]["result"].as_str().unwrap_or("").contains("src/jobs.rs:2: fn e() { rollback() }"), "{raw}");
    assert!(raw["final"].is_object(), "{raw}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_runs_parallel_calls_and_answers_them_together() {
    let d = repo();
    let server =
        TestServer::start(vec![chat_calls(&parallel_reads()), chat_answer(json!({"items": ["src/jobs.rs:2"]}))]);
    let reply = invoke(&openai(&server, None), &request(d.path(), Access::ReadOnly)).await.expect("answers");
    assert_two_turns(&reply);
    let first = server.requests()[0].json();
    let offered: Vec<&str> =
        first["tools"].as_array().into_iter().flatten().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert_eq!(offered, ["read_file", "list_dir", "search"], "a read-only role's tools");
    let second = server.requests()[1].json();
    let msgs = second["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 5, "system, user, the assistant's calls, two tool results: {second:#}");
    assert_eq!(msgs[2]["tool_calls"].as_array().map(Vec::len), Some(2));
    assert_eq!(msgs[2]["content"], "", "a null content goes back as a string");
    assert_eq!((msgs[3]["role"].as_str(), msgs[3]["tool_call_id"].as_str()), (Some("tool"), Some("c0")));
    assert!(msgs[4]["content"].as_str().unwrap_or("").starts_with("2: fn e()"), "{}", msgs[4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_runs_parallel_calls_and_answers_them_together() {
    let d = repo();
    let server = TestServer::start(vec![
        messages_calls(&parallel_reads()),
        messages_answer(json!({"items": ["src/jobs.rs:2"]})),
    ]);
    let reply = invoke(&anthropic(&server, None), &request(d.path(), Access::ReadOnly)).await.expect("answers");
    assert_two_turns(&reply);
    let second = server.requests()[1].json();
    let msgs = second["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 3, "user, the assistant's calls, one user message of results: {second:#}");
    let results = msgs[2]["content"].as_array().expect("blocks");
    assert_eq!(results.len(), 2);
    assert_eq!((results[1]["type"].as_str(), results[1]["tool_use_id"].as_str()), (Some("tool_result"), Some("t1")));
    assert_eq!(results[1]["is_error"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_keeps_calling_tools_stops_at_the_turn_cap() {
    for anthropic_api in [false, true] {
        let d = repo();
        let call = [("list_dir", json!({}))];
        let replies = (0..3).map(|_| if anthropic_api { messages_calls(&call) } else { chat_calls(&call) }).collect();
        let server = TestServer::start(replies);
        let req = request(d.path(), Access::ReadOnly);
        let e = if anthropic_api {
            invoke(&anthropic(&server, Some(3)), &req).await
        } else {
            invoke(&openai(&server, Some(3)), &req).await
        }
        .expect_err("no answer");
        let AgentError::Failed { reason, usage, raw } = e else { panic!("a failure, not a malformed answer") };
        assert!(reason.contains("max_turns = 3") && reason.contains("list_dir"), "{reason}");
        assert_eq!(usage.input_tokens, 300, "every turn is charged");
        assert_eq!(server.requests().len(), 3, "no fourth turn");
        assert!(raw.contains("\"transcript\""), "{raw}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_role_asking_to_write_is_refused_at_the_tool_and_noted() {
    let d = repo();
    let write = [("write_file", json!({"path": "src/jobs.rs", "content": "gone"}))];
    let server = TestServer::start(vec![chat_calls(&write), chat_answer(json!({"items": []}))]);
    let req = request(d.path(), Access::ReadOnly);
    let a = openai(&server, None);
    let (reply, notes) = work_runtime::dispatch::collect_notes(invoke(&a, &req)).await;
    let reply = reply.expect("answers");
    assert_eq!(std::fs::read_to_string(d.path().join("src/jobs.rs")).expect("read").lines().count(), 2, "untouched");
    let raw: Value = serde_json::from_str(&reply.raw).expect("json");
    assert_eq!(raw["transcript"][0]["calls"][0]["refused"], true, "{raw}");
    assert!(raw["refused"][0].as_str().unwrap_or("").contains("read-only"), "{raw}");
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("`write_file` on `src/jobs.rs` refused") && notes[0].contains("read-only"), "{notes:?}");
    let result = &server.requests()[1].json()["messages"][3];
    assert!(result["content"].as_str().unwrap_or("").contains("refused"), "the model is told: {result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_turn_failing_is_charged_the_earlier_turns() {
    let d = repo();
    let server = TestServer::start(vec![
        chat_calls(&[("list_dir", json!({}))]),
        Reply::json(400, json!({"error": {"message": "bad"}})),
    ]);
    let e = invoke(&openai(&server, None), &request(d.path(), Access::ReadOnly)).await.expect_err("fails");
    let AgentError::Failed { reason, usage, .. } = e else { panic!("failed") };
    assert!(reason.starts_with("turn 2: HTTP 400: bad"), "{reason}");
    assert_eq!(usage.input_tokens, 100);
}
